//! Hand-made check results for the TUI and history tests.
//!
//! Nothing here claims to be a measurement: comparisons are computed by the
//! real `grade::compare` from made-up outputs, timings by the real
//! statistics from made-up samples, so the screens under test see data of
//! exactly the shape the engine produces.
#![allow(dead_code)] // each test binary uses its own subset

use flashprof::facts::arch;
use flashprof::facts::device::{DeviceInfo, GpuProblem};
use flashprof::facts::diagnostics::{Diagnostic, Severity};
use flashprof::facts::metrics::{self, MetricValue};
use flashprof::facts::resources::{
    max_threads_for_registers, theoretical_occupancy, ResourceUsage, SmLimits,
};
use flashprof::gpu::compile::Build;
use flashprof::grade::compare::compare;
use flashprof::grade::integrity::Integrity;
use flashprof::grade::roofline::{analyze, LevelTraffic, Measured, Unit, UnitLoad};
use flashprof::grade::stats::{speedup, summarize};
use flashprof::lab::flash_prefill::cases::embedded_cases;
use flashprof::lab::flash_prefill::contract::{Shape, DH, TIMING_SHAPE, TOLERANCE};
use flashprof::lab::flash_prefill::diagnosis::{diagnose, Reading};
use flashprof::lab::flash_prefill::FLASH_PREFILL;
use flashprof::outcome::{CheckReport, PhaseTimes};
use flashprof::protocol::{
    CaseOutcome, CaseStatus, CompileOutcome, CounterTier, CountersOutcome, KernelCounters,
    ReferenceCheck, TimingConfig, TimingOutcome,
};

pub const FILE: &str = "prefill.cu";

pub fn h200() -> DeviceInfo {
    DeviceInfo {
        ordinal: 0,
        name: "NVIDIA H200".into(),
        compute_capability: (9, 0),
        sm_count: 132,
        l2_bytes: 60 * 1024 * 1024,
        max_sm_clock_mhz: 1980.0,
        memory_bytes: 140 << 30,
        driver_version: 13000,
        sm_attributes: Some(arch::traits((9, 0)).typical),
        memory_clock_mhz: 3201.0,
        memory_bus_bits: 6144,
        uuid: String::new(),
    }
}

pub fn no_gpu() -> GpuProblem {
    GpuProblem::NoDriver {
        detail: "libcuda.so could not be loaded".into(),
    }
}

pub fn resources(registers: u32) -> ResourceUsage {
    ResourceUsage {
        registers,
        static_smem_bytes: 0,
        local_bytes: 0,
        spill_store_bytes: 0,
        spill_load_bytes: 0,
        barriers: 0,
        max_threads_per_block: max_threads_for_registers(registers, &SmLimits::typical((9, 0))),
        raw_lines: Vec::new(),
    }
}

pub fn compiled(registers: u32) -> CompileOutcome {
    CompileOutcome {
        build: Build::Optimized,
        ok: true,
        diagnostics: Vec::new(),
        problem: None,
        resources: Some(resources(registers)),
        occupancy: Some(theoretical_occupancy(
            &resources(registers),
            &FLASH_PREFILL.default_geometry(),
            &h200().sm_limits(),
        )),
        geometry: Some(FLASH_PREFILL.default_geometry()),
        kernel_facts: Box::default(),
        image: Vec::new(),
        compile_ms: 65.0,
        load_ms: None,
    }
}

pub fn compile_error(line: usize, message: &str, source_line: &str) -> CompileOutcome {
    CompileOutcome {
        build: Build::Optimized,
        ok: false,
        diagnostics: vec![Diagnostic {
            severity: Severity::Error,
            file: FILE.into(),
            line,
            column: Some(5),
            message: message.into(),
            source_line: Some(source_line.into()),
        }],
        problem: None,
        resources: None,
        occupancy: None,
        geometry: None,
        kernel_facts: Box::default(),
        image: Vec::new(),
        compile_ms: 40.0,
        load_ms: None,
    }
}

