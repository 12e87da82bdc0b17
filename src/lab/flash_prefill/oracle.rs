//! The reference answer: exact causal prefix attention in float64.
//!
//! Every score of a row is computed and kept (two passes: max, then
//! `exp(s - max)`), so the softmax is the textbook one and cannot overflow,
//! however large the planted scores. The inputs are `f32`, so each product
//! `q[d] * k[d]` is exact in `f64`; what rounding remains is far below the
//! lab's tolerance, which is what lets this grade a kernel.
//!
//! The work is shaped for a CPU: K and V are split per KV head into
//! contiguous `f64` rows, and one task serves the four query heads of a KV
//! group for one query row, so each key and value row is loaded once for
//! four heads. Tasks run in parallel with rayon; each task sums in a fixed
//! order, so the result does not depend on the thread count.

use rayon::prelude::*;

use super::contract::{Shape, DH, GROUP, HKV, HQ, SCALE};

/// Exact attention of `q` against `k`/`v` for `shape`, laid out like `out`.
///
/// Query row `i` sits at position `prefix_len + i` and sees keys `0..=prefix_len + i`;
/// query head `h` reads KV head `h / GROUP`.
///
/// # Panics
/// When a slice's length does not match `shape` (a caller bug, not bad data).
pub fn attention(shape: Shape, q: &[f32], k: &[f32], v: &[f32]) -> Vec<f64> {
    let every_row: Vec<usize> = (0..shape.chunk_len).collect();
    attention_rows(shape, q, k, v, &every_row)
}

/// Exact attention for some query rows only (every head of each), laid out
/// like `out` restricted to those rows, in the order given. This is what lets
/// a large output computed elsewhere be spot-checked at a fraction of the cost.
///
/// # Panics
/// When a slice's length does not match `shape`, or a row is past the chunk.
pub fn attention_rows(shape: Shape, q: &[f32], k: &[f32], v: &[f32], rows: &[usize]) -> Vec<f64> {
    assert_eq!(q.len(), shape.q_elems(), "q does not match {shape:?}");
    assert_eq!(k.len(), shape.kv_elems(), "kCache does not match {shape:?}");
    assert_eq!(v.len(), shape.kv_elems(), "vCache does not match {shape:?}");
    assert!(
        rows.iter().all(|&r| r < shape.chunk_len),
        "row past the chunk of {shape:?}"
    );
    let keys = split_by_kv_head(k, shape.seq_len());
    let values = split_by_kv_head(v, shape.seq_len());

    let mut out = vec![0.0; rows.len() * HQ * DH];
    // Heads 4g..4g+3 of one row are adjacent in `out`: one chunk per (row, KV group).
    out.par_chunks_mut(GROUP * DH).enumerate().for_each_init(
        Vec::new,
        |scores, (task, out_group)| {
            let (row, kv_head) = (rows[task / HKV], task % HKV);
            let visible = shape.prefix_len + row + 1;
            let group = GroupTask {
                queries: scaled_queries(q, row, kv_head),
                keys: &keys[kv_head][..visible * DH],
                values: &values[kv_head][..visible * DH],
            };
            group.run(scores, out_group);
        },
    );
    out
}

/// One query row's four heads against the visible rows of their KV head.
struct GroupTask<'a> {
    /// The four query vectors, already multiplied by [`SCALE`].
    queries: [[f64; DH]; GROUP],
    /// Visible key rows, `DH` values each.
    keys: &'a [f64],
    /// Visible value rows, `DH` values each.
    values: &'a [f64],
}

impl GroupTask<'_> {
    fn run(&self, scores: &mut Vec<f64>, out_group: &mut [f64]) {
        let visible = self.keys.len() / DH;
        scores.clear();
        scores.resize(GROUP * visible, 0.0);
        for (key, key_row) in self.keys.chunks_exact(DH).enumerate() {
            for (head, query) in self.queries.iter().enumerate() {
                scores[head * visible + key] = dot(query, key_row);
            }
        }
        let mut denominators = [0.0; GROUP];
        for (head_scores, denominator) in scores.chunks_exact_mut(visible).zip(&mut denominators) {
            *denominator = exponentiate_shifted(head_scores);
        }

        let mut sums = [[0.0; DH]; GROUP];
        for (key, value_row) in self.values.chunks_exact(DH).enumerate() {
            for (head, sum) in sums.iter_mut().enumerate() {
                let weight = scores[head * visible + key];
                for (s, &value) in sum.iter_mut().zip(value_row) {
                    *s += weight * value;
                }
            }
        }
        for ((out_head, sum), denominator) in
            out_group.chunks_exact_mut(DH).zip(&sums).zip(denominators)
        {
            for (o, s) in out_head.iter_mut().zip(sum) {
                *o = s / denominator;
            }
        }
    }
}

