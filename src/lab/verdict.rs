//! The one line that speaks for a whole check, and the rules every lab
//! shares for it.
//!
//! A case's diagnosis reads one output; the verdict reads the pattern across
//! all of them: which cases fail and which pass, and the causes their
//! diagnoses name. A lab first tries its own rules (it knows what each of
//! its planted cases is there to show), then falls back on [`common`]:
//! what stops a kernel from being graded at all (a hang, a crash, a write
//! outside `out`, a touched input, a race) before any wrong value, and
//! otherwise the cause most failing cases share.

use super::definition::{CaseState, CaseSummary};

/// Causes the shared rules and every lab's diagnosis use alike.
pub mod cause {
    pub const OUT_OF_BOUNDS_WRITE: &str = "out-of-bounds-write";
    pub const INPUT_WRITTEN: &str = "input-written";
    pub const RACE: &str = "race";
    pub const NONDETERMINISTIC_ORDER: &str = "nondeterministic-order";
    pub const NAN_GUARD_READ: &str = "nan-guard-read";
    pub const NAN_SENTINEL_READ: &str = "nan-sentinel-read";
    pub const NAN_SCRATCH_READ: &str = "nan-scratch-read";
    pub const NAN_EXP_OVERFLOW: &str = "nan-exp-overflow";
    pub const NAN_FROM_OUT: &str = "nan-from-out";
    pub const NAN_COMPUTED: &str = "nan-computed";
    pub const NEVER_WRITTEN: &str = "never-written";
    pub const COPIED_FROM_OUT: &str = "copied-from-out";
    pub const EXPECTED_FILE_WRONG: &str = "expected-file-wrong";
    /// No result within the case's time: a loop that never ends, or a
    /// barrier only some threads reach.
    pub const HANG: &str = "hang";
    /// The worker process died during the case (not a CUDA error it could report).
    pub const WORKER_DIED: &str = "worker-died";
    /// The worker could not run the case: it did not start, was of another
    /// version, was stopped for a newer save, or answered out of turn.
    pub const WORKER_FAILED: &str = "worker-failed";
    /// CUDA's word for a launch that failed, as the worker read it.
    pub const ILLEGAL_ADDRESS: &str = "illegal-address";
    pub const MISALIGNED_ADDRESS: &str = "misaligned-address";
    pub const TOO_MANY_RESOURCES: &str = "too-many-resources";
    pub const LAUNCH_REFUSED: &str = "launch-refused";
    pub const OUT_OF_MEMORY: &str = "out-of-memory";
    pub const KERNEL_FAILED: &str = "kernel-failed";
}

