//! The history store on real files: append, read back, survive a torn
//! write, find the best run, restore it without losing the current text.

mod tui_support;

use std::fs;
use std::io::Write;

use flashprof::app::history::{
    best_passing, source_hash, HistoryStore, RestoreOutcome, RestoreTarget, RunOutcome, LOG_FILE,
    STORE_DIR,
};
use tui_support::{all_pass, compile_only};

const BEST: RestoreTarget = RestoreTarget::BestPassing;

fn store() -> (tempfile::TempDir, std::path::PathBuf, HistoryStore) {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("prefill.cu");
    let store = HistoryStore::beside(&file, "flash-prefill");
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
    let RestoreOutcome::Restored { from, replaced } = store.restore(&file, &BEST).expect("restore")
    else {
        panic!("a best run is restored");
    };
    assert_eq!(from.source_hash, source_hash("fast"));
    assert_eq!(
        replaced.map(|r| r.source_hash),
        Some(source_hash("work in progress"))
    );
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
    assert_eq!(
        store.restore(&file, &BEST).expect("restore"),
        RestoreOutcome::NothingPassed {
            other_files_passed: 0
        }
    );
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
        let _ = sender.send(fifo_store.restore(&fifo, &BEST));
    });
    let outcome = result
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("the restore answered instead of blocking on the FIFO");
    let error = outcome.expect_err("a FIFO is not restored over");
    assert!(error.to_string().contains("FIFO"), "{error}");
    fs::remove_file(&file).expect("remove the FIFO");

    let big = "x".repeat((1 << 20) + 10);
    fs::write(&file, &big).expect("write");
    let error = store
        .restore(&file, &BEST)
        .expect_err("too large to record");
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

/// Every lab done in one folder: each file's restore finds its own text,
/// never another file's or another lab's, and each restore can be undone.
#[test]
fn restores_across_two_files_and_two_labs_in_one_folder_take_each_file_s_own_text() {
    let dir = tempfile::tempdir().expect("temp dir");
    let flash = dir.path().join("prefill.cu");
    let decode = dir.path().join("paged_decode.cu");
    let flash_store = HistoryStore::beside(&flash, "flash-prefill");
    let decode_store = HistoryStore::beside(&decode, "paged-decode");
    // The same file name graded in a second lab is a scope of its own.
    let flash_as_paged = HistoryStore::beside(&flash, "paged-prefill");
    let mut decode_run = all_pass(5.0, 40);
    decode_run.lab = "paged-decode".into();
    decode_run.source_path = "paged_decode.cu".into();
    flash_store
        .append_run("flash fast", &all_pass(9.0, 40))
        .expect("append");
    decode_store
        .append_run("decode fast", &decode_run)
        .expect("append");
    let mut decode_slow = decode_run.clone();
    decode_slow
        .timing
        .as_mut()
        .expect("timed")
        .speedup
        .as_mut()
        .expect("speedup")
        .point = 1.5;
    decode_store
        .append_run("decode slow", &decode_slow)
        .expect("append");

    // Each scope reads only its own runs.
    let sources = |store: &HistoryStore| -> Vec<String> {
        let records = store.read().expect("read").records;
        records
            .iter()
            .map(|r| store.source(&r.source_hash).expect("source"))
            .collect()
    };
    assert_eq!(sources(&flash_store), ["flash fast"]);
    assert_eq!(sources(&decode_store), ["decode fast", "decode slow"]);
    assert!(sources(&flash_as_paged).is_empty());

    fs::write(&flash, "flash work").expect("write");
    fs::write(&decode, "decode work").expect("write");
    assert!(matches!(
        decode_store.restore(&decode, &BEST).expect("restore"),
        RestoreOutcome::Restored { .. }
    ));
    assert_eq!(fs::read_to_string(&decode).expect("read"), "decode fast");
    assert_eq!(fs::read_to_string(&flash).expect("read"), "flash work");

    // Only other files and labs have passed: `b` refuses and writes nothing.
    assert_eq!(
        flash_as_paged.restore(&flash, &BEST).expect("restore"),
        RestoreOutcome::NothingPassed {
            other_files_passed: 3
        }
    );
    assert_eq!(fs::read_to_string(&flash).expect("read"), "flash work");
    // Another file's text, named by its hash, is not this file's to take.
    assert_eq!(
        flash_store
            .restore(&flash, &RestoreTarget::Text(source_hash("decode slow")))
            .expect("restore"),
        RestoreOutcome::NotInScope
    );
    assert_eq!(fs::read_to_string(&flash).expect("read"), "flash work");

    // Any row of the file's own history comes back, passing or not...
    let RestoreOutcome::Restored { replaced, .. } = decode_store
        .restore(&decode, &RestoreTarget::Text(source_hash("decode slow")))
        .expect("restore")
    else {
        panic!("a row of the file's own history is restored");
    };
    assert_eq!(fs::read_to_string(&decode).expect("read"), "decode slow");
    // ...and the restore is undone by restoring the text it replaced.
    let replaced = replaced.expect("the replaced text was recorded");
    assert!(decode_store.scope().expect("scoped").holds(&replaced));
    decode_store
        .restore(&decode, &RestoreTarget::Text(replaced.source_hash))
        .expect("undo");
    assert_eq!(fs::read_to_string(&decode).expect("read"), "decode fast");
    // The undone text is in the history too, and its undo brings the work back.
    let history = decode_store.read().expect("read").records;
    let kept: Vec<String> = history
        .iter()
        .filter(|r| r.report.is_none())
        .map(|r| decode_store.source(&r.source_hash).expect("source"))
        .collect();
    assert_eq!(kept, ["decode work", "decode fast", "decode slow"]);
    decode_store
        .restore(&decode, &RestoreTarget::Text(source_hash("decode work")))
        .expect("restore the work");
    assert_eq!(fs::read_to_string(&decode).expect("read"), "decode work");
    // The flash file's history never saw any of it.
    assert_eq!(sources(&flash_store), ["flash fast"]);
}

