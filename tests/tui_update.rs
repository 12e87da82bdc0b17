//! `update` fed message sequences: the model and the effects it returns.

mod tui_support;

use std::time::Duration;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseButton, MouseEvent, MouseEventKind};
use flashprof::app::history::{source_hash, RestoreTarget};
use flashprof::outcome::{CheckStopped, Progress};
use flashprof::tui::model::{Completed, Overlay, Replay};
use flashprof::tui::msg::{Effect, Msg};
use flashprof::tui::update::{show_replay_position, update};
use flashprof::tui::view::layout::Areas;
use tui_support::drive::{complete, finish, fresh, key, progress, save, screen};
use tui_support::*;

#[test]
fn saves_during_a_run_queue_exactly_one_rerun_of_the_newest_text() {
    let mut model = fresh();
    let first = save(&mut model, "v1").expect("idle: starts at once");
    assert_eq!(save(&mut model, "v2"), None);
    assert_eq!(save(&mut model, "v3"), None);
    assert_eq!(model.queued.as_deref(), Some("v3"));
    let effects = finish(&mut model, first, all_pass(1.5, 40));
    let starts: Vec<&Effect> = effects
        .iter()
        .filter(|e| matches!(e, Effect::StartRun { .. }))
        .collect();
    assert_eq!(starts.len(), 1, "{effects:?}");
    assert!(
        matches!(starts[0], Effect::StartRun { source, run } if source == "v3" && *run != first)
    );
    assert!(effects
        .iter()
        .any(|e| matches!(e, Effect::RecordRun { source, .. } if source == "v1")));
    assert_eq!(model.queued, None);
    assert_eq!(model.last.as_ref().map(|c| c.source.as_str()), Some("v1"));
    assert!(model.last_is_stale(), "v3 is being checked");
}

#[test]
fn a_save_during_a_quick_first_check_stops_its_stale_build_and_the_newest_text_runs_next() {
    let mut model = fresh();
    let first = save(&mut model, "v1").expect("idle: starts at once");
    progress(&mut model, first, Progress::QuickBuilt(compiled(12)));
    let effects = update(&mut model, Msg::FileChanged(b"v2".to_vec()));
    assert_eq!(effects, vec![Effect::SupersedeRun(first)]);
    let effects = update(&mut model, Msg::FileChanged(b"v3".to_vec()));
    assert_eq!(effects, vec![Effect::SupersedeRun(first)]);
    // The engine stops the stale check: nothing is recorded, the newest text starts.
    let effects = update(&mut model, Msg::RunSuperseded(first));
    assert_eq!(effects.len(), 1, "{effects:?}");
    assert!(
        matches!(&effects[0], Effect::StartRun { source, run } if source == "v3" && *run != first)
    );
    assert_eq!(model.queued, None);
    assert!(model.last.is_none(), "a stopped check leaves no result");
    // A late word about the stopped check changes nothing.
    assert!(update(&mut model, Msg::RunSuperseded(first)).is_empty());
}

#[test]
fn builds_that_disagree_are_named_in_the_footer() {
    use flashprof::gpu::compile::QuickBuild;
    use flashprof::outcome::builds::{BuildDifference, QuickBuildReport};
    use flashprof::protocol::CaseStatus;
    let mut model = fresh();
    let run = save(&mut model, "v1").expect("run");
    let mut report = all_pass(1.0, 40);
    report.quick_build = Some(QuickBuildReport {
        build: QuickBuild::FastCompile,
        compile_ms: 40.0,
        first_verdict_ms: Some(60.0),
        last_verdict_ms: Some(120.0),
        passed: 14,
        ran: 14,
        differences: vec![BuildDifference {
            case: "chunk-of-17".into(),
            quick: CaseStatus::Pass,
            optimized: CaseStatus::Fail,
            finding: Some("NaN or Inf in the output only in the optimized build: ...".into()),
        }],
        builder_problem: None,
    });
    finish(&mut model, run, report);
    let notice = model.notice.as_deref().expect("a notice");
    assert!(
        notice.starts_with("quick and optimized builds differ on chunk-of-17: NaN or Inf"),
        "{notice}"
    );
}

#[test]
fn rerunning_the_same_text_does_not_stop_the_running_check() {
    let mut model = fresh();
    save(&mut model, "v1").expect("run");
    assert!(key(&mut model, KeyCode::Char('r')).is_empty());
}

