//! CPU models of the eight planted bugs the contract ships.
//!
//! Each model is the oracle with one knob turned ([`super::oracle`] holds
//! the single implementation), so running a model over the shipped cases
//! is CI's proof that the cases catch the bug, without a GPU. The test at
//! the bottom is that proof: every model must fail exactly the cases the
//! contract's table lists and pass every other one, and the correct model
//! must pass them all.
//!
//! Two refinements of the table are forced by the semantics, not chosen:
//! the kernel reads a cached key only when the key is visible, so "every
//! case with context" means every case where some row *sees* a cached key
//! (a window of 1 hides them all); and a row with a single visible key has
//! a softmax denominator of exactly 1, so the missing division cannot show
//! in a case where every row sees one key. [`Bug::must_fail`] encodes the
//! table with these two readings.

use super::contract::{passes, Batch, Inputs, BLOCK};
use super::oracle::{self, Model};
use crate::lab::paged::high_blocks::Wrap;

/// One planted defect, each the starter kernel with one line wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Bug {
    /// Block `s * maxBlocksPerSeq + pos / B` instead of the table's entry.
    BlockTableIgnored,
    /// The K cache indexed as if `X` were 8 (vLLM issue #6332).
    XAssumed8,
    /// `i - j <= W` instead of `i - j < W`.
    WindowOffByOne,
    /// `slope * (i - j)` instead of `slope * (j - i)`.
    AlibiSignFlipped,
    /// The cache read for every position below `seqLen`, new tokens included.
    CacheForNewTokens,
    /// `qStart[s + 1]` taken as sequence `s`'s first row.
    QStartShifted,
    /// The final `acc / l` left out.
    MissingDivision,
    /// `j < ctx || j <= i && inWindow` instead of `(j < ctx || j <= i) && inWindow`.
    MaskPrecedence,
    /// The V cache read token-major (`[block][head][slot][dim]`), not `[block][head][dim][slot]`.
    VTokenMajor,
    /// The walk over cached keys covers whole blocks only: a context's last, partial block is skipped.
    PartialBlockDropped,
    /// Cache offsets computed in 32 bits, `int` or `unsigned`: past 2^31
    /// (2^32) elements they wrap, and a block is read from where they land.
    Int32Offset(Wrap),
}

impl Bug {
    pub const ALL: [Bug; 12] = [
        Bug::BlockTableIgnored,
        Bug::XAssumed8,
        Bug::WindowOffByOne,
        Bug::AlibiSignFlipped,
        Bug::CacheForNewTokens,
        Bug::QStartShifted,
        Bug::MissingDivision,
        Bug::MaskPrecedence,
        Bug::VTokenMajor,
        Bug::PartialBlockDropped,
        Bug::Int32Offset(Wrap::Signed),
        Bug::Int32Offset(Wrap::Unsigned),
    ];

