//! Honest timing, end to end through the STAND-IN worker
//! (examples/stand_in_worker.rs): a real process speaking the real protocol
//! whose `Time` answer comes from the real launch audit and physical floor
//! on CPU-computed launches. Each cheat it plays (`stand-in-timing: KIND`)
//! must reach every place the caller reports a timing: the check's
//! verdict, the table, the JSON, the speed gate, the gradebook and the TUI
//! timing panel, each naming the launch, the row and the reason; and the
//! honest kernel must still get its 2x.

mod stand_in_support;
mod tui_support;

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use flashprof::app::batch::journal::GradeMode;
use flashprof::app::batch::submissions::discover_dir;
use flashprof::app::batch::{run_batch, BatchEvent, BatchPlan};
use flashprof::app::check::{run_check, GateUse, RunOptions};
use flashprof::app::gate::{GateTable, GpuGate, SpeedGate};
use flashprof::grade::drift::StarterDrift;
use flashprof::grade::stopping::{Stopped, StoppingRule};
use flashprof::lab::flash_prefill::FLASH_PREFILL;
use flashprof::outcome::CheckReport;
use flashprof::protocol::{CaseStatus, TimingConfig, TimingOutcome};
use flashprof::report::{render_json, render_table};
use flashprof::tui::model::{CaseRow, Model};
use flashprof::tui::theme::Theme;
use flashprof::worker::GpuSelection;
use serde_json::Value;
use stand_in_support::{options, plan_of, stand_in};
use tui_support::drive::{complete, screen};

const STARTER: &str = include_str!("../kernels/flash-prefill/starter.cu");

/// One cheat the stand-in plays, and what every report must say of it.
struct Cheat {
    kind: &'static str,
    /// Fragments of `TimingOutcome::withheld()`: the launch, the row, the reason.
    says: &'static [&'static str],
    /// `TimingOutcome::withheld_word()`.
    word: &'static str,
}

const CHEATS: [Cheat; 5] = [
    Cheat {
        kind: "stale",
        says: &[
            "timed launch 2 of 15 ",
            "returned the output of earlier inputs",
            "is timed launch 1 of 15's, bit for bit",
        ],
        word: "stale output",
    },
    Cheat {
        kind: "first-inputs",
        says: &[
            "timed launch 1 of 15 ",
            "returned the output of earlier inputs",
            "is the checked launch's, bit for bit",
        ],
        word: "stale output",
    },
    Cheat {
        kind: "unwritten",
        says: &[
            "timed launch 3 of 15 ",
            "unwritten",
            "(row 5, head 2 still holds the poison",
        ],
        word: "output unwritten",
    },
    Cheat {
        kind: "too-fast",
        says: &[
            "impossible timing: the median 0.0001 ms",
            "is below the physical floor of 0.0050 ms",
            "(an empty launch of the same run)",
        ],
        word: "impossibly fast",
    },
    Cheat {
        kind: "less-exact",
        says: &[
            "timed launch 1 of 15 ",
            "less exact than the checked launch: its random rows used 40% of the allowance",
        ],
        word: "less exact",
    },
];

/// The flash-prefill starter with the stand-in's timing marker.
fn source(kind: &str) -> String {
    format!("{STARTER}\n// stand-in-timing: {kind}\n")
}

/// One passing case, timed (the stand-in's timing marker decides how), on fixed inputs.
fn one_case_options() -> RunOptions {
    RunOptions {
        seed: Some(7),
        timing: Some(TimingConfig::default()),
        // A watchdog, not a figure: the stand-in's CPU launches take
        // seconds, more on a loaded two-core machine.
        step_timeout: Duration::from_secs(60),
        ..options(&["first"], Duration::from_secs(20))
    }
}

/// A check of one passing case, timed, of the starter playing `kind`; the
/// stand-in's CPU launches take a second or two, so each kind runs once.
fn check(kind: &str) -> CheckReport {
    static CHECKED: Mutex<BTreeMap<String, CheckReport>> = Mutex::new(BTreeMap::new());
    let done = CHECKED.lock().expect("lock").get(kind).cloned();
    done.unwrap_or_else(|| {
        let report = check_now(kind);
        let mut checked = CHECKED.lock().expect("lock");
        checked.entry(kind.into()).or_insert(report).clone()
    })
}

