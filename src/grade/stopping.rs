//! When timing stops, as data (as nvbench names its stopping criteria):
//! the rule travels in every timing request, is printed with every timing
//! and keys a gradebook's rows, so a speedup always says what ended it.
//!
//! Pure: the worker asks [`StoppingRule::done`] after every timed pair.

use serde::{Deserialize, Serialize};

use super::stats::{speedup, Speedup};

/// Stop once the speedup's 95% interval is within `half_width` of it either
/// side, after at least `min_pairs` timed pairs (or at once after them when
/// the speedup is withheld, which needs no precision); never past the
/// timing's `repetitions`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StoppingRule {
    pub min_pairs: u32,
    pub half_width: f64,
}

impl Default for StoppingRule {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl StoppingRule {
    /// Five pairs at least, then a 1% interval.
    pub const DEFAULT: Self = Self {
        min_pairs: 5,
        half_width: 0.01,
    };

    /// The rule's name, as a report and a journal key spell it.
    pub fn name(&self) -> String {
        format!(
            "ci95-within-{}pct-after-{}",
            self.half_width * 100.0,
            self.min_pairs
        )
    }

    /// Whether the interval of `speedup` is narrow enough.
    pub fn settled(&self, speedup: &Speedup) -> bool {
        speedup.ci_high - speedup.ci_low <= 2.0 * self.half_width * speedup.point
    }

    /// Whether timing stops after these paired samples, with at most `most`
    /// pairs, when a finding has (or has not) withheld the speedup already.
    pub fn done(&self, starter_ms: &[f64], student_ms: &[f64], most: u32, withheld: bool) -> bool {
        let pairs = starter_ms.len().min(student_ms.len()) as u32;
        if pairs >= most {
            return true;
        }
        if pairs < self.min_pairs.min(most) {
            return false;
        }
        withheld || speedup(starter_ms, student_ms).is_ok_and(|s| self.settled(&s))
    }
}

impl std::fmt::Display for StoppingRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "stops once the 95% interval is within {}% either side, after {} pairs at least",
            self.half_width * 100.0,
            self.min_pairs
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pairs from a stand-in timer until the rule says stop: how many ran.
    fn pairs_run(
        rule: StoppingRule,
        most: u32,
        withheld: bool,
        timer: impl Fn(u32) -> (f64, f64),
    ) -> u32 {
        let (mut starter, mut student) = (Vec::new(), Vec::new());
        for pair in 0.. {
            let (a, b) = timer(pair);
            starter.push(a);
            student.push(b);
            if rule.done(&starter, &student, most, withheld) {
                return pair + 1;
            }
        }
        unreachable!("the loop returns")
    }

    #[test]
    fn a_steady_timer_stops_after_the_minimum_pairs() {
        let steady = |_| (2.0, 1.0);
        assert_eq!(pairs_run(StoppingRule::DEFAULT, 15, false, steady), 5);
    }

    #[test]
    fn a_noisy_timer_runs_every_pair_and_a_wider_rule_stops_it_sooner() {
        // About 4% run-to-run noise, the paged lab's.
        let noisy = |pair: u32| {
            let wobble = [1.0, 1.04, 0.96, 1.03, 0.97, 1.05, 0.95][pair as usize % 7];
            (2.0 * wobble, 1.0 / wobble)
        };
        assert_eq!(pairs_run(StoppingRule::DEFAULT, 15, false, noisy), 15);
        let wide = StoppingRule {
            min_pairs: 5,
            half_width: 0.10,
        };
        assert!(pairs_run(wide, 15, false, noisy) < 15);
    }

    #[test]
    fn a_withheld_speedup_stops_at_the_minimum_and_a_short_timing_at_its_end() {
        let noisy = |pair: u32| (2.0 + pair as f64, 1.0);
        assert_eq!(pairs_run(StoppingRule::DEFAULT, 15, true, noisy), 5);
        assert_eq!(pairs_run(StoppingRule::DEFAULT, 3, false, noisy), 3);
    }

    #[test]
    fn the_rule_is_named_and_survives_json() {
        assert_eq!(StoppingRule::DEFAULT.name(), "ci95-within-1pct-after-5");
        let json = serde_json::to_string(&StoppingRule::DEFAULT).unwrap();
        assert_eq!(
            serde_json::from_str::<StoppingRule>(&json).unwrap(),
            StoppingRule::DEFAULT
        );
    }
}
