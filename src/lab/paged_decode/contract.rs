//! The "paged-decode-v1" contract: shapes, the paged layout's indices,
//! tolerance, the partition rule, the entry point and its argument table.
//!
//! Decode is bandwidth-bound: every cached K/V byte is used by 4 query
//! heads for 2 flops each, so the lab is graded on bytes as much as on time
//! ([`Batch::compulsory_bytes`] is what achieved bandwidth is computed
//! from). The split-K kernels it invites (a sequence cut into partitions
//! whose partial softmaxes are combined) follow one partition rule, fixed
//! here ([`partition_len`]), which the reference and the models of the two
//! combine bugs share. The cache is the paged labs' shared layout
//! ([`LAYOUT`], from [`crate::lab::paged::layout`]).

pub use crate::lab::paged::layout::{alibi_slope, BLOCK, GROUP, HKV, HQ};
use crate::lab::paged::layout::{table_index, CacheLayout};
use crate::lab::typed::Arg;

/// The contract's name, as a submission declares it.
pub const CONTRACT: &str = "paged-decode-v1";
/// The lab's name, as `@flashprof lab=` names it and its kernels' folder is called.
pub const LAB_NAME: &str = "paged-decode";
/// Head dimension.
pub const DH: usize = 64;
/// Score scale, exactly `1/sqrt(DH)` (a power of two, so exact in any float).
pub const SCALE: f64 = 0.125;
/// Floats packed together along the head dimension of the K cache (16 bytes of fp32).
pub const X: usize = 4;
/// The paged cache at this head dimension and packing.
pub const LAYOUT: CacheLayout = CacheLayout::new(DH, X);
/// Most partitions a launch may split a sequence into (grid z, `splits=N`).
pub const MAX_SPLITS: usize = 16;
/// Floats of one workspace slot: 64 partial outputs, then the max, then the sum.
pub const SLOT_FLOATS: usize = DH + 2;
/// The shortest partition the lab's split rule makes (vLLM v2's partition size).
pub const MIN_PARTITION: usize = 512;
/// Absolute part of the tolerance.
pub const ABS_TOL: f64 = 1e-4;
/// Relative part of the tolerance.
pub const REL_TOL: f64 = 1e-3;
/// Default threads per block.
pub const DEFAULT_THREADS: u32 = 128;

/// The kernel's name.
pub const ENTRY_POINT: &str = "paged_decode";
/// The kernel's signature, verbatim from the contract.
pub const ENTRY_SIGNATURE: &str = "extern \"C\" __global__ void paged_decode(
    const float* q, const float* kCache, const float* vCache,
    const int* blockTable, const int* seqLen, int numSeqs, int maxBlocksPerSeq,
    const float* alibiSlopes, float* workspace, unsigned* semaphores, float* out)";

/// How far `out` may be from the reference `r`: `1e-4 + 1e-3 |r|`.
pub fn tolerance(reference: f64) -> f64 {
    ABS_TOL + REL_TOL * reference.abs()
}

/// Whether one output element passes: finite and within [`tolerance`].
pub fn passes(out: f64, reference: f64) -> bool {
    out.is_finite() && (out - reference).abs() <= tolerance(reference)
}

/// How many tolerances `out` misses `reference` by (infinite for NaN/Inf):
/// what "fails by at least 10x the tolerance" is measured in.
pub fn miss_factor(out: f64, reference: f64) -> f64 {
    if out.is_finite() {
        (out - reference).abs() / tolerance(reference)
    } else {
        f64::INFINITY
    }
}

/// Keys per partition when a launch with `splits` partitions serves a
/// sequence of `len` keys: at least [`MIN_PARTITION`], and long enough that
/// `splits` partitions cover the sequence, in whole cache blocks. The
/// reference kernel and the combine-bug models follow this rule.
pub fn partition_len(len: usize, splits: usize) -> usize {
    let splits = splits.clamp(1, MAX_SPLITS);
    len.div_ceil(splits)
        .div_ceil(BLOCK)
        .saturating_mul(BLOCK)
        .max(MIN_PARTITION)
}

/// Partitions a sequence of `len` keys is cut into under [`partition_len`].
pub fn partitions(len: usize, splits: usize) -> usize {
    len.div_ceil(partition_len(len, splits)).max(1)
}

/// The shape of one launch: which sequences, how long, which blocks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    /// `[numSeqs]` keys visible to each sequence's token, itself included (>= 1).
    pub seq_len: Vec<i32>,
    pub max_blocks_per_seq: usize,
    pub num_blocks: usize,
    /// `[numSeqs][maxBlocksPerSeq]` physical block ids.
    pub block_table: Vec<i32>,
    /// Whether the launch passes ALiBi slopes.
    pub alibi: bool,
}

