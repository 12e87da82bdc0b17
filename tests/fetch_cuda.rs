//! `flashprof fetch-cuda` without the network: a PATH with no python3, and a
//! stand-in python3 whose pip fails as pip fails offline, or "installs" one
//! file as pip would under a umask of 002.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod cli_support;
use cli_support::text;

/// `flashprof fetch-cuda` with `path` as PATH and `home` as the home (and so the cache).
fn fetch_cuda(path: &str, home: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_flashprof"))
        .arg("fetch-cuda")
        .current_dir(home)
        .env("PATH", path)
        .env("HOME", home)
        .env_remove("XDG_CACHE_HOME")
        .output()
        .expect("flashprof runs")
}

/// A folder holding a `python3` that answers `-m pip --version` and runs
/// `install_body` (sh, `$target` set to the `--target` folder) for `-m pip install`.
fn stand_in_python(root: &Path, install_body: &str) -> PathBuf {
    let bin = root.join("bin");
    std::fs::create_dir_all(&bin).expect("mkdir");
    let script = format!(
        "#!/bin/sh\n\
         if [ \"$3\" = \"--version\" ]; then echo 'pip 0 (stand-in)'; exit 0; fi\n\
         target=''; previous=''\n\
         for arg in \"$@\"; do [ \"$previous\" = --target ] && target=\"$arg\"; previous=\"$arg\"; done\n\
         echo 'Collecting nvidia-cuda-nvrtc==13.0.88'\n\
         {install_body}\n"
    );
    let python = bin.join("python3");
    std::fs::write(&python, script).expect("write");
    std::fs::set_permissions(&python, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    bin
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).expect("stat").permissions().mode() & 0o777
}

#[test]
fn without_python3_it_says_what_is_missing_and_installs_nothing() {
    let home = tempfile::tempdir().expect("tempdir");
    let empty = home.path().join("empty-bin");
    std::fs::create_dir(&empty).expect("mkdir");
    let run = fetch_cuda(empty.to_str().expect("utf-8"), home.path());
    let shown = text(&run);
    assert_eq!(run.status.code(), Some(6), "{shown}");
    assert!(
        shown.contains("flashprof fetch-cuda: python3 was not found on PATH"),
        "{shown}"
    );
    assert!(shown.contains("sudo apt install python3-pip"), "{shown}");
    assert!(
        shown.contains(
            "inside a virtualenv that is active when flashprof runs: pip install 'nvidia-cuda-nvrtc==13.0.88'"
        ),
        "{shown}"
    );
    // Only flashprof's private folder, where pip would have run.
    assert!(
        !home.path().join(".cache/flashprof/cuda-13.0").exists(),
        "nothing was installed"
    );
}

