//! The TUI with a remote worker (docs/REMOTE.md): the header names the node
//! and the Slurm job, and a run cut short by the link or an ended
//! allocation says so in the footer, with how to ask again.

mod tui_support;

use flashprof::outcome::Progress;
use flashprof::protocol::CaseStatus;
use flashprof::tui::model::Model;
use flashprof::tui::msg::RunId;
use tui_support::drive::{complete, fresh, progress, save, screen};
use tui_support::*;

/// A worker on an H200 at `place` has greeted run `run`.
fn started_on(model: &mut Model, run: RunId, place: &str) {
    progress(
        model,
        run,
        Progress::WorkerStarted {
            gpu: Ok(h200()),
            start_ms: 300.0,
            place: Some(place.into()),
        },
    );
}

#[test]
fn the_header_names_the_node_and_the_job() {
    let mut model = fresh();
    let run = save(&mut model, "v1").expect("run");
    started_on(&mut model, run, "gpu17, job 4242");
    let text = screen(&model, 120, 40);
    assert!(text.contains("on gpu17, job 4242"), "{text}");
}

#[test]
fn an_ended_allocation_is_said_and_asked_again() {
    let mut model = fresh();
    let mut report = all_pass(1.0, 40);
    let reason = "not run: no Slurm allocation (srun --jobid=4242 (gpu17, job 4242)): job 4242 is TIMEOUT (not the kernel's fault)";
    for case in report.cases.iter_mut().skip(3) {
        case.status = CaseStatus::NotRun;
        case.diagnosis = reason.into();
    }
    complete(&mut model, "v1", report);
    let notice = model.notice.clone().expect("a notice");
    assert!(notice.contains("no Slurm allocation"), "{notice}");
    assert!(
        notice.contains("asks Slurm for a new allocation"),
        "{notice}"
    );
}

#[test]
fn the_header_shows_what_the_link_adds() {
    let mut model = fresh();
    let run = save(&mut model, "v1").expect("run");
    started_on(&mut model, run, "alice@gpu-node");
    progress(
        &mut model,
        run,
        Progress::LinkMeasured {
            transport: "ssh",
            added_ms: 12.4,
        },
    );
    let text = screen(&model, 120, 40);
    let header = text.lines().next().unwrap_or_default();
    assert!(header.contains("on alice@gpu-node, ssh 12 ms"), "{text}");
}
