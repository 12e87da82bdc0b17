//! The "paged-prefill-fp8-v1" contract: bf16 queries and an FP8 KV cache,
//! head dim 128, K x-packed with X = 16: the paged family's batch and cache
//! layout at this head dimension and packing ([`INSTANCE`]).

pub use crate::lab::paged::batch::{Batch, PrefillTensors};
use crate::lab::paged::bf16;
pub use crate::lab::paged::fp8::{KvFormat, FP8_NAN};
use crate::lab::paged::layout::CacheLayout;
pub use crate::lab::paged::layout::{alibi_slope, standard_alibi_slopes, BLOCK, GROUP, HKV, HQ};
use crate::lab::paged::recipe::{CacheType, PrefillContract};
use crate::lab::typed::Arg;

/// The contract's name, as a submission declares it.
pub const CONTRACT: &str = "paged-prefill-fp8-v1";
/// The lab's name (and its kernels' folder).
pub const NAME: &str = "paged-prefill-fp8";
/// Head dimension (Llama-3-8B's).
pub const DH: usize = 128;
/// FP8 bytes packed together along the head dimension of the K cache (16 bytes).
pub const X: usize = 16;
/// The paged cache at this head dimension and packing.
pub const LAYOUT: CacheLayout = CacheLayout::new(DH, X);
/// This lab as an instance of the paged prefill family: an FP8 cache.
pub const INSTANCE: PrefillContract = PrefillContract {
    layout: LAYOUT,
    cache: CacheType::Fp8,
};
/// The score scale: the float nearest `1/sqrt(128)`, `0x1.6a09e6p-4`. Kernels
/// and the oracle use exactly this value.
pub const SCALE_F32: f32 = f32::from_bits(0x3DB5_04F3);
/// [`SCALE_F32`] as the oracle multiplies by it.
pub const SCALE: f64 = SCALE_F32 as f64;
/// Absolute part of the tolerance.
pub const ABS_TOL: f64 = 4e-3;
/// Relative part of the tolerance.
pub const REL_TOL: f64 = 2e-2;

/// The kernel's name.
pub const ENTRY_POINT: &str = "paged_prefill_fp8";
/// The kernel's signature, verbatim from the contract.
pub const ENTRY_SIGNATURE: &str = "extern \"C\" __global__ void paged_prefill_fp8(
    const __nv_bfloat16* q, const __nv_bfloat16* kNew, const __nv_bfloat16* vNew,
    const uint8_t* kCache, const uint8_t* vCache,
    const int* blockTable, const int* qStart, const int* seqLen,
    int numSeqs, int maxBlocksPerSeq, int slidingWindow, const float* alibiSlopes,
    float kScale, float vScale, int kvFormat, __nv_bfloat16* out)";

/// How far `out` may be from the reference `r` of a row whose visible
/// values reach `value_scale` in magnitude: `4e-3 max(1, value_scale) + 2e-2 |r|`.
///
/// The absolute part follows the values because a kernel that rounds its
/// probabilities to bf16 (as vLLM's does) errs by up to `2^-9 max |v|` in a
/// row whatever that row's result: with E4M3 values near 448 x vScale in the
/// cache the contract's plain `4e-3` is missed 70 to 900 times by the seed's
/// own arithmetic (measured on this lab's wide cases, docs/labs/paged-prefill-fp8.md),
/// while on values of magnitude 1 the two agree.
pub fn tolerance(reference: f64, value_scale: f64) -> f64 {
    ABS_TOL * value_scale.max(1.0) + REL_TOL * reference.abs()
}

/// Whether one output element passes: finite and within [`tolerance`].
pub fn passes(out: f64, reference: f64, value_scale: f64) -> bool {
    out.is_finite() && (out - reference).abs() <= tolerance(reference, value_scale)
}

/// How many tolerances an element misses by (infinite for NaN or Inf).
pub fn miss_factor(out: f64, reference: f64, value_scale: f64) -> f64 {
    match out.is_finite() {
        true => (out - reference).abs() / tolerance(reference, value_scale),
        false => f64::INFINITY,
    }
}

/// Everything a launch reads: the paged tensors, their bf16 ones holding f32
/// values that are exactly bf16 ([`bf16::is_exact`]) and their caches FP8
/// bytes of `format`, read with the per-tensor `k_scale` and `v_scale`.
#[derive(Debug, Clone, PartialEq)]
pub struct Inputs {
    pub tensors: PrefillTensors<f32, u8>,
    pub format: KvFormat,
    pub k_scale: f32,
    pub v_scale: f32,
}

impl Inputs {
    /// The cached key at context position `pos` of `seq`, dequantised exactly.
    pub fn cached_key(&self, seq: usize, pos: usize, kv_head: usize, dim: usize) -> f64 {
        let byte = self.tensors.cached_key(seq, pos, kv_head, dim);
        f64::from(self.format.decode(byte)) * f64::from(self.k_scale)
    }

    /// The cached value at context position `pos` of `seq`, dequantised exactly.
    pub fn cached_value(&self, seq: usize, pos: usize, kv_head: usize, dim: usize) -> f64 {
        let byte = self.tensors.cached_value(seq, pos, kv_head, dim);
        f64::from(self.format.decode(byte)) * f64::from(self.v_scale)
    }

