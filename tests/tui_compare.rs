//! The compare screen (`flashprof compare A B --watch`): its `update`
//! driven by message sequences, and snapshots of its view at 80x24 and
//! 120x40 drawn from hand-made reports (tui_support; no measurement).

mod tui_support;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use flashprof::outcome::{CheckReport, Progress};
use flashprof::tui::compare::model::{Column, CompareModel};
use flashprof::tui::compare::msg::{CompareEffect, CompareMsg};
use flashprof::tui::compare::update::update;
use flashprof::tui::model::Phase;
use flashprof::tui::view::compare::draw;
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use tui_support::compare_drive::{compared, finish, fresh, save, started};
use tui_support::*;

fn press(model: &mut CompareModel, code: KeyCode) -> Vec<CompareEffect> {
    update(
        model,
        CompareMsg::Key(KeyEvent::new(code, KeyModifiers::NONE)),
    )
}

fn progress(model: &mut CompareModel, run: u64, column: Column, step: Progress) {
    let progress = Box::new(step);
    update(
        model,
        CompareMsg::Progress {
            run,
            column,
            progress,
        },
    );
}

#[test]
fn nothing_runs_until_both_files_are_read() {
    let mut model = fresh();
    assert!(save(&mut model, Column::A, "a v1").is_empty());
    assert!(press(&mut model, KeyCode::Char('r')).is_empty());
    let (_, sources) = started(&save(&mut model, Column::B, "b v1")).expect("starts");
    assert_eq!((sources.a.as_str(), sources.b.as_str()), ("a v1", "b v1"));
}

#[test]
fn saves_of_both_files_during_a_run_queue_one_rerun_of_the_newest_texts() {
    let mut model = compared(all_pass(1.0, 40), all_pass(1.0, 40));
    let (first, _) = started(&save(&mut model, Column::A, "a v2")).expect("idle: starts");
    assert!(save(&mut model, Column::A, "a v3").is_empty());
    assert!(model.rerun_waiting);
    assert!(save(&mut model, Column::B, "b v2").is_empty());
    assert!(press(&mut model, KeyCode::Char('r')).is_empty());
    let effects = finish(&mut model, first, all_pass(2.0, 40), all_pass(1.0, 40));
    let starts: Vec<_> = effects
        .iter()
        .filter_map(|e| started(std::slice::from_ref(e)))
        .collect();
    assert_eq!(starts.len(), 1, "{effects:?}");
    let (second, sources) = &starts[0];
    assert_ne!(*second, first);
    assert_eq!((sources.a.as_str(), sources.b.as_str()), ("a v3", "b v2"));
    assert!(!model.rerun_waiting);
    let last = model
        .last
        .as_ref()
        .expect("the finished comparison is kept");
    assert_eq!(
        last.sources.a, "a v2",
        "the result is of the texts it checked"
    );
    assert!(model.last_is_stale(), "a newer comparison runs");
    assert!(finish(&mut model, *second, all_pass(2.0, 40), all_pass(1.0, 40)).is_empty());
    assert!(!model.last_is_stale());
}

#[test]
fn a_save_of_b_alone_during_a_run_also_queues_one_rerun() {
    let mut model = fresh();
    save(&mut model, Column::A, "a v1");
    let (run, _) = started(&save(&mut model, Column::B, "b v1")).expect("starts");
    assert!(save(&mut model, Column::B, "b v2").is_empty());
    let (_, sources) = started(&finish(&mut model, run, compile_only(), compile_only()))
        .expect("the queued save starts");
    assert_eq!((sources.a.as_str(), sources.b.as_str()), ("a v1", "b v2"));
}

