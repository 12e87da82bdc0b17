//! What reruns of a failing case under changed conditions showed.
//!
//! A wrong output alone often fits several causes: a NaN can be read from
//! a guard band past a buffer's end, made by an `exp` that overflowed, or
//! computed as 0/0; an element still holding the poison may never have been
//! written, or been read and copied by the kernel; two runs that differ may
//! be a race that corrupts values or a reduction whose order changes from
//! run to run. The runner tells them apart by experiment (it controls the
//! guard bands, the output's starting value and the inputs) and records here
//! what each changed condition did, so a lab's diagnosis states what was
//! measured instead of listing what might be. Plain data: no lab, no GPU.

use serde::{Deserialize, Serialize};

use super::compare::{Footprint, OutputShape};

/// Everything the reruns of one case measured (each part only when it ran).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Experiments {
    /// Reruns that changed one condition each, when the output held NaN or Inf.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub non_finite: Option<NonFiniteTrial>,
    /// A rerun with a different starting value in `out`, when some elements held the poison.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unwritten: Option<UnwrittenTrial>,
    /// Extra runs, when the first two differed bit for bit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeats: Option<RepeatTrial>,
    /// The oracle against a case's own expected output, when a case that
    /// brings one failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_file: Option<ExpectedFileCheck>,
    /// The output of the rerun with the case's sentinels tagged
    /// ([`Change::SentinelsTagged`]), which the lab's diagnosis replays its
    /// models against when NaN sentinels left them no finite evidence. Kept
    /// in the worker for the diagnosis only: it is a whole output.
    #[serde(skip)]
    pub tagged_output: Option<Vec<f32>>,
}

impl Experiments {
    /// Whether no experiment ran.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// A condition changed for one rerun.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "change")]
pub enum Change {
    /// `out` started at 0 instead of the NaN poison.
    OutputFinite,
    /// The guard bands of one input held 0 instead of NaN (on the side given).
    GuardsFinite { buffer: String, side: GuardSide },
    /// Every input's guard bands held 0, and no single buffer's did the same.
    AllGuardsFinite,
    /// The inputs that set the scores were multiplied by `factor` (below 1),
    /// so no `exp` of a score can overflow.
    ScoresShrunk { factor: f32 },
    /// The grader's float scratch buffers started at 0 instead of NaN.
    ScratchFinite { buffers: String },
    /// The slots no kernel should read (a paged cache's slots no context
    /// covers) held finite values tagging each slot instead of their NaN sentinel.
    SentinelsTagged,
}

/// Which guard band of a buffer a read landed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GuardSide {
    /// Past the end.
    After,
    /// Before the start.
    Before,
    /// Either side alone left NaN; both together removed it.
    Both,
}

/// One change and the non-finite elements it removed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NonFiniteFinding {
    pub change: Change,
    /// Where the elements that turned finite lie.
    pub cleared: Footprint,
    /// Whether every element was then within tolerance of the oracle on the
    /// changed inputs (only measured for [`Change::ScoresShrunk`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub then_correct: Option<bool>,
}

/// The reruns of a case whose output held NaN or Inf.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NonFiniteTrial {
    /// Where the non-finite elements of the first run lie.
    pub before: Footprint,
    /// The changes that removed some of them, in the order tried.
    pub findings: Vec<NonFiniteFinding>,
    /// Where the non-finite elements no change removed lie.
    pub unexplained: Footprint,
    /// Launches the reruns took.
    pub launches: usize,
    /// Whether a rerun had the sentinels tagged ([`Change::SentinelsTagged`]),
    /// found something or not.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sentinels_tagged: bool,
    /// Whether a rerun had the scratch at 0 ([`Change::ScratchFinite`]),
    /// found something or not.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub scratch_zeroed: bool,
}

/// The rerun of a case whose output still held the poison somewhere.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UnwrittenTrial {
    /// Poisoned elements that held the second starting value too: never written.
    pub never_written: Footprint,
    /// Poisoned elements that took another value when `out` started at a
    /// finite value: the kernel wrote them from what it read in `out`.
    pub copied_from_out: Footprint,
}

