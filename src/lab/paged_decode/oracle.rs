//! The reference answer for the decode lab, in float64.
//!
//! For each (sequence, query head) the oracle reads the sequence's keys
//! and values through the block table, one position at a time, and takes
//! a textbook two-pass softmax over them. Inputs are f32, so each product
//! is exact in f64 and the remaining rounding is far below the tolerance;
//! the golden case proves it.
//!
//! With a [`Bug`] the same function is the CPU model of a planted kernel:
//! the bug changes the one line it is about (which key is read, which
//! keys are counted, the bias, the final division), and the two combine
//! bugs replace the single softmax by the reference's own partitions
//! ([`super::partition_len`]) combined the wrong way. One implementation
//! keeps "the cases catch the model" a statement about the cases.

use rayon::prelude::*;

use super::bugs::Bug;
use super::{partition_len, partitions, Batch, Inputs, BLOCK, DH, GROUP, HQ, MAX_SPLITS, SCALE};
use crate::lab::paged::layout::CacheLayout;

/// Partitions the reference kernel launches (`splits=16`): the split bug
/// models follow it.
pub const REFERENCE_SPLITS: usize = MAX_SPLITS;

/// Exact attention of the batch, laid out like `out` (`[numSeqs][32][64]`).
///
/// With `seqs`, only those sequences' rows are computed (the rest stay
/// 0.0): the engine samples rows of large outputs.
///
/// # Panics
/// When a tensor's length disagrees with the batch or a sequence is out of
/// range (caller bugs: generated and loaded inputs are validated).
pub fn attention(inputs: &Inputs, seqs: Option<&[usize]>) -> Vec<f64> {
    evaluate(inputs, seqs, None, REFERENCE_SPLITS)
}

/// The shared core of the oracle and the bug models; `splits` is the
/// partitions of the kernel a combine bug's model follows (its `splits=`).
pub(super) fn evaluate(
    inputs: &Inputs,
    seqs: Option<&[usize]>,
    bug: Option<Bug>,
    splits: usize,
) -> Vec<f64> {
    let batch = &inputs.batch;
    check_lengths(inputs);
    let mut out = vec![0.0; batch.q_elems()];
    let wanted: Vec<usize> =
        seqs.map_or_else(|| (0..batch.num_seqs()).collect(), <[usize]>::to_vec);
    let tasks: Vec<(usize, usize)> = wanted
        .iter()
        .flat_map(|&s| {
            assert!(s < batch.num_seqs(), "sequence {s} past numSeqs");
            (0..HQ).map(move |h| (s, h))
        })
        .collect();
    let results: Vec<[f64; DH]> = tasks
        .par_iter()
        .map(|&(seq, head)| head_output(inputs, seq, head, bug, splits))
        .collect();
    for (&(seq, head), result) in tasks.iter().zip(&results) {
        let at = Batch::q_index(seq, head, 0);
        out[at..at + DH].copy_from_slice(result);
    }
    out
}

fn check_lengths(inputs: &Inputs) {
    let b = &inputs.batch;
    assert_eq!(inputs.q.len(), b.q_elems(), "q does not match the batch");
    assert_eq!(
        inputs.k_cache.len(),
        b.cache_elems(),
        "kCache does not match"
    );
    assert_eq!(
        inputs.v_cache.len(),
        b.cache_elems(),
        "vCache does not match"
    );
    assert_eq!(
        b.block_table.len(),
        b.num_seqs() * b.max_blocks_per_seq,
        "blockTable"
    );
    assert_eq!(
        inputs.alibi_slopes.is_some(),
        b.alibi,
        "ALiBi slopes present exactly when the batch says so"
    );
}

/// One key's score and value, as the (possibly buggy) kernel reads them.
struct Key {
    score: f64,
    value: [f64; DH],
}