/// The lab-independent verdict: what stops grading first, else the cause
/// most failing cases share; `None` when no case ran.
pub fn common(cases: &[CaseSummary<'_>]) -> Option<String> {
    if let Some(line) = settled(cases) {
        return line;
    }
    Some(severe(cases).unwrap_or_else(|| by_cause(cases)))
}

/// `Some(None)` when nothing ran, `Some(line)` when every case that ran
/// passed, `None` when something failed (the rules then decide).
pub fn settled(cases: &[CaseSummary<'_>]) -> Option<Option<String>> {
    let ran: Vec<_> = cases
        .iter()
        .filter(|c| c.state != CaseState::NotRun)
        .collect();
    if ran.is_empty() {
        return Some(None);
    }
    if ran.iter().all(|c| c.state == CaseState::Pass) {
        let not_run = cases.len() - ran.len();
        return Some(Some(if not_run == 0 {
            format!("all {} cases pass", ran.len())
        } else {
            format!(
                "the {} cases that ran pass; {not_run} did not run",
                ran.len()
            )
        }));
    }
    None
}

/// A hang, a crash or a broken integrity rule, which comes before any
/// reading of values (one root cause explains the rest).
pub fn severe(cases: &[CaseSummary<'_>]) -> Option<String> {
    stopped(cases).or_else(|| broken(cases))
}

/// A case that hung, else one that crashed: grading stopped there.
fn stopped(cases: &[CaseSummary<'_>]) -> Option<String> {
    let states = [
        (CaseState::Timeout, "hangs on"),
        (CaseState::Crash, "crashes on"),
    ];
    for (state, verb) in states {
        let hit = select(cases, |c| c.state == state);
        if let Some(first) = hit.first() {
            return Some(format!("{verb} {}: {}", names(&hit), first.diagnosis));
        }
    }
    None
}

/// A write outside `out`, a touched input or a race, in cases that finished.
fn broken(cases: &[CaseSummary<'_>]) -> Option<String> {
    for slug in [
        cause::OUT_OF_BOUNDS_WRITE,
        cause::INPUT_WRITTEN,
        cause::RACE,
    ] {
        let hit = with_cause(cases, slug);
        if let Some(first) = hit.first() {
            return Some(format!("{} ({})", first.diagnosis, in_cases(&hit, cases)));
        }
    }
    None
}

/// The cause shared by the most failing cases, with that group's first diagnosis.
pub fn by_cause(cases: &[CaseSummary<'_>]) -> String {
    let failing = select(cases, |c| c.state == CaseState::Fail);
    let mut groups: Vec<(Option<&str>, Vec<&CaseSummary<'_>>)> = Vec::new();
    for case in &failing {
        match groups.iter_mut().find(|(cause, _)| *cause == case.cause) {
            Some((_, members)) => members.push(case),
            None => groups.push((case.cause, vec![case])),
        }
    }
    // The largest group that names a cause; a group naming none only when no other exists.
    let chosen = groups
        .iter()
        .filter(|(cause, _)| cause.is_some())
        .max_by_key(|(_, members)| members.len())
        .or_else(|| groups.first());
    match chosen {
        Some((_, members)) => {
            let members: Vec<&CaseSummary<'_>> = members.to_vec();
            format!("{} ({})", members[0].diagnosis, in_cases(&members, cases))
        }
        None => "some cases did not pass".into(),
    }
}

/// The cases that satisfy `keep`, in order.
pub fn select<'c, 'a>(
    cases: &'c [CaseSummary<'a>],
    keep: impl Fn(&CaseSummary<'a>) -> bool,
) -> Vec<&'c CaseSummary<'a>> {
    cases.iter().filter(|c| keep(c)).collect()
}

/// The cases whose diagnosis names `slug`.
pub fn with_cause<'c, 'a>(cases: &'c [CaseSummary<'a>], slug: &str) -> Vec<&'c CaseSummary<'a>> {
    select(cases, |c| c.cause == Some(slug))
}

/// Whether the case called `name` ran and failed; `None` when the check has no such case.
pub fn failed(cases: &[CaseSummary<'_>], name: &str) -> Option<bool> {
    cases
        .iter()
        .find(|c| c.name == name && c.state != CaseState::NotRun)
        .map(|c| c.state != CaseState::Pass)
}

/// `"a"`, `"a and b"`, `"a, b, c and 4 more"`.
pub fn names(cases: &[&CaseSummary<'_>]) -> String {
    const SHOWN: usize = 3;
    let listed: Vec<&str> = cases.iter().take(SHOWN).map(|c| c.name).collect();
    match (cases.len(), listed.split_last()) {
        (_, None) => String::new(),
        (1, Some((only, _))) => (*only).to_owned(),
        (n, Some((last, rest))) if n <= SHOWN => format!("{} and {last}", rest.join(", ")),
        (n, _) => format!("{} and {} more", listed.join(", "), n - SHOWN),
    }
}

/// `"in random-small and chunk-of-17, 2 of 14 cases"`.
pub fn in_cases(hit: &[&CaseSummary<'_>], all: &[CaseSummary<'_>]) -> String {
    let failing = all
        .iter()
        .filter(|c| !matches!(c.state, CaseState::Pass | CaseState::NotRun))
        .count();
    let mut line = format!("in {}", names(hit));
    if failing > hit.len() {
        line.push_str(&format!("; {failing} of {} cases fail", all.len()));
    } else {
        line.push_str(&format!(", {} of {} cases", hit.len(), all.len()));
    }
    line
}

/// The verdict of a lab whose diagnosis replays planted bugs' models: what
/// stops grading first, then the bug that [`confirmed`] names, then the
/// cause most failing cases share; `None` when no case ran.
pub fn with_planted(cases: &[CaseSummary<'_>], planted: &[(&str, &str)]) -> Option<String> {
    if let Some(line) = settled(cases) {
        return line;
    }
    let confirmed = confirmed(cases, planted);
    if let Some(line) = stopped(cases) {
        // A hang or a crash comes first; a planted bug that explains the
        // cases that finished is still named after it (a kernel that reads
        // the wrong blocks reads unmapped ones where the cache is placed high).
        return Some(match confirmed {
            Some(named) => format!("{line}; in the cases that finished: {named}"),
            None => line,
        });
    }
    // A broken integrity rule speaks alone: every case finished, and it is
    // what to fix first.
    if let Some(line) = broken(cases) {
        return Some(line);
    }
    Some(confirmed.unwrap_or_else(|| by_cause(cases)))
}

/// The planted bug whose model reproduces most failing cases, when it
/// reproduces at least half of them: `planted` lists each bug's cause word
/// (what a case's diagnosis names when the model matched) and its defect.
pub fn confirmed(cases: &[CaseSummary<'_>], planted: &[(&str, &str)]) -> Option<String> {
    let failing = select(cases, |c| c.state == CaseState::Fail);
    let mut best: Option<(&str, Vec<&CaseSummary<'_>>)> = None;
    for &(name, defect) in planted {
        let hit: Vec<&CaseSummary<'_>> = failing
            .iter()
            .copied()
            // A diagnosis may name several bugs whose models all reproduce
            // the case (the FP8 lab's, when two defects both read NaN bytes).
            .filter(|c| c.cause == Some(name) || c.diagnosis.contains(defect))
            .collect();
        if hit.len() > best.as_ref().map_or(0, |(_, b)| b.len()) {
            best = Some((defect, hit));
        }
    }
    let (defect, hit) = best?;
    if hit.len() * 2 < failing.len() {
        return None;
    }
    let passing = select(cases, |c| c.state == CaseState::Pass);
    let passes = match passing.len() {
        0 => String::new(),
        n if n <= 3 => format!(
            "; {} pass{}",
            names(&passing),
            if n == 1 { "es" } else { "" }
        ),
        n => format!("; {n} other cases pass"),
    };
    // The failing cases it leaves unexplained are said, so a second defect
    // is not hidden behind the first.
    let unexplained: Vec<&CaseSummary<'_>> = failing
        .iter()
        .copied()
        .filter(|c| !hit.iter().any(|h| h.name == c.name))
        .collect();
    let rest = match unexplained.as_slice() {
        [] => String::new(),
        cases => format!("; it does not explain {}", names(cases)),
    };
    Some(format!(
        "{defect}: its model reproduces the output of {} of {} failing cases ({}){rest}{passes}",
        hit.len(),
        failing.len(),
        names(&hit)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case<'a>(
        name: &'a str,
        state: CaseState,
        diagnosis: &'a str,
        cause: Option<&'a str>,
    ) -> CaseSummary<'a> {
        CaseSummary {
            name,
            state,
            comparison: None,
            integrity: None,
            diagnosis,
            cause,
        }
    }

    #[test]
    fn nothing_run_has_no_verdict_and_all_passing_says_so() {
        assert_eq!(common(&[case("a", CaseState::NotRun, "", None)]), None);
        let cases = [
            case("a", CaseState::Pass, "correct", None),
            case("b", CaseState::Pass, "correct", None),
        ];
        assert_eq!(common(&cases).as_deref(), Some("all 2 cases pass"));
    }

    #[test]
    fn a_hang_comes_before_wrong_values() {
        let cases = [
            case("a", CaseState::Fail, "rows wrong", Some("x")),
            case("b", CaseState::Timeout, "no answer within 4 s", None),
        ];
        assert_eq!(common(&cases).unwrap(), "hangs on b: no answer within 4 s");
    }

    #[test]
    fn the_cause_most_cases_share_speaks() {
        let cases = [
            case("a", CaseState::Fail, "one thing", Some("x")),
            case("b", CaseState::Fail, "another at row 3", Some("y")),
            case("c", CaseState::Fail, "another at row 9", Some("y")),
            case("d", CaseState::Pass, "correct", None),
        ];
        assert_eq!(
            common(&cases).unwrap(),
            "another at row 3 (in b and c; 3 of 4 cases fail)"
        );
    }

    #[test]
    fn the_planted_bug_that_reproduces_most_cases_is_named_with_what_it_leaves() {
        let planted = [("x-bug", "the x defect"), ("y-bug", "the y defect")];
        let cases = [
            case("a", CaseState::Fail, "x here", Some("x-bug")),
            case("b", CaseState::Fail, "x there", Some("x-bug")),
            case("c", CaseState::Fail, "NaN in rows 1 to 3", None),
            case("d", CaseState::Pass, "correct", None),
        ];
        assert_eq!(
            with_planted(&cases, &planted).unwrap(),
            "the x defect: its model reproduces the output of 2 of 3 failing cases (a and b); \
             it does not explain c; d passes"
        );
        // A model that explains fewer than half the failing cases names nothing.
        let few = [
            case("a", CaseState::Fail, "x here", Some("x-bug")),
            case("b", CaseState::Fail, "rows wrong", None),
            case("c", CaseState::Fail, "rows wrong", None),
        ];
        assert_eq!(confirmed(&few, &planted), None);
    }

    #[test]
    fn a_crash_comes_first_and_the_planted_bug_the_other_cases_show_follows() {
        let planted = [("x-bug", "the x defect")];
        let cases = [
            case("a", CaseState::Fail, "x here", Some("x-bug")),
            case(
                "b",
                CaseState::Crash,
                "illegal address",
                Some("illegal-address"),
            ),
            case("c", CaseState::Pass, "correct", None),
        ];
        assert_eq!(
            with_planted(&cases, &planted).unwrap(),
            "crashes on b: illegal address; in the cases that finished: the x defect: its model \
             reproduces the output of 1 of 1 failing cases (a); c passes"
        );
        // A race, found in cases that all finished, speaks alone.
        let raced = [
            case(
                "a",
                CaseState::Fail,
                "race in rows 1 to 3",
                Some(cause::RACE),
            ),
            case("b", CaseState::Fail, "x here", Some("x-bug")),
        ];
        assert_eq!(
            with_planted(&raced, &planted).unwrap(),
            "race in rows 1 to 3 (in a; 2 of 2 cases fail)"
        );
        // Without a planted bug to name, the crash speaks alone.
        let unexplained = [
            case("a", CaseState::Fail, "rows wrong", None),
            case(
                "b",
                CaseState::Crash,
                "illegal address",
                Some("illegal-address"),
            ),
        ];
        assert_eq!(
            with_planted(&unexplained, &planted).unwrap(),
            "crashes on b: illegal address"
        );
    }

    #[test]
    fn name_lists_stay_short() {
        let cases: Vec<CaseSummary<'_>> = ["a", "b", "c", "d", "e"]
            .iter()
            .map(|n| case(n, CaseState::Fail, "", None))
            .collect();
        let refs: Vec<&CaseSummary<'_>> = cases.iter().collect();
        assert_eq!(names(&refs[..2]), "a and b");
        assert_eq!(names(&refs[..3]), "a, b and c");
        assert_eq!(names(&refs), "a, b, c and 2 more");
    }
}
