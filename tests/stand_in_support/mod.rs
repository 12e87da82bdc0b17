//! Shared by the tests that drive the STAND-IN worker (examples/stand_in_worker.rs).

use std::path::PathBuf;

use flashprof::app::worker_handle::WorkerCommand;
use flashprof::lab::definition::LabCase;
use flashprof::lab::flash_prefill::cases::CaseSpec;

/// Builds the stand-in once, for a run of one test file (`cargo test --test
/// ssh`), which builds no examples; a plain `cargo test` already did.
fn build_stand_in(profile_dir: &std::path::Path) {
    static BUILT: std::sync::Once = std::sync::Once::new();
    BUILT.call_once(|| {
        let mut cargo = std::process::Command::new(env!("CARGO"));
        cargo
            .args([
                "build",
                "--quiet",
                "--example",
                "stand_in_worker",
                "--manifest-path",
            ])
            .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"));
        if profile_dir
            .file_name()
            .is_some_and(|name| name == "release")
        {
            cargo.arg("--release");
        }
        let _ = cargo.status();
    });
}

/// The stand-in worker that `cargo test` builds as an example.
pub fn stand_in() -> WorkerCommand {
    // Integration tests live in target/<profile>/deps; examples in target/<profile>/examples.
    let exe = std::env::current_exe().expect("test executable path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target dir");
    let program: PathBuf = profile_dir.join("examples").join("stand_in_worker");
    if !program.exists() {
        build_stand_in(profile_dir);
    }
    assert!(
        program.exists(),
        "{} is missing: `cargo test` builds examples, run the tests through cargo",
        program.display()
    );
    WorkerCommand {
        program,
        args: Vec::new(),
        env: Vec::new(),
        remote: None,
    }
}

/// A small generated case whose name tells the stand-in how to behave.
pub fn case(name: &str) -> LabCase {
    let spec = CaseSpec {
        name: name.into(),
        summary: format!("stand-in case {name}"),
        chunk: 4,
        prefix: 2,
        plant: Vec::new(),
        scale: Vec::new(),
        tensors: None,
    };
    LabCase {
        name: spec.name.clone(),
        summary: spec.summary.clone(),
        recipe: serde_json::to_value(&spec).expect("plain data"),
    }
}
