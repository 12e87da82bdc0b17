//! The "attention-v1" contract the lab grades against: tensor shapes, the
//! entry point's signature, its argument table and the element tolerance.
//!
//! Everything here is plain data so that the oracle, the case generator and
//! the lab's [`super::FlashPrefill`] value agree on one definition.

use crate::grade::compare::{OutputShape, Tolerance};
use crate::grade::roofline::Work;
use crate::lab::definition::Problem;
use crate::lab::typed::Arg;

/// Query heads.
pub const HQ: usize = 32;
/// Key/value heads (grouped-query attention).
pub const HKV: usize = 8;
/// Head dimension.
pub const DH: usize = 64;
/// Query heads that share one KV head: query head `h` reads KV head `h / GROUP`.
pub const GROUP: usize = HQ / HKV;
/// Softmax scale, exactly `1 / sqrt(DH)`.
pub const SCALE: f64 = 0.125;

/// The symbol every student kernel must export.
pub const ENTRY_POINT: &str = "attention_prefill";
/// The C signature of [`ENTRY_POINT`], shown in error messages.
pub const ENTRY_SIGNATURE: &str = "extern \"C\" __global__ void attention_prefill(const float* q, const float* kCache, const float* vCache, float* out, int chunkLen, int prefixLen)";

/// The entry point's parameters in [`ENTRY_SIGNATURE`]'s order, each read from [`Inputs`].
pub const ARGS: &[Arg<Inputs>] = &[
    Arg::f32_input("q", |i| &i.q),
    Arg::f32_input("kCache", |i| &i.k),
    Arg::f32_input("vCache", |i| &i.v),
    Arg::f32_output("out"),
    // Both lengths are at most 65 536 (cases and timing shapes are bounded there).
    Arg::int("chunkLen", |i| i.shape.chunk_len as i32),
    Arg::int("prefixLen", |i| i.shape.prefix_len as i32),
];

/// Everything one launch reads.
#[derive(Debug, Clone, PartialEq)]
pub struct Inputs {
    pub shape: Shape,
    /// `[chunkLen][HQ][DH]`.
    pub q: Vec<f32>,
    /// `[prefixLen + chunkLen][HKV][DH]`.
    pub k: Vec<f32>,
    /// `[prefixLen + chunkLen][HKV][DH]`.
    pub v: Vec<f32>,
}

/// The element tolerance: `1e-4 + 1e-3 * |reference|`.
pub const TOLERANCE: Tolerance = Tolerance {
    abs: 1e-4,
    rel: 1e-3,
};

/// The shape the lab times at: a chunk of 2048 tokens after a 2048-token prefix.
pub const TIMING_SHAPE: Shape = Shape {
    chunk_len: 2048,
    prefix_len: 2048,
};

/// One problem size: `chunk_len` new tokens after `prefix_len` cached ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Shape {
    pub chunk_len: usize,
    pub prefix_len: usize,
}

impl Shape {
    /// The engine's view of this size.
    pub fn problem(self) -> Problem {
        Problem {
            label: format!("{}x{}", self.chunk_len, self.prefix_len),
            detail: format!("C = {}, P = {}", self.chunk_len, self.prefix_len),
            row_hint: format!("row r sees keys 0..{}+r", self.prefix_len),
            output: OutputShape {
                rows: self.chunk_len,
                heads: HQ,
                dim: DH,
            },
            head_group: GROUP,
            sequence_starts: vec![0],
            max_sequence_rows: self.chunk_len,
            work: Work {
                flops: self.flops(),
                compulsory_bytes: self.compulsory_bytes(),
                output_bytes: (self.q_elems() * std::mem::size_of::<f32>()) as u64,
                tensor_roof: None,
            },
        }
    }

    /// Keys visible to the last query row (the whole sequence).
    pub fn seq_len(self) -> usize {
        self.chunk_len + self.prefix_len
    }
    /// Elements of `q` (and of `out`).
    pub fn q_elems(self) -> usize {
        self.chunk_len * HQ * DH
    }
    /// Elements of `kCache` (and of `vCache`).
    pub fn kv_elems(self) -> usize {
        self.seq_len() * HKV * DH
    }
    /// Index of `q[row][head][dim]` (also of `out`).
    pub fn q_index(row: usize, head: usize, dim: usize) -> usize {
        (row * HQ + head) * DH + dim
    }
    /// Index of `kCache[pos][kv_head][dim]` (also of `vCache`).
    pub fn kv_index(pos: usize, kv_head: usize, dim: usize) -> usize {
        (pos * HKV + kv_head) * DH + dim
    }
    /// Visible (query row, key) pairs for one head: causal at offset `prefix_len`.
    pub fn visible_pairs_per_head(self) -> u64 {
        let c = self.chunk_len as u64;
        let p = self.prefix_len as u64;
        c * p + c * (c + 1) / 2
    }
    /// Floating-point operations of exact attention: `q.k` and `p.v`, 2*DH each per pair.
    pub fn flops(self) -> f64 {
        self.visible_pairs_per_head() as f64 * HQ as f64 * (4 * DH) as f64
    }
    /// Fewest DRAM bytes any kernel must move: every input read once, the output written once.
    pub fn compulsory_bytes(self) -> u64 {
        ((2 * self.q_elems() + 2 * self.kv_elems()) * std::mem::size_of::<f32>()) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timing_shape_work_matches_the_lab_text() {
        assert_eq!(TIMING_SHAPE.visible_pairs_per_head(), 6_292_480);
        assert_eq!(
            TIMING_SHAPE.visible_pairs_per_head() * HQ as u64,
            201_359_360
        );
        assert!((TIMING_SHAPE.flops() / 1e9 - 51.54).abs() < 0.01);
        assert_eq!(TIMING_SHAPE.compulsory_bytes(), 48 << 20);
    }

    #[test]
    fn tolerance_grows_with_magnitude() {
        assert_eq!(TOLERANCE.allowed(0.0), 1e-4);
        assert!((TOLERANCE.allowed(-2.0) - (1e-4 + 2.0 * 1e-3)).abs() < 1e-15);
    }

    #[test]
    fn a_stored_shape_of_the_first_lab_reads_back_as_its_problem() {
        let old: Problem =
            serde_json::from_str(r#"{"chunk_len": 64, "prefix_len": 1000}"#).expect("legacy");
        assert_eq!(old.label, "64x1000");
        let again: Problem =
            serde_json::from_str(&serde_json::to_string(&old).expect("json")).expect("current");
        assert_eq!(again, old);
    }
}