fn check_now(kind: &str) -> CheckReport {
    let plan = plan_of(one_case_options(), "").of_source(format!("{kind}.cu"), source(kind));
    let mut worker = None;
    let report = run_check(&plan, &stand_in(), &mut worker, |_| {}).expect("the check runs");
    if let Some(worker) = worker {
        worker.shutdown();
    }
    assert_eq!(report.cases[0].status, CaseStatus::Pass, "{kind}");
    assert_eq!(report.timing_error, None, "{kind}");
    report
}

fn timing(report: &CheckReport) -> &TimingOutcome {
    report.timing.as_ref().expect("timed")
}

fn withheld(report: &CheckReport) -> String {
    timing(report).withheld().expect("the speedup is withheld")
}

/// A gate for the stand-in's GPU that the honest 2x clears.
fn gates() -> GateTable {
    GateTable {
        gpus: vec![GpuGate {
            lab: FLASH_PREFILL.name().into(),
            name: "stand-in GPU".into(),
            threshold: 1.5,
            reference_speedup: None,
            measured_on: None,
            timing_rules: None,
            provisional: false,
        }],
    }
}

#[test]
fn every_cheat_gets_no_speedup_and_the_reason_names_launch_row_and_cause() {
    for cheat in &CHEATS {
        let report = check(cheat.kind);
        let t = timing(&report);
        assert_eq!(t.speedup, None, "{}", cheat.kind);
        let reason = withheld(&report);
        for fragment in cheat.says {
            assert!(reason.contains(fragment), "{}: {reason}", cheat.kind);
        }
        assert_eq!(t.withheld_word(), Some(cheat.word), "{}", cheat.kind);
        // An audit finding needs no precision: the pairs stop at the
        // rule's minimum. The floor judges after the pairs, which ran on
        // (the stand-in's 3% noise never settles the interval).
        let (pairs, stopped) = match cheat.kind {
            "too-fast" => (15, Stopped::MostPairs),
            _ => (5, Stopped::Withheld),
        };
        assert_eq!(t.audited_launches, pairs, "{}", cheat.kind);
        assert_eq!(t.stopped, Some(stopped), "{}", cheat.kind);
        assert!(!report.all_passed(), "{}", cheat.kind);
    }
    // An audit finding names a row; the floor's verdict does not need one.
    assert!(timing(&check("stale")).impossible.is_none());
    assert!(timing(&check("too-fast")).finding.is_none());
}

#[test]
fn the_honest_kernel_is_audited_and_gets_its_speedup() {
    let report = check("honest");
    let t = timing(&report);
    let speedup = t.speedup.as_ref().expect("an honest speedup");
    assert!((speedup.point - 2.0).abs() < 1e-9, "{speedup:?}");
    assert_eq!((t.withheld(), t.withheld_word()), (None, None));
    assert!(t.finding.is_none() && t.impossible.is_none());
    assert!(report.all_passed());
}

#[test]
fn a_kernel_clear_of_its_gate_stops_at_the_minimum_pairs_and_says_so() {
    // Ungated, the 3% noise keeps the 1% interval out of reach: every pair.
    let ungated = check("honest");
    let t = timing(&ungated);
    assert_eq!((t.config.gate, t.stopped), (None, Some(Stopped::MostPairs)));
    assert_eq!(t.student.n, 15);
    assert!(
        render_table(&ungated, None).contains(
            "(15 interleaved runs each of at most 15, \
             ci95-within-1pct-or-clear-of-gate-after-5, ended as every pair ran;"
        ),
        "{}",
        render_table(&ungated, None)
    );

    // Gated at 1.5x, the 2x kernel's interval clears the gate at the
    // minimum five pairs; the session named the gate its GPU has.
    let plan = plan_of(
        RunOptions {
            gates: GateUse::These(gates()),
            ..one_case_options()
        },
        "",
    )
    .of_source("honest.cu".into(), source("honest"));
    let mut worker = None;
    let gated = run_check(&plan, &stand_in(), &mut worker, |_| {}).expect("the check runs");
    if let Some(worker) = worker {
        worker.shutdown();
    }
    let t = timing(&gated);
    assert_eq!(
        (t.config.gate, t.stopped),
        (Some(1.5), Some(Stopped::ClearOfGate))
    );
    assert_eq!((t.student.n, t.audited_launches), (5, 5));
    let speedup = t.speedup.as_ref().expect("an honest speedup");
    assert!((speedup.point - 2.0).abs() < 1e-9, "{speedup:?}");
    assert!(speedup.ci_low >= 1.5, "{speedup:?}");
    let table = render_table(&gated, None);
    assert!(
        table.contains("(5 interleaved runs each of at most 15, ci95-within-1pct-or-clear-of-gate-after-5, ended as the interval cleared the 1.5x gate;"),
        "{table}"
    );
}

