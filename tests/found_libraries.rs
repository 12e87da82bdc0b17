//! NVRTC found where people have it: a plain `flashprof` (no
//! `LD_LIBRARY_PATH`) compiles when the nvidia-cuda-nvrtc wheel sits in a
//! Python site-packages, which also means NVRTC's builtins library (opened
//! by name at the first compile) and the sandboxed worker both find it.

mod cli_support;
use cli_support::text;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const STARTER: &str = include_str!("../kernels/flash-prefill/starter.cu");

/// The folder of a real `libnvrtc.so.13` with its builtins (the wheel that
/// scripts/test.sh installs), from `LD_LIBRARY_PATH` or `FLASHPROF_CUDA_LIB`.
/// Without it these tests cannot say anything, so they fail rather than pass unseen.
fn real_nvrtc_folder() -> PathBuf {
    let mut folders: Vec<PathBuf> = std::env::var_os("LD_LIBRARY_PATH")
        .map(|v| std::env::split_paths(&v).collect())
        .unwrap_or_default();
    folders.extend(std::env::var_os("FLASHPROF_CUDA_LIB").map(PathBuf::from));
    folders
        .into_iter()
        .find(|f| {
            f.join("libnvrtc.so.13").is_file() && f.join("libnvrtc-builtins.so.13.0").is_file()
        })
        .expect("no libnvrtc.so.13 on LD_LIBRARY_PATH: run the tests through scripts/test.sh")
}

/// A site-packages laid out as pip lays out the 13.x wheels, linking to the real files.
fn site_packages_with_wheels(real: &Path, root: &Path) -> PathBuf {
    let site = root.join("lib/python3.12/site-packages");
    let lib = site.join("nvidia/cu13/lib");
    std::fs::create_dir_all(&lib).expect("mkdir");
    for entry in std::fs::read_dir(real).expect("read wheel folder") {
        let entry = entry.expect("entry");
        std::os::unix::fs::symlink(entry.path(), lib.join(entry.file_name())).expect("symlink");
    }
    site
}

/// `flashprof ARGS` with no loader path and no CUDA variables, Python's path
/// pointing at `site`, and a home without Python packages.
fn plain_flashprof(args: &[&str], cwd: &Path, site: &Path, home: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_flashprof"))
        .args(args)
        .current_dir(cwd)
        .env_remove("LD_LIBRARY_PATH")
        .env_remove("FLASHPROF_CUDA_LIB")
        .env_remove("FLASHPROF_CUPTI_PATH")
        .env_remove("CUDA_HOME")
        .env_remove("CUDA_PATH")
        .env("PYTHONPATH", site)
        .env("HOME", home)
        .output()
        .expect("flashprof runs")
}