#[test]
fn progress_and_results_of_an_older_comparison_are_ignored() {
    let mut model = fresh();
    save(&mut model, Column::A, "a v1");
    let (first, _) = started(&save(&mut model, Column::B, "b v1")).expect("starts");
    finish(&mut model, first, all_pass(1.0, 40), all_pass(1.0, 40));
    let (second, _) = started(&save(&mut model, Column::B, "b v2")).expect("starts");
    progress(&mut model, first, Column::B, Progress::TimingStarted);
    let live = model.live.as_ref().expect("second runs");
    assert_eq!((live.column, live.phase), (Column::A, Phase::Compiling));
    assert!(finish(&mut model, first, compile_only(), compile_only()).is_empty());
    assert_eq!(model.live.as_ref().map(|l| l.id), Some(second));
    progress(
        &mut model,
        second,
        Column::B,
        Progress::CaseStarted { index: 3 },
    );
    let live = model.live.as_ref().expect("second runs");
    assert_eq!((live.column, live.phase), (Column::B, Phase::Case(3)));
}

#[test]
fn a_comparison_that_could_not_run_leaves_a_notice_and_still_starts_the_queued_one() {
    let mut model = fresh();
    save(&mut model, Column::A, "a v1");
    let (run, _) = started(&save(&mut model, Column::B, "b v1")).expect("starts");
    save(&mut model, Column::A, "a v2");
    let result = Err("B: the worker could not start".to_string());
    let effects = update(&mut model, CompareMsg::Finished { run, result });
    assert!(started(&effects).is_some(), "{effects:?}");
    assert!(model
        .notice
        .as_deref()
        .is_some_and(|n| n.contains("could not start")));
    assert!(model.last.is_none());
}

#[test]
fn q_quits_and_question_mark_toggles_the_help() {
    let mut model = fresh();
    press(&mut model, KeyCode::Char('?'));
    assert!(model.help);
    press(&mut model, KeyCode::Esc);
    assert!(!model.help);
    assert_eq!(
        press(&mut model, KeyCode::Char('q')),
        vec![CompareEffect::Quit]
    );
}

const SIZES: [(u16, u16); 2] = [(80, 24), (120, 40)];

fn screen(model: &CompareModel, width: u16, height: u16) -> String {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).expect("test terminal");
    terminal
        .draw(|frame| draw(frame, model))
        .expect("draw into the test backend");
    terminal.backend().to_string()
}

/// Snapshots `model` at both sizes and returns the small screen for asserts.
fn snapshot(name: &str, model: &CompareModel) -> String {
    for (width, height) in SIZES {
        insta::assert_snapshot!(
            format!("{name}_{width}x{height}"),
            screen(model, width, height)
        );
    }
    screen(model, 80, 24)
}

fn with_counters(mut report: CheckReport) -> CheckReport {
    report.counters = vec![Ok(counters_full())];
    report
}

/// The row of the table naming `case`.
fn row_of<'s>(screen: &'s str, case: &str) -> &'s str {
    screen
        .lines()
        .find(|l| l.contains(case))
        .unwrap_or_else(|| panic!("no row for {case}:\n{screen}"))
}

#[test]
fn both_pass() {
    let model = compared(
        with_counters(all_pass(2.5, 48)),
        with_counters(all_pass(1.0, 40)),
    );
    let small = snapshot("compare_both_pass", &model);
    assert!(small.contains("A runs 2.50x as fast as B"), "{small}");
    assert!(!row_of(&small, "random-small").contains('*'), "{small}");
}

#[test]
fn a_fails_where_b_passes() {
    let mut a = all_pass(1.0, 40);
    let shape = case_shapes()[1].1;
    a.cases[1] = failing("planted-overflow", shape, 40);
    a.timing.as_mut().expect("timed").speedup = None;
    // Both pass the first case, but B's error is a hundred times smaller.
    let mut b = all_pass(1.0, 40);
    let (name, shape) = (b.cases[0].name.clone(), case_shapes()[0].1);
    b.cases[0] = graded(&name, shape, 2e-6, &[(0, 0)]);
    let model = compared(a, b);
    let small = snapshot("compare_a_fails", &model);
    assert!(
        row_of(&small, "planted-overflow").starts_with("\"* "),
        "{small}"
    );
    assert!(
        row_of(&small, "random-small").starts_with("\"~ "),
        "{small}"
    );
    assert!(!row_of(&small, "chunk-of-1 ").contains('*'), "{small}");
}

