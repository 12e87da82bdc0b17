//! The paged prefill family's attention in float64: one function that is
//! each prefill lab's oracle, every planted bug's model and every
//! misreading the diagnosis tries, each a [`Reading`] of the contract with
//! one knob turned.
//!
//! For each sequence the keys and values are first laid out in the order
//! the (possibly wrong) kernel walks them, read through the block table and
//! decoded as the lab says ([`Decoding`]), then every row does a textbook
//! two-pass softmax over the positions it sees. The inputs are exact in
//! f64 (f32, bf16, or an FP8 byte times an f32 scale), so each product is
//! exact and what is left is summation rounding far below any lab's
//! tolerance; each lab's golden case proves it. One function is the point:
//! a bug's model differs from the oracle in exactly the line the bug is
//! about, so a test that shows the cases catch a model says something about
//! the cases, not about a second implementation wrong in other ways.

use rayon::prelude::*;

use super::batch::PrefillTensors;
use super::bf16;
use super::high_blocks::Wrap;
use super::layout::{table_index, CacheLayout, BLOCK, GROUP, HKV, HQ};
use super::misread::Misreading;

/// Which positions the kernel reads from the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheWalk {
    /// Those below the context; the new tokens from `kNew`/`vNew` (the contract).
    Context,
    /// One more, the key at the context itself, read through the table
    /// (which may run past the sequence's row of it, or past the table).
    OnePastContext,
    /// Every position of the sequence, the new tokens' too.
    EveryPosition,
}

/// Which keys a row at position `i` sees, besides `j <= i`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowRule {
    /// `i - j < slidingWindow` (the contract).
    Contract,
    /// `i - j <= slidingWindow`.
    OneTooWide,
    /// `j < ctx || i - j < slidingWindow`: cached keys skip the window.
    CachedKeysUnwindowed,
}

/// How the sums are done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arithmetic {
    /// Exactly, in f64.
    Exact,
    /// As the FP8 seed kernel does: cached keys and values and the
    /// probabilities rounded to bf16 before their products, fp32 dot
    /// products and sums, `expf`, `out` rounded to bf16.
    SeedBf16,
}

/// The contract as a kernel reads it: each field one line a kernel may get wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    /// Another KV head per query head, or the context taken off by a few.
    pub misreading: Option<Misreading>,
    /// Cache offsets computed in 32 bits: the blocks are read where they land.
    pub wrapped: Option<Wrap>,
    pub walk: CacheWalk,
    /// Block `s * maxBlocksPerSeq + pos / B` instead of the table's entry.
    pub block_table_ignored: bool,
    /// The K cache unpacked with this X instead of the contract's.
    pub k_packing: Option<usize>,
    /// The V cache read `[block][head][slot][dim]`.
    pub v_token_major: bool,
    /// The walk over cached keys skips the context's last, partial block.
    pub partial_block_dropped: bool,
    pub window: WindowRule,
    /// `slope * (i - j)` instead of `slope * (j - i)`.
    pub alibi_flipped: bool,
    /// The running max subtracted before `exp` (without it, the kernel's `expf` overflows).
    pub max_subtracted: bool,
    /// The final division by the softmax's denominator.
    pub normalised: bool,
    /// `qStart[s + 1]` taken as sequence `s`'s first row.
    pub q_start_shifted: bool,
    pub arithmetic: Arithmetic,
}

impl Reading {
    /// The contract's definition, in f64.
    pub const CONTRACT: Reading = Reading {
        misreading: None,
        wrapped: None,
        walk: CacheWalk::Context,
        block_table_ignored: false,
        k_packing: None,
        v_token_major: false,
        partial_block_dropped: false,
        window: WindowRule::Contract,
        alibi_flipped: false,
        max_subtracted: true,
        normalised: true,
        q_start_shifted: false,
        arithmetic: Arithmetic::Exact,
    };

    /// The contract read the way `misreading` reads it.
    pub const fn misread(misreading: Misreading) -> Reading {
        Reading {
            misreading: Some(misreading),
            ..Reading::CONTRACT
        }
    }
}

/// How a lab's cache elements become numbers, and its score scale.
pub struct Decoding<'a, C> {
    /// The score scale as the kernel holds it (its f64 value in exact sums).
    pub scale: f32,
    pub key: &'a (dyn Fn(C) -> f64 + Sync),
    pub value: &'a (dyn Fn(C) -> f64 + Sync),
}

