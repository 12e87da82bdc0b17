//! The "paged-prefill-v1" contract: vLLM's paged prefix prefill in fp32.
//!
//! The paged layout is where this lab's bugs live, so it is spelled out
//! once, in the layout the paged labs share ([`LAYOUT`], from
//! [`crate::lab::paged::layout`]), and the types here index through it
//! ([`Batch::k_cache_index`], [`Batch::v_cache_index`],
//! [`Batch::sequence_of_row`]); everything else (oracle, generator,
//! loaders, bug models) goes through them. The one exception is the bug
//! models, which must index *wrongly* on purpose; they do so next to the
//! correct index so the difference reads as one line. This lab deliberately
//! shares no code with the first lab's contract: the two contracts evolve
//! separately.

use crate::lab::paged::layout::{table_index, CacheLayout};
pub use crate::lab::paged::layout::{alibi_slope, standard_alibi_slopes, BLOCK, GROUP, HKV, HQ};
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
    Arg::f32_input("kCache", |i| &i.k_cache),
    Arg::f32_input("vCache", |i| &i.v_cache),
    Arg::i32_input("blockTable", |i| &i.batch.block_table),
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

/// The shape of one launch: which sequences, where their tokens sit, which
/// blocks hold their contexts.
///
/// `context` and `new` are the natural description; `q_start`, `seq_len`
/// and `block_table` are the int32 arrays the kernel receives. Both are
/// kept so that a loader can build a batch from the arrays and a generator
/// from the lengths, and they always agree (see [`Batch::from_lengths`] and
/// [`tensors`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    /// Context (cached) length of each sequence.
    pub context: Vec<usize>,
    /// New-token count of each sequence (at least 1).
    pub new: Vec<usize>,
    /// 0 or negative: off; otherwise a query at `i` sees key `j` only if `i - j < W`.
    pub sliding_window: i32,
    /// Whether the launch passes ALiBi slopes.
    pub alibi: bool,
    pub max_blocks_per_seq: usize,
    pub num_blocks: usize,
    /// `[numSeqs][maxBlocksPerSeq]` physical block ids.
    pub block_table: Vec<i32>,
    /// `[numSeqs + 1]` offsets of each sequence's rows in `q`.
    pub q_start: Vec<i32>,
    /// `[numSeqs]` context + new of each sequence.
    pub seq_len: Vec<i32>,
}

impl Batch {
    /// A batch with `q_start` and `seq_len` derived from the lengths and an
    /// all-zero block table of the given size (the caller fills it).
    pub fn from_lengths(
        context: Vec<usize>,
        new: Vec<usize>,
        sliding_window: i32,
        alibi: bool,
        max_blocks_per_seq: usize,
        num_blocks: usize,
    ) -> Batch {
        assert_eq!(context.len(), new.len(), "one context per sequence");
        let mut q_start = vec![0i32];
        for &n in &new {
            q_start.push(q_start.last().unwrap() + n as i32);
        }
        let seq_len = context
            .iter()
            .zip(&new)
            .map(|(c, n)| (c + n) as i32)
            .collect();
        Batch {
            block_table: vec![0; context.len() * max_blocks_per_seq],
            context,
            new,
            sliding_window,
            alibi,
            max_blocks_per_seq,
            num_blocks,
            q_start,
            seq_len,
        }
    }

    /// That the sizes passed as `int` (`numSeqs`, `maxBlocksPerSeq`) fit one.
    pub fn check_int_arguments(&self, case: &str) -> Result<(), crate::lab::definition::CaseError> {
        for n in [self.num_seqs(), self.max_blocks_per_seq] {
            if i32::try_from(n).is_err() {
                return Err(crate::lab::definition::CaseError::Invalid {
                    case: case.to_owned(),
                    message: format!("{n} does not fit the kernel's int argument"),
                });
            }
        }
        Ok(())
    }

    pub fn num_seqs(&self) -> usize {
        self.context.len()
    }

    /// `T`: new tokens of all sequences together (rows of `q` and `out`).
    pub fn total_new(&self) -> usize {
        self.new.iter().sum()
    }

    /// Row of `q` where sequence `seq`'s new tokens begin.
    pub fn start(&self, seq: usize) -> usize {
        self.q_start[seq] as usize
    }

    /// Context + new tokens of sequence `seq`.
    pub fn len_of(&self, seq: usize) -> usize {
        self.context[seq] + self.new[seq]
    }

    /// The window, when it is on.
    pub fn window(&self) -> Option<usize> {
        (self.sliding_window > 0).then_some(self.sliding_window as usize)
    }

    /// Whether a query at position `i` sees the key at position `j`.
    pub fn sees(&self, i: usize, j: usize) -> bool {
        j <= i && self.window().is_none_or(|w| i - j < w)
    }

    /// The first position a query at `i` sees (it sees every key from there to `i`).
    pub fn first_visible(&self, i: usize) -> usize {
        self.window().map_or(0, |w| (i + 1).saturating_sub(w))
    }

    /// Physical block holding position `pos` of sequence `seq`'s context.
    pub fn block_of(&self, seq: usize, pos: usize) -> usize {
        self.block_table[table_index(seq, self.max_blocks_per_seq, pos)] as usize
    }

    /// Blocks a context of sequence `seq` occupies.
    pub fn context_blocks(&self, seq: usize) -> usize {
        self.context[seq].div_ceil(BLOCK)
    }

