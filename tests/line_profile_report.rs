//! `check --lines` as the table shows it, from a recorded profile (the
//! collector itself needs a GPU: tests/line_profile_gpu.rs).

mod tui_support;

use flashprof::grade::lines::{
    by_line, source_of, InstructionCounts, InstructionReading, LineKey, LineProfile,
};
use flashprof::report::render_table;
use tui_support::all_pass;

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
        lines,
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
