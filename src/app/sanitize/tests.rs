//! The parser and the diagnoses on real logs captured on an H200
//! (tests/fixtures/sanitizer/README.md), the search for the tool, and the plan.

use super::parse::parse_log;
use super::*;

macro_rules! fixture {
    ($name:literal) => {
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/sanitizer/",
            $name
        ))
    };
}

fn diagnosed(
    tool: SanitizerTool,
    log: &str,
    student: &StudentFile,
) -> (Vec<Finding>, Option<String>) {
    let parsed = parse_log(tool, log);
    let mut findings = parsed.findings;
    for f in &mut findings {
        diagnose(f, student);
    }
    (findings, parsed.summary)
}

fn student(path: &str, file: &str) -> StudentFile {
    let text =
        std::fs::read_to_string(format!("{}/{file}", env!("CARGO_MANIFEST_DIR"))).expect("kernel");
    StudentFile::new(path, &text, "attention_prefill")
}

#[test]
fn the_race_kernel_names_its_tile_writes_and_the_reads_they_race_with() {
    let race = student(
        "kernels/flash-prefill/bugs/race.cu",
        "kernels/flash-prefill/bugs/race.cu",
    );
    let (findings, summary) = diagnosed(
        SanitizerTool::Racecheck,
        fixture!("race.racecheck.log"),
        &race,
    );
    assert_eq!(
        summary.as_deref(),
        Some("RACECHECK SUMMARY: 4 hazards displayed (4 errors, 0 warnings)")
    );
    // Two runs of the case report the same two pairs of sites.
    assert_eq!(findings.len(), 2, "{findings:#?}");
    assert!(findings.iter().all(|f| f.reported == 2));
    let lines: Vec<&str> = findings.iter().map(|f| f.diagnosis.as_str()).collect();
    assert_eq!(
        lines,
        vec![
            "shared memory read at line 48 (and at line 49) races with the write at line 35: a __syncthreads() is missing between them",
            "shared memory read at line 41 races with the write at line 34: a __syncthreads() is missing between them",
        ]
    );
    let write = &findings[1].accesses[0].site;
    assert_eq!(write.file, "race.cu");
    assert_eq!(
        write.code.as_deref(),
        Some("kTile[i / DH][i % DH] = inRange ? kCache[((size_t)key * HKV + g) * DH + i % DH] : 0.0f;")
    );
}

#[test]
fn the_missing_barrier_after_load_names_the_inlined_copy_and_load_and_the_q_store() {
    let kernel = student(
        "target/x/missing-barrier-after-load.cu",
        "kernels/flash-prefill/bugs/missing-barrier-after-load.cu",
    );
    let (findings, summary) = diagnosed(
        SanitizerTool::Racecheck,
        fixture!("missing-barrier-after-load.racecheck.log"),
        &kernel,
    );
    assert_eq!(
        summary.as_deref(),
        Some("RACECHECK SUMMARY: 32 hazards displayed (32 errors, 0 warnings)")
    );
    // 32 reports (16 instruction pairs, each in both runs) name two pairs of lines.
    assert_eq!(findings.len(), 2, "{findings:#?}");
    assert_eq!(findings.iter().map(|f| f.reported).sum::<u32>(), 32);
    let distinct: std::collections::BTreeSet<&str> =
        findings.iter().map(|f| f.diagnosis.as_str()).collect();
    assert_eq!(
        distinct.into_iter().collect::<Vec<_>>(),
        vec![
            "shared memory read at line 65 (in loadShared4) races with the write at line 166: a __syncthreads() is missing between them",
            "shared memory read at line 65 (in loadShared4) races with the write at line 76 (in copyAsync16): a __syncthreads() is missing between them",
        ]
    );
    let q_store = findings
        .iter()
        .find(|f| f.accesses[0].site.line == 166)
        .expect("the Q tile store");
    assert!(q_store.accesses[0].site.code.as_deref().is_some_and(
        |c| c.starts_with("*reinterpret_cast<float4*>(qTile + qTileRow(ownerTeam, ownerSlot)")
    ));
}

