//! CPU models of the eight planted bugs the decode lab ships.
//!
//! Each model is the oracle with one knob turned ([`super::oracle`] holds
//! the one implementation). Six are the starter with one defect; the two
//! combine bugs are the reference's split path (partitions of
//! [`super::partition_len`] keys under `splits=16`) with one defect. The
//! tests at the bottom are CI's proof, with no GPU, that the hazard cases
//! catch each bug exactly where the contract's table says, by at least
//! [`MIN_MISS_FACTOR`] tolerances, over several seeds; and that each
//! planted kernel's first line lists exactly those cases.

use super::{oracle, Inputs};
#[cfg(test)]
use super::{partitions, Batch};

/// How many tolerances a failing case must miss by, at its worst element.
pub const MIN_MISS_FACTOR: f64 = 10.0;

/// One planted defect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Bug {
    /// Every score taken as 0: uniform weights over the keys.
    KIgnored,
    /// Block `s * maxBlocksPerSeq + j / B` instead of the table's entry.
    BlockTableIgnored,
    /// Keys `j < seqLen - 1`: the token's own key left out.
    LastKeyDropped,
    /// Query head `h` reads KV head `h % 8` instead of `h / 4`.
    WrongGqaMap,
    /// Partitions combined without rescaling by `exp(m_p - m)`.
    CombineUnscaled,
    /// The combine reads all 16 workspace slots, not the partitions used.
    CombineAllSlots,
    /// The final `acc / l` left out.
    MissingDivision,
    /// `slope * (i - j)` instead of `slope * (j - i)`.
    AlibiSignFlipped,
    /// The K cache unpacked with `X = 8` (bf16's 16 bytes) instead of 4 floats.
    XAssumed8,
}

impl Bug {
    pub const ALL: [Bug; 9] = [
        Bug::KIgnored,
        Bug::BlockTableIgnored,
        Bug::LastKeyDropped,
        Bug::WrongGqaMap,
        Bug::CombineUnscaled,
        Bug::CombineAllSlots,
        Bug::MissingDivision,
        Bug::AlibiSignFlipped,
        Bug::XAssumed8,
    ];

    /// A short name, as the planted kernels are named (`kernels/paged-decode/bugs/NAME.cu`).
    pub fn name(self) -> &'static str {
        match self {
            Bug::KIgnored => "k-ignored",
            Bug::BlockTableIgnored => "block-table-ignored",
            Bug::LastKeyDropped => "last-key-dropped",
            Bug::WrongGqaMap => "wrong-gqa-map",
            Bug::CombineUnscaled => "combine-unscaled",
            Bug::CombineAllSlots => "combine-all-slots",
            Bug::MissingDivision => "missing-final-division",
            Bug::AlibiSignFlipped => "alibi-sign",
            Bug::XAssumed8 => "x-assumed-8",
        }
    }

    /// The bug whose [`Bug::name`] this is.
    pub fn named(name: &str) -> Option<Bug> {
        Bug::ALL.into_iter().find(|bug| bug.name() == name)
    }

    /// Whether the planted kernel is the reference (split) rather than the starter.
    pub fn is_split(self) -> bool {
        matches!(self, Bug::CombineUnscaled | Bug::CombineAllSlots)
    }

    /// The defect and its fix, in one clause for a verdict line.
    pub fn defect(self) -> &'static str {
        match self {
            Bug::KIgnored => "the scores ignore K (every key weighs the same): use q . k / 8",
            Bug::BlockTableIgnored => {
                "the block table is never read: key j comes from block s * maxBlocksPerSeq + j / B"
            }
            Bug::LastKeyDropped => {
                "the token's own key is dropped: keys run 0 .. seqLen - 1 inclusive (j < seqLen)"
            }
            Bug::WrongGqaMap => "query head h reads KV head h % 8: it reads h / 4",
            Bug::CombineUnscaled => {
                "partitions are combined without rescaling each by exp(m_p - m) to the global max"
            }
            Bug::CombineAllSlots => {
                "the combine reads all 16 workspace slots: only the partitions the sequence used hold data"
            }
            Bug::MissingDivision => "the softmax is not normalized: divide the accumulator by l at the end",
            Bug::AlibiSignFlipped => "the ALiBi bias has the wrong sign: add slope * (j - (seqLen - 1))",
            Bug::XAssumed8 => "the K cache is unpacked with X = 8; fp32 packs X = 4 floats",
        }
    }

    /// Whether a case of this batch must catch the bug (the contract's
    /// "must fail" column, read exactly). A sequence of one key has a
    /// softmax of one weight 1, so the bugs that only change weights show
    /// in a sequence of two or more; every case has one. At the reference's
    /// splits, as the contract's table is; the tests that prove the models
    /// and the diagnoses against that table read it.
    #[cfg(test)]
    pub fn must_fail(self, batch: &Batch) -> bool {
        let lens = || (0..batch.num_seqs()).map(|s| batch.len_of(s));
        let multi_key = lens().any(|l| l >= 2);
        let split = |l: usize| partitions(l, oracle::REFERENCE_SPLITS);
        match self {
            Bug::KIgnored | Bug::MissingDivision => multi_key,
            Bug::BlockTableIgnored | Bug::LastKeyDropped | Bug::WrongGqaMap | Bug::XAssumed8 => {
                true
            }
            Bug::CombineUnscaled => lens().any(|l| split(l) > 1),
            // A one-partition sequence is written directly; sixteen use every slot.
            Bug::CombineAllSlots => {
                lens().any(|l| (2..oracle::REFERENCE_SPLITS).contains(&split(l)))
            }
            Bug::AlibiSignFlipped => batch.alibi && multi_key,
        }
    }
}

