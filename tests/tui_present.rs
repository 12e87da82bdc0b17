//! Snapshot tests of lecture mode (`--present`): a live pass, a live
//! failure with its heatmap, a compile error, and a replay with its
//! playback keys, at 80x24 and 120x40. Models are driven through `update`
//! with the hand-made results of tui_support.

mod tui_support;

use std::time::Duration;

use crossterm::event::KeyCode;
use flashprof::app::history::{source_hash, RunOutcome, RunSummary};
use flashprof::tui::model::{Completed, Model, Replay};
use flashprof::tui::theme::Theme;
use flashprof::tui::update::show_replay_position;
use tui_support::drive::{complete, fresh, key, screen, SIZES};
use tui_support::*;

/// Snapshots `model` at both sizes and returns the large screen for asserts.
fn snapshot(name: &str, model: &mut Model) -> String {
    for (width, height) in SIZES {
        model.width = width;
        model.height = height;
        insta::assert_snapshot!(
            format!("present_{name}_{width}x{height}"),
            screen(model, width, height)
        );
    }
    screen(model, 120, 40)
}

fn presenting() -> Model {
    let mut model = fresh();
    model.present = true;
    model
}

/// Rows of the screen made only of block glyphs and spaces, at least one block.
fn block_rows(screen: &str) -> usize {
    screen.lines().filter(|l| l.contains("███")).count()
}

#[test]
fn a_live_pass_shows_both_numbers_in_block_digits() {
    let mut model = presenting();
    complete(&mut model, "v1", all_pass(2.5, 40));
    let text = snapshot("pass", &mut model);
    assert!(text.contains("SPEEDUP"), "{text}");
    assert!(text.contains("all pass"), "{text}");
    // Digits, not text: "2.50x" and "14/14" appear only as blocks.
    assert!(!text.contains("2.50x"), "{text}");
    assert!(block_rows(&text) >= 5, "{text}");
    assert!(text.contains("✓ pass  random-small"), "{text}");
    let huge = screen(&model, 200, 60);
    assert!(
        block_rows(&huge) > block_rows(&text),
        "a larger screen draws larger digits:\n{huge}"
    );
}

#[test]
fn a_live_failure_shows_the_failing_case_heatmap_large() {
    let mut model = presenting();
    let mut report = all_pass(1.0, 40);
    let shape = case_shapes()[1].1;
    report.cases[1] = failing("planted-overflow", shape, 40);
    report.timing = None;
    report.timing_error = Some("not timed: a case failed".into());
    complete(&mut model, "v1", report);
    // Nothing selected by hand: the panel finds the failing case itself.
    assert_eq!(model.selected, 0);
    let text = snapshot("fail_heatmap", &mut model);
    assert!(text.contains("heatmap: planted-overflow"), "{text}");
    assert!(text.contains("some fail"), "{text}");
    assert!(text.contains("not timed: a case failed"), "{text}");
    // Lecture cells are wider than the overlay's two columns.
    assert!(text.contains("▓▓▓▓▓▓▓▓▓▓▓▓"), "{text}");
}

#[test]
fn a_compile_error_fills_the_panel_with_the_error() {
    let mut model = presenting();
    complete(
        &mut model,
        "v1",
        compile_error_report("    const flaot* q;"),
    );
    let text = snapshot("compile_error", &mut model);
    assert!(text.contains("prefill.cu:19:5: error: "), "{text}");
    assert!(text.contains("compile error"), "{text}");
}

fn replay_of(reports: Vec<flashprof::outcome::CheckReport>) -> Model {
    let summaries = reports
        .iter()
        .enumerate()
        .map(|(i, report)| RunSummary {
            unix_ms: 1_700_000_000_000 + i as u64 * 60_000,
            source_hash: source_hash(&format!("v{i}")),
            outcome: Some(RunOutcome::of(report)),
        })
        .collect();
    let runs = reports
        .into_iter()
        .enumerate()
        .map(|(i, report)| Completed {
            source: format!("v{i}"),
            report,
        })
        .collect();
    let mut model = Model::new(FILE, Vec::new(), Theme { color: false });
    model.present = true;
    model.replay = Some(Replay::new(runs, summaries, Duration::from_secs(1)));
    show_replay_position(&mut model);
    model
}

#[test]
fn a_replay_steps_through_runs_and_lists_its_keys() {
    let mut failing_run = all_pass(1.0, 40);
    let shape = case_shapes()[3].1;
    failing_run.cases[3] = failing("last-key-of-sequence", shape, 0);
    failing_run.timing = None;
    let mut model = replay_of(vec![failing_run, all_pass(1.4, 40), all_pass(3.1, 56)]);
    key(&mut model, KeyCode::Char('n'));
    key(&mut model, KeyCode::Char('+'));
    let text = snapshot("replay", &mut model);
    assert!(text.contains("replay 2/3 paused, 0.5 s/run"), "{text}");
    assert!(text.contains("space pause"), "{text}");
    key(&mut model, KeyCode::Char('p'));
    let first = screen(&model, 120, 40);
    assert!(first.contains("heatmap: last-key-of-sequence"), "{first}");
    key(&mut model, KeyCode::Char('?'));
    let help = snapshot("replay_help", &mut model);
    for row in [
        "replay: pause or resume",
        "replay: next run",
        "replay: previous run",
        "replay: faster",
        "replay: slower",
    ] {
        assert!(help.contains(row), "help lacks {row:?}:\n{help}");
    }
}