impl Batch {
    pub fn num_seqs(&self) -> usize {
        self.seq_len.len()
    }

    /// Keys of sequence `seq` (its token's position plus one).
    pub fn len_of(&self, seq: usize) -> usize {
        self.seq_len[seq] as usize
    }

    /// Cache blocks sequence `seq` occupies.
    pub fn blocks_of(&self, seq: usize) -> usize {
        self.len_of(seq).div_ceil(BLOCK)
    }

    /// Physical block holding position `pos` of sequence `seq`.
    pub fn block_of(&self, seq: usize, pos: usize) -> usize {
        self.block_table[table_index(seq, self.max_blocks_per_seq, pos)] as usize
    }

    /// Index into `q` or `out` (`[numSeqs][32][64]`).
    pub fn q_index(seq: usize, head: usize, dim: usize) -> usize {
        LAYOUT.head_index(seq, head, dim)
    }

    /// Index into the x-packed `kCache` (`[numBlocks][8][64/X][B][X]`).
    pub fn k_cache_index(block: usize, kv_head: usize, dim: usize, slot: usize) -> usize {
        LAYOUT.k_cache_index(block, kv_head, dim, slot)
    }

    /// Index into `vCache` (`[numBlocks][8][64][B]`).
    pub fn v_cache_index(block: usize, kv_head: usize, dim: usize, slot: usize) -> usize {
        LAYOUT.v_cache_index(block, kv_head, dim, slot)
    }

    /// Index into `workspace` (`[numSeqs][32][16][66]`).
    pub fn workspace_index(seq: usize, head: usize, partition: usize, at: usize) -> usize {
        ((seq * HQ + head) * MAX_SPLITS + partition) * SLOT_FLOATS + at
    }

    /// Elements of `q` and `out`.
    pub fn q_elems(&self) -> usize {
        self.num_seqs() * HQ * DH
    }

    /// Elements of `kCache` and of `vCache`.
    pub fn cache_elems(&self) -> usize {
        self.num_blocks * LAYOUT.block_elems()
    }

    /// Floats of `workspace`.
    pub fn workspace_elems(&self) -> usize {
        self.num_seqs() * HQ * MAX_SPLITS * SLOT_FLOATS
    }

    /// Entries of `semaphores`.
    pub fn semaphore_elems(&self) -> usize {
        self.num_seqs() * HQ
    }

    /// Cache blocks the sequences occupy, counted per sequence (a shared
    /// block counts for each of its sequences: each reads it).
    pub fn total_blocks(&self) -> usize {
        (0..self.num_seqs()).map(|s| self.blocks_of(s)).sum()
    }

    /// Keys of all sequences together.
    pub fn total_keys(&self) -> usize {
        (0..self.num_seqs()).map(|s| self.len_of(s)).sum()
    }

    /// Bytes any kernel must move at least once: `q`, `out`, and the K and
    /// V of every block a sequence occupies (whole blocks, as the second
    /// lab counts them: a partial block's slots are interleaved with its
    /// unused ones, so DRAM serves it by block). The int32 arrays are left
    /// out (under 0.02% at the timing shape). Achieved bandwidth is this
    /// over the median timed launch.
    pub fn compulsory_bytes(&self) -> u64 {
        let floats = 2 * self.q_elems() + 2 * self.total_blocks() * LAYOUT.block_elems();
        floats as u64 * 4
    }

    /// Useful floating-point work: two `DH`-long dot products (QK and PV),
    /// a multiply and an add each, per key and query head.
    pub fn flops(&self) -> f64 {
        self.total_keys() as f64 * HQ as f64 * DH as f64 * 4.0
    }

    /// The most partitions any sequence is cut into under `splits`.
    pub fn max_partitions(&self, splits: usize) -> usize {
        (0..self.num_seqs())
            .map(|s| partitions(self.len_of(s), splits))
            .max()
            .unwrap_or(1)
    }
}

/// The entry point's parameters in [`ENTRY_SIGNATURE`]'s order, each read
/// from [`Inputs`]; the workspace and semaphores are the grader's scratch,
/// NaN and zero before every launch.
pub const ARGS: &[Arg<Inputs>] = &[
    Arg::f32_input("q", |i| &i.q),
    Arg::f32_input("kCache", |i| &i.k_cache),
    Arg::f32_input("vCache", |i| &i.v_cache),
    Arg::i32_input("blockTable", |i| &i.batch.block_table),
    Arg::i32_input("seqLen", |i| &i.batch.seq_len),
    // Both fit an int: the cases' bounds (64 sequences, 512 blocks) see to it.
    Arg::int("numSeqs", |i| i.batch.num_seqs() as i32),
    Arg::int("maxBlocksPerSeq", |i| i.batch.max_blocks_per_seq as i32),
    Arg::optional_f32_input("alibiSlopes", |i| i.alibi_slopes.as_deref()),
    Arg::f32_scratch("workspace", |i| i.batch.workspace_elems()),
    Arg::u32_scratch("semaphores", |i| i.batch.semaphore_elems()),
    Arg::f32_output("out"),
];