/// What the kernel with `bug` would write into `out`, in f64.
pub fn model(inputs: &Inputs, bug: Bug) -> Vec<f64> {
    model_split(inputs, bug, oracle::REFERENCE_SPLITS)
}

/// [`model`] for a kernel launched with `splits` partitions (`splits=N`).
pub fn model_split(inputs: &Inputs, bug: Bug, splits: usize) -> Vec<f64> {
    oracle::evaluate(inputs, None, Some(bug), splits)
}

/// The worst element of `out` against `reference`, in tolerances
/// ([`super::miss_factor`]; infinite at a NaN), or 0 when all pass.
pub fn worst_miss(out: &[f64], reference: &[f64]) -> f64 {
    out.iter()
        .zip(reference)
        .map(|(&o, &r)| super::miss_factor(o, r))
        .fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::paged_decode::cases::hazard_cases;

    /// The models' verdicts over every case: failing case names per bug,
    /// with the smallest worst-element miss among them, and the cases the
    /// contract's table says it must fail.
    fn matrix(seed: u64) -> Vec<(Bug, Vec<String>, f64, Vec<String>)> {
        use rayon::prelude::*;
        // Every case, then every bug, on its own core.
        let runs: Vec<(String, Vec<f64>, Inputs)> = hazard_cases()
            .into_par_iter()
            .map(|c| {
                let inputs = c.generate(seed).unwrap();
                (c.name, oracle::attention(&inputs, None), inputs)
            })
            .collect();
        Bug::ALL
            .into_par_iter()
            .map(|bug| {
                let mut failing = Vec::new();
                let mut least = f64::INFINITY;
                for (name, reference, inputs) in &runs {
                    let miss = worst_miss(&model(inputs, bug), reference);
                    if miss > 1.0 {
                        failing.push(name.clone());
                        least = least.min(miss);
                    }
                }
                let must = must_fail(bug, runs.iter().map(|(name, _, i)| (name, &i.batch)));
                (bug, failing, least, must)
            })
            .collect()
    }

    /// The names of the cases (name, batch) the contract's table says
    /// `bug` must fail.
    fn must_fail<'c>(
        bug: Bug,
        cases: impl Iterator<Item = (&'c String, &'c Batch)>,
    ) -> Vec<String> {
        cases
            .filter(|(_, batch)| bug.must_fail(batch))
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// The CI proof: each bug fails exactly the cases the contract's table
    /// names, each by at least 10 tolerances, for three seeds; the oracle
    /// passes its own cases.
    #[test]
    fn every_bug_fails_exactly_its_cases_by_ten_tolerances() {
        let mut wrong = Vec::new();
        for seed in [1u64, 2, 0x5eed_2026] {
            for (bug, failing, least, must) in matrix(seed) {
                eprintln!(
                    "seed {seed} {:<24} least miss {least:>10.1}x  {}",
                    bug.name(),
                    failing.join(" ")
                );
                if failing != must {
                    wrong.push(format!("seed {seed}: {} fails {failing:?}", bug.name()));
                }
                if least < MIN_MISS_FACTOR {
                    wrong.push(format!(
                        "seed {seed}: {} misses by only {least:.2}x",
                        bug.name()
                    ));
                }
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    /// The planted kernels' first line lists the cases each must fail on
    /// the GPU: the very set the table and the models agree on.
    #[test]
    fn each_planted_kernel_expects_exactly_the_cases_its_model_fails() {
        let cases: Vec<(String, Batch)> = hazard_cases()
            .into_iter()
            .map(|c| {
                let batch = c.generate(1).unwrap().batch;
                (c.name, batch)
            })
            .collect();
        for bug in Bug::ALL {
            let (path, text, listed) =
                crate::lab::paged::testing::planted_kernel("paged-decode", bug.name());
            let must = must_fail(bug, cases.iter().map(|(name, batch)| (name, batch)));
            assert_eq!(listed, must, "{path}");
            // The split bugs are the reference's split path; the rest the starter's.
            assert_eq!(text.contains("splits=16"), bug.is_split(), "{path}");
        }
    }

    #[test]
    fn the_table_reads_as_the_contract_says() {
        let batch = |lens: &[i32], alibi| Batch {
            seq_len: lens.to_vec(),
            max_blocks_per_seq: 1,
            num_blocks: 1,
            block_table: vec![0; lens.len()],
            alibi,
        };
        let ones = batch(&[1, 1], true);
        assert!(!Bug::KIgnored.must_fail(&ones) && !Bug::MissingDivision.must_fail(&ones));
        assert!(!Bug::AlibiSignFlipped.must_fail(&ones));
        assert!(Bug::LastKeyDropped.must_fail(&ones) && Bug::WrongGqaMap.must_fail(&ones));
        assert!(!Bug::CombineUnscaled.must_fail(&batch(&[512, 3], false)));
        assert!(Bug::CombineUnscaled.must_fail(&batch(&[513, 3], false)));
        assert!(Bug::CombineAllSlots.must_fail(&batch(&[513, 3], false)));
        assert!(!Bug::CombineAllSlots.must_fail(&batch(&[8192, 3], false)));
        assert!(Bug::CombineUnscaled.must_fail(&batch(&[8192, 3], false)));
        assert!(!Bug::AlibiSignFlipped.must_fail(&batch(&[9, 3], false)));
        for bug in Bug::ALL {
            assert_eq!(Bug::named(bug.name()), Some(bug));
        }
    }
}
