//! The float64 oracle over the dequantised cache, and the same definition
//! with one knob turned: each planted bug, and the seed's own arithmetic.
//!
//! For each sequence the keys and values are first laid out in position
//! order, dequantised exactly (`decode(byte) * scale` is exact in f64), then
//! every row does a two-pass softmax over the positions it sees. q and K are
//! exact bf16 and FP8 values, so each product is exact in f64 and what is
//! left is summation rounding far below the tolerance; the golden case
//! proves it. A bug model differs from the oracle in the one line its bug is
//! about ([`Model`]), so a case that catches a model catches that line; the
//! misreadings the diagnosis tries ([`Misreading`]) are knobs of the same kind.

use rayon::prelude::*;

use super::bugs::Bug;
use super::{bf16, Inputs, KvFormat, BLOCK, DH, GROUP, HKV, HQ, LAYOUT, SCALE, SCALE_F32};
use crate::lab::paged::layout::{table_index, CacheLayout};
use crate::lab::paged::misread::Misreading;

/// The K cache as a kernel reads it that assumes X = 8 (the X-assumed-8 bug).
const LAYOUT_X8: CacheLayout = CacheLayout::new(DH, 8);

/// How the attention is computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Model {
    /// The definition, in f64.
    Exact,
    /// The definition with one planted bug.
    Bug(Bug),
    /// The seed kernel's arithmetic: K, V and the probabilities rounded to
    /// bf16 before their products, fp32 sums, `out` rounded to bf16.
    SeedLike,
    /// The definition read the way a kernel misreads it.
    Misread(Misreading),
}

impl Model {
    fn misreading(self) -> Option<Misreading> {
        match self {
            Model::Misread(misreading) => Some(misreading),
            _ => None,
        }
    }
}

/// Exact attention of the batch, laid out like `out` (`[T][32][128]`).
pub fn attention(inputs: &Inputs) -> Vec<f64> {
    evaluate(inputs, Model::Exact)
}

/// Exact attention of `rows` only (every row when `None`), laid out like
/// `out`, the rest 0: what checking the GPU reference on a few rows of the
/// timing shape needs (the whole shape is seconds of CPU).
pub fn attention_of_rows(inputs: &Inputs, rows: Option<&[usize]>) -> Vec<f64> {
    evaluate_rows(inputs, Model::Exact, rows)
}

/// What `model` computes for every row (rows always have a writer here:
/// none of this lab's bugs moves a row).
pub fn evaluate(inputs: &Inputs, model: Model) -> Vec<f64> {
    evaluate_rows(inputs, model, None)
}

fn evaluate_rows(inputs: &Inputs, model: Model, rows: Option<&[usize]>) -> Vec<f64> {
    if let Model::Bug(Bug::Int32Offset(wrap)) = model {
        // The right positions through the wrong blocks: the contract's
        // attention over the table the wrapped offsets land on (the
        // batch's own where nothing is placed high and every offset fits).
        let wrapped = inputs.tensors.read_wrapped(wrap).map(|tensors| Inputs {
            tensors,
            format: inputs.format,
            k_scale: inputs.k_scale,
            v_scale: inputs.v_scale,
        });
        return evaluate_rows(wrapped.as_ref().unwrap_or(inputs), Model::Exact, rows);
    }
    inputs.tensors.assert_lengths();
    let batch = &inputs.tensors.batch;
    let mut wanted = vec![rows.is_none(); batch.total_new()];
    for &row in rows.unwrap_or(&[]) {
        wanted[row] = true;
    }
    let mut out = vec![0.0; batch.q_elems()];
    for seq in 0..batch.num_seqs() {
        let start = batch.start(seq);
        if !wanted[start..start + batch.new[seq]].contains(&true) {
            continue;
        }
        let kv = SequenceKv::gather(inputs, seq, model);
        let rows = &mut out
            [LAYOUT.head_index(start, 0, 0)..LAYOUT.head_index(start + batch.new[seq], 0, 0)];
        rows.par_chunks_mut(GROUP * DH).enumerate().for_each_init(
            Vec::new,
            |scratch, (task, group_out)| {
                let (token, kv_head) = (task / HKV, task % HKV);
                if wanted[start + token] {
                    kv.row_group(inputs, start + token, token, kv_head, scratch, group_out);
                }
            },
        );
    }
    out
}