fn blank(name: &str, shape: Shape) -> CaseOutcome {
    let summary = format!("hand-made case {name}");
    CaseOutcome {
        elapsed_ms: 3.0,
        oracle_ms: 1.0,
        ..CaseOutcome::unmeasured(
            name,
            &summary,
            shape.problem(),
            CaseStatus::NotRun,
            String::new(),
        )
    }
}

/// A case graded by the real comparison: reference 1.0 everywhere, output
/// off by `error` in the listed (row, head) pairs, exact elsewhere.
pub fn graded(name: &str, shape: Shape, error: f32, wrong: &[(usize, usize)]) -> CaseOutcome {
    let reference = vec![1.0f64; shape.q_elems()];
    let mut out = vec![1.0f32; shape.q_elems()];
    for &(row, head) in wrong {
        for d in 0..DH {
            out[Shape::q_index(row, head, d)] += error;
        }
    }
    let comparison = compare(shape.problem().output, TOLERANCE, &out, &reference);
    let integrity = Integrity::default();
    let mut case = blank(name, shape);
    case.status = if comparison.passed {
        CaseStatus::Pass
    } else {
        CaseStatus::Fail
    };
    let said = diagnose(&Reading {
        shape,
        planted_heads: 0,
        large_heads: 0,
        out: &out,
        reference: &reference,
        cmp: &comparison,
        integrity: &integrity,
        experiments: &Default::default(),
        tensors: None,
    });
    case.diagnosis = said.line;
    case.cause = said.cause.map(str::to_owned);
    case.comparison = Some(comparison);
    case.integrity = Some(integrity);
    case
}

pub fn passing(name: &str, shape: Shape) -> CaseOutcome {
    graded(name, shape, 2e-4, &[(0, 0)])
}

/// Every row from `first_row` on is wrong in query heads 0..4 (one KV group).
pub fn failing(name: &str, shape: Shape, first_row: usize) -> CaseOutcome {
    let wrong: Vec<(usize, usize)> = (first_row..shape.chunk_len)
        .flat_map(|r| (0..4).map(move |h| (r, h)))
        .collect();
    graded(name, shape, 0.05, &wrong)
}

pub fn timed_out(name: &str, shape: Shape) -> CaseOutcome {
    let mut case = blank(name, shape);
    case.status = CaseStatus::Timeout;
    case.diagnosis = "no result within 5.0 s: the kernel probably never finishes".into();
    case
}

pub fn not_run(name: &str, shape: Shape, reason: &str) -> CaseOutcome {
    let mut case = blank(name, shape);
    case.diagnosis = format!("not run: {reason}");
    case
}

/// Timing whose student samples are `starter_ms / ratio`, with a little spread.
pub fn timing(starter_ms: f64, ratio: f64) -> TimingOutcome {
    let starter: Vec<f64> = (0..15)
        .map(|i| starter_ms * (1.0 + 0.001 * i as f64))
        .collect();
    let student: Vec<f64> = starter.iter().map(|s| s / ratio).collect();
    let shape = Shape {
        chunk_len: 64,
        prefix_len: 64,
    };
    TimingOutcome {
        shape: TIMING_SHAPE.problem(),
        config: TimingConfig::default(),
        student: summarize(&student).expect("valid samples"),
        starter: summarize(&starter).expect("valid samples"),
        speedup: Some(speedup(&starter, &student).expect("paired samples")),
        output_check: compare(
            shape.problem().output,
            TOLERANCE,
            &vec![1.0; shape.q_elems()],
            &vec![1.0; shape.q_elems()],
        ),
        reference_check: ReferenceCheck {
            rows_checked: 64,
            max_rel_diff: 1e-12,
            agrees: true,
        },
        sm_clock_mhz: 1980.0,
        max_sm_clock_mhz: 1980.0,
        elapsed_ms: 900.0,
        rules: flashprof::protocol::TIMING_RULES,
        finding: None,
        starter_finding: None,
        floor: None,
        impossible: None,
        audited_launches: 32,
        phases: None,
        profile_refused: None,
        bandwidth: None,
        data: None,
        precision: None,
        drift: None,
        two_groups: None,
        stopped: None,
    }
}

