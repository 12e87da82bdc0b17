//! `flashprof grade` end to end, compile-only (no GPU needed): hostile
//! submission folders, resuming after a cut-off run, shards and their merge,
//! CSV escaping, and that nothing is written outside the output folder.
//! One test drives the batch engine with the stand-in worker to cover the
//! graded path (passes, a hang caught by the watchdog) without a GPU.

mod stand_in_support;

mod cli_support;
use cli_support::{flashprof, memo_kernel, text};
use stand_in_support::{options, plan_of, stand_in};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use flashprof::app::batch::journal::GradeMode;
use flashprof::app::batch::submissions::discover_dir;
use flashprof::app::batch::{run_batch, BatchPlan};
use flashprof::app::check::{GateUse, RunOptions};
use flashprof::app::gate::GateTable;
use flashprof::worker::GpuSelection;
use serde_json::Value;

const STARTER: &str = include_str!("../kernels/flash-prefill/starter.cu");

/// The submissions of `report.json`, by id.
fn submissions(out: &Path) -> BTreeMap<String, Value> {
    let text = std::fs::read_to_string(out.join("report.json")).expect("report.json");
    let doc: Value = serde_json::from_str(&text).expect("valid JSON");
    assert_eq!(doc["schema"], "flashprof.gradebook/1");
    doc["submissions"]
        .as_array()
        .expect("submissions")
        .iter()
        .map(|s| (s["id"].as_str().expect("id").to_string(), s.clone()))
        .collect()
}

/// A small RFC 4180 reader: enough to prove the gradebook round-trips.
fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let mut rows = vec![];
    let mut row = vec![];
    let mut cell = String::new();
    let mut quoted = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                cell.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => cell.push(c),
            (false, '"') => quoted = true,
            (false, ',') => row.push(std::mem::take(&mut cell)),
            (false, '\r') => {}
            (false, '\n') => {
                row.push(std::mem::take(&mut cell));
                rows.push(std::mem::take(&mut row));
            }
            (false, c) => cell.push(c),
        }
    }
    rows
}

/// The run finished: exit 0, or 6 when NVRTC could not be loaded here (every
/// compile then ends as a grader error, which the compile assertions skip).
fn assert_finished(output: &Output) {
    let code = output.status.code();
    assert!(
        code == Some(0) || (code == Some(6) && !text(output).contains("(0 with grader errors)")),
        "{code:?}: {}",
        text(output)
    );
}

fn journal_lines(out: &Path) -> usize {
    std::fs::read_to_string(out.join("journal.jsonl"))
        .expect("journal")
        .lines()
        .count()
}

/// Whether NVRTC could compile here; when not, compile outcomes are not asserted.
fn nvrtc_available(subs: &BTreeMap<String, Value>, id: &str) -> bool {
    let available = subs[id]["status"] != "error";
    if !available {
        eprintln!(
            "skipped compile assertions: NVRTC could not be loaded ({})",
            subs[id]["error"]
        );
    }
    available
}

/// Every file under `root` (not following links) with its bytes, except under `skip`.
fn snapshot(root: &Path, skip: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).expect("readable") {
            let path = entry.expect("entry").path();
            let meta = std::fs::symlink_metadata(&path).expect("metadata");
            if path.starts_with(skip) {
                continue;
            } else if meta.is_dir() {
                pending.push(path);
            } else {
                let bytes = if meta.is_file() {
                    std::fs::read(&path).expect("bytes")
                } else {
                    Vec::new()
                };
                files.insert(path, bytes);
            }
        }
    }
    files
}

fn write(path: &Path, bytes: impl AsRef<[u8]>) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, bytes).expect("write");
}

/// A class folder with every kind of awkward submission, and a secret outside it.
fn hostile_class(root: &Path) -> PathBuf {
    let class = root.join("class");
    write(&class.join("alice/prefill.cu"), STARTER);
    write(&class.join("bob/prefill.cu"), STARTER);
    write(&class.join("with space.cu"), STARTER);
    write(&class.join("ünïcödé.cu"), STARTER);
    write(&class.join("-rf.cu"), STARTER);
    write(&class.join("line\nbreak.cu"), STARTER);
    write(&class.join("q\"uote.cu"), STARTER);
    write(&class.join("empty.cu"), "  // nothing here\n");
    write(&class.join("binary.cu"), b"\x7fELF\x00\x01\x02");
    write(
        &class.join("latin1.cu"),
        b"// caf\xe9\n__global__ void f() {}\n",
    );
    write(&class.join("huge.cu"), vec![b'/'; 2 * 1024 * 1024 + 1]);
    write(
        &class.join("syntax.cu"),
        "extern \"C\" __global__ void attention_prefill(const float* q, const float* kCache, \
         const float* vCache, float* out, int chunkLen, int prefixLen) { int x = ; }\n",
    );
    write(&class.join("notes.txt"), "not a submission");
    write(&root.join("secret/answer.cu"), STARTER);
    std::os::unix::fs::symlink(root.join("secret/answer.cu"), class.join("stolen.cu"))
        .expect("symlink");
    std::os::unix::fs::symlink(class.join("alice/prefill.cu"), class.join("alias.cu"))
        .expect("symlink");
    class
}