/// Replaces scores by `exp(score - max)` and returns their sum (at least 1).
fn exponentiate_shifted(scores: &mut [f64]) -> f64 {
    let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    // Two loops: the sum's fixed order would otherwise keep the exponentials
    // from being computed two at a time.
    for s in scores.iter_mut() {
        *s = exp_nonpositive(*s - max);
    }
    scores.iter().sum()
}

/// Below this, `exp` is under 3.1e-308 and counts as zero next to the weight
/// 1 that the maximum always contributes.
const EXP_UNDERFLOW: f64 = -708.0;

/// `exp(x)` for `x <= 0`, within a few ulp, flushed to 0 below [`EXP_UNDERFLOW`].
///
/// The softmax spends most of its time in `exp`; the library call cannot be
/// vectorised, while this branch-free form can, which halves the oracle's
/// time. It is the usual reduction `x = k ln 2 + r` with `|r| <= ln 2 / 2`
/// (ln 2 split in two so `k ln 2` is exact) and the Taylor series of `e^r`
/// to degree 13, whose first omitted term is below 1e-17.
fn exp_nonpositive(x: f64) -> f64 {
    // Adding 1.5 * 2^52 rounds to an integer and leaves it in the low mantissa bits.
    const ROUNDER: f64 = 6_755_399_441_055_744.0;
    const LN2_HIGH: f64 = 6.931_471_803_691_238e-1;
    const LN2_LOW: f64 = 1.908_214_929_270_587_7e-10;
    const INVERSE_FACTORIALS: [f64; 14] = [
        1.0,
        1.0,
        1.0 / 2.0,
        1.0 / 6.0,
        1.0 / 24.0,
        1.0 / 120.0,
        1.0 / 720.0,
        1.0 / 5_040.0,
        1.0 / 40_320.0,
        1.0 / 362_880.0,
        1.0 / 3_628_800.0,
        1.0 / 39_916_800.0,
        1.0 / 479_001_600.0,
        1.0 / 6_227_020_800.0,
    ];
    let clamped = x.max(EXP_UNDERFLOW);
    let shifted = clamped * std::f64::consts::LOG2_E + ROUNDER;
    let k = shifted - ROUNDER;
    let r = (clamped - k * LN2_HIGH) - k * LN2_LOW;
    let series = INVERSE_FACTORIALS
        .iter()
        .rev()
        .fold(0.0, |acc, &c| acc * r + c);
    // 2^k built from its exponent bits; k >= -1021 keeps it a normal number.
    let k_bits = shifted.to_bits().wrapping_sub(ROUNDER.to_bits());
    let two_to_k = f64::from_bits(k_bits.wrapping_add(1023) << 52);
    if x < EXP_UNDERFLOW {
        0.0
    } else {
        series * two_to_k
    }
}

/// Lanes of independent partial sums: without them every add waits on the
/// previous one, and the dot product runs several times slower.
const LANES: usize = 8;

fn dot(query: &[f64; DH], key_row: &[f64]) -> f64 {
    let mut partial = [0.0; LANES];
    for (q, k) in query.chunks_exact(LANES).zip(key_row.chunks_exact(LANES)) {
        for lane in 0..LANES {
            partial[lane] += q[lane] * k[lane];
        }
    }
    partial.iter().sum()
}

