//! One error format, `file:line:col: error: message`, then the line and a
//! caret, from `check` (NVRTC's errors and include refusals), also when the
//! line is indented with tabs; no colour when stdout is not a terminal.

mod cli_support;
use cli_support::{flashprof_without_gpu, text};

const STARTER: &str = include_str!("../kernels/flash-prefill/starter.cu");

/// The caret line's `^` sits under the first character of `word` on the line above it.
fn caret_under(shown: &str, word: &str) -> bool {
    let lines: Vec<&str> = shown.lines().collect();
    lines.windows(2).any(|pair| {
        pair[1].trim() == "^"
            && pair[0].find(word).map(|b| pair[0][..b].chars().count()) == pair[1].find('^')
    })
}

#[test]
fn a_compile_error_in_a_tab_indented_file_names_file_line_and_column() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tabbed: String = STARTER
        .lines()
        .enumerate()
        .map(|(i, line)| {
            let line = line.replacen("    ", "\t", 1);
            let line = if i == 18 {
                line.replacen("const float*", "const flaot*", 1)
            } else {
                line
            };
            format!("{line}\n")
        })
        .collect();
    std::fs::write(dir.path().join("t.cu"), tabbed).expect("write");
    let run = flashprof_without_gpu(&["check", "t.cu"], dir.path());
    let shown = text(&run);
    assert_eq!(run.status.code(), Some(4), "{shown}");
    assert!(
        shown.contains("\nt.cu:19:8: error: identifier \"flaot\" is undefined\n"),
        "{shown}"
    );
    assert!(caret_under(&shown, "flaot"), "{shown}");
    assert!(!shown.contains('\u{1b}'), "no colour into a pipe: {shown}");
}

#[test]
fn an_include_refusal_is_a_located_error_with_a_caret() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("inc.cu"), "\t#include \"/etc/passwd\"\n").expect("write");
    let run = flashprof_without_gpu(&["check", "inc.cu"], dir.path());
    let shown = text(&run);
    assert_eq!(run.status.code(), Some(3), "{shown}");
    assert!(
        shown.contains("\ninc.cu:1:2: error: `#include \"/etc/passwd\"` is refused"),
        "{shown}"
    );
    assert!(caret_under(&shown, "#include"), "{shown}");
}

#[test]
fn the_reproduce_line_keeps_every_option_that_chose_the_inputs_and_quotes_the_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broken = STARTER.replacen("const float*", "const flaot*", 1);
    std::fs::write(dir.path().join("my kernel.cu"), broken).expect("write");
    let run = flashprof_without_gpu(
        &[
            "check",
            "my kernel.cu",
            "--lab",
            "flash-prefill",
            "--case",
            "chunk-of-1",
            "--timing-shape",
            "chunk=1024,prefix=512",
            "--seed",
            "7",
        ],
        dir.path(),
    );
    let shown = text(&run);
    // The file did not compile, so no inputs were drawn: no seed.
    assert!(
        shown.contains(
            "COMPILE ERROR: 1 error\nreproduce with: flashprof check 'my kernel.cu' --lab flash-prefill \
             --case chunk-of-1 --timing-shape chunk=1024,prefix=512\n"
        ),
        "{shown}"
    );
    assert!(!shown.contains("--seed"), "{shown}");
}

/// `--color always` colours even a pipe, `never` nothing; `auto` (the
/// default) leaves a pipe plain, which the test above holds.
#[test]
fn color_always_colours_the_errors_into_a_pipe_and_never_leaves_them_plain() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broken = STARTER.replacen("const float*", "const flaot*", 1);
    std::fs::write(dir.path().join("t.cu"), broken).expect("write");
    let always = flashprof_without_gpu(&["check", "--color", "always", "t.cu"], dir.path());
    let shown = String::from_utf8_lossy(&always.stdout);
    assert!(shown.contains("\u{1b}[1;31merror\u{1b}[0m"), "{shown}");
    let never = flashprof_without_gpu(&["check", "--color", "never", "t.cu"], dir.path());
    assert!(!text(&never).contains('\u{1b}'), "{}", text(&never));
    assert_eq!(never.status.code(), Some(4));
}
