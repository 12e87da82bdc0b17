//! End to end: the real `flashprof` binary in a pseudo-terminal, watching a
//! copy of the starter kernel while the test edits it the ways editors do.
//!
//! Everything between a save and the screen is real here: the folder watch
//! and its debounce, NVRTC, the engine thread, the redraw, the key reader
//! and the terminal restore. Only the GPU is missing on a machine without
//! one, which the screen must say; with one, timing and counters are
//! switched off so the test stays about the loop, not the kernel. The
//! screen is read through `vt100`, so assertions see what a user would.
//! The sleeps here only pace the burst of saves; no result hangs on one.

mod pty_support;

use std::path::PathBuf;
use std::time::Duration;

use pty_support::{
    assert_terminal_restored, save_by_rename, save_in_place, starter_with, Session, STARTER,
};

/// The first line of the screen: the file, the verdict, and the GPU.
fn header(screen: &str) -> &str {
    screen.lines().next().unwrap_or_default()
}

/// Settled: nothing compiling or queued, and the result is of the newest text.
fn settled(screen: &str) -> bool {
    let top = header(screen);
    !top.contains("...") && !top.contains("previous save") && !top.contains("waits")
}

fn compile_error_on(screen: &str, line: usize, identifier: &str) -> bool {
    settled(screen)
        && header(screen).contains("COMPILE ERROR")
        && screen.contains(&format!("prefill.cu:{line}:"))
        && screen.contains(&format!("identifier \"{identifier}\" is undefined"))
}

#[test]
fn edits_in_a_real_terminal_reach_the_screen_and_quit_restores_it() {
    assert!(
        flashprof::gpu::libraries::preload_nvrtc(),
        "NVRTC (libnvrtc.so.13) cannot be loaded: run the tests through scripts/test.sh"
    );
    let folder = tempfile::tempdir().expect("temp folder");
    let kernel: PathBuf = folder.path().join("prefill.cu");
    save_in_place(&kernel, STARTER);
    let mut session = Session::start(
        folder.path(),
        &["prefill.cu", "--no-timing", "--no-counters"],
    );
    session.wait_for("the starter to compile", |s| {
        settled(s) && s.contains("compiled in")
    });

    // Line 19 declares the query row pointer; a typo in its type.
    save_in_place(
        &kernel,
        &starter_with(19, |l| l.replacen("const float*", "const flaot*", 1)),
    );
    session.wait_for("the in-place error on line 19", |s| {
        compile_error_on(s, 19, "flaot")
    });

    save_by_rename(&kernel, STARTER);
    let fixed = session.wait_for("the renamed-over fix to compile", |s| {
        settled(s) && s.contains("compiled in") && !s.contains("COMPILE ERROR")
    });
    assert!(
        header(&fixed).contains("no GPU") || header(&fixed).contains("PASS 14/14"),
        "a compiled starter either passes or says no GPU:\n{fixed}"
    );

    // Line 29 scales the score; each save names a different undefined scale.
    for save in 0..10 {
        let text = starter_with(29, |l| l.replacen("0.125f", &format!("scale{save}"), 1));
        if save % 2 == 0 {
            save_in_place(&kernel, &text);
        } else {
            save_by_rename(&kernel, &text);
        }
        std::thread::sleep(Duration::from_millis(15));
    }
    let burst = session.wait_for("the last save of the burst", |s| {
        compile_error_on(s, 29, "scale9")
    });
    for earlier in 0..9 {
        assert!(
            !burst.contains(&format!("scale{earlier}")),
            "save {earlier} of the burst is still on screen:\n{burst}"
        );
    }

    session.press("q");
    let status = session.finish();
    assert!(status.success(), "flashprof exited with {status:?}");
    assert_terminal_restored(&session);
}

#[test]
fn the_paged_lab_without_a_file_opens_its_own_starter_and_leaves_the_first_labs_file_alone() {
    assert!(
        flashprof::gpu::libraries::preload_nvrtc(),
        "NVRTC (libnvrtc.so.13) cannot be loaded: run the tests through scripts/test.sh"
    );
    let folder = tempfile::tempdir().expect("temp folder");
    let mut session = Session::start(
        folder.path(),
        &["--lab", "paged-prefill", "--no-timing", "--no-counters"],
    );
    let screen = session.wait_for("the paged starter to compile", |s| {
        settled(s) && s.contains("compiled in")
    });
    assert!(header(&screen).contains("paged_prefill.cu"), "{screen}");
    session.press("q");
    session.finish();
    let written =
        std::fs::read_to_string(folder.path().join("paged_prefill.cu")).expect("the starter");
    assert!(written.contains("paged_prefill"), "{written}");
    assert!(!folder.path().join("prefill.cu").exists());
    let remembered = std::fs::read_to_string(folder.path().join(".flashprof/labs.json"))
        .expect("the lab is remembered");
    assert!(
        remembered.contains("\"paged_prefill.cu\": \"paged-prefill\""),
        "{remembered}"
    );
}

#[test]
fn y_copies_the_reproduce_command_and_a_deleted_file_is_said_until_it_comes_back() {
    assert!(
        flashprof::gpu::libraries::preload_nvrtc(),
        "NVRTC (libnvrtc.so.13) cannot be loaded: run the tests through scripts/test.sh"
    );
    let folder = tempfile::tempdir().expect("temp folder");
    let kernel: PathBuf = folder.path().join("prefill.cu");
    save_in_place(&kernel, STARTER);
    let mut session = Session::start(
        folder.path(),
        &[
            "prefill.cu",
            "--seed",
            "100",
            "--no-timing",
            "--no-counters",
        ],
    );
    session.wait_for("the starter to compile", |s| {
        settled(s) && s.contains("compiled in")
    });

    // The first check draws from the session's seed plus its run number.
    session.press("y");
    let command = "flashprof check prefill.cu --lab flash-prefill --no-timing --lines --seed 101";
    let words = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    session.wait_for("the command in the footer", |s| words(s).contains(command));
    let clipboard = flashprof::tui::terminal::clipboard_sequence(command);
    assert!(
        session.wrote(clipboard.as_bytes()),
        "no OSC 52 sequence with {command}"
    );

    std::fs::remove_file(&kernel).expect("delete the kernel");
    let gone = session.wait_for("the deletion in the header", |s| {
        header(s).contains("prefill.cu was deleted; waiting for it to come back")
    });
    assert!(
        gone.contains("compiled in"),
        "the last results stay:\n{gone}"
    );

    save_in_place(
        &kernel,
        &starter_with(19, |l| l.replacen("const float*", "const flaot*", 1)),
    );
    session.wait_for("the error of the file that came back", |s| {
        compile_error_on(s, 19, "flaot")
    });
    session.press("q");
    let status = session.finish();
    assert!(status.success(), "flashprof exited with {status:?}");
    assert_terminal_restored(&session);
}
