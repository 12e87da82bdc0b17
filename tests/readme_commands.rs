//! The README and the command-line reference (docs/CLI.md) name only
//! commands and flags that exist, and the README's promises about a machine
//! without a GPU are what the binary does (no GPU needed).

mod cli_support;
use cli_support::{checkout, flashprof, flashprof_without_gpu, text};

use std::collections::{BTreeMap, BTreeSet};

fn document(name: &str) -> String {
    std::fs::read_to_string(checkout().join(name)).expect("read the document")
}

/// The text of every `code span` of a line (no nesting in these documents).
fn code_spans(line: &str) -> Vec<&str> {
    line.split('`').skip(1).step_by(2).collect()
}

/// Every `--flag` a piece of text names (the flag alone, without `=value`).
fn flags_in(text: &str) -> Vec<String> {
    text.split(|c: char| c.is_whitespace() || c == ',' || c == '(' || c == ')')
        .filter_map(|word| word.strip_prefix("--"))
        .map(|flag| {
            flag.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                .next()
                .unwrap_or("")
        })
        .filter(|flag| !flag.is_empty() && flag.as_bytes()[0].is_ascii_lowercase())
        .map(|flag| format!("--{flag}"))
        .collect()
}

/// The subcommand a `flashprof ...` line names, or None for the TUI
/// (`flashprof [FILE]`, `flashprof prefill.cu`, `flashprof --new ...`).
fn subcommand_of(words: &[&str]) -> Option<String> {
    let second = words.get(1)?;
    let is_command =
        second.chars().all(|c| c.is_ascii_lowercase() || c == '-') && !second.starts_with('-');
    is_command.then(|| second.trim_end_matches(',').to_string())
}

/// What `flashprof [COMMAND] --help` lists, per command ("" is the TUI).
struct Help {
    by_command: BTreeMap<String, String>,
}

impl Help {
    fn new() -> Self {
        Help {
            by_command: BTreeMap::new(),
        }
    }

    fn of(&mut self, command: &str) -> &str {
        self.by_command
            .entry(command.to_string())
            .or_insert_with(|| {
                let dir = tempfile::tempdir().expect("tempdir");
                let args: Vec<&str> = if command.is_empty() {
                    vec!["--help"]
                } else {
                    vec![command, "--help"]
                };
                let run = flashprof(&args, dir.path());
                assert_eq!(
                    run.status.code(),
                    Some(0),
                    "`flashprof {command}` is no command: {}",
                    text(&run)
                );
                String::from_utf8_lossy(&run.stdout).into_owned()
            })
    }

    /// Whether `flag` is one of the command's options: named at the start
    /// of an option line (`  -j, --json`, `      --lab <NAME>`), not in
    /// some other option's words.
    fn lists(&mut self, command: &str, flag: &str) -> bool {
        self.of(command).lines().any(|line| {
            let line = line.trim_start();
            let spec = line.split("  ").next().unwrap_or("");
            line.starts_with('-')
                && spec
                    .split(", ")
                    .any(|option| option.split([' ', '=', '<', '[']).next() == Some(flag))
        })
    }
}