#[test]
fn a_pip_that_cannot_reach_its_index_is_reported_and_leaves_no_partial_folder() {
    let home = tempfile::tempdir().expect("tempdir");
    let bin = stand_in_python(
        home.path(),
        "mkdir -p \"$target/nvidia\"\n\
         echo 'ERROR: Could not find a version that satisfies the requirement nvidia-cuda-nvrtc==13.0.88 (from versions: none)' >&2\n\
         echo 'ERROR: No matching distribution found for nvidia-cuda-nvrtc==13.0.88' >&2\n\
         exit 1",
    );
    let path = format!("{}:/usr/bin:/bin", bin.display());
    let run = fetch_cuda(&path, home.path());
    let shown = text(&run);
    assert_eq!(run.status.code(), Some(6), "{shown}");
    // pip's lines are shown as they come, then what went wrong.
    assert!(
        shown.contains("  Collecting nvidia-cuda-nvrtc==13.0.88"),
        "{shown}"
    );
    assert!(
        shown.contains("pip could not install NVIDIA's wheels (exit status: 1); it said: ERROR: No matching distribution found"),
        "{shown}"
    );
    assert!(shown.contains("is this machine online"), "{shown}");
    let flashprof = home.path().join(".cache/flashprof");
    assert_eq!(mode(&flashprof), 0o700);
    let left: Vec<_> = std::fs::read_dir(&flashprof).expect("read").collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_fetch_lands_private_in_the_cache_where_doctor_looks() {
    let home = tempfile::tempdir().expect("tempdir");
    let bin = stand_in_python(
        home.path(),
        "umask 002\n\
         mkdir -p \"$target/nvidia/cu13/lib\"\n\
         : > \"$target/nvidia/cu13/lib/libnvrtc.so.13\"\n\
         echo 'Successfully installed nvidia-cuda-nvrtc-13.0.88'",
    );
    let path = format!("{}:/usr/bin:/bin", bin.display());
    let run = fetch_cuda(&path, home.path());
    let shown = text(&run);
    let folder = home.path().join(".cache/flashprof/cuda-13.0");
    assert!(
        shown.contains(&format!("fetched into {}", folder.display())),
        "{shown}"
    );
    // What doctor says of the libraries follows (its NVRTC line at least).
    assert!(shown.contains(" nvrtc "), "{shown}");
    let lib = folder.join("nvidia/cu13/lib");
    assert_eq!(mode(&lib.join("libnvrtc.so.13")), 0o644, "no group write");
    assert_eq!(mode(&lib), 0o755);
    assert_eq!(mode(&home.path().join(".cache/flashprof")), 0o700);
    let beside: Vec<_> = std::fs::read_dir(home.path().join(".cache/flashprof"))
        .expect("read")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(beside, ["cuda-13.0"], "no partial folder left");
    // The library search now looks there, and says so by name.
    let doctor = Command::new(env!("CARGO_BIN_EXE_flashprof"))
        .arg("doctor")
        .env("HOME", home.path())
        .env_remove("XDG_CACHE_HOME")
        .output()
        .expect("doctor runs");
    let said = text(&doctor);
    assert!(
        said.contains(&format!(
            "{} (flashprof fetch-cuda's folder)",
            lib.display()
        )),
        "{said}"
    );
}

/// The TA runs `fetch-cuda` (or presses `f`) standing in a student's folder
/// that holds a `pip/` package and a `json.py`, with the real python3 and
/// pip: pip runs in flashprof's private folder, so neither is imported.
/// pip is kept off the network (no index) and so fails; what matters is
/// that nothing of the student's ran, in the version check or the install.
#[test]
fn a_student_s_pip_package_and_json_py_in_the_working_folder_never_run() {
    let home = tempfile::tempdir().expect("tempdir");
    let student = tempfile::tempdir().expect("tempdir");
    let marker = home.path().join("student-code-ran");
    let plant = format!(
        "open({:?}, 'a').write(__name__ + '\\n')\n",
        marker.display().to_string()
    );
    let package = student.path().join("pip");
    std::fs::create_dir(&package).expect("mkdir");
    for file in ["__init__.py", "__main__.py"] {
        std::fs::write(package.join(file), &plant).expect("plant pip");
    }
    std::fs::write(student.path().join("json.py"), &plant).expect("plant json");
    let run = Command::new(env!("CARGO_BIN_EXE_flashprof"))
        .arg("fetch-cuda")
        .current_dir(student.path())
        .env("HOME", home.path())
        .env_remove("XDG_CACHE_HOME")
        .env("PIP_NO_INDEX", "1")
        .env_remove("PIP_FIND_LINKS")
        .env("PIP_CONFIG_FILE", "/dev/null")
        .output()
        .expect("flashprof runs");
    let shown = text(&run);
    assert!(
        !marker.exists(),
        "the student's code ran as the TA: {:?}\n{shown}",
        std::fs::read_to_string(&marker)
    );
    // Offline (or without pip) the fetch fails, and says so.
    assert_eq!(run.status.code(), Some(6), "{shown}");
    assert!(
        !home.path().join(".cache/flashprof/cuda-13.0").exists(),
        "nothing was installed"
    );
}
