//! Choosing a lab on the command line: `flashprof labs`, `--lab`, a file's
//! own `lab=` key and their precedence (compile-free paths, no GPU needed).

mod cli_support;
use cli_support::{flashprof, flashprof_without_gpu, text};

const STARTER: &str = include_str!("../kernels/flash-prefill/starter.cu");

#[test]
fn labs_lists_one_line_per_lab_with_the_first_lab_first() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = flashprof(&["labs"], dir.path());
    assert_eq!(run.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&run.stdout);
    let first = stdout.lines().next().expect("a line");
    assert!(first.starts_with("flash-prefill"), "{stdout}");
    assert!(first.contains("attention-v1"), "{stdout}");
    let decode = stdout
        .lines()
        .find(|line| line.starts_with("paged-decode"))
        .unwrap_or_else(|| panic!("no paged-decode line: {stdout}"));
    assert!(decode.contains("paged-decode-v1"), "{stdout}");
}

#[test]
fn the_top_level_help_names_every_lab_with_its_own_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let listed = flashprof(&["labs"], dir.path());
    let names: Vec<String> = String::from_utf8_lossy(&listed.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next().map(str::to_owned))
        .collect();
    assert_eq!(names.len(), 4, "{names:?}");
    let run = flashprof(&["--help"], dir.path());
    assert_eq!(run.status.code(), Some(0));
    let help = String::from_utf8_lossy(&run.stdout);
    for (name, lab) in names.iter().zip(flashprof::lab::registry::labs()) {
        assert_eq!(name, lab.name());
        assert!(
            help.lines().any(|line| {
                let words: Vec<&str> = line.split_whitespace().collect();
                words.starts_with(&[lab.name(), lab.default_file()])
            }),
            "{name} is not listed with {}:\n{help}",
            lab.default_file()
        );
    }
}

/// The decode lab's starter, chosen by its own `lab=` key, compiles on a
/// machine without a GPU (exit 5: nothing graded) and `--json` names the
/// lab and the contract.
#[test]
fn the_decode_starter_compiles_without_a_gpu_and_json_names_the_lab() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("starter.cu"),
        include_str!("../kernels/paged-decode/starter.cu"),
    )
    .expect("write");
    let run = flashprof_without_gpu(&["check", "starter.cu", "--no-timing"], dir.path());
    assert_eq!(run.status.code(), Some(5), "{}", text(&run));
    let shown = text(&run);
    assert!(shown.contains("32 threads"), "{shown}");

    let run = flashprof_without_gpu(
        &["check", "starter.cu", "--json", "--no-timing"],
        dir.path(),
    );
    assert_eq!(run.status.code(), Some(5), "{}", text(&run));
    let value: serde_json::Value = serde_json::from_slice(&run.stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", text(&run)));
    assert_eq!(value["lab"], "paged-decode", "{value}");
    assert_eq!(value["compile"]["ok"], true, "{value}");
    assert_eq!(value["compile"]["geometry"]["threads"], 32, "{value}");
}

#[test]
fn an_unknown_lab_is_a_usage_error_that_lists_the_labs() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("k.cu"), STARTER).expect("write");
    for args in [
        vec!["check", "k.cu", "--lab", "decode-v9"],
        vec!["grade", "k.cu", "--out", "o", "--lab", "decode-v9"],
        vec!["compare", "k.cu", "k.cu", "--lab", "decode-v9"],
        vec!["bench", "k.cu", "--lab", "decode-v9"],
        vec!["calibrate", "--lab", "decode-v9"],
        vec!["--lab", "decode-v9", "k.cu"],
    ] {
        let run = flashprof(&args, dir.path());
        assert_eq!(run.status.code(), Some(2), "{args:?}: {}", text(&run));
        assert!(
            text(&run).contains("no lab named `decode-v9`"),
            "{}",
            text(&run)
        );
        assert!(text(&run).contains("flash-prefill"), "{}", text(&run));
    }
}

