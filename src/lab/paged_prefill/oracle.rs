//! The reference answer for the paged lab, in float64: the family's
//! attention ([`crate::lab::paged::attention`]) over fp32 tensors.
//!
//! The oracle follows the contract's semantics literally rather than the
//! way a kernel would compute them, and the same function, with a [`Model`]
//! knob, is the CPU model of each planted bug and of each misreading the
//! diagnosis tries ([`Misreading`]): a bug model differs from the oracle in
//! exactly the line the bug is about.

use super::bugs::Bug;
use super::contract::{Inputs, SCALE};
use crate::lab::paged::attention::{self, CacheWalk, Decoding, Reading, WindowRule};
use crate::lab::paged::misread::Misreading;

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
    /// The contract as this model reads it.
    fn reading(self) -> Reading {
        let bug = match self {
            Model::Exact => return Reading::CONTRACT,
            Model::Misread(misreading) => return Reading::misread(misreading),
            Model::Bug(bug) => bug,
        };
        let mut reading = Reading::CONTRACT;
        match bug {
            Bug::BlockTableIgnored => reading.block_table_ignored = true,
            Bug::XAssumed8 => reading.k_packing = Some(8),
            Bug::WindowOffByOne => reading.window = WindowRule::OneTooWide,
            Bug::AlibiSignFlipped => reading.alibi_flipped = true,
            Bug::CacheForNewTokens => reading.walk = CacheWalk::EveryPosition,
            Bug::QStartShifted => reading.q_start_shifted = true,
            Bug::MissingDivision => reading.normalised = false,
            Bug::MaskPrecedence => reading.window = WindowRule::CachedKeysUnwindowed,
            Bug::VTokenMajor => reading.v_token_major = true,
            Bug::PartialBlockDropped => reading.partial_block_dropped = true,
            Bug::Int32Offset(wrap) => reading.wrapped = Some(wrap),
        }
        reading
    }
}

fn widen(x: f32) -> f64 {
    f64::from(x)
}

/// fp32 elements, read as they are.
pub const DECODING: Decoding<'static, f32> = Decoding {
    scale: SCALE as f32,
    key: &widen,
    value: &widen,
};

/// Exact attention of the batch, laid out like `out` (`[T][32][64]`).
///
/// With `rows`, only those rows of `out` are computed (the rest stay 0.0):
/// the engine samples rows of large outputs.
pub fn attention(inputs: &Inputs, rows: Option<&[usize]>) -> Vec<f64> {
    evaluate(inputs, rows, Model::Exact, 0.0)
}

/// What [`evaluate`] can leave in a row no sequence writes, to tell it from
/// a computed NaN: a value no model computes (its outputs are weighted
/// means of finite values, or NaN).
pub const NOT_WRITTEN: f64 = f64::NEG_INFINITY;

/// What `model` writes into `rows` (every row when `None`); rows no
/// sequence writes (only possible under [`Bug::QStartShifted`]) and rows
/// left out keep `unwritten`.
pub fn evaluate(inputs: &Inputs, rows: Option<&[usize]>, model: Model, unwritten: f64) -> Vec<f64> {
    attention::evaluate(inputs, &DECODING, model.reading(), rows, unwritten)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::paged_prefill::contract::{Batch, DH, GROUP, HKV, HQ, LAYOUT};

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
        use crate::lab::paged::attention::assert_tiled_order_gives_the_oracle;
        use crate::lab::paged_prefill::cases::{generate, whole_oracle_cases};
        let checked: usize = whole_oracle_cases()
            .iter()
            .map(|case| {
                let inputs = generate(case, 11).unwrap().inputs;
                let exact = attention(&inputs, None);
                assert_tiled_order_gives_the_oracle(&inputs, &DECODING, &exact, &case.name)
            })
            .sum();
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