#[test]
fn progress_from_an_older_run_is_ignored() {
    let mut model = fresh();
    let first = save(&mut model, "v1").expect("run");
    finish(&mut model, first, all_pass(1.0, 40));
    let second = save(&mut model, "v2").expect("run");
    progress(&mut model, first, Progress::Compiled(compiled(99)));
    assert!(model.live.as_ref().is_some_and(|l| l.compile.is_none()));
    assert!(finish(&mut model, first, compile_only()).is_empty());
    assert!(model.live.as_ref().is_some_and(|l| l.id == second));
}

#[test]
fn rerun_starts_now_when_idle_and_waits_when_busy() {
    let mut model = fresh();
    let run = save(&mut model, "v1").expect("run");
    assert!(key(&mut model, KeyCode::Char('r')).is_empty());
    assert_eq!(model.queued.as_deref(), Some("v1"));
    let effects = finish(&mut model, run, all_pass(1.0, 40));
    assert!(effects
        .iter()
        .any(|e| matches!(e, Effect::StartRun { source, .. } if source == "v1")));
}

#[test]
fn a_failed_check_leaves_a_notice_and_still_starts_the_queued_save() {
    let mut model = fresh();
    let run = save(&mut model, "v1").expect("run");
    save(&mut model, "v2");
    let effects = update(
        &mut model,
        Msg::RunFinished {
            run,
            result: Err(CheckStopped::new("could not start the worker")),
        },
    );
    assert!(model
        .notice
        .as_deref()
        .is_some_and(|n| n.contains("could not start")));
    assert!(effects
        .iter()
        .any(|e| matches!(e, Effect::StartRun { source, .. } if source == "v2")));
}

#[test]
fn text_that_is_not_utf8_is_not_checked() {
    let mut model = fresh();
    let effects = update(&mut model, Msg::FileChanged(vec![0xff, 0xfe, 0x00]));
    assert!(effects.is_empty());
    assert!(model.notice.as_deref().is_some_and(|n| n.contains("UTF-8")));
}

#[test]
fn q_and_ctrl_c_quit() {
    let mut model = fresh();
    assert_eq!(key(&mut model, KeyCode::Char('q')), vec![Effect::Quit]);
    let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
    let mut model = fresh();
    assert_eq!(update(&mut model, Msg::Key(ctrl_c)), vec![Effect::Quit]);
    assert!(model.quitting);
}

#[test]
fn tab_finds_failures_and_enter_opens_only_real_heatmaps() {
    let mut model = fresh();
    let mut report = all_pass(1.0, 40);
    report.cases[3] = failing("last-key-of-sequence", case_shapes()[3].1, 0);
    report.cases[7] = timed_out("chunk-of-33", case_shapes()[7].1);
    complete(&mut model, "v1", report);
    key(&mut model, KeyCode::Tab);
    assert_eq!(model.selected, 3);
    key(&mut model, KeyCode::Tab);
    assert_eq!(model.selected, 7);
    key(&mut model, KeyCode::Enter);
    assert_eq!(model.overlay, None, "a hung case has no output to map");
    assert!(model.notice.is_some());
    key(&mut model, KeyCode::Tab);
    assert_eq!(model.selected, 3, "wraps around");
    key(&mut model, KeyCode::Enter);
    assert_eq!(model.overlay, Some(Overlay::Heatmap { case: 3 }));
    key(&mut model, KeyCode::Esc);
    assert_eq!(model.overlay, None);
}

#[test]
fn a_click_selects_the_row_drawn_under_it() {
    let mut model = fresh();
    model.width = 80;
    model.height = 24;
    let cases = Areas::for_model(&model, 80, 24).cases;
    let click = |row| {
        Msg::Mouse(MouseEvent {
            kind: MouseEventKind::Down(MouseButton::Left),
            column: cases.x + 5,
            row,
            modifiers: KeyModifiers::NONE,
        })
    };
    // Border, then the header row, then case 0.
    update(&mut model, click(cases.y + 2 + 4));
    assert_eq!(model.selected, 4);
    update(&mut model, click(cases.y + 1));
    assert_eq!(model.selected, 4, "the header row selects nothing");
    // Scrolled: select the last case, then click the first visible row.
    for _ in 0..20 {
        key(&mut model, KeyCode::Down);
    }
    assert_eq!(model.selected, 14);
    let visible = usize::from(cases.height) - 3;
    update(&mut model, click(cases.y + 2));
    assert_eq!(model.selected, 15 - visible);
}