/// What `reading` computes for `rows` of `tensors` (every row when `None`),
/// laid out like `out` (`[T][32][DH]`). Rows no sequence writes (only
/// possible with `q_start_shifted`) and rows left out by `rows` hold
/// `unwritten`.
///
/// # Panics
/// When a tensor's length disagrees with the batch or a row is past `T`
/// (caller bugs: loaded and generated inputs are validated).
pub fn evaluate<C: Copy + Sync>(
    tensors: &PrefillTensors<f32, C>,
    decoding: &Decoding<'_, C>,
    reading: Reading,
    rows: Option<&[usize]>,
    unwritten: f64,
) -> Vec<f64> {
    if let Some(wrap) = reading.wrapped {
        // The right positions through the wrong blocks: the contract's
        // attention over the table the wrapped offsets land on (the
        // batch's own where nothing is placed high and every offset fits).
        let wrapped = tensors.read_wrapped(wrap);
        let reading = Reading {
            wrapped: None,
            ..reading
        };
        return evaluate(
            wrapped.as_ref().unwrap_or(tensors),
            decoding,
            reading,
            rows,
            unwritten,
        );
    }
    tensors.assert_lengths();
    let batch = &tensors.batch;
    let row_len = HQ * batch.layout.dim;
    let total = batch.total_new();
    let mut out = vec![unwritten; total * row_len];
    let mut wanted = vec![rows.is_none(); total];
    for &row in rows.unwrap_or(&[]) {
        assert!(row < total, "row {row} past T = {total}");
        wanted[row] = true;
    }
    // Which (sequence, token) writes each row. Later sequences win, as the
    // last store would on a GPU (only a shifted qStart makes writers overlap).
    let mut writer: Vec<Option<(usize, usize)>> = vec![None; total];
    for seq in 0..batch.num_seqs() {
        let start = row_start(tensors, seq, reading);
        for token in 0..batch.new[seq] {
            if let Some(slot) = writer.get_mut(start + token) {
                *slot = Some((seq, token));
            }
        }
    }
    for seq in 0..batch.num_seqs() {
        let mine: Vec<(usize, usize)> = (0..total)
            .filter(|&row| wanted[row])
            .filter_map(|row| match writer[row] {
                Some((s, token)) if s == seq => Some((row, token)),
                _ => None,
            })
            .collect();
        if mine.is_empty() {
            continue;
        }
        let walk = SequenceWalk::gather(tensors, decoding, reading, seq);
        let mut results = vec![0.0; mine.len() * row_len];
        results
            .par_chunks_mut(GROUP * batch.layout.dim)
            .enumerate()
            .for_each_init(Vec::new, |scores, (task, out_group)| {
                let (row, token) = mine[task / HKV];
                walk.row_group(row, token, task % HKV, scores, out_group);
            });
        for (&(row, _), result) in mine.iter().zip(results.chunks_exact(row_len)) {
            out[row * row_len..(row + 1) * row_len].copy_from_slice(result);
        }
    }
    out
}

/// The largest `|v|` each (row, head) sees under the contract, laid out
/// `[T][32]`: what scales a tolerance that follows the values.
pub fn largest_visible_values<C: Copy + Sync>(
    tensors: &PrefillTensors<f32, C>,
    decoding: &Decoding<'_, C>,
) -> Vec<f64> {
    tensors.assert_lengths();
    let batch = &tensors.batch;
    let mut scales = vec![0.0; batch.total_new() * HQ];
    for seq in 0..batch.num_seqs() {
        let walk = SequenceWalk::gather(tensors, decoding, Reading::CONTRACT, seq);
        let start = batch.start(seq);
        for token in 0..batch.new[seq] {
            let i = walk.context + token;
            for kv_head in 0..HKV {
                let largest = (0..walk.positions.len())
                    .filter(|&at| walk.positions[at] <= i && walk.sees(i, walk.positions[at]))
                    .flat_map(|at| walk.value(kv_head, at))
                    .fold(0.0f64, |m, v| m.max(v.abs()));
                let row = (start + token) * HQ + kv_head * GROUP;
                scales[row..row + GROUP].fill(largest);
            }
        }
    }
    scales
}

/// Where a sequence's rows begin, as the kernel takes it.
fn row_start<C>(tensors: &PrefillTensors<f32, C>, seq: usize, reading: Reading) -> usize {
    let batch = &tensors.batch;
    match reading.q_start_shifted {
        true => batch.q_start[seq + 1] as usize,
        false => batch.start(seq),
    }
}

/// One sequence's keys and values in the order the kernel walks them, as
/// f64, and what its rows read besides.
struct SequenceWalk<'a, C> {
    tensors: &'a PrefillTensors<f32, C>,
    decoding: &'a Decoding<'a, C>,
    dim: usize,
    /// The context as the kernel takes it.
    context: usize,
    reading: Reading,
    /// The position of each step of the walk.
    positions: Vec<usize>,
    /// `[HKV][steps][DH]`.
    keys: Vec<f64>,
    values: Vec<f64>,
}

