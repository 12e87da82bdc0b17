//! The audit of one timed or profiled launch, after it ran: did this launch
//! compute this launch's output?
//!
//! A launch that is timed gets inputs no earlier launch saw and an output
//! full of poison, so a kernel can only be fast by computing. What it wrote
//! is then audited in two steps, both outside the timed region:
//!
//! 1. [`LaunchAudit::plan`] reads the whole output: any element still
//!    holding the poison ends the audit (the launch skipped work); every row
//!    is fingerprinted, and the rows to recompute are chosen now, after the
//!    launch, from a generator the kernel cannot read: a random sample of
//!    at least [`SAMPLED_ROWS`] rows (every head of each), plus every row
//!    that is not finite or that repeats, bit for bit, the same row of an
//!    earlier launch (an honest kernel on fresh inputs never does that, a
//!    replayed memo or a stale buffer always does), plus every row a plant
//!    of this launch decides (`lab::redraw`).
//! 2. [`LaunchAudit::judge`] compares those rows with their float64
//!    reference on the launch's own inputs, under the lab's tolerance; a
//!    wrong row that repeats an earlier launch is named as stale output.
//!
//! Pure: the caller runs the launch and the reference (on the GPU, or, in
//! tests, on the CPU) and hands over numbers.

use std::fmt;

use rand::Rng;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::compare::{OutputShape, Tolerance, POISON_BITS};

/// Rows recomputed at random after every audited launch (at least; all rows
/// of a smaller output).
pub const SAMPLED_ROWS: usize = 16;
/// Most suspect rows (non-finite or repeated) recomputed on top of the sample.
pub const MAX_SUSPECT_ROWS: usize = 48;

/// Which launch of a kernel a finding is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchId {
    pub phase: LaunchPhase,
    /// 1-based within its phase.
    pub number: usize,
    /// Launches planned in that phase (timing may stop earlier).
    pub of: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LaunchPhase {
    /// The first launch on the check's own inputs, graded in full.
    Checked,
    WarmUp,
    Timed,
    Profiled,
}

impl fmt::Display for LaunchId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let phase = match self.phase {
            LaunchPhase::Checked => return f.write_str("the checked launch"),
            LaunchPhase::WarmUp => "warm-up launch",
            LaunchPhase::Timed => "timed launch",
            LaunchPhase::Profiled => "profiled launch",
        };
        write!(f, "{phase} {} of {}", self.number, self.of)
    }
}

/// Why an audited launch does not count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LaunchFinding {
    pub launch: LaunchId,
    #[serde(flatten)]
    pub kind: FindingKind,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "finding", rename_all = "snake_case")]
pub enum FindingKind {
    /// Elements still held the poison written before the launch.
    Unwritten {
        row: usize,
        head: usize,
        elements: usize,
    },
    /// A wrong row equal bit for bit to the same row of an earlier launch.
    Stale {
        row: usize,
        head: usize,
        earlier: LaunchId,
    },
    /// A recomputed row that is off by more than the tolerance.
    Wrong {
        row: usize,
        head: usize,
        dim: usize,
        #[serde(with = "crate::nonfinite")]
        got: f64,
        #[serde(with = "crate::nonfinite")]
        want: f64,
        allowed: f64,
    },
    /// The launch changed an input (checked against what was handed to it).
    InputChanged { input: String, elements: u64 },
    /// The launch wrote into the guard bands around `out` or a scratch buffer.
    WroteOutside { elements: usize },
    /// A class of the launch's rows used far more of the allowance than the
    /// checked launch's same class ([`super::precision`]).
    LessExact {
        class: String,
        checked: f64,
        #[serde(with = "crate::nonfinite")]
        timed: f64,
    },
    /// The launch wrote into the grader's pristine copy of an input, the
    /// memory later launches' inputs are drawn from.
    HarnessWritten { input: String },
}