#[test]
fn history_overlay_asks_for_diffs_and_restores() {
    let mut model = fresh();
    complete(&mut model, "v1", all_pass(2.0, 40));
    complete(&mut model, "v2", compile_only());
    key(&mut model, KeyCode::Char('h'));
    key(&mut model, KeyCode::Down);
    let effects = key(&mut model, KeyCode::Enter);
    assert_eq!(
        effects,
        vec![Effect::LoadDiff {
            source_hash: source_hash("v1"),
            title: "run 1 → current text".into()
        }]
    );
    assert_eq!(
        key(&mut model, KeyCode::Char('b')),
        vec![Effect::Restore(RestoreTarget::BestPassing)]
    );
    // `t` restores the selected row, whatever its verdict.
    assert_eq!(
        key(&mut model, KeyCode::Char('t')),
        vec![Effect::Restore(RestoreTarget::Text(source_hash("v1")))]
    );
    // Nothing restored yet in this session: `u` has nothing to undo.
    key(&mut model, KeyCode::Esc);
    assert!(key(&mut model, KeyCode::Char('u')).is_empty());
    assert_eq!(
        model.notice.as_deref(),
        Some("no restore to undo in this session")
    );
    // The restore's snapshot joins the history, and `u` asks for its text back.
    let replaced = flashprof::app::history::RunSummary {
        unix_ms: 9,
        source_hash: source_hash("work in progress"),
        outcome: None,
    };
    update(
        &mut model,
        Msg::Restored {
            note: "restored".into(),
            replaced: Some(replaced.clone()),
        },
    );
    assert_eq!(model.history.last(), Some(&replaced));
    assert_eq!(
        key(&mut model, KeyCode::Char('u')),
        vec![Effect::Restore(RestoreTarget::Text(source_hash(
            "work in progress"
        )))]
    );
    key(&mut model, KeyCode::Char('h'));
    update(
        &mut model,
        Msg::DiffReady {
            title: "t".into(),
            lines: Vec::new(),
        },
    );
    assert!(matches!(model.overlay, Some(Overlay::Diff { .. })));
}

#[test]
fn replay_ticks_pauses_steps_and_changes_speed() {
    let mut model = fresh();
    let runs: Vec<Completed> = [1.0, 2.0, 3.0]
        .iter()
        .enumerate()
        .map(|(i, &ratio)| Completed {
            source: format!("v{i}"),
            report: all_pass(ratio, 40 + i as u32),
        })
        .collect();
    let summaries = runs
        .iter()
        .map(|c| flashprof::app::history::RunSummary {
            unix_ms: 0,
            source_hash: source_hash(&c.source),
            outcome: Some(flashprof::app::history::RunOutcome::of(&c.report)),
        })
        .collect();
    model.replay = Some(Replay::new(runs, summaries, Duration::from_secs(1)));
    show_replay_position(&mut model);
    assert_eq!(model.source, "v0");
    assert_eq!(model.trend(|o| o.speedup).len(), 1);
    update(&mut model, Msg::Tick);
    assert_eq!(model.source, "v0", "a replay waits on its first run");
    key(&mut model, KeyCode::Char(' '));
    update(&mut model, Msg::Tick);
    assert_eq!(model.source, "v1");
    assert_eq!(
        model.previous_resources.as_ref().map(|r| r.registers),
        Some(40)
    );
    key(&mut model, KeyCode::Char(' '));
    update(&mut model, Msg::Tick);
    assert_eq!(model.source, "v1", "paused");
    key(&mut model, KeyCode::Left);
    assert_eq!(model.source, "v0");
    key(&mut model, KeyCode::Right);
    key(&mut model, KeyCode::Right);
    key(&mut model, KeyCode::Right);
    assert_eq!(model.source, "v2", "stops at the last run");
    assert_eq!(
        key(&mut model, KeyCode::Char('+')),
        vec![Effect::SetTickInterval(Duration::from_millis(500))]
    );
    assert!(
        save(&mut model, "edited").is_none(),
        "a replay runs no checks"
    );
}

#[test]
fn c_opens_and_closes_the_counters_overlay() {
    let mut model = fresh();
    complete(&mut model, "v1", all_pass(1.5, 40));
    key(&mut model, KeyCode::Char('c'));
    assert_eq!(model.overlay, Some(Overlay::Counters));
    key(&mut model, KeyCode::Char('c'));
    assert_eq!(model.overlay, None);
    key(&mut model, KeyCode::Char('c'));
    key(&mut model, KeyCode::Esc);
    assert_eq!(model.overlay, None);
}