impl<'a, C: Copy> SequenceWalk<'a, C> {
    fn gather(
        tensors: &'a PrefillTensors<f32, C>,
        decoding: &'a Decoding<'a, C>,
        reading: Reading,
        seq: usize,
    ) -> Self {
        let batch = &tensors.batch;
        let layout = batch.layout;
        let dim = layout.dim;
        let context = Misreading::context(reading.misreading, batch.context[seq], batch.new[seq]);
        let len = context + batch.new[seq];
        let (cached, new_from) = match reading.walk {
            CacheWalk::Context => (context, context),
            CacheWalk::OnePastContext => (context + 1, context),
            CacheWalk::EveryPosition => (len, len),
        };
        let positions: Vec<usize> = (0..cached).chain(new_from..len).collect();
        let k_layout = CacheLayout::new(dim, reading.k_packing.unwrap_or(layout.x));
        let start = row_start(tensors, seq, reading);
        let round = |x: f64| match reading.arithmetic {
            Arithmetic::SeedBf16 => f64::from(bf16::round(x as f32)),
            Arithmetic::Exact => x,
        };
        // Past the end of a buffer is the guard band: a NaN that shows.
        let read_cache = |cache: &[C], at: Option<usize>, decode: &dyn Fn(C) -> f64| {
            at.and_then(|at| cache.get(at))
                .map_or(f64::NAN, |&c| round(decode(c)))
        };
        let read_new = |data: &[f32], at: Option<usize>| {
            at.and_then(|at| data.get(at))
                .map_or(f64::NAN, |&x| f64::from(x))
        };
        let steps = positions.len();
        let mut keys = vec![0.0; HKV * steps * dim];
        let mut values = vec![0.0; HKV * steps * dim];
        for (step, &pos) in positions.iter().enumerate() {
            let from_cache = step < cached;
            let entry = table_index(seq, batch.max_blocks_per_seq, pos);
            let block = match reading.block_table_ignored {
                true => Some(entry),
                false => batch.block_table.get(entry).map(|&b| b as usize),
            };
            let slot = pos % BLOCK;
            // A new token's row of `kNew`/`vNew` (a shifted qStart may run past them).
            let new_row = (!from_cache)
                .then(|| start + pos - context)
                .filter(|&row| row < batch.total_new());
            for g in 0..HKV {
                let at = (g * steps + step) * dim;
                for d in 0..dim {
                    let (k, v) = if from_cache {
                        let k_at = block.map(|b| k_layout.k_cache_index(b, g, d, slot));
                        let v_at = block.map(|b| match reading.v_token_major {
                            true => ((b * HKV + g) * BLOCK + slot) * dim + d,
                            false => layout.v_cache_index(b, g, d, slot),
                        });
                        (
                            read_cache(&tensors.k_cache, k_at, decoding.key),
                            read_cache(&tensors.v_cache, v_at, decoding.value),
                        )
                    } else {
                        let at = new_row.map(|row| layout.kv_index(row, g, d));
                        (read_new(&tensors.k_new, at), read_new(&tensors.v_new, at))
                    };
                    keys[at + d] = k;
                    values[at + d] = v;
                }
            }
        }
        SequenceWalk {
            tensors,
            decoding,
            dim,
            context,
            reading,
            positions,
            keys,
            values,
        }
    }

    /// Whether the row at position `i` sees position `j <= i`.
    fn sees(&self, i: usize, j: usize) -> bool {
        let partial_block = self.context / BLOCK * BLOCK..self.context;
        if self.reading.partial_block_dropped && partial_block.contains(&j) {
            return false;
        }
        let Some(w) = self.tensors.batch.window() else {
            return true;
        };
        match self.reading.window {
            WindowRule::Contract => i - j < w,
            WindowRule::OneTooWide => i - j <= w,
            WindowRule::CachedKeysUnwindowed => j < self.context || i - j < w,
        }
    }

