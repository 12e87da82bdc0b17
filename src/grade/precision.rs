//! Timed launches no less exact than the checked one (docs/INTEGRITY.md,
//! the precision rule).
//!
//! A kernel could be exact wherever the grader looks in full (the checked
//! launch) and use cheaper, less exact arithmetic on every later launch,
//! inside the tolerance. Each audit therefore reports how much of the
//! allowance every recomputed row used, and rows are compared class by
//! class (the random sample; each kind of plant). The checked launch is
//! graded over its whole output, so its baseline is the worst row of any
//! class there: one planted row's error varies tenfold from launch to launch
//! for an honest kernel (H100, 2026-12-06), a whole output's worst does not.
//! A timed launch with a class both [`LESS_EXACT_RATIO`] times less exact
//! than that baseline and using at least [`REAL_SHARE`] of the allowance is
//! named, and the speedup withheld. Pure: the audits hand over numbers.

use serde::{Deserialize, Serialize};

use super::launch_audit::{FindingKind, LaunchFinding, LaunchId, RowShare};

/// How many times a timed class may exceed the checked launch's share of the
/// allowance: honest kernels stay well under it (their margins are in
/// docs/INTEGRITY.md; the maximum over a whole output is compared with the
/// maximum over an audit's few rows, which favours the honest kernel).
pub const LESS_EXACT_RATIO: f64 = 4.0;
/// A timed class below this share of the allowance is never named: no
/// kernel gains from precision it cannot use.
pub const REAL_SHARE: f64 = 0.25;
/// The class of a row no plant decides.
pub const RANDOM_ROWS: &str = "random";

/// The largest share of the allowance each class of rows used in one launch.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClassShares(pub Vec<ClassShare>);

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassShare {
    pub class: String,
    /// Infinite for a row with a NaN.
    #[serde(with = "crate::nonfinite")]
    pub share: f64,
}

impl ClassShares {
    /// Each class's worst row, with `class_of` naming a row's class (`None`:
    /// the random class).
    pub fn of(rows: &[RowShare], class_of: impl Fn(usize) -> Option<&'static str>) -> Self {
        let mut classes: Vec<ClassShare> = Vec::new();
        for row in rows {
            let class = class_of(row.row).unwrap_or(RANDOM_ROWS);
            match classes.iter_mut().find(|c| c.class == class) {
                Some(known) => known.share = known.share.max(row.share),
                None => classes.push(ClassShare {
                    class: class.to_owned(),
                    share: row.share,
                }),
            }
        }
        classes.sort_by(|a, b| a.class.cmp(&b.class));
        Self(classes)
    }

    pub fn share(&self, class: &str) -> Option<f64> {
        self.0.iter().find(|c| c.class == class).map(|c| c.share)
    }

    /// The worst share of any class (0 for none).
    pub fn worst_share(&self) -> f64 {
        self.0.iter().map(|c| c.share).fold(0.0, f64::max)
    }

    /// The worse of two launches' shares, class by class.
    pub fn worst(&mut self, other: &ClassShares) {
        for theirs in &other.0 {
            match self.0.iter_mut().find(|c| c.class == theirs.class) {
                Some(mine) => mine.share = mine.share.max(theirs.share),
                None => self.0.push(theirs.clone()),
            }
        }
        self.0.sort_by(|a, b| a.class.cmp(&b.class));
    }
}

/// A class of a timed launch far less exact than the checked launch's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LessExact {
    pub class: String,
    /// The checked launch's worst share of any class.
    pub checked: f64,
    pub timed: f64,
}

impl LessExact {
    /// How many times less exact, for the sentence.
    pub fn ratio(&self) -> f64 {
        self.timed / self.checked.max(f64::MIN_POSITIVE)
    }
}