/// A store written before records named their file: runs are placed by
/// their report; an old snapshot, which names no file, is offered to none.
#[test]
fn old_records_are_placed_by_their_report_and_old_snapshots_by_nothing() {
    let (_dir, _file, store) = store();
    store.append_run("v1", &all_pass(1.0, 40)).expect("append");
    let log = store.dir().join(LOG_FILE);
    let text = fs::read_to_string(&log).expect("log");
    let stripped = text
        .replace(",\"file\":\"prefill.cu\"", "")
        .replace(",\"lab\":\"flash-prefill\"", "");
    assert_ne!(stripped, text, "the new fields were written");
    let old_snapshot = format!(
        "{{\"unix_ms\":3,\"source_hash\":\"{}\",\"report\":null}}\n",
        source_hash("v1")
    );
    fs::write(&log, stripped + &old_snapshot).expect("write");
    let records = store.read().expect("read").records;
    assert_eq!(records.len(), 1);
    assert!(records[0].report.is_some());
    assert_eq!(
        HistoryStore::locate(store.dir())
            .read()
            .expect("read")
            .records
            .len(),
        2
    );
}

/// Two texts under one source name (a crafted collision of the 64-bit
/// hash): the second is refused, and a restore that would need it writes
/// nothing.
#[test]
fn a_text_colliding_with_a_stored_one_is_refused_and_nothing_is_restored() {
    let (_dir, file, store) = store();
    store
        .append_run("fast", &all_pass(3.0, 40))
        .expect("append");
    // Plant another text under the name the current text will take.
    let current = "work in progress";
    let planted = store
        .dir()
        .join("sources")
        .join(format!("{}.cu", source_hash(current)));
    fs::write(&planted, "someone else's text").expect("plant");
    fs::write(&file, current).expect("write current");
    let error = store.restore(&file, &BEST).expect_err("refused");
    assert!(
        error
            .to_string()
            .contains("another text under the same hash"),
        "{error}"
    );
    assert_eq!(fs::read_to_string(&file).expect("read"), current);
}
