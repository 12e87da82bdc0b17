//! The labs, with no GPU and no screen: what a lab is ([`definition::Lab`]),
//! the labs themselves (one folder each), and what every lab shares: launch
//! geometry declared in a file, student source files, `.npy` tensors.

pub mod case_file;
pub mod definition;
pub mod experiment;
pub mod flash_prefill;
pub mod geometry;
pub mod npy;
pub mod paged;
pub mod paged_prefill_fp8;
pub mod registry;
pub mod source;
pub mod verdict;