#[test]
fn page_keys_home_and_end_move_through_the_cases_the_history_and_a_diff() {
    use flashprof::app::history::DiffLine;
    let mut model = fresh();
    for run in 0..30 {
        complete(&mut model, &format!("v{run}"), all_pass(1.0, 40));
    }
    // 80x24: seven cases show at once.
    key(&mut model, KeyCode::PageDown);
    assert_eq!(model.selected, 7);
    key(&mut model, KeyCode::PageDown);
    assert_eq!(model.selected, 14, "stops at the last case");
    key(&mut model, KeyCode::PageUp);
    assert_eq!(model.selected, 7);
    key(&mut model, KeyCode::Home);
    assert_eq!(model.selected, 0);
    key(&mut model, KeyCode::Char('G'));
    assert_eq!(model.selected, 14);
    key(&mut model, KeyCode::Char('g'));
    assert_eq!(model.selected, 0);
    key(&mut model, KeyCode::End);
    assert_eq!(model.selected, 14);

    // The history overlay lists 20 runs at a time of the 30.
    key(&mut model, KeyCode::Char('h'));
    key(&mut model, KeyCode::End);
    assert_eq!(model.overlay, Some(Overlay::History { selected: 29 }));
    key(&mut model, KeyCode::PageUp);
    assert_eq!(model.overlay, Some(Overlay::History { selected: 9 }));
    key(&mut model, KeyCode::Char('g'));
    assert_eq!(model.overlay, Some(Overlay::History { selected: 0 }));
    key(&mut model, KeyCode::PageDown);
    assert_eq!(model.overlay, Some(Overlay::History { selected: 20 }));

    // A diff of 100 lines ends with its last line on the overlay's last row.
    let lines: Vec<DiffLine> = (0..100).map(|i| DiffLine::Added(format!("{i}"))).collect();
    update(
        &mut model,
        Msg::DiffReady {
            title: "t".into(),
            lines,
        },
    );
    let scroll = |model: &flashprof::tui::model::Model| match &model.overlay {
        Some(Overlay::Diff { scroll, .. }) => *scroll,
        other => panic!("the diff is open: {other:?}"),
    };
    key(&mut model, KeyCode::End);
    assert_eq!(scroll(&model), 80);
    key(&mut model, KeyCode::Down);
    assert_eq!(scroll(&model), 80);
    key(&mut model, KeyCode::PageUp);
    assert_eq!(scroll(&model), 60);
    key(&mut model, KeyCode::Home);
    assert_eq!(scroll(&model), 0);
    key(&mut model, KeyCode::PageDown);
    assert_eq!(scroll(&model), 20);
}

#[test]
fn y_copies_the_command_that_reruns_the_check_on_screen_with_its_seed() {
    use flashprof::report::ReproduceCommand;
    let mut model = fresh();
    model.reproduce =
        Some(ReproduceCommand::new("my kernel.cu", "flash-prefill").with("--counters", None));
    assert!(key(&mut model, KeyCode::Char('y')).is_empty());
    assert!(
        model
            .notice
            .as_deref()
            .is_some_and(|n| n.contains("no check has finished")),
        "{:?}",
        model.notice
    );
    let mut report = all_pass(1.5, 40);
    report.seed = 1234;
    complete(&mut model, "v1", report);
    let command = "flashprof check 'my kernel.cu' --lab flash-prefill --counters --seed 1234";
    assert_eq!(
        key(&mut model, KeyCode::Char('y')),
        vec![Effect::Copy(command.into())]
    );
    let text = screen(&model, 80, 24);
    assert!(
        text.contains("of 15) · seed 1234, y copies the command"),
        "{text}"
    );
    // Not every terminal lets a program set its clipboard: the footer shows
    // the whole command, on a second line where one is too short.
    let footer: Vec<&str> = text.lines().rev().take(2).collect();
    let shown = footer
        .iter()
        .rev()
        .map(|line| line.trim_matches('"'))
        .collect::<Vec<_>>()
        .join(" ");
    let shown = shown.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(shown.contains(command), "{text}");
    assert!(text.lines().count() == 24, "{text}");
}