#[test]
fn hostile_submissions_get_one_row_each_with_reasons_and_nothing_leaks() {
    let root = tempfile::tempdir().expect("tempdir");
    let class = hostile_class(root.path());
    let out = root.path().join("out");
    let cwd = root.path().join("cwd");
    std::fs::create_dir_all(&cwd).expect("cwd");
    let before = snapshot(root.path(), &out);
    let run = flashprof(
        &[
            "grade",
            class.to_str().expect("utf-8 temp path"),
            "--out",
            out.to_str().expect("utf-8"),
            "--compile-only",
            "--seed",
            "11",
            "--jobs",
            "2",
        ],
        &cwd,
    );
    assert_finished(&run);
    assert_eq!(
        snapshot(root.path(), &out),
        before,
        "a file outside OUTDIR changed"
    );

    let subs = submissions(&out);
    let ids: Vec<&str> = subs.keys().map(String::as_str).collect();
    assert_eq!(
        ids,
        [
            "-rf.cu",
            "alias.cu",
            "alice/prefill.cu",
            "binary.cu",
            "bob/prefill.cu",
            "empty.cu",
            "huge.cu",
            "latin1.cu",
            "line\nbreak.cu",
            "q\"uote.cu",
            "stolen.cu",
            "syntax.cu",
            "with space.cu",
            "ünïcödé.cu",
        ]
    );
    let reason = |id: &str| subs[id]["error"].as_str().unwrap_or_default().to_string();
    for (id, why) in [
        ("binary.cu", "looks like a binary file"),
        ("empty.cu", "has no code"),
        (
            "huge.cu",
            "2097153 bytes is more than the 1048576-byte limit",
        ),
        ("latin1.cu", "is not UTF-8 text"),
        ("stolen.cu", "outside the input folder: not followed"),
    ] {
        assert_eq!(subs[id]["status"], "rejected", "{id}");
        assert!(reason(id).contains(why), "{id}: {}", reason(id));
    }
    for sub in subs.values() {
        assert_eq!(sub["seed"], 11);
        assert_eq!(sub["mode"], "compile_only");
    }
    if nvrtc_available(&subs, "alice/prefill.cu") {
        for id in [
            "-rf.cu",
            "alias.cu",
            "alice/prefill.cu",
            "bob/prefill.cu",
            "line\nbreak.cu",
            "q\"uote.cu",
            "with space.cu",
            "ünïcödé.cu",
        ] {
            assert_eq!(subs[id]["status"], "compiled", "{id}: {}", reason(id));
            let cases = subs[id]["report"]["cases"].as_array().expect("cases");
            assert!(cases.iter().all(|c| c["status"] == "not_run"));
        }
        assert_eq!(subs["syntax.cu"]["status"], "compile_error");
    }

    let csv = std::fs::read_to_string(out.join("gradebook.csv")).expect("csv");
    let rows = parse_csv(&csv);
    assert_eq!(rows[0][0], "id");
    assert_eq!(rows.len(), 1 + subs.len());
    assert!(rows.iter().all(|r| r.len() == 23), "{rows:?}");
    assert!(
        rows[1..].iter().all(|r| r[2] == "flash-prefill"),
        "{rows:?}"
    );
    let csv_ids: Vec<&str> = rows[1..].iter().map(|r| r[0].as_str()).collect();
    assert!(csv_ids.contains(&"line\nbreak.cu"));
    // A cell a spreadsheet would run as a formula is defused with an apostrophe.
    assert!(csv_ids.contains(&"'-rf.cu"));
    // Each submission's JSON entry and its feedback for the student.
    assert_eq!(
        std::fs::read_dir(out.join("runs")).expect("runs").count(),
        2 * subs.len()
    );
}

#[test]
fn the_gradebook_s_last_column_says_what_a_kernel_keeps_between_launches() {
    let root = tempfile::tempdir().expect("tempdir");
    let class = root.path().join("class");
    write(&class.join("memo.cu"), memo_kernel());
    write(&class.join("starter.cu"), STARTER);
    let out = root.path().join("out");
    let run = flashprof(
        &[
            "grade",
            class.to_str().expect("utf-8"),
            "--out",
            out.to_str().expect("utf-8"),
            "--compile-only",
        ],
        root.path(),
    );
    assert_finished(&run);
    if !nvrtc_available(&submissions(&out), "memo.cu") {
        return;
    }
    let rows = parse_csv(&std::fs::read_to_string(out.join("gradebook.csv")).expect("csv"));
    assert_eq!(
        rows[0],
        [
            "id",
            "file",
            "lab",
            "status",
            "cases_passed",
            "cases_total",
            "failing_cases",
            "speedup",
            "gate",
            "diagnosis",
            "seed",
            "error",
            "integrity",
            "timing_integrity",
            "kept_state",
            "bandwidth_gb_s",
            "bandwidth_share",
            "registers",
            "spill_bytes",
            "smem_bytes",
            "occupancy",
            "occupancy_limiter",
            "gate_version"
        ]
    );
    let kept: BTreeMap<&str, &str> = rows[1..]
        .iter()
        .map(|r| (r[0].as_str(), r[14].as_str()))
        .collect();
    assert_eq!(
        kept,
        BTreeMap::from([
            ("memo.cu", "keeps 16.0 MiB in `g_memo` between launches"),
            ("starter.cu", ""),
        ])
    );
}