#[test]
fn every_command_and_flag_the_documents_name_exists() {
    let mut help = Help::new();
    let mut checked = BTreeSet::new();
    for name in ["README.md", "docs/CLI.md"] {
        let text = document(name);
        let mut in_shell_block = false;
        for line in text.lines() {
            if line.starts_with("```") {
                in_shell_block = line == "```sh";
                continue;
            }
            // A shell line, its comment dropped, or a table row or sentence
            // whose first span is a `flashprof ...` command: its flags are
            // that command's own.
            let command_text: Vec<String> = if in_shell_block {
                let command = line.split(" #").next().unwrap_or("").trim();
                vec![command.to_string()]
            } else {
                code_spans(line)
                    .into_iter()
                    .filter(|span| span.starts_with("flashprof"))
                    .map(str::to_string)
                    .collect()
            };
            let Some(first) = command_text.first().filter(|c| c.starts_with("flashprof")) else {
                // A flag named alone in prose exists on some command (a
                // span that starts with another program, `cargo ...`, is
                // that program's).
                let alone = code_spans(line)
                    .into_iter()
                    .filter(|span| span.starts_with("--"));
                for flag in alone.flat_map(flags_in) {
                    let known = ["", "check", "compare", "grade", "calibrate", "bench"]
                        .iter()
                        .any(|command| help.lists(command, &flag));
                    assert!(known, "{name}: `{flag}` is no flag of any command:\n{line}");
                    checked.insert(flag);
                }
                continue;
            };
            let words: Vec<&str> = first.split_whitespace().collect();
            let command = subcommand_of(&words).unwrap_or_default();
            help.of(&command);
            let row_flags = if in_shell_block {
                flags_in(first)
            } else {
                code_spans(line).iter().flat_map(|s| flags_in(s)).collect()
            };
            for flag in row_flags {
                assert!(
                    help.lists(&command, &flag),
                    "{name}: `flashprof {command}` has no `{flag}`:\n{line}"
                );
                checked.insert(flag);
            }
            checked.insert(format!("flashprof {command}"));
        }
    }
    // The documents do name the everyday commands and flags, so the test
    // above has read them rather than nothing.
    for expected in [
        "flashprof check",
        "flashprof grade",
        "--lines",
        "--lab",
        "--json",
    ] {
        assert!(checked.contains(expected), "never checked {expected}");
    }
}

#[test]
fn every_shell_line_of_the_readme_parses() {
    let dir = tempfile::tempdir().expect("tempdir");
    let readme = document("README.md");
    let mut lines = 0;
    let mut in_shell_block = false;
    for line in readme.lines() {
        if line.starts_with("```") {
            in_shell_block = line == "```sh";
            continue;
        }
        let command = line.split(" #").next().unwrap_or("").trim();
        let Some(args) = in_shell_block
            .then(|| command.strip_prefix("flashprof"))
            .flatten()
        else {
            continue;
        };
        // With --help last, clap checks every command and flag before it,
        // each flag's value included, and then only prints the help.
        let mut args: Vec<&str> = args.split_whitespace().collect();
        args.push("--help");
        let run = flashprof(&args, dir.path());
        assert_eq!(run.status.code(), Some(0), "{command}: {}", text(&run));
        lines += 1;
    }
    assert!(lines >= 5, "only {lines} flashprof lines in the README");
}

#[test]
fn without_a_gpu_the_readme_says_what_check_prints() {
    let readme = document("README.md");
    let section = readme
        .split("## Without a GPU")
        .nth(1)
        .expect("a section for a machine without a GPU");
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::copy(
        checkout().join("kernels/flash-prefill/starter.cu"),
        dir.path().join("prefill.cu"),
    )
    .expect("copy the starter");
    let run = flashprof_without_gpu(&["check", "prefill.cu"], dir.path());
    let printed = text(&run);
    // "... and `check` exits with 5."
    assert!(section.contains("`check` exits with 5"), "{section}");
    assert_eq!(run.status.code(), Some(5), "{printed}");
    for words in ["NOT GRADED (no GPU)", "cases not run"] {
        assert!(section.contains(words), "the README does not say {words}");
        assert!(
            printed.contains(words),
            "check does not print {words}:\n{printed}"
        );
    }
}

#[test]
fn the_labs_the_readme_lists_are_the_labs_the_binary_hosts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = flashprof(&["labs"], dir.path());
    assert_eq!(run.status.code(), Some(0), "{}", text(&run));
    let hosted: BTreeSet<String> = String::from_utf8_lossy(&run.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next().map(str::to_string))
        .collect();
    let readme = document("README.md");
    let listed: BTreeSet<String> = readme
        .lines()
        .filter(|line| line.starts_with("| `"))
        .filter_map(|line| code_spans(line).first().map(|s| s.to_string()))
        .filter(|name| !name.starts_with("flashprof") && name.len() > 1)
        .collect();
    assert_eq!(
        listed, hosted,
        "the README's lab table against `flashprof labs`"
    );
}
