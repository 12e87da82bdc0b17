//! The worker's sandbox, on this machine's real kernel. `flashprof
//! __sandbox-probe` confines itself exactly as a worker does (the same
//! `worker::sandbox::confine`) and then tries to read files: a file outside
//! what a worker may read is refused, the same read with the sandbox turned
//! off succeeds (so the test can fail), and a folder the caller names is
//! readable. The real worker is started too: its greeting must report the
//! whole sandbox, and NVRTC must still compile inside it.
//!
//! The probe is used rather than a compile that `#include`s the file,
//! because flashprof's include policy refuses such a source before NVRTC
//! could open it; the sandbox is the wall behind that policy, and this
//! tests the wall alone. The tests fail, never skip, where the kernel
//! cannot apply the sandbox: CI's kernel has Landlock. NVRTC must be on the
//! loader path, as `scripts/test.sh` arranges.

use std::time::Duration;

use flashprof::app::worker_handle::{WorkerCommand, WorkerHandle};
use flashprof::gpu::compile::Build;
use flashprof::lab::flash_prefill::FLASH_PREFILL;
use flashprof::protocol::{Event, LabId, Request, SandboxLevel};
use flashprof::worker::sandbox::{DISABLE_ENV, EXTRA_READ_ENV, TENSOR_FILES_ENV};

const SECRET: &str = "FLASHPROF_TEST_SECRET_3f9c1a";

fn worker(sandboxed: bool) -> WorkerHandle {
    let mut command = WorkerCommand {
        program: env!("CARGO_BIN_EXE_flashprof").into(),
        args: vec!["__worker".into()],
        env: vec![(flashprof::worker::GPU_ENV.into(), "none".into())],
        remote: None,
    };
    if !sandboxed {
        command.env.push((DISABLE_ENV.into(), "1".into()));
    }
    WorkerHandle::spawn(&command, Duration::from_secs(30)).expect("the worker starts")
}

/// What the probe printed, for `paths`, with `env` added.
fn probe(paths: &[&std::path::Path], env: &[(&str, &str)]) -> String {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_flashprof"))
        .arg("__sandbox-probe")
        .args(paths)
        .envs(env.iter().copied())
        .output()
        .expect("the probe runs");
    assert!(output.status.success(), "{output:?}");
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Compiles `source_text` and returns the whole answer as JSON text, with the worker's stderr.
fn compile(worker: &mut WorkerHandle, source_text: String) -> (Event, String) {
    let event = worker
        .request(
            &Request::Compile {
                lab: LabId::of(FLASH_PREFILL),
                source_path: "student.cu".into(),
                source_text,
                build: Build::Optimized,
                target_arch: None,
            },
            Duration::from_secs(60),
        )
        .expect("a compile answer");
    let json = serde_json::to_string(&event).expect("serialisable");
    (event, json)
}

fn secret_header() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("secret.h");
    // An undefined identifier: a compiler that reads the file names it in an error.
    std::fs::write(&path, format!("int leaked = {SECRET};\n")).expect("write secret");
    (dir, path)
}

#[test]
fn a_sandboxed_process_cannot_read_a_file_outside_its_libraries() {
    let (_dir, secret) = secret_header();
    let shown = probe(&[&secret], &[]);
    assert!(shown.contains("level: Full"), "{shown}");
    assert!(
        shown.contains(&format!("{}: refused:", secret.display())),
        "{shown}"
    );
    assert!(shown.contains("Permission denied"), "{shown}");
}

#[test]
fn without_the_sandbox_the_same_read_succeeds() {
    let (_dir, secret) = secret_header();
    let shown = probe(&[&secret], &[(DISABLE_ENV, "1")]);
    assert!(shown.contains("level: Disabled"), "{shown}");
    assert!(shown.contains("SANDBOX OFF"), "{shown}");
    assert!(
        shown.contains(&format!("{}: read ", secret.display())),
        "the control must read the file, or the sandboxed test proves nothing: {shown}"
    );
}

