//! The float64 oracle over the dequantised cache: the family's attention
//! ([`crate::lab::paged::attention`]) with each cached byte decoded
//! exactly (`decode(byte) * scale` is exact in f64), and the same
//! definition with one knob turned: each planted bug ([`Model`]), the seed's
//! own arithmetic, and the misreadings the diagnosis tries ([`Misreading`]).
//! q and K are exact bf16 and FP8 values, so each product is exact in f64
//! and what is left is summation rounding far below the tolerance; the
//! golden case proves it.

use super::bugs::Bug;
use super::{Inputs, KvFormat, SCALE_F32};
use crate::lab::paged::attention::{self, Arithmetic, CacheWalk, Decoding, Reading, WindowRule};
use crate::lab::paged::misread::Misreading;

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
    /// The contract as this model reads it, but for how bytes are decoded ([`Model::decoded`]).
    fn reading(self) -> Reading {
        let mut reading = Reading::CONTRACT;
        let bug = match self {
            Model::Exact => return reading,
            Model::Misread(misreading) => return Reading::misread(misreading),
            Model::SeedLike => {
                reading.arithmetic = Arithmetic::SeedBf16;
                return reading;
            }
            Model::Bug(bug) => bug,
        };
        match bug {
            Bug::XAssumed8 => reading.k_packing = Some(8),
            Bug::OneKeyTooMany => reading.walk = CacheWalk::OnePastContext,
            Bug::MissingMaxSubtraction => reading.max_subtracted = false,
            Bug::WindowOffByOne => reading.window = WindowRule::OneTooWide,
            Bug::MissingDivision => reading.normalised = false,
            Bug::AlibiSignFlipped => reading.alibi_flipped = true,
            Bug::Int32Offset(wrap) => reading.wrapped = Some(wrap),
            Bug::KScaleIgnored
            | Bug::ScalesSwapped
            | Bug::FormatIgnored
            | Bug::FormatAssumedE4m3
            | Bug::VScaleTwice
            | Bug::VScaleIgnored => {}
        }
        reading
    }

    /// The format and the (K, V) scales the model decodes the cache with.
    fn decoded(self, inputs: &Inputs) -> (KvFormat, f32, f32) {
        let (format, k, v) = (inputs.format, inputs.k_scale, inputs.v_scale);
        match self {
            Model::Bug(Bug::FormatIgnored) => (KvFormat::E5m2, k, v),
            Model::Bug(Bug::FormatAssumedE4m3) => (KvFormat::E4m3, k, v),
            Model::Bug(Bug::KScaleIgnored) => (format, 1.0, v),
            Model::Bug(Bug::ScalesSwapped) => (format, v, k),
            Model::Bug(Bug::VScaleTwice) => (format, k, v * v),
            Model::Bug(Bug::VScaleIgnored) => (format, k, 1.0),
            _ => (format, k, v),
        }
    }

    /// `run` with the cache decoded as this model decodes it.
    fn with_decoding<T>(self, inputs: &Inputs, run: impl FnOnce(&Decoding<'_, u8>) -> T) -> T {
        let (format, k_scale, v_scale) = self.decoded(inputs);
        let key = |byte: u8| f64::from(format.decode(byte)) * f64::from(k_scale);
        let value = |byte: u8| f64::from(format.decode(byte)) * f64::from(v_scale);
        run(&Decoding {
            scale: SCALE_F32,
            key: &key,
            value: &value,
        })
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

/// What `model` computes for `rows` only (every row when `None`), laid out
/// like `out`, the rest 0.
pub fn evaluate_rows(inputs: &Inputs, model: Model, rows: Option<&[usize]>) -> Vec<f64> {
    model.with_decoding(inputs, |decoding| {
        attention::evaluate(&inputs.tensors, decoding, model.reading(), rows, 0.0)
    })
}

/// The largest `|v|` each (row, head) sees, laid out `[T][32]`: what
/// scales the absolute part of the tolerance ([`super::tolerance`]).
pub fn value_scales(inputs: &Inputs) -> Vec<f64> {
    Model::Exact.with_decoding(inputs, |decoding| {
        attention::largest_visible_values(&inputs.tensors, decoding)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::paged_prefill_fp8::{bf16, DH, HKV, LAYOUT};

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
        use crate::lab::paged::attention::assert_tiled_order_gives_the_oracle;
        use crate::lab::paged_prefill_fp8::cases::{embedded_cases, generate};
        let checked: usize = embedded_cases()
            .iter()
            .map(|case| {
                let inputs = generate(case, 11).unwrap().inputs;
                let exact = attention(&inputs);
                Model::Exact.with_decoding(&inputs, |decoding| {
                    assert_tiled_order_gives_the_oracle(
                        &inputs.tensors,
                        decoding,
                        &exact,
                        &case.name,
                    )
                })
            })
            .sum();
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
