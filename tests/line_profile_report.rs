//! The line profile as `check --lines` and the TUI's source view show it,
//! from recorded profiles standing in for the collector (which needs a
//! GPU: tests/line_profile_gpu.rs).

mod tui_support;

use crossterm::event::KeyCode;
use flashprof::grade::lines::{
    by_line, source_of, InstructionCounts, InstructionReading, LineKey, LineProfile,
};
use flashprof::outcome::{CheckReport, Progress};
use flashprof::report::render_table;
use flashprof::tui::model::Model;
use flashprof::tui::update::update;
use tui_support::all_pass;
use tui_support::drive::{complete, finish, fresh, key, progress, save, screen};

const SOURCE: &str = "const int lane = threadIdx.x & 31;\n\
                      float v = tile[lane][warp];\n\
                      const float s = kCache[lane * 64];\n";

fn recorded() -> LineProfile {
    let shared = InstructionCounts {
        executed: 1024,
        shared_wavefronts: 32 * 1024,
        shared_wavefronts_ideal: 1024,
        ..InstructionCounts::default()
    };
    let strided = InstructionCounts {
        executed: 1024,
        global_sectors: 8 * 4096,
        global_sectors_ideal: 4096,
        ..InstructionCounts::default()
    };
    let reading = |offset, reason: &str, samples, counts| InstructionReading {
        offset,
        stalls: vec![(
            format!("smsp__pcsamp_warps_issue_stalled_{reason}"),
            samples,
        )],
        counts,
    };
    let readings = [
        reading(0x00, "short_scoreboard", 600, shared),
        reading(0x10, "long_scoreboard", 300, strided),
        reading(0x20, "not_selected", 100, InstructionCounts::default()),
    ];
    let mut lines = by_line(&readings, |offset| {
        Some(match offset {
            0x00 => LineKey::Student(2),
            0x10 => LineKey::Student(3),
            _ => LineKey::Own,
        })
    });
    for row in &mut lines {
        row.source = source_of(SOURCE, row.line);
    }
    LineProfile {
        chip: "GH100".into(),
        total_samples: 1000,
        dropped_samples: 0,
        period_log2: 10,
        collect_ms: 41.0,
        sampled_ms: 0.0,
        counted_ms: 0.0,
        waited_ms: 0.0,
        setup_ms: 0.0,
        worker_ms: 0.0,
        charge_ms: 0.0,
        heat_ms: 0.0,
        counts_missing: None,
        lines,
        starter: Some(Ok(Box::new(starter()))),
    }
}

/// The starter's profile on the same inputs: one strided load, hot.
fn starter() -> LineProfile {
    let text = "int i = threadIdx.x;\nfloat k = kCache[i * 128];\n";
    let strided = InstructionCounts {
        executed: 4096,
        global_sectors: 16 * 4096,
        global_sectors_ideal: 4096,
        ..InstructionCounts::default()
    };
    let reading = InstructionReading {
        offset: 0,
        stalls: vec![(
            "smsp__pcsamp_warps_issue_stalled_long_scoreboard".into(),
            900,
        )],
        counts: strided,
    };
    let mut lines = by_line(&[reading], |_| Some(LineKey::Student(2)));
    for row in &mut lines {
        row.source = source_of(text, row.line);
    }
    LineProfile {
        chip: "GH100".into(),
        total_samples: 900,
        dropped_samples: 0,
        period_log2: 14,
        collect_ms: 310.0,
        sampled_ms: 0.0,
        counted_ms: 0.0,
        waited_ms: 0.0,
        setup_ms: 0.0,
        worker_ms: 0.0,
        charge_ms: 0.0,
        heat_ms: 0.0,
        counts_missing: None,
        lines,
        starter: None,
    }
}

