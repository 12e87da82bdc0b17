//! The sequence structure every paged prefill lab launches on: which
//! sequences, where their new tokens sit in `q`, which cache blocks hold
//! their contexts, what a query sees (causal, sliding window), and the work
//! that makes. The cache's head dimension and packing are the lab's
//! [`CacheLayout`], which the batch carries so that every size and index
//! it derives is the lab's own.

use super::high_blocks::{HighBlocks, Reach, Wrap};
use super::layout::{table_index, CacheLayout, BLOCK, HKV, HQ};
use crate::lab::definition::CaseError;
use crate::lab::sparse::SparseBlocks;

/// The shape of one launch: which sequences, where their tokens sit, which
/// blocks hold their contexts.
///
/// `context` and `new` are the natural description; `q_start`, `seq_len`
/// and `block_table` are the int32 arrays the kernel receives. Both are
/// kept so that a loader can build a batch from the arrays and a generator
/// from the lengths, and they always agree (see [`Batch::from_lengths`] and
/// the lab's tensor loader).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    /// The lab's cache: head dimension and K packing.
    pub layout: CacheLayout,
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
    /// Where the cache's blocks sit when a case places them past 2^31 or
    /// 2^32 elements; `block_table` and the caches stay compact, and the
    /// kernel gets [`Batch::kernel_table`].
    pub high: Option<HighBlocks>,
}