/// One kernel's counters on the timing shape: made-up readings, placed on
/// the H200 roofline by the real analysis.
pub fn kernel_counters(
    duration_ms: f64,
    dram_mb: f64,
    sm_pct: f64,
    occupancy_pct: f64,
) -> KernelCounters {
    let measured = Measured {
        dram_bytes_read: dram_mb * 1e6 * 0.7,
        dram_bytes_write: dram_mb * 1e6 * 0.3,
        duration_ns: duration_ms * 1e6,
        sm_throughput_pct: Some(sm_pct),
        achieved_occupancy_pct: Some(occupancy_pct),
        // The FMA pipe a little below SM throughput, L2 well below.
        units: vec![
            UnitLoad::new(Unit::FmaPipe, sm_pct - 5.0),
            UnitLoad::new(Unit::L2, sm_pct * 0.6),
        ],
        full_breakdown: true,
        // L2 moves 8x the DRAM bytes and shared memory 40x, each at the
        // peak a GH100-like chip has a cycle times a 1.755 GHz clock.
        levels: vec![
            LevelTraffic {
                unit: Unit::L2,
                bytes: dram_mb * 1e6 * 8.0,
                peak_bytes_per_s: Some(5632.0 * 1.755e9),
            },
            LevelTraffic {
                unit: Unit::SharedMemory,
                bytes: dram_mb * 1e6 * 40.0,
                peak_bytes_per_s: Some(132.0 * 128.0 * 1.755e9),
            },
        ],
    };
    let value = |name: &str, value: f64| MetricValue {
        name: name.into(),
        value,
    };
    KernelCounters {
        metrics: vec![
            value(metrics::DRAM_BYTES_READ, measured.dram_bytes_read),
            value(metrics::DRAM_BYTES_WRITE, measured.dram_bytes_write),
            value(metrics::DURATION_NS, measured.duration_ns),
            value(metrics::SM_THROUGHPUT_PCT, sm_pct),
            value(metrics::ACHIEVED_OCCUPANCY_PCT, occupancy_pct),
            value(metrics::FMA_PIPE_BUSY_PCT, sm_pct - 5.0),
            value(metrics::L2_THROUGHPUT_PCT, sm_pct * 0.6),
        ],
        roofline: analyze(
            TIMING_SHAPE.problem().work,
            &measured,
            &h200().attribute_peaks(),
        )
        .ok(),
        error: None,
        reused: false,
        refused: None,
    }
}

/// The full tier for a student kernel 2.5x faster than the starter, reading
/// about twice the compulsory bytes where the starter reads ~50x.
pub fn counters_full() -> CountersOutcome {
    CountersOutcome {
        tier: CounterTier::Full,
        shape: TIMING_SHAPE.problem(),
        chip: "GH100".into(),
        passes: 9,
        student: kernel_counters(16.1, 105.0, 47.3, 61.0),
        starter: kernel_counters(40.3, 2650.0, 71.8, 74.0),
        peaks: Some(h200().attribute_peaks()),
        peaks_origin: Some("from the device attributes".into()),
        elapsed_ms: 2400.0,
    }
}

/// The embedded cases' names and shapes.
pub fn case_shapes() -> Vec<(String, Shape)> {
    embedded_cases()
        .into_iter()
        .map(|c| {
            let shape = c.declared_shape();
            (c.name, shape)
        })
        .collect()
}

