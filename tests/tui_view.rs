//! Snapshot tests of every screen state, at 80x24 and 120x40, drawn into
//! ratatui's TestBackend from models driven through `update` with
//! hand-made check results (see tui_support: these test the views, they
//! claim no measurement).

mod tui_support;

use crossterm::event::KeyCode;
use flashprof::gpu::compile::{Build, QuickBuild};
use flashprof::lab::flash_prefill::contract::Shape;
use flashprof::lab::geometry::LaunchGeometry;
use flashprof::outcome::Progress;
use flashprof::protocol::CaseStatus;
use flashprof::tui::model::{CountersView, Model};
use flashprof::tui::theme::Theme;
use tui_support::drive::{
    complete, fresh, key, progress, save, screen, styled_screen, uses_colour, SIZES,
};
use tui_support::*;

/// Snapshots `model` at both sizes and returns the small screen for asserts.
fn snapshot(name: &str, model: &mut Model) -> String {
    for (width, height) in SIZES {
        model.width = width;
        model.height = height;
        insta::assert_snapshot!(
            format!("{name}_{width}x{height}"),
            screen(model, width, height)
        );
    }
    screen(model, 80, 24)
}

fn failing_report() -> flashprof::outcome::CheckReport {
    let mut report = all_pass(1.0, 40);
    let shape = case_shapes()[1].1;
    report.cases[1] = failing("planted-overflow", shape, 40);
    report.timing = None;
    report
}

#[test]
fn compiling() {
    let mut model = fresh();
    let run = save(&mut model, "v1").expect("run");
    progress(
        &mut model,
        run,
        Progress::WorkerStarted {
            gpu: Ok(h200()),
            start_ms: 300.0,
            place: None,
        },
    );
    let text = snapshot("compiling", &mut model);
    assert!(text.contains("compiling..."), "{text}");
    assert!(text.contains("waiting"), "{text}");
}

#[test]
fn a_compile_error() {
    let mut model = fresh();
    complete(
        &mut model,
        "v1",
        compile_error_report("    const flaot* qRow = q;"),
    );
    let text = snapshot("compile_error", &mut model);
    assert!(text.contains("prefill.cu:19:5: error: "), "{text}");
    assert!(text.contains("┌ prefill.cu · 1 error "), "{text}");
    assert!(text.contains("COMPILE ERROR"), "{text}");
    // No case ran: one line says so instead of fourteen rows.
    assert!(
        text.contains("\"15 cases not run: the file does not compile "),
        "{text}"
    );
    assert!(!text.contains("random-small"), "{text}");
}

/// A compile stopped by `count` errors, on lines 19, 20, ... of the file.
fn many_errors_report(count: usize) -> flashprof::outcome::CheckReport {
    let mut report = compile_error_report("    const flaot* qRow = q;");
    let first = report.compile.diagnostics[0].clone();
    report.compile.diagnostics = (0..count)
        .map(|i| flashprof::facts::diagnostics::Diagnostic {
            line: 19 + i,
            message: format!("identifier \"flaot{i}\" is undefined"),
            ..first.clone()
        })
        .collect();
    report
}

#[test]
fn every_compile_error_is_reachable_by_scrolling_the_compile_panel() {
    let mut model = fresh();
    complete(&mut model, "v1", many_errors_report(12));
    let text = snapshot("compile_errors_scroll", &mut model);
    assert!(text.contains("┌ prefill.cu · 12 errors "), "{text}");
    assert!(text.contains("flaot0\""), "{text}");
    assert!(!text.contains("flaot11\""), "{text}");
    // Three rows an error, 36 in all; the panel has all the screen but the
    // header, the cases' line and the footer, so its bottom says where it is.
    assert!(
        text.contains("rows 1-19 of 36: ↑↓ PgUp PgDn Home End scroll"),
        "{text}"
    );
    model.width = 80;
    model.height = 24;
    key(&mut model, KeyCode::End);
    let end = screen(&model, 80, 24);
    assert!(end.contains("flaot11\" is undefined"), "{end}");
    assert!(!end.contains("flaot0\""), "{end}");
    assert!(end.contains("rows 18-36 of 36"), "{end}");
    assert_eq!(model.selected, 0, "the arrows scroll; no case is selected");
    key(&mut model, KeyCode::Char('g'));
    assert_eq!(model.compile_scroll, 0);
    key(&mut model, KeyCode::PageDown);
    assert_eq!(
        model.compile_scroll, 17,
        "a page of 19 rows, stopped at the end"
    );
    key(&mut model, KeyCode::Up);
    assert_eq!(model.compile_scroll, 16);
    key(&mut model, KeyCode::Home);
    assert_eq!(model.compile_scroll, 0);
    key(&mut model, KeyCode::Char('G'));
    assert_eq!(model.compile_scroll, 17);
    // A fix brings the table back, and the next list of errors starts at its top.
    complete(&mut model, "v2", all_pass(1.5, 40));
    assert!(screen(&model, 80, 24).contains("cases (7 of 15)"));
    complete(&mut model, "v3", many_errors_report(3));
    assert_eq!(model.compile_scroll, 0);
}