#[test]
fn the_table_prints_the_withheld_sentence_with_the_audit_and_floor_lines() {
    for cheat in &CHEATS {
        let report = check(cheat.kind);
        let table = render_table(&report, None);
        let speedup_line = format!("  SPEEDUP  withheld: {}\n", withheld(&report));
        assert!(table.contains(&speedup_line), "{}:\n{table}", cheat.kind);
        let audited = format!(
            "  audit    {} launches on fresh inputs, each with a poisoned output and \
             checked after it ran\n",
            timing(&report).audited_launches
        );
        assert!(table.contains(&audited), "{}:\n{table}", cheat.kind);
        assert!(
            table.contains("  floor    0.0050 ms (an empty launch of the same run); "),
            "{}:\n{table}",
            cheat.kind
        );
    }
    // The impossible median is said to be below the floor, by how much.
    let too_fast = render_table(&check("too-fast"), None);
    assert!(
        too_fast.contains("student median 50.0x below it"),
        "{too_fast}"
    );
    let honest = render_table(&check("honest"), None);
    assert!(honest.contains("  SPEEDUP  2.00x"), "{honest}");
    assert!(honest.contains("x above it"), "{honest}");
    assert!(!honest.contains("withheld"), "{honest}");
}

#[test]
fn the_json_carries_the_finding_or_the_impossible_median_as_fields() {
    let document = |report: &CheckReport| -> Value {
        let gate = SpeedGate::evaluate(report, &gates());
        serde_json::from_str(&render_json(report, Some(&gate))).expect("valid JSON")
    };
    // The previous launch's output is named as that launch's; the first
    // launch's as the checked launch's.
    for (kind, number, earlier) in [("stale", 2, "timed"), ("first-inputs", 1, "checked")] {
        let report = check(kind);
        let json = document(&report);
        let finding = &json["timing"]["finding"];
        assert_eq!(finding["finding"], "stale", "{kind}: {finding}");
        assert_eq!(finding["launch"]["phase"], "timed", "{kind}: {finding}");
        assert_eq!(finding["launch"]["number"], number, "{kind}: {finding}");
        assert_eq!(finding["launch"]["of"], 15, "{kind}: {finding}");
        assert_eq!(finding["earlier"]["phase"], earlier, "{kind}: {finding}");
        // The fields are the sentence's: the same row and head.
        let at = format!("(row {}, head {} is", finding["row"], finding["head"]);
        assert!(withheld(&report).contains(&at), "{kind}: {finding}");
        assert_eq!(json["timing"]["speedup"], Value::Null);
        assert_eq!(json["passed"], false);
        assert_eq!(json["gate"]["verdict"], "no_speedup");
        assert_eq!(json["gate"]["reason"], withheld(&report).as_str());
    }

    let json = document(&check("unwritten"));
    let finding = &json["timing"]["finding"];
    assert_eq!(finding["finding"], "unwritten", "{finding}");
    assert_eq!(finding["launch"]["number"], 3, "{finding}");
    assert_eq!((&finding["row"], &finding["head"]), (&5.into(), &2.into()));
    assert_eq!(finding["elements"], 1, "{finding}");
    assert_eq!(json["timing"]["impossible"], Value::Null);

    let json = document(&check("too-fast"));
    let impossible = &json["timing"]["impossible"];
    assert_eq!(json["timing"]["finding"], Value::Null);
    assert_eq!(impossible["median_ms"], 1e-4, "{impossible}");
    assert_eq!(impossible["floor"]["ms"], 0.005, "{impossible}");
    assert_eq!(impossible["floor"]["term"], "empty_launch", "{impossible}");
    assert_eq!(json["timing"]["floor"], impossible["floor"]);
    assert_eq!(json["passed"], false);

    let json = document(&check("honest"));
    assert_eq!(json["timing"]["finding"], Value::Null);
    assert_eq!(json["timing"]["impossible"], Value::Null);
    assert_eq!(json["timing"]["rules"], 3);
    assert_eq!(json["passed"], true);
}