/// The query vectors of heads `GROUP*kv_head ..` of `row`, times [`SCALE`].
///
/// SCALE is a power of two, so the scaling is exact and the scores equal
/// `SCALE * (q . k)` to the last bit.
fn scaled_queries(q: &[f32], row: usize, kv_head: usize) -> [[f64; DH]; GROUP] {
    let mut queries = [[0.0; DH]; GROUP];
    for (offset, query) in queries.iter_mut().enumerate() {
        let start = Shape::q_index(row, GROUP * kv_head + offset, 0);
        for (dst, &src) in query.iter_mut().zip(&q[start..start + DH]) {
            *dst = f64::from(src) * SCALE;
        }
    }
    queries
}

/// `kCache`/`vCache` rearranged to `[kv_head][pos * DH + d]` in `f64`.
fn split_by_kv_head(cache: &[f32], seq_len: usize) -> Vec<Vec<f64>> {
    (0..HKV)
        .map(|kv_head| {
            let mut rows = Vec::with_capacity(seq_len * DH);
            for pos in 0..seq_len {
                let start = Shape::kv_index(pos, kv_head, 0);
                rows.extend(cache[start..start + DH].iter().map(|&x| f64::from(x)));
            }
            rows
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::contract::HQ;
    use super::*;
    use proptest::prelude::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    struct Inputs {
        q: Vec<f32>,
        k: Vec<f32>,
        v: Vec<f32>,
    }

    fn random_inputs(shape: Shape, seed: u64) -> Inputs {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut fill = |n: usize| (0..n).map(|_| rng.random_range(-2.0f32..2.0)).collect();
        Inputs {
            q: fill(shape.q_elems()),
            k: fill(shape.kv_elems()),
            v: fill(shape.kv_elems()),
        }
    }

    fn run(shape: Shape, inputs: &Inputs) -> Vec<f64> {
        attention(shape, &inputs.q, &inputs.k, &inputs.v)
    }

    #[test]
    fn a_single_token_returns_its_own_value_row() {
        let shape = Shape {
            chunk_len: 1,
            prefix_len: 0,
        };
        let inputs = random_inputs(shape, 1);
        let out = run(shape, &inputs);
        for head in 0..HQ {
            for d in 0..DH {
                let expected = f64::from(inputs.v[Shape::kv_index(0, head / GROUP, d)]);
                assert_eq!(out[Shape::q_index(0, head, d)], expected);
            }
        }
    }

    #[test]
    fn two_keys_weigh_by_their_softmax() {
        // Row 0 at position 1 sees keys 0 and 1; q.k/8 gives scores 0 and ln 3,
        // so the weights are 1/4 and 3/4.
        let shape = Shape {
            chunk_len: 1,
            prefix_len: 1,
        };
        let mut inputs = Inputs {
            q: vec![0.0; shape.q_elems()],
            k: vec![0.0; shape.kv_elems()],
            v: vec![0.0; shape.kv_elems()],
        };
        let ln3 = 3.0f64.ln();
        inputs.q[Shape::q_index(0, 5, 0)] = 8.0;
        inputs.k[Shape::kv_index(1, 1, 0)] = ln3 as f32;
        inputs.v[Shape::kv_index(0, 1, 7)] = 4.0;
        inputs.v[Shape::kv_index(1, 1, 7)] = 8.0;
        let out = run(shape, &inputs);
        let score = f64::from(ln3 as f32);
        let expected = (4.0 + 8.0 * score.exp()) / (1.0 + score.exp());
        assert!((out[Shape::q_index(0, 5, 7)] - expected).abs() < 1e-15);
        assert!((expected - 7.0).abs() < 1e-6);
        // Head 4 shares KV head 1 but its query is zero: equal weights.
        assert_eq!(out[Shape::q_index(0, 4, 7)], 6.0);
    }

    #[test]
    fn future_keys_change_nothing() {
        let shape = Shape {
            chunk_len: 9,
            prefix_len: 4,
        };
        let mut inputs = random_inputs(shape, 2);
        let before = run(shape, &inputs);
        // Key 10 is visible from row 6 (position 10) on.
        for kv_head in 0..HKV {
            for d in 0..DH {
                inputs.k[Shape::kv_index(10, kv_head, d)] = 100.0;
                inputs.v[Shape::kv_index(10, kv_head, d)] = -50.0;
            }
        }
        let after = run(shape, &inputs);
        let row_len = HQ * DH;
        assert_eq!(before[..6 * row_len], after[..6 * row_len]);
        for row in 6..9 {
            assert_ne!(
                before[row * row_len..(row + 1) * row_len],
                after[row * row_len..(row + 1) * row_len],
                "row {row} sees key 10"
            );
        }
    }

    #[test]
    fn each_query_head_reads_its_groups_kv_head() {
        let shape = Shape {
            chunk_len: 3,
            prefix_len: 2,
        };
        let mut inputs = random_inputs(shape, 3);
        // Constant values per KV head make every output of a head that constant.
        for pos in 0..shape.seq_len() {
            for kv_head in 0..HKV {
                for d in 0..DH {
                    inputs.v[Shape::kv_index(pos, kv_head, d)] = 10.0 * kv_head as f32 + 1.0;
                }
            }
        }
        let out = run(shape, &inputs);
        for row in 0..shape.chunk_len {
            for head in 0..HQ {
                let expected = 10.0 * (head / GROUP) as f64 + 1.0;
                let got = out[Shape::q_index(row, head, 0)];
                assert!((got - expected).abs() < 1e-12, "head {head}: {got}");
            }
        }
    }

    #[test]
    fn huge_scores_do_not_overflow() {
        let shape = Shape {
            chunk_len: 2,
            prefix_len: 1,
        };
        let mut inputs = random_inputs(shape, 4);
        // Scores of 20*20*64/8 = 3200 are far past exp's f64 range (about 709).
        for d in 0..DH {
            inputs.q[Shape::q_index(1, 0, d)] = 20.0;
            inputs.k[Shape::kv_index(1, 0, d)] = 20.0;
        }
        let out = run(shape, &inputs);
        assert!(out.iter().all(|x| x.is_finite()));
        // The planted key takes all the weight: row 1, head 0 returns value row 1.
        for d in 0..DH {
            let expected = f64::from(inputs.v[Shape::kv_index(1, 0, d)]);
            assert_eq!(out[Shape::q_index(1, 0, d)], expected);
        }
    }

    #[test]
    fn result_does_not_depend_on_thread_count() {
        let shape = Shape {
            chunk_len: 7,
            prefix_len: 5,
        };
        let inputs = random_inputs(shape, 5);
        let single = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap()
            .install(|| run(shape, &inputs));
        assert_eq!(single, run(shape, &inputs));
    }

    #[test]
    fn fast_exp_agrees_with_the_library() {
        let mut worst_ulps = 0.0f64;
        for step in 0..=200_000 {
            let x = -708.0 * f64::from(step) / 200_000.0;
            let expected = x.exp();
            let ulps = (exp_nonpositive(x) - expected).abs() / (expected * f64::EPSILON);
            worst_ulps = worst_ulps.max(ulps);
        }
        assert!(worst_ulps <= 4.0, "worst error {worst_ulps} ulp");
        assert_eq!(exp_nonpositive(0.0), 1.0);
        assert_eq!(exp_nonpositive(-0.0), 1.0);
        assert_eq!(exp_nonpositive(-708.5), 0.0);
        assert_eq!(exp_nonpositive(f64::NEG_INFINITY), 0.0);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]

        #[test]
        fn outputs_are_convex_combinations_of_visible_values(
            chunk_len in 1usize..6,
            prefix_len in 0usize..6,
            seed in any::<u64>(),
        ) {
            let shape = Shape { chunk_len, prefix_len };
            let inputs = random_inputs(shape, seed);
            let out = run(shape, &inputs);
            for row in 0..chunk_len {
                let visible = prefix_len + row + 1;
                for head in 0..HQ {
                    for d in 0..DH {
                        let column = (0..visible)
                            .map(|pos| f64::from(inputs.v[Shape::kv_index(pos, head / GROUP, d)]));
                        let low = column.clone().fold(f64::INFINITY, f64::min);
                        let high = column.fold(f64::NEG_INFINITY, f64::max);
                        let got = out[Shape::q_index(row, head, d)];
                        prop_assert!(low - 1e-12 <= got && got <= high + 1e-12,
                            "row {row} head {head} dim {d}: {got} outside [{low}, {high}]");
                    }
                }
            }
        }
    }
}