#[test]
fn the_warnings_of_a_file_that_builds_scroll_with_the_bracket_keys() {
    use flashprof::facts::diagnostics::{Diagnostic, Severity};
    let mut model = fresh();
    let mut report = all_pass(1.5, 40);
    let like = many_errors_report(1).compile.diagnostics[0].clone();
    report.compile.diagnostics = (0..12)
        .map(|i| Diagnostic {
            severity: Severity::Warning,
            line: 19 + i,
            message: format!("variable \"unused{i}\" was declared but never referenced"),
            ..like.clone()
        })
        .collect();
    complete(&mut model, "v1", report);
    model.width = 80;
    model.height = 24;
    let top = screen(&model, 80, 24);
    assert!(top.contains("unused0\""), "{top}");
    assert!(!top.contains("unused11\""), "{top}");
    assert!(top.contains(": [ ] scroll"), "{top}");
    // The arrows keep selecting cases; the brackets move the messages.
    key(&mut model, KeyCode::Down);
    assert_eq!((model.selected, model.compile_scroll), (1, 0));
    for _ in 0..100 {
        key(&mut model, KeyCode::Char(']'));
    }
    let end = screen(&model, 80, 24);
    assert!(end.contains("unused11\" was declared"), "{end}");
    assert_eq!(model.selected, 1);
    let bottom = model.compile_scroll;
    assert!(bottom > 0);
    key(&mut model, KeyCode::Char('['));
    assert_eq!(model.compile_scroll, bottom - 1);
}

#[test]
fn running_with_the_previous_result_marked_stale() {
    let mut model = fresh();
    complete(&mut model, "v1", all_pass(1.5, 40));
    let run = save(&mut model, "v2").expect("run");
    progress(&mut model, run, Progress::Compiled(compiled(48)));
    let first = case_shapes()[0].1;
    progress(
        &mut model,
        run,
        Progress::CaseFinished {
            index: 0,
            outcome: passing("random-small", first),
        },
    );
    progress(&mut model, run, Progress::CaseStarted { index: 1 });
    let text = snapshot("running", &mut model);
    assert!(text.contains("running"), "{text}");
    assert!(text.contains("(previous save)"), "{text}");
}

#[test]
fn provisional_verdicts_from_the_quick_build_while_the_optimizer_runs() {
    let mut model = fresh();
    complete(&mut model, "v1", all_pass(1.5, 40));
    let run = save(&mut model, "v2").expect("run");
    let mut quick = compiled(30);
    quick.build = Build::Quick(QuickBuild::FastCompile);
    quick.compile_ms = 41.0;
    progress(&mut model, run, Progress::QuickBuilt(quick));
    let shapes = case_shapes();
    progress(
        &mut model,
        run,
        Progress::ProvisionalCase {
            index: 0,
            outcome: passing("random-small", shapes[0].1),
        },
    );
    progress(
        &mut model,
        run,
        Progress::ProvisionalCase {
            index: 1,
            outcome: failing("planted-overflow", shapes[1].1, 40),
        },
    );
    progress(&mut model, run, Progress::CaseStarted { index: 2 });
    let text = snapshot("provisional", &mut model);
    assert!(text.contains("quick build in 41 ms"), "{text}");
    assert!(text.contains("~ pass"), "{text}");
    assert!(text.contains("~ FAIL"), "{text}");
    // The optimized build's verdict replaces the provisional one as it lands.
    progress(&mut model, run, Progress::Compiled(compiled(48)));
    progress(
        &mut model,
        run,
        Progress::CaseFinished {
            index: 0,
            outcome: passing("random-small", shapes[0].1),
        },
    );
    let text = screen(&model, 120, 40);
    assert!(text.contains("✓ pass"), "{text}");
    assert!(text.contains("~ FAIL"), "{text}");
}

#[test]
fn all_pass_with_trend_and_resource_deltas() {
    let mut model = fresh();
    complete(&mut model, "v1", all_pass(1.5, 40));
    complete(&mut model, "v2", all_pass(1.2, 40));
    complete(&mut model, "v3", all_pass(2.5, 48));
    let text = snapshot("pass", &mut model);
    assert!(text.contains("PASS 15/15"), "{text}");
    assert!(text.contains("speedup 2.50x"), "{text}");
    assert!(text.contains("registers 48 (+8)"), "{text}");
}