/// The keys query head `head` of sequence `seq` attends to, in position order.
fn keys(inputs: &Inputs, seq: usize, head: usize, bug: Option<Bug>) -> Vec<Key> {
    let batch = &inputs.batch;
    let len = batch.len_of(seq);
    let kv_head = match bug {
        Some(Bug::WrongGqaMap) => head % super::HKV,
        _ => head / GROUP,
    };
    let counted = match bug {
        Some(Bug::LastKeyDropped) => len - 1,
        _ => len,
    };
    let slope = inputs.alibi_slopes.as_ref().map(|s| f64::from(s[head]));
    let query: Vec<f64> = (0..DH)
        .map(|d| f64::from(inputs.q[Batch::q_index(seq, head, d)]) * SCALE)
        .collect();
    // Past the end of a buffer is the guard band: a NaN that shows.
    let read = |data: &[f32], index: usize| data.get(index).map_or(f64::NAN, |&x| f64::from(x));
    (0..counted)
        .map(|j| {
            let block = match bug {
                Some(Bug::BlockTableIgnored) => seq * batch.max_blocks_per_seq + j / BLOCK,
                _ => batch.block_of(seq, j),
            };
            let slot = j % BLOCK;
            let mut value = [0.0; DH];
            let mut score = 0.0;
            for d in 0..DH {
                value[d] = read(
                    &inputs.v_cache,
                    Batch::v_cache_index(block, kv_head, d, slot),
                );
                let k_at = match bug {
                    Some(Bug::XAssumed8) => LAYOUT_X8.k_cache_index(block, kv_head, d, slot),
                    _ => Batch::k_cache_index(block, kv_head, d, slot),
                };
                score += query[d] * read(&inputs.k_cache, k_at);
            }
            if bug == Some(Bug::KIgnored) {
                score = 0.0;
            }
            if let Some(slope) = slope {
                // The contract's bias: relative to the token's own position.
                let distance = j as f64 - (len - 1) as f64;
                score += match bug {
                    Some(Bug::AlibiSignFlipped) => -slope * distance,
                    _ => slope * distance,
                };
            }
            Key { score, value }
        })
        .collect()
}

/// The K cache as a kernel assuming bf16's `X = 8` unpacks it.
const LAYOUT_X8: CacheLayout = CacheLayout::new(DH, 8);

/// Unnormalised softmax state of a run of keys: max, sum and accumulator,
/// both taken relative to the run's own max.
struct Partial {
    max: f64,
    sum: f64,
    acc: [f64; DH],
}

fn partial(keys: &[Key]) -> Partial {
    // NaN scores (stray reads) must not be skipped by the max: they reach
    // the sum below and poison the row, as on a GPU.
    let max = keys.iter().fold(f64::NEG_INFINITY, |m, k| {
        if k.score.is_nan() || m.is_nan() {
            f64::NAN
        } else {
            m.max(k.score)
        }
    });
    let mut acc = [0.0; DH];
    let mut sum = 0.0;
    for key in keys {
        let weight = (key.score - max).exp();
        sum += weight;
        for (a, v) in acc.iter_mut().zip(&key.value) {
            *a += weight * v;
        }
    }
    Partial { max, sum, acc }
}

fn head_output(
    inputs: &Inputs,
    seq: usize,
    head: usize,
    bug: Option<Bug>,
    splits: usize,
) -> [f64; DH] {
    let keys = keys(inputs, seq, head, bug);
    let len = inputs.batch.len_of(seq);
    match bug {
        Some(Bug::CombineUnscaled | Bug::CombineAllSlots) => combined(&keys, len, bug, splits),
        _ => {
            let p = partial(&keys);
            let mut out = p.acc;
            if bug != Some(Bug::MissingDivision) {
                // No key at all (the dropped-key bug on a one-key sequence)
                // is 0 / 0, the NaN the kernel writes.
                out.iter_mut().for_each(|o| *o /= p.sum);
            }
            out
        }
    }
}