#[test]
fn the_speed_gate_withholds_its_verdict_from_every_cheat_and_passes_the_honest_kernel() {
    for cheat in &CHEATS {
        let report = check(cheat.kind);
        assert_eq!(
            SpeedGate::evaluate(&report, &gates()),
            SpeedGate::NoSpeedup {
                reason: withheld(&report)
            },
            "{}",
            cheat.kind
        );
    }
    match SpeedGate::evaluate(&check("honest"), &gates()) {
        SpeedGate::Pass {
            speedup,
            threshold,
            gpu,
            ..
        } => {
            assert!((speedup - 2.0).abs() < 1e-9);
            assert_eq!((threshold, gpu.as_str()), (1.5, "stand-in GPU"));
        }
        other => panic!("the honest kernel clears the gate: {other:?}"),
    }
}

/// A small RFC 4180 reader (the reasons hold commas, so their cells are quoted).
fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let (mut rows, mut row, mut cell, mut quoted) = (vec![], vec![], String::new(), false);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => cell.push(chars.next().expect("quote")),
            (true, '"') | (false, '"') => quoted = !quoted,
            (false, ',') => row.push(std::mem::take(&mut cell)),
            (false, '\r') => {}
            (false, '\n') => {
                row.push(std::mem::take(&mut cell));
                rows.push(std::mem::take(&mut row));
            }
            (_, c) => cell.push(c),
        }
    }
    rows
}

#[test]
fn the_gradebook_fails_the_cheats_and_says_why_in_timing_integrity() {
    let root = tempfile::tempdir().expect("tempdir");
    let class = root.path().join("class");
    std::fs::create_dir_all(&class).expect("mkdir");
    for kind in ["honest", "stale", "too-fast"] {
        std::fs::write(class.join(format!("{kind}.cu")), source(kind)).expect("write");
    }
    let gated = RunOptions {
        gates: GateUse::These(gates()),
        ..one_case_options()
    };
    let plan = BatchPlan {
        check: plan_of(gated, ""),
        submissions: discover_dir(&class).expect("discover").submissions,
        out_dir: root.path().join("out"),
        mode: GradeMode::Full,
        slots: vec![GpuSelection::Ordinal(0)],
    };
    let summary = run_batch(&plan, &stand_in(), |_| {}).expect("the batch runs");
    assert_eq!((summary.graded_now, summary.errors), (3, 0));
    assert_eq!(summary.no_gate, None, "a gate served the stand-in's GPU");

    let csv = std::fs::read_to_string(plan.out_dir.join("gradebook.csv")).expect("csv");
    let rows = parse_csv(&csv);
    let column = |name: &str| {
        rows[0]
            .iter()
            .position(|c| c == name)
            .unwrap_or_else(|| panic!("no column {name}: {:?}", rows[0]))
    };
    let cell = |id: &str, name: &str| -> String {
        let row = rows
            .iter()
            .find(|r| r[column("id")] == id)
            .unwrap_or_else(|| panic!("no row {id}:\n{csv}"));
        assert_eq!(row.len(), rows[0].len(), "{row:?}");
        row[column(name)].clone()
    };

    assert_eq!(cell("honest.cu", "status"), "passed");
    assert_eq!(cell("honest.cu", "timing_integrity"), "audited");
    assert_eq!(cell("honest.cu", "speedup"), "2.00");
    assert_eq!(cell("honest.cu", "gate"), "pass");
    assert!(cell("honest.cu", "integrity").ends_with("| timed-output ok"));
    for (id, says) in [
        ("stale.cu", CHEATS[0].says),
        ("too-fast.cu", CHEATS[3].says),
    ] {
        assert_eq!(cell(id, "status"), "failed", "{id}");
        assert_eq!(cell(id, "speedup"), "", "{id}");
        assert_eq!(cell(id, "gate"), "no_speedup", "{id}");
        let badge = cell(id, "integrity");
        assert!(badge.contains("| timed-output ! ("), "{id}: {badge}");
        let reason = cell(id, "timing_integrity");
        for fragment in says {
            assert!(reason.contains(fragment), "{id}: {reason}");
        }
    }
    // The cell is the very sentence the check reports.
    assert_eq!(
        cell("stale.cu", "timing_integrity"),
        withheld(&check("stale"))
    );
}