#[test]
fn a_rerun_skips_what_the_journal_holds_even_after_a_torn_write() {
    let root = tempfile::tempdir().expect("tempdir");
    let class = root.path().join("class");
    for i in 0..5 {
        write(
            &class.join(format!("s{i}.cu")),
            format!("{STARTER}\n// student {i}\n"),
        );
    }
    write(&class.join("bad.cu"), "");
    let out = root.path().join("out");
    let args = [
        "grade",
        class.to_str().expect("utf-8"),
        "--out",
        out.to_str().expect("utf-8"),
        "--compile-only",
    ];
    let first = flashprof(&args, root.path());
    assert_finished(&first);
    assert_eq!(journal_lines(&out), 6);
    let seed = submissions(&out)["s0.cu"]["seed"].clone();

    // Simulate a run killed mid-write: two entries kept, the third torn.
    let journal = std::fs::read_to_string(out.join("journal.jsonl")).expect("journal");
    let lines: Vec<&str> = journal.lines().collect();
    let torn = format!(
        "{}\n{}\n{}",
        lines[0],
        lines[1],
        &lines[2][..lines[2].len() / 2]
    );
    std::fs::write(out.join("journal.jsonl"), torn).expect("truncate");
    // A changed file is graded again even though its id is in the journal.
    let changed_id = serde_json::from_str::<Value>(lines[0]).expect("entry")["id"]
        .as_str()
        .expect("id")
        .to_string();
    write(
        &class.join(&changed_id),
        format!("{STARTER}\n// resubmitted\n"),
    );

    let second = flashprof(&args, root.path());
    assert_finished(&second);
    assert!(
        text(&second).contains("graded 5 submissions now, 1 already in the journal"),
        "{}",
        text(&second)
    );
    // 2 kept + 1 torn + 5 new lines.
    assert_eq!(journal_lines(&out), 8);
    let subs = submissions(&out);
    assert_eq!(subs.len(), 6);
    assert!(
        subs.values().all(|s| s["seed"] == seed),
        "a resumed run keeps its seed"
    );
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).expect("json"))
            .expect("json");
    assert!(doc["warnings"][0]
        .as_str()
        .is_some_and(|w| w.contains("1 unreadable")));

    let third = flashprof(&args, root.path());
    assert!(
        text(&third).contains("graded 0 submissions now, 6 already"),
        "{}",
        text(&third)
    );
    assert_eq!(journal_lines(&out), 8);
}

#[test]
fn shards_cover_everything_once_and_merge_reports_seed_conflicts() {
    let root = tempfile::tempdir().expect("tempdir");
    let class = root.path().join("class");
    for i in 0..7 {
        write(
            &class
                .join(format!("d{}/k.cu", i % 3))
                .with_file_name(format!("k{i}.cu")),
            "",
        );
    }
    let class_arg = class.to_str().expect("utf-8");
    let mut shard_dirs = Vec::new();
    for k in 1..=3 {
        let out = root.path().join(format!("shard-{k}"));
        let seed = if k == 3 { "2" } else { "1" };
        let run = flashprof(
            &[
                "grade",
                class_arg,
                "--out",
                out.to_str().expect("utf-8"),
                "--shard",
                &format!("{k}/3"),
                "--compile-only",
                "--seed",
                seed,
            ],
            root.path(),
        );
        assert_finished(&run);
        shard_dirs.push(out);
    }
    let counts: Vec<usize> = shard_dirs.iter().map(|d| journal_lines(d)).collect();
    assert_eq!(counts, [3, 2, 2]);

    let merged = root.path().join("merged");
    let mut args = vec!["grade", "--merge"];
    args.extend(shard_dirs.iter().map(|d| d.to_str().expect("utf-8")));
    args.extend(["--out", merged.to_str().expect("utf-8")]);
    let run = flashprof(&args, root.path());
    assert_finished(&run);
    assert!(
        text(&run).contains("different seeds (1, 2)"),
        "{}",
        text(&run)
    );
    let subs = submissions(&merged);
    assert_eq!(subs.len(), 7);
    assert_eq!(journal_lines(&merged), 7);

    // Merging twice, in the other order, gives the same gradebook.
    let again = root.path().join("merged-again");
    let mut args = vec!["grade", "--merge"];
    args.extend(shard_dirs.iter().rev().map(|d| d.to_str().expect("utf-8")));
    args.extend(["--out", again.to_str().expect("utf-8")]);
    assert_finished(&flashprof(&args, root.path()));
    assert_eq!(
        std::fs::read(merged.join("gradebook.csv")).expect("csv"),
        std::fs::read(again.join("gradebook.csv")).expect("csv")
    );
    // Merging into one of its own inputs is refused.
    let into_input = flashprof(
        &[
            "grade",
            "--merge",
            shard_dirs[0].to_str().expect("utf-8"),
            "--out",
            shard_dirs[0].to_str().expect("utf-8"),
        ],
        root.path(),
    );
    assert_eq!(into_input.status.code(), Some(2));
}

/// A full grading of `class` into `root/out` by the stand-in worker, on
/// `gpus` slots, over the stand-in cases `cases` with seed 3.
fn stand_in_batch(
    class: &Path,
    root: &Path,
    cases: &[&str],
    case_timeout: Duration,
    gpus: usize,
) -> BatchPlan {
    let options = RunOptions {
        seed: Some(3),
        gates: GateUse::These(GateTable::default()),
        ..options(cases, case_timeout)
    };
    BatchPlan {
        check: plan_of(options, "// stand-in"),
        submissions: discover_dir(class).expect("discover").submissions,
        out_dir: root.join("out"),
        mode: GradeMode::Full,
        slots: (0..gpus).map(GpuSelection::Ordinal).collect(),
    }
}

#[test]
fn graded_submissions_run_in_parallel_slots_and_a_hang_costs_one_case() {
    let root = tempfile::tempdir().expect("tempdir");
    let class = root.path().join("class");
    for i in 0..4 {
        write(
            &class.join(format!("s{i}.cu")),
            format!("{STARTER}\n// {i}\n"),
        );
    }
    let plan = stand_in_batch(
        &class,
        root.path(),
        &["first", "hang", "last"],
        Duration::from_millis(500),
        2,
    );
    let mut finished = Vec::new();
    let summary = run_batch(&plan, &stand_in(), |event| {
        if let flashprof::app::batch::BatchEvent::Finished { entry } = event {
            finished.push(entry.id.clone());
        }
    })
    .expect("batch runs");
    assert_eq!(summary.graded_now, 4);
    finished.sort();
    assert_eq!(finished, ["s0.cu", "s1.cu", "s2.cu", "s3.cu"]);
    let subs = submissions(&plan.out_dir);
    for sub in subs.values() {
        assert_eq!(sub["status"], "failed");
        let cases = sub["report"]["cases"].as_array().expect("cases");
        let statuses: Vec<&str> = cases
            .iter()
            .map(|c| c["status"].as_str().expect("status"))
            .collect();
        assert_eq!(statuses, ["pass", "timeout", "pass"]);
        assert_eq!(sub["gate"]["verdict"], "no_speedup");
    }
    let rows =
        parse_csv(&std::fs::read_to_string(plan.out_dir.join("gradebook.csv")).expect("csv"));
    assert_eq!(rows[1][4..7], ["2".to_string(), "3".into(), "hang".into()]);
    assert!(
        rows[1][9].starts_with("hangs on hang: no result within 0.5 s"),
        "{:?}",
        rows[1]
    );
}

