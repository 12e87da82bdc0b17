//! A typo never makes a file: a missing name other than the lab's default
//! file is refused with the folder's nearest name and the explicit way to
//! start a new file (`--new`), in the TUI and every command; a mistyped
//! command is named as one.

mod cli_support;
mod pty_support;

use cli_support::{flashprof, text};
use pty_support::{Session, STARTER};

fn folder_with_prefill() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("prefill.cu"), STARTER).expect("write");
    dir
}

#[test]
fn a_mistyped_file_is_refused_with_the_nearest_name_and_never_created() {
    let dir = folder_with_prefill();
    for args in [
        vec!["prefil.cu"],
        vec!["check", "prefil.cu"],
        vec!["bench", "prefil.cu"],
        vec!["compare", "prefill.cu", "prefil.cu"],
        vec!["compare", "prefil.cu", "prefill.cu", "--watch"],
    ] {
        let run = flashprof(&args, dir.path());
        let shown = text(&run);
        assert_eq!(run.status.code(), Some(3), "{args:?}: {shown}");
        assert!(
            shown.contains("prefil.cu: no such file; did you mean `prefill.cu`?"),
            "{args:?}: {shown}"
        );
        assert!(
            shown.contains("`flashprof --new prefil.cu` starts a new file"),
            "{args:?}: {shown}"
        );
        assert!(!dir.path().join("prefil.cu").exists(), "{args:?}");
    }
}

#[test]
fn a_missing_file_with_no_near_name_is_refused_without_a_guess() {
    let dir = folder_with_prefill();
    let run = flashprof(&["check", "sub/zzz.cu"], dir.path());
    let shown = text(&run);
    assert_eq!(run.status.code(), Some(3), "{shown}");
    assert!(shown.contains("sub/zzz.cu: no such file"), "{shown}");
    assert!(!shown.contains("did you mean"), "{shown}");
}

#[test]
fn a_mistyped_command_before_a_file_names_the_command() {
    let dir = folder_with_prefill();
    let run = flashprof(&["chek", "prefill.cu"], dir.path());
    let shown = text(&run);
    assert_eq!(run.status.code(), Some(2), "{shown}");
    assert!(
        shown.contains("`chek`: no such command or file; did you mean `check`?"),
        "{shown}"
    );
    assert!(!shown.contains("cannot be used with"), "{shown}");
}

#[test]
fn new_refuses_an_existing_file_and_a_name_that_is_no_kernel() {
    let dir = folder_with_prefill();
    let run = flashprof(&["--new", "prefill.cu"], dir.path());
    assert_eq!(run.status.code(), Some(2), "{}", text(&run));
    assert!(
        text(&run).contains("`flashprof prefill.cu` opens it"),
        "{}",
        text(&run)
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("prefill.cu")).expect("kept"),
        STARTER
    );
    let run = flashprof(&["--new", "notes.txt"], dir.path());
    assert_eq!(run.status.code(), Some(2), "{}", text(&run));
    assert!(text(&run).contains("ending in .cu"), "{}", text(&run));
    assert!(!dir.path().join("notes.txt").exists());
}

#[test]
fn new_starts_a_file_from_the_starter_and_watches_it() {
    assert!(
        flashprof::gpu::libraries::preload_nvrtc(),
        "NVRTC (libnvrtc.so.13) cannot be loaded: run the tests through scripts/test.sh"
    );
    let dir = folder_with_prefill();
    let mut session = Session::start(
        dir.path(),
        &["--new", "mine.cu", "--no-timing", "--no-counters"],
    );
    let screen = session.wait_for("the new file to compile", |s| {
        s.lines().next().is_some_and(|top| top.contains("mine.cu")) && s.contains("compiled in")
    });
    session.press("q");
    assert!(session.finish().success(), "{screen}");
    let written = std::fs::read_to_string(dir.path().join("mine.cu")).expect("the new file");
    assert_eq!(written, STARTER);
}

#[test]
fn the_screens_refuse_to_start_without_a_terminal() {
    let dir = folder_with_prefill();
    for args in [
        vec!["prefill.cu"],
        vec!["--new", "fresh.cu"],
        vec!["compare", "prefill.cu", "prefill.cu", "--watch"],
        vec!["replay"],
    ] {
        let run = flashprof(&args, dir.path());
        let shown = text(&run);
        assert_eq!(run.status.code(), Some(2), "{args:?}: {shown}");
        assert!(
            shown.contains("the TUI needs a terminal"),
            "{args:?}: {shown}"
        );
        assert!(
            shown.contains("`flashprof check FILE`"),
            "{args:?}: {shown}"
        );
    }
    // Refused before anything was written.
    assert!(!dir.path().join("fresh.cu").exists());
}