    /// These inputs with each unused cache slot's NaN byte replaced by a
    /// finite tag of its own ([`crate::lab::paged::tags`]).
    pub fn sentinels_tagged(&self) -> Inputs {
        use crate::lab::paged::tags;
        let is_nan = |byte| byte == FP8_NAN;
        let tensors = &self.tensors;
        Inputs {
            tensors: PrefillTensors {
                k_cache: tags::tagged(&tensors.k_cache, is_nan, tags::fp8_key_tag),
                v_cache: tags::tagged(&tensors.v_cache, is_nan, tags::fp8_value_tag),
                ..tensors.clone()
            },
            ..self.clone()
        }
    }
}

/// What one launch is given: the inputs, with the bf16 tensors also as the
/// bits the kernel reads (the oracle and the models keep the f32 values).
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchInputs {
    pub inputs: Inputs,
    pub q_bits: Vec<u16>,
    pub k_new_bits: Vec<u16>,
    pub v_new_bits: Vec<u16>,
}

impl LaunchInputs {
    /// The launch of `inputs`, whose bf16 tensors hold exact bf16 values.
    pub fn new(inputs: Inputs) -> LaunchInputs {
        let bits = |values: &[f32]| values.iter().copied().map(bf16::bits).collect();
        LaunchInputs {
            q_bits: bits(&inputs.tensors.q),
            k_new_bits: bits(&inputs.tensors.k_new),
            v_new_bits: bits(&inputs.tensors.v_new),
            inputs,
        }
    }
}

/// The entry point's parameters in [`ENTRY_SIGNATURE`]'s order.
pub const ARGS: &[Arg<LaunchInputs>] = &[
    Arg::bf16_input("q", |l| &l.q_bits),
    Arg::bf16_input("kNew", |l| &l.k_new_bits),
    Arg::bf16_input("vNew", |l| &l.v_new_bits),
    Arg::placed_u8_input("kCache", |l| {
        let tensors = &l.inputs.tensors;
        (&tensors.k_cache, tensors.batch.placed_blocks())
    }),
    Arg::placed_u8_input("vCache", |l| {
        let tensors = &l.inputs.tensors;
        (&tensors.v_cache, tensors.batch.placed_blocks())
    }),
    Arg::i32_input("blockTable", |l| l.inputs.tensors.batch.kernel_table()),
    Arg::i32_input("qStart", |l| &l.inputs.tensors.batch.q_start),
    Arg::i32_input("seqLen", |l| &l.inputs.tensors.batch.seq_len),
    // Both fit an int: checked when the case is made (`Batch::check_int_arguments`).
    Arg::int("numSeqs", |l| l.inputs.tensors.batch.num_seqs() as i32),
    Arg::int("maxBlocksPerSeq", |l| {
        l.inputs.tensors.batch.max_blocks_per_seq as i32
    }),
    Arg::int("slidingWindow", |l| l.inputs.tensors.batch.sliding_window),
    Arg::optional_f32_input("alibiSlopes", |l| l.inputs.tensors.alibi_slopes.as_deref()),
    Arg::float("kScale", |l| l.inputs.k_scale),
    Arg::float("vScale", |l| l.inputs.v_scale),
    Arg::int("kvFormat", |l| l.inputs.format.code()),
    Arg::bf16_output("out"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    // The literal is the contract's exact decimal expansion of the float.
    #[allow(clippy::excessive_precision)]
    fn the_scale_is_the_float_nearest_one_over_sqrt_128() {
        assert_eq!(SCALE, 0.088388346135616302490234375);
        let exact = 1.0 / 128f64.sqrt();
        let below = f64::from(f32::from_bits(SCALE_F32.to_bits() - 1));
        let above = f64::from(f32::from_bits(SCALE_F32.to_bits() + 1));
        assert!((SCALE - exact).abs() < (below - exact).abs());
        assert!((SCALE - exact).abs() < (above - exact).abs());
    }

    #[test]
    fn cache_indices_follow_the_contract() {
        // Literally, for one element (the layout's tiling is tested where it is shared).
        let (b, g, d, o) = (3, 5, 77, 11);
        assert_eq!(
            LAYOUT.k_cache_index(b, g, d, o),
            (((b * 8 + g) * 8 + d / 16) * 16 + o) * 16 + d % 16
        );
        assert_eq!(
            LAYOUT.v_cache_index(b, g, d, o),
            ((b * 8 + g) * 128 + d) * 16 + o
        );
    }

    #[test]
    fn tolerance_miss_factor_and_signature() {
        assert!(passes(1.0, 1.0 + 0.0239, 0.5) && !passes(1.0, 1.0 + 0.0245, 1.0));
        assert!(!passes(f64::NAN, 0.0, 1.0) && !passes(f64::INFINITY, 1.0, 1.0));
        assert!((miss_factor(0.04, 0.0, 1.0) - 10.0).abs() < 1e-12);
        // Rows that see values of 896 get 896 times the absolute part.
        assert!(passes(0.0, 3.5, 896.0) && !passes(0.0, 3.7, 896.0));
        assert_eq!(miss_factor(f64::NAN, 0.0, 1.0), f64::INFINITY);
        assert!(ENTRY_SIGNATURE.contains(&format!("void {ENTRY_POINT}(")));
        assert_eq!(ENTRY_SIGNATURE.matches("__nv_bfloat16*").count(), 4);
        assert_eq!(ENTRY_SIGNATURE.matches("const uint8_t*").count(), 2);
    }
}