#[test]
fn a_row_a_case_timeout_cut_short_is_graded_again_when_the_timeout_is_raised() {
    let root = tempfile::tempdir().expect("tempdir");
    let class = root.path().join("class");
    write(&class.join("hangs.cu"), STARTER);
    write(&class.join("empty.cu"), "");
    let under = |timeout| stand_in_batch(&class, root.path(), &["first", "hang"], timeout, 1);
    // (graded now, reused, rows a different limit cut short) of one run.
    let run = |plan: &BatchPlan| {
        let mut cut_short = None;
        let summary = run_batch(plan, &stand_in(), |event| {
            if let flashprof::app::batch::BatchEvent::Resumed { cut_short: n, .. } = event {
                cut_short = Some(n);
            }
        })
        .expect("batch runs");
        (
            summary.graded_now,
            summary.skipped,
            cut_short.expect("resumed"),
        )
    };
    let short = under(Duration::from_millis(300));
    assert_eq!(run(&short), (2, 0, 0));
    let hung = &submissions(&short.out_dir)["hangs.cu"];
    assert_eq!(hung["report"]["cases"][1]["status"], "timeout", "{hung}");
    assert_eq!(hung["limits"]["case_timeout_ms"], 300, "{hung}");
    assert_eq!(run(&short), (0, 2, 0), "the same limit reuses both rows");
    // The rejected file's row no limit cut short: it stands under any limit.
    let longer = under(Duration::from_millis(400));
    assert_eq!(run(&longer), (1, 1, 1), "only the hung row is graded again");
    let hung = &submissions(&longer.out_dir)["hangs.cu"];
    assert_eq!(hung["limits"]["case_timeout_ms"], 400, "{hung}");
    assert!(
        hung["report"]["cases"][1]["diagnosis"]
            .as_str()
            .is_some_and(|said| said.contains("0.4 s")),
        "{hung}"
    );
    assert_eq!(run(&longer), (0, 2, 0));
}

/// Runs flashprof with a deadline; a run still going after it is killed and the test fails.
fn flashprof_within(args: &[&str], cwd: &Path, deadline: Duration) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_flashprof"))
        .args(args)
        .current_dir(cwd)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("flashprof starts");
    let started = std::time::Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if started.elapsed() > deadline {
            let _ = child.kill();
            let output = child.wait_with_output().expect("output");
            panic!(
                "flashprof {args:?} still running after {deadline:?}: {}",
                text(&output)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().expect("output")
}

#[test]
fn a_fifo_among_the_submissions_is_rejected_without_stalling_the_batch() {
    let root = tempfile::tempdir().expect("tempdir");
    let class = root.path().join("class");
    write(&class.join("a.cu"), STARTER);
    let made = Command::new("mkfifo")
        .arg(class.join("x.cu"))
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    let out = root.path().join("out");
    let run = flashprof_within(
        &[
            "grade",
            class.to_str().expect("utf-8"),
            "--out",
            out.to_str().expect("utf-8"),
            "--compile-only",
        ],
        root.path(),
        Duration::from_secs(60),
    );
    assert_finished(&run);
    let subs = submissions(&out);
    assert_eq!(subs["x.cu"]["status"], "rejected");
    let reason = subs["x.cu"]["error"].as_str().expect("reason");
    assert!(reason.contains("FIFO"), "{reason}");
    assert_ne!(subs["a.cu"]["status"], "rejected");
}

/// Peak resident memory of this process, in KiB.
fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM")
}

#[test]
fn submissions_are_read_one_at_a_time_not_all_before_grading() {
    let root = tempfile::tempdir().expect("tempdir");
    let class = root.path().join("class");
    // One valid source just under the size limit, linked 160 times: 160 MiB if all were held.
    let mut big = format!("{STARTER}\n");
    while big.len() < 1_000_000 {
        big.push_str("// padding padding padding padding padding padding padding padding\n");
    }
    write(&class.join("s0.cu"), &big);
    for i in 1..160 {
        std::fs::hard_link(class.join("s0.cu"), class.join(format!("s{i}.cu"))).expect("link");
    }
    let plan = stand_in_batch(&class, root.path(), &["first"], Duration::from_secs(20), 1);
    let before = peak_rss_kib();
    let summary = run_batch(&plan, &stand_in(), |_| {}).expect("batch runs");
    assert_eq!(summary.graded_now, 160);
    let grown_mib = peak_rss_kib().saturating_sub(before) / 1024;
    assert!(grown_mib < 80, "peak memory grew by {grown_mib} MiB");
}