#[test]
fn the_hottest_lines_show_their_share_reason_findings_and_text() {
    let mut report = all_pass(2.0, 40);
    report.lines = Some(Ok(recorded()));
    let table = render_table(&report, None);
    assert!(
        table.contains("lines: 1000 stall samples on GH100 (every 2^10 cycles, 0 dropped), 41 ms; the hottest 3:"),
        "{table}"
    );
    let conflict = "    2   60.0%  waiting on shared memory (short_scoreboard)";
    assert!(table.contains(conflict), "{table}");
    assert!(table.contains("float v = tile[lane][warp];"), "{table}");
    assert!(
        table.contains("32-way bank conflict: 32.0x the wavefronts a conflict-free access needs"),
        "{table}"
    );
    assert!(
        table.contains("    3   30.0%  waiting on a global load (long_scoreboard)"),
        "{table}"
    );
    assert!(
        table.contains("8.0x the global sectors a coalesced access needs"),
        "{table}"
    );
    assert!(table.contains("  own   10.0%"), "{table}");
}

#[test]
fn a_profile_that_could_not_be_taken_says_why_and_the_json_keeps_it() {
    let mut report = all_pass(2.0, 40);
    report.lines = Some(Err("CUPTI: no permission to read counters".into()));
    let table = render_table(&report, None);
    assert!(
        table.contains("lines: not profiled: CUPTI: no permission to read counters"),
        "{table}"
    );
    // The whole profile travels in the report's JSON and reads back.
    report.lines = Some(Ok(recorded()));
    let json = serde_json::to_string(&report).expect("json");
    let back: flashprof::outcome::CheckReport = serde_json::from_str(&json).expect("read back");
    assert_eq!(back.lines, report.lines);
    // A report from before the profile existed has none.
    report.lines = None;
    let json = serde_json::to_string(&report).expect("json");
    assert!(!json.contains("\"lines\""), "{json}");
}

#[test]
fn the_table_names_the_starter_s_hottest_lines_on_the_same_inputs() {
    let mut report = all_pass(2.0, 40);
    report.lines = Some(Ok(recorded()));
    let table = render_table(&report, None);
    assert!(
        table.contains("the starter on the same inputs, 900 samples; its hottest 1:"),
        "{table}"
    );
    assert!(
        table.contains("    2  100.0%  waiting on a global load (long_scoreboard)"),
        "{table}"
    );
    assert!(table.contains("float k = kCache[i * 128];"), "{table}");
}

/// A second save of [`SOURCE`]: a line added at the top (every line moves
/// down one) and the strided load rewritten.
const EDITED: &str = "// coalesced now\n\
                      const int lane = threadIdx.x & 31;\n\
                      float v = tile[lane][warp];\n\
                      const float s = kCache[lane];\n";

/// The profile of [`EDITED`]: the conflict now 80% (line 3), the rewritten
/// load 20% (line 4).
fn edited() -> LineProfile {
    let mut profile = recorded();
    profile.lines = by_line(
        &[
            InstructionReading {
                offset: 0,
                stalls: vec![(
                    "smsp__pcsamp_warps_issue_stalled_short_scoreboard".into(),
                    800,
                )],
                counts: InstructionCounts::default(),
            },
            InstructionReading {
                offset: 0x10,
                stalls: vec![(
                    "smsp__pcsamp_warps_issue_stalled_long_scoreboard".into(),
                    200,
                )],
                counts: InstructionCounts::default(),
            },
        ],
        |offset| Some(LineKey::Student(if offset == 0 { 3 } else { 4 })),
    );
    for row in &mut profile.lines {
        row.source = source_of(EDITED, row.line);
    }
    profile
}

fn profiled(lines: LineProfile) -> CheckReport {
    let mut report = all_pass(2.0, 40);
    report.lines = Some(Ok(lines));
    report
}

/// The TUI after two passing saves, each profiled, with the source view open.
fn two_profiled_saves() -> Model {
    let mut model = fresh();
    complete(&mut model, SOURCE, profiled(recorded()));
    complete(&mut model, EDITED, profiled(edited()));
    key(&mut model, KeyCode::Char('l'));
    model
}