#[test]
fn clean_logs_of_both_labs_have_a_summary_and_no_finding() {
    for (tool, log) in [
        (
            SanitizerTool::Racecheck,
            fixture!("reference.racecheck.log"),
        ),
        (SanitizerTool::Memcheck, fixture!("reference.memcheck.log")),
        (
            SanitizerTool::Synccheck,
            fixture!("reference.synccheck.log"),
        ),
        (
            SanitizerTool::Initcheck,
            fixture!("reference.initcheck.log"),
        ),
        (
            SanitizerTool::Racecheck,
            fixture!("paged-reference.racecheck.log"),
        ),
        (
            SanitizerTool::Memcheck,
            fixture!("paged-reference.memcheck.log"),
        ),
        (
            SanitizerTool::Synccheck,
            fixture!("paged-reference.synccheck.log"),
        ),
        (
            SanitizerTool::Initcheck,
            fixture!("paged-reference.initcheck.log"),
        ),
        // The target's own failure (its case failed) is not a finding.
        (
            SanitizerTool::Synccheck,
            fixture!("missing-barrier-after-load.synccheck.log"),
        ),
    ] {
        let parsed = parse_log(tool, log);
        assert!(
            parsed.findings.is_empty(),
            "{tool:?}: {:?}",
            parsed.findings
        );
        assert!(parsed.summary.is_some(), "{tool:?}");
    }
}

#[test]
fn memcheck_and_synccheck_reports_name_the_line_and_fold_every_thread_into_one() {
    let kernel = student(
        "kernels/flash-prefill/bugs/illegal-address.cu",
        "kernels/flash-prefill/bugs/illegal-address.cu",
    );
    let (findings, summary) = diagnosed(
        SanitizerTool::Memcheck,
        fixture!("illegal-address.memcheck.log"),
        &kernel,
    );
    assert_eq!(summary.as_deref(), Some("ERROR SUMMARY: 269 errors"));
    assert_eq!(findings.len(), 1, "{findings:#?}");
    assert_eq!(findings[0].reported, 100);
    assert_eq!(
        findings[0].diagnosis,
        "Invalid __global__ read of size 4 bytes at line 17: Access to 0x848ea1dfd00 is out of bounds"
    );
    assert!(findings[0].accesses[0].site.code.is_some());

    let barrier = StudentFile::new(
        "divergent-barrier.cu",
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/sanitizer/divergent-barrier.cu"
        )),
        "attention_prefill",
    );
    let (findings, summary) = diagnosed(
        SanitizerTool::Synccheck,
        fixture!("divergent-barrier.synccheck.log"),
        &barrier,
    );
    assert_eq!(summary.as_deref(), Some("ERROR SUMMARY: 4096 errors"));
    assert_eq!(findings.len(), 1, "{findings:#?}");
    assert_eq!(
        findings[0].diagnosis,
        "Barrier error detected. Divergent thread(s) in warp at line 8: every thread of the block (and of each warp) must reach the same __syncthreads()"
    );
    assert_eq!(
        findings[0].accesses[0].site.code.as_deref(),
        Some("if (lane < 16) __syncthreads();")
    );
}

#[test]
fn a_finding_outside_the_students_file_names_that_file() {
    let me = StudentFile::new("k.cu", "a\nb\n", "attention_prefill");
    let log = "========= Invalid __global__ read of size 4 bytes\n\
=========     at attention_prefill+0x10 in flashprof-prelude.cuh:3\n\
=========     by thread (1,0,0) in block (0,0,0)\n\
=========     Address 0x10 is out of bounds\n\
========= \n\
========= Uninitialized __global__ memory read of size 4 bytes\n\
=========     at helper(int)+0x20 in k.cu:2\n\
========= \n\
========= ERROR SUMMARY: 2 errors\n";
    let (memcheck, _) = diagnosed(SanitizerTool::Memcheck, log, &me);
    assert_eq!(
        memcheck[0].diagnosis,
        "Invalid __global__ read of size 4 bytes at line 3 of flashprof-prelude.cuh: Address 0x10 is out of bounds"
    );
    assert_eq!(memcheck[0].accesses[0].site.code, None);
    let (initcheck, _) = diagnosed(SanitizerTool::Initcheck, log, &me);
    assert_eq!(
        initcheck[1].diagnosis,
        "Uninitialized __global__ memory read of size 4 bytes at line 2 (in helper): the kernel reads global memory that nothing wrote"
    );
    assert_eq!(initcheck[1].accesses[0].site.code.as_deref(), Some("b"));
}