pub fn report(
    gpu: Result<DeviceInfo, GpuProblem>,
    compile: CompileOutcome,
    cases: Vec<CaseOutcome>,
    timing: Option<TimingOutcome>,
) -> CheckReport {
    CheckReport {
        // Read from the cases when shown (as for a report saved before the
        // line was stored), so a test that edits a case sees it change.
        diagnosis: None,
        lab: "flash-prefill".into(),
        source_path: FILE.into(),
        seed: 42,
        gpu,
        compile,
        cases,
        timing,
        timing_error: None,
        counters: Vec::new(),
        lines: None,
        worker_restarts: 0,
        sanitizer: None,
        quick_build: None,
        phases: PhaseTimes::default(),
        link_lost: None,
    }
}

/// Every embedded case passing, timed at `ratio` over the starter.
pub fn all_pass(ratio: f64, registers: u32) -> CheckReport {
    let cases = case_shapes()
        .into_iter()
        .map(|(name, shape)| passing(&name, shape))
        .collect();
    report(
        Ok(h200()),
        compiled(registers),
        cases,
        Some(timing(40.0, ratio)),
    )
}

/// Compiled without a GPU: every case not run, nothing timed.
pub fn compile_only() -> CheckReport {
    let reason = no_gpu().describe();
    let cases = case_shapes()
        .into_iter()
        .map(|(name, shape)| not_run(&name, shape, &reason))
        .collect();
    report(Err(no_gpu()), compiled(38), cases, None)
}

pub mod drive {
    //! Driving a TUI model through `update`, as the runtime would.

    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    use flashprof::outcome::{CheckReport, Progress};
    use flashprof::tui::model::{CaseRow, CudaMissing, Model};
    use flashprof::tui::msg::{Effect, LibrarySearch, Msg, RunId};
    use flashprof::tui::theme::Theme;
    use flashprof::tui::update::update;
    use flashprof::tui::view::draw;
    use ratatui::backend::TestBackend;
    use ratatui::style::{Color, Modifier};
    use ratatui::Terminal;

    /// The sizes every screen is snapshotted at: the smallest terminal the
    /// TUI supports and a roomy one.
    pub const SIZES: [(u16, u16); 2] = [(80, 24), (120, 40)];

    /// `model` drawn by the real view into a test terminal of that size.
    pub fn screen(model: &Model, width: u16, height: u16) -> String {
        drawn(model, width, height).backend().to_string()
    }

    /// A test terminal of that size with `model` drawn by the real view.
    fn drawn(model: &Model, width: u16, height: u16) -> Terminal<TestBackend> {
        let mut terminal = Terminal::new(TestBackend::new(width, height)).expect("test terminal");
        terminal
            .draw(|frame| draw(frame, model))
            .expect("draw into the test backend");
        terminal
    }

    /// `model` drawn like [`screen`], with every run of styled cells marked
    /// `⟦fg bg modifiers⟧text⟦/⟧` (fg and bg as `fg:red`, `bg:blue`), so a
    /// snapshot holds the colours and emphasis as well as the text.
    pub fn styled_screen(model: &Model, width: u16, height: u16) -> String {
        let terminal = drawn(model, width, height);
        let buffer = terminal.backend().buffer();
        let mut out = String::new();
        for y in 0..height {
            let mut open: Option<String> = None;
            for x in 0..width {
                let cell = &buffer[(x, y)];
                let style = style_words(cell.fg, cell.bg, cell.modifier);
                if open != style {
                    if open.is_some() {
                        out.push_str("⟦/⟧");
                    }
                    if let Some(words) = &style {
                        out.push_str(&format!("⟦{words}⟧"));
                    }
                    open = style;
                }
                out.push_str(cell.symbol());
            }
            if open.is_some() {
                out.push_str("⟦/⟧");
            }
            out.push('\n');
        }
        out
    }

    /// `fg:red bold`, or `None` for the terminal's own style.
    fn style_words(fg: Color, bg: Color, modifier: Modifier) -> Option<String> {
        let mut words = Vec::new();
        if fg != Color::Reset {
            words.push(format!("fg:{fg}").to_lowercase());
        }
        if bg != Color::Reset {
            words.push(format!("bg:{bg}").to_lowercase());
        }
        words.extend(modifier.iter().map(|m| format!("{m:?}").to_lowercase()));
        (!words.is_empty()).then(|| words.join(" "))
    }

