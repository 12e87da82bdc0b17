//! A submission reached through a link: `check`, `bench` and `compare`
//! follow only the running user's (or root's) links in folders no one else
//! can write (docs/SECURITY.md), so a student's link cannot have the TA's
//! files compiled, printed or put in `--json` as hers.

mod cli_support;

use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;

use cli_support::{checkout, flashprof_without_gpu, text};

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

#[test]
fn a_link_in_a_folder_others_can_write_is_refused_by_check_bench_and_compare() {
    let dir = tempfile::tempdir().expect("tempdir");
    chmod(dir.path(), 0o755);
    let starter = checkout().join("kernels/flash-prefill/starter.cu");
    // The TA's private file, which compiles (a starter with a marker line).
    let private = dir.path().join("ta");
    std::fs::create_dir(&private).expect("mkdir");
    let secret = private.join("solution.cu");
    let text_of_secret = format!(
        "{}\n// TA-ONLY-MARKER\n",
        std::fs::read_to_string(&starter).expect("starter")
    );
    std::fs::write(&secret, &text_of_secret).expect("write");
    // A class folder every student can write, holding one student's link to it.
    let class = dir.path().join("class");
    std::fs::create_dir(&class).expect("mkdir");
    symlink(&secret, class.join("prefill.cu")).expect("symlink");
    chmod(&class, 0o777);
    std::fs::copy(&starter, dir.path().join("mine.cu")).expect("copy");
    for args in [
        vec!["check", "class/prefill.cu", "--json"],
        vec!["bench", "class/prefill.cu"],
        vec!["compare", "mine.cu", "class/prefill.cu"],
    ] {
        let run = flashprof_without_gpu(&args, dir.path());
        let shown = text(&run);
        assert_eq!(run.status.code(), Some(3), "{args:?}: {shown}");
        assert!(
            shown.contains(
                "class/prefill.cu is a link that is in a folder writable by others; only your \
                 own or root's links, in folders no one else can write, are followed"
            ),
            "{args:?}: {shown}"
        );
        assert!(!shown.contains("TA-ONLY-MARKER"), "{args:?}: {shown}");
    }
    // The same link in a folder only this user can write is this user's own: read.
    chmod(&class, 0o755);
    let run = flashprof_without_gpu(&["check", "class/prefill.cu"], dir.path());
    let shown = text(&run);
    assert!(!shown.contains("not read"), "{shown}");
    assert_ne!(run.status.code(), Some(3), "{shown}");
}