impl Batch {
    /// A batch with `q_start` and `seq_len` derived from the lengths and an
    /// all-zero block table of the given size (the caller fills it).
    pub fn from_lengths(
        layout: CacheLayout,
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
            layout,
            block_table: vec![0; context.len() * max_blocks_per_seq],
            context,
            new,
            sliding_window,
            alibi,
            max_blocks_per_seq,
            num_blocks,
            q_start,
            seq_len,
            high: None,
        }
    }

    /// Where the caches' blocks sit, when the case places them high.
    pub fn placed_blocks(&self) -> Option<&SparseBlocks> {
        self.high.as_ref().map(|high| &high.blocks)
    }

    /// `blockTable` as the kernel gets it: the compact table, or each
    /// entry's place when the blocks are placed high.
    pub fn kernel_table(&self) -> &[i32] {
        self.high
            .as_ref()
            .map_or(&self.block_table, |high| &high.table)
    }

    /// That the sizes passed as `int` (`numSeqs`, `maxBlocksPerSeq`) fit one.
    pub fn check_int_arguments(&self, case: &str) -> Result<(), CaseError> {
        for n in [self.num_seqs(), self.max_blocks_per_seq] {
            if i32::try_from(n).is_err() {
                return Err(CaseError::Invalid {
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

    /// Elements of `q` and `out`.
    pub fn q_elems(&self) -> usize {
        self.total_new() * HQ * self.layout.dim
    }

    /// Elements of `kNew` and `vNew`.
    pub fn kv_new_elems(&self) -> usize {
        self.total_new() * HKV * self.layout.dim
    }

    /// Elements of `kCache` and of `vCache`.
    pub fn cache_elems(&self) -> usize {
        self.num_blocks * self.layout.block_elems()
    }

    /// Panics unless the tensors' lengths `[q, kNew, vNew, kCache, vCache]`
    /// are this batch's and slopes are there exactly when ALiBi is on
    /// (caller bugs: loaded and generated inputs are validated).
    pub fn assert_lengths(&self, [q, k_new, v_new, k_cache, v_cache]: [usize; 5], slopes: bool) {
        assert_eq!(q, self.q_elems(), "q does not match the batch");
        assert_eq!(k_new, self.kv_new_elems(), "kNew does not match");
        assert_eq!(v_new, self.kv_new_elems(), "vNew does not match");
        assert_eq!(k_cache, self.cache_elems(), "kCache does not match");
        assert_eq!(v_cache, self.cache_elems(), "vCache does not match");
        assert_eq!(
            slopes, self.alibi,
            "ALiBi slopes present exactly when the batch says so"
        );
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
        self.visible_pairs_per_head() as f64 * HQ as f64 * self.layout.dim as f64 * 4.0
    }

    /// Bytes any kernel must move at least once: `q`, `kNew`, `vNew` and
    /// `out` of `activation_bytes` an element, and the K and V blocks of
    /// every context (whole blocks: the cache is read by block) of
    /// `cache_bytes` an element.
    pub fn compulsory_bytes(&self, activation_bytes: usize, cache_bytes: usize) -> u64 {
        let activations = 2 * self.q_elems() + 2 * self.kv_new_elems();
        let cache = 2 * self.total_context_blocks() * self.layout.block_elems();
        (activations * activation_bytes + cache * cache_bytes) as u64
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

/// A cache element that names its index: what a landing block holds.
pub type Tag<C> = fn(usize) -> C;

/// A prefill launch's tensors in the lab's element types: `A` for `q`,
/// `kNew`, `vNew` (`[T][32][DH]`, `[T][8][DH]`), `C` for the x-packed K
/// cache and the V cache (`[numBlocks][8][DH/X][16][X]`, `[numBlocks][8][DH][16]`).
#[derive(Debug, Clone, PartialEq)]
pub struct PrefillTensors<A, C> {
    pub batch: Batch,
    pub q: Vec<A>,
    pub k_new: Vec<A>,
    pub v_new: Vec<A>,
    pub k_cache: Vec<C>,
    pub v_cache: Vec<C>,
    /// `[32]`, present exactly when `batch.alibi`.
    pub alibi_slopes: Option<Vec<f32>>,
}

impl<A, C> PrefillTensors<A, C> {
    /// Panics unless the tensors agree with their batch ([`Batch::assert_lengths`]).
    pub fn assert_lengths(&self) {
        let lengths = [
            self.q.len(),
            self.k_new.len(),
            self.v_new.len(),
            self.k_cache.len(),
            self.v_cache.len(),
        ];
        self.batch
            .assert_lengths(lengths, self.alibi_slopes.is_some());
    }
}

impl<A, C: Copy> PrefillTensors<A, C> {
    /// These tensors with the cache placed past `reach` ([`HighBlocks`]):
    /// the landing blocks join the compact caches, each element tagged by
    /// `tags` (K, V) from its index, so a read that wrapped to one shows
    /// which it reached (a signed and an unsigned wrap land in different
    /// blocks, and only the model of the one that did reproduces it).
    pub fn placed_high(mut self, reach: Reach, tags: (Tag<C>, Tag<C>)) -> Self {
        let (high, landings) = HighBlocks::place(&self.batch, reach);
        let from = self.k_cache.len();
        let to = from + landings * self.batch.layout.block_elems();
        self.k_cache.extend((from..to).map(tags.0));
        self.v_cache.extend((from..to).map(tags.1));
        self.batch.num_blocks += landings;
        self.batch.high = Some(high);
        self
    }

    /// These tensors as a kernel with 32-bit `wrap` offsets reads them: the
    /// block table through which it reads, each block where its offset
    /// lands ([`HighBlocks::wrapped_table`]). `None` when nothing is placed
    /// high: every offset fits, and the kernel reads the blocks it should.
    pub fn read_wrapped(&self, wrap: Wrap) -> Option<Self>
    where
        A: Clone,
    {
        let high = self.batch.high.as_ref()?;
        let table = high.wrapped_table(&self.batch.block_table, wrap);
        let mut wrapped = self.clone();
        wrapped.batch.block_table = table;
        Some(wrapped)
    }

    /// The cached key at context position `pos` of sequence `seq`, KV head `kv_head`.
    pub fn cached_key(&self, seq: usize, pos: usize, kv_head: usize, dim: usize) -> C {
        let block = self.batch.block_of(seq, pos);
        self.k_cache[self
            .batch
            .layout
            .k_cache_index(block, kv_head, dim, pos % BLOCK)]
    }

    /// The cached value at context position `pos` of sequence `seq`.
    pub fn cached_value(&self, seq: usize, pos: usize, kv_head: usize, dim: usize) -> C {
        let block = self.batch.block_of(seq, pos);
        self.v_cache[self
            .batch
            .layout
            .v_cache_index(block, kv_head, dim, pos % BLOCK)]
    }
}