#[test]
fn a_deleted_file_is_said_in_the_header_and_its_last_results_stay() {
    let mut model = fresh();
    complete(&mut model, "v1", all_pass(2.0, 40));
    assert!(update(&mut model, Msg::FileGone).is_empty());
    let text = screen(&model, 80, 24);
    let header = text.lines().next().unwrap_or_default();
    assert!(
        header.contains("prefill.cu was deleted; waiting for it to come back"),
        "{text}"
    );
    assert!(text.contains("✓ pass  random-small"), "{text}");
    assert!(text.contains("speedup 2.00x"), "{text}");
    // Back with the text it had: checked already, so nothing runs.
    assert_eq!(save(&mut model, "v1"), None);
    let header = screen(&model, 80, 24);
    assert!(
        header
            .lines()
            .next()
            .is_some_and(|h| h.contains("PASS 15/15")),
        "{header}"
    );
    // Gone again and back with new text: that text is checked.
    update(&mut model, Msg::FileGone);
    assert!(save(&mut model, "v2").is_some());
    assert!(!model.file_gone);
}

#[test]
fn without_nvrtc_saves_wait_and_r_looks_again_until_nvrtc_is_found_then_the_newest_text_runs() {
    use flashprof::tui::model::Remedy;
    use tui_support::drive::{searched, without_nvrtc};
    let mut model = without_nvrtc();
    assert_eq!(save(&mut model, "v1"), None, "nothing to compile with");
    assert_eq!(
        key(&mut model, KeyCode::Char('r')),
        vec![Effect::SearchLibraries]
    );
    let missing = model.cuda_missing.as_ref().expect("still missing");
    assert_eq!(missing.remedy, Some(Remedy::Searching));
    assert!(
        key(&mut model, KeyCode::Char('r')).is_empty(),
        "one search at a time"
    );
    // Nothing installed yet: the offer stays, and r can look again.
    assert!(update(&mut model, Msg::LibrariesSearched(searched(None))).is_empty());
    assert_eq!(
        model.cuda_missing.as_ref().and_then(|m| m.remedy.clone()),
        None
    );
    assert!(
        model
            .notice
            .as_deref()
            .is_some_and(|n| n.contains("still no NVRTC")),
        "{:?}",
        model.notice
    );
    assert_eq!(save(&mut model, "v2"), None);
    assert_eq!(
        key(&mut model, KeyCode::Char('r')),
        vec![Effect::SearchLibraries]
    );
    // A `pip install` in another terminal: the search finds it and the newest text is checked.
    let effects = update(
        &mut model,
        Msg::LibrariesSearched(searched(Some(
            "/site/nvidia/cu13/lib/libnvrtc.so.13 (via Python site-packages)",
        ))),
    );
    assert_eq!(model.cuda_missing, None);
    assert!(
        matches!(effects.as_slice(), [Effect::StartRun { source, .. }] if source == "v2"),
        "{effects:?}"
    );
    assert!(model
        .notice
        .as_deref()
        .is_some_and(|n| n.starts_with("NVRTC found: /site/")));
}

#[test]
fn f_fetches_shows_pip_s_progress_says_a_failure_and_searches_after_a_fetch() {
    use flashprof::tui::model::Remedy;
    use tui_support::drive::{searched, without_nvrtc, FETCH_FOLDER};
    let mut model = without_nvrtc();
    save(&mut model, "v1");
    assert_eq!(key(&mut model, KeyCode::Char('f')), vec![Effect::FetchCuda]);
    update(
        &mut model,
        Msg::FetchProgress("Collecting nvidia-cuda-nvrtc==13.0.88".into()),
    );
    let remedy = model.cuda_missing.as_ref().and_then(|m| m.remedy.clone());
    assert_eq!(
        remedy,
        Some(Remedy::Fetching {
            last_line: "Collecting nvidia-cuda-nvrtc==13.0.88".into()
        })
    );
    assert!(
        key(&mut model, KeyCode::Char('f')).is_empty(),
        "one fetch at a time"
    );
    assert!(
        key(&mut model, KeyCode::Char('r')).is_empty(),
        "nor a search beside it"
    );
    assert!(update(
        &mut model,
        Msg::Fetched(Err("pip could not install NVIDIA's wheels".into()))
    )
    .is_empty());
    let missing = model.cuda_missing.clone().expect("still missing");
    assert_eq!(missing.remedy, None);
    assert_eq!(
        missing.fetch_failed.as_deref(),
        Some("pip could not install NVIDIA's wheels")
    );
    // Pressed again: the failure is cleared for the new attempt, which lands and is looked for.
    assert_eq!(key(&mut model, KeyCode::Char('f')), vec![Effect::FetchCuda]);
    assert_eq!(
        model
            .cuda_missing
            .as_ref()
            .and_then(|m| m.fetch_failed.clone()),
        None
    );
    let effects = update(&mut model, Msg::Fetched(Ok(FETCH_FOLDER.into())));
    assert_eq!(effects, vec![Effect::SearchLibraries]);
    let effects = update(
        &mut model,
        Msg::LibrariesSearched(searched(Some(
            "libnvrtc.so.13 (via flashprof fetch-cuda's folder)",
        ))),
    );
    assert!(
        matches!(effects.as_slice(), [Effect::StartRun { source, .. }] if source == "v1"),
        "{effects:?}"
    );
}

