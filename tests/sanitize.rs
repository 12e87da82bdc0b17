//! `--sanitize`: the message and exit code where compute-sanitizer is not
//! installed, `--case`, the verdict a hazard gives, and (on a GPU with
//! compute-sanitizer) the planted race and the reference end to end; those
//! skip saying so where either is missing.

mod tui_support;

mod cli_support;

use std::process::Command;

use flashprof::app::sanitize::{
    Access, Finding, SanitizerOutcome, SanitizerTool, Site, ToolRun, ToolStatus,
};
use flashprof::outcome::{ExitCode, Verdict};

fn flashprof(args: &[&str], sanitizer: Option<&str>) -> (i32, String, String) {
    let mut command = Command::new(cli_support::flashprof_binary());
    command.args(args).current_dir(cli_support::checkout());
    if let Some(path) = sanitizer {
        command.env("FLASHPROF_COMPUTE_SANITIZER", path);
    }
    let out = command.output().expect("run flashprof");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn without_compute_sanitizer_it_says_so_and_how_to_get_it_before_grading() {
    let (code, stdout, stderr) = flashprof(
        &[
            "check",
            "kernels/flash-prefill/starter.cu",
            "--sanitize",
            "--no-timing",
        ],
        Some("/nonexistent/compute-sanitizer"),
    );
    assert_eq!(code, ExitCode::Environment as i32, "{stderr}");
    assert!(stdout.is_empty(), "nothing was graded: {stdout}");
    assert!(
        stderr.contains(
            "compute-sanitizer is not installed (looked for /nonexistent/compute-sanitizer)"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("sudo apt install cuda-sanitizer-13-0"),
        "{stderr}"
    );
}

#[test]
fn an_unknown_case_is_a_usage_error_listing_the_cases() {
    let (code, _, stderr) = flashprof(
        &[
            "check",
            "kernels/paged-prefill/starter.cu",
            "--lab",
            "paged-prefill",
            "--case",
            "nope",
        ],
        None,
    );
    assert_eq!(code, ExitCode::Usage as i32, "{stderr}");
    assert!(
        stderr.contains("no case named `nope` (cases: mixed-lengths,"),
        "{stderr}"
    );
}

fn pass_with(status: ToolStatus, findings: Vec<Finding>) -> SanitizerOutcome {
    SanitizerOutcome {
        case: "random-small".into(),
        sanitizer: "/usr/local/cuda/bin/compute-sanitizer".into(),
        tools: vec![ToolRun {
            tool: SanitizerTool::Racecheck,
            status,
            wall_ms: 3000.0,
            findings,
            summary: None,
            problem: None,
        }],
        wall_ms: 3000.0,
    }
}

fn race() -> Finding {
    let site = |line| Site {
        function: "attention_prefill".into(),
        file: "k.cu".into(),
        line,
        code: None,
    };
    Finding {
        tool: SanitizerTool::Racecheck,
        headline: "Race reported".into(),
        details: vec![],
        accesses: vec![
            Access { kind: "write".into(), site: site(37), hazards: None },
            Access { kind: "read".into(), site: site(41), hazards: Some(64) },
        ],
        reported: 2,
        diagnosis: "shared memory read at line 41 races with the write at line 37: a __syncthreads() is missing between them".into(),
    }
}

#[test]
fn in_the_tui_s_asks_for_a_pass_and_its_hazard_fails_the_result_on_screen() {
    use crossterm::event::KeyCode;
    use flashprof::tui::msg::{Effect, Msg};
    use flashprof::tui::update::update;
    use tui_support::drive::{finish, fresh, key, save};
    let mut model = fresh();
    let run = save(&mut model, "v1").expect("run");
    finish(&mut model, run, tui_support::all_pass(1.0, 40));
    let effects = key(&mut model, KeyCode::Char('s'));
    assert!(
        matches!(effects.as_slice(), [Effect::Sanitize(_)]),
        "{effects:?}"
    );
    update(
        &mut model,
        Msg::Sanitized(Ok(Box::new(pass_with(ToolStatus::Hazards, vec![race()])))),
    );
    let notice = model.notice.clone().unwrap_or_default();
    assert!(
        notice.contains("racecheck: shared memory read at line 41 races with the write at line 37"),
        "{notice}"
    );
    let report = &model.last.as_ref().expect("a result").report;
    assert!(!report.all_passed());
    update(
        &mut model,
        Msg::Sanitized(Err("compute-sanitizer is not installed (...)".into())),
    );
    assert_eq!(
        model.notice.as_deref(),
        Some("sanitizer: compute-sanitizer is not installed (...)")
    );
}

#[test]
fn a_hazard_fails_a_kernel_whose_cases_pass_and_an_unfinished_pass_is_the_graders_error() {
    let mut report = tui_support::all_pass(5.0, 64);
    assert_eq!(Verdict::of(&report), Verdict::Passed);
    report.sanitizer = Some(pass_with(ToolStatus::Clean, vec![]));
    assert_eq!(Verdict::of(&report), Verdict::Passed);
    let race = race();
    report.sanitizer = Some(pass_with(ToolStatus::Hazards, vec![race]));
    assert!(!report.all_passed());
    assert_eq!(Verdict::of(&report), Verdict::Failed);
    assert_eq!(Verdict::of(&report).exit_code(), ExitCode::CasesFailed);
    let table = flashprof::report::render_table(&report, None);
    assert!(table.contains("sanitizer racecheck"), "{table}");
    assert!(
        table.contains("  shared memory read at line 41 races with the write at line 37"),
        "{table}"
    );
    assert!(table.contains("FAIL: "), "{table}");
    report.sanitizer = Some(pass_with(ToolStatus::Failed, vec![]));
    assert_eq!(Verdict::of(&report), Verdict::Error);
}

/// Runs `check --sanitize --json` on a machine with a GPU and compute-sanitizer.
fn sanitized(args: &[&str]) -> (i32, serde_json::Value) {
    let mut all = vec![
        "check",
        "--sanitize",
        "--json",
        "--no-timing",
        "--no-counters",
    ];
    all.extend_from_slice(args);
    let (code, stdout, stderr) = flashprof(&all, None);
    assert_ne!(
        code,
        ExitCode::NoGpu as i32,
        "this test needs a GPU: {stderr}"
    );
    assert!(
        !stderr.contains("compute-sanitizer is not installed"),
        "this test needs compute-sanitizer: {stderr}"
    );
    (code, serde_json::from_str(&stdout).expect("JSON report"))
}

#[test]
#[ignore = "needs a GPU and compute-sanitizer: scripts/gpu-acceptance.sh runs it with --ignored"]
fn on_a_gpu_the_planted_race_fails_with_its_lines_and_the_reference_is_clean() {
    let (code, race) = sanitized(&["kernels/flash-prefill/bugs/race.cu"]);
    assert_eq!(code, 1, "{race:#}");
    let diagnoses: Vec<String> = race["sanitizer"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .flat_map(|t| t["findings"].as_array().cloned().unwrap_or_default())
        .map(|f| f["diagnosis"].as_str().unwrap_or("").to_owned())
        .collect();
    assert!(
        diagnoses
            .iter()
            .any(|d| d.contains("races with the write at line 34")),
        "{diagnoses:?}"
    );
    let (code, reference) = sanitized(&["kernels/flash-prefill/reference.cu"]);
    assert_eq!(code, 0, "{reference:#}");
    assert!(reference["sanitizer"]["tools"]
        .as_array()
        .is_some_and(|t| t.len() == 4 && t.iter().all(|t| t["status"] == "clean")));
}