#[test]
fn compile_error_on_one_side() {
    let mut b = compile_only();
    b.gpu = Ok(h200());
    b.compile = compile_error(
        19,
        "identifier \"flaot\" is undefined",
        "    const flaot* q_row = q;",
    );
    let model = compared(all_pass(1.5, 40), b);
    let small = snapshot("compare_compile_error", &model);
    let lines: Vec<&str> = small.lines().collect();
    let b_panel = lines
        .iter()
        .position(|l| l.contains("B: reference.cu COMPILE ERROR"))
        .expect("B's panel says it did not compile");
    assert!(
        !lines[b_panel].contains("A: mine.cu COMPILE ERROR"),
        "{small}"
    );
    // The panels sit side by side: B's error is in the right half of the row under its title.
    let under = lines[b_panel + 1];
    let at = under
        .find(":19:5: error: ")
        .map(|byte| under[..byte].chars().count());
    assert!(at.is_some_and(|c| c > 40), "{small}");
    assert!(small.contains("const flaot* q_row"), "{small}");
}

#[test]
fn no_gpu() {
    // Without a GPU the builds are all there is to compare: each side shows
    // its own registers and occupancy, in its own half of the screen.
    let mut b = compile_only();
    b.compile = compiled(96);
    let model = compared(compile_only(), b);
    let small = snapshot("compare_no_gpu", &model);
    assert!(
        small.lines().next().is_some_and(|h| h.contains("no GPU")),
        "{small}"
    );
    assert!(small.contains("not timed: no GPU"), "{small}");
    let column_of = |needle: &str| {
        small
            .lines()
            .find_map(|line| line.find(needle).map(|byte| line[..byte].chars().count()))
    };
    let a_at = column_of("resources 38\u{a0}regs").expect("A's resources are shown");
    let b_at = column_of("resources 96\u{a0}regs").expect("B's resources are shown");
    assert!(
        a_at < 40 && b_at > 40,
        "A on the left, B on the right:\n{small}"
    );
    // A title too wide for its half gives way between words, never mid-word.
    let titles = small
        .lines()
        .find(|l| l.contains("A: mine.cu compiled"))
        .expect("the panels' titles");
    assert!(
        titles.contains("not graded (no…")
            && titles.contains("B: reference.cu compiled, not graded…"),
        "{titles}"
    );
}

#[test]
fn rerun_keeps_the_last_comparison_marked_stale() {
    let mut model = compared(all_pass(2.0, 40), all_pass(1.0, 40));
    let (run, _) = started(&save(&mut model, Column::B, "b v2")).expect("starts");
    progress(
        &mut model,
        run,
        Column::B,
        Progress::CaseStarted { index: 2 },
    );
    let small = snapshot("compare_rerunning", &model);
    assert!(small.contains("checking B: case 3/15"), "{small}");
    assert!(small.contains("(previous save)"), "{small}");
}

#[test]
fn help_lists_every_key() {
    let mut model = compared(all_pass(2.0, 40), all_pass(1.0, 40));
    press(&mut model, KeyCode::Char('?'));
    let small = snapshot("compare_help", &model);
    for keys in ["q / ctrl-c", "r", "?", "esc"] {
        assert!(small.contains(keys), "{keys} missing:\n{small}");
    }
}

#[test]
fn a_deleted_file_is_said_on_its_side_until_it_is_saved_again() {
    let mut model = compared(all_pass(1.0, 40), all_pass(1.0, 40));
    assert!(update(&mut model, CompareMsg::FileGone { column: Column::B }).is_empty());
    let text = screen(&model, 120, 40);
    let said: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("deleted; waiting for it to come back"))
        .collect();
    assert_eq!(said.len(), 1, "{text}");
    assert!(said[0].contains(" B: "), "{text}");
    // The last comparison stays; the next save compares again and clears it.
    assert!(model.last.is_some());
    assert!(started(&save(&mut model, Column::B, "b v2")).is_some());
    assert!(!screen(&model, 120, 40).contains("deleted;"));
}