/// The largest `|v|` each (row, head) sees, laid out `[T][32]`: what
/// scales the absolute part of the tolerance ([`super::tolerance`]).
pub fn value_scales(inputs: &Inputs) -> Vec<f64> {
    inputs.tensors.assert_lengths();
    let batch = &inputs.tensors.batch;
    let mut scales = vec![0.0; batch.total_new() * HQ];
    for seq in 0..batch.num_seqs() {
        let kv = SequenceKv::gather(inputs, seq, Model::Exact);
        let start = batch.start(seq);
        for token in 0..batch.new[seq] {
            let i = kv.context + token;
            for kv_head in 0..HKV {
                let largest = kv
                    .positions
                    .iter()
                    .filter(|p| p.pos <= i && kv.sees(batch.window(), i, p.pos))
                    .flat_map(|p| &p.values[kv_head * DH..(kv_head + 1) * DH])
                    .fold(0.0f64, |m, v| m.max(v.abs()));
                let row = (start + token) * HQ + kv_head * GROUP;
                scales[row..row + GROUP].fill(largest);
            }
        }
    }
    scales
}

/// One key or value as the (possibly buggy) kernel sees it.
struct Position {
    pos: usize,
    /// `[HKV][DH]` keys and values.
    keys: Vec<f64>,
    values: Vec<f64>,
}

/// One sequence's keys and values in the order the kernel walks them.
struct SequenceKv {
    context: usize,
    model: Model,
    /// The cached walk (positions below the context; one more under
    /// [`Bug::OneKeyTooMany`]), then the new tokens.
    positions: Vec<Position>,
}

impl SequenceKv {
    fn gather(inputs: &Inputs, seq: usize, model: Model) -> SequenceKv {
        let batch = &inputs.tensors.batch;
        let context = Misreading::context(model.misreading(), batch.context[seq], batch.new[seq]);
        let bug = match model {
            Model::Bug(bug) => Some(bug),
            _ => None,
        };
        // The kernel's cache walk ends at the context; the bug reads one more.
        let cached = match bug {
            Some(Bug::OneKeyTooMany) => context + 1,
            _ => context,
        };
        let format = match bug {
            Some(Bug::FormatIgnored) => KvFormat::E5m2,
            Some(Bug::FormatAssumedE4m3) => KvFormat::E4m3,
            _ => inputs.format,
        };
        let (k_scale, v_scale) = match bug {
            Some(Bug::KScaleIgnored) => (1.0, inputs.v_scale),
            Some(Bug::ScalesSwapped) => (inputs.v_scale, inputs.k_scale),
            Some(Bug::VScaleTwice) => (inputs.k_scale, inputs.v_scale * inputs.v_scale),
            Some(Bug::VScaleIgnored) => (inputs.k_scale, 1.0),
            _ => (inputs.k_scale, inputs.v_scale),
        };
        let round = |x: f64| match model {
            Model::SeedLike => f64::from(bf16::round(x as f32)),
            _ => x,
        };
        let dequantise =
            |byte: u8, scale: f32| round(f64::from(format.decode(byte)) * f64::from(scale));
        let mut positions = Vec::with_capacity(cached + batch.new[seq]);
        for pos in 0..cached {
            // A walk past the context may run past the sequence's table
            // row, and past the table: that reads the guard band, NaN.
            let table = table_index(seq, batch.max_blocks_per_seq, pos);
            let block = batch.block_table.get(table).map(|&b| b as usize);
            let slot = pos % BLOCK;
            let read = |cache: &[u8], at: Option<usize>, scale: f32| {
                at.and_then(|at| cache.get(at))
                    .map_or(f64::NAN, |&byte| dequantise(byte, scale))
            };
            let mut keys = vec![0.0; HKV * DH];
            let mut values = vec![0.0; HKV * DH];
            for g in 0..HKV {
                for d in 0..DH {
                    let k_at = block.map(|block| match bug {
                        Some(Bug::XAssumed8) => LAYOUT_X8.k_cache_index(block, g, d, slot),
                        _ => LAYOUT.k_cache_index(block, g, d, slot),
                    });
                    keys[g * DH + d] = read(&inputs.tensors.k_cache, k_at, k_scale);
                    let v_at = block.map(|block| LAYOUT.v_cache_index(block, g, d, slot));
                    values[g * DH + d] = read(&inputs.tensors.v_cache, v_at, v_scale);
                }
            }
            positions.push(Position { pos, keys, values });
        }
        let start = batch.start(seq);
        for token in 0..batch.new[seq] {
            let row = start + token;
            let read = |data: &[f32]| -> Vec<f64> {
                data[LAYOUT.kv_index(row, 0, 0)..LAYOUT.kv_index(row + 1, 0, 0)]
                    .iter()
                    .map(|&x| f64::from(x))
                    .collect()
            };
            positions.push(Position {
                pos: context + token,
                keys: read(&inputs.tensors.k_new),
                values: read(&inputs.tensors.v_new),
            });
        }
        SequenceKv {
            context,
            model,
            positions,
        }
    }

