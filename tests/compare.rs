//! `flashprof compare`, the speed gate and the integrity badges, on
//! hand-made reports shaped like the engine's (tests/tui_support), plus the
//! command itself end to end on a machine that may have no GPU.

#[path = "tui_support/mod.rs"]
mod support;

use flashprof::app::gate::{GateTable, SpeedGate, SHIPPED_GATES};
use flashprof::outcome::IntegrityBadges;
use flashprof::report::compare::{
    a_over_b, case_rows, render_compare_json, render_compare_table, Palette, Side,
};
use serde_json::Value;

fn shipped() -> GateTable {
    GateTable::parse(SHIPPED_GATES, "shipped").expect("shipped gates parse")
}

#[test]
fn the_gate_passes_fails_or_says_why_it_cannot_judge() {
    let table = shipped();
    let fast = support::all_pass(13.1, 40);
    assert_eq!(
        SpeedGate::evaluate(&fast, &table).to_string(),
        "speed gate: pass, 13.1x >= 9.0x on NVIDIA H200"
    );
    let slow = support::all_pass(5.0, 40);
    assert_eq!(
        SpeedGate::evaluate(&slow, &table).to_string(),
        "speed gate: FAIL, 5.0x < 9.0x on NVIDIA H200"
    );
    let mut elsewhere = support::all_pass(13.1, 40);
    if let Ok(gpu) = &mut elsewhere.gpu {
        gpu.name = "NVIDIA L4".into();
    }
    assert_eq!(
        SpeedGate::evaluate(&elsewhere, &table).word(),
        "uncalibrated"
    );
    let mut wrong = support::all_pass(13.1, 40);
    if let Some(t) = &mut wrong.timing {
        t.speedup = None;
    }
    assert!(SpeedGate::evaluate(&wrong, &table)
        .to_string()
        .contains("timed output was not correct"));
    assert_eq!(
        SpeedGate::evaluate(&support::compile_only(), &table).word(),
        "no_speedup"
    );
}

#[test]
fn badges_name_what_tripped() {
    let clean = IntegrityBadges::of(&support::all_pass(13.1, 40));
    assert!(clean.all_clean());
    assert_eq!(
        clean.to_string(),
        "integrity: seed 42 | poison ok | guards ok | inputs ok | repeat ok | timed-output ok"
    );
    let mut racy = support::all_pass(13.1, 40);
    let integrity = racy.cases[2].integrity.as_mut().expect("graded case");
    integrity.runs_differ = true;
    integrity.out_of_bounds_writes = 3;
    let badges = IntegrityBadges::of(&racy);
    assert!(!badges.all_clean());
    let line = badges.to_string();
    assert!(line.contains("repeat ! (runs differ in 1 cases)"), "{line}");
    assert!(
        line.contains("guards ! (3 floats written outside out)"),
        "{line}"
    );
    let untouched = IntegrityBadges::of(&support::compile_only()).to_string();
    assert!(untouched.ends_with("poison - | guards - | inputs - | repeat - | timed-output -"));
}

#[test]
fn differing_rows_are_marked_and_colour_is_optional() {
    let a = support::all_pass(13.1, 40);
    let mut b = support::all_pass(6.55, 40);
    let shapes = support::case_shapes();
    let (name, shape) = &shapes[1];
    b.cases[1] = support::failing(name, *shape, 0);
    let (precise_name, precise_shape) = &shapes[3];
    b.cases[3] = support::graded(precise_name, *precise_shape, 5e-6, &[(0, 0)]);

    let rows = case_rows(&a, &b);
    assert_eq!(rows.len(), a.cases.len());
    let markers: Vec<&str> = rows.iter().map(|r| r.marker).collect();
    assert_eq!(markers[1], "*");
    assert_eq!(markers[3], "~");
    assert_eq!(markers.iter().filter(|m| !m.is_empty()).count(), 2);
    let ratio = a_over_b(&a, &b).expect("both timed");
    assert!((ratio - 2.0).abs() < 1e-9, "{ratio}");

    let table = shipped();
    let (gate_a, gate_b) = (
        SpeedGate::evaluate(&a, &table),
        SpeedGate::evaluate(&b, &table),
    );
    let side_a = Side {
        report: &a,
        gate: Some(&gate_a),
    };
    let side_b = Side {
        report: &b,
        gate: Some(&gate_b),
    };
    let plain = render_compare_table(side_a, side_b, Palette { enabled: false });
    assert!(!plain.contains('\x1b'));
    assert!(plain.contains(&format!("* {name}")), "{plain}");
    assert!(plain.contains("A runs 2.00x as fast as B"), "{plain}");
    assert!(plain.contains("speed gate: pass, 13.1x >= 9.0x"), "{plain}");
    assert!(
        plain.contains("speed gate: FAIL, 6.5x < 9.0x")
            || plain.contains("speed gate: FAIL, 6.6x < 9.0x"),
        "{plain}"
    );
    assert!(plain.contains("B: failed,"), "{plain}");
    let coloured = render_compare_table(side_a, side_b, Palette { enabled: true });
    assert!(coloured.contains("\x1b[31mFAIL"));

    let json: Value = serde_json::from_str(&render_compare_json(side_a, side_b)).expect("json");
    assert_eq!(json["schema"], "flashprof.compare/2");
    assert_eq!(json["seed"], 42);
    assert_eq!(json["cases"][1]["marker"], "*");
    assert_eq!(json["a"]["gate"]["verdict"], "pass");
    assert_eq!(json["b"]["passed"], false);
    assert_eq!(json["a"]["integrity"]["badges"][0]["state"], "clean");
}