#[test]
fn a_rerun_grades_again_what_failed_on_the_grader_side() {
    let root = tempfile::tempdir().expect("tempdir");
    let class = root.path().join("class");
    write(&class.join("a.cu"), STARTER);
    write(&class.join("empty.cu"), "");
    let plan = stand_in_batch(&class, root.path(), &["first"], Duration::from_secs(20), 1);
    // A worker that cannot start: every compilable submission is a grader error.
    let mut broken = stand_in();
    broken.program = root.path().join("no-such-worker");
    let first = run_batch(&plan, &broken, |_| {}).expect("batch runs");
    assert_eq!((first.graded_now, first.errors), (2, 1));
    assert_eq!(submissions(&plan.out_dir)["a.cu"]["status"], "error");

    let second = run_batch(&plan, &stand_in(), |_| {}).expect("batch runs");
    assert_eq!(
        (second.graded_now, second.skipped, second.errors),
        (1, 1, 0),
        "the error row is graded again, the rejected one reused"
    );
    let subs = submissions(&plan.out_dir);
    assert_eq!(subs["a.cu"]["status"], "passed");
    assert_eq!(subs["empty.cu"]["status"], "rejected");
}

#[test]
fn a_second_grade_on_the_same_out_is_refused_while_the_first_holds_it() {
    let root = tempfile::tempdir().expect("tempdir");
    let class = root.path().join("class");
    write(&class.join("a.cu"), STARTER);
    let out = root.path().join("out");
    // The first run, as far as the lock goes: held by this process.
    let held = flashprof::app::batch::lock::OutLock::acquire(&out).expect("lock");
    let second = flashprof(
        &[
            "grade",
            class.to_str().expect("utf-8"),
            "--out",
            out.to_str().expect("utf-8"),
            "--compile-only",
        ],
        root.path(),
    );
    assert_eq!(second.status.code(), Some(2), "{}", text(&second));
    assert!(
        text(&second).contains("another `flashprof grade` is already writing")
            && text(&second).contains(out.to_str().expect("utf-8")),
        "{}",
        text(&second)
    );
    assert!(
        !out.join("journal.jsonl").exists(),
        "the refused run wrote nothing"
    );
    drop(held);
    let third = flashprof(
        &[
            "grade",
            class.to_str().expect("utf-8"),
            "--out",
            out.to_str().expect("utf-8"),
            "--compile-only",
        ],
        root.path(),
    );
    assert_finished(&third);
}

/// A reference solution of the TA's, with a secret a compile error would quote.
fn ta_secret(root: &Path) -> PathBuf {
    let secret = root.join("ta/reference.cu");
    write(&secret, format!("{STARTER}\n#error TA_SECRET_7731\n"));
    secret
}

#[test]
fn named_files_that_leave_the_folder_they_were_named_in_are_refused_with_where_they_point() {
    let root = tempfile::tempdir().expect("tempdir");
    let secret = ta_secret(root.path());
    let class = root.path().join("class");
    std::fs::create_dir_all(class.join("alice")).expect("mkdir");
    std::os::unix::fs::symlink(&secret, class.join("alice/prefill.cu")).expect("symlink");
    write(&class.join("bob/prefill.cu"), STARTER);
    // A link to a file in its own folder is still followed.
    write(&class.join("carol/mine.cu"), STARTER);
    std::os::unix::fs::symlink("mine.cu", class.join("carol/prefill.cu")).expect("symlink");
    // A student folder that is itself a link to the TA's folder.
    std::os::unix::fs::symlink(secret.parent().expect("ta"), class.join("dave")).expect("symlink");
    let out = root.path().join("out");
    let named: Vec<String> = [
        "alice/prefill.cu",
        "bob/prefill.cu",
        "carol/prefill.cu",
        "dave/reference.cu",
    ]
    .iter()
    .map(|f| class.join(f).to_str().expect("utf-8").to_owned())
    .collect();
    let mut args = vec!["grade"];
    args.extend(named.iter().map(String::as_str));
    args.extend(["--out", out.to_str().expect("utf-8"), "--compile-only"]);
    let run = flashprof(&args, root.path());
    assert_finished(&run);
    let subs = submissions(&out);
    let row = |name: &str| {
        let id = subs.keys().find(|id| id.ends_with(name)).expect("a row");
        subs[id].clone()
    };
    let alice = row("alice/prefill.cu");
    assert_eq!(alice["status"], "rejected");
    let reason = alice["error"].as_str().expect("reason");
    assert!(
        reason.contains("outside the folder it was named in"),
        "{reason}"
    );
    assert!(reason.contains(secret.to_str().expect("utf-8")), "{reason}");
    let dave = row("dave/reference.cu");
    assert_eq!(dave["status"], "rejected");
    assert!(
        dave["error"].as_str().expect("reason").contains("symlink"),
        "{dave}"
    );
    assert_ne!(row("bob/prefill.cu")["status"], "rejected");
    assert_ne!(row("carol/prefill.cu")["status"], "rejected");
    for file in ["gradebook.csv", "report.json", "journal.jsonl"] {
        let written = std::fs::read_to_string(out.join(file)).expect("written");
        assert!(
            !written.contains("TA_SECRET_7731"),
            "{file} holds the TA's secret"
        );
    }
}

#[test]
fn an_out_folder_others_can_write_or_a_planted_journal_link_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let root = tempfile::tempdir().expect("tempdir");
    write(&root.path().join("class/alice/prefill.cu"), STARTER);
    let class = root.path().join("class");
    let grade = |out: &Path| {
        flashprof(
            &[
                "grade",
                class.to_str().expect("utf-8"),
                "--out",
                out.to_str().expect("utf-8"),
                "--compile-only",
            ],
            root.path(),
        )
    };
    let shared = root.path().join("shared");
    std::fs::create_dir_all(&shared).expect("mkdir");
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let forged = r#"{"id":"alice/prefill.cu","status":"passed"}"#;
    std::fs::write(shared.join("journal.jsonl"), forged).expect("plant");
    let run = grade(&shared);
    assert_eq!(run.status.code(), Some(2), "{}", text(&run));
    assert!(
        text(&run).contains("writable by group and others"),
        "{}",
        text(&run)
    );
    assert!(!shared.join("gradebook.csv").exists());

    let out = root.path().join("out");
    std::fs::create_dir_all(&out).expect("mkdir");
    let elsewhere = root.path().join("ta-notes.jsonl");
    std::fs::write(&elsewhere, "").expect("write");
    std::os::unix::fs::symlink(&elsewhere, out.join("journal.jsonl")).expect("symlink");
    let run = grade(&out);
    assert_ne!(run.status.code(), Some(0), "{}", text(&run));
    assert!(text(&run).contains("symlink"), "{}", text(&run));
    assert_eq!(std::fs::read_to_string(&elsewhere).expect("read"), "");
}