    /// The sequence a row of `q` belongs to, and the position of its token.
    ///
    /// # Panics
    /// When `row` is not below `T`.
    pub fn sequence_of_row(&self, row: usize) -> (usize, usize) {
        assert!(row < self.total_new(), "row {row} past T");
        // The last sequence whose start is at or before the row: every
        // sequence has at least one token, so starts are strictly increasing.
        let seq = self.q_start[1..].partition_point(|&start| start as usize <= row);
        (seq, self.context[seq] + row - self.start(seq))
    }

    /// Index into `q` or `out` (`[T][32][64]`).
    pub fn q_index(row: usize, head: usize, dim: usize) -> usize {
        LAYOUT.head_index(row, head, dim)
    }

    /// Index into `kNew` or `vNew` (`[T][8][64]`).
    pub fn kv_new_index(row: usize, kv_head: usize, dim: usize) -> usize {
        LAYOUT.kv_index(row, kv_head, dim)
    }

    /// Index into the x-packed `kCache` (`[numBlocks][8][64/X][B][X]`).
    pub fn k_cache_index(block: usize, kv_head: usize, dim: usize, slot: usize) -> usize {
        LAYOUT.k_cache_index(block, kv_head, dim, slot)
    }

    /// Index into `vCache` (`[numBlocks][8][64][B]`).
    pub fn v_cache_index(block: usize, kv_head: usize, dim: usize, slot: usize) -> usize {
        LAYOUT.v_cache_index(block, kv_head, dim, slot)
    }

    /// Elements of `q` and `out`.
    pub fn q_elems(&self) -> usize {
        self.total_new() * HQ * DH
    }

    /// Elements of `kNew` and `vNew`.
    pub fn kv_new_elems(&self) -> usize {
        self.total_new() * HKV * DH
    }

    /// Elements of `kCache` and `vCache`.
    pub fn cache_elems(&self) -> usize {
        self.num_blocks * LAYOUT.block_elems()
    }

    /// Keys a query at position `i` of a sequence sees.
    fn visible_keys(&self, i: usize) -> usize {
        i + 1 - self.first_visible(i)
    }

    /// (row, key) pairs the softmax covers, per query head.
    pub fn visible_pairs_per_head(&self) -> u64 {
        (0..self.num_seqs())
            .flat_map(|s| (0..self.new[s]).map(move |t| (s, t)))
            .map(|(s, t)| self.visible_keys(self.context[s] + t) as u64)
            .sum()
    }

    /// Useful floating-point work: two `DH`-long dot products (QK and PV),
    /// a multiply and an add each, per visible pair and head.
    pub fn flops(&self) -> f64 {
        self.visible_pairs_per_head() as f64 * HQ as f64 * DH as f64 * 4.0
    }

    /// Bytes any kernel must move at least once: `q`, `kNew`, `vNew`, the
    /// K and V blocks of every context (whole blocks: the cache is read by
    /// block), and `out`.
    pub fn compulsory_bytes(&self) -> u64 {
        let floats = 2 * self.q_elems()
            + 2 * self.kv_new_elems()
            + 2 * self.total_context_blocks() * LAYOUT.block_elems();
        floats as u64 * 4
    }

    /// Cache blocks the contexts occupy, counted per sequence.
    pub fn total_context_blocks(&self) -> usize {
        (0..self.num_seqs()).map(|s| self.context_blocks(s)).sum()
    }

    /// Whether some query row sees at least one cached key.
    pub fn reads_cache(&self) -> bool {
        (0..self.num_seqs()).any(|s| {
            let ctx = self.context[s];
            ctx > 0 && (0..self.new[s]).any(|t| self.first_visible(ctx + t) < ctx)
        })
    }

    /// Whether some query row sees more than one key (so its softmax
    /// denominator is not 1).
    pub fn has_multi_key_rows(&self) -> bool {
        (0..self.num_seqs())
            .any(|s| (0..self.new[s]).any(|t| self.visible_keys(self.context[s] + t) > 1))
    }
}

/// Everything a launch reads.
#[derive(Debug, Clone, PartialEq)]
pub struct Inputs {
    pub batch: Batch,
    /// `[T][32][64]`.
    pub q: Vec<f32>,
    /// `[T][8][64]`.
    pub k_new: Vec<f32>,
    /// `[T][8][64]`.
    pub v_new: Vec<f32>,
    /// `[numBlocks][8][64/X][B][X]`.
    pub k_cache: Vec<f32>,
    /// `[numBlocks][8][64][B]`.
    pub v_cache: Vec<f32>,
    /// `[32]`, present exactly when `batch.alibi`.
    pub alibi_slopes: Option<Vec<f32>>,
}

impl Inputs {
    /// The key at context position `pos` of sequence `seq`, KV head `g`, dimension `d`.
    pub fn cached_key(&self, seq: usize, pos: usize, kv_head: usize, dim: usize) -> f32 {
        let block = self.batch.block_of(seq, pos);
        self.k_cache[Batch::k_cache_index(block, kv_head, dim, pos % BLOCK)]
    }

    /// The value at context position `pos` of sequence `seq`.
    pub fn cached_value(&self, seq: usize, pos: usize, kv_head: usize, dim: usize) -> f32 {
        let block = self.batch.block_of(seq, pos);
        self.v_cache[Batch::v_cache_index(block, kv_head, dim, pos % BLOCK)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch() -> Batch {
        Batch::from_lengths(vec![0, 17, 5], vec![3, 1, 4], 0, false, 2, 6)
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
            Batch::k_cache_index(b, g, d, o),
            (((b * 8 + g) * (64 / 4) + d / 4) * 16 + o) * 4 + d % 4
        );
        assert_eq!(
            Batch::v_cache_index(b, g, d, o),
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