    /// Whether the row at position `i` sees position `j <= i`.
    fn sees(&self, window: Option<usize>, i: usize, j: usize) -> bool {
        match (window, self.model) {
            (None, _) => true,
            (Some(w), Model::Bug(Bug::WindowOffByOne)) => i - j <= w,
            (Some(w), _) => i - j < w,
        }
    }

    /// The scores of the positions the row at `row` (token `token`) sees
    /// for query head `head`, each with its index in `positions`; returns
    /// the KV head its keys and values are read from.
    fn visible_scores(
        &self,
        inputs: &Inputs,
        row: usize,
        token: usize,
        head: usize,
        scores: &mut Vec<(f64, usize)>,
    ) -> usize {
        let i = self.context + token;
        let window = inputs.tensors.batch.window();
        let seed_like = self.model == Model::SeedLike;
        let source = Misreading::kv_head(self.model.misreading(), head);
        let query =
            &inputs.tensors.q[LAYOUT.head_index(row, head, 0)..LAYOUT.head_index(row, head, DH)];
        let slope = inputs
            .tensors
            .alibi_slopes
            .as_ref()
            .map(|s| f64::from(s[head]));
        scores.clear();
        for (at, position) in self.positions.iter().enumerate() {
            let j = position.pos;
            if j > i || !self.sees(window, i, j) {
                continue;
            }
            let key = &position.keys[source * DH..(source + 1) * DH];
            let mut score = if seed_like {
                let dot: f32 = query.iter().zip(key).map(|(&q, &k)| q * k as f32).sum();
                f64::from(dot * SCALE_F32)
            } else {
                query
                    .iter()
                    .zip(key)
                    .map(|(&q, &k)| f64::from(q) * k)
                    .sum::<f64>()
                    * SCALE
            };
            if let Some(slope) = slope {
                let bias = slope * (j as f64 - i as f64);
                score += match self.model {
                    Model::Bug(Bug::AlibiSignFlipped) => -bias,
                    _ => bias,
                };
            }
            scores.push((score, at));
        }
        source
    }

