//! The real worker (`flashprof __worker`) confines itself before it reads a
//! request: a student file that `#include`s a file outside what the worker
//! may read fails to compile, and the file's text appears nowhere in the
//! answer. The control runs the same request with the sandbox turned off and
//! shows that the worker would otherwise read it.
//!
//! These tests talk to the worker over the protocol directly (a caller-side
//! include filter must not be what stops the read), need no GPU (the worker
//! runs compile-only) and need NVRTC on the loader path, as `scripts/test.sh`
//! arranges. They fail, never skip, where the kernel cannot apply the
//! sandbox: CI's kernel has Landlock.

use std::time::Duration;

use flashprof::app::worker_handle::{WorkerCommand, WorkerHandle};
use flashprof::protocol::{Event, Request, SandboxLevel};
use flashprof::worker::sandbox::DISABLE_ENV;

const SECRET: &str = "FLASHPROF_TEST_SECRET_3f9c1a";

fn worker(sandboxed: bool) -> WorkerHandle {
    let mut command = WorkerCommand {
        program: env!("CARGO_BIN_EXE_flashprof").into(),
        args: vec!["__worker".into()],
        env: vec![(flashprof::worker::GPU_ENV.into(), "none".into())],
    };
    if !sandboxed {
        command.env.push((DISABLE_ENV.into(), "1".into()));
    }
    WorkerHandle::spawn(&command, Duration::from_secs(30)).expect("the worker starts")
}

/// A student file that pulls `header` in by absolute path (NVRTC opens it itself).
fn including(header: &std::path::Path) -> String {
    format!(
        "#include \"{}\"\n\
         extern \"C\" __global__ void attention_prefill(const float* q, const float* kCache,\n\
             const float* vCache, float* out, int chunkLen, int prefixLen) {{}}\n",
        header.display()
    )
}

/// Compiles `source_text` and returns the whole answer as JSON text, with the worker's stderr.
fn compile(worker: &mut WorkerHandle, source_text: String) -> (Event, String, String) {
    let event = worker
        .request(
            &Request::Compile {
                source_path: "student.cu".into(),
                source_text,
            },
            Duration::from_secs(60),
        )
        .expect("a compile answer");
    let json = serde_json::to_string(&event).expect("serialisable");
    (event, json, worker.stderr_tail().join("\n"))
}

fn secret_header() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("secret.h");
    // An undefined identifier: a compiler that reads the file names it in an error.
    std::fs::write(&path, format!("int leaked = {SECRET};\n")).expect("write secret");
    (dir, path)
}

#[test]
fn the_sandboxed_worker_cannot_include_a_file_outside_its_libraries() {
    let (_dir, header) = secret_header();
    let mut worker = worker(true);
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
    let (event, json, stderr) = compile(&mut worker, including(&header));
    let Event::Compiled(outcome) = event else {
        panic!("expected a compile outcome, got {json}");
    };
    assert!(!outcome.ok, "{json}");
    assert!(
        outcome.problem.is_none(),
        "NVRTC must load inside the sandbox (run through scripts/test.sh): {json}"
    );
    assert!(
        outcome
            .diagnostics
            .iter()
            .any(|d| d.message.contains("cannot open source file")
                && d.message.contains("Permission denied")),
        "{json}"
    );
    assert!(!json.contains(SECRET), "the secret leaked: {json}");
    assert!(
        !stderr.contains(SECRET),
        "the secret leaked to stderr: {stderr}"
    );
    worker.shutdown();
}

#[test]
fn without_the_sandbox_the_same_request_reads_the_file() {
    let (_dir, header) = secret_header();
    let mut worker = worker(false);
    let sandbox = worker
        .sandbox
        .clone()
        .expect("the greeting reports the sandbox");
    assert_eq!(sandbox.level, SandboxLevel::Disabled);
    assert!(sandbox.notice.contains("SANDBOX OFF"), "{}", sandbox.notice);
    let (_, json, _) = compile(&mut worker, including(&header));
    // The stderr reader is a thread of its own: give it a moment on a busy machine.
    let said_so = (0..200).any(|_| {
        let seen = worker
            .stderr_tail()
            .iter()
            .any(|l| l.contains("SANDBOX OFF"));
        if !seen {
            std::thread::sleep(Duration::from_millis(10));
        }
        seen
    });
    assert!(
        said_so,
        "the worker says so on stderr: {:?}",
        worker.stderr_tail()
    );
    assert!(
        json.contains(SECRET),
        "the control must read the file, or the sandboxed test proves nothing: {json}"
    );
    worker.shutdown();
}

#[test]
fn the_sandboxed_worker_still_compiles_the_starter() {
    // NVRTC and its builtins library are opened lazily, after the sandbox.
    let mut worker = worker(true);
    let starter =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/kernels/starter.cu"))
            .expect("starter");
    let (event, json, _) = compile(&mut worker, starter);
    assert!(
        matches!(&event, Event::Compiled(outcome) if outcome.ok && outcome.resources.is_some()),
        "{json}"
    );
    worker.shutdown();
}

#[test]
fn a_folder_the_caller_names_is_readable_inside_the_sandbox() {
    // How cases that bring their own tensors reach the worker's reads.
    let (dir, header) = secret_header();
    let command = WorkerCommand {
        program: env!("CARGO_BIN_EXE_flashprof").into(),
        args: vec!["__worker".into()],
        env: vec![(flashprof::worker::GPU_ENV.into(), "none".into())],
    }
    .reading([dir.path().to_path_buf(), "/no/such/folder".into()]);
    let mut worker = WorkerHandle::spawn(&command, Duration::from_secs(30)).expect("spawn");
    assert_eq!(
        worker.sandbox.as_ref().map(|s| s.level),
        Some(SandboxLevel::Full)
    );
    let (_, json, _) = compile(&mut worker, including(&header));
    assert!(
        json.contains(SECRET),
        "the named folder must be readable: {json}"
    );
    worker.shutdown();
}