#[test]
fn the_command_compares_two_files_with_or_without_a_gpu() {
    let root = env!("CARGO_MANIFEST_DIR");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_flashprof"))
        .args([
            "compare",
            &format!("{root}/kernels/flash-prefill/starter.cu"),
            &format!("{root}/kernels/flash-prefill/bugs/oob-write.cu"),
            "--json",
            "--no-timing",
            "--seed",
            "9",
        ])
        .output()
        .expect("flashprof runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let json: Value = serde_json::from_str(&stdout).expect("one JSON document");
    assert_eq!(json["schema"], "flashprof.compare/2");
    assert_eq!(json["a"]["report"]["seed"], 9);
    assert_eq!(json["b"]["report"]["seed"], 9);
    let no_gpu = json["a"]["report"]["gpu"].get("Err").is_some();
    if no_gpu {
        eprintln!("no GPU: compared compile-only");
        assert_eq!(output.status.code(), Some(5));
        assert!(json["cases"]
            .as_array()
            .expect("cases")
            .iter()
            .all(|c| c["a_status"] == "not_run" && c["marker"] == ""));
    } else {
        assert_eq!(output.status.code(), Some(0));
        assert_eq!(json["a"]["passed"], true);
        assert_eq!(json["b"]["passed"], false);
    }
}

#[test]
fn without_a_gpu_compare_shows_both_builds_and_exits_4_when_a_side_does_not_compile() {
    let root = env!("CARGO_MANIFEST_DIR");
    let class = tempfile::tempdir().expect("tempdir");
    let starter = std::fs::read_to_string(format!("{root}/kernels/flash-prefill/starter.cu"))
        .expect("starter");
    let broken = starter.replacen("float m = -INFINITY", "flot m = -INFINITY", 1);
    assert_ne!(broken, starter, "the starter still declares `float m`");
    let broken_line = 1 + starter[..starter.find("float m = -INFINITY").unwrap()]
        .matches('\n')
        .count();
    for (who, text) in [("alice", &starter), ("bob", &broken)] {
        std::fs::create_dir(class.path().join(who)).expect("mkdir");
        std::fs::write(class.path().join(who).join("prefill.cu"), text).expect("write");
    }
    let run = |a: &str, b: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_flashprof"))
            .args(["compare", a, b])
            .current_dir(class.path())
            .env("FLASHPROF_GPU", "none")
            .output()
            .expect("flashprof runs")
    };
    // Whichever side does not compile, the same exit.
    let swapped = run("bob/prefill.cu", "alice/prefill.cu");
    assert_eq!(
        swapped.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&swapped.stdout)
    );
    let output = run("alice/prefill.cu", "bob/prefill.cu");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(4), "{stdout}");
    let build_a = stdout
        .split("A build:")
        .nth(1)
        .expect("A's build")
        .split("B build:")
        .next();
    assert!(
        build_a.is_some_and(|a| a.contains("registers") && a.contains("occupancy")),
        "{stdout}"
    );
    let build_b = stdout.split("B build:").nth(1).expect("B's build");
    assert!(
        build_b.contains(&format!("bob/prefill.cu:{broken_line}:")) && build_b.contains("flot"),
        "{stdout}"
    );
    // Nothing ran on either side: one line, not fourteen rows of "not run".
    assert!(
        stdout.contains("15 cases not run on either side: no GPU"),
        "{stdout}"
    );
    assert!(!stdout.contains("not run  not run"), "{stdout}");
    // Two kernels that build, without a GPU: compiled, nothing graded.
    let output = run("alice/prefill.cu", "alice/prefill.cu");
    assert_eq!(
        output.status.code(),
        Some(5),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
}
