//! The history store's log (`app::history::HistoryStore::read` on
//! `.flashprof/history.jsonl`), read from a real file as `replay` and the
//! TUI read it.
//!
//! Properties: no panic; every non-blank line is either a record or counted
//! as unreadable; every record kept names its source by a hash (so no line
//! can point outside the store); summaries and the best-record pick work on
//! what was read; the records written back as a log read back as themselves.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use flashprof::app::history::{best_passing, is_source_hash, HistoryStore, LOG_FILE, STORE_DIR};
use libfuzzer_sys::fuzz_target;

fn scratch() -> PathBuf {
    // tmpfs where there is one: the target writes a file per input.
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

fn folder() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = scratch().join(format!("flashprof-fuzz-history-{}", std::process::id()));
        std::fs::create_dir_all(dir.join(STORE_DIR)).unwrap();
        dir
    })
}

fuzz_target!(|data: &[u8]| {
    // Unscoped: every record of the log is read, whichever file it names.
    let store = HistoryStore::locate(folder());
    let log = store.dir().join(LOG_FILE);
    std::fs::write(&log, data).unwrap();
    let history = store.read().expect("a readable log file reads");
    let lines = data
        .split(|&b| b == b'\n')
        .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
        .count();
    assert_eq!(history.records.len() + history.unreadable_lines, lines);
    for record in &history.records {
        assert!(is_source_hash(&record.source_hash));
        let _ = record.summary();
    }
    let _ = best_passing(&history.records);

    // What was read, written back, reads back.
    let mut again = Vec::new();
    for record in &history.records {
        again.extend(serde_json::to_vec(record).unwrap());
        again.push(b'\n');
    }
    std::fs::write(&log, &again).unwrap();
    let reread = store.read().unwrap();
    assert_eq!(reread.unreadable_lines, 0);
    assert_eq!(reread.records.len(), history.records.len());
    for (a, b) in reread.records.iter().zip(&history.records) {
        assert_eq!(a.source_hash, b.source_hash);
        assert_eq!(a.unix_ms, b.unix_ms);
        assert_eq!(a.report.is_some(), b.report.is_some());
    }
});