#[test]
fn a_wheel_in_site_packages_compiles_without_ld_library_path() {
    let real = real_nvrtc_folder();
    let root = tempfile::tempdir().expect("tempdir");
    let site = site_packages_with_wheels(&real, root.path());
    let work = root.path().join("work");
    let home = root.path().join("home");
    std::fs::create_dir_all(&work).expect("mkdir");
    std::fs::create_dir_all(&home).expect("mkdir");
    std::fs::write(work.join("k.cu"), STARTER).expect("write");

    let run = plain_flashprof(
        &["check", "k.cu", "--json", "--no-timing"],
        &work,
        &site,
        &home,
    );
    let value: serde_json::Value = serde_json::from_slice(&run.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", text(&run)));
    assert_eq!(value["compile"]["ok"], true, "{}", text(&run));
    assert!(
        matches!(run.status.code(), Some(0) | Some(5)),
        "{}",
        text(&run)
    );

    let doctor = plain_flashprof(&["doctor", "--json"], &work, &site, &home);
    assert_eq!(doctor.status.code(), Some(0), "{}", text(&doctor));
    let value: serde_json::Value = serde_json::from_slice(&doctor.stdout).expect("JSON");
    assert_eq!(value["schema"], "flashprof.doctor/1");
    assert_eq!(value["can_compile"], true);
    let nvrtc = value["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["item"] == "nvrtc")
        .expect("an nvrtc finding");
    let found = nvrtc["found"].as_str().unwrap();
    assert!(found.starts_with("NVRTC 13."), "{found}");
    assert!(found.contains("libnvrtc.so.13"), "{found}");
}

#[test]
fn doctor_prints_every_item_in_words() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = cli_support::flashprof(&["doctor"], dir.path());
    assert!(
        matches!(run.status.code(), Some(0) | Some(6)),
        "{}",
        text(&run)
    );
    let shown = text(&run);
    for item in [
        "driver",
        "gpu",
        "nvrtc",
        "cupti",
        "compute_sanitizer",
        "profiling",
    ] {
        assert!(shown.contains(item), "{item}: {shown}");
    }
    if run.status.code() == Some(6) {
        assert!(shown.contains("pip install --user"), "{shown}");
    }
}

/// A shared library whose constructor writes `marker`, built with gcc (which
/// any machine that links Rust programs has).
fn planted_library(out: &Path, marker: &Path) {
    let source = out.with_extension("c");
    std::fs::write(
        &source,
        format!(
            "#include <stdio.h>\n__attribute__((constructor)) static void planted(void) {{\n  \
             FILE *f = fopen(\"{}\", \"w\"); if (f) {{ fputs(\"ran\", f); fclose(f); }}\n}}\n",
            marker.display()
        ),
    )
    .expect("write");
    let built = Command::new("gcc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(out)
        .arg(&source)
        .output();
    match built {
        Ok(done) if done.status.success() => {}
        other => panic!("gcc could not build a shared library: {other:?}"),
    }
}

#[test]
fn doctor_inside_a_students_folder_loads_no_library_planted_around_it() {
    use std::os::unix::fs::PermissionsExt;
    let root = tempfile::tempdir().expect("tempdir");
    let marker = root.path().join("constructor-ran");
    // A class folder the TA works in, with a student's wheels above the submission.
    let planted = root.path().join("class/.cuda-wheels/nvidia/cu13/lib");
    std::fs::create_dir_all(&planted).expect("mkdir");
    planted_library(&planted.join("libnvrtc.so.13"), &marker);
    std::fs::copy(planted.join("libnvrtc.so.13"), planted.join("libcuda.so.1")).expect("copy");
    std::fs::copy(
        planted.join("libnvrtc.so.13"),
        planted.join("libcupti.so.13"),
    )
    .expect("copy");
    let alice = root.path().join("class/alice");
    std::fs::create_dir_all(&alice).expect("mkdir");
    // A folder named to flashprof that others can write, holding the same library.
    let shared = root.path().join("shared/lib");
    std::fs::create_dir_all(&shared).expect("mkdir");
    std::fs::copy(
        planted.join("libnvrtc.so.13"),
        shared.join("libnvrtc.so.13"),
    )
    .expect("copy");
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o775)).expect("chmod");
    let home = root.path().join("home");
    std::fs::create_dir_all(&home).expect("mkdir");

    for cwd in [&alice, &root.path().join("class")] {
        let run = Command::new(env!("CARGO_BIN_EXE_flashprof"))
            .arg("doctor")
            .current_dir(cwd)
            .env_remove("LD_LIBRARY_PATH")
            .env("FLASHPROF_CUDA_LIB", &shared)
            .env_remove("FLASHPROF_CUPTI_PATH")
            .env_remove("CUDA_HOME")
            .env_remove("CUDA_PATH")
            .env_remove("PYTHONPATH")
            .env("HOME", &home)
            .output()
            .expect("flashprof runs");
        let shown = text(&run);
        assert!(
            !marker.exists(),
            "a planted library's constructor ran in the TA's process: {shown}"
        );
        assert!(
            !shown.contains(&planted.display().to_string()),
            "the planted wheels were looked at: {shown}"
        );
        let refused = format!(
            "refused {} (via $FLASHPROF_CUDA_LIB): {}: writable by group",
            shared.join("libnvrtc.so.13").display(),
            shared.display()
        );
        assert!(shown.contains(&refused), "{refused}: {shown}");
    }
}
