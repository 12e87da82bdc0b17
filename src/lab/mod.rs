//! The labs, with no GPU and no screen: what a lab is ([`typed::TypedLab`],
//! which a lab implements; [`definition::Lab`], which the engine sees),
//! the labs themselves (one folder each), and what every lab shares: launch
//! geometry declared in a file, student source files, `.npy` tensors; and
//! what the three paged labs share, their cache layout and its misreadings
//! ([`paged`]).

pub mod args;
pub mod case_file;
pub mod counter_draw;
pub mod definition;
pub mod evidence;
pub mod experiment;
pub mod geometry;
pub mod golden;
pub mod npy;
pub mod paged;
pub mod redraw;
pub mod registry;
pub mod source;
pub mod sparse;
pub mod typed;
pub mod verdict;

/// Declares each lab's folder as a module and lists its value in
/// [`registry`]: a lab is its folder under `src/lab/` and one line here.
macro_rules! labs {
    ($($folder:ident::$lab:ident),* $(,)?) => {
        $(pub mod $folder;)*
        /// Every lab this build hosts, the default first.
        const LABS: &[definition::LabRef] = &[$($folder::$lab),*];
    };
}

labs! {
    flash_prefill::FLASH_PREFILL,
    paged_prefill::PAGED_PREFILL,
    paged_prefill_fp8::PAGED_PREFILL_FP8,
    paged_decode::PAGED_DECODE,
}