#[test]
fn the_tool_is_looked_for_where_cuda_puts_it_and_an_explicit_path_wins() {
    let root = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(root.path().join("cuda-12.4/bin")).unwrap();
    std::fs::create_dir_all(root.path().join("cuda-13.0/bin")).unwrap();
    let found = candidates(
        None,
        Some("/opt/a:relative".into()),
        [Some("/opt/home".into()), None],
        root.path(),
    );
    let expected: Vec<PathBuf> = vec![
        "/opt/a/compute-sanitizer".into(),
        "/opt/home/bin/compute-sanitizer".into(),
        root.path().join("cuda/bin/compute-sanitizer"),
        root.path().join("cuda-13.0/bin/compute-sanitizer"),
        root.path().join("cuda-12.4/bin/compute-sanitizer"),
    ];
    assert_eq!(found, expected);
    let explicit = candidates(
        Some("/x/cs".into()),
        Some("/opt/a".into()),
        [None, None],
        root.path(),
    );
    assert_eq!(explicit, vec![PathBuf::from("/x/cs")]);
    let message = not_installed_message(&explicit);
    assert!(
        message.starts_with("compute-sanitizer is not installed (looked for /x/cs)"),
        "{message}"
    );
    assert!(
        message.contains("cuda-sanitizer-13-0") && message.contains("FLASHPROF_COMPUTE_SANITIZER")
    );
}

#[test]
fn each_tool_reruns_this_check_on_one_case_under_the_sanitizer() {
    let plan = SanitizePlan {
        sanitizer: "/usr/local/cuda/bin/compute-sanitizer".into(),
        exe: "/bin/flashprof".into(),
        text: String::new(),
        lab: "paged-prefill".into(),
        case: "mixed-lengths".into(),
        cases_file: Some("my.toml".into()),
        seed: 42,
        tools: SanitizerTool::ALL.to_vec(),
        timeout: Duration::from_secs(300),
        student: StudentFile::new("k.cu", "", "attention_prefill"),
        env: Vec::new(),
    };
    let args: Vec<String> = plan
        .arguments(
            SanitizerTool::Synccheck,
            Path::new("/tmp/s/synccheck.log"),
            Path::new("/tmp/s/source/k.cu"),
        )
        .into_iter()
        .map(|a| a.into_string().unwrap())
        .collect();
    // The cases file is named whole: the tools run in a folder of their own.
    let cases = std::env::current_dir().unwrap().join("my.toml");
    assert_eq!(
        args.join(" "),
        format!(
            "--tool synccheck --target-processes all --print-limit 100 --log-file /tmp/s/synccheck.log \
/bin/flashprof check /tmp/s/source/k.cu --lab paged-prefill --case mixed-lengths --seed 42 --no-timing --no-counters \
--case-timeout 300 --json --cases {}",
            cases.display()
        )
    );
}

#[test]
fn a_tool_that_cannot_start_leaves_the_pass_incomplete_not_clean() {
    let plan = SanitizePlan {
        sanitizer: "/nonexistent/compute-sanitizer".into(),
        exe: "/bin/true".into(),
        text: String::new(),
        lab: "flash-prefill".into(),
        case: "random-small".into(),
        cases_file: None,
        seed: 1,
        tools: vec![SanitizerTool::Memcheck],
        timeout: Duration::from_secs(5),
        student: StudentFile::new("k.cu", "", "attention_prefill"),
        env: Vec::new(),
    };
    let outcome = run_pass(&plan);
    assert!(outcome.incomplete() && !outcome.clean() && !outcome.has_hazards());
    assert!(outcome.tools[0]
        .problem
        .as_deref()
        .is_some_and(|p| p.starts_with("cannot start /nonexistent/compute-sanitizer")));
}