#[test]
fn with_nvrtc_found_r_reruns_and_f_fetches_nothing() {
    let mut model = fresh();
    let run = save(&mut model, "v1").expect("run");
    finish(&mut model, run, all_pass(1.5, 40));
    assert!(key(&mut model, KeyCode::Char('f')).is_empty());
    assert!(
        model
            .notice
            .as_deref()
            .is_some_and(|n| n.contains("already found")),
        "{:?}",
        model.notice
    );
    let effects = key(&mut model, KeyCode::Char('r'));
    assert!(
        matches!(effects.as_slice(), [Effect::StartRun { source, .. }] if source == "v1"),
        "{effects:?}"
    );
}

/// A restore that replaced nothing leaves nothing to undo, and runs that
/// arrive while the history is open keep the selection on the same run.
#[test]
fn undo_follows_the_last_restore_and_the_selection_stays_on_its_run() {
    let mut model = fresh();
    complete(&mut model, "v1", all_pass(2.0, 40));
    complete(&mut model, "v2", compile_only());
    let replaced = flashprof::app::history::RunSummary {
        unix_ms: 9,
        source_hash: source_hash("work"),
        outcome: None,
    };
    update(
        &mut model,
        Msg::Restored {
            note: "restored".into(),
            replaced: Some(replaced),
        },
    );
    update(
        &mut model,
        Msg::Restored {
            note: "restored into an absent file".into(),
            replaced: None,
        },
    );
    assert!(key(&mut model, KeyCode::Char('u')).is_empty());
    key(&mut model, KeyCode::Char('h'));
    key(&mut model, KeyCode::Down);
    let chosen = model.history.iter().rev().nth(1).cloned();
    update(
        &mut model,
        Msg::Recorded(flashprof::app::history::RunSummary {
            unix_ms: 10,
            source_hash: source_hash("v3"),
            outcome: None,
        }),
    );
    let Some(Overlay::History { selected }) = model.overlay.clone() else {
        panic!("the history stays open");
    };
    assert_eq!(model.history.iter().rev().nth(selected).cloned(), chosen);
}

/// A compile of `text` that stopped for want of the CUDA headers, as the
/// worker reports it.
fn headers_missing() -> flashprof::protocol::CompileOutcome {
    use flashprof::protocol::{CompileProblem, CompileProblemKind};
    let mut outcome = tui_support::compile_error(1, "", "");
    outcome.diagnostics.clear();
    outcome.problem = Some(CompileProblem {
        kind: CompileProblemKind::HeadersMissing,
        message: "`cuda_fp8.h` comes from the CUDA headers (NVRTC ships none)".into(),
    });
    outcome
}