/// The TUI after a finished check of `kind`: the screen, as text.
fn tui_screen(kind: &str, width: u16, height: u16) -> String {
    let report = check(kind);
    let rows = report
        .cases
        .iter()
        .map(|c| CaseRow {
            name: c.name.clone(),
            shape: c.shape.clone(),
        })
        .collect();
    let mut model = Model::new(&format!("{kind}.cu"), rows, Theme { color: false });
    (model.width, model.height) = (width, height);
    complete(&mut model, &source(kind), report);
    screen(&model, width, height)
}

/// The text of the panel column under the first cell that starts `start`,
/// line after line, up to the panel's border or a blank line, joined.
fn panel_text(screen: &str, start: &str) -> String {
    let lines: Vec<Vec<char>> = screen.lines().map(|l| l.chars().collect()).collect();
    let (top, left) = screen
        .lines()
        .enumerate()
        .find_map(|(y, line)| {
            let byte = line.find(start)?;
            Some((y, line[..byte].chars().count()))
        })
        .unwrap_or_else(|| panic!("no `{start}` on the screen:\n{screen}"));
    let mut text = Vec::new();
    for line in &lines[top..] {
        let piece: String = line[left..].iter().take_while(|&&c| c != '│').collect();
        if piece.trim().is_empty() {
            break;
        }
        text.push(piece.trim().to_string());
    }
    text.join(" ")
}

#[test]
fn the_tui_timing_panel_says_why_there_is_no_speedup() {
    let reason = withheld(&check("stale"));
    let big = tui_screen("stale", 120, 40);
    assert_eq!(
        panel_text(&big, "no speedup:"),
        format!("no speedup: {reason}"),
        "{big}"
    );
    assert!(!big.contains("speedup 2.00x"), "{big}");
    // Wrapped to the narrow panel of the smallest terminal, still whole.
    let small = tui_screen("stale", 80, 24);
    assert_eq!(
        panel_text(&small, "no speedup:"),
        format!("no speedup: {reason}"),
        "{small}"
    );

    let honest = tui_screen("honest", 80, 24);
    assert!(honest.contains("speedup 2.00x"), "{honest}");
    assert!(!honest.contains("no speedup"), "{honest}");
}

#[test]
fn a_timing_saved_before_the_rules_had_a_version_loads_as_rules_1() {
    // The honest timing as an older flashprof wrote it: none of the fields
    // honest timing added.
    let mut saved = serde_json::to_value(timing(&check("honest"))).expect("serializes");
    let fields = saved.as_object_mut().expect("an object");
    for added in [
        "rules",
        "finding",
        "starter_finding",
        "floor",
        "impossible",
        "audited_launches",
        "phases",
        "profile_refused",
    ] {
        assert!(fields.remove(added).is_some(), "{added} is written");
    }
    // Nor the stopping rule (it came later): the one it ran under, 1%.
    let config = fields["config"].as_object_mut().expect("the config");
    assert!(config.remove("stopping").is_some(), "the rule is written");
    let old: TimingOutcome = serde_json::from_value(saved).expect("an old timing still loads");
    assert_eq!(old.rules, 1);
    assert_eq!(old.config.stopping, StoppingRule::NARROW);
    assert_eq!(old.config.stopping.name(), "ci95-within-1pct-after-5");
    assert!(old.finding.is_none() && old.floor.is_none() && old.impossible.is_none());
    assert!(old.speedup.is_some() && old.withheld().is_none());
    let mut report = check("honest").clone();
    report.timing = Some(old);
    let table = render_table(&report, None);
    assert!(
        table.contains("timed under earlier rules (v1): timed launches were not audited"),
        "{table}"
    );
}

