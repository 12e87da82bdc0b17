//! What launch times alone say about the run that made them
//! (docs/INTEGRITY.md): whether the student's kernel slowed the starter
//! launched after it (a speedup is a ratio, so a slower baseline inflates
//! it as surely as a faster kernel), and whether one kernel's launch times
//! fall in two groups (one launch doing the work of several, say).
//!
//! Pure: the worker hands over the times.

use serde::{Deserialize, Serialize};

use super::stats::median_of;

/// How much slower the starter may run after the student's kernel than
/// after itself before the speedup is withheld. Provisional until the
/// honest spread (docs/INTEGRITY.md, five runs on each card) sets it.
pub const DRIFT_LIMIT: f64 = 0.10;
/// Two groups of launch times this many times apart are named.
pub const BIMODAL_GAP: f64 = 2.0;
/// SM clocks this far apart (a share of the higher) are told with the
/// drift: the probe itself reads within about 1% (2 ms of `%globaltimer`
/// against `clock64`), and an H100 under load holds its clock within 1%.
pub const CLOCK_GAP: f64 = 0.02;

/// The starter's median after the starter against its median after the
/// student's kernel, from the same run, with the median SM clock read right
/// after each side's launches where it was read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StarterDrift {
    pub after_starter_ms: f64,
    pub after_student_ms: f64,
    /// Launches behind each median.
    pub after_starter: usize,
    pub after_student: usize,
    /// The median SM clock read right after the starter's launches that
    /// followed the starter, MHz (absent in older records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_after_starter_mhz: Option<f64>,
    /// ... and after those that followed the student's kernel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_after_student_mhz: Option<f64>,
}

impl StarterDrift {
    /// The starter's median after the student's kernel, compared with the
    /// starter after itself, or `None` when either side has no launch;
    /// `clocks` are the SM clocks read after each side's launches (either
    /// may be empty).
    pub fn of(
        after_starter: &[f64],
        after_student: &[f64],
        clocks: (&[f64], &[f64]),
    ) -> Option<Self> {
        Some(Self {
            after_starter_ms: median_of(after_starter)?,
            after_student_ms: median_of(after_student)?,
            after_starter: after_starter.len(),
            after_student: after_student.len(),
            clock_after_starter_mhz: median_of(clocks.0),
            clock_after_student_mhz: median_of(clocks.1),
        })
    }

    /// How much slower the starter ran after the student (0.12: 12%; negative: faster).
    pub fn slower(&self) -> f64 {
        self.after_student_ms / self.after_starter_ms - 1.0
    }

    /// Whether it is past [`DRIFT_LIMIT`]: the speedup is withheld.
    pub fn withholds(&self) -> bool {
        self.slower() > DRIFT_LIMIT
    }

    /// Both sides' clocks when they are [`CLOCK_GAP`] or more apart: the
    /// GPU changed its clock between them, which is then told as the way the
    /// starter was slowed (or sped up), since the time alone cannot say.
    pub fn clocks_apart(&self) -> Option<(f64, f64)> {
        let (starter, student) = (self.clock_after_starter_mhz?, self.clock_after_student_mhz?);
        ((starter - student).abs() >= CLOCK_GAP * starter.max(student))
            .then_some((starter, student))
    }
}

impl std::fmt::Display for StarterDrift {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the starter ran {:.0}% slower after this kernel ({:.3} ms against {:.3} ms after itself)",
            self.slower() * 100.0,
            self.after_student_ms,
            self.after_starter_ms
        )?;
        if let Some((starter, student)) = self.clocks_apart() {
            write!(
                f,
                ", its SM clock {student:.0} MHz after this kernel against {starter:.0} MHz after itself"
            )?;
        }
        Ok(())
    }
}

/// Launch times in two groups at least [`BIMODAL_GAP`] apart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TwoGroups {
    pub fast_ms: f64,
    pub slow_ms: f64,
    pub slow_launches: usize,
    pub launches: usize,
}