#[test]
fn the_real_worker_greets_with_the_whole_sandbox() {
    let worker = worker(true);
    let sandbox = worker
        .sandbox
        .clone()
        .expect("the greeting reports the sandbox");
    assert_eq!(
        sandbox.level,
        SandboxLevel::Full,
        "this kernel must enforce the whole sandbox: {}",
        sandbox.notice
    );
    worker.shutdown();
}

#[test]
fn the_sandboxed_worker_still_compiles_the_starter() {
    // NVRTC and its builtins library are opened lazily, after the sandbox.
    let mut worker = worker(true);
    let starter = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/kernels/flash-prefill/starter.cu"
    ))
    .expect("starter");
    let (event, json) = compile(&mut worker, starter);
    assert!(
        matches!(&event, Event::Compiled(outcome) if outcome.ok && outcome.resources.is_some()),
        "{json}"
    );
    worker.shutdown();
}

#[test]
fn a_folder_the_caller_names_is_readable_inside_the_sandbox() {
    // How cases that bring their own tensors reach the worker's reads.
    let (dir, secret) = secret_header();
    let folder = dir.path().canonicalize().expect("canonical");
    let shown = probe(
        &[&secret],
        &[(EXTRA_READ_ENV, folder.to_str().expect("utf-8 temp path"))],
    );
    assert!(shown.contains("level: Full"), "{shown}");
    assert!(
        shown.contains(&format!("{}: read ", secret.display())),
        "the named folder must be readable: {shown}"
    );
}

#[test]
fn an_attached_nvidia_tool_gets_its_own_folders_and_nothing_else() {
    // Nsight Compute and compute-sanitizer set CUDA_INJECTION64_PATH in the
    // process they attach to and keep a lock folder under /tmp/nvidia.
    let (_dir, secret) = secret_header();
    let shown = probe(
        &[&secret],
        &[("CUDA_INJECTION64_PATH", "/nonexistent/tool.so")],
    );
    assert!(shown.contains("level: Full"), "{shown}");
    assert!(shown.contains("an NVIDIA tool is attached"), "{shown}");
    assert!(shown.contains("/tmp/nvidia"), "{shown}");
    assert!(
        shown.contains(&format!("{}: refused:", secret.display())),
        "{shown}"
    );
}

#[test]
fn a_tensors_folder_opens_its_npy_files_and_nothing_else_of_it() {
    // A case names its tensors folder; the worker may read the regular
    // `.npy` files in it, not the folder: a case pointing at a folder of
    // private files (or `/`) must not widen what the worker reads.
    let (dir, secret) = secret_header();
    let tensors = dir.path().join("case");
    std::fs::create_dir(&tensors).expect("tensors folder");
    let q = tensors.join("q.npy");
    std::fs::write(&q, b"\x93NUMPY").expect("q.npy");
    let beside = tensors.join("notes.txt");
    std::fs::write(&beside, SECRET).expect("a file beside the tensors");
    // A name the `:`-separated grant list cannot carry is left out, and the
    // other files are still granted.
    std::fs::write(tensors.join("a:b.npy"), b"x").expect("a name with a colon");
    let linked = tensors.join("k.npy");
    std::os::unix::fs::symlink(&secret, &linked).expect("a link named like a tensor");
    let granted = tensor_grants(&tensors);
    let shown = probe(
        &[&q, &beside, &linked, &secret],
        &[(TENSOR_FILES_ENV, &granted)],
    );
    assert!(shown.contains("level: Full"), "{shown}");
    assert!(
        shown.contains(&format!("{}: read 6 bytes", q.display())),
        "{shown}"
    );
    for refused in [&beside, &linked, &secret] {
        assert!(
            shown.contains(&format!("{}: refused:", refused.display())),
            "{} must stay out of reach: {shown}",
            refused.display()
        );
    }
}

/// A worker command given the tensor files of `folder`.
fn reading_tensors_of(folder: &std::path::Path) -> WorkerCommand {
    WorkerCommand {
        program: env!("CARGO_BIN_EXE_flashprof").into(),
        args: vec!["__worker".into()],
        env: Vec::new(),
        remote: None,
    }
    .reading_tensors([folder.to_path_buf()])
}

