//! The history store on real files: append, read back, survive a torn
//! write, find the best run, restore it without losing the current text.

mod tui_support;

use std::fs;
use std::io::Write;

use flashprof::app::history::{
    best_passing, source_hash, HistoryStore, RunOutcome, LOG_FILE, STORE_DIR,
};
use tui_support::{all_pass, compile_only};

fn store() -> (tempfile::TempDir, std::path::PathBuf, HistoryStore) {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("prefill.cu");
    let store = HistoryStore::beside(&file);
    (dir, file, store)
}

#[test]
fn runs_read_back_in_order_with_their_sources() {
    let (dir, _file, store) = store();
    assert_eq!(store.dir(), dir.path().join(STORE_DIR));
    let mut first = all_pass(1.5, 40);
    first.compile.image = vec![1, 2, 3];
    store.append_run("v1", &first).expect("append");
    store.append_run("v2", &compile_only()).expect("append");
    let history = store.read().expect("read");
    assert_eq!(history.unreadable_lines, 0);
    assert_eq!(history.records.len(), 2);
    let got = history.records[0].report.as_ref().expect("report");
    assert!(got.compile.image.is_empty(), "kernel images are not kept");
    // serde_json's float parsing may move the last bit, so compare what a screen shows.
    assert_eq!(RunOutcome::of(got), RunOutcome::of(&first));
    let names = |r: &flashprof::outcome::CheckReport| -> Vec<String> {
        r.cases.iter().map(|c| c.name.clone()).collect()
    };
    assert_eq!(names(got), names(&first));
    assert_eq!(
        store
            .source(&history.records[1].source_hash)
            .expect("source"),
        "v2"
    );
    assert_eq!(history.records[1].source_hash, source_hash("v2"));
}

#[test]
fn a_torn_last_line_is_skipped_and_the_next_record_survives() {
    let (_dir, _file, store) = store();
    store.append_run("v1", &all_pass(1.2, 40)).expect("append");
    let log = store.dir().join(LOG_FILE);
    // A process killed in the middle of a write leaves half a line.
    let mut handle = fs::OpenOptions::new()
        .append(true)
        .open(&log)
        .expect("open");
    handle
        .write_all(b"{\"unix_ms\": 17, \"source_ha")
        .expect("torn write");
    drop(handle);
    assert_eq!(store.read().expect("read").records.len(), 1);
    store
        .append_run("v3", &all_pass(2.0, 40))
        .expect("append after tear");
    let history = store.read().expect("read");
    assert_eq!(history.unreadable_lines, 1);
    let sources: Vec<String> = history
        .records
        .iter()
        .map(|r| store.source(&r.source_hash).expect("source"))
        .collect();
    assert_eq!(sources, ["v1", "v3"]);
}

#[test]
fn best_passing_prefers_the_fastest_passing_run() {
    let (_dir, _file, store) = store();
    store
        .append_run("slow", &all_pass(1.5, 40))
        .expect("append");
    store
        .append_run("fast", &all_pass(3.0, 40))
        .expect("append");
    store.append_run("broken", &compile_only()).expect("append");
    store
        .append_run("middle", &all_pass(2.0, 40))
        .expect("append");
    let records = store.read().expect("read").records;
    let best = best_passing(&records).expect("a passing run");
    assert_eq!(best.source_hash, source_hash("fast"));
    assert!(best_passing(&records[2..3]).is_none());
}

#[test]
fn restore_writes_the_best_text_and_keeps_the_current_one() {
    let (_dir, file, store) = store();
    store
        .append_run("fast", &all_pass(3.0, 40))
        .expect("append");
    fs::write(&file, "work in progress").expect("write current");
    let restored = store
        .restore_best(&file)
        .expect("restore")
        .expect("a best run");
    assert_eq!(restored.source_hash, source_hash("fast"));
    assert_eq!(fs::read_to_string(&file).expect("read file"), "fast");
    let records = store.read().expect("read").records;
    let last = records.last().expect("snapshot");
    assert!(last.report.is_none());
    assert_eq!(
        store.source(&last.source_hash).expect("source"),
        "work in progress"
    );
}

#[test]
fn restore_with_nothing_passing_changes_nothing() {
    let (_dir, file, store) = store();
    store.append_run("broken", &compile_only()).expect("append");
    fs::write(&file, "current").expect("write current");
    assert!(store.restore_best(&file).expect("restore").is_none());
    assert_eq!(fs::read_to_string(&file).expect("read"), "current");
    assert_eq!(store.read().expect("read").records.len(), 1);
}

#[test]
fn a_store_is_found_from_its_folder_its_log_or_the_folder_above() {
    let (dir, _file, store) = store();
    store.append_run("v1", &all_pass(1.0, 40)).expect("append");
    for path in [
        dir.path().to_path_buf(),
        store.dir().to_path_buf(),
        store.dir().join(LOG_FILE),
    ] {
        let found = HistoryStore::locate(&path);
        assert_eq!(
            found.read().expect("read").records.len(),
            1,
            "{}",
            path.display()
        );
    }
}

#[test]
fn restore_refuses_a_fifo_or_an_oversized_file_without_blocking_or_losing_it() {
    let (_dir, file, store) = store();
    store
        .append_run("fast", &all_pass(3.0, 40))
        .expect("append");
    let made = std::process::Command::new("mkfifo")
        .arg(&file)
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    let (sender, result) = std::sync::mpsc::channel();
    let (fifo, fifo_store) = (file.clone(), store.clone());
    std::thread::spawn(move || {
        let _ = sender.send(fifo_store.restore_best(&fifo).map(|r| r.is_some()));
    });
    let outcome = result
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("restore_best answered instead of blocking on the FIFO");
    let error = outcome.expect_err("a FIFO is not restored over");
    assert!(error.to_string().contains("FIFO"), "{error}");
    fs::remove_file(&file).expect("remove the FIFO");

    let big = "x".repeat((1 << 20) + 10);
    fs::write(&file, &big).expect("write");
    let error = store.restore_best(&file).expect_err("too large to record");
    assert!(error.to_string().contains("not restored"), "{error}");
    assert_eq!(
        fs::read_to_string(&file).expect("read"),
        big,
        "the file is kept"
    );
}

#[test]
fn a_run_s_outcome_holds_the_figures_the_trend_plots() {
    let pass = RunOutcome::of(&all_pass(2.5, 48));
    assert_eq!(pass.registers, Some(48));
    assert_eq!(pass.speedup.map(|s| (s * 100.0).round()), Some(250.0));
    let worst = pass.max_error.expect("graded cases have an error");
    assert!(worst > 0.0 && worst < 1e-3, "{worst}");
    // A case that wrote NaN makes the run's max error infinite, not NaN.
    let mut broken = all_pass(1.0, 40);
    let comparison = broken.cases[3].comparison.as_mut().expect("compared");
    comparison.nan = 7;
    assert_eq!(RunOutcome::of(&broken).max_error, Some(f64::INFINITY));
    // Without a GPU nothing was graded: no error to plot, registers still known.
    let compiled = RunOutcome::of(&compile_only());
    assert_eq!(compiled.max_error, None);
    assert_eq!(compiled.registers, Some(38));
}