#[test]
fn the_source_view_shows_each_line_s_share_reason_findings_and_change_at_three_sizes() {
    let mut model = two_profiled_saves();
    for (width, height) in [(80, 24), (120, 40), (200, 60)] {
        model.width = width;
        model.height = height;
        insta::assert_snapshot!(
            format!("source_view_{width}x{height}"),
            screen(&model, width, height)
        );
    }
    let shown = screen(&model, 120, 40);
    // The conflict line moved from 2 to 3 and went from 60% to 80%.
    assert!(
        shown.contains("   3 ████████  80.0%  +20.0  float v = tile[lane][warp];"),
        "{shown}"
    );
    // The added line and the rewritten load read "new".
    assert!(
        shown.contains("   1                    new  // coalesced now"),
        "{shown}"
    );
    assert!(
        shown.contains("   4 ██        20.0%    new  const float s = kCache[lane];"),
        "{shown}"
    );
    assert!(
        shown.contains("waiting on shared memory (short_scoreboard)"),
        "{shown}"
    );
    assert!(
        shown.contains("starter's hottest: line 2 100.0% waiting on a global load"),
        "{shown}"
    );
    // Wide enough, the starter has a pane of its own, with its text.
    let wide = screen(&model, 200, 60);
    assert!(wide.contains("the starter, same inputs"), "{wide}");
    assert!(wide.contains("float k = kCache[i * 128];"), "{wide}");
}

#[test]
fn the_hottest_lines_come_first_on_request_and_the_memory_findings_show_under_them() {
    let mut model = fresh();
    complete(&mut model, SOURCE, profiled(recorded()));
    key(&mut model, KeyCode::Char('l'));
    key(&mut model, KeyCode::Char('o'));
    let shown = screen(&model, 120, 40);
    let conflict = shown.find("float v = tile[lane][warp];").expect("line 2");
    let load = shown
        .find("const float s = kCache[lane * 64];")
        .expect("line 3");
    assert!(conflict < load, "{shown}");
    assert!(
        !shown.contains("const int lane"),
        "unsampled lines are left out: {shown}"
    );
    assert!(
        shown.contains("32-way bank conflict: 32.0x the wavefronts a conflict-free access needs"),
        "{shown}"
    );
    assert!(
        shown.contains("8.0x the global sectors a coalesced access needs"),
        "{shown}"
    );
    assert!(shown.contains("flashprof's own code 10.0%"), "{shown}");
    // `o` again: file order, every line.
    key(&mut model, KeyCode::Char('o'));
    assert!(screen(&model, 120, 40).contains("const int lane"));
}

#[test]
fn a_save_without_a_profile_says_why_and_keeps_the_last_profile_marked_as_earlier() {
    let mut model = fresh();
    complete(&mut model, SOURCE, profiled(recorded()));
    let mut failing = all_pass(2.0, 40);
    failing.lines = Some(Err(
        "counters are restricted to administrators (cuptiPCSamplingEnable returned \
         CUPTI_ERROR_INSUFFICIENT_PRIVILEGES); fix: Allow non-admin counters"
            .into(),
    ));
    complete(&mut model, EDITED, failing);
    key(&mut model, KeyCode::Char('l'));
    let shown = screen(&model, 200, 60);
    assert!(
        shown.contains(
            "the newest save has no line profile: counters are restricted to administrators"
        ),
        "{shown}"
    );
    assert!(shown.contains("fix: Allow non-admin counters"), "{shown}");
    assert!(shown.contains("shown: the last save profiled"), "{shown}");
    assert!(shown.contains("float v = tile[lane][warp];"), "{shown}");
}

#[test]
fn while_the_lines_are_profiled_the_view_says_so_and_before_any_profile_it_says_when_one_comes() {
    let mut model = fresh();
    key(&mut model, KeyCode::Char('l'));
    let empty = screen(&model, 80, 24);
    assert!(empty.contains("where the time goes"), "{empty}");
    let run = save(&mut model, SOURCE).expect("a run");
    progress(&mut model, run, Progress::LinesStarted);
    let shown = screen(&model, 80, 24);
    assert!(
        shown.contains("profiling lines of the newest save..."),
        "{shown}"
    );
    assert!(
        shown.contains("profiling lines..."),
        "the header says so too: {shown}"
    );
}