#[test]
fn a_failing_case_and_its_heatmap() {
    let mut model = fresh();
    complete(&mut model, "v1", failing_report());
    key(&mut model, KeyCode::Tab);
    assert_eq!(model.selected, 1);
    let table = snapshot("fail", &mut model);
    assert!(table.contains("FAIL 14/15"), "{table}");
    key(&mut model, KeyCode::Enter);
    let heatmap = snapshot("fail_heatmap", &mut model);
    assert!(heatmap.contains("heatmap: planted-overflow"), "{heatmap}");
    // Rows 40.. of KV group 0 (query heads 0-3) are wrong, the rest exact.
    let first_band = heatmap
        .lines()
        .find(|l| l.contains(" r 0-"))
        .expect("first band");
    assert!(!first_band.contains('▓'), "{heatmap}");
    assert!(heatmap.contains("▓▓▓▓│····"), "{heatmap}");
}

#[test]
fn a_lab_graded_on_bytes_leads_its_timing_panel_with_bandwidth() {
    let mut model = fresh();
    let mut report = all_pass(12.0, 128);
    let timing = report.timing.as_mut().expect("timed");
    // The H200's decode reference: 932 MB in 0.2664 ms against a 4235 GB/s copy.
    timing.bandwidth =
        flashprof::grade::roofline::Bandwidth::of(932_249_600, 0.2664, 4.235e12, 4.042e12);
    complete(&mut model, "v1", report);
    let text = snapshot("graded_on_bytes", &mut model);
    assert!(text.contains("3499 GB/s 82.6%"), "{text}");
    assert!(text.contains("of 4235 GB/s roof"), "{text}");
    let first = text.find("GB/s 82.6%").expect("bandwidth");
    assert!(first < text.find("student").expect("medians"), "{text}");
}

#[test]
fn a_timed_out_case() {
    let mut model = fresh();
    let mut report = all_pass(1.0, 40);
    report.cases[5] = timed_out("chunk-of-1", case_shapes()[5].1);
    report.timing = None;
    report.timing_error = Some("not timed: a case hung or crashed".into());
    complete(&mut model, "v1", report);
    let text = snapshot("timeout", &mut model);
    assert!(text.contains("HANG"), "{text}");
    assert!(text.contains("not timed: a case hung"), "{text}");
}

#[test]
fn counters_unavailable() {
    let mut model = fresh();
    complete(&mut model, "v1", all_pass(2.0, 40));
    model.counters = Some(CountersView::Unavailable {
        reason: "profiling needs permission".into(),
    });
    let text = snapshot("counters_unavailable", &mut model);
    assert!(text.contains("unavailable:"), "{text}");
}

