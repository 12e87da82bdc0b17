//! `flashprof replay --ladder --present` in a real pseudo-terminal: the
//! kernel ladder recorded on the H200 ships inside the binary and plays in
//! lecture mode with no GPU. It waits on the starter until the lecturer
//! steps it, and each run's header names the rung and its verdict.

mod pty_support;

use pty_support::{assert_terminal_restored, Session};

#[test]
fn the_ladder_replay_waits_on_the_starter_and_steps_up_to_the_top_rung() {
    let folder = tempfile::tempdir().expect("temp folder");
    let mut session = Session::start(folder.path(), &["replay", "--ladder", "--present"]);
    // Each wait is for the whole frame it asserts on (the header is drawn
    // before the panels, and a frame read between them is half-drawn).
    let first = session.wait_for("the starter's check", |s| {
        s.contains("replay 1/7") && s.contains("all pass") && s.contains("SPEEDUP")
    });
    let header = first.lines().next().unwrap_or_default();
    // Paused on the first run: nothing moves before the lecturer does.
    assert!(header.contains("replay 1/7 paused"), "{first}");
    assert!(header.contains("PASS 14/14"), "{first}");
    assert!(header.contains("The lab's starter kernel"), "{first}");
    // The pass count is drawn in block digits; the panel's caption says it in words.
    assert!(first.contains("all pass"), "{first}");
    assert!(first.contains("SPEEDUP"), "{first}");
    session.press("n");
    let rung = session.wait_for("rung 1's check", |s| {
        s.contains("replay 2/7") && s.contains("Ladder rung 1: tile the rows.")
    });
    let header = rung.lines().next().unwrap_or_default();
    assert!(
        header.contains("replay 2/7 paused")
            && header.contains("PASS 14/14  Ladder rung 1: tile the rows."),
        "{rung}"
    );
    for _ in 0..5 {
        session.press("n");
    }
    let last = session.wait_for("the top rung's check", |s| {
        s.contains("replay 7/7") && s.contains("all pass")
    });
    assert!(last.contains("all pass"), "{last}");
    session.press("p"); // one back: plain TF32, fast and failing
    let tf32 = session.wait_for("plain TF32's check", |s| {
        s.contains("replay 6/7")
            && s.contains("fails 6 of 14")
            && s.contains("68.81x when timed, not counted")
    });
    let header = tf32.lines().next().unwrap_or_default();
    assert!(header.contains("FAIL 8/14  Ladder rung 5"), "{tf32}");
    // Its speed is no result: said in words, the timed figure in small print.
    assert!(tf32.contains("fails 6 of 14"), "{tf32}");
    assert!(tf32.contains("68.81x when timed, not counted"), "{tf32}");
    session.press("q");
    let status = session.finish();
    assert!(status.success(), "{status:?}");
    assert_terminal_restored(&session);
}