    /// The four query heads of `kv_head` for the row at `row` (token `token`).
    fn row_group(
        &self,
        inputs: &Inputs,
        row: usize,
        token: usize,
        kv_head: usize,
        scores: &mut Vec<(f64, usize)>,
        out_group: &mut [f64],
    ) {
        let seed_like = self.model == Model::SeedLike;
        for (member, out_head) in out_group.chunks_exact_mut(DH).enumerate() {
            let head = kv_head * GROUP + member;
            let source = self.visible_scores(inputs, row, token, head, scores);
            // NaN scores (stray NaN bytes) must reach the sums, as on a GPU.
            let max = match self.model {
                Model::Bug(Bug::MissingMaxSubtraction) => 0.0,
                _ => scores.iter().map(|s| s.0).fold(f64::NEG_INFINITY, f64::max),
            };
            let mut denominator = 0.0;
            out_head.fill(0.0);
            for &(score, at) in scores.iter() {
                let weight = match self.model {
                    // The kernel's expf: past f32's range it is infinite.
                    Model::Bug(Bug::MissingMaxSubtraction) => {
                        f64::from(((score - max) as f32).exp())
                    }
                    Model::SeedLike => f64::from(((score - max) as f32).exp()),
                    _ => (score - max).exp(),
                };
                denominator += weight;
                let p = match seed_like {
                    true => f64::from(bf16::round(weight as f32)),
                    false => weight,
                };
                let value = &self.positions[at].values[source * DH..(source + 1) * DH];
                for (o, &v) in out_head.iter_mut().zip(value) {
                    *o = if seed_like {
                        f64::from(*o as f32 + (p * v) as f32)
                    } else {
                        *o + p * v
                    };
                }
            }
            if self.model != Model::Bug(Bug::MissingDivision) {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Listed rows are the whole answer's rows; the others are left 0.
    #[test]
    fn listed_rows_are_the_whole_answer_s_rows() {
        use crate::lab::paged_prefill_fp8::cases::{embedded_cases, generate};
        let case = embedded_cases().into_iter().nth(1).expect("a case");
        let inputs = generate(&case, 4).unwrap().inputs;
        let whole = attention(&inputs);
        let last = inputs.tensors.batch.total_new() - 1;
        let some = attention_of_rows(&inputs, Some(&[last, 0]));
        let row = |out: &[f64], r: usize| {
            out[LAYOUT.head_index(r, 0, 0)..LAYOUT.head_index(r + 1, 0, 0)].to_vec()
        };
        assert_eq!(row(&some, last), row(&whole, last));
        assert_eq!(row(&some, 0), row(&whole, 0));
        assert!(last > 1 && row(&some, 1).iter().all(|&x| x == 0.0));
        assert_eq!(attention_of_rows(&inputs, None), whole);
    }

    /// The GPU's tiled reference sums in another order than this oracle
    /// (tiles of keys, a running maximum): its CPU port, on every shipped
    /// case, gives this oracle's answer to 1e-12.
    #[test]
    fn the_tiled_order_of_sums_gives_the_oracle_s_answer() {
        use crate::lab::paged::tiled::assert_tiled_order_gives;
        use crate::lab::paged_prefill_fp8::cases::{embedded_cases, generate};
        let mut checked = 0;
        for case in embedded_cases() {
            let inputs = generate(&case, 11).unwrap().inputs;
            let exact = attention(&inputs);
            let batch = &inputs.tensors.batch;
            let mut scores = Vec::new();
            for seq in 0..batch.num_seqs() {
                let kv = SequenceKv::gather(&inputs, seq, Model::Exact);
                for token in 0..batch.new[seq] {
                    let row = batch.start(seq) + token;
                    for head in 0..HQ {
                        let source = kv.visible_scores(&inputs, row, token, head, &mut scores);
                        let visible: Vec<(usize, f64, &[f64])> = scores
                            .iter()
                            .map(|&(score, at)| {
                                let position = &kv.positions[at];
                                (
                                    position.pos,
                                    score,
                                    &position.values[source * DH..(source + 1) * DH],
                                )
                            })
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
    use crate::lab::paged_prefill_fp8::{Batch, PrefillTensors, FP8_NAN};

    /// Two sequences; every q and K zero (uniform softmax); each value holds
    /// its position, the cached ones as FP8 bytes scaled by `vScale` = 0.5.
    fn uniform(window: i32, format: KvFormat) -> Inputs {
        let mut batch = Batch::from_lengths(LAYOUT, vec![3, 0], vec![2, 2], window, false, 1, 3);
        batch.block_table = vec![2, 0];
        let mut v_cache = vec![FP8_NAN; batch.cache_elems()];
        let mut k_cache = v_cache.clone();
        for pos in 0..3 {
            for g in 0..HKV {
                for d in 0..DH {
                    v_cache[LAYOUT.v_cache_index(2, g, d, pos)] = format.encode(2.0 * pos as f32);
                    k_cache[LAYOUT.k_cache_index(2, g, d, pos)] = 0;
                }
            }
        }
        let mut v_new = vec![0.0; batch.kv_new_elems()];
        for row in 0..batch.total_new() {
            let (_, pos) = batch.sequence_of_row(row);
            v_new[LAYOUT.kv_index(row, 0, 0)..LAYOUT.kv_index(row + 1, 0, 0)].fill(pos as f32);
        }
        Inputs {
            tensors: PrefillTensors {
                q: vec![0.0; batch.q_elems()],
                k_new: vec![0.0; batch.kv_new_elems()],
                v_new,
                k_cache,
                v_cache,
                alibi_slopes: None,
                batch,
            },
            format,
            k_scale: 0.25,
            v_scale: 0.5,
        }
    }

    fn at(out: &[f64], row: usize, head: usize) -> f64 {
        out[LAYOUT.head_index(row, head, 100)]
    }

    #[test]
    fn uniform_scores_average_the_visible_dequantised_values() {
        for format in KvFormat::ALL {
            let out = attention(&uniform(0, format));
            assert_eq!(at(&out, 0, 0), 1.5); // positions 0..=3
            assert_eq!(at(&out, 1, 31), 2.0);
            assert_eq!(at(&out, 2, 5), 0.0);
            assert_eq!(at(&out, 3, 5), 0.5);
            let out = attention(&uniform(2, format));
            assert_eq!(at(&out, 0, 0), 2.5); // keys 2, 3
        }
    }

    #[test]
    fn the_extra_cached_key_reads_an_unused_slot() {
        let mut inputs = uniform(0, KvFormat::E4m3);
        // Sequence 1's (unused) table entry names sequence 0's block.
        inputs.tensors.batch.block_table = vec![2, 2];
        let out = evaluate(&inputs, Model::Bug(Bug::OneKeyTooMany));
        // Position 3 of block 2 is unused: NaN. Sequence 1 reads its table
        // entry 0 (block 2, sequence 0's), slot 0: a foreign but finite key.
        assert!(at(&out, 0, 0).is_nan());
        // Its row at position 1 then averages that key's value 0 with its own 0 and 1.
        assert!(
            (at(&out, 3, 0) - 1.0 / 3.0).abs() < 1e-12,
            "{}",
            at(&out, 3, 0)
        );
    }

    #[test]
    fn huge_scores_do_not_overflow_but_do_without_the_max() {
        let mut inputs = uniform(0, KvFormat::E5m2);
        inputs.tensors.q.iter_mut().for_each(|x| *x = 8.0);
        inputs.tensors.k_new.iter_mut().for_each(|x| *x = 8.0);
        let out = attention(&inputs);
        // Row 3: both keys score 8 * 8 * 128 * scale = 724; average of 0 and 1.
        assert_eq!(at(&out, 3, 0), 0.5);
        let bad = evaluate(&inputs, Model::Bug(Bug::MissingMaxSubtraction));
        assert!(!at(&bad, 3, 0).is_finite());
    }

    #[test]
    fn the_seed_like_model_stays_close_and_rounds_to_bf16() {
        let inputs = uniform(0, KvFormat::E4m3);
        let exact = attention(&inputs);
        let seed = evaluate(&inputs, Model::SeedLike);
        assert!(seed.iter().all(|&x| bf16::is_exact(x as f32)));
        for (s, e) in seed.iter().zip(&exact) {
            assert!((s - e).abs() <= 1e-2 * e.abs() + 1e-6, "{s} {e}");
        }
    }
}
