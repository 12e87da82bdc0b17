//! When timing stops, as data (as nvbench names its stopping criteria):
//! the rule travels in every timing request, is printed with every timing
//! and keys a gradebook's rows, so a speedup always says what ended it.
//!
//! Pure: the worker asks [`StoppingRule::done`] after every timed pair.

use serde::{Deserialize, Serialize};

use super::stats::{speedup, Speedup};

/// Stop once the speedup's 95% interval is within `half_width` of it either
/// side or, under a rule that `decides_gates`, lies wholly on one side of the
/// speed gate the request names; after at least `min_pairs` timed pairs (or
/// at once after them when the speedup is withheld, which needs no
/// precision); never past the timing's `repetitions`.
///
/// Deciding the gate is what a grade needs: a kernel at twice its gate is
/// judged the same by a 4% interval as by a 1% one, so only kernels near
/// their gate pay for the narrow interval (docs/INTEGRITY.md, rule 7).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StoppingRule {
    pub min_pairs: u32,
    pub half_width: f64,
    /// Also stop once the interval is clear of the gate (absent in rules
    /// recorded before it: they did not).
    #[serde(default)]
    pub decides_gates: bool,
}

/// What ended a timing's pairs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stopped {
    /// The interval came within the rule's half width.
    Settled,
    /// The interval lay wholly above or below the gate.
    ClearOfGate,
    /// A finding withheld the speedup, so no precision was needed.
    Withheld,
    /// The timing's most pairs ran.
    MostPairs,
}

impl Stopped {
    /// How a report says it.
    pub fn phrase(self) -> &'static str {
        match self {
            Self::Settled => "the interval settled",
            Self::ClearOfGate => "the interval cleared the gate",
            Self::Withheld => "the speedup was withheld",
            Self::MostPairs => "every pair ran",
        }
    }
}

impl StoppingRule {
    /// Five pairs at least, then a 1% interval or one clear of the gate.
    pub const DEFAULT: Self = Self {
        min_pairs: 5,
        half_width: 0.01,
        decides_gates: true,
    };

    /// Five pairs at least, then a 1% interval, whatever the gate: the rule
    /// of every timing recorded without one, and of a comparison, whose
    /// ratio of two kernels needs both intervals narrow.
    pub const NARROW: Self = Self {
        decides_gates: false,
        ..Self::DEFAULT
    };

    /// [`Self::NARROW`], as serde fills in an absent rule.
    pub fn before_gates() -> Self {
        Self::NARROW
    }

    /// Whether a timing stopped by this rule stands for one the rule named
    /// `wanted` would stop: the same rule, or this one without the gate's
    /// way out (it ran at least as many pairs as the gate's would have).
    pub fn answers_for(&self, wanted: &str) -> bool {
        let with_gates = Self {
            decides_gates: true,
            ..*self
        };
        self.name() == wanted || with_gates.name() == wanted
    }

    /// The rule's name, as a report and a journal key spell it. The gate's
    /// threshold is not in it: a gradebook row records its gate apart.
    pub fn name(&self) -> String {
        let gate = match self.decides_gates {
            true => "-or-clear-of-gate",
            false => "",
        };
        format!(
            "ci95-within-{}pct{gate}-after-{}",
            self.half_width * 100.0,
            self.min_pairs
        )
    }

    /// Whether the interval of `speedup` is narrow enough.
    pub fn settled(&self, speedup: &Speedup) -> bool {
        speedup.ci_high - speedup.ci_low <= 2.0 * self.half_width * speedup.point
    }

    /// Why timing stops after these paired samples, with at most `most`
    /// pairs, when a finding has (or has not) withheld the speedup already
    /// and `gate` is the threshold judging it (if any); `None`: go on.
    pub fn stop(
        &self,
        starter_ms: &[f64],
        student_ms: &[f64],
        most: u32,
        withheld: bool,
        gate: Option<f64>,
    ) -> Option<Stopped> {
        let pairs = starter_ms.len().min(student_ms.len()) as u32;
        if pairs < self.min_pairs.min(most) {
            return None;
        }
        if withheld {
            return Some(Stopped::Withheld);
        }
        let interval = speedup(starter_ms, student_ms).ok();
        // The point with its whole interval, on one side of the gate.
        let clear = |s: &Speedup| {
            gate.is_some_and(|g| (s.ci_low >= g && s.point >= g) || (s.ci_high < g && s.point < g))
        };
        match interval {
            Some(s) if self.settled(&s) => Some(Stopped::Settled),
            Some(s) if self.decides_gates && clear(&s) => Some(Stopped::ClearOfGate),
            _ => (pairs >= most).then_some(Stopped::MostPairs),
        }
    }
}

