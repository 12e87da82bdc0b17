//! CPU models of the planted bugs: the contract's eight, and four the
//! diagnoses must name (an ALiBi bias of the wrong sign, E5M2 bytes read as
//! E4M3, `vScale` applied twice, `vScale` left out).
//!
//! Each model is the oracle with one knob turned ([`super::oracle::Model`]).
//! The contract names a family each bug must fail; the exact list of a bug
//! is the cases its model fails on the lab's inputs, and each planted kernel
//! carries that list on its first line. The tests below are CI's proof: over
//! several seeds every model fails at least its family, every case it fails
//! it misses by at least [`MIN_MISS`] tolerances, every other case passes
//! whole, and the lists in the kernels are exactly the cases failed.

use super::oracle::{self, Model};
use super::{miss_factor, Batch, Inputs, KvFormat, DH};
use crate::lab::paged::high_blocks::Wrap;

/// The least miss factor a planted bug may have on a case it fails.
pub const MIN_MISS: f64 = 10.0;

/// One planted defect, each the starter with one line wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Bug {
    /// The key is `decode(byte)`, without `* kScale`.
    KScaleIgnored,
    /// Keys scaled by `vScale` and values by `kScale`.
    ScalesSwapped,
    /// Every byte decoded as E5M2 (`kvFormat` ignored).
    FormatIgnored,
    /// The K cache unpacked with bf16's `X = 8`.
    XAssumed8,
    /// The walk over cached keys runs to position `ctx` inclusive, from the cache.
    OneKeyTooMany,
    /// `expf(score)` without subtracting the running max.
    MissingMaxSubtraction,
    /// `i - j <= W` instead of `i - j < W`.
    WindowOffByOne,
    /// The final `acc / l` left out.
    MissingDivision,
    /// The ALiBi bias added as `slope * (i - j)`: later keys weigh less.
    AlibiSignFlipped,
    /// Every byte decoded as E4M3 (`kvFormat` ignored the other way).
    FormatAssumedE4m3,
    /// Values multiplied by `vScale` twice.
    VScaleTwice,
    /// The value is `decode(byte)`, without `* vScale`.
    VScaleIgnored,
    /// Cache offsets computed in 32 bits, `int` or `unsigned`: past 2^31
    /// (2^32) elements they wrap, and a block is read from where they land.
    Int32Offset(Wrap),
}

impl Bug {
    pub const ALL: [Bug; 14] = [
        Bug::KScaleIgnored,
        Bug::ScalesSwapped,
        Bug::FormatIgnored,
        Bug::XAssumed8,
        Bug::OneKeyTooMany,
        Bug::MissingMaxSubtraction,
        Bug::WindowOffByOne,
        Bug::MissingDivision,
        Bug::AlibiSignFlipped,
        Bug::FormatAssumedE4m3,
        Bug::VScaleTwice,
        Bug::VScaleIgnored,
        Bug::Int32Offset(Wrap::Signed),
        Bug::Int32Offset(Wrap::Unsigned),
    ];

