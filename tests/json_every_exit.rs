//! `--json` prints one JSON document on stdout for every outcome of
//! `flashprof check`, bad files and environment errors included, and the
//! exit code stays as documented (docs/CLI.md, "Exit codes"; docs/JSON.md).

mod cli_support;
use cli_support::{flashprof, flashprof_without_gpu, text};

const STARTER: &str = include_str!("../kernels/flash-prefill/starter.cu");

/// Runs `flashprof ARGS` in `dir` and returns its exit code and its stdout as JSON.
fn json_run(args: &[&str], dir: &std::path::Path) -> (i32, serde_json::Value) {
    let run = flashprof(args, dir);
    let code = run.status.code().expect("exited");
    let stdout = String::from_utf8_lossy(&run.stdout);
    let value: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "{args:?} (exit {code}): stdout is not JSON ({e}): {}",
            text(&run)
        )
    });
    let schema = value["schema"].as_str().expect("a schema field");
    if schema == "flashprof.error/1" {
        assert_eq!(value["exit_code"], code, "{args:?}: {value}");
        assert!(value["message"].as_str().is_some_and(|m| !m.is_empty()));
    } else {
        assert_eq!(schema, "flashprof.check/2", "{args:?}: {value}");
    }
    (code, value)
}

#[test]
fn usage_errors_are_json_with_exit_2() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("k.cu"), STARTER).expect("write");
    let (code, value) = json_run(
        &["check", "k.cu", "--json", "--lab", "decode-v9"],
        dir.path(),
    );
    assert_eq!(code, 2);
    assert_eq!(value["kind"], "usage");
    assert!(value["message"].as_str().unwrap().contains("decode-v9"));
    // clap's own refusal: the file is missing from the command line.
    let (code, value) = json_run(&["check", "--json"], dir.path());
    assert_eq!(code, 2);
    assert_eq!(value["command"], "check");
    let (code, _) = json_run(
        &["check", "k.cu", "--json", "--timing-shape", "chunk"],
        dir.path(),
    );
    assert_eq!(code, 2);
}

#[test]
fn a_bad_file_is_json_with_exit_3() {
    let dir = tempfile::tempdir().expect("tempdir");
    let renamed = "extern \"C\" __global__ void my_kernel(const float* q, const float* kCache,\n\
        const float* vCache, float* out, int chunkLen, int prefixLen) {}\n";
    std::fs::write(dir.path().join("wrong.cu"), renamed).expect("write");
    let (code, value) = json_run(&["check", "wrong.cu", "--json"], dir.path());
    assert_eq!(code, 3);
    assert_eq!(value["kind"], "bad_source");
    assert_eq!(value["source_path"], "wrong.cu");
    assert!(
        value["message"].as_str().unwrap().contains("my_kernel"),
        "{value}"
    );
    assert_eq!(value["lab"], "flash-prefill");
    let (code, _) = json_run(&["check", "absent.cu", "--json"], dir.path());
    assert_eq!(code, 3);
    std::fs::write(dir.path().join("empty.cu"), "").expect("write");
    let (code, _) = json_run(&["check", "empty.cu", "--json"], dir.path());
    assert_eq!(code, 3);
}

#[test]
fn a_compile_error_and_a_compile_only_run_are_full_reports() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broken = STARTER.replacen('{', "{ int x = ;", 1);
    std::fs::write(dir.path().join("broken.cu"), broken).expect("write");
    let (code, value) = json_run(&["check", "broken.cu", "--json", "--no-timing"], dir.path());
    assert_eq!(code, 4, "{value}");
    assert_eq!(value["compile"]["ok"], false);
    assert_eq!(value["verdict"], "compile_error");
    std::fs::write(dir.path().join("k.cu"), STARTER).expect("write");
    let (code, value) = json_run(&["check", "k.cu", "--json", "--no-timing"], dir.path());
    assert_eq!(value["compile"]["ok"], true, "{value}");
    // 5 without a GPU (nothing graded); 0 on one (the starter is correct).
    match code {
        5 => assert_eq!(value["verdict"], "compiled", "{value}"),
        0 => assert_eq!(value["verdict"], "passed", "{value}"),
        _ => panic!("{code}: {value}"),
    }
}

