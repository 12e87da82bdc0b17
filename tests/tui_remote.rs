//! The TUI with a remote worker (docs/REMOTE.md): the header names the node
//! and the Slurm job, and a run cut short by the link or an ended
//! allocation says so in the footer, with how to ask again.

mod tui_support;

use flashprof::outcome::{CheckReport, CheckStopped, LinkLoss, LinkLost, Progress};
use flashprof::protocol::CaseStatus;
use flashprof::tui::model::Model;
use flashprof::tui::msg::{Msg, RunId};
use flashprof::tui::update::update;
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

/// A report whose cases from the fourth on a failed link left unrun, as
/// the engine marks it: the cases' words and the typed loss.
fn cut_short(loss: LinkLoss, reason: &str) -> CheckReport {
    let mut report = all_pass(1.0, 40);
    for case in report.cases.iter_mut().skip(3) {
        case.status = CaseStatus::NotRun;
        case.diagnosis = reason.into();
    }
    report.link_lost = Some(LinkLost {
        loss,
        message: reason.into(),
    });
    report
}

#[test]
fn an_ended_allocation_is_said_and_asked_again() {
    let mut model = fresh();
    let reason = "not run: no Slurm allocation (srun --jobid=4242 (gpu17, job 4242)): job 4242 is TIMEOUT (not the kernel's fault)";
    complete(&mut model, "v1", cut_short(LinkLoss::Allocation, reason));
    let notice = model.notice.clone().expect("a notice");
    assert!(notice.starts_with(reason), "{notice}");
    assert!(
        notice.ends_with("-- r (or the next save) asks Slurm for a new allocation"),
        "{notice}"
    );
}

#[test]
fn the_hint_follows_how_the_link_failed_not_its_words() {
    // Words that name Slurm on a dropped ssh connection: the hint is ssh's.
    let reason = "not run: no connection to the GPU node (ssh gpu17): no Slurm allocation here";
    let mut model = fresh();
    complete(&mut model, "v1", cut_short(LinkLoss::Connection, reason));
    let notice = model.notice.clone().expect("a notice");
    assert!(
        notice.ends_with("-- r (or the next save) connects again"),
        "{notice}"
    );

    // The same words in cases no link left unrun (a worker's own reason,
    // which can quote a student's file) add no hint at all.
    let mut report = cut_short(LinkLoss::Allocation, reason);
    report.link_lost = None;
    let mut model = fresh();
    complete(&mut model, "v1", report);
    assert_eq!(model.notice, None);
}

#[test]
fn a_check_the_link_stopped_says_how_to_ask_again() {
    let mut model = fresh();
    let run = save(&mut model, "v1").expect("run");
    let stopped = CheckStopped {
        message: "no Slurm allocation (srun): none was granted".into(),
        link: Some(LinkLoss::Allocation),
    };
    update(
        &mut model,
        Msg::RunFinished {
            run,
            result: Err(stopped),
        },
    );
    assert_eq!(
        model.notice.as_deref(),
        Some("the check could not run: no Slurm allocation (srun): none was granted -- r (or the next save) asks Slurm for a new allocation")
    );

    // A stop that is no link's fault is said as it is.
    let run = save(&mut model, "v2").expect("run");
    update(
        &mut model,
        Msg::RunFinished {
            run,
            result: Err(CheckStopped::new(
                "could not start the worker: no Slurm allocation",
            )),
        },
    );
    assert_eq!(
        model.notice.as_deref(),
        Some("the check could not run: could not start the worker: no Slurm allocation")
    );
}

#[test]
fn a_check_that_could_not_run_says_why_in_the_header() {
    let mut model = fresh();
    let run = save(&mut model, "v1").expect("run");
    let reason =
        "no connection to the GPU node (ssh gpu17): Connection timed out during banner exchange";
    update(
        &mut model,
        Msg::RunFinished {
            run,
            result: Err(CheckStopped {
                message: reason.into(),
                link: Some(LinkLoss::Connection),
            }),
        },
    );
    let text = screen(&model, 140, 40);
    let header = text.lines().next().unwrap_or_default();
    assert!(header.contains(&format!("NOT CHECKED: {reason}")), "{text}");

    // The next check that finishes takes the header back.
    complete(&mut model, "v2", all_pass(1.0, 40));
    assert_eq!(model.stopped, None);
    let text = screen(&model, 140, 40);
    assert!(!text.contains("NOT CHECKED"), "{text}");
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