    /// A short name, as the planted kernels are named.
    pub fn name(self) -> &'static str {
        match self {
            Bug::KScaleIgnored => "kscale-ignored",
            Bug::ScalesSwapped => "scales-swapped",
            Bug::FormatIgnored => "format-ignored",
            Bug::XAssumed8 => "x-assumed-8",
            Bug::OneKeyTooMany => "one-key-too-many",
            Bug::MissingMaxSubtraction => "missing-max-subtraction",
            Bug::WindowOffByOne => "window-off-by-one",
            Bug::MissingDivision => "missing-final-division",
            Bug::AlibiSignFlipped => "alibi-sign",
            Bug::FormatAssumedE4m3 => "format-assumed-e4m3",
            Bug::VScaleTwice => "vscale-twice",
            Bug::VScaleIgnored => "vscale-ignored",
            Bug::Int32Offset(wrap) => wrap.bug_name(),
        }
    }

    /// The defect and its fix, in one clause.
    pub fn defect(self) -> &'static str {
        match self {
            Bug::KScaleIgnored => "cached keys are not multiplied by kScale",
            Bug::ScalesSwapped => "kScale and vScale are swapped: keys take kScale, values vScale",
            Bug::FormatIgnored => "E4M3 bytes are decoded as E5M2: read kvFormat",
            Bug::XAssumed8 => "the K cache is unpacked with X = 8; 16 FP8 bytes are packed (X = 16)",
            Bug::OneKeyTooMany => {
                "the walk over cached keys reads position ctx from the cache: stop below the context"
            }
            Bug::MissingMaxSubtraction => "expf(score) overflows: subtract the running max first",
            Bug::WindowOffByOne => "the sliding window is one key too wide: use i - j < slidingWindow",
            Bug::MissingDivision => "the softmax is not normalized: divide the accumulator by l at the end",
            Bug::AlibiSignFlipped => "the ALiBi bias has the wrong sign: add slope * (j - i)",
            Bug::FormatAssumedE4m3 => "E5M2 bytes are decoded as E4M3: read kvFormat",
            Bug::VScaleTwice => "cached values are multiplied by vScale twice: once per value",
            Bug::VScaleIgnored => "cached values are not multiplied by vScale",
            Bug::Int32Offset(wrap) => wrap.defect(),
        }
    }

    /// Whether the contract's family for this bug holds a case of `inputs`
    /// (`planted`: the case plants an overflowing score).
    pub fn family(self, inputs: &Inputs, planted: bool) -> bool {
        let batch: &Batch = &inputs.tensors.batch;
        let with_context = batch.reads_cache();
        match self {
            Bug::KScaleIgnored | Bug::ScalesSwapped | Bug::XAssumed8 | Bug::OneKeyTooMany => {
                with_context
            }
            Bug::FormatIgnored => with_context && inputs.format == KvFormat::E4m3,
            Bug::FormatAssumedE4m3 => with_context && inputs.format == KvFormat::E5m2,
            Bug::VScaleTwice | Bug::VScaleIgnored => with_context && inputs.v_scale != 1.0,
            Bug::MissingMaxSubtraction => planted,
            Bug::WindowOffByOne => batch.window().is_some(),
            // A row with one visible key has l = 1: the division cannot show.
            Bug::MissingDivision => batch.has_multi_key_rows(),
            // The bias of a row's own key is 0 either way.
            Bug::AlibiSignFlipped => batch.alibi && batch.has_multi_key_rows(),
            // Only a case whose blocks lie where the offset wraps.
            Bug::Int32Offset(wrap) => {
                with_context && batch.high.as_ref().is_some_and(|high| high.wraps(wrap))
            }
        }
    }
}

/// What the kernel with `bug` would write into `out`, in f64.
pub fn model(inputs: &Inputs, bug: Bug) -> Vec<f64> {
    oracle::evaluate(inputs, Model::Bug(bug))
}

