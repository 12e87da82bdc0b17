//! The "paged-prefill-v1" contract: vLLM's paged prefix prefill in fp32,
//! head dim 64, K x-packed with X = 4: the paged family's batch and cache
//! layout at this head dimension and packing ([`INSTANCE`]).
//!
//! The paged layout is where this lab's bugs live, so it is spelled out
//! once, in the layout the paged labs share ([`crate::lab::paged::layout`]),
//! and everything (oracle, generator, loaders) indexes through it. The one
//! exception is the bug models, which must index *wrongly* on purpose; they
//! do so next to the correct index so the difference reads as one line.

pub use crate::lab::paged::batch::{Batch, PrefillTensors};
use crate::lab::paged::layout::CacheLayout;
pub use crate::lab::paged::layout::{alibi_slope, standard_alibi_slopes, BLOCK, GROUP, HKV, HQ};
use crate::lab::paged::recipe::{CacheType, PrefillContract};
use crate::lab::typed::Arg;

/// The contract's name, as a submission declares it.
pub const CONTRACT: &str = "paged-prefill-v1";
/// Head dimension.
pub const DH: usize = 64;
/// Score scale, exactly `1/sqrt(DH)` (a power of two, so exact in any float).
pub const SCALE: f64 = 0.125;
/// Floats packed together along the head dimension of the K cache (16 bytes of fp32).
pub const X: usize = 4;
/// The paged cache at this head dimension and packing.
pub const LAYOUT: CacheLayout = CacheLayout::new(DH, X);
/// This lab as an instance of the paged prefill family: an fp32 cache.
pub const INSTANCE: PrefillContract = PrefillContract {
    layout: LAYOUT,
    cache: CacheType::F32,
};
/// Absolute part of the tolerance.
pub const ABS_TOL: f64 = 1e-4;
/// Relative part of the tolerance.
pub const REL_TOL: f64 = 1e-3;

/// The kernel's name.
pub const ENTRY_POINT: &str = "paged_prefill";
/// The kernel's signature, verbatim from the contract.
pub const ENTRY_SIGNATURE: &str = "extern \"C\" __global__ void paged_prefill(
    const float* q, const float* kNew, const float* vNew,
    const float* kCache, const float* vCache,
    const int* blockTable, const int* qStart, const int* seqLen,
    int numSeqs, int maxBlocksPerSeq, int slidingWindow,
    const float* alibiSlopes, float* out)";

/// The entry point's parameters in [`ENTRY_SIGNATURE`]'s order, each read from [`Inputs`].
pub const ARGS: &[Arg<Inputs>] = &[
    Arg::f32_input("q", |i| &i.q),
    Arg::f32_input("kNew", |i| &i.k_new),
    Arg::f32_input("vNew", |i| &i.v_new),
    Arg::placed_f32_input("kCache", |i| (&i.k_cache, i.batch.placed_blocks())),
    Arg::placed_f32_input("vCache", |i| (&i.v_cache, i.batch.placed_blocks())),
    Arg::i32_input("blockTable", |i| i.batch.kernel_table()),
    Arg::i32_input("qStart", |i| &i.batch.q_start),
    Arg::i32_input("seqLen", |i| &i.batch.seq_len),
    // Both fit an int: checked when the case is made (`Batch::check_int_arguments`).
    Arg::int("numSeqs", |i| i.batch.num_seqs() as i32),
    Arg::int("maxBlocksPerSeq", |i| i.batch.max_blocks_per_seq as i32),
    Arg::int("slidingWindow", |i| i.batch.sliding_window),
    Arg::optional_f32_input("alibiSlopes", |i| i.alibi_slopes.as_deref()),
    Arg::f32_output("out"),
];

/// Value written into every cached K slot that no sequence's context
/// covers (slots past a context's end, spare blocks). It is finite, so a
/// kernel that reads it computes a wrong number rather than a NaN that
/// would hide *what* it read, and large enough to move any softmax.
pub const SENTINEL_K: f32 = 2.5;
/// The V counterpart of [`SENTINEL_K`]: far outside the `[-1, 1)` range of
/// real values, so an output pulled towards it is recognisably a stray read.
pub const SENTINEL_V: f32 = 40.0;

/// How far `out` may be from the reference `r`: `1e-4 + 1e-3 |r|`.
pub fn tolerance(reference: f64) -> f64 {
    ABS_TOL + REL_TOL * reference.abs()
}

/// Whether one output element passes: finite and within [`tolerance`].
pub fn passes(out: f64, reference: f64) -> bool {
    out.is_finite() && (out - reference).abs() <= tolerance(reference)
}

/// Everything a launch reads: fp32 tensors and an fp32 cache.
pub type Inputs = PrefillTensors<f32, f32>;

#[cfg(test)]
mod tests {
    use super::*;

    fn batch() -> Batch {
        Batch::from_lengths(LAYOUT, vec![0, 17, 5], vec![3, 1, 4], 0, false, 2, 6)
    }

    #[test]
    fn rows_map_to_sequences_and_positions() {
        let b = batch();
        assert_eq!(b.q_start, vec![0, 3, 4, 8]);
        assert_eq!(b.seq_len, vec![3, 18, 9]);
        let got: Vec<_> = (0..8).map(|r| b.sequence_of_row(r)).collect();
        assert_eq!(
            got,
            vec![
                (0, 0),
                (0, 1),
                (0, 2),
                (1, 17),
                (2, 5),
                (2, 6),
                (2, 7),
                (2, 8)
            ]
        );
    }

    #[test]
    fn cache_indices_follow_the_contract() {
        // The contract's formulas written out literally, for one element
        // (the layout's tiling is tested where it is shared).
        let (b, g, d, o) = (3, 5, 37, 11);
        assert_eq!(
            LAYOUT.k_cache_index(b, g, d, o),
            (((b * 8 + g) * (64 / 4) + d / 4) * 16 + o) * 4 + d % 4
        );
        assert_eq!(
            LAYOUT.v_cache_index(b, g, d, o),
            ((b * 8 + g) * 64 + d) * 16 + o
        );
    }

    #[test]
    fn window_visibility_is_strict() {
        let mut b = batch();
        assert!(b.sees(10, 0) && b.sees(10, 10) && !b.sees(10, 11));
        b.sliding_window = 3;
        assert!(b.sees(10, 8) && !b.sees(10, 7));
        assert_eq!(b.first_visible(10), 8);
        assert_eq!(b.first_visible(1), 0);
        b.sliding_window = -5;
        assert!(b.sees(10, 0));
    }

    #[test]
    fn tolerance() {
        assert!(passes(1.0, 1.0 + 1.1e-3 - 1e-9));
        assert!(!passes(1.0, 1.0 + 1.2e-3));
        assert!(!passes(f64::NAN, 0.0) && !passes(f64::INFINITY, 1e300));
    }

    #[test]
    fn the_signature_matches_the_entry_point() {
        assert!(ENTRY_SIGNATURE.contains(&format!("void {ENTRY_POINT}(")));
        assert_eq!(ENTRY_SIGNATURE.matches("const float*").count(), 6);
        assert_eq!(ENTRY_SIGNATURE.matches("const int*").count(), 3);
    }

    #[test]
    fn cache_reading_and_multi_key_rows() {
        let mut b = batch();
        assert!(b.reads_cache() && b.has_multi_key_rows());
        b.sliding_window = 1;
        assert!(!b.reads_cache() && !b.has_multi_key_rows());
        b.sliding_window = 2;
        // Sequence 1's only row (position 17) sees key 16, which is cached.
        assert!(b.reads_cache() && b.has_multi_key_rows());
    }
}