#[test]
fn a_file_declaring_another_lab_than_the_flag_is_refused_with_both_names() {
    let dir = tempfile::tempdir().expect("tempdir");
    let declared = format!("// @flashprof lab=paged-prefill\n{STARTER}");
    std::fs::write(dir.path().join("k.cu"), declared).expect("write");
    let run = flashprof(&["check", "k.cu", "--lab", "flash-prefill"], dir.path());
    assert_eq!(run.status.code(), Some(3), "{}", text(&run));
    let shown = text(&run);
    assert!(
        shown.contains("paged-prefill") && shown.contains("flash-prefill"),
        "{shown}"
    );
}

#[test]
fn a_file_declaring_an_unknown_lab_is_the_files_fault() {
    let dir = tempfile::tempdir().expect("tempdir");
    let declared = format!("// @flashprof lab=decode-v9\n{STARTER}");
    std::fs::write(dir.path().join("k.cu"), declared).expect("write");
    let run = flashprof(&["check", "k.cu"], dir.path());
    assert_eq!(run.status.code(), Some(3), "{}", text(&run));
    assert!(text(&run).contains("decode-v9"));
}

#[test]
fn grade_rejects_a_file_written_for_another_lab() {
    let dir = tempfile::tempdir().expect("tempdir");
    let class = dir.path().join("class");
    std::fs::create_dir_all(&class).expect("mkdir");
    std::fs::write(class.join("ok.cu"), STARTER).expect("write");
    std::fs::write(
        class.join("other.cu"),
        format!("// @flashprof lab=paged-prefill\n{STARTER}"),
    )
    .expect("write");
    let run = flashprof(
        &["grade", "class", "--out", "out", "--compile-only"],
        dir.path(),
    );
    assert!(run.status.code().is_some());
    let report: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("out/report.json")).expect("report"),
    )
    .expect("json");
    let rows = report["submissions"].as_array().expect("rows");
    let other = rows.iter().find(|r| r["id"] == "other.cu").expect("row");
    assert_eq!(other["status"], "rejected", "{other}");
    assert!(other["error"]
        .as_str()
        .unwrap_or("")
        .contains("paged-prefill"));
}

#[test]
fn the_paged_lab_names_its_own_entry_point_and_grades_compile_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The first lab's kernel checked as a paged submission: refused, naming
    // the paged lab's entry point and signature.
    std::fs::write(
        dir.path().join("flash.cu"),
        include_str!("../kernels/flash-prefill/reference.cu"),
    )
    .expect("write");
    let run = flashprof(&["check", "flash.cu", "--lab", "paged-prefill"], dir.path());
    assert_eq!(run.status.code(), Some(3), "{}", text(&run));
    let shown = text(&run);
    assert!(shown.contains("`paged_prefill`"), "{shown}");
    assert!(shown.contains("const int* blockTable"), "{shown}");

    let class = dir.path().join("class");
    std::fs::create_dir_all(&class).expect("mkdir");
    std::fs::write(
        class.join("ours.cu"),
        include_str!("../kernels/paged-prefill/starter.cu"),
    )
    .expect("write");
    let run = flashprof(
        &[
            "grade",
            "class",
            "--out",
            "out",
            "--compile-only",
            "--lab",
            "paged-prefill",
        ],
        dir.path(),
    );
    assert_eq!(run.status.code(), Some(0), "{}", text(&run));
    let csv = std::fs::read_to_string(dir.path().join("out/gradebook.csv")).expect("csv");
    let row = csv.lines().nth(1).expect("a row");
    assert!(row.starts_with("ours.cu,"), "{csv}");
    assert!(row.contains(",paged-prefill,"), "{csv}");
    // Compiled, unless this machine has no NVRTC at all.
    assert!(
        row.contains(",compiled,") || (row.contains(",error,") && row.contains("NVRTC")),
        "{csv}"
    );
}

/// Working out a file's lab reads it like any student file: a FIFO is
/// refused, never opened blocking (a FIFO hung `check` before lab choice
/// read the file the safe way).
#[test]
fn choosing_the_lab_of_a_fifo_does_not_block() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("pipe.cu");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    for args in [
        vec!["check", "pipe.cu"],
        vec!["bench", "pipe.cu"],
        vec!["compare", "pipe.cu", "pipe.cu"],
    ] {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_flashprof"))
            .args(&args)
            .current_dir(dir.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("flashprof starts");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait") {
                break Some(status);
            }
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        };
        let status = status.unwrap_or_else(|| panic!("{args:?} blocked on the FIFO"));
        assert_eq!(status.code(), Some(3), "{args:?}");
    }
}