/// The grants `reading_tensors` gives for the `.npy` files of `folder`.
fn tensor_grants(folder: &std::path::Path) -> String {
    reading_tensors_of(folder)
        .env
        .iter()
        .rev()
        .find(|(k, _)| k == TENSOR_FILES_ENV)
        .map(|(_, v)| v.to_str().expect("utf-8 temp path").to_owned())
        .expect("the tensor files are named to the sandbox")
}

#[test]
fn a_tensor_file_swapped_for_a_link_after_listing_grants_nothing() {
    // The caller lists the tensor files, then starts the worker, which
    // confines itself: a student who swaps the listed file (or a folder on
    // its path) for a link in between must not get the link's target
    // granted. The worker opens each grant with no link on its path.
    let (dir, secret) = secret_header();
    let tensors = dir.path().join("case");
    std::fs::create_dir(&tensors).expect("tensors folder");
    let q = tensors.join("q.npy");
    std::fs::write(&q, b"\x93NUMPY").expect("q.npy");
    let granted = tensor_grants(&tensors);

    // The file itself becomes a link to the secret.
    std::fs::remove_file(&q).expect("remove q.npy");
    std::os::unix::fs::symlink(&secret, &q).expect("q.npy as a link");
    let shown = probe(&[&q, &secret], &[(TENSOR_FILES_ENV, &granted)]);
    assert!(shown.contains("level: Full"), "{shown}");
    for refused in [&q, &secret] {
        assert!(
            shown.contains(&format!("{}: refused:", refused.display())),
            "{} must stay out of reach: {shown}",
            refused.display()
        );
    }

    // The folder becomes a link to another folder holding a `q.npy`.
    let private = dir.path().join("private");
    std::fs::create_dir(&private).expect("a private folder");
    let private_q = private.join("q.npy");
    std::fs::write(&private_q, SECRET).expect("a private q.npy");
    std::fs::remove_file(&q).expect("remove the link");
    std::fs::remove_dir(&tensors).expect("remove the folder");
    std::os::unix::fs::symlink(&private, &tensors).expect("the folder as a link");
    let shown = probe(&[&q, &private_q], &[(TENSOR_FILES_ENV, &granted)]);
    for refused in [&q, &private_q] {
        assert!(
            shown.contains(&format!("{}: refused:", refused.display())),
            "{} must stay out of reach: {shown}",
            refused.display()
        );
    }

    // Unswapped, the same grant reads the file: the refusals above are the
    // swap's, not a grant that never worked.
    std::fs::remove_file(&tensors).expect("remove the folder link");
    std::fs::create_dir(&tensors).expect("the folder again");
    std::fs::write(&q, b"\x93NUMPY").expect("q.npy again");
    let shown = probe(&[&q], &[(TENSOR_FILES_ENV, &granted)]);
    assert!(
        shown.contains(&format!("{}: read 6 bytes", q.display())),
        "{shown}"
    );
}

#[test]
fn a_tensors_folder_reached_through_a_link_others_could_replace_grants_nothing() {
    // A student who can write the folder holding a link on the way to the
    // tensors folder can point it at a folder of the TA's: the link is not
    // followed, and nothing of the folder it names is granted.
    use std::os::unix::fs::PermissionsExt;
    let (dir, _) = secret_header();
    let private = dir.path().join("private");
    std::fs::create_dir(&private).expect("the TA's folder");
    std::fs::write(private.join("q.npy"), SECRET).expect("the TA's q.npy");
    let open = dir.path().join("open");
    std::fs::create_dir(&open).expect("a folder anyone can write");
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    std::os::unix::fs::symlink(&private, open.join("case")).expect("the planted link");
    let command = reading_tensors_of(&open.join("case"));
    assert!(
        !command.env.iter().any(|(k, _)| k == TENSOR_FILES_ENV),
        "{:?}",
        command.env
    );
    // The same link in a folder only its owner writes is followed.
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let granted = tensor_grants(&open.join("case"));
    assert_eq!(granted, private.join("q.npy").display().to_string());
}
