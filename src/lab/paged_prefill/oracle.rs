//! The reference answer for the paged lab, in float64.
//!
//! The oracle follows the contract's semantics literally rather than the
//! way a kernel would compute them: for each sequence it first lays the
//! sequence's keys and values out in position order (cache through the
//! block table for the context, `kNew`/`vNew` rows for the new tokens),
//! then every row does a textbook two-pass softmax over the positions it
//! sees. Inputs are f32, so each product is exact in f64 and the remaining
//! rounding is far below the lab's tolerance; the golden case proves it.
//!
//! The same function, with a [`Model`] knob, is the CPU model of each planted
//! bug and of each misreading the diagnosis tries ([`Misreading`]). Keeping one function is the point: a bug model differs from the
//! oracle in exactly the line the bug is about, so a test that shows the
//! cases catch a model says something about the cases, not about a second
//! implementation that could be wrong in other ways.

use rayon::prelude::*;

use super::bugs::Bug;
use super::contract::{Batch, Inputs, BLOCK, DH, GROUP, HKV, HQ, LAYOUT, SCALE};
use crate::lab::paged::layout::CacheLayout;
use crate::lab::paged::misread::Misreading;

/// The K cache as a kernel reads it that assumes X = 8 (the X-assumed-8 bug).
const LAYOUT_X8: CacheLayout = CacheLayout::new(DH, 8);

/// How the attention is computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Model {
    /// The contract's definition.
    Exact,
    /// The definition with one planted bug.
    Bug(Bug),
    /// The definition read the way a kernel misreads it.
    Misread(Misreading),
}

impl Model {
    fn bug(self) -> Option<Bug> {
        match self {
            Model::Bug(bug) => Some(bug),
            _ => None,
        }
    }

    fn misreading(self) -> Option<Misreading> {
        match self {
            Model::Misread(misreading) => Some(misreading),
            _ => None,
        }
    }
}

/// Exact attention of the batch, laid out like `out` (`[T][32][64]`).
///
/// With `rows`, only those rows of `out` are computed (the rest stay 0.0):
/// the engine samples rows of large outputs.
///
/// # Panics
/// When a tensor's length disagrees with the batch or a row is past `T`
/// (caller bugs: loaded and generated inputs are validated).
pub fn attention(inputs: &Inputs, rows: Option<&[usize]>) -> Vec<f64> {
    evaluate(inputs, rows, Model::Exact, 0.0)
}

/// What [`evaluate`] can leave in a row no sequence writes, to tell it from
/// a computed NaN: a value no model computes (its outputs are weighted
/// means of finite values, or NaN).
pub const NOT_WRITTEN: f64 = f64::NEG_INFINITY;

/// The shared core of the oracle and the models.
///
/// Rows no sequence writes (only possible under [`Bug::QStartShifted`])
/// keep `unwritten`; so do rows left out by `rows`.
pub fn evaluate(inputs: &Inputs, rows: Option<&[usize]>, model: Model, unwritten: f64) -> Vec<f64> {
    if let Model::Bug(Bug::Int32Offset(wrap)) = model {
        // The right positions through the wrong blocks: the contract's
        // attention over the table the wrapped offsets land on (the
        // batch's own where nothing is placed high and every offset fits).
        let wrapped = inputs.read_wrapped(wrap);
        return evaluate(
            wrapped.as_ref().unwrap_or(inputs),
            rows,
            Model::Exact,
            unwritten,
        );
    }
    let bug = model.bug();
    let batch = &inputs.batch;
    inputs.assert_lengths();
    let total = batch.total_new();
    let mut out = vec![unwritten; total * HQ * DH];
    let mut wanted = vec![rows.is_none(); total];
    for &row in rows.unwrap_or(&[]) {
        assert!(row < total, "row {row} past T = {total}");
        wanted[row] = true;
    }

    // Which (sequence, token) writes each row. Later sequences win, as the
    // last store would on a GPU (only the qStart bug makes writers overlap).
    let mut writer: Vec<Option<(usize, usize)>> = vec![None; total];
    for seq in 0..batch.num_seqs() {
        let start = row_start(batch, seq, bug);
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
        let sequence = SequenceKv::gather(inputs, seq, model);
        let mut results = vec![0.0; mine.len() * HQ * DH];
        results
            .par_chunks_mut(GROUP * DH)
            .enumerate()
            .for_each_init(Vec::new, |scores, (task, out_group)| {
                let (row, token) = mine[task / HKV];
                let kv_head = task % HKV;
                sequence.row_group(inputs, row, token, kv_head, scores, out_group);
            });
        for (&(row, _), result) in mine.iter().zip(results.chunks_exact(HQ * DH)) {
            out[row * HQ * DH..(row + 1) * HQ * DH].copy_from_slice(result);
        }
    }
    out
}