/// A save's samples come before its counts: the view shows where the time
/// goes at once, says the memory findings are being counted, and the
/// finished profile then takes the samples' place (the change column still
/// against the save before); counts that never come are said to be missing.
#[test]
fn the_samples_show_first_and_the_counted_profile_takes_their_place() {
    let mut model = fresh();
    complete(&mut model, SOURCE, profiled(recorded()));
    key(&mut model, KeyCode::Char('l'));
    let run = save(&mut model, EDITED).expect("a run");
    progress(&mut model, run, Progress::LinesStarted);
    let mut heat = edited();
    heat.counts_missing = Some(flashprof::app::check::COUNTS_COMING.into());
    progress(
        &mut model,
        run,
        Progress::LinesSampled(Box::new(heat.clone())),
    );
    let shown = screen(&model, 120, 40);
    assert!(
        shown.contains("   3 ████████  80.0%  +20.0  float v = tile[lane][warp];"),
        "{shown}"
    );
    assert!(
        shown.contains("memory findings: counting each instruction..."),
        "{shown}"
    );
    assert!(!shown.contains("bank conflict"), "{shown}");
    assert!(
        !shown.contains("profiling lines of the newest save"),
        "{shown}"
    );

    // The counts arrive: the conflict line's counts as the first save had them.
    let mut counted = edited();
    let conflict = recorded()
        .lines
        .iter()
        .find(|l| l.line == LineKey::Student(2))
        .expect("the conflict line")
        .counts;
    for row in &mut counted.lines {
        if row.line == LineKey::Student(3) {
            row.counts = conflict;
        }
    }
    finish(&mut model, run, profiled(counted));
    let shown = screen(&model, 120, 40);
    assert!(
        shown.contains("32-way bank conflict: 32.0x the wavefronts a conflict-free access needs"),
        "{shown}"
    );
    assert!(!shown.contains("memory findings:"), "{shown}");
    // Still measured against the first save, not against its own samples.
    assert!(
        shown.contains("   3 ████████  80.0%  +20.0  float v = tile[lane][warp];"),
        "{shown}"
    );
    assert_eq!(
        model.profiled_before.as_ref().map(|p| p.source.as_str()),
        Some(SOURCE)
    );

    // A newer save stops the next save's counts: its samples stay, saying so.
    let next = save(&mut model, SOURCE).expect("a run");
    progress(&mut model, next, Progress::LinesStarted);
    progress(&mut model, next, Progress::LinesSampled(Box::new(heat)));
    update(&mut model, flashprof::tui::msg::Msg::RunSuperseded(next));
    let shown = screen(&model, 120, 40);
    assert!(
        shown.contains("memory findings: no counts: the check ended before them"),
        "{shown}"
    );

    // A profile refused after its samples were shown (its counted launch
    // did not compute its output) leaves the view on the save before.
    let refused = save(&mut model, EDITED).expect("a run");
    progress(&mut model, refused, Progress::LinesStarted);
    let mut heat = recorded();
    heat.counts_missing = Some(flashprof::app::check::COUNTS_COMING.into());
    progress(&mut model, refused, Progress::LinesSampled(Box::new(heat)));
    let mut report = all_pass(2.0, 40);
    report.lines = Some(Err("not this kernel's profile: row 3 unwritten".into()));
    finish(&mut model, refused, report);
    let shown = screen(&model, 120, 40);
    assert!(
        shown.contains("the newest save has no line profile: not this kernel's profile"),
        "{shown}"
    );
    assert_eq!(
        model.profiled.as_ref().map(|p| p.source.as_str()),
        Some(SOURCE)
    );
}