/// Repeated runs of a case whose first two runs differed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RepeatTrial {
    /// Runs compared (the first two included).
    pub runs: usize,
    /// Where the elements that differ between runs lie.
    pub differing: Footprint,
    /// The largest spread (max minus min over the runs) of one element, as
    /// a share of its tolerance; infinite when a run gave a non-finite value.
    #[serde(with = "crate::nonfinite")]
    pub worst_spread_ratio: f64,
    /// How many runs agreed with the oracle within tolerance everywhere.
    pub runs_correct: usize,
}

impl RepeatTrial {
    /// Every difference stays inside the tolerance: a reduction whose order
    /// changes, not a value that is corrupted.
    pub fn within_tolerance(&self) -> bool {
        self.worst_spread_ratio <= 1.0
    }
}

/// A case's own expected output checked against the oracle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExpectedFileCheck {
    /// Where the expected output is outside tolerance of the oracle.
    pub disagrees: Footprint,
    /// Whether the kernel's output is within tolerance of the oracle everywhere.
    pub output_matches_oracle: bool,
}

/// The spread of each element over several runs of one output, measured
/// against the tolerance at `reference`: the trial's numbers.
pub fn repeat_trial(
    shape: OutputShape,
    allowed: impl Fn(usize) -> f64,
    runs: &[Vec<f32>],
    runs_correct: usize,
) -> RepeatTrial {
    let Some(first) = runs.first() else {
        return RepeatTrial {
            runs: 0,
            differing: Footprint::default(),
            worst_spread_ratio: 0.0,
            runs_correct,
        };
    };
    let mut differing = Vec::new();
    let mut worst: f64 = 0.0;
    for (index, &value) in first.iter().enumerate() {
        let values = runs.iter().map(|run| run[index]);
        if values.clone().all(|x| x.to_bits() == value.to_bits()) {
            continue;
        }
        differing.push(index);
        let spread = if values.clone().all(f32::is_finite) {
            let (low, high) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
                (lo.min(f64::from(x)), hi.max(f64::from(x)))
            });
            (high - low) / allowed(index)
        } else {
            f64::INFINITY
        };
        worst = worst.max(spread);
    }
    RepeatTrial {
        runs: runs.len(),
        differing: Footprint::of(shape, differing),
        worst_spread_ratio: worst,
        runs_correct,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHAPE: OutputShape = OutputShape {
        rows: 4,
        heads: 2,
        dim: 2,
    };

    #[test]
    fn low_bit_differences_stay_within_tolerance() {
        let base = vec![1.0f32; SHAPE.elements()];
        let mut nudged = base.clone();
        nudged[SHAPE.index(2, 1, 0)] = f32::from_bits(1.0f32.to_bits() + 3);
        let trial = repeat_trial(SHAPE, |_| 1e-4, &[base.clone(), nudged, base], 3);
        assert!(trial.within_tolerance(), "{trial:?}");
        assert_eq!(trial.differing.elements, 1);
        assert_eq!(trial.differing.heads, 1 << 1);
        assert_eq!(trial.differing.rows.map(|r| r.first), Some(2));
    }

    #[test]
    fn a_corrupted_value_spreads_beyond_tolerance() {
        let base = vec![1.0f32; SHAPE.elements()];
        let mut corrupted = base.clone();
        corrupted[SHAPE.index(3, 0, 1)] = 1.5;
        let trial = repeat_trial(SHAPE, |_| 1e-4, &[base, corrupted], 1);
        assert!(!trial.within_tolerance());
        assert!((trial.worst_spread_ratio - 5000.0).abs() < 1e-6);
        let mut nan = vec![1.0f32; SHAPE.elements()];
        nan[0] = f32::NAN;
        let trial = repeat_trial(SHAPE, |_| 1e-4, &[vec![1.0; SHAPE.elements()], nan], 1);
        assert!(trial.worst_spread_ratio.is_infinite());
    }

    #[test]
    fn footprints_of_indices_name_rows_and_heads() {
        let at = Footprint::of(
            SHAPE,
            [
                SHAPE.index(1, 1, 0),
                SHAPE.index(1, 1, 1),
                SHAPE.index(3, 0, 0),
            ],
        );
        assert_eq!(at.elements, 3);
        assert_eq!(at.row_count, 2);
        assert_eq!(at.heads, 0b11);
        assert_eq!(at.rows.map(|r| (r.first, r.last)), Some((1, 3)));
    }
}