/// Where a sequence's rows begin, as the (possibly buggy) kernel computes it.
fn row_start(batch: &Batch, seq: usize, bug: Option<Bug>) -> usize {
    match bug {
        Some(Bug::QStartShifted) => batch.q_start[seq + 1] as usize,
        _ => batch.start(seq),
    }
}

/// One sequence's keys and values in position order, per KV head, as f64,
/// exactly as the (possibly buggy) kernel would read them.
struct SequenceKv {
    seq: usize,
    /// The context as the kernel takes it.
    context: usize,
    bug: Option<Bug>,
    misreading: Option<Misreading>,
    /// `[HKV][len][DH]`.
    keys: Vec<f64>,
    values: Vec<f64>,
    len: usize,
}

impl SequenceKv {
    fn gather(inputs: &Inputs, seq: usize, model: Model) -> SequenceKv {
        let (bug, misreading) = (model.bug(), model.misreading());
        let batch = &inputs.batch;
        let context = Misreading::context(misreading, batch.context[seq], batch.new[seq]);
        let len = context + batch.new[seq];
        // The contract: the cache holds positions below the context. The
        // bug reads it for every position of the sequence.
        let cached_below = match bug {
            Some(Bug::CacheForNewTokens) => len,
            _ => context,
        };
        let start = row_start(batch, seq, bug);
        let read = |data: &[f32], index: Option<usize>| {
            // Past the end of a buffer is the guard band: a NaN that shows.
            index
                .and_then(|i| data.get(i))
                .map_or(f64::NAN, |&x| f64::from(x))
        };
        let mut keys = vec![0.0; HKV * len * DH];
        let mut values = vec![0.0; HKV * len * DH];
        for kv_head in 0..HKV {
            for pos in 0..len {
                let at = (kv_head * len + pos) * DH;
                for dim in 0..DH {
                    let (k, v) = if pos < cached_below {
                        let block = match bug {
                            Some(Bug::BlockTableIgnored) => {
                                Some(seq * batch.max_blocks_per_seq + pos / BLOCK)
                            }
                            _ => batch
                                .block_table
                                .get(seq * batch.max_blocks_per_seq + pos / BLOCK)
                                .map(|&b| b as usize),
                        };
                        let slot = pos % BLOCK;
                        let k_index = block.map(|b| match bug {
                            Some(Bug::XAssumed8) => LAYOUT_X8.k_cache_index(b, kv_head, dim, slot),
                            _ => LAYOUT.k_cache_index(b, kv_head, dim, slot),
                        });
                        let v_index = block.map(|b| match bug {
                            Some(Bug::VTokenMajor) => {
                                ((b * HKV + kv_head) * BLOCK + slot) * DH + dim
                            }
                            _ => LAYOUT.v_cache_index(b, kv_head, dim, slot),
                        });
                        (
                            read(&inputs.k_cache, k_index),
                            read(&inputs.v_cache, v_index),
                        )
                    } else {
                        let row = start + (pos - context);
                        let index =
                            (row < batch.total_new()).then(|| LAYOUT.kv_index(row, kv_head, dim));
                        (read(&inputs.k_new, index), read(&inputs.v_new, index))
                    };
                    keys[at + dim] = k;
                    values[at + dim] = v;
                }
            }
        }
        SequenceKv {
            seq,
            context,
            bug,
            misreading,
            keys,
            values,
            len,
        }
    }