/// The rule on one timed launch: its finding when a class of `timed`
/// breaks it.
pub fn judge(
    launch: LaunchId,
    checked: &ClassShares,
    timed: &ClassShares,
) -> Result<(), LaunchFinding> {
    match less_exact(checked, timed) {
        Some(found) => Err(LaunchFinding {
            launch,
            kind: FindingKind::LessExact {
                class: found.class,
                checked: found.checked,
                timed: found.timed,
            },
        }),
        None => Ok(()),
    }
}

/// The first class of `timed` that breaks the rule against the checked
/// launch's worst row of any class.
pub fn less_exact(checked: &ClassShares, timed: &ClassShares) -> Option<LessExact> {
    let baseline = checked.worst_share();
    timed.0.iter().find_map(|class| {
        let named = class.share >= REAL_SHARE && class.share > LESS_EXACT_RATIO * baseline;
        named.then(|| LessExact {
            class: class.class.clone(),
            checked: baseline,
            timed: class.share,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(shares: &[(usize, f64)]) -> Vec<RowShare> {
        shares
            .iter()
            .map(|&(row, share)| RowShare { row, share })
            .collect()
    }

    fn planted_at_seven(row: usize) -> Option<&'static str> {
        (row == 7).then_some("last-key")
    }

    #[test]
    fn classes_keep_their_worst_row() {
        let shares = ClassShares::of(&rows(&[(1, 0.1), (7, 0.3), (2, 0.2)]), planted_at_seven);
        assert_eq!(shares.share(RANDOM_ROWS), Some(0.2));
        assert_eq!(shares.share("last-key"), Some(0.3));
    }

    #[test]
    fn a_launch_exact_when_checked_and_approximate_after_is_named() {
        let checked = ClassShares::of(&rows(&[(1, 0.01), (7, 0.02)]), planted_at_seven);
        let timed = ClassShares::of(&rows(&[(3, 0.4), (7, 0.03)]), planted_at_seven);
        let found = less_exact(&checked, &timed).expect("named");
        assert_eq!(found.class, RANDOM_ROWS);
        assert_eq!(found.ratio(), 20.0);
    }

    #[test]
    fn one_planted_row_rougher_than_the_checked_launchs_is_not_named_when_its_whole_output_was_as_rough(
    ) {
        // The honest reference on the H100: its checked launch's planted row
        // at 3.5% of the allowance, a timed one at 29%, its whole output at 79%.
        let checked = ClassShares::of(&rows(&[(1, 0.79), (7, 0.035)]), planted_at_seven);
        let timed = ClassShares::of(&rows(&[(3, 0.38), (7, 0.29)]), planted_at_seven);
        assert_eq!(less_exact(&checked, &timed), None);
    }

    #[test]
    fn a_uniformly_exact_or_uniformly_rough_kernel_is_not_named() {
        for (checked, timed, why) in [
            (
                [(1, 0.001), (7, 0.002)],
                [(3, 0.003), (7, 0.006)],
                "far under the real share",
            ),
            (
                [(1, 0.5), (7, 0.6)],
                [(3, 0.7), (7, 0.9)],
                "as exact as when checked",
            ),
        ] {
            let checked = ClassShares::of(&rows(&checked), planted_at_seven);
            let timed = ClassShares::of(&rows(&timed), planted_at_seven);
            assert_eq!(less_exact(&checked, &timed), None, "{why}");
        }
    }

    #[test]
    fn a_plant_class_the_checked_launch_lacked_is_held_to_its_worst_row() {
        let checked = ClassShares::of(&rows(&[(1, 0.01)]), |_| None);
        let timed = ClassShares::of(&rows(&[(7, 0.5)]), planted_at_seven);
        assert_eq!(
            less_exact(&checked, &timed).map(|f| f.class),
            Some("last-key".into())
        );
    }

    #[test]
    fn a_nan_share_survives_the_worker_pipe() {
        let shares = ClassShares::of(&rows(&[(7, f64::INFINITY)]), planted_at_seven);
        let json = serde_json::to_string(&shares).unwrap();
        assert_eq!(serde_json::from_str::<ClassShares>(&json).unwrap(), shares);
    }
}