#[test]
fn counters_collected() {
    let mut model = fresh();
    let mut report = all_pass(2.5, 40);
    report.counters = vec![Ok(counters_full())];
    complete(&mut model, "v1", report);
    let Some(CountersView::Collected { lines, compact }) = model.counters.clone() else {
        panic!(
            "the report's counters reach the panel: {:?}",
            model.counters
        );
    };
    let labels: Vec<&str> = lines.iter().map(|(label, _)| label.as_str()).collect();
    assert_eq!(
        labels,
        [
            "latency-bound",
            "next",
            "SM",
            "units",
            "DRAM rd",
            "DRAM wr",
            "AI",
            "levels",
            "fp32",
            "set",
            "roofs"
        ]
    );
    snapshot("counters_collected", &mut model);
    // At both sizes a full line would be cut (the verdict's reason, the
    // advice): the panel shows its compact lines, every one whole (at
    // 120x40 the plot has the row of the last, the `c` key's hint).
    assert_eq!(compact.len(), 7, "{compact:?}");
    for (width, height) in SIZES {
        let text = screen(&model, width, height);
        let plotted = text.contains("●DRAM");
        for (label, value) in compact.iter().filter(|(label, _)| !plotted || label != "c") {
            let line = format!("{label} {value}");
            assert!(text.contains(line.trim_end()), "{line}:\n{text}");
        }
        assert!(text.contains("busiest FP32 FMA pipe 42%"), "{text}");
    }
    let value = |label: &str| {
        lines
            .iter()
            .find(|(l, _)| l == label)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(value("set"), Some("full, 9 passes, GH100"));
    // 51.5 GFLOP over 40 x 105 MB of shared-memory traffic and 8 x 105 MB of L2's.
    assert_eq!(
        value("levels"),
        Some("shared memory 12 flop/B (roof 29.7 TB/s), L2 61 flop/B (roof 9.9 TB/s)")
    );
    assert_eq!(
        value("units"),
        Some("FP32 FMA pipe 42%, L2 28%, DRAM 0%"),
        "busiest first"
    );
    // A screen wide enough for every full line shows them (the panel has
    // four tenths of it, less its borders).
    let longest = lines
        .iter()
        .map(|(label, value)| label.chars().count() + 1 + value.chars().count())
        .max()
        .expect("lines");
    let wide = screen(&model, ((longest + 2) * 10 / 4 + 4) as u16, 40);
    assert!(
        wide.contains("latency-bound no unit near its peak (busiest:"),
        "{wide}"
    );
    // 70% of 105 MB read against 32 MiB of inputs, 30% written against the 16 MiB output.
    assert!(wide.contains("DRAM rd 73.5 MB = 2.19x inputs"), "{wide}");
    assert!(wide.contains("DRAM wr 31.5 MB = 1.88x output"), "{wide}");
    assert_eq!(value("SM"), Some("47.3% (starter 72%)"));
}

#[test]
fn no_gpu_shows_compile_results_and_what_is_missing() {
    let mut model = fresh();
    complete(&mut model, "v1", compile_only());
    let text = snapshot("no_gpu", &mut model);
    assert!(text.contains("no GPU: compile only"), "{text}");
    assert!(text.contains("needs a GPU"), "{text}");
    assert!(text.contains("registers 38"), "{text}");
    assert!(model.last.as_ref().is_some_and(|c| c
        .report
        .cases
        .iter()
        .all(|c| c.status == CaseStatus::NotRun)));
}

#[test]
fn what_a_kernel_keeps_between_launches_is_an_integrity_note_under_the_compile() {
    use flashprof::facts::kept_state::{KernelFacts, ModuleVariable};
    let mut report = compile_only();
    *report.compile.kernel_facts = KernelFacts {
        kept: vec![ModuleVariable {
            name: "g_memo".into(),
            bytes: 16 << 20,
        }],
        reads_global_timer: true,
        ..KernelFacts::default()
    };
    let mut model = fresh();
    complete(&mut model, "v1", report);
    snapshot("kept_state", &mut model);
    let wide = screen(&model, 120, 40);
    assert!(
        wide.contains(
            "integrity note: keeps 16.0 MiB in `g_memo` between launches; reads the global timer"
        ),
        "{wide}"
    );
    // A name is the student's text: its escapes reach the screen neutralised.
    let mut hostile = compile_only();
    hostile.compile.kernel_facts.kept = vec![ModuleVariable {
        name: "m\u{1b}]0;owned\u{7}\u{202e}".into(),
        bytes: 4,
    }];
    complete(&mut model, "v2", hostile);
    let text = screen(&model, 120, 40);
    assert!(text.contains("keeps 4 B in `m^[]0;owned^G`"), "{text}");
    assert!(!text.contains(|c: char| (c.is_control() && c != '\n') || c == '\u{202e}'));
}

#[test]
fn a_block_larger_than_the_kernel_allows_is_called_out() {
    let mut report = compile_only();
    // 168 registers leave room for 384 threads a block; the file declares 512.
    report.compile = compiled(168);
    let geometry = LaunchGeometry {
        threads: 512,
        ..flashprof::lab::flash_prefill::FLASH_PREFILL.default_geometry()
    };
    report.compile.geometry = Some(geometry);
    // As the worker does: occupancy at the declared geometry, on the typical Hopper SM.
    report.compile.occupancy = report.compile.resources.as_ref().map(|usage| {
        flashprof::facts::resources::theoretical_occupancy(
            usage,
            &geometry,
            &flashprof::facts::resources::SmLimits::typical((9, 0)),
        )
    });
    let mut model = fresh();
    complete(&mut model, "v1", report);
    let text = snapshot("block_too_large", &mut model);
    assert!(text.contains("fails: 512 threads"), "{text}");
    assert!(text.contains("max 384 threads/block"), "{text}");
}

#[test]
fn help_and_history_overlays() {
    let mut model = fresh();
    complete(&mut model, "v1", all_pass(1.5, 40));
    complete(&mut model, "v2", compile_only());
    key(&mut model, KeyCode::Char('?'));
    let help = snapshot("help", &mut model);
    assert!(help.contains("ctrl-c"), "{help}");
    // The keys of this screen, the list keys among them, and no replay's.
    for keys in ["PgUp", "PgDn", "Home / g", "End / G", "y "] {
        assert!(help.contains(keys), "{keys}:\n{help}");
    }
    assert!(!help.contains("replay:"), "{help}");
    key(&mut model, KeyCode::Esc);
    key(&mut model, KeyCode::Char('h'));
    let history = snapshot("history", &mut model);
    assert!(history.contains("PASS 15/15"), "{history}");
}

#[test]
fn a_case_too_short_for_a_tile_still_draws_its_heatmap() {
    let mut model = fresh();
    let mut report = all_pass(1.0, 40);
    let shape = Shape {
        chunk_len: 1,
        prefix_len: 1000,
    };
    report.cases[5] = failing("chunk-of-1", shape, 0);
    complete(&mut model, "v1", report);
    model.selected = 5;
    key(&mut model, KeyCode::Enter);
    let text = screen(&model, 80, 24);
    assert!(text.contains("r 0-0"), "{text}");
}

#[test]
fn hostile_text_reaches_the_screen_with_its_escapes_neutralised() {
    let mut model = fresh();
    let mut report = compile_error_report("    x = 1; /* \u{1b}]0;owned\u{7} \u{1b}[2J */");
    report.compile.diagnostics[0].message = "#error \u{1b}[31mred\u{1b}[0m \u{202e}txt".into();
    complete(&mut model, "v1", report);
    for (width, height) in SIZES {
        let text = screen(&model, width, height);
        assert!(
            !text.contains(|c: char| (c.is_control() && c != '\n') || c == '\u{202e}'),
            "{text:?}"
        );
        assert!(text.contains("^[[31mred"), "{text}");
    }
}

#[test]
fn the_report_and_the_screen_name_limits_layouts_and_counter_sets_in_words() {
    let mut report = all_pass(2.5, 40);
    report.counters = vec![Ok(counters_full())];
    let table = flashprof::report::render_table(&report, None);
    for words in [
        "(6 blocks/SM, limited by registers)",
        "grid.y = query head",
        "hardware counters (full set, 9 replay passes",
    ] {
        assert!(table.contains(words), "{words}:\n{table}");
    }
    let mut model = fresh();
    complete(&mut model, "v1", report);
    key(&mut model, KeyCode::Char('c'));
    let overlay = screen(&model, 120, 40);
    assert!(overlay.contains("set full, 9 passes"), "{overlay}");
    for code_name in ["Registers", "QueryHead", "Full"] {
        assert!(!table.contains(code_name), "{code_name}:\n{table}");
        assert!(!overlay.contains(code_name), "{code_name}:\n{overlay}");
    }
}

#[test]
fn the_check_table_shows_hostile_text_with_its_escapes_neutralised() {
    let mut report = compile_error_report("    x = 1; /* \u{1b}]0;owned\u{7} \u{1b}[2J */");
    report.compile.diagnostics[0].message = "#error \u{1b}[31mred\u{1b}[0m \u{202e}txt".into();
    report.source_path = "evil\u{1b}[8m.cu".into();
    let table = flashprof::report::render_table(&report, None);
    assert!(
        !table.contains(|c: char| (c.is_control() && c != '\n') || c == '\u{202e}'),
        "{table:?}"
    );
    assert!(table.contains("#error ^[[31mred^[[0m txt"), "{table}");
    assert!(table.contains("evil^[[8m.cu"), "{table}");
}

#[test]
fn a_compile_failure_with_only_a_raw_log_shows_the_log() {
    let mut model = fresh();
    let mut report = compile_error_report("");
    let d = &mut report.compile.diagnostics[0];
    d.line = 0;
    d.column = None;
    d.source_line = None;
    d.message = "the compiler failed with no message on a line of yours; its log:\n\
                 ptxas error   : Entry function 'attention_prefill' uses too much shared data"
        .into();
    complete(&mut model, "v1", report);
    let text = screen(&model, 120, 40);
    assert!(text.contains("uses too much shared data"), "{text}");
}

#[test]
fn a_paged_case_heatmap_names_the_batch_and_marks_where_each_sequence_starts() {
    use flashprof::grade::compare::compare;
    use flashprof::grade::integrity::Integrity;
    use flashprof::lab::paged_prefill::PAGED_PREFILL;
    use flashprof::protocol::{CaseOutcome, CaseStatus};
    use std::path::Path;

    let cases = PAGED_PREFILL
        .parse_cases(PAGED_PREFILL.embedded_cases(), "paged", Path::new("."))
        .expect("cases");
    let case = &cases[0];
    let data = PAGED_PREFILL.generate(case, 4).expect("inputs");
    let reference = PAGED_PREFILL.oracle(&data, None);
    let shape = data.problem.output;
    // The second sequence's rows are wrong in every head.
    let second = data.problem.sequence_starts[1];
    let third = data
        .problem
        .sequence_starts
        .get(2)
        .copied()
        .unwrap_or(shape.rows);
    let mut out: Vec<f32> = reference.iter().map(|&x| x as f32).collect();
    for row in second..third {
        for head in 0..shape.heads {
            out[shape.index(row, head, 0)] += 1.0;
        }
    }
    let comparison = compare(shape, PAGED_PREFILL.tolerance(), &out, &reference);
    let mut report = failing_report();
    report.lab = "paged-prefill".into();
    report.cases[1] = CaseOutcome {
        comparison: Some(comparison),
        integrity: Some(Integrity::default()),
        elapsed_ms: 2.0,
        oracle_ms: 1.0,
        ..CaseOutcome::unmeasured(
            &case.name,
            &case.summary,
            data.problem.clone(),
            CaseStatus::Fail,
            "rows of sequence 1 are wrong".into(),
        )
    };
    let mut model = fresh();
    complete(&mut model, "v1", report);
    model.selected = 1;
    key(&mut model, KeyCode::Enter);
    snapshot("paged_heatmap", &mut model);
    let text = screen(&model, 120, 40);
    assert!(text.contains(&data.problem.detail), "{text}");
    assert!(text.contains("╶ a sequence starts"), "{text}");
    // The band holding the second sequence's first row carries the mark.
    let marked = text.lines().filter(|line| line.contains("╶r ")).count();
    assert!(marked >= 1, "{text}");
    let wrong_band = text
        .lines()
        .find(|line| {
            line.split("r ")
                .nth(1)
                .and_then(|rest| rest.split('-').next())
                .and_then(|n| n.trim().parse::<usize>().ok())
                .is_some_and(|first| first >= second && first < third)
        })
        .expect("a band inside the second sequence");
    assert!(wrong_band.contains(['▓', '█']), "{text}");
}

/// The main states of the screen in colour, as styled snapshots at both sizes.
fn colour_snapshot(name: &str, model: &mut Model) -> String {
    model.theme = Theme { color: true };
    for (width, height) in SIZES {
        insta::assert_snapshot!(
            format!("{name}_colour_{width}x{height}"),
            styled_screen(model, width, height)
        );
    }
    styled_screen(model, 80, 24)
}

fn counted_report(ratio: f64) -> flashprof::outcome::CheckReport {
    let mut report = all_pass(ratio, 40);
    report.counters = vec![Ok(counters_full())];
    report
}

#[test]
fn colour_is_part_of_the_main_states() {
    let mut model = fresh();
    complete(&mut model, "v1", all_pass(1.5, 48));
    complete(&mut model, "v2", counted_report(2.5));
    let pass = colour_snapshot("pass", &mut model);
    assert!(pass.contains("⟦fg:green⟧✓ pass"), "{pass}");
    // The header's verdict and the selected row.
    assert!(pass.contains("⟦fg:green⟧PASS 15/15⟦/⟧"), "{pass}");
    assert!(pass.contains("reversed"), "{pass}");

    let mut model = fresh();
    complete(&mut model, "v1", failing_report());
    key(&mut model, KeyCode::Tab);
    let fail = colour_snapshot("fail", &mut model);
    assert!(fail.contains("⟦fg:red bold reversed⟧✗ FAIL"), "{fail}");

    let mut model = fresh();
    complete(
        &mut model,
        "v1",
        compile_error_report("    const flaot* qRow = q;"),
    );
    let error = colour_snapshot("compile_error", &mut model);
    assert!(
        error.contains("⟦fg:red bold⟧✗ prefill.cu:19:5: error: ⟦/⟧"),
        "{error}"
    );

    let mut model = fresh();
    complete(&mut model, "v1", all_pass(1.5, 40));
    let run = save(&mut model, "v2").expect("run");
    progress(&mut model, run, Progress::Compiled(compiled(48)));
    progress(&mut model, run, Progress::CaseStarted { index: 1 });
    let running = colour_snapshot("running", &mut model);
    assert!(running.contains("⟦fg:yellow⟧running"), "{running}");
    assert!(running.contains("⟦italic⟧(previous save)"), "{running}");
}

#[test]
fn no_color_draws_no_colour_and_every_state_still_reads_as_text() {
    let mut model = fresh();
    complete(&mut model, "v1", failing_report());
    key(&mut model, KeyCode::Tab);
    for (width, height) in SIZES {
        assert!(!uses_colour(&model, width, height));
    }
    let fail = styled_screen(&model, 80, 24);
    insta::assert_snapshot!("fail_monochrome_80x24", fail);
    // Pass and fail differ by glyph and word, the failure is also bold, and
    // the selection is reversed rather than coloured.
    assert!(fail.contains("⟦bold reversed⟧✗ FAIL"), "{fail}");
    assert!(fail.contains("✓ pass"), "{fail}");
    assert!(fail.contains("⟦bold⟧FAIL 14/15"), "{fail}");
    let run = save(&mut model, "v2").expect("run");
    progress(&mut model, run, Progress::Compiled(compiled(48)));
    progress(&mut model, run, Progress::CaseStarted { index: 2 });
    let running = styled_screen(&model, 80, 24);
    assert!(!uses_colour(&model, 80, 24));
    assert!(running.contains("⟦underlined⟧running"), "{running}");
    assert!(running.contains("(previous save)"), "{running}");
    // The plots too: the trend and the roofline, in the panel and overlay,
    // the kernel and the starter told apart by ● and ○.
    let mut plotted = fresh();
    complete(&mut plotted, "v1", all_pass(1.5, 48));
    complete(&mut plotted, "v2", counted_report(2.5));
    for overlay in [None, Some(KeyCode::Char('c'))] {
        if let Some(code) = overlay {
            key(&mut plotted, code);
        }
        for (width, height) in SIZES {
            assert!(!uses_colour(&plotted, width, height));
        }
    }
    let overlay = screen(&plotted, 120, 40);
    assert!(overlay.contains('●') && overlay.contains('○'), "{overlay}");
}

#[test]
fn a_compute_bound_verdict_names_the_bound_once() {
    let mut model = fresh();
    let mut report = all_pass(2.5, 40);
    let mut counters = counters_full();
    counters.student = kernel_counters(16.1, 105.0, 97.0, 61.0);
    report.counters = vec![Ok(counters)];
    complete(&mut model, "v1", report);
    let text = screen(&model, 120, 40);
    let verdict = text
        .lines()
        .find(|line| line.contains("compute-bound"))
        .expect("a compute-bound verdict");
    assert_eq!(verdict.matches("compute-bound").count(), 1, "{text}");
    assert!(!text.to_lowercase().contains("compute-bound compute-bound"));
}

#[test]
fn a_clean_compile_takes_one_line_and_its_rows_go_to_the_cases() {
    let mut model = fresh();
    complete(&mut model, "v1", all_pass(1.5, 40));
    let clean = screen(&model, 120, 40);
    let lines: Vec<&str> = clean.lines().collect();
    assert!(
        lines[1].contains("prefill.cu ✓ compiled in 65 ms"),
        "{clean}"
    );
    // Every case fits at 120x40, and seven at 80x24.
    assert!(clean.contains("cases (15 of 15)"), "{clean}");
    assert!(screen(&model, 80, 24).contains("cases (7 of 15)"));
    // An error takes a bordered panel of its own lines: the message, the
    // source line and the caret, not a fixed height.
    complete(
        &mut model,
        "v2",
        compile_error_report("    const flaot* qRow = q;"),
    );
    let error = screen(&model, 120, 40);
    let lines: Vec<&str> = error.lines().collect();
    assert!(lines[1].contains("┌ prefill.cu"), "{error}");
    assert!(lines[5].contains("└──"), "{error}");
}

#[test]
fn the_selected_case_s_whole_diagnosis_is_under_the_table() {
    let mut model = fresh();
    let mut report = failing_report();
    let long = "only rows 40..63 of each 64-row tile are wrong, in every head of KV \
                group 0 (query heads 0-3): the rows a block handles last go astray, \
                which is what a missing rescale of the accumulator does";
    report.cases[1].diagnosis = long.into();
    complete(&mut model, "v1", report);
    key(&mut model, KeyCode::Tab);
    for (width, height) in SIZES {
        let text = screen(&model, width, height);
        let words: String = text
            .lines()
            .map(|line| line.trim_matches('"'))
            .skip_while(|line| !line.starts_with("▸ planted-overflow:"))
            .take_while(|line| !line.starts_with('┌'))
            .collect::<Vec<_>>()
            .join(" ");
        let words = words.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(words.contains(long), "{width}x{height}:\n{text}");
    }
}

#[test]
fn the_counters_overlay_shows_every_line_whole_and_a_large_roofline() {
    let mut model = fresh();
    complete(&mut model, "v1", counted_report(2.5));
    key(&mut model, KeyCode::Char('c'));
    let text = snapshot("counters_overlay", &mut model);
    assert!(text.contains("counters and roofline"), "{text}");
    let wide = screen(&model, 120, 40);
    for roof in ["FP32", "TF32", "BF16 1071T", "DRAM"] {
        assert!(wide.contains(roof), "{roof}: {wide}");
    }
    assert!(wide.contains('●') && wide.contains('○'), "{wide}");
    // The verdict the panel cuts is whole here.
    let Some(CountersView::Collected { lines, .. }) = &model.counters else {
        panic!("counters collected");
    };
    let verdict = &lines[0].1;
    let flat = wide
        .replace(['│', '"'], " ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let verdict_words = verdict.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat.contains(&verdict_words), "{verdict}\n{wide}");
}

#[test]
fn the_trend_plots_each_figure_and_a_nan_error_reads_as_nan() {
    let mut model = fresh();
    complete(&mut model, "v1", all_pass(1.2, 40));
    complete(&mut model, "v2", all_pass(2.5, 64));
    let mut broken = failing_report();
    broken.cases[1].comparison.as_mut().expect("compared").nan = 12;
    complete(&mut model, "v3", broken);
    for (width, height) in SIZES {
        let text = screen(&model, width, height);
        for label in ["speedup 2.50x", "regs 40", "max err NaN"] {
            assert!(text.contains(label), "{label} at {width}x{height}:\n{text}");
        }
    }
    // With rows to spare, each strip says the range it spans.
    let tall = screen(&model, 120, 40);
    assert!(tall.contains("1.20x..2.50x"), "{tall}");
    assert!(tall.contains("40..64"), "{tall}");
}

#[test]
fn small_terminals_draw_every_state_without_panicking() {
    let mut model = fresh();
    complete(&mut model, "v1", all_pass(1.2, 40));
    complete(&mut model, "v2", counted_report(2.5));
    for overlay in [None, Some(KeyCode::Char('c'))] {
        if let Some(code) = overlay {
            key(&mut model, code);
        }
        for (width, height) in [(1, 1), (20, 5), (40, 10), (60, 15), (79, 23)] {
            let text = screen(&model, width, height);
            assert_eq!(text.lines().count(), usize::from(height));
        }
    }
}

#[test]
fn without_nvrtc_the_screen_says_so_and_offers_the_fetch_not_a_compile_error() {
    use flashprof::tui::model::Remedy;
    use tui_support::drive::without_nvrtc;
    let mut model = without_nvrtc();
    save(&mut model, "v1");
    let text = snapshot("nvrtc_missing", &mut model);
    assert!(
        text.contains("NO NVRTC on this machine (f fetch, r look again)"),
        "{text}"
    );
    assert!(!text.contains("COMPILE ERROR"), "{text}");
    assert!(text.contains("not compiled: NVRTC"), "{text}");
    assert!(
        text.contains("f: fetch NVRTC, CUPTI and the CUDA headers 13.0 with pip into"),
        "{text}"
    );
    assert!(text.contains("flashprof fetch-cuda"), "{text}");
    assert!(text.contains("f fetch NVRTC"), "the footer: {text}");

    model.cuda_missing.as_mut().expect("missing").remedy = Some(Remedy::Fetching {
        last_line: "Downloading nvidia_cuda_nvrtc-13.0.88-py3-none-manylinux.whl (90.1 MB)".into(),
    });
    let text = snapshot("nvrtc_fetching", &mut model);
    assert!(text.contains("NO NVRTC: fetching... Downloading"), "{text}");

    let missing = model.cuda_missing.as_mut().expect("missing");
    missing.remedy = None;
    missing.fetch_failed = Some("pip could not install NVIDIA's wheels (exit status: 1); it said: ERROR: No matching distribution found".into());
    let text = snapshot("nvrtc_fetch_failed", &mut model);
    assert!(
        text.contains("✗ the fetch failed: pip could not install"),
        "{text}"
    );
}

#[test]
fn a_diagnosis_too_long_for_its_cell_is_cut_between_words_at_80x24() {
    let mut model = fresh();
    complete(&mut model, "v1", all_pass(13.0, 40));
    let screen = screen(&model, 80, 24);
    let report = &model.last.as_ref().expect("a check").report;
    let mut checked = 0;
    for case in &report.cases {
        let Some(row) = screen
            .lines()
            .find(|l| l.contains(&format!(" {} ", case.name)))
        else {
            continue;
        };
        let first_word = case.diagnosis.split(' ').next().expect("a word");
        let cell = row[row
            .find(first_word)
            .expect("the diagnosis starts in its cell")..]
            .trim_end_matches(['│', ' ', '"']);
        let shown = cell.strip_suffix('…').unwrap_or_else(|| {
            panic!("the diagnosis fits whole or ends in an ellipsis: {row} {cell:?}")
        });
        assert!(
            case.diagnosis.starts_with(shown) && case.diagnosis[shown.len()..].starts_with(' '),
            "cut mid-word: {cell:?} of {:?}",
            case.diagnosis
        );
        checked += 1;
    }
    assert!(checked >= 5, "only {checked} rows on screen:\n{screen}");
}