/// A starter slowed after the student's kernel while the GPU lowered its
/// clock: the table prints both sides' clocks under the drift line, and the
/// withheld sentence names the clock beside the times.
#[test]
fn a_starter_slowed_with_the_clock_down_is_withheld_naming_both_clocks() {
    let mut report = check("honest").clone();
    let timing = report.timing.as_mut().expect("timed");
    let clocks: (&[f64], &[f64]) = (&[1980.0, 1976.0, 1980.0], &[1755.0, 1750.0, 1761.0]);
    timing.drift = StarterDrift::of(&[1.0, 1.0, 1.01], &[1.14; 12], clocks).map(Box::new);
    // As the worker does past the drift limit.
    timing.speedup = None;
    assert_eq!(timing.withheld_word(), Some("starter slowed"));
    assert_eq!(
        timing.withheld().as_deref(),
        Some(
            "the starter ran 14% slower after this kernel (1.140 ms against 1.000 ms after \
             itself), its SM clock 1755 MHz after this kernel against 1980 MHz after itself"
        )
    );
    let table = render_table(&report, None);
    let lines: Vec<&str> = table.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.trim_start().starts_with("drift "))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(lines[at].contains("(+14.0%)"), "{table}");
    assert_eq!(
        lines[at + 1].trim(),
        "SM clock 1980 MHz after itself, 1755 MHz after the student"
    );
}

/// Graded on a GPU no gate serves, the class's summary says so once, with
/// the offer of a provisional gate (what `grade` prints after its counts).
#[test]
fn a_class_on_a_gpu_without_a_gate_is_offered_a_provisional_one() {
    let root = tempfile::tempdir().expect("tempdir");
    let class = root.path().join("class");
    std::fs::create_dir_all(&class).expect("mkdir");
    std::fs::write(class.join("honest.cu"), source("honest")).expect("write");
    let ungated = RunOptions {
        gates: GateUse::These(GateTable::default()),
        ..one_case_options()
    };
    let plan = BatchPlan {
        check: plan_of(ungated, ""),
        submissions: discover_dir(&class).expect("discover").submissions,
        out_dir: root.path().join("out"),
        mode: GradeMode::Full,
        slots: vec![GpuSelection::Ordinal(0)],
    };
    let summary = run_batch(&plan, &stand_in(), |_| {}).expect("the batch runs");
    let no_gate = summary.no_gate.expect("no gate served the stand-in's GPU");
    let said = no_gate.to_string();
    assert!(said.contains("none shipped for stand-in GPU"), "{said}");
    assert!(
        said.contains(
            "`flashprof calibrate --lab flash-prefill --runs 1` makes a provisional gate"
        ),
        "{said}"
    );
    // Once a gate serves the GPU, the row kept from before says it was
    // judged by none (counted as judged by another gate) and the offer goes.
    let gated = BatchPlan {
        check: plan_of(
            RunOptions {
                gates: GateUse::These(gates()),
                ..one_case_options()
            },
            "",
        ),
        ..plan
    };
    let mut older_gate = None;
    let summary = run_batch(&gated, &stand_in(), |event| {
        if let BatchEvent::Resumed { older_gate: n, .. } = event {
            older_gate = Some(n);
        }
    })
    .expect("the batch runs again");
    assert_eq!(older_gate, Some(1));
    assert_eq!(summary.graded_now, 0);
    assert_eq!(summary.no_gate, None);
}
