//! End to end: `flashprof compare A B --watch` in a pseudo-terminal,
//! watching two copies of the starter kernel. A compile error saved into B
//! must show under B only, and its fix must bring both back to compiled;
//! `q` must exit 0 and give the terminal back. Everything is real but the
//! GPU; with one, timing and counters are off so the test is about the
//! loop.

mod pty_support;

use pty_support::{
    assert_terminal_restored, save_by_rename, save_in_place, starter_with, Session, STARTER,
};

/// The cases table's title line: what runs, and whether results are stale.
fn table_title(screen: &str) -> &str {
    screen.lines().nth(1).unwrap_or_default()
}

/// Nothing runs or waits, and what is shown is of the files' newest texts.
fn settled(screen: &str) -> bool {
    let title = table_title(screen);
    ["checking", "previous save", "waits", "waiting"]
        .iter()
        .all(|busy| !title.contains(busy))
}

fn both_compiled(screen: &str) -> bool {
    settled(screen) && screen.matches("compiled in").count() == 2 && !screen.contains("ERROR")
}

#[test]
fn an_error_saved_into_b_shows_under_b_only_and_its_fix_compiles_both() {
    assert!(
        flashprof::gpu::libraries::preload_nvrtc(),
        "NVRTC (libnvrtc.so.13) cannot be loaded: run the tests through scripts/test.sh"
    );
    let folder = tempfile::tempdir().expect("temp folder");
    let (a, b) = (folder.path().join("a.cu"), folder.path().join("b.cu"));
    save_in_place(&a, STARTER);
    save_in_place(&b, STARTER);
    let mut session = Session::start(
        folder.path(),
        &[
            "compare",
            "a.cu",
            "b.cu",
            "--watch",
            "--no-timing",
            "--no-counters",
        ],
    );
    let first = session.wait_for("both starters to compile", both_compiled);
    let header = first.lines().next().unwrap_or_default();
    assert!(
        header.contains("A: a.cu") && header.contains("B: b.cu"),
        "{first}"
    );
    assert!(
        header.contains("no GPU") || first.matches("PASS 14/14").count() == 2,
        "both compiled starters either pass or the header says no GPU:\n{first}"
    );

    // Line 19 declares the query row pointer; a typo in its type.
    save_in_place(
        &b,
        &starter_with(19, |l| l.replacen("const float*", "const flaot*", 1)),
    );
    let broken = session.wait_for("B's error on line 19", |s| {
        settled(s) && s.contains(":19:11: error: ") && s.contains("\"flaot\"")
    });
    assert!(broken.contains("B: b.cu COMPILE ERROR"), "{broken}");
    assert!(!broken.contains("A: a.cu COMPILE ERROR"), "{broken}");
    assert_eq!(broken.matches("compiled in").count(), 1, "{broken}");

    save_by_rename(&b, STARTER);
    session.wait_for("the fix to compile both", both_compiled);

    session.press("q");
    let status = session.finish();
    assert!(status.success(), "flashprof exited with {status:?}");
    assert_terminal_restored(&session);
}
