//! Frame time of the TUI: the whole screen of a busy model drawn into
//! ratatui's TestBackend, many times, at three terminal sizes.
//!
//! The model is the heaviest the TUI shows: fourteen graded cases (one
//! failing), timing with a trend of past saves, collected counters, and the
//! heatmap overlay open, plus the lecture layout of the same model. Before
//! each timed frame the terminal is cleared, so every frame repaints every
//! cell: the cost of a first draw or a resize, the worst a redraw can be.
//!
//! `cargo bench --bench render` (optionally `-- FRAMES`) prints the median
//! and the 99th percentile per frame. Under `cargo test --all-targets` (no
//! `--bench` argument) it draws a few frames only, as a smoke test of
//! every layout at every size in the debug build. No criterion: two numbers per size
//! are all docs/TUI.md quotes, and a plain loop keeps the dependency list
//! short.

#[path = "../tests/tui_support/mod.rs"]
mod tui_support;

use std::time::{Duration, Instant};

use crossterm::event::KeyCode;
use flashprof::tui::model::Model;
use flashprof::tui::view::draw;
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use tui_support::drive::{complete, fresh, key};
use tui_support::*;

const SIZES: [(u16, u16); 3] = [(80, 24), (120, 40), (200, 60)];
const BENCH_FRAMES: usize = 2000;
const SMOKE_FRAMES: usize = 5;

/// Three saves of history, the last with a failing case, counters and timing.
fn busy_model() -> Model {
    let mut model = fresh();
    complete(&mut model, "v1", all_pass(1.2, 40));
    complete(&mut model, "v2", all_pass(1.9, 48));
    let mut last = all_pass(2.4, 56);
    let shape = case_shapes()[1].1;
    last.cases[1] = failing("planted-overflow", shape, 40);
    last.counters = vec![Ok(counters_full())];
    complete(&mut model, "v3", last);
    key(&mut model, KeyCode::Tab);
    key(&mut model, KeyCode::Enter);
    model
}

/// Per-frame durations of `frames` full repaints of `model`.
fn time_frames(model: &mut Model, width: u16, height: u16, frames: usize) -> Vec<Duration> {
    model.width = width;
    model.height = height;
    let mut terminal = Terminal::new(TestBackend::new(width, height)).expect("test terminal");
    let mut times = Vec::with_capacity(frames);
    for _ in 0..frames {
        terminal.clear().expect("clear the test terminal");
        let start = Instant::now();
        terminal
            .draw(|frame| draw(frame, model))
            .expect("draw into the test backend");
        times.push(start.elapsed());
    }
    times
}

/// The value below which `share` of the sorted `times` fall.
fn quantile(times: &[Duration], share: f64) -> Duration {
    let index = ((times.len() - 1) as f64 * share).round() as usize;
    times[index]
}

fn main() {
    // `cargo bench` passes `--bench`; a bare number among the arguments is the frame count.
    let args: Vec<String> = std::env::args().skip(1).collect();
    let benching = args.iter().any(|a| a == "--bench");
    let frames = args
        .iter()
        .find_map(|a| a.parse().ok())
        .unwrap_or(if benching { BENCH_FRAMES } else { SMOKE_FRAMES });
    let mut model = busy_model();
    println!("full-screen repaints, {frames} frames each, TestBackend");
    println!(
        "{:<10} {:<8} {:>10} {:>10}",
        "layout", "size", "median", "p99"
    );
    for present in [false, true] {
        model.present = present;
        if present {
            // The lecture layout shows the heatmap itself.
            model.overlay = None;
        }
        let layout = if present { "lecture" } else { "heatmap" };
        for (width, height) in SIZES {
            let mut times = time_frames(&mut model, width, height, frames);
            times.sort();
            println!(
                "{layout:<10} {:<8} {:>8.1}µs {:>8.1}µs",
                format!("{width}x{height}"),
                quantile(&times, 0.5).as_secs_f64() * 1e6,
                quantile(&times, 0.99).as_secs_f64() * 1e6,
            );
        }
    }
}