/// Everything a launch reads besides the scratch buffers (the workspace is
/// NaN and the semaphores zero before every launch: nothing to carry).
#[derive(Debug, Clone, PartialEq)]
pub struct Inputs {
    pub batch: Batch,
    /// `[numSeqs][32][64]`.
    pub q: Vec<f32>,
    /// `[numBlocks][8][64/X][B][X]`.
    pub k_cache: Vec<f32>,
    /// `[numBlocks][8][64][B]`.
    pub v_cache: Vec<f32>,
    /// `[32]`, present exactly when `batch.alibi`.
    pub alibi_slopes: Option<Vec<f32>>,
}

impl Inputs {
    /// Element `dim` of the key at position `pos` of sequence `seq`, KV head `kv_head`.
    pub fn key(&self, seq: usize, pos: usize, kv_head: usize, dim: usize) -> f32 {
        let block = self.batch.block_of(seq, pos);
        self.k_cache[Batch::k_cache_index(block, kv_head, dim, pos % BLOCK)]
    }

    /// Element `dim` of the value at position `pos` of sequence `seq`.
    pub fn value(&self, seq: usize, pos: usize, kv_head: usize, dim: usize) -> f32 {
        let block = self.batch.block_of(seq, pos);
        self.v_cache[Batch::v_cache_index(block, kv_head, dim, pos % BLOCK)]
    }

    /// These inputs with each unused cache slot's NaN replaced by a finite
    /// tag of its own ([`crate::lab::paged::tags`]).
    pub fn sentinels_tagged(&self) -> Inputs {
        use crate::lab::paged::tags;
        Inputs {
            k_cache: tags::tagged(&self.k_cache, f32::is_nan, tags::key_tag),
            v_cache: tags::tagged(&self.v_cache, f32::is_nan, tags::value_tag),
            ..self.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_partition_rule_cuts_long_sequences_into_at_most_the_splits() {
        assert_eq!(partition_len(1, 16), 512);
        assert_eq!(partitions(512, 16), 1);
        assert_eq!(partitions(513, 16), 2);
        assert_eq!(partitions(8192, 16), 16);
        assert_eq!(partitions(8192, 4), 4);
        assert_eq!(partition_len(8192, 4), 2048);
        // Whole blocks, and never more partitions than the launch has.
        assert_eq!(partition_len(8000, 15), 544);
        for len in [1, 15, 16, 17, 511, 512, 513, 4097, 8191, 8192] {
            for splits in 1..=16 {
                let (p, n) = (partition_len(len, splits), partitions(len, splits));
                assert!(
                    n <= splits && p % BLOCK == 0 && n * p >= len,
                    "{len} {splits}"
                );
                assert!((n - 1) * p < len, "{len} {splits}: an empty partition");
            }
        }
        assert_eq!(partitions(8192, 0), 1);
    }

    #[test]
    fn indices_follow_the_contract() {
        let (b, g, d, o) = (3, 5, 37, 11);
        assert_eq!(
            Batch::k_cache_index(b, g, d, o),
            (((b * 8 + g) * 16 + d / 4) * 16 + o) * 4 + d % 4
        );
        assert_eq!(
            Batch::v_cache_index(b, g, d, o),
            ((b * 8 + g) * 64 + d) * 16 + o
        );
        assert_eq!(
            Batch::workspace_index(2, 31, 15, 65) + 1,
            3 * 32 * 16 * 66,
            "the last float of sequence 2"
        );
    }

    #[test]
    fn tolerance_and_miss_factor() {
        assert!(passes(1.0, 1.0 + 1.1e-3 - 1e-9));
        assert!(!passes(1.0, 1.0 + 1.2e-3));
        assert!(!passes(f64::NAN, 0.0));
        assert!((miss_factor(1e-3, 0.0) - 10.0).abs() < 1e-9);
        assert_eq!(miss_factor(f64::NAN, 0.0), f64::INFINITY);
    }

    #[test]
    fn the_signature_matches_the_entry_point() {
        assert!(ENTRY_SIGNATURE.contains(&format!("void {ENTRY_POINT}(")));
        assert_eq!(ENTRY_SIGNATURE.matches("const float*").count(), 4);
        assert_eq!(ENTRY_SIGNATURE.matches("const int*").count(), 2);
    }
}