#[test]
fn ten_thousand_empty_files_each_in_its_own_folder_grade_in_seconds() {
    let root = tempfile::tempdir().expect("tempdir");
    let class = root.path().join("class");
    for i in 0..10_000 {
        write(&class.join(format!("s{i:05}/prefill.cu")), "");
    }
    let out = root.path().join("out");
    let started = std::time::Instant::now();
    let run = flashprof(
        &[
            "grade",
            class.to_str().expect("utf-8"),
            "--out",
            out.to_str().expect("utf-8"),
            "--compile-only",
        ],
        root.path(),
    );
    let took = started.elapsed();
    assert_finished(&run);
    assert_eq!(journal_lines(&out), 10_000);
    // Four syncs per row took 50 s on the 2-core machine; the release
    // build's figure is in docs/SECURITY.md. This bound leaves room for an
    // unoptimised build on a busy machine.
    assert!(took < Duration::from_secs(30), "took {took:?}");
}

#[test]
fn merge_warnings_quote_hostile_folder_names_without_their_escapes() {
    let root = tempfile::tempdir().expect("tempdir");
    let shard = root.path().join("\u{1b}]52;c;ZWNobyBwd25lZA==\u{7}shard");
    std::fs::create_dir_all(&shard).expect("mkdir");
    let merged = root.path().join("merged");
    let run = flashprof(
        &[
            "grade",
            "--merge",
            shard.to_str().expect("utf-8"),
            "--out",
            merged.to_str().expect("utf-8"),
        ],
        root.path(),
    );
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stderr.contains("no journal"), "{stderr}");
    assert!(stderr.contains("^[]52;c;"), "{stderr}");
    assert!(
        !stderr.contains('\u{1b}') && !stderr.contains('\u{7}'),
        "{stderr:?}"
    );
}

/// `grade ARGS --out OUT --compile-only` in `root`.
fn grade_compile_only(inputs: &[&Path], out: &Path, root: &Path) -> Output {
    let mut args = vec!["grade"];
    args.extend(inputs.iter().map(|p| p.to_str().expect("utf-8")));
    args.extend(["--out", out.to_str().expect("utf-8"), "--compile-only"]);
    flashprof(&args, root)
}

#[test]
fn a_missing_class_folder_or_one_without_submissions_is_nothing_to_grade() {
    let root = tempfile::tempdir().expect("tempdir");
    let out = root.path().join("out");
    let missing = root.path().join("no/such/folder");
    // A class folder holding no submission: notes, and a TUI history's saves.
    let empty = root.path().join("empty-class");
    write(&empty.join("README.txt"), "nothing handed in");
    write(&empty.join("alice/.flashprof/sources/1.cu"), STARTER);
    let named = root.path().join("typo.cu");
    for (inputs, names) in [
        (vec![missing.as_path()], "no/such/folder"),
        (vec![empty.as_path()], "no *.cu submission"),
        // A glob that matched nothing reaches grade as the pattern itself.
        (vec![named.as_path()], "typo.cu"),
    ] {
        let run = grade_compile_only(&inputs, &out, root.path());
        assert_eq!(run.status.code(), Some(8), "{inputs:?}: {}", text(&run));
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(
            stderr.contains(names) && stderr.contains("nothing was graded"),
            "{stderr}"
        );
        assert!(!out.exists(), "{inputs:?}: no output folder is made");
    }
}

/// Among files named to `grade`, one that is not there is that student's
/// `missing` row; the others are graded.
#[test]
fn a_missing_named_file_is_its_own_row_and_the_rest_are_graded() {
    let root = tempfile::tempdir().expect("tempdir");
    let out = root.path().join("out");
    let present = root.path().join("alice.cu");
    write(&present, STARTER);
    let absent = root.path().join("bob.cu");
    let run = grade_compile_only(&[&present, &absent], &out, root.path());
    assert_eq!(run.status.code(), Some(0), "{}", text(&run));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stderr.contains("1 missing"), "{stderr}");
    let csv = std::fs::read_to_string(out.join("gradebook.csv")).expect("a gradebook");
    let row = |name: &str| {
        csv.lines()
            .find(|l| l.contains(name))
            .unwrap_or_else(|| panic!("no row for {name}: {csv}"))
            .to_owned()
    };
    assert!(row("bob.cu").contains(",missing,"), "{csv}");
    assert!(row("alice.cu").contains(",compiled,"), "{csv}");
}

#[test]
fn the_end_of_a_run_counts_the_gradebook_by_status_on_stderr() {
    let root = tempfile::tempdir().expect("tempdir");
    let class = root.path().join("class");
    write(&class.join("starter.cu"), STARTER);
    write(
        &class.join("syntax.cu"),
        STARTER.replacen('{', "{ int x = ;", 1),
    );
    write(&class.join("empty.cu"), "");
    write(&class.join("binary.cu"), b"\x7fELF\x00");
    let out = root.path().join("out");
    let run = grade_compile_only(&[&class], &out, root.path());
    assert_finished(&run);
    let expected = if nvrtc_available(&submissions(&out), "starter.cu") {
        "summary: 4 submissions: 1 compiled, 1 compile_error, 2 rejected"
    } else {
        "summary: 4 submissions: 2 rejected, 2 error"
    };
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(
        stderr
            .lines()
            .filter(|l| l.starts_with("summary:"))
            .collect::<Vec<_>>(),
        [expected],
        "{stderr}"
    );
    // Merging says the same of the gradebook it writes.
    let merged = root.path().join("merged");
    let run = flashprof(
        &[
            "grade",
            "--merge",
            out.to_str().expect("utf-8"),
            "--out",
            merged.to_str().expect("utf-8"),
        ],
        root.path(),
    );
    assert_finished(&run);
    assert!(
        String::from_utf8_lossy(&run.stderr).contains(expected),
        "{}",
        text(&run)
    );
}

