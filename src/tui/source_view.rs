//! The source view's rows (`l`, docs/TUI.md): each line of the profiled
//! text with its share of the stall samples, its main reason and memory
//! findings, and its change since the save profiled before, lines matched
//! across the two texts by a line diff. Pure: the view draws these rows.

use std::collections::HashMap;

use crate::app::history::{line_diff, DiffLine};
use crate::grade::lines::{LineKey, LineProfile, LineReading};

/// A text and the line profile taken of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Profiled {
    pub source: String,
    pub profile: LineProfile,
}

/// How a line's share moved since the previous profiled save.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Change {
    /// No earlier profile to compare with.
    Unknown,
    /// The line is not in the earlier text (written or edited since).
    New,
    /// Its share then and now, in points (now less then).
    Points(f64),
}

/// One line of the file as the source view shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceRow<'a> {
    /// 1-based, in the profiled text.
    pub line: u32,
    pub text: &'a str,
    /// Its reading, when any instruction of it was sampled or counted.
    pub reading: Option<&'a LineReading>,
    pub change: Change,
}

impl SourceRow<'_> {
    pub fn share(&self) -> f64 {
        self.reading.map_or(0.0, |r| r.share)
    }
}

/// Every line of `now`'s text, in file order, each with its reading and its
/// change since `before` (the save profiled before it).
pub fn rows<'a>(now: &'a Profiled, before: Option<&Profiled>) -> Vec<SourceRow<'a>> {
    let then = before.map(|b| {
        (
            shares_by_line(&b.profile),
            earlier_lines(&b.source, &now.source),
        )
    });
    let readings: HashMap<u32, &LineReading> = now
        .profile
        .lines
        .iter()
        .filter_map(|r| match r.line {
            LineKey::Student(n) => Some((n, r)),
            LineKey::Own => None,
        })
        .collect();
    now.source
        .lines()
        .enumerate()
        .map(|(index, text)| {
            let line = index as u32 + 1;
            let reading = readings.get(&line).copied();
            let share = reading.map_or(0.0, |r| r.share);
            let change = match &then {
                None => Change::Unknown,
                Some((shares, earlier)) => match earlier.get(index).copied().flatten() {
                    None => Change::New,
                    Some(old) => Change::Points(100.0 * (share - shares.get(old))),
                },
            };
            SourceRow {
                line,
                text,
                reading,
                change,
            }
        })
        .collect()
}

/// The rows that were sampled, hottest first (ties in file order).
pub fn hottest_first(mut rows: Vec<SourceRow<'_>>) -> Vec<SourceRow<'_>> {
    rows.retain(|row| row.reading.is_some_and(|r| r.samples > 0));
    rows.sort_by(|a, b| b.share().total_cmp(&a.share()).then(a.line.cmp(&b.line)));
    rows
}

/// flashprof's own code's share (its prelude and a body's wrapper), which
/// no line of the file carries.
pub fn own_share(profile: &LineProfile) -> f64 {
    profile
        .lines
        .iter()
        .filter(|r| r.line == LineKey::Own)
        .map(|r| r.share)
        .fold(0.0, |sum, share| sum + share)
}

/// Each line's share by its 1-based number (a map: a stored profile may
/// name any line number, however large).
struct Shares(HashMap<u32, f64>);

impl Shares {
    fn get(&self, line: u32) -> f64 {
        self.0.get(&line).copied().unwrap_or(0.0)
    }
}

fn shares_by_line(profile: &LineProfile) -> Shares {
    let shares = profile
        .lines
        .iter()
        .filter_map(|r| match r.line {
            LineKey::Student(n) => Some((n, r.share)),
            LineKey::Own => None,
        })
        .collect();
    Shares(shares)
}

/// For each line of `now` (by index), the 1-based line of `then` it is the
/// same line as, by a line diff; `None` for a line written since.
fn earlier_lines(then: &str, now: &str) -> Vec<Option<u32>> {
    let mut earlier = Vec::new();
    let mut old = 0u32;
    for step in line_diff(then, now) {
        match step {
            DiffLine::Same(_) => {
                old += 1;
                earlier.push(Some(old));
            }
            DiffLine::Removed(_) => old += 1,
            DiffLine::Added(_) => earlier.push(None),
        }
    }
    earlier
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grade::lines::InstructionCounts;

    fn profiled(source: &str, shares: &[(LineKey, f64)]) -> Profiled {
        let lines = shares
            .iter()
            .map(|&(line, share)| LineReading {
                line,
                samples: (share * 1000.0) as u64,
                share,
                stalls: vec![("smsp__pcsamp_warps_issue_stalled_barrier".into(), 1)],
                counts: InstructionCounts::default(),
                source: String::new(),
            })
            .collect();
        Profiled {
            source: source.to_owned(),
            profile: LineProfile {
                chip: "GH100".into(),
                total_samples: 1000,
                dropped_samples: 0,
                period_log2: 10,
                collect_ms: 1.0,
                sampled_ms: 0.0,
                counted_ms: 0.0,
                waited_ms: 0.0,
                setup_ms: 0.0,
                worker_ms: 0.0,
                charge_ms: 0.0,
                heat_ms: 0.0,
                counts_missing: None,
                lines,
                starter: None,
            },
        }
    }

    #[test]
    fn a_line_moved_by_an_edit_above_it_is_compared_with_itself_and_an_edited_one_is_new() {
        let before = profiled(
            "a();\nslow();\nc();\n",
            &[(LineKey::Student(2), 0.6), (LineKey::Student(3), 0.4)],
        );
        // A line added above `slow()`, and `c()` edited into `d()`.
        let now = profiled(
            "a();\nadded();\nslow();\nd();\n",
            &[(LineKey::Student(3), 0.5), (LineKey::Student(4), 0.5)],
        );
        let rows = rows(&now, Some(&before));
        let changes: Vec<(u32, Change)> = rows.iter().map(|r| (r.line, r.change)).collect();
        assert_eq!(changes[0], (1, Change::Points(0.0)));
        assert_eq!(changes[1], (2, Change::New));
        let Change::Points(slow) = changes[2].1 else {
            panic!("`slow()` is the same line: {changes:?}");
        };
        assert!((slow + 10.0).abs() < 1e-9, "60% then, 50% now: {slow}");
        assert_eq!(changes[3], (4, Change::New));
    }

    #[test]
    fn a_stored_profile_naming_any_line_number_costs_nothing_to_compare_with() {
        // A hand-written history may name line 4294967295.
        let before = profiled("x();\n", &[(LineKey::Student(u32::MAX), 1.0)]);
        let now = profiled("x();\n", &[(LineKey::Student(1), 1.0)]);
        assert_eq!(rows(&now, Some(&before))[0].change, Change::Points(100.0));
    }

    #[test]
    fn without_an_earlier_profile_no_change_is_claimed() {
        let now = profiled("x();\n", &[(LineKey::Student(1), 1.0)]);
        assert_eq!(rows(&now, None)[0].change, Change::Unknown);
    }

    #[test]
    fn hottest_first_keeps_only_sampled_lines_and_own_code_is_apart() {
        let now = profiled(
            "a();\nb();\nc();\n",
            &[
                (LineKey::Student(1), 0.2),
                (LineKey::Student(3), 0.7),
                (LineKey::Own, 0.1),
            ],
        );
        let hot: Vec<u32> = hottest_first(rows(&now, None))
            .iter()
            .map(|r| r.line)
            .collect();
        assert_eq!(hot, [3, 1]);
        assert!((own_share(&now.profile) - 0.1).abs() < 1e-12);
    }
}