    /// Whether the query at `i` sees the key at `j <= i`, under the model.
    fn sees(&self, batch: &Batch, i: usize, j: usize) -> bool {
        let partial_block = self.context / BLOCK * BLOCK..self.context;
        if self.bug == Some(Bug::PartialBlockDropped) && partial_block.contains(&j) {
            return false;
        }
        let Some(w) = batch.window() else {
            return true;
        };
        match self.bug {
            Some(Bug::WindowOffByOne) => i - j <= w,
            // `j < ctx || (j <= i && inWindow)`: cached keys skip the window.
            Some(Bug::MaskPrecedence) => j < self.context || i - j < w,
            _ => i - j < w,
        }
    }

    /// The scores of query head `head` of one output row (token `token`)
    /// over positions `0..=i`, an unseen one's `-inf`; returns the KV head
    /// its keys and values are read from.
    fn head_scores(
        &self,
        inputs: &Inputs,
        row: usize,
        token: usize,
        head: usize,
        scores: &mut Vec<f64>,
    ) -> usize {
        let batch = &inputs.batch;
        let i = self.context + token;
        debug_assert!(i < self.len, "sequence {} position {i}", self.seq);
        let source = Misreading::kv_head(self.misreading, head);
        let keys = &self.keys[source * self.len * DH..(source + 1) * self.len * DH];
        let mut query = [0.0; DH];
        let q_row = &inputs.q[LAYOUT.head_index(row, head, 0)..LAYOUT.head_index(row, head, DH)];
        for (q, &x) in query.iter_mut().zip(q_row) {
            *q = f64::from(x) * SCALE;
        }
        let slope = inputs
            .alibi_slopes
            .as_ref()
            .map(|slopes| f64::from(slopes[head]));
        scores.clear();
        for j in 0..=i {
            if !self.sees(batch, i, j) {
                scores.push(f64::NEG_INFINITY);
                continue;
            }
            let key: &[f64; DH] = keys[j * DH..(j + 1) * DH].try_into().unwrap();
            // Plain indexed loops: the tests run unoptimized, and this is
            // where all of their time goes.
            let mut score = 0.0;
            for d in 0..DH {
                score += query[d] * key[d];
            }
            if let Some(slope) = slope {
                let distance = j as f64 - i as f64;
                score += match self.bug {
                    Some(Bug::AlibiSignFlipped) => -slope * distance,
                    _ => slope * distance,
                };
            }
            scores.push(score);
        }
        source
    }

    /// The values of KV head `source` at position `j`.
    fn value(&self, source: usize, j: usize) -> &[f64; DH] {
        let at = (source * self.len + j) * DH;
        self.values[at..at + DH].try_into().unwrap()
    }