/// The feedback file written for submission `id` under `out`.
fn feedback(out: &Path, id: &str) -> String {
    let name = flashprof::app::batch::output::feedback_file_name(id);
    std::fs::read_to_string(out.join("runs").join(name)).expect("a feedback file")
}

#[test]
fn each_submission_gets_a_feedback_file_a_student_can_read() {
    let root = tempfile::tempdir().expect("tempdir");
    let class = root.path().join("class");
    // A compile error on a line that holds an escape sequence.
    let syntax = STARTER.replacen('{', "{ int x = ; // \u{1b}[2J\n", 1);
    let error_line = 1 + syntax
        .lines()
        .position(|l| l.contains("int x = ;"))
        .expect("the error's line");
    write(&class.join("syntax.cu"), &syntax);
    // Written for another lab, under a name that would retitle a terminal.
    let paged = include_str!("../kernels/paged-prefill/starter.cu");
    let hostile_id = "other\u{1b}]0;owned\u{7}.cu";
    write(&class.join(hostile_id), paged);
    let out = root.path().join("out");
    assert_finished(&grade_compile_only(&[&class], &out, root.path()));

    let rejected = feedback(&out, hostile_id);
    assert!(
        rejected.starts_with("flashprof feedback: other^[]0;owned^G.cu\n"),
        "{rejected}"
    );
    assert!(
        rejected.contains("verdict: rejected: the file cannot be graded as a kernel source"),
        "{rejected}"
    );
    assert!(
        rejected.contains(
            "the file declares lab `paged-prefill`, but it is being checked as `flash-prefill`"
        ),
        "{rejected}"
    );
    // No --lab was given, so the reason names no flag to drop.
    assert!(!rejected.contains("--lab or"), "{rejected}");
    assert!(!rejected.contains("cases:"), "{rejected}");

    let subs = submissions(&out);
    if !nvrtc_available(&subs, "syntax.cu") {
        return;
    }
    let compile_error = feedback(&out, "syntax.cu");
    assert!(
        compile_error.contains("verdict: compile_error: the kernel does not compile"),
        "{compile_error}"
    );
    let file = subs["syntax.cu"]["file"].as_str().expect("file");
    let place = format!("{file}:{error_line}:");
    let located = compile_error
        .lines()
        .find(|l| l.starts_with(&place))
        .unwrap_or_else(|| panic!("no `{place}COL: error:` line:\n{compile_error}"));
    let column = located[place.len()..].split(':').next().expect("column");
    assert!(column.parse::<usize>().is_ok(), "{located}");
    assert!(located.contains(": error: "), "{located}");
    // The student's line is quoted with its escape made visible.
    assert!(compile_error.contains("// ^[[2J"), "{compile_error}");
    for text in [&rejected, &compile_error] {
        assert!(
            !text.contains(|c: char| c.is_control() && c != '\n'),
            "{text:?}"
        );
    }
}

#[test]
fn a_compile_only_gradebook_leaves_case_counts_empty_and_fills_in_the_build() {
    let root = tempfile::tempdir().expect("tempdir");
    let class = root.path().join("class");
    write(&class.join("starter.cu"), STARTER);
    write(&class.join("empty.cu"), "");
    let out = root.path().join("out");
    assert_finished(&grade_compile_only(&[&class], &out, root.path()));
    let rows = parse_csv(&std::fs::read_to_string(out.join("gradebook.csv")).expect("csv"));
    let column = |name: &str| {
        rows[0]
            .iter()
            .position(|c| c == name)
            .unwrap_or_else(|| panic!("no column {name}: {:?}", rows[0]))
    };
    let cell = |id: &str, name: &str| {
        let row = rows.iter().find(|r| r[0] == id).expect("a row");
        row[column(name)].clone()
    };
    for id in ["starter.cu", "empty.cu"] {
        // Never run: no count, rather than 0 of 14 passed.
        assert_eq!(cell(id, "cases_passed"), "", "{id}");
        assert_eq!(cell(id, "cases_total"), "", "{id}");
    }
    for name in [
        "registers",
        "spill_bytes",
        "smem_bytes",
        "occupancy",
        "occupancy_limiter",
    ] {
        assert_eq!(cell("empty.cu", name), "", "nothing compiled: {name}");
    }
    if !nvrtc_available(&submissions(&out), "starter.cu") {
        return;
    }
    let registers: u32 = cell("starter.cu", "registers").parse().expect("registers");
    assert!(registers > 0);
    let spills: u32 = cell("starter.cu", "spill_bytes").parse().expect("spills");
    let smem: u32 = cell("starter.cu", "smem_bytes").parse().expect("smem");
    let occupancy: f64 = cell("starter.cu", "occupancy").parse().expect("occupancy");
    assert!(occupancy > 0.0 && occupancy <= 1.0, "{occupancy}");
    assert!(
        ["registers", "shared_memory", "threads", "blocks"]
            .contains(&cell("starter.cu", "occupancy_limiter").as_str()),
        "{}",
        cell("starter.cu", "occupancy_limiter")
    );
    // The same figures as the report's build.
    let compile = &submissions(&out)["starter.cu"]["report"]["compile"];
    assert_eq!(compile["resources"]["registers"], registers);
    let resources = &compile["resources"];
    assert_eq!(
        resources["spill_store_bytes"].as_u64().expect("stores")
            + resources["spill_load_bytes"].as_u64().expect("loads"),
        u64::from(spills)
    );
    assert_eq!(
        resources["static_smem_bytes"].as_u64().expect("static")
            + compile["geometry"]["dynamic_smem_bytes"]
                .as_u64()
                .expect("dynamic"),
        u64::from(smem)
    );
}