    /// KV head `kv_head`'s slice of `data` (keys or values) at step `step` of the walk.
    fn of<'d>(&self, data: &'d [f64], kv_head: usize, step: usize) -> &'d [f64] {
        let at = (kv_head * self.positions.len() + step) * self.dim;
        &data[at..at + self.dim]
    }

    fn value(&self, kv_head: usize, step: usize) -> &[f64] {
        self.of(&self.values, kv_head, step)
    }

    /// The scores of query head `head` of the row at `row` (token `token`)
    /// over the steps whose positions it sees, each with its step; returns
    /// the KV head its keys and values are read from.
    fn visible_scores(
        &self,
        row: usize,
        token: usize,
        head: usize,
        scores: &mut Vec<(f64, usize)>,
    ) -> usize {
        let (tensors, dim) = (self.tensors, self.dim);
        let layout = tensors.batch.layout;
        let i = self.context + token;
        let seed_like = self.reading.arithmetic == Arithmetic::SeedBf16;
        let source = Misreading::kv_head(self.reading.misreading, head);
        let query = &tensors.q[layout.head_index(row, head, 0)..layout.head_index(row, head, dim)];
        let exact_query: Vec<f64> = query.iter().map(|&q| f64::from(q)).collect();
        let slope = tensors.alibi_slopes.as_ref().map(|s| f64::from(s[head]));
        scores.clear();
        for (step, &j) in self.positions.iter().enumerate() {
            if j > i || !self.sees(i, j) {
                continue;
            }
            let key = self.of(&self.keys, source, step);
            // Iterators, not indexing: this is where the tests' time goes.
            let mut score = if seed_like {
                let dot: f32 = query.iter().zip(key).map(|(&q, &k)| q * k as f32).sum();
                f64::from(dot * self.decoding.scale)
            } else {
                let dot: f64 = exact_query.iter().zip(key).map(|(q, k)| q * k).sum();
                dot * f64::from(self.decoding.scale)
            };
            if let Some(slope) = slope {
                let bias = slope * (j as f64 - i as f64);
                score += if self.reading.alibi_flipped {
                    -bias
                } else {
                    bias
                };
            }
            scores.push((score, step));
        }
        source
    }

    /// The four query heads of `kv_head` for the row at `row` (token `token`).
    fn row_group(
        &self,
        row: usize,
        token: usize,
        kv_head: usize,
        scores: &mut Vec<(f64, usize)>,
        out_group: &mut [f64],
    ) {
        let reading = self.reading;
        let seed_like = reading.arithmetic == Arithmetic::SeedBf16;
        // Without the max subtraction the kernel's `expf` overflows past f32's range.
        let f32_exp = seed_like || !reading.max_subtracted;
        for (member, out_head) in out_group.chunks_exact_mut(self.dim).enumerate() {
            let head = kv_head * GROUP + member;
            let source = self.visible_scores(row, token, head, scores);
            // NaN scores (stray reads) are not skipped by the max: they
            // reach the sums below and poison the row, as on a GPU.
            let max = match reading.max_subtracted {
                true => scores.iter().map(|s| s.0).fold(f64::NEG_INFINITY, f64::max),
                false => 0.0,
            };
            let mut denominator = 0.0;
            out_head.fill(0.0);
            for &(score, step) in scores.iter() {
                let weight = match f32_exp {
                    true => f64::from(((score - max) as f32).exp()),
                    false => (score - max).exp(),
                };
                denominator += weight;
                let p = match seed_like {
                    true => f64::from(bf16::round(weight as f32)),
                    false => weight,
                };
                let value = self.value(source, step);
                if seed_like {
                    for (o, &v) in out_head.iter_mut().zip(value) {
                        *o = f64::from(*o as f32 + (p * v) as f32);
                    }
                } else {
                    for (o, &v) in out_head.iter_mut().zip(value) {
                        *o += p * v;
                    }
                }
            }
            if reading.normalised {
                out_head.iter_mut().for_each(|o| *o /= denominator);
            }
            if seed_like {
                out_head
                    .iter_mut()
                    .for_each(|o| *o = f64::from(bf16::round(*o as f32)));
            }
        }
    }
}

/// The GPU's tiled reference sums in another order than this oracle
/// (tiles of keys, a running maximum): on `tensors`, whose contract answer
/// is `exact`, its CPU port gives the same answer for every (row, head);
/// returns how many it checked.
#[cfg(test)]
pub fn assert_tiled_order_gives_the_oracle<C: Copy>(
    tensors: &PrefillTensors<f32, C>,
    decoding: &Decoding<'_, C>,
    exact: &[f64],
    case: &str,
) -> usize {
    use super::tiled::assert_tiled_order_gives;
    let batch = &tensors.batch;
    let layout = batch.layout;
    let mut scores = Vec::new();
    let mut checked = 0;
    for seq in 0..batch.num_seqs() {
        let walk = SequenceWalk::gather(tensors, decoding, Reading::CONTRACT, seq);
        for token in 0..batch.new[seq] {
            let row = batch.start(seq) + token;
            for head in 0..HQ {
                let source = walk.visible_scores(row, token, head, &mut scores);
                let visible: Vec<(usize, f64, &[f64])> = scores
                    .iter()
                    .map(|&(score, step)| (walk.positions[step], score, walk.value(source, step)))
                    .collect();
                let want = &exact
                    [layout.head_index(row, head, 0)..layout.head_index(row, head, layout.dim)];
                assert_tiled_order_gives(batch, row, &visible, want, || {
                    format!("{case}: row {row} head {head}")
                });
                checked += 1;
            }
        }
    }
    checked
}