impl fmt::Display for LaunchFinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let launch = self.launch;
        match &self.kind {
            FindingKind::Unwritten {
                row,
                head,
                elements,
            } => write!(
                f,
                "{launch} left {elements} element{} unwritten (row {row}, head {head} still \
                 holds the poison written before it)",
                if *elements == 1 { "" } else { "s" }
            ),
            FindingKind::Stale { row, head, earlier } => write!(
                f,
                "{launch} returned the output of earlier inputs (row {row}, head {head} is \
                 {earlier}'s, bit for bit)"
            ),
            FindingKind::Wrong {
                row,
                head,
                dim,
                got,
                want,
                allowed,
            } => write!(
                f,
                "{launch} is wrong at row {row}, head {head}, dim {dim}: {got:.6} where the \
                 float64 reference has {want:.6} (allowed ±{allowed:.1e})"
            ),
            FindingKind::InputChanged { input, elements } => write!(
                f,
                "{launch} changed {elements} elements of its input `{input}`"
            ),
            FindingKind::WroteOutside { elements } => write!(
                f,
                "{launch} wrote {elements} elements into the guard bands around out or its scratch"
            ),
            FindingKind::LessExact {
                class,
                checked,
                timed,
            } => write!(
                f,
                "{launch} is {:.0}x less exact than the checked launch: its {class} rows used \
                 {:.0}% of the allowance, the checked launch's whole output at most {:.2}%",
                timed / checked.max(f64::MIN_POSITIVE),
                timed * 100.0,
                checked * 100.0
            ),
            FindingKind::HarnessWritten { input } => write!(
                f,
                "{launch} wrote into the grader's pristine copy of `{input}`, the memory later \
                 inputs are drawn from"
            ),
        }
    }
}

/// The rows one launch's audit recomputes, chosen after the launch.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditPlan {
    /// Output rows to recompute in float64, ascending, no repeats.
    pub rows: Vec<usize>,
    fingerprints: Vec<u64>,
    /// For each planned row, the earlier launch whose same row it repeats.
    repeats: Vec<Option<LaunchId>>,
}

/// The audit of one kernel's launches over one timing or profiling run:
/// it remembers every earlier launch's row fingerprints.
#[derive(Debug, Clone)]
pub struct LaunchAudit {
    shape: OutputShape,
    tolerance: Tolerance,
    earlier: Vec<(LaunchId, Vec<u64>)>,
}

impl LaunchAudit {
    pub fn new(shape: OutputShape, tolerance: Tolerance) -> Self {
        Self {
            shape,
            tolerance,
            earlier: Vec::new(),
        }
    }

    fn row_len(&self) -> usize {
        self.shape.heads * self.shape.dim
    }

    /// Remembers a launch graded some other way (the checked launch, whose
    /// whole output met the full reference) so later launches that replay
    /// it are named.
    ///
    /// # Panics
    /// When `output` does not hold the shape's elements.
    pub fn remember(&mut self, launch: LaunchId, output: &[f32]) {
        assert_eq!(
            output.len(),
            self.shape.elements(),
            "output of another shape"
        );
        let fingerprints = self.fingerprints(output);
        self.earlier.push((launch, fingerprints));
    }

    fn fingerprints(&self, output: &[f32]) -> Vec<u64> {
        self.scan(output)
            .into_iter()
            .map(|row| row.fingerprint)
            .collect()
    }

    /// One pass over every row, in parallel: a large output is read back
    /// after every timed launch, so this is on the timing phase's clock.
    fn scan(&self, output: &[f32]) -> Vec<RowScan> {
        output
            .par_chunks_exact(self.row_len().max(1))
            .map(|row| RowScan {
                fingerprint: fingerprint(row),
                poisoned: row.iter().filter(|x| x.to_bits() == POISON_BITS).count(),
                first_poisoned: row.iter().position(|x| x.to_bits() == POISON_BITS),
                finite: row.iter().all(|x| x.is_finite()),
            })
            .collect()
    }

    /// Step 1, right after the launch: poison anywhere ends the audit;
    /// otherwise the rows to recompute.
    ///
    /// # Panics
    /// When `output` does not hold the shape's elements.
    pub fn plan(
        &self,
        launch: LaunchId,
        output: &[f32],
        planted: &[usize],
        rng: &mut impl Rng,
    ) -> Result<AuditPlan, LaunchFinding> {
        assert_eq!(
            output.len(),
            self.shape.elements(),
            "output of another shape"
        );
        let rows = self.shape.rows;
        let scanned = self.scan(output);
        if let Some((row, at)) = scanned
            .iter()
            .enumerate()
            .find_map(|(row, scan)| scan.first_poisoned.map(|at| (row, at)))
        {
            return Err(LaunchFinding {
                launch,
                kind: FindingKind::Unwritten {
                    row,
                    head: at / self.shape.dim,
                    elements: scanned.iter().map(|scan| scan.poisoned).sum(),
                },
            });
        }
        let fingerprints: Vec<u64> = scanned.iter().map(|scan| scan.fingerprint).collect();
        // The earliest launch with the same bits: where they came from, when
        // a replayed output is replayed again.
        let repeat_of = |row: usize| {
            self.earlier
                .iter()
                .find(|(_, earlier)| earlier[row] == fingerprints[row])
                .map(|(id, _)| *id)
        };
        let mut chosen: Vec<usize> = (0..rows)
            .filter(|&row| !scanned[row].finite || repeat_of(row).is_some())
            .take(MAX_SUSPECT_ROWS)
            .collect();
        // Every planted row, always: the hazards the timed data carries.
        chosen.extend(planted.iter().copied().filter(|&row| row < rows));
        if rows <= SAMPLED_ROWS {
            chosen.extend(0..rows);
        } else {
            chosen.extend(rand::seq::index::sample(rng, rows, SAMPLED_ROWS));
        }
        chosen.sort_unstable();
        chosen.dedup();
        Ok(AuditPlan {
            repeats: chosen.iter().map(|&row| repeat_of(row)).collect(),
            rows: chosen,
            fingerprints,
        })
    }