impl TwoGroups {
    /// The widest gap between consecutive sorted times, when it is at least
    /// [`BIMODAL_GAP`] and each side is a group (one slow launch among many
    /// fast ones counts: the launch that did the others' work).
    pub fn of(times: &[f64]) -> Option<Self> {
        let mut sorted: Vec<f64> = times.iter().copied().filter(|t| t.is_finite()).collect();
        sorted.sort_by(f64::total_cmp);
        let (at, gap) = sorted
            .windows(2)
            .enumerate()
            .map(|(i, pair)| (i + 1, pair[1] / pair[0].max(f64::MIN_POSITIVE)))
            .max_by(|a, b| a.1.total_cmp(&b.1))?;
        (gap >= BIMODAL_GAP).then(|| Self {
            fast_ms: median_of(&sorted[..at]).unwrap_or(0.0),
            slow_ms: median_of(&sorted[at..]).unwrap_or(0.0),
            slow_launches: sorted.len() - at,
            launches: sorted.len(),
        })
    }
}

impl std::fmt::Display for TwoGroups {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} of {} launches took {:.3} ms where the others took {:.3} ms",
            self.slow_launches, self.launches, self.slow_ms, self.fast_ms
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NO_CLOCKS: (&[f64], &[f64]) = (&[], &[]);

    #[test]
    fn a_starter_slowed_by_the_kernel_before_it_is_withheld_with_the_figures() {
        let drift =
            StarterDrift::of(&[1.0, 1.02, 0.98], &[1.2, 1.25, 1.18, 1.22], NO_CLOCKS).unwrap();
        assert!((drift.slower() - 0.21).abs() < 1e-9, "{}", drift.slower());
        assert!(drift.withholds());
        assert_eq!(
            drift.to_string(),
            "the starter ran 21% slower after this kernel (1.210 ms against 1.000 ms after itself)"
        );
    }

    #[test]
    fn an_honest_spread_or_a_faster_starter_is_not_withheld() {
        let noisy =
            StarterDrift::of(&[1.0, 1.04, 0.97], &[1.03, 0.99, 1.05, 1.0], NO_CLOCKS).unwrap();
        assert!(!noisy.withholds(), "{}", noisy.slower());
        let faster = StarterDrift::of(&[1.0], &[0.5], NO_CLOCKS).unwrap();
        assert!(!faster.withholds());
        assert_eq!(StarterDrift::of(&[], &[1.0], NO_CLOCKS), None);
    }

    #[test]
    fn a_clock_that_fell_after_the_kernel_is_told_with_the_drift() {
        // An H100 at 1,980 MHz after the starter, throttled to 1,755 MHz
        // after the student's kernel: the starter's 13% is the clock's.
        let clocks: (&[f64], &[f64]) = (&[1980.0, 1978.0, 1980.0], &[1755.0, 1760.0, 1750.0]);
        let drift = StarterDrift::of(&[1.0], &[1.13], clocks).unwrap();
        assert!(drift.withholds());
        assert_eq!(drift.clocks_apart(), Some((1980.0, 1755.0)));
        assert_eq!(
            drift.to_string(),
            "the starter ran 13% slower after this kernel (1.130 ms against 1.000 ms after itself), \
             its SM clock 1755 MHz after this kernel against 1980 MHz after itself"
        );
        // The five-run spread's clocks (1,966 to 1,980 MHz) are not told.
        let steady = StarterDrift::of(&[1.0], &[1.01], (&[1980.0], &[1966.0])).unwrap();
        assert_eq!(steady.clocks_apart(), None);
        assert!(!steady.to_string().contains("MHz"));
        // A record from before clocks were read has none to tell.
        let old: StarterDrift = serde_json::from_str(
            r#"{"after_starter_ms":1.0,"after_student_ms":1.2,"after_starter":3,"after_student":9}"#,
        )
        .unwrap();
        assert_eq!(
            (old.clock_after_starter_mhz, old.clocks_apart()),
            (None, None)
        );
        assert!(!serde_json::to_string(&old).unwrap().contains("clock"));
    }

    #[test]
    fn one_launch_doing_many_shows_as_two_groups() {
        let groups = TwoGroups::of(&[5.0, 0.1, 0.11, 0.1, 0.12]).expect("two groups");
        assert_eq!((groups.slow_launches, groups.launches), (1, 5));
        assert_eq!(groups.slow_ms, 5.0);
        assert_eq!(
            groups.to_string(),
            "1 of 5 launches took 5.000 ms where the others took 0.105 ms"
        );
        assert_eq!(
            TwoGroups::of(&[1.0, 1.3, 0.9, 1.6]),
            None,
            "noise is one group"
        );
        assert_eq!(TwoGroups::of(&[1.0]), None);
    }
}