    /// A short name, as the planted kernels are named.
    pub fn name(self) -> &'static str {
        match self {
            Bug::BlockTableIgnored => "block-table-ignored",
            Bug::XAssumed8 => "x-assumed-8",
            Bug::WindowOffByOne => "window-off-by-one",
            Bug::AlibiSignFlipped => "alibi-sign",
            Bug::CacheForNewTokens => "cache-for-new-tokens",
            Bug::QStartShifted => "wrong-qstart",
            Bug::MissingDivision => "missing-final-division",
            Bug::MaskPrecedence => "mask-precedence",
            Bug::VTokenMajor => "v-token-major",
            Bug::PartialBlockDropped => "partial-block-dropped",
            Bug::Int32Offset(wrap) => wrap.bug_name(),
        }
    }

    /// The bug whose [`Bug::name`] this is.
    pub fn named(name: &str) -> Option<Bug> {
        Bug::ALL.into_iter().find(|bug| bug.name() == name)
    }

    /// The defect and its fix, in one clause for a check's verdict line.
    pub fn defect(self) -> &'static str {
        match self {
            Bug::BlockTableIgnored => {
                "the block table is never read: cached keys come from block s * maxBlocksPerSeq + pos / B"
            }
            Bug::XAssumed8 => "the K cache is unpacked with X = 8; fp32 packs X = 4 floats",
            Bug::WindowOffByOne => "the sliding window is one key too wide: use i - j < slidingWindow",
            Bug::AlibiSignFlipped => "the ALiBi bias has the wrong sign: add slope * (j - i)",
            Bug::CacheForNewTokens => {
                "new tokens' keys are read from the cache: positions from the context's end on come from kNew/vNew"
            }
            Bug::QStartShifted => "sequences start at qStart[s + 1] instead of qStart[s]",
            Bug::MissingDivision => "the softmax is not normalized: divide the accumulator by l at the end",
            Bug::MaskPrecedence => {
                "the window is skipped for cached keys: parenthesize (j < ctx || j <= i) && inWindow"
            }
            Bug::VTokenMajor => {
                "the V cache is read token-major: it is [block][head][dim][slot], so dim d of slot o is at (vBase + d) * B + o"
            }
            Bug::PartialBlockDropped => {
                "the context's last, partial block is never read: walk cached keys up to ctx, not to the last whole block"
            }
            Bug::Int32Offset(wrap) => wrap.defect(),
        }
    }

    /// Whether the contract's table says a case of this batch must catch the bug.
    pub fn must_fail(self, batch: &Batch) -> bool {
        match self {
            Bug::BlockTableIgnored | Bug::XAssumed8 | Bug::VTokenMajor => batch.reads_cache(),
            Bug::WindowOffByOne => batch.window().is_some(),
            Bug::AlibiSignFlipped => batch.alibi,
            Bug::CacheForNewTokens => true,
            // With one sequence, qStart[1] = T: every read and write lands
            // past the end, so the table's "more than one sequence" is a
            // lower bound and the bug fails every case.
            Bug::QStartShifted => true,
            Bug::MissingDivision => batch.has_multi_key_rows(),
            Bug::MaskPrecedence => batch.window().is_some() && batch.context.iter().any(|&c| c > 0),
            // A context ending inside a block, whose last key a row can see
            // (a window of 1 hides every key but the row's own).
            Bug::PartialBlockDropped => {
                batch.window().is_none_or(|w| w > 1)
                    && (0..batch.num_seqs())
                        .any(|s| batch.context[s] % BLOCK != 0 && batch.new[s] > 0)
            }
            // Only a case whose blocks lie where the offset wraps.
            Bug::Int32Offset(wrap) => {
                batch.reads_cache() && batch.high.as_ref().is_some_and(|high| high.wraps(wrap))
            }
        }
    }
}

/// What the kernel with `bug` would write into `out`, in f64; rows it never
/// writes hold NaN (the runner's poison).
pub fn model(inputs: &Inputs, bug: Bug) -> Vec<f64> {
    oracle::evaluate(inputs, None, Model::Bug(bug), f64::NAN)
}

/// What a kernel with `bug` leaves in `out`: rows it never writes keep the
/// poison, a NaN it computes (a read past a buffer) is a NaN.
#[cfg(test)]
pub fn kernel_output(inputs: &Inputs, bug: Bug) -> Vec<f32> {
    use crate::grade::compare::POISON_BITS;
    oracle::evaluate(inputs, None, Model::Bug(bug), oracle::NOT_WRITTEN)
        .iter()
        .map(|&x| match x == oracle::NOT_WRITTEN {
            true => f32::from_bits(POISON_BITS),
            false => x as f32,
        })
        .collect()
}

