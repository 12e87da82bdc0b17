//! Shared by the tests that drive the STAND-IN worker (examples/stand_in_worker.rs).

use std::path::PathBuf;

use flashprof::app::worker_handle::WorkerCommand;
use flashprof::lab::definition::LabCase;
use flashprof::lab::flash_prefill::cases::CaseSpec;

/// The stand-in worker that `cargo test` builds as an example.
pub fn stand_in() -> WorkerCommand {
    // Integration tests live in target/<profile>/deps; examples in target/<profile>/examples.
    let exe = std::env::current_exe().expect("test executable path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target dir");
    let program: PathBuf = profile_dir.join("examples").join("stand_in_worker");
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