/// The largest miss factor of `out` against `reference` (0 when all pass
/// exactly); `scales` from [`oracle::value_scales`].
pub fn worst_miss(out: &[f64], reference: &[f64], scales: &[f64]) -> f64 {
    out.iter()
        .zip(reference)
        .enumerate()
        .map(|(at, (&o, &r))| miss_factor(o, r, scales[at / DH]))
        .fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use std::sync::OnceLock;

    use super::*;
    use crate::lab::paged_prefill_fp8::cases;
    use crate::lab::paged_prefill_fp8::cases::{embedded_cases, CaseSpec};
    use crate::lab::paged_prefill_fp8::passes;

    const SEEDS: [u64; 3] = [1, 0x5eed_2026, 77];

    /// One generated case with its float64 reference, shared by every test
    /// here (the oracle depends on the case and the seed, not on the bug).
    struct Referenced {
        case: CaseSpec,
        inputs: Inputs,
        reference: Vec<f64>,
        scales: Vec<f64>,
    }

    /// Every shipped case under `seed`, with its reference, made once.
    fn referenced(seed: u64) -> &'static [Referenced] {
        static MADE: OnceLock<Vec<(u64, Vec<Referenced>)>> = OnceLock::new();
        let made = MADE.get_or_init(|| {
            use rayon::prelude::*;
            SEEDS
                .par_iter()
                .map(|&seed| {
                    let cases = embedded_cases()
                        .into_par_iter()
                        .map(|case| {
                            let inputs = cases::generate(&case, seed).unwrap().inputs;
                            let reference = oracle::attention(&inputs);
                            let scales = oracle::value_scales(&inputs);
                            Referenced {
                                case,
                                inputs,
                                reference,
                                scales,
                            }
                        })
                        .collect();
                    (seed, cases)
                })
                .collect()
        });
        &made
            .iter()
            .find(|(s, _)| *s == seed)
            .expect("one of SEEDS")
            .1
    }

    /// The cases each bug's model fails, per seed, with the least miss
    /// factor among them; panics on a case failed by less than [`MIN_MISS`]
    /// or a family case passed.
    fn failing_cases(bug: Bug, seed: u64) -> (Vec<String>, f64) {
        let mut failed = Vec::new();
        let mut least = f64::INFINITY;
        for made in referenced(seed) {
            let (case, inputs) = (&made.case, &made.inputs);
            let worst = worst_miss(&model(inputs, bug), &made.reference, &made.scales);
            let family = bug.family(inputs, !case.plant.is_empty());
            if worst > 1.0 {
                assert!(
                    worst >= MIN_MISS,
                    "seed {seed}: {} fails {} by only {worst:.2} tolerances",
                    bug.name(),
                    case.name
                );
                least = least.min(worst);
                failed.push(case.name.clone());
            } else {
                assert!(
                    !family,
                    "seed {seed}: {} passes {} of its family (miss {worst:.3})",
                    bug.name(),
                    case.name
                );
            }
        }
        (failed, least)
    }

    /// The planted kernel's first line: the cases it must fail on the GPU.
    fn listed(bug: Bug) -> Vec<String> {
        crate::lab::paged::testing::planted_kernel("paged-prefill-fp8", bug.name()).2
    }

    #[test]
    fn every_bug_fails_its_family_by_ten_tolerances_and_exactly_its_listed_cases() {
        use rayon::prelude::*;
        let mut report = String::new();
        let mut wrong: Vec<&str> = Vec::new();
        // Every (bug, seed) on its own core: the lab's longest test. The
        // shared cases are made first: a rayon worker that met their
        // `OnceLock` mid-init from inside the pool could wait on itself.
        referenced(SEEDS[0]);
        let all: Vec<Vec<(Vec<String>, f64)>> = Bug::ALL
            .par_iter()
            .map(|&bug| SEEDS.par_iter().map(|&s| failing_cases(bug, s)).collect())
            .collect();
        for (bug, lists) in Bug::ALL.into_iter().zip(all) {
            for (seed, (list, _)) in SEEDS.iter().zip(&lists) {
                assert_eq!(
                    list,
                    &lists[0].0,
                    "{}: seed {seed} fails other cases",
                    bug.name()
                );
            }
            let least = lists.iter().map(|l| l.1).fold(f64::INFINITY, f64::min);
            report.push_str(&format!(
                "{:<24} least miss {least:>10.3e}: {}\n",
                bug.name(),
                lists[0].0.join(" ")
            ));
            if listed(bug) != lists[0].0 {
                wrong.push(bug.name());
            }
        }
        eprintln!("{report}");
        assert!(
            wrong.is_empty(),
            "kernels whose expect-fail line is not their model's list: {wrong:?}"
        );
    }

    #[test]
    fn the_oracle_passes_itself_and_the_seed_arithmetic_passes_every_case() {
        let mut report = String::new();
        let mut wrong = Vec::new();
        for seed in SEEDS {
            for made in referenced(seed) {
                let (case, reference) = (&made.case, &made.reference);
                assert!(
                    reference.iter().all(|r| passes(*r, *r, 1.0)),
                    "{}",
                    case.name
                );
                let seed_like = oracle::evaluate(&made.inputs, Model::SeedLike);
                let worst = worst_miss(&seed_like, reference, &made.scales);
                if worst >= 0.5 {
                    wrong.push(format!(
                        "seed {seed}: {} uses {worst:.3} of the tolerance",
                        case.name
                    ));
                }
                if seed == SEEDS[0] {
                    report.push_str(&format!("{:<32} seed-like worst {worst:.3}\n", case.name));
                }
            }
        }
        eprintln!("{report}");
        // The seed's arithmetic must leave headroom, not merely pass.
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }
}