    /// Step 2: `reference_rows` holds the planned rows' float64 reference on
    /// this launch's inputs, one row after another in plan order. The launch
    /// is remembered either way, so a later replay of it is named. When every
    /// row is within the tolerance, each planned row's largest error as a
    /// share of what it is allowed (what the precision rule compares).
    ///
    /// # Panics
    /// When `reference_rows` does not hold every planned row.
    pub fn judge(
        &mut self,
        launch: LaunchId,
        output: &[f32],
        plan: AuditPlan,
        reference_rows: &[f64],
    ) -> Result<Vec<RowShare>, LaunchFinding> {
        let row_len = self.row_len();
        assert_eq!(reference_rows.len(), plan.rows.len() * row_len);
        let mut finding = None;
        let mut shares = Vec::with_capacity(plan.rows.len());
        for ((&row, want_row), repeat) in plan
            .rows
            .iter()
            .zip(reference_rows.chunks_exact(row_len))
            .zip(&plan.repeats)
        {
            let got_row = &output[row * row_len..(row + 1) * row_len];
            let wrong = got_row.iter().zip(want_row).position(|(&got, &want)| {
                let allowed = self.tolerance.allowed(want);
                // A NaN on either side is no number within the allowance: wrong.
                let within = (got as f64 - want).abs() <= allowed;
                !within
            });
            let Some(at) = wrong else {
                shares.push(RowShare {
                    row,
                    share: share_of_allowance(self.tolerance, got_row, want_row),
                });
                continue;
            };
            let (head, dim) = (at / self.shape.dim, at % self.shape.dim);
            let kind = match repeat {
                Some(earlier) => FindingKind::Stale {
                    row,
                    head,
                    earlier: *earlier,
                },
                None => FindingKind::Wrong {
                    row,
                    head,
                    dim,
                    got: got_row[at] as f64,
                    want: want_row[at],
                    allowed: self.tolerance.allowed(want_row[at]),
                },
            };
            finding = Some(LaunchFinding { launch, kind });
            break;
        }
        self.earlier.push((launch, plan.fingerprints));
        finding.map_or(Ok(shares), Err)
    }
}

/// One recomputed row's largest error as a share of its allowance (0: exact;
/// 1: at the edge of the tolerance).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RowShare {
    pub row: usize,
    pub share: f64,
}

/// The largest `|got - want| / allowed(want)` over a row (infinite for a NaN).
pub fn share_of_allowance(tolerance: Tolerance, got: &[f32], want: &[f64]) -> f64 {
    got.iter().zip(want).fold(0f64, |worst, (&got, &want)| {
        let share = (got as f64 - want).abs() / tolerance.allowed(want);
        worst.max(if share.is_nan() { f64::INFINITY } else { share })
    })
}

/// Every row's share of its allowance over a whole output and its whole
/// reference (the checked launch, graded in full).
pub fn row_shares(
    shape: OutputShape,
    tolerance: Tolerance,
    output: &[f32],
    reference: &[f64],
) -> Vec<RowShare> {
    let row_len = (shape.heads * shape.dim).max(1);
    output
        .par_chunks_exact(row_len)
        .zip(reference.par_chunks_exact(row_len))
        .enumerate()
        .map(|(row, (got, want))| RowShare {
            row,
            share: share_of_allowance(tolerance, got, want),
        })
        .collect()
}

/// What one pass over a row found.
struct RowScan {
    fingerprint: u64,
    poisoned: usize,
    first_poisoned: Option<usize>,
    finite: bool,
}