    /// The four query heads of KV head `kv_head` for one output row.
    fn row_group(
        &self,
        inputs: &Inputs,
        row: usize,
        token: usize,
        kv_head: usize,
        scores: &mut Vec<f64>,
        out_group: &mut [f64],
    ) {
        for (member, out_head) in out_group.chunks_exact_mut(DH).enumerate() {
            let source = self.head_scores(inputs, row, token, kv_head * GROUP + member, scores);
            // NaN scores (guard-band reads) must not be skipped by the max:
            // they reach the sum below and poison the row, as on a GPU.
            let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let mut denominator = 0.0;
            out_head.fill(0.0);
            for (j, score) in scores.iter().enumerate() {
                if *score == f64::NEG_INFINITY {
                    continue;
                }
                let weight = (score - max).exp();
                denominator += weight;
                let value = self.value(source, j);
                for d in 0..DH {
                    out_head[d] += weight * value[d];
                }
            }
            if self.bug != Some(Bug::MissingDivision) {
                out_head.iter_mut().for_each(|o| *o /= denominator);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The long case's sampled rows, as the check grades them: the oracle's
    /// answer there is the definition's, within the golden bound.
    #[test]
    fn the_long_context_case_is_graded_on_sampled_rows_held_to_the_definition() {
        use crate::lab::golden::{by_definition, prove};
        use crate::lab::paged_prefill::cases::{embedded_cases, generate};
        use crate::lab::paged_prefill::contract::INSTANCE;
        let spec = crate::lab::case_file::named(embedded_cases(), "long-context-32k");
        let inputs = generate(&spec, 5).unwrap().inputs;
        let b = &inputs.batch;
        assert!(INSTANCE.problem(b).oracle_sampled());
        assert!(b.len_of(0) >= 32_768);
        let rows = [b.start(0), b.start(0) + b.new[0] - 1, b.start(1)];
        let whole = attention(&inputs, Some(&rows));
        let mut got = Vec::new();
        let mut expected = Vec::new();
        for &row in &rows {
            got.extend_from_slice(&whole[row * HQ * DH..(row + 1) * HQ * DH]);
            let (s, i) = b.sequence_of_row(row);
            let ctx = b.context[s];
            for head in 0..HQ {
                let g = head / GROUP;
                let key = |j: usize, d: usize| match j < ctx {
                    true => f64::from(inputs.cached_key(s, j, g, d)),
                    false => f64::from(inputs.k_new[LAYOUT.kv_index(b.start(s) + j - ctx, g, d)]),
                };
                let value = |j: usize, d: usize| match j < ctx {
                    true => f64::from(inputs.cached_value(s, j, g, d)),
                    false => f64::from(inputs.v_new[LAYOUT.kv_index(b.start(s) + j - ctx, g, d)]),
                };
                let scores: Vec<f64> = (0..=i)
                    .map(|j| {
                        let q = |d: usize| f64::from(inputs.q[LAYOUT.head_index(row, head, d)]);
                        (0..DH).map(|d| q(d) * key(j, d)).sum::<f64>() * SCALE
                    })
                    .collect();
                expected.extend(by_definition(&scores, value, DH));
            }
        }
        let proof = prove(&got, &expected, 1.0, (HQ, DH)).expect("within the golden bound");
        assert_eq!(proof.elements, rows.len() * HQ * DH);
    }

    /// The GPU's tiled reference sums in another order than this oracle
    /// (tiles of keys, a running maximum): its CPU port, on every shipped
    /// case, gives this oracle's answer.
    #[test]
    fn the_tiled_order_of_sums_gives_the_oracle_s_answer() {
        use crate::lab::paged::tiled::assert_tiled_order_gives;
        use crate::lab::paged_prefill::cases::{generate, whole_oracle_cases};
        let mut checked = 0;
        for case in whole_oracle_cases() {
            let inputs = generate(&case, 11).unwrap().inputs;
            let exact = attention(&inputs, None);
            let batch = &inputs.batch;
            let mut scores = Vec::new();
            for seq in 0..batch.num_seqs() {
                let kv = SequenceKv::gather(&inputs, seq, Model::Exact);
                for token in 0..batch.new[seq] {
                    let row = batch.start(seq) + token;
                    for head in 0..HQ {
                        let source = kv.head_scores(&inputs, row, token, head, &mut scores);
                        let visible: Vec<(usize, f64, &[f64])> = scores
                            .iter()
                            .enumerate()
                            .filter(|(_, &score)| score != f64::NEG_INFINITY)
                            .map(|(j, &score)| (j, score, kv.value(source, j).as_slice()))
                            .collect();
                        let want = &exact
                            [LAYOUT.head_index(row, head, 0)..LAYOUT.head_index(row, head, DH)];
                        assert_tiled_order_gives(batch, row, &visible, want, || {
                            format!("{}: row {row} head {head}", case.name)
                        });
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked > 1000, "{checked} (row, head) pairs");
    }
    use crate::lab::paged_prefill::contract::{alibi_slope, standard_alibi_slopes};

    /// A two-sequence batch with simple, hand-checkable values: every q and
    /// k zero (uniform softmax), values encode their position.
    fn uniform_inputs(window: i32, alibi: bool) -> Inputs {
        let mut batch = Batch::from_lengths(LAYOUT, vec![3, 0], vec![2, 2], window, alibi, 1, 3);
        batch.block_table = vec![2, 0];
        let t = batch.total_new();
        let mut v_cache = vec![0.0; batch.cache_elems()];
        for pos in 0..3 {
            for g in 0..HKV {
                for d in 0..DH {
                    v_cache[LAYOUT.v_cache_index(2, g, d, pos)] = pos as f32;
                }
            }
        }
        let mut v_new = vec![0.0; batch.kv_new_elems()];
        for row in 0..t {
            let (_, pos) = batch.sequence_of_row(row);
            for g in 0..HKV {
                for d in 0..DH {
                    v_new[LAYOUT.kv_index(row, g, d)] = pos as f32;
                }
            }
        }
        Inputs {
            q: vec![0.0; batch.q_elems()],
            k_new: vec![0.0; batch.kv_new_elems()],
            k_cache: vec![0.0; batch.cache_elems()],
            v_new,
            v_cache,
            alibi_slopes: alibi.then(standard_alibi_slopes),
            batch,
        }
    }

    fn at(out: &[f64], row: usize, head: usize) -> f64 {
        out[LAYOUT.head_index(row, head, 7)]
    }

    #[test]
    fn uniform_scores_average_the_visible_positions() {
        let out = attention(&uniform_inputs(0, false), None);
        // Sequence 0: rows at positions 3 and 4 see 0..=3 and 0..=4.
        assert!((at(&out, 0, 0) - 1.5).abs() < 1e-15);
        assert!((at(&out, 1, 31) - 2.0).abs() < 1e-15);
        // Sequence 1 (no context): positions 0 and 1.
        assert_eq!(at(&out, 2, 5), 0.0);
        assert!((at(&out, 3, 5) - 0.5).abs() < 1e-15);
    }

    #[test]
    fn a_window_keeps_the_last_w_positions() {
        let out = attention(&uniform_inputs(2, false), None);
        assert!((at(&out, 0, 0) - 2.5).abs() < 1e-15); // keys 2, 3
        assert!((at(&out, 1, 0) - 3.5).abs() < 1e-15); // keys 3, 4
        let out = attention(&uniform_inputs(1, false), None);
        assert_eq!(at(&out, 1, 9), 4.0);
    }

    #[test]
    fn alibi_favours_near_keys_by_the_slope() {
        let out = attention(&uniform_inputs(0, true), None);
        // Row at position 4, head 3 (slope 1/2): weights e^{-(4-j)/2}.
        let weights: Vec<f64> = (0..5).map(|j| (-(4.0 - j as f64) / 2.0).exp()).collect();
        let expected = weights
            .iter()
            .enumerate()
            .map(|(j, w)| w * j as f64)
            .sum::<f64>()
            / weights.iter().sum::<f64>();
        assert_eq!(alibi_slope(3), 0.5);
        assert!((at(&out, 1, 3) - expected).abs() < 1e-14);
    }

    #[test]
    fn only_the_requested_rows_are_computed() {
        let inputs = uniform_inputs(0, false);
        let full = attention(&inputs, None);
        let some = attention(&inputs, Some(&[1, 3]));
        for row in 0..4 {
            let range = row * HQ * DH..(row + 1) * HQ * DH;
            if row == 1 || row == 3 {
                assert_eq!(some[range.clone()], full[range]);
            } else {
                assert!(some[range].iter().all(|&x| x == 0.0));
            }
        }
    }

    #[test]
    fn huge_scores_do_not_overflow() {
        let mut inputs = uniform_inputs(0, false);
        inputs.q.iter_mut().for_each(|x| *x = 12.0);
        inputs.k_new.iter_mut().for_each(|x| *x = 12.0);
        let out = attention(&inputs, None);
        // Row 3 (seq 1, position 1): both keys score 1152; average of 0 and 1.
        assert!((at(&out, 3, 0) - 0.5).abs() < 1e-15);
        assert!(out.iter().all(|x| x.is_finite()));
    }
}
