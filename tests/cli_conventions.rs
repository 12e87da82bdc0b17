//! The command line's conventions: shell completions and a manual page made
//! from the CLI definition, short flags for the common options, the remote
//! flags under a heading of their own (no GPU needed).

mod cli_support;
use cli_support::{flashprof, text};

#[test]
fn completions_for_each_shell_know_the_commands_and_their_flags() {
    let dir = tempfile::tempdir().expect("tempdir");
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let run = flashprof(&["completions", shell], dir.path());
        assert_eq!(run.status.code(), Some(0), "{shell}: {}", text(&run));
        let script = String::from_utf8_lossy(&run.stdout);
        for word in ["check", "grade", "fetch-cuda", "gpu-host", "json"] {
            assert!(script.contains(word), "{shell} completes no `{word}`");
        }
        // The commands flashprof starts itself are no one's to type.
        for hidden in ["__worker", "__sandbox-probe"] {
            assert!(!script.contains(hidden), "{shell} offers `{hidden}`");
        }
    }
    let run = flashprof(&["completions", "tcsh"], dir.path());
    assert_eq!(run.status.code(), Some(2), "{}", text(&run));
}

#[test]
fn the_manual_page_is_roff_of_every_command() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = flashprof(&["man"], dir.path());
    assert_eq!(run.status.code(), Some(0), "{}", text(&run));
    let page = String::from_utf8_lossy(&run.stdout);
    assert!(page.contains(".TH flashprof 1"), "{page}");
    for section in [".SH NAME", ".SH SYNOPSIS", ".SH OPTIONS", ".SH SUBCOMMANDS"] {
        assert!(page.contains(section), "no {section}");
    }
    for command in ["check", "compare", "grade", "doctor"] {
        assert!(
            page.contains(&format!("flashprof\\-{command}")),
            "no {command}"
        );
    }
}

#[test]
fn the_common_options_have_short_flags() {
    let dir = tempfile::tempdir().expect("tempdir");
    // -j: a refusal is a JSON document, as with --json.
    let run = flashprof(&["check", "-j", "nosuch.cu"], dir.path());
    assert_eq!(run.status.code(), Some(3), "{}", text(&run));
    let document: serde_json::Value =
        serde_json::from_slice(&run.stdout).expect("a JSON document on stdout");
    assert_eq!(document["schema"], "flashprof.error/1", "{document}");
    // -l names the lab, -s the seed: a bad value of each is refused as such.
    std::fs::write(dir.path().join("x.cu"), "// a kernel\n").expect("write");
    let run = flashprof(&["check", "-l", "no-such-lab", "x.cu"], dir.path());
    assert_eq!(run.status.code(), Some(2), "{}", text(&run));
    assert!(text(&run).contains("no-such-lab"), "{}", text(&run));
    let run = flashprof(&["check", "-s", "seven", "x.cu"], dir.path());
    assert_eq!(run.status.code(), Some(2), "{}", text(&run));
    assert!(text(&run).contains("--seed"), "{}", text(&run));
}

#[test]
fn the_remote_flags_stand_under_their_own_heading() {
    let dir = tempfile::tempdir().expect("tempdir");
    for command in ["check", "compare", "grade"] {
        let run = flashprof(&[command, "--help"], dir.path());
        assert_eq!(run.status.code(), Some(0), "{}", text(&run));
        let help = String::from_utf8_lossy(&run.stdout);
        let (before, remote) = help
            .split_once("Remote GPU:")
            .unwrap_or_else(|| panic!("{command}: no Remote GPU heading\n{help}"));
        for flag in ["--gpu-host <", "--gpu-slurm <"] {
            assert!(remote.contains(flag), "{command}: {flag} not under it");
            assert!(!before.contains(flag), "{command}: {flag} before it");
        }
        assert!(!remote.contains("--seed"), "{command}: --seed under it");
    }
}

#[test]
fn doctor_says_unknown_for_what_it_cannot_tell_and_colours_only_when_asked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = flashprof(&["doctor", "--json"], dir.path());
    let document: serde_json::Value = serde_json::from_slice(&run.stdout).expect("JSON");
    let profiling = document["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .find(|f| f["item"] == "profiling")
        .expect("a profiling finding");
    // Without an NVIDIA kernel driver the permission cannot be read: not missing, unknown.
    let driverless = !std::path::Path::new("/proc/driver/nvidia/params").exists();
    assert_eq!(profiling["state"] == "unknown", driverless, "{profiling}");
    for finding in document["findings"].as_array().expect("findings") {
        let state = finding["state"].as_str().expect("a state");
        assert_eq!(finding["ok"] == true, state == "ok", "{finding}");
    }
    let plain = flashprof(&["doctor", "--color", "never"], dir.path());
    let plain = String::from_utf8_lossy(&plain.stdout);
    assert!(!plain.contains('\u{1b}'), "{plain}");
    if driverless {
        assert!(plain.contains("unknown profiling"), "{plain}");
    }
    let coloured = flashprof(&["doctor", "--color", "always"], dir.path());
    let coloured = String::from_utf8_lossy(&coloured.stdout);
    assert!(coloured.contains("\u{1b}["), "{coloured}");
}