#[test]
fn grade_s_help_says_what_grade_does_with_lab_and_gpu_host() {
    let root = tempfile::tempdir().expect("tempdir");
    let run = flashprof(&["grade", "--help"], root.path());
    assert_eq!(run.status.code(), Some(0));
    // Help wraps to the terminal: compare with line breaks as spaces.
    let help = String::from_utf8_lossy(&run.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        help.contains("A file's own `lab=` key never changes it"),
        "{help}"
    );
    assert!(!help.contains("decides"), "{help}");
    assert!(
        help.contains("the journal and gradebook written, here"),
        "{help}"
    );
    assert!(!help.contains("file watching"), "{help}");
}

#[test]
fn submissions_past_the_cap_of_a_folder_are_listed_with_the_reason_not_graded() {
    let root = tempfile::tempdir().expect("tempdir");
    let class = root.path().join("class");
    for name in ["a.cu", "b.cu", "c.cu"] {
        write(&class.join("alice").join(name), STARTER);
    }
    write(&class.join("bob/only.cu"), STARTER);
    write(&class.join("loose.cu"), STARTER);
    let out = root.path().join("out");
    let run = flashprof_within(
        &[
            "grade",
            class.to_str().expect("utf-8"),
            "--out",
            out.to_str().expect("utf-8"),
            "--compile-only",
            "--max-per-folder",
            "2",
        ],
        root.path(),
        Duration::from_secs(60),
    );
    assert_finished(&run);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stderr.contains("1 submissions past 2 in their folder are listed, not graded"),
        "{stderr}"
    );
    let subs = submissions(&out);
    assert_eq!(subs.len(), 5, "every file is a row: {:?}", subs.keys());
    assert_eq!(subs["alice/c.cu"]["status"], "rejected");
    let reason = subs["alice/c.cu"]["error"].as_str().expect("reason");
    assert!(
        reason.contains("submission 3 in `alice/`, past the 2 a folder graded"),
        "{reason}"
    );
    for graded in ["alice/a.cu", "alice/b.cu", "bob/only.cu", "loose.cu"] {
        assert_ne!(subs[graded]["status"], "rejected", "{graded}");
    }
}

/// A grade that finds no GPU compiles only, and says so with exit 5 (no
/// GPU), so a job script never reads a compile-only run as a graded class;
/// asked for with `--compile-only`, the same run exits 0.
#[test]
fn a_grade_that_found_no_gpu_exits_5_unless_compiling_only_was_asked_for() {
    let root = tempfile::tempdir().expect("tempdir");
    let class = root.path().join("class");
    write(&class.join("alice/prefill.cu"), STARTER);
    let grade = |extra: &[&str], out: &str| {
        let out = root.path().join(out);
        let mut args = vec![
            "grade",
            class.to_str().expect("utf-8"),
            "--out",
            out.to_str().expect("utf-8"),
        ];
        args.extend(extra);
        // No device visible, whether or not this machine has a GPU.
        Command::new(env!("CARGO_BIN_EXE_flashprof"))
            .args(&args)
            .current_dir(root.path())
            .env("CUDA_VISIBLE_DEVICES", "")
            .output()
            .expect("flashprof runs")
    };
    let found_none = grade(&[], "out-a");
    assert_eq!(found_none.status.code(), Some(5), "{}", text(&found_none));
    assert!(
        text(&found_none).contains("compiling only"),
        "{}",
        text(&found_none)
    );
    let asked = grade(&["--compile-only"], "out-b");
    assert_finished(&asked);
}

#[test]
fn merge_holds_its_out_folder_to_grade_s_rules_and_never_locks_through_a_link() {
    use std::os::unix::fs::PermissionsExt;
    let root = tempfile::tempdir().expect("tempdir");
    let shard = root.path().join("shard");
    std::fs::create_dir(&shard).expect("shard");
    let merge_into = |out: &Path| {
        flashprof(
            &[
                "grade",
                "--merge",
                shard.to_str().expect("utf-8"),
                "--out",
                out.to_str().expect("utf-8"),
            ],
            root.path(),
        )
    };
    // An --out others can write could hold a planted journal: refused.
    let shared = root.path().join("shared");
    std::fs::create_dir(&shared).expect("shared");
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let run = merge_into(&shared);
    assert_eq!(run.status.code(), Some(2), "{}", text(&run));
    assert!(text(&run).contains("others cannot write"), "{}", text(&run));
    // A link planted in place of the lock is not opened through.
    let own = root.path().join("own");
    std::fs::create_dir(&own).expect("own");
    // Writable by no one else, whatever the umask: only the link is wrong.
    std::fs::set_permissions(&own, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let target = root.path().join("not-the-lock");
    std::fs::write(&target, "keep").expect("target");
    std::os::unix::fs::symlink(&target, own.join(".flashprof-grade.lock")).expect("link");
    let run = merge_into(&own);
    assert_ne!(run.status.code(), Some(0), "{}", text(&run));
    assert!(
        text(&run).contains("cannot lock the output folder"),
        "the refusal says the lock: {}",
        text(&run)
    );
    assert_eq!(std::fs::read_to_string(&target).expect("read"), "keep");
    assert!(!own.join("gradebook.csv").exists(), "{}", text(&run));
}