    /// Whether any cell of `model`'s screen has a colour of its own.
    pub fn uses_colour(model: &Model, width: u16, height: u16) -> bool {
        drawn(model, width, height)
            .backend()
            .buffer()
            .content()
            .iter()
            .any(|cell| cell.fg != Color::Reset || cell.bg != Color::Reset)
    }

    pub fn fresh() -> Model {
        let rows = super::case_shapes()
            .into_iter()
            .map(|(name, shape)| CaseRow {
                name,
                shape: shape.problem(),
            })
            .collect();
        Model::new(super::FILE, rows, Theme { color: false })
    }

    /// Saves `text` and returns the run it started, if it started one.
    pub fn save(model: &mut Model, text: &str) -> Option<RunId> {
        started(&update(model, Msg::FileChanged(text.as_bytes().to_vec())))
    }

    pub fn started(effects: &[Effect]) -> Option<RunId> {
        effects.iter().find_map(|e| match e {
            Effect::StartRun { run, .. } => Some(*run),
            _ => None,
        })
    }

    pub fn progress(model: &mut Model, run: RunId, progress: Progress) -> Vec<Effect> {
        update(
            model,
            Msg::Progress {
                run,
                progress: Box::new(progress),
            },
        )
    }

    pub fn finish(model: &mut Model, run: RunId, report: CheckReport) -> Vec<Effect> {
        update(
            model,
            Msg::RunFinished {
                run,
                result: Ok(Box::new(report)),
            },
        )
    }

    /// A full check of `text` ending in `report`, recorded in the history.
    pub fn complete(model: &mut Model, text: &str, report: CheckReport) {
        let run = save(model, text).expect("idle model starts a run");
        for effect in finish(model, run, report) {
            if let Effect::RecordRun { source, report } = effect {
                let summary = flashprof::app::history::RunSummary {
                    unix_ms: 1_700_000_000_000 + run * 60_000,
                    source_hash: flashprof::app::history::source_hash(&source),
                    outcome: Some(flashprof::app::history::RunOutcome::of(&report)),
                };
                update(model, Msg::Recorded(summary));
            }
        }
    }

    pub fn key(model: &mut Model, code: KeyCode) -> Vec<Effect> {
        update(model, Msg::Key(KeyEvent::new(code, KeyModifiers::NONE)))
    }

    /// Where the screens say a fetch installs.
    pub const FETCH_FOLDER: &str = "/home/student/.cache/flashprof/cuda-13.0";

    /// A library search's answer: NVRTC at `nvrtc` (in words), or none.
    pub fn searched(nvrtc: Option<&str>) -> LibrarySearch {
        LibrarySearch {
            nvrtc: nvrtc.map(str::to_owned),
            headers: nvrtc.map(|_| HEADERS.to_owned()),
            fetch_folder: Some(FETCH_FOLDER.into()),
        }
    }

    /// The CUDA headers a search finds beside NVRTC.
    pub const HEADERS: &str =
        "CUDA 13.0 headers in /site/nvidia/cu13/include (via Python site-packages)";

    /// A fresh model whose worker is on this machine, which found NVRTC
    /// and `headers` (or none).
    pub fn with_local_worker(headers: Option<&str>) -> Model {
        let mut model = fresh();
        let mut search = searched(Some(
            "/site/nvidia/cu13/lib/libnvrtc.so.13 (via Python site-packages)",
        ));
        search.headers = headers.map(str::to_owned);
        model.libraries = Some(search);
        model
    }

    /// A fresh model on a machine whose library search found no NVRTC, as the runtime starts it.
    pub fn without_nvrtc() -> Model {
        let mut model = fresh();
        model.cuda_missing = CudaMissing::after(&searched(None), None);
        model
    }
}