/// FNV-1a over a row's bits: equal rows, equal fingerprints; a collision
/// between two different rows of fresh inputs only adds a row to the sample.
fn fingerprint(row: &[f32]) -> u64 {
    row.iter().fold(0xcbf2_9ce4_8422_2325, |hash, x| {
        (hash ^ x.to_bits() as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    const SHAPE: OutputShape = OutputShape {
        rows: 40,
        heads: 2,
        dim: 4,
    };
    const TOLERANCE: Tolerance = Tolerance {
        abs: 1e-3,
        rel: 1e-3,
    };

    fn timed(number: usize) -> LaunchId {
        LaunchId {
            phase: LaunchPhase::Timed,
            number,
            of: 15,
        }
    }

    fn reference_of(plan: &AuditPlan, exact: &[f64]) -> Vec<f64> {
        let row_len = SHAPE.heads * SHAPE.dim;
        plan.rows
            .iter()
            .flat_map(|&r| exact[r * row_len..(r + 1) * row_len].iter().copied())
            .collect()
    }

    #[test]
    fn a_correct_launch_passes_and_the_sample_covers_at_least_sixteen_rows() {
        let mut audit = LaunchAudit::new(SHAPE, TOLERANCE);
        let exact: Vec<f64> = (0..SHAPE.elements()).map(|i| i as f64 * 0.01).collect();
        let output: Vec<f32> = exact.iter().map(|&x| x as f32).collect();
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let plan = audit.plan(timed(1), &output, &[], &mut rng).unwrap();
        assert_eq!(plan.rows.len(), SAMPLED_ROWS);
        assert!(plan.rows.windows(2).all(|w| w[0] < w[1]));
        let reference = reference_of(&plan, &exact);
        let shares = audit
            .judge(timed(1), &output, plan, &reference)
            .expect("within");
        assert!(shares.iter().all(|s| s.share < 1e-3), "{shares:?}");
    }

    #[test]
    fn a_nan_row_is_always_recomputed_and_found_wrong() {
        let audit = LaunchAudit::new(SHAPE, TOLERANCE);
        let mut output = vec![0.5f32; SHAPE.elements()];
        output[SHAPE.index(33, 1, 2)] = f32::NAN;
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let plan = audit.plan(timed(2), &output, &[], &mut rng).unwrap();
        assert!(plan.rows.contains(&33), "{:?}", plan.rows);
    }

    #[test]
    fn every_planted_row_is_recomputed_besides_the_sample() {
        let audit = LaunchAudit::new(SHAPE, TOLERANCE);
        let output = vec![0.5f32; SHAPE.elements()];
        for seed in 0..20 {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let plan = audit
                .plan(timed(3), &output, &[5, 39, 400], &mut rng)
                .unwrap();
            assert!(
                plan.rows.contains(&5) && plan.rows.contains(&39),
                "{:?}",
                plan.rows
            );
            assert!(
                plan.rows.len() <= SAMPLED_ROWS + 2,
                "a row past the end is no row"
            );
        }
    }

    #[test]
    fn a_row_within_the_tolerance_reports_its_share_of_the_allowance() {
        let tolerance = Tolerance { abs: 1.0, rel: 0.0 };
        assert_eq!(
            share_of_allowance(tolerance, &[1.25, 2.0], &[1.0, 2.0]),
            0.25
        );
        assert_eq!(
            share_of_allowance(tolerance, &[f32::NAN], &[1.0]),
            f64::INFINITY
        );
        let shape = OutputShape {
            rows: 2,
            heads: 1,
            dim: 2,
        };
        let shares = row_shares(
            shape,
            tolerance,
            &[0.0, 0.5, 1.0, 1.0],
            &[0.0, 0.0, 1.0, 1.1],
        );
        assert_eq!(shares.len(), 2);
        assert_eq!((shares[0].share, shares[1].row), (0.5, 1));
        assert!((shares[1].share - 0.1).abs() < 1e-6);
    }

    #[test]
    fn the_finding_reads_as_a_sentence_with_launch_row_and_reason() {
        let finding = LaunchFinding {
            launch: timed(7),
            kind: FindingKind::Stale {
                row: 812,
                head: 0,
                earlier: timed(6),
            },
        };
        assert_eq!(
            finding.to_string(),
            "timed launch 7 of 15 returned the output of earlier inputs (row 812, head 0 is \
             timed launch 6 of 15's, bit for bit)"
        );
        let json = serde_json::to_string(&finding).unwrap();
        assert_eq!(
            serde_json::from_str::<LaunchFinding>(&json).unwrap(),
            finding
        );
    }
}