#[test]
fn a_pass_with_counters_shows_the_roofline_beside_the_cases() {
    let mut model = presenting();
    let mut report = all_pass(2.5, 40);
    report.counters = vec![Ok(counters_full())];
    complete(&mut model, "v1", report);
    let text = snapshot("pass_roofline", &mut model);
    assert!(text.contains(" roofline "), "{text}");
    assert!(text.contains('●') && text.contains('○'), "{text}");
    assert!(text.contains("✓ pass  random-small"), "{text}");
    assert!(block_rows(&text) >= 5, "{text}");
    // Every compute roof named whole, BF16's a row or less above TF32's.
    let small = screen(&model, 80, 24);
    for screen in [&text, &small] {
        for label in ["BF16 1071T", "TF32 535T", "FP32 66.9T"] {
            assert!(screen.contains(label), "{label}:\n{screen}");
        }
    }
}

/// A save of the ladder: passing, `ratio` over the starter, its counters
/// `speedup` times faster than the fixture's with `dram_mb` of DRAM traffic.
fn rung(ratio: f64, duration_ms: f64, dram_mb: f64) -> flashprof::outcome::CheckReport {
    let mut report = all_pass(ratio, 40);
    let mut counters = counters_full();
    counters.student = kernel_counters(duration_ms, dram_mb, 40.0, 50.0);
    report.counters = vec![Ok(counters)];
    report
}

#[test]
fn a_replay_of_a_climbing_kernel_shows_its_earlier_saves_under_every_roof() {
    let mut model = replay_of(vec![
        rung(1.2, 30.0, 2400.0),
        rung(2.5, 16.1, 400.0),
        rung(6.0, 6.0, 120.0),
        rung(14.0, 2.4, 60.0),
    ]);
    key(&mut model, KeyCode::Char(' '));
    for _ in 0..3 {
        key(&mut model, KeyCode::Char('n'));
    }
    let text = snapshot("replay_climb", &mut model);
    let small = screen(&model, 80, 24);
    assert!(small.contains("saves 1-3"), "{small}");
    assert!(text.contains("replay 4/4"), "{text}");
    for label in [
        "BF16 1071T",
        "TF32 535T",
        "FP32 66.9T",
        "smem 29.7TB/s",
        "L2 9.88TB/s",
        "DRAM 4.92TB/s",
    ] {
        assert!(text.contains(label), "{label} missing:\n{text}");
    }
    assert!(text.contains("saves 1-3"), "{text}");
    // The earlier saves sit below the kernel: each rung was slower.
    let plot_rows: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.contains(" roofline "))
        .map(|l| l.rsplit("┃┃").next().unwrap_or(l))
        .collect();
    let row = |mark: char| {
        plot_rows
            .iter()
            .position(|l| l.contains(&format!(" {mark} ")))
            .expect("drawn")
    };
    assert!(row('1') > row('3') && row('3') > row('●'), "{text}");
    // Stepping back, the trail is the saves before that one.
    key(&mut model, KeyCode::Char('p'));
    let back = screen(&model, 120, 40);
    assert!(back.contains("saves 1-2"), "{back}");
}

/// The lecture sizes: the smallest terminal, a laptop's and a projector's.
const LECTURE_SIZES: [(u16, u16); 3] = [(80, 24), (120, 40), (200, 60)];

/// The rows of the speedup panel, the left half of the number panels.
fn speedup_panel(screen: &str) -> Vec<String> {
    screen
        .lines()
        .skip_while(|l| !l.contains("SPEEDUP"))
        .take_while(|l| !l.trim_start_matches('"').starts_with('┗'))
        .map(|l| {
            let half = l.chars().count() / 2;
            l.chars().take(half).collect()
        })
        .collect()
}

#[test]
fn a_failing_run_says_how_many_fail_and_never_draws_its_speedup_in_blocks() {
    let mut report = all_pass(3.0, 40);
    let shape = case_shapes()[3].1;
    report.cases[3] = failing("last-key-of-sequence", shape, 0);
    let mut model = presenting();
    complete(&mut model, "v1", report);
    for (width, height) in LECTURE_SIZES {
        let text = screen(&model, width, height);
        insta::assert_snapshot!(format!("present_fails_timed_{width}x{height}"), text);
        let speedup = speedup_panel(&text).join("\n");
        assert!(speedup.contains("fails 1 of 15"), "{text}");
        assert!(!speedup.contains('█'), "no speedup in blocks:\n{text}");
        // The pass count is still a number worth blocks.
        let digit_rows = text.lines().filter(|l| l.contains("██")).count();
        assert!(digit_rows >= 5, "{text}");
    }
    let wide = screen(&model, 200, 60);
    assert!(wide.contains("3.00x when timed, not counted"), "{wide}");
}

#[test]
fn without_a_gpu_nothing_ran_and_no_number_is_drawn_in_blocks() {
    let mut model = presenting();
    complete(&mut model, "v1", compile_only());
    for (width, height) in LECTURE_SIZES {
        let text = screen(&model, width, height);
        insta::assert_snapshot!(format!("present_no_gpu_{width}x{height}"), text);
        assert_eq!(block_rows(&text), 0, "no 0/15 in blocks:\n{text}");
        assert!(text.contains("not run: no GPU"), "{text}");
        assert!(text.contains("not timed: no GPU"), "{text}");
    }
}