impl std::fmt::Display for StoppingRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "stops once the 95% interval is within {}% either side",
            self.half_width * 100.0,
        )?;
        if self.decides_gates {
            write!(f, " or wholly above or below the speed gate")?;
        }
        write!(f, ", after {} pairs at least", self.min_pairs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pairs from a stand-in timer until the rule says stop: how many ran,
    /// and why they stopped.
    fn pairs_run(
        rule: StoppingRule,
        most: u32,
        withheld: bool,
        gate: Option<f64>,
        timer: impl Fn(u32) -> (f64, f64),
    ) -> (u32, Stopped) {
        let (mut starter, mut student) = (Vec::new(), Vec::new());
        for pair in 0.. {
            let (a, b) = timer(pair);
            starter.push(a);
            student.push(b);
            if let Some(why) = rule.stop(&starter, &student, most, withheld, gate) {
                return (pair + 1, why);
            }
        }
        unreachable!("the loop returns")
    }

    /// About 4% run-to-run noise, the paged lab's, around a 2x speedup.
    fn noisy(pair: u32) -> (f64, f64) {
        let wobble = [1.0, 1.04, 0.96, 1.03, 0.97, 1.05, 0.95][pair as usize % 7];
        (2.0 * wobble, 1.0 / wobble)
    }

    #[test]
    fn a_steady_timer_stops_after_the_minimum_pairs() {
        let steady = |_| (2.0, 1.0);
        assert_eq!(
            pairs_run(StoppingRule::DEFAULT, 15, false, None, steady),
            (5, Stopped::Settled)
        );
    }

    #[test]
    fn a_noisy_timer_runs_every_pair_and_a_wider_rule_stops_it_sooner() {
        assert_eq!(
            pairs_run(StoppingRule::DEFAULT, 15, false, None, noisy),
            (15, Stopped::MostPairs)
        );
        let wide = StoppingRule {
            half_width: 0.10,
            ..StoppingRule::DEFAULT
        };
        let (pairs, why) = pairs_run(wide, 15, false, None, noisy);
        assert!(pairs < 15, "{pairs}");
        assert_eq!(why, Stopped::Settled);
    }

    #[test]
    fn a_noisy_timer_far_from_its_gate_stops_once_the_interval_clears_it() {
        // Twice the gate, or half of it: decided after the minimum pairs.
        for gate in [1.0, 4.0] {
            assert_eq!(
                pairs_run(StoppingRule::DEFAULT, 15, false, Some(gate), noisy),
                (5, Stopped::ClearOfGate),
                "gate {gate}"
            );
        }
        // At the gate the interval straddles it: every pair runs.
        assert_eq!(
            pairs_run(StoppingRule::DEFAULT, 15, false, Some(2.0), noisy),
            (15, Stopped::MostPairs)
        );
        // A rule that does not decide gates ignores the one it is given.
        let narrow_only = StoppingRule {
            decides_gates: false,
            ..StoppingRule::DEFAULT
        };
        assert_eq!(
            pairs_run(narrow_only, 15, false, Some(1.0), noisy),
            (15, Stopped::MostPairs)
        );
    }

    #[test]
    fn a_withheld_speedup_stops_at_the_minimum_and_a_short_timing_at_its_end() {
        let drifting = |pair: u32| (2.0 + pair as f64, 1.0);
        assert_eq!(
            pairs_run(StoppingRule::DEFAULT, 15, true, None, drifting),
            (5, Stopped::Withheld)
        );
        assert_eq!(
            pairs_run(StoppingRule::DEFAULT, 3, false, None, drifting),
            (3, Stopped::MostPairs)
        );
    }

    #[test]
    fn the_rule_is_named_and_survives_json_and_an_older_rule_loads_as_it_was() {
        assert_eq!(
            StoppingRule::DEFAULT.name(),
            "ci95-within-1pct-or-clear-of-gate-after-5"
        );
        let json = serde_json::to_string(&StoppingRule::DEFAULT).unwrap();
        assert_eq!(
            serde_json::from_str::<StoppingRule>(&json).unwrap(),
            StoppingRule::DEFAULT
        );
        let older: StoppingRule =
            serde_json::from_str(r#"{"min_pairs":5,"half_width":0.01}"#).unwrap();
        assert_eq!(older, StoppingRule::NARROW);
        assert_eq!(older.name(), "ci95-within-1pct-after-5");
    }

    #[test]
    fn a_timing_that_ran_to_the_narrow_interval_answers_for_the_rule_that_also_decides_gates() {
        let now = StoppingRule::DEFAULT.name();
        assert!(StoppingRule::NARROW.answers_for(&now));
        assert!(StoppingRule::DEFAULT.answers_for(&now));
        // Not the other way: a timing stopped at the gate ran fewer pairs.
        assert!(!StoppingRule::DEFAULT.answers_for(&StoppingRule::NARROW.name()));
        let wider = StoppingRule {
            half_width: 0.02,
            ..StoppingRule::NARROW
        };
        assert!(!wider.answers_for(&now));
    }
}