/// The reference's split path with one of its combine bugs, for a kernel
/// of `splits` partitions: partitions of [`partition_len`] keys, each
/// normalised by its own sum into a workspace slot, then the slots
/// combined (every one of the workspace's [`MAX_SPLITS`] under
/// [`Bug::CombineAllSlots`], whatever the kernel's split). A sequence of one
/// partition is written directly, with no combine, as the reference does.
fn combined(keys: &[Key], len: usize, bug: Option<Bug>, splits: usize) -> [f64; DH] {
    let used = partitions(len, splits);
    let parts: Vec<Partial> = keys
        .chunks(partition_len(len, splits))
        .map(partial)
        .collect();
    debug_assert_eq!(parts.len(), used);
    if used == 1 {
        let mut out = parts[0].acc;
        out.iter_mut().for_each(|o| *o /= parts[0].sum);
        return out;
    }
    if bug == Some(Bug::CombineAllSlots) && used < MAX_SPLITS {
        // The unused slots still hold the NaN the workspace starts with.
        return [f64::NAN; DH];
    }
    let max = parts
        .iter()
        .map(|p| p.max)
        .fold(f64::NEG_INFINITY, f64::max);
    let mut out = [0.0; DH];
    let mut total = 0.0;
    for p in &parts {
        let rescale = match bug {
            Some(Bug::CombineUnscaled) => 1.0,
            _ => (p.max - max).exp(),
        };
        // The slot holds acc / sum; the combine weighs it by its sum.
        total += rescale * p.sum;
        for (o, a) in out.iter_mut().zip(&p.acc) {
            *o += rescale * p.sum * (a / p.sum);
        }
    }
    out.iter_mut().for_each(|o| *o /= total);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::paged_decode::alibi_slope;

    /// Two sequences with q = k = 0 (uniform softmax) and values that
    /// encode their position, in a shuffled 3-block cache.
    fn uniform_inputs(alibi: bool) -> Inputs {
        let batch = Batch {
            seq_len: vec![20, 3],
            max_blocks_per_seq: 2,
            num_blocks: 5,
            block_table: vec![4, 0, 2, 1],
            alibi,
        };
        let mut v_cache = vec![f32::NAN; batch.cache_elems()];
        let mut k_cache = v_cache.clone();
        for s in 0..2 {
            for pos in 0..batch.len_of(s) {
                let block = batch.block_of(s, pos);
                for g in 0..super::super::HKV {
                    for d in 0..DH {
                        v_cache[Batch::v_cache_index(block, g, d, pos % BLOCK)] = pos as f32;
                        k_cache[Batch::k_cache_index(block, g, d, pos % BLOCK)] = 0.0;
                    }
                }
            }
        }
        Inputs {
            q: vec![0.0; batch.q_elems()],
            k_cache,
            v_cache,
            alibi_slopes: alibi.then(|| (0..HQ).map(alibi_slope).collect()),
            batch,
        }
    }

    #[test]
    fn uniform_scores_average_every_position_through_the_table() {
        let out = attention(&uniform_inputs(false), None);
        assert!((out[Batch::q_index(0, 0, 0)] - 9.5).abs() < 1e-14);
        assert!((out[Batch::q_index(1, 31, 63)] - 1.0).abs() < 1e-14);
    }

    #[test]
    fn alibi_is_relative_to_the_tokens_position() {
        let out = attention(&uniform_inputs(true), None);
        // Sequence 1, head 3 (slope 1/2): weights e^{-(2-j)/2} over 0, 1, 2.
        let w: Vec<f64> = (0..3).map(|j| (-(2.0 - j as f64) / 2.0).exp()).collect();
        let expected = (w[1] + 2.0 * w[2]) / w.iter().sum::<f64>();
        assert!((out[Batch::q_index(1, 3, 5)] - expected).abs() < 1e-14);
    }

    #[test]
    fn only_the_requested_sequences_are_computed() {
        let inputs = uniform_inputs(false);
        let some = attention(&inputs, Some(&[1]));
        assert!(some[..HQ * DH].iter().all(|&x| x == 0.0));
        assert_eq!(some[HQ * DH..], attention(&inputs, None)[HQ * DH..]);
    }

    #[test]
    fn a_correct_combine_equals_the_single_softmax() {
        // The split path with nothing wrong in it (the rescale kept) is the
        // oracle: 600 keys make two partitions of the reference's rule.
        let keys: Vec<Key> = (0..600)
            .map(|j| Key {
                // The second partition's scores sit 3 lower: its max is not the first's.
                score: ((j * 37) % 101) as f64 / 13.0 - if j >= 512 { 3.0 } else { 0.0 },
                value: [j as f64 / 600.0; DH],
            })
            .collect();
        let split = combined(&keys, 600, None, REFERENCE_SPLITS);
        let whole = partial(&keys);
        assert!((split[0] - whole.acc[0] / whole.sum).abs() < 1e-13);
        let unscaled = combined(&keys, 600, Some(Bug::CombineUnscaled), REFERENCE_SPLITS);
        assert!((unscaled[0] - split[0]).abs() > 1e-3);
    }

    #[test]
    fn huge_scores_do_not_overflow() {
        let mut inputs = uniform_inputs(false);
        inputs.q.iter_mut().for_each(|x| *x = 12.0);
        for s in 0..2 {
            let block = inputs.batch.block_of(s, 0);
            for d in 0..DH {
                inputs.k_cache[Batch::k_cache_index(block, 0, d, 1)] = 12.0;
            }
        }
        let out = attention(&inputs, None);
        // Key 1 scores 1152 for KV head 0, the rest 0: all weight on value 1.
        assert!((out[Batch::q_index(0, 2, 0)] - 1.0).abs() < 1e-15);
        assert!(out.iter().all(|x| x.is_finite()));
    }
}
