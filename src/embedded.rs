//! The sessions recorded on an H200, compiled into the binary by `build.rs`
//! so an installed flashprof can replay them without a checkout.

use std::path::{Path, PathBuf};

include!(concat!(env!("OUT_DIR"), "/embedded.rs"));

/// One recorded history store shipped inside the binary.
pub struct RecordedSession {
    /// The folder under the checkout it was embedded from.
    folder: &'static str,
    files: &'static [(&'static str, &'static [u8])],
}

/// The walkthrough: the starter, a compile error, planted bugs, the reference.
pub static WALKTHROUGH: RecordedSession = RecordedSession {
    folder: "assets/recorded-session/",
    files: RECORDED_SESSION,
};

/// The kernel ladder, starter to top rung, for lectures (docs/LADDER.md).
pub static LADDER: RecordedSession = RecordedSession {
    folder: "assets/recorded-session-ladder/",
    files: LADDER_SESSION,
};

/// The paged-decode walk, starter to reference along the memory roof, for
/// lectures after the ladder (docs/LADDER.md).
pub static DECODE_WALK: RecordedSession = RecordedSession {
    folder: "assets/recorded-session-decode-walk/",
    files: DECODE_WALK_SESSION,
};

impl RecordedSession {
    /// Writes the session into `dir` and returns its `history.jsonl`.
    pub fn unpack(&self, dir: &Path) -> std::io::Result<PathBuf> {
        for (path, bytes) in self.files {
            let relative = path.strip_prefix(self.folder).unwrap_or(path);
            let target = dir.join(relative);
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(target, bytes)?;
        }
        Ok(dir.join("history.jsonl"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::history::HistoryStore;
    use crate::outcome::CheckReport;
    use crate::protocol::CaseStatus;

    fn records(session: &RecordedSession) -> Vec<crate::app::history::HistoryRecord> {
        let dir = tempfile::tempdir().unwrap();
        let history = session.unpack(dir.path()).unwrap();
        HistoryStore::locate(&history).read().unwrap().records
    }

    /// The reports of `session`'s records, which must be `runs` saves that
    /// were each checked.
    fn checked_reports(session: &RecordedSession, runs: usize) -> Vec<CheckReport> {
        let read = records(session);
        assert_eq!(read.len(), runs, "{} runs recorded", read.len());
        read.into_iter()
            .map(|record| record.report.expect("every save was checked"))
            .collect()
    }

    fn passes_every_case(report: &CheckReport) -> bool {
        report.cases.iter().all(|c| c.status == CaseStatus::Pass)
    }

    #[test]
    fn the_recorded_session_unpacks_into_a_readable_history() {
        let read = records(&WALKTHROUGH);
        assert!(read.len() >= 4, "{} runs recorded", read.len());
    }

    #[test]
    fn the_ladder_session_walks_from_the_starter_to_the_top_rung_with_every_save_checked() {
        // The starter, five rungs and plain TF32 before the top rung.
        let reports = checked_reports(&LADDER, 7);
        let passed = |index: usize| passes_every_case(&reports[index]);
        for index in [0, 1, 2, 3, 4, 6] {
            assert!(passed(index), "save {} passes every case", index + 1);
        }
        assert!(!passed(5), "plain TF32 fails a case");
        let median = |index: usize| {
            reports[index]
                .timing
                .as_ref()
                .expect("timed")
                .student
                .median
        };
        for index in 1..5 {
            assert!(
                median(index) < median(index - 1),
                "each rung is faster than the one below"
            );
        }
        assert!(median(6) < median(4), "the top rung is the fastest");
    }

    #[test]
    fn the_decode_walk_reads_less_time_at_every_step_and_every_save_passes_and_was_profiled() {
        // The starter, the walk's three steps, the reference.
        let reports = checked_reports(&DECODE_WALK, 5);
        for (index, report) in reports.iter().enumerate() {
            assert_eq!(report.lab, "paged-decode", "save {}", index + 1);
            assert!(
                passes_every_case(report),
                "save {} passes every case",
                index + 1
            );
            assert!(
                !report.counters.is_empty(),
                "save {} has counters",
                index + 1
            );
        }
        let medians: Vec<f64> = reports
            .iter()
            .map(|r| r.timing.as_ref().expect("timed").student.median)
            .collect();
        assert!(
            medians.windows(2).all(|pair| pair[1] < pair[0]),
            "each step is faster than the one before: {medians:?}"
        );
    }
}