/// Elements of `out` that fail against `reference` (NaN and Inf always fail).
pub fn failing_elements(out: &[f64], reference: &[f64]) -> usize {
    out.iter()
        .zip(reference)
        .filter(|(&o, &r)| !passes(o, r))
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grade::compare::rows_of;
    use crate::lab::paged_prefill::cases;
    use crate::lab::paged_prefill::cases::{embedded_cases, whole_oracle_cases};
    use crate::lab::paged_prefill::contract::Batch;
    use crate::lab::paged_prefill::contract::{DH, HQ, INSTANCE, LAYOUT};

    /// The planted kernels' first line lists the cases each must fail on the
    /// GPU (scripts/gpu-acceptance.sh checks it there); it must be the very
    /// set the contract's table and the CPU models agree on.
    #[test]
    fn each_planted_kernel_expects_exactly_the_cases_its_model_fails() {
        for bug in Bug::ALL {
            let (path, _, listed) =
                crate::lab::paged::testing::planted_kernel("paged-prefill", bug.name());
            let must: Vec<String> = embedded_cases()
                .into_iter()
                .filter(|case| {
                    let batch = cases::generate(case, 1).expect("generates").inputs.batch;
                    bug.must_fail(&batch)
                })
                .map(|case| case.name)
                .collect();
            assert_eq!(listed, must, "{path}");
        }
    }

    /// The CI proof: each shipped case catches exactly the bugs the
    /// contract says it must, for two seeds.
    #[test]
    fn every_bug_fails_exactly_the_cases_the_contract_lists() {
        let mut matrix = String::new();
        let mut wrong = Vec::new();
        for seed in [1u64, 0x5eed_2026] {
            for case in whole_oracle_cases() {
                let inputs = cases::generate(&case, seed).unwrap().inputs;
                let reference = oracle::attention(&inputs, None);
                assert_eq!(
                    failing_elements(&reference, &reference),
                    0,
                    "the oracle fails its own case {}",
                    case.name
                );
                let mut line = format!("{:<28}", case.name);
                for bug in Bug::ALL {
                    let failing = failing_elements(&model(&inputs, bug), &reference);
                    let expected = bug.must_fail(&inputs.batch);
                    line.push_str(match (failing > 0, expected) {
                        (true, true) => " FAIL",
                        (false, false) => " pass",
                        (true, false) => " FAIL!",
                        (false, true) => " pass!",
                    });
                    if (failing > 0) != expected {
                        wrong.push(format!(
                            "seed {seed}: {} on {}: {failing} failing elements, expected {}",
                            bug.name(),
                            case.name,
                            if expected { "failures" } else { "none" }
                        ));
                    }
                }
                if seed == 1 {
                    matrix.push_str(&line);
                    matrix.push('\n');
                }
            }
        }
        let header: Vec<&str> = Bug::ALL.iter().map(|b| b.name()).collect();
        eprintln!("bugs: {}\n{matrix}", header.join(", "));
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    /// The long case, graded on sampled rows, catches exactly the bugs the
    /// table lists on those rows too: each model against the oracle on the
    /// first and last row of each sequence.
    #[test]
    fn the_long_case_fails_exactly_the_listed_bugs_on_sampled_rows() {
        let spec = crate::lab::case_file::named(embedded_cases(), "long-context-32k");
        let inputs = cases::generate(&spec, 1).unwrap().inputs;
        let b = &inputs.batch;
        assert!(INSTANCE.problem(b).oracle_sampled());
        let rows: Vec<usize> = (0..b.num_seqs())
            .flat_map(|s| [b.start(s), b.start(s) + b.new[s] - 1])
            .collect();
        let on_rows = |all: Vec<f64>| rows_of(&all, &rows, HQ * DH);
        let reference = on_rows(oracle::evaluate(&inputs, Some(&rows), Model::Exact, 0.0));
        let mut wrong = Vec::new();
        for bug in Bug::ALL {
            let out = on_rows(oracle::evaluate(
                &inputs,
                Some(&rows),
                Model::Bug(bug),
                f64::NAN,
            ));
            let fails = failing_elements(&out, &reference) > 0;
            if fails != bug.must_fail(b) {
                wrong.push(format!("{}: fails {fails}", bug.name()));
            }
        }
        assert!(wrong.is_empty(), "{wrong:?}");
    }

    /// The same proof over many seeds (each run of the grader draws a fresh
    /// one): `PAGED_SWEEP_SEEDS=50 cargo test --release --lib sweep -- --ignored`.
    #[test]
    #[ignore = "slow: a seed sweep, run by hand"]
    fn sweep_the_bug_matrix_over_seeds() {
        let seeds: u64 = std::env::var("PAGED_SWEEP_SEEDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(10);
        let mut wrong = Vec::new();
        for seed in 1000..1000 + seeds {
            for case in whole_oracle_cases() {
                let inputs = cases::generate(&case, seed).unwrap().inputs;
                let reference = oracle::attention(&inputs, None);
                for bug in Bug::ALL {
                    let fails = failing_elements(&model(&inputs, bug), &reference) > 0;
                    if fails != bug.must_fail(&inputs.batch) {
                        wrong.push(format!("seed {seed}: {} on {}", bug.name(), case.name));
                    }
                }
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    #[test]
    fn the_table_reads_as_the_contract_says() {
        let mut b = Batch::from_lengths(LAYOUT, vec![0, 20], vec![3, 2], 0, false, 2, 4);
        assert!(Bug::BlockTableIgnored.must_fail(&b));
        assert!(!Bug::WindowOffByOne.must_fail(&b));
        assert!(!Bug::MaskPrecedence.must_fail(&b));
        b.sliding_window = 1;
        assert!(Bug::MaskPrecedence.must_fail(&b));
        assert!(!Bug::BlockTableIgnored.must_fail(&b));
        assert!(!Bug::MissingDivision.must_fail(&b));
        let single = Batch::from_lengths(LAYOUT, vec![4], vec![3], 0, true, 1, 2);
        assert!(Bug::QStartShifted.must_fail(&single));
        assert!(Bug::AlibiSignFlipped.must_fail(&single));
    }
}
