//! `flashprof replay --ladder --present` in a real pseudo-terminal: the
//! kernel ladder recorded on the H200 ships inside the binary and plays in
//! lecture mode with no GPU, from the starter up to the top rung.

mod pty_support;

use pty_support::{assert_terminal_restored, Session};

#[test]
fn the_ladder_replays_in_lecture_mode_up_to_the_top_rung() {
    let folder = tempfile::tempdir().expect("temp folder");
    let mut session = Session::start(folder.path(), &["replay", "--ladder", "--present"]);
    let first = session.wait_for("the starter's check", |s| s.contains("replay 1/7"));
    // The pass count is drawn in block digits; the panel's caption says it in words.
    assert!(first.contains("all pass"), "{first}");
    assert!(first.contains("SPEEDUP"), "{first}");
    session.press(" "); // pause, so that only the steps below move it
    for _ in 0..6 {
        session.press("n");
    }
    let last = session.wait_for("the top rung's check", |s| s.contains("replay 7/7"));
    assert!(last.contains("all pass"), "{last}");
    session.press("p"); // one back: plain TF32, fast and failing
    let tf32 = session.wait_for("plain TF32's check", |s| s.contains("replay 6/7"));
    assert!(tf32.contains("some fail"), "{tf32}");
    session.press("q");
    let status = session.finish();
    assert!(status.success(), "{status:?}");
    assert_terminal_restored(&session);
}
