//! A submission that names another file (a secret of the grader's machine, a
//! classmate's kernel, an existence probe) is refused before NVRTC sees it,
//! with its line, and no byte of the named file reaches any output.

mod cli_support;
use cli_support::flashprof;
use std::path::Path;

const STARTER: &str = include_str!("../kernels/flash-prefill/starter.cu");
const SECRET: &str = "TOP-SECRET-exam-answers-7f3a";

/// Every byte under `dir`, lossily as text.
fn everything_under(dir: &Path) -> String {
    let mut text = String::new();
    for entry in std::fs::read_dir(dir).expect("read_dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            text.push_str(&everything_under(&path));
        } else {
            text.push_str(&String::from_utf8_lossy(
                &std::fs::read(&path).expect("read"),
            ));
        }
    }
    text
}

fn hostile_sources(secret: &Path) -> Vec<(&'static str, String, usize)> {
    let secret = secret.display();
    vec![
        (
            "absolute.cu",
            format!("// kernel\n#include \"{secret}\"\n{STARTER}"),
            2,
        ),
        ("angle.cu", format!("#include <{secret}>\n{STARTER}"), 1),
        (
            "sibling.cu",
            "\n\n\n#include \"../bob/prefill.cu\"\n".to_string(),
            4,
        ),
        (
            "probe.cu",
            format!("#if __has_include(\"{secret}\")\n#endif\n{STARTER}"),
            1,
        ),
        (
            "digraph.cu",
            format!("%:include \"{secret}\"\n{STARTER}"),
            1,
        ),
        (
            "spliced.cu",
            format!("#inc\\\nlude \"{secret}\"\n{STARTER}"),
            1,
        ),
    ]
}

#[test]
fn check_refuses_an_include_of_a_host_file_naming_the_line() {
    let root = tempfile::tempdir().expect("tempdir");
    let secret = root.path().join("secret.txt");
    std::fs::write(&secret, SECRET).expect("secret");
    for (name, text, line) in hostile_sources(&secret) {
        let file = root.path().join(name);
        std::fs::write(&file, text).expect("write");
        let run = flashprof(&["check", name, "--json"], root.path());
        let shown = format!(
            "{}{}",
            String::from_utf8_lossy(&run.stdout),
            String::from_utf8_lossy(&run.stderr)
        );
        assert_eq!(run.status.code(), Some(3), "{name}: {shown}");
        assert!(
            shown.contains(&format!("{name}:{line}:")),
            "{name}: {shown}"
        );
        assert!(shown.contains("is refused"), "{name}: {shown}");
        assert!(!shown.contains(SECRET), "{name} leaked the secret: {shown}");
    }
}

#[test]
fn grade_rejects_includes_and_nothing_of_the_named_files_reaches_the_gradebook() {
    let root = tempfile::tempdir().expect("tempdir");
    let secret = root.path().join("secret.txt");
    std::fs::write(&secret, SECRET).expect("secret");
    let class = root.path().join("class");
    std::fs::create_dir_all(class.join("bob")).expect("mkdir");
    std::fs::write(
        class.join("bob/prefill.cu"),
        format!("// {SECRET}\n{STARTER}"),
    )
    .expect("bob");
    std::fs::create_dir_all(class.join("eve")).expect("mkdir");
    for (name, text, _) in hostile_sources(&secret) {
        std::fs::write(class.join("eve").join(name), text).expect("write");
    }
    let out = root.path().join("out");
    let run = flashprof(
        &[
            "grade",
            class.join("eve").to_str().expect("utf-8"),
            "--out",
            out.to_str().expect("utf-8"),
            "--compile-only",
        ],
        root.path(),
    );
    assert!(run.status.code().is_some(), "grade was killed");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).expect("report"))
            .expect("json");
    let rows = report["submissions"].as_array().expect("rows");
    assert_eq!(rows.len(), 6);
    for row in rows {
        assert_eq!(row["status"], "rejected", "{row}");
        assert!(
            row["error"].as_str().expect("error").contains("is refused"),
            "{row}"
        );
    }
    assert!(!everything_under(&out).contains(SECRET));
}