#[test]
fn a_hostile_lab_key_is_the_files_fault_shown_short_and_without_escapes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let paged = include_str!("../kernels/paged-prefill/reference.cu");
    let with_line = |line: &[u8]| {
        let mut text = line.to_vec();
        text.push(b'\n');
        text.extend_from_slice(paged.replace("// @flashprof lab=", "// lab=").as_bytes());
        text
    };
    let long = format!("// @flashprof lab={}", "x".repeat(900_000));
    let cases: [(&str, &[u8], &str); 6] = [
        (
            "path.cu",
            b"// @flashprof lab=../../etc",
            "no lab named `../../etc`",
        ),
        ("empty.cu", b"// @flashprof lab=", "no lab named ``"),
        (
            "escapes.cu",
            b"// @flashprof lab=\x1b]0;pwned\x07\x1b[31m",
            "no lab named `^[]0;pwned^G^[[31m`",
        ),
        ("long.cu", long.as_bytes(), "xxxx...`"),
        (
            "bytes.cu",
            b"// @flashprof lab=paged\xff-prefill",
            "no lab named `paged\u{fffd}-prefill`",
        ),
        (
            "twice.cu",
            b"// @flashprof lab=paged-prefill lab=flash-prefill",
            "`lab` is given twice",
        ),
    ];
    for (name, line, expected) in cases {
        std::fs::write(dir.path().join(name), with_line(line)).expect("write");
        let run = flashprof(&["check", name, "--no-timing", "--no-counters"], dir.path());
        assert_eq!(run.status.code(), Some(3), "{name}: {}", text(&run));
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(stderr.contains(expected), "{name}: {stderr}");
        assert!(!stderr.contains('\u{1b}'), "{name}: {stderr:?}");
        assert!(stderr.len() < 1024, "{name}: {} bytes", stderr.len());
    }
}

#[test]
fn a_byte_order_mark_before_the_lab_key_still_chooses_the_lab() {
    // An editor's mark before a first-line declaration: the lab is read,
    // not defaulted and then refused as "another lab than --lab".
    let dir = tempfile::tempdir().expect("tempdir");
    let starter = include_str!("../kernels/paged-prefill/starter.cu")
        .replace("// @flashprof lab=", "// lab=");
    let declared = format!("\u{feff}// @flashprof lab=paged-prefill\n{starter}");
    std::fs::write(dir.path().join("k.cu"), declared).expect("write");
    let run = flashprof(
        &["check", "k.cu", "--json", "--no-timing", "--no-counters"],
        dir.path(),
    );
    let report: serde_json::Value =
        serde_json::from_slice(&run.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&run)));
    assert_eq!(report["lab"], "paged-prefill", "{}", text(&run));
    assert_ne!(run.status.code(), Some(3), "{}", text(&run));
}

#[test]
fn the_fp8_lab_is_listed_and_its_starter_compiles_without_a_gpu() {
    let dir = tempfile::tempdir().expect("tempdir");
    let listed = flashprof(&["labs"], dir.path());
    let stdout = String::from_utf8_lossy(&listed.stdout);
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("paged-prefill-fp8") && l.contains("paged-prefill-fp8-v1")),
        "{stdout}"
    );
    // The starter in the lab's kernel folder, as docs/LABS.md lays it out.
    let folder = dir.path().join("kernels/paged-prefill-fp8");
    std::fs::create_dir_all(&folder).expect("mkdir");
    std::fs::write(
        folder.join("starter.cu"),
        include_str!("../kernels/paged-prefill-fp8/starter.cu"),
    )
    .expect("write");
    let run = flashprof_without_gpu(
        &["check", "kernels/paged-prefill-fp8/starter.cu", "--json"],
        dir.path(),
    );
    // 5: compiled, nothing ran (no GPU); a missing header would be a compile problem.
    assert_eq!(run.status.code(), Some(5), "{}", text(&run));
    let report: serde_json::Value =
        serde_json::from_slice(&run.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&run)));
    assert_eq!(report["lab"], "paged-prefill-fp8", "{}", text(&run));
}