#[test]
fn an_environment_error_is_json_with_exit_6() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("k.cu"), STARTER).expect("write");
    let (code, value) = json_run(
        &["check", "k.cu", "--json", "--cases", "no-such-cases.toml"],
        dir.path(),
    );
    assert_eq!(code, 6);
    assert_eq!(value["kind"], "environment");
    std::fs::write(dir.path().join("bad.toml"), "[[case]]\nname = 3\n").expect("write");
    let (code, _) = json_run(
        &["check", "k.cu", "--json", "--cases", "bad.toml"],
        dir.path(),
    );
    assert_eq!(code, 6);
}

#[test]
fn the_table_says_not_graded_when_nothing_ran() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("k.cu"), STARTER).expect("write");
    let run = flashprof_without_gpu(&["check", "k.cu", "--no-timing"], dir.path());
    assert_eq!(run.status.code(), Some(5), "{}", text(&run));
    let stdout = String::from_utf8_lossy(&run.stdout);
    let last = stdout.lines().last().expect("a line");
    assert!(last.starts_with("NOT GRADED (no GPU)"), "{stdout}");
    assert!(!stdout.contains("FAIL"), "{stdout}");
}

#[test]
fn a_bare_word_is_not_a_file_and_names_the_command() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = flashprof(&["chek"], dir.path());
    assert_eq!(run.status.code(), Some(2), "{}", text(&run));
    assert!(
        text(&run).contains("no such command or file; did you mean `check`?"),
        "{}",
        text(&run)
    );
    assert!(!dir.path().join("chek").exists());
    let run = flashprof(&["notes.txt"], dir.path());
    assert_eq!(run.status.code(), Some(3), "{}", text(&run));
    assert!(
        text(&run).contains("notes.txt: no such file"),
        "{}",
        text(&run)
    );
    assert!(
        text(&run).contains("flashprof --new notes.txt"),
        "{}",
        text(&run)
    );
    assert!(!dir.path().join("notes.txt").exists());
}

#[test]
fn compare_json_is_json_when_a_file_is_bad_or_the_lab_unknown() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("k.cu"), STARTER).expect("write");
    let (code, value) = json_run(&["compare", "k.cu", "absent.cu", "--json"], dir.path());
    assert_eq!(code, 3);
    assert_eq!(value["command"], "compare");
    assert_eq!(value["source_path"], "absent.cu");
    let (code, _) = json_run(
        &["compare", "k.cu", "k.cu", "--json", "--lab", "decode-v9"],
        dir.path(),
    );
    assert_eq!(code, 2);
}

#[test]
fn the_compiled_image_is_in_the_report_only_when_asked_for() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("k.cu"), STARTER).expect("write");
    let report = |args: &[&str]| {
        let run = flashprof_without_gpu(args, dir.path());
        assert_eq!(run.status.code(), Some(5), "{}", text(&run));
        let value: serde_json::Value = serde_json::from_slice(&run.stdout).expect("JSON");
        assert_eq!(value["schema"], "flashprof.check/2");
        (run.stdout.len(), value)
    };
    let (plain_bytes, plain) = report(&["check", "k.cu", "--json"]);
    assert_eq!(plain["compile"]["ok"], true, "{plain}");
    assert!(plain["compile"].get("image").is_none(), "{plain}");
    let (full_bytes, full) = report(&["check", "k.cu", "--json", "--image"]);
    let image = full["compile"]["image"]
        .as_str()
        .expect("the image, base64");
    assert!(image.len() > 1000, "{} bytes of image", image.len());
    assert!(
        plain_bytes < full_bytes / 2,
        "{plain_bytes} against {full_bytes}"
    );
    // Without --json there is no report to keep it in.
    let run = flashprof(&["check", "k.cu", "--image"], dir.path());
    assert_eq!(run.status.code(), Some(2), "{}", text(&run));
}