#[test]
fn a_file_wanting_missing_cuda_headers_is_offered_the_fetch_and_checked_again_once_they_are_found()
{
    use flashprof::tui::model::{CudaPiece, Remedy};
    use tui_support::drive::{searched, with_local_worker, HEADERS};
    let mut model = with_local_worker(None);
    let run = save(&mut model, "#include <cuda_fp8.h>").expect("NVRTC is here: it runs");
    progress(&mut model, run, Progress::Compiled(headers_missing()));
    let missing = model
        .cuda_missing
        .clone()
        .expect("the headers are a missing piece");
    assert_eq!(missing.piece, CudaPiece::Headers);
    let screen = screen(&model, 120, 40);
    assert!(
        screen.contains("NO CUDA HEADERS for this file (f fetch, r look again)"),
        "{screen}"
    );
    assert!(screen.contains("f fetch the CUDA headers"), "{screen}");
    assert!(!screen.contains("NVRTC missing"), "{screen}");
    // Not a compiler missing: a save goes on being checked.
    finish(&mut model, run, tui_support::compile_error_report(""));
    let again = save(&mut model, "#include <cuda_fp8.h>\n// v2").expect("checked");
    progress(&mut model, again, Progress::Compiled(headers_missing()));
    finish(&mut model, again, tui_support::compile_error_report(""));
    // f fetches, the search afterwards finds the headers, and the file runs again.
    assert_eq!(key(&mut model, KeyCode::Char('f')), vec![Effect::FetchCuda]);
    assert!(matches!(
        model.cuda_missing.as_ref().and_then(|m| m.remedy.clone()),
        Some(Remedy::Fetching { .. })
    ));
    let effects = update(&mut model, Msg::Fetched(Ok("/home/student/.cache".into())));
    assert_eq!(effects, vec![Effect::SearchLibraries]);
    // Still none: the offer stays and says so.
    let mut nothing = searched(Some("libnvrtc.so.13"));
    nothing.headers = None;
    update(&mut model, Msg::LibrariesSearched(nothing));
    assert_eq!(
        model.cuda_missing.as_ref().map(|m| m.piece),
        Some(CudaPiece::Headers)
    );
    assert!(
        model
            .notice
            .as_deref()
            .is_some_and(|n| n.contains("still no CUDA headers")),
        "{:?}",
        model.notice
    );
    assert_eq!(
        key(&mut model, KeyCode::Char('r')),
        vec![Effect::SearchLibraries]
    );
    let effects = update(
        &mut model,
        Msg::LibrariesSearched(searched(Some("libnvrtc.so.13"))),
    );
    assert_eq!(model.cuda_missing, None);
    assert!(
        matches!(effects.as_slice(), [Effect::StartRun { source, .. }] if source.ends_with("// v2")),
        "the newest text is checked again: {effects:?}"
    );
    assert_eq!(
        model.notice.as_deref(),
        Some(format!("found {HEADERS}").as_str())
    );
}

#[test]
fn a_compile_that_no_longer_wants_the_headers_drops_the_offer_and_a_remote_worker_never_makes_one()
{
    use tui_support::drive::with_local_worker;
    let mut model = with_local_worker(None);
    let run = save(&mut model, "#include <cuda_fp8.h>").expect("runs");
    progress(&mut model, run, Progress::Compiled(headers_missing()));
    assert!(model.cuda_missing.is_some());
    finish(&mut model, run, tui_support::compile_error_report(""));
    let run = save(&mut model, "// no include").expect("runs");
    progress(
        &mut model,
        run,
        Progress::Compiled(tui_support::compiled(32)),
    );
    assert_eq!(model.cuda_missing, None, "the file wants no header now");
    // A worker on a GPU node compiles with the node's headers: nothing to fetch here.
    let mut remote = tui_support::drive::fresh();
    let run = save(&mut remote, "#include <cuda_fp8.h>").expect("runs");
    progress(&mut remote, run, Progress::Compiled(headers_missing()));
    assert_eq!(remote.cuda_missing, None);
    let screen = screen(&remote, 120, 40);
    assert!(screen.contains("CUDA headers missing"), "{screen}");
}

#[test]
fn a_save_without_the_include_during_a_headers_fetch_clears_the_offer_and_a_failed_fetch_leaves_nothing_stuck(
) {
    use tui_support::drive::with_local_worker;
    let mut model = with_local_worker(None);
    let run = save(&mut model, "#include <cuda_fp8.h>").expect("runs");
    progress(&mut model, run, Progress::Compiled(headers_missing()));
    finish(&mut model, run, tui_support::compile_error_report(""));
    assert_eq!(key(&mut model, KeyCode::Char('f')), vec![Effect::FetchCuda]);
    // The student drops the include while pip runs: that build compiled.
    let run = save(&mut model, "// no include").expect("runs");
    progress(
        &mut model,
        run,
        Progress::Compiled(tui_support::compiled(32)),
    );
    assert_eq!(model.cuda_missing, None);
    let shown = screen(&model, 120, 40);
    assert!(!shown.contains("NO CUDA HEADERS"), "{shown}");
    assert!(!shown.contains("not compiled"), "{shown}");
    // The fetch then fails: nothing to say about a piece no file wants.
    assert!(update(&mut model, Msg::Fetched(Err("no network".into()))).is_empty());
    assert_eq!(model.cuda_missing, None);
}