pub mod compare_drive {
    //! Driving the compare screen's model through its `update`.

    use flashprof::outcome::CheckReport;
    use flashprof::tui::compare::model::{Column, CompareModel, Pair};
    use flashprof::tui::compare::msg::{CompareEffect, CompareMsg};
    use flashprof::tui::compare::update::update;
    use flashprof::tui::model::CaseRow;
    use flashprof::tui::msg::RunId;
    use flashprof::tui::theme::Theme;

    pub fn fresh() -> CompareModel {
        let rows = super::case_shapes()
            .into_iter()
            .map(|(name, shape)| CaseRow {
                name,
                shape: shape.problem(),
            })
            .collect();
        let files = Pair {
            a: "mine.cu".to_string(),
            b: "reference.cu".to_string(),
        };
        CompareModel::new(files, rows, Theme { color: false })
    }

    /// Saves `text` into `column` and returns the effects.
    pub fn save(model: &mut CompareModel, column: Column, text: &str) -> Vec<CompareEffect> {
        let bytes = text.as_bytes().to_vec();
        update(model, CompareMsg::FileChanged { column, bytes })
    }

    /// The comparison the effects start, with its texts.
    pub fn started(effects: &[CompareEffect]) -> Option<(RunId, Pair<String>)> {
        effects.iter().find_map(|e| match e {
            CompareEffect::StartComparison { run, sources } => Some((*run, sources.clone())),
            CompareEffect::Quit => None,
        })
    }

    pub fn finish(
        model: &mut CompareModel,
        run: RunId,
        a: CheckReport,
        b: CheckReport,
    ) -> Vec<CompareEffect> {
        let result = Ok(Box::new(Pair { a, b }));
        update(model, CompareMsg::Finished { run, result })
    }

    /// Both files read and compared, ending in `a` and `b`.
    pub fn compared(a: CheckReport, b: CheckReport) -> CompareModel {
        let mut model = fresh();
        save(&mut model, Column::A, "a v1");
        let (run, _) = started(&save(&mut model, Column::B, "b v1")).expect("both read: starts");
        finish(&mut model, run, a, b);
        model
    }
}

/// A check stopped by a compile error on line 19 of the student's file
/// (`source_line` is that line as the student wrote it): every case not run.
pub fn compile_error_report(source_line: &str) -> CheckReport {
    let reason = "not run: the kernel did not compile";
    let cases = case_shapes()
        .into_iter()
        .map(|(n, s)| not_run(&n, s, reason))
        .collect();
    let compile = compile_error(19, "identifier \"flaot\" is undefined", source_line);
    report(Ok(h200()), compile, cases, None)
}

pub mod replay {
    //! A history store replayed the way `flashprof replay` does it.

    use flashprof::app::history::HistoryStore;
    use flashprof::tui::model::{Completed, Model, Replay};
    use flashprof::tui::theme::Theme;
    use flashprof::tui::update::show_replay_position;
    use std::path::Path;
    use std::time::Duration;

    /// The store whose log is `log`, as a paused replay at its
    /// `position`-th checked run.
    pub fn paused_at(log: &Path, position: usize) -> Model {
        let store = HistoryStore::locate(log);
        let history = store.read().expect("read the history");
        let (runs, summaries): (Vec<Completed>, Vec<_>) = history
            .records
            .into_iter()
            .filter_map(|record| {
                let summary = record.summary();
                let source = store.source(&record.source_hash).unwrap_or_default();
                Some((
                    Completed {
                        source,
                        report: record.report?,
                    },
                    summary,
                ))
            })
            .unzip();
        let label = runs[0].report.source_path.clone();
        let mut model = Model::new(&label, Vec::new(), Theme { color: false });
        let mut replay = Replay::new(runs, summaries, Duration::from_secs(1));
        replay.position = position;
        model.replay = Some(replay);
        show_replay_position(&mut model);
        model
    }
}
