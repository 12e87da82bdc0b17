//! Compile bombs (issue 20, items 4 and 6) through the real NVRTC of
//! `.cuda-wheels` (CI has it, and no GPU): a huge initialised `__device__`
//! array, thousands of warnings on one long line, an exponential macro.
//! Each must be the submission's compile error, with the memory or time
//! message, while every process flashprof started stays under the compile
//! memory limit (the largest resident set among this test's reaped
//! descendants, `getrusage(RUSAGE_CHILDREN)`: the workers are reaped by the
//! flashprof processes this test reaps); and `grade` must keep the row, so a
//! rerun does not compile the bomb again.
//!
//! The limit here is 2 GiB (`FLASHPROF_COMPILE_MEMORY_MB`), half the default,
//! so the bombs hit it sooner; docs/SECURITY.md has the peaks at 4 GiB.

use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::Value;

const LIMIT_MB: u64 = 2048;

/// The full-form kernel around `body`, after the file-scope `prologue`.
fn kernel(prologue: &str, body: &str) -> String {
    format!(
        "{prologue}\nextern \"C\" __global__ void attention_prefill(const float* q, \
         const float* kCache, const float* vCache, float* out, int chunkLen, int prefixLen)\n\
         {{\n    {body}\n}}\n"
    )
}

/// A gigabyte of initialised device data (NVRTC held 8.4-10.5 GB on it).
fn huge_array() -> String {
    kernel(
        "__device__ char big[1 << 30] = {1};",
        "out[0] = big[threadIdx.x];",
    )
}

/// 8,192 warnings on one line of 500 KB (each diagnostic once copied it).
fn warnings_on_a_long_line() -> String {
    let warnings: String = (0..8192).map(|i| format!("int w{i} = 1 << 40;")).collect();
    let padding = format!("/*{}*/", "x".repeat(500_000));
    kernel("", &format!("{warnings} {padding} out[0] = 0;"))
}

/// A macro that doubles at every level, turned into one string literal.
fn exponential_macro() -> String {
    let mut defines =
        String::from("#define STR2(x) #x\n#define STR(x) STR2(x)\n#define E0 xxxxxxxx\n");
    for level in 1..40 {
        defines.push_str(&format!("#define E{level} E{} E{}\n", level - 1, level - 1));
    }
    kernel(
        &defines,
        "const char* s = STR(E30); out[0] = s[threadIdx.x];",
    )
}

fn flashprof(args: &[&str], cwd: &Path) -> Output {
    flashprof_with(args, cwd, &[])
}

/// `flashprof` with `env` set besides the tests' own limits.
fn flashprof_with(args: &[&str], cwd: &Path, env: &[(&str, &str)]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_flashprof"))
        .args(args)
        .current_dir(cwd)
        .env("FLASHPROF_GPU", "none")
        .env("FLASHPROF_COMPILE_MEMORY_MB", LIMIT_MB.to_string())
        .envs(env.iter().copied())
        .output()
        .expect("flashprof runs")
}

/// The largest resident set (MiB) of any reaped descendant so far.
fn children_peak_mb() -> u64 {
    // SAFETY: getrusage writes one rusage we own.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        assert_eq!(libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage), 0);
        usage
    };
    u64::try_from(usage.ru_maxrss).expect("a size") >> 10
}

fn assert_under_the_limit(what: &str) {
    let peak = children_peak_mb();
    eprintln!("{what}: largest child so far {peak} MiB (limit {LIMIT_MB} MiB)");
    assert!(peak < LIMIT_MB, "{what}: a child reached {peak} MiB");
}

/// `check --json` of `text`: the compile problem, after the exit and the
/// NVRTC check.
fn checked(name: &str, text: &str) -> Value {
    let folder = tempfile::tempdir().expect("temp folder");
    std::fs::write(folder.path().join(name), text).expect("write the bomb");
    let output = flashprof(&["check", "--json", name], folder.path());
    let stdout = String::from_utf8_lossy(&output.stdout);
    let report: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    let problem = report["compile"]["problem"].clone();
    assert_ne!(
        problem["kind"], "compiler_missing",
        "NVRTC (libnvrtc.so.13) cannot be loaded: run the tests through scripts/test.sh"
    );
    // The student's compile error (exit 4), never the grader's (exit 6).
    assert_eq!(output.status.code(), Some(4), "{stdout}");
    assert_eq!(problem["kind"], "over_limit", "{stdout}");
    problem
}

/// `text` checked is over the memory limit, with every child under it.
fn assert_over_the_memory_limit(name: &str, text: &str) {
    let problem = checked(name, text);
    let message = problem["message"].as_str().expect("message");
    assert!(
        message.starts_with("the compiler used more than 2 GB"),
        "{message}"
    );
    assert_under_the_limit(name);
}

#[test]
fn a_huge_initialised_array_is_a_compile_error_under_the_memory_limit() {
    assert_over_the_memory_limit("big.cu", &huge_array());
}

#[test]
fn thousands_of_warnings_on_a_long_line_stay_under_the_memory_limit() {
    assert_over_the_memory_limit("warn.cu", &warnings_on_a_long_line());
}

#[test]
fn a_compile_that_times_out_is_the_submissions_row_kept_by_the_journal() {
    let root = tempfile::tempdir().expect("temp folder");
    let class = root.path().join("class");
    std::fs::create_dir_all(class.join("mallory")).expect("class");
    std::fs::write(class.join("mallory/prefill.cu"), exponential_macro()).expect("bomb");
    let out = root.path().join("out");
    let args = [
        "grade",
        class.to_str().expect("utf-8"),
        "--out",
        out.to_str().expect("utf-8"),
        "--compile-only",
    ];
    // The macro runs for minutes; 5 s of it show the limit as well as 60.
    let limit = [("FLASHPROF_COMPILE_TIMEOUT_S", "5")];
    let first = flashprof_with(&args, root.path(), &limit);
    let said = String::from_utf8_lossy(&first.stderr);
    assert_ne!(first.status.code(), Some(6), "a grader error: {said}");
    let report: Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("report.json")).expect("report.json"),
    )
    .expect("JSON");
    let row = &report["submissions"][0];
    assert_eq!(row["status"], "compile_error", "{row}");
    let row_text = row.to_string();
    assert!(
        row_text.contains("the compile took longer than 5 s"),
        "{row_text}"
    );
    assert_under_the_limit("exponential macro");

    // The rerun under the same limit takes the journal's row: it compiles nothing.
    let started = Instant::now();
    let again = flashprof_with(&args, root.path(), &limit);
    assert_ne!(again.status.code(), Some(6));
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "the rerun compiled again ({:?})",
        started.elapsed()
    );

    // A TA who raises the limit has the row the old one cut short graded again.
    let raised = [("FLASHPROF_COMPILE_TIMEOUT_S", "6")];
    let regraded = flashprof_with(&args, root.path(), &raised);
    let said = String::from_utf8_lossy(&regraded.stderr);
    assert!(
        said.contains("grading 1 submissions again: a limit cut each short")
            && said.contains("compile 6 s and"),
        "{said}"
    );
    let report = std::fs::read_to_string(out.join("report.json")).expect("report.json");
    assert!(
        report.contains("the compile took longer than 6 s"),
        "{report}"
    );
}