#[test]
fn the_pass_runs_every_tool_side_by_side_and_reads_each_log() {
    // A stand-in compute-sanitizer: writes a captured log where --log-file
    // says, racecheck's after a longer wait, and exits as the real one does.
    let dir = tempfile::tempdir().expect("tempdir");
    let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/sanitizer");
    let script = dir.path().join("compute-sanitizer");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\ntool=$2\nlog=$8\ncase $tool in\n\
racecheck) sleep 0.6; cp {fixtures}/race.racecheck.log \"$log\"; exit 1;;\n\
memcheck) cp {fixtures}/reference.memcheck.log \"$log\";;\n\
synccheck) echo 'no summary' >&2; exit 3;;\n\
*) sleep 5;;\nesac\n"
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let race = std::fs::read_to_string(format!(
        "{}/kernels/flash-prefill/bugs/race.cu",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let plan = SanitizePlan {
        sanitizer: script,
        exe: "/bin/true".into(),
        text: race.clone(),
        lab: "flash-prefill".into(),
        case: "random-small".into(),
        cases_file: None,
        seed: 7,
        tools: SanitizerTool::ALL.to_vec(),
        timeout: Duration::from_secs(2),
        student: StudentFile::new(
            "kernels/flash-prefill/bugs/race.cu",
            &race,
            "attention_prefill",
        ),
        env: Vec::new(),
    };
    let outcome = run_pass(&plan);
    let statuses: Vec<(SanitizerTool, ToolStatus)> =
        outcome.tools.iter().map(|t| (t.tool, t.status)).collect();
    assert_eq!(
        statuses,
        vec![
            (SanitizerTool::Racecheck, ToolStatus::Hazards),
            (SanitizerTool::Memcheck, ToolStatus::Clean),
            (SanitizerTool::Synccheck, ToolStatus::Failed),
            (SanitizerTool::Initcheck, ToolStatus::Failed),
        ]
    );
    let [race, memcheck, synccheck, initcheck] = &outcome.tools[..] else {
        panic!("four tools");
    };
    assert_eq!(race.findings.len(), 2);
    // Side by side: memcheck's time ends when it does, not after racecheck's.
    assert!(
        memcheck.wall_ms < 400.0 && race.wall_ms >= 600.0,
        "{outcome:#?}"
    );
    assert!(synccheck
        .problem
        .as_deref()
        .is_some_and(|p| p.contains("without a summary") && p.contains("no summary")));
    assert_eq!(
        initcheck.problem.as_deref(),
        Some("still running after 2 s, stopped")
    );
    assert!(
        outcome.wall_ms < 4000.0,
        "the stopped tool did not hold the pass"
    );
    assert!(outcome.has_hazards() && outcome.incomplete());
}

#[test]
fn the_tools_judge_the_exact_text_that_was_checked_not_the_path_read_again() {
    // A stand-in compute-sanitizer that keeps the file `check` was given.
    let dir = tempfile::tempdir().expect("tempdir");
    let seen = dir.path().join("seen");
    let script = dir.path().join("compute-sanitizer");
    std::fs::write(
        &script,
        format!("#!/bin/sh\ncp \"${{11}}\" '{}'\nexit 0\n", seen.display()),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    // The student's path now holds other text than the one graded.
    let student = dir.path().join("prefill.cu");
    std::fs::write(&student, "// swapped after grading").unwrap();
    let plan = SanitizePlan {
        sanitizer: script,
        exe: "/bin/true".into(),
        text: "// the graded text\n".into(),
        lab: "flash-prefill".into(),
        case: "random-small".into(),
        cases_file: None,
        seed: 7,
        tools: vec![SanitizerTool::Memcheck],
        timeout: Duration::from_secs(10),
        student: StudentFile::new(
            &student.display().to_string(),
            "// the graded text\n",
            "attention_prefill",
        ),
        env: Vec::new(),
    };
    run_pass(&plan);
    assert_eq!(
        std::fs::read_to_string(&seen).expect("the tool was given a file"),
        "// the graded text\n"
    );
}
