//! A history store is hostile input: one written by hand, or by another
//! flashprof, can hold any roofline. These take the recorded ladder, plant
//! hostile figures in its stored reports, replay every run and draw it at
//! sizes from 1x1 up, with the counters overlay and the present view: a replay must never
//! panic, hang or put a non-finite coordinate on the plot.

mod tui_support;

use flashprof::app::history::HistoryStore;
use flashprof::tui::model::Overlay;
use flashprof::tui::plot::{PointRole, RoofKind, RooflinePlot};
use flashprof::tui::update::show_replay_position;
use serde_json::{json, Value};

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;
use tui_support::drive::screen;
use tui_support::replay::paused_at;

/// The recorded ladder's log unpacked into `dir`, each record's report passed
/// through `plant` (with the record's index) before it is written back.
fn planted_ladder(dir: &Path, plant: &dyn Fn(&mut Value, usize)) -> std::path::PathBuf {
    let path = flashprof::embedded::LADDER
        .unpack(dir)
        .expect("unpack the recorded ladder");
    let text = std::fs::read_to_string(&path).expect("read the log");
    let mut out = String::new();
    for (i, line) in text.lines().enumerate() {
        let mut record: Value = serde_json::from_str(line).expect("a record");
        if record["report"].is_object() {
            plant(&mut record["report"], i);
        }
        out.push_str(&serde_json::to_string(&record).expect("json"));
        out.push('\n');
    }
    std::fs::write(&path, out).expect("write the planted log");
    path
}

/// Every run of the planted store, replayed and drawn at every size, on a
/// thread given `limit` to finish; the roofline plot at each run.
fn replay_everywhere(
    plant: impl Fn(&mut Value, usize) + Send + 'static,
    limit: Duration,
) -> Vec<Option<RooflinePlot>> {
    let (done, finished) = mpsc::channel();
    std::thread::spawn(move || {
        let dir = tempfile::tempdir().expect("temp folder");
        let path = planted_ladder(dir.path(), &plant);
        let history = HistoryStore::locate(&path).read().expect("read");
        assert_eq!(
            history.unreadable_lines, 0,
            "every planted record still reads"
        );
        let count = history
            .records
            .iter()
            .filter(|r| r.report.is_some())
            .count();
        let mut model = paused_at(&path, 0);
        let mut plots = Vec::new();
        for position in 0..count {
            model.replay.as_mut().expect("replaying").position = position;
            show_replay_position(&mut model);
            let plot = model.roofline_plot();
            if let Some(plot) = &plot {
                assert_drawable(plot);
            }
            plots.push(plot);
            // The main screen, the counters overlay and the present view.
            for (overlay, present) in [
                (None, false),
                (Some(Overlay::Counters), false),
                (None, true),
            ] {
                model.overlay = overlay;
                model.present = present;
                for (w, h) in [(1, 1), (12, 5), (80, 24), (120, 40)] {
                    screen(&model, w, h);
                }
            }
            model.overlay = None;
            model.present = false;
        }
        done.send(plots).expect("report back");
    });
    match finished.recv_timeout(limit) {
        Ok(plots) => plots,
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("the replay did not finish in {limit:?}"),
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("the replay panicked"),
    }
}

/// Every figure the plot puts on log axes is a positive finite number.
fn assert_drawable(plot: &RooflinePlot) {
    let positive = |x: f64| x.is_finite() && x > 0.0;
    for p in &plot.points {
        assert!(
            positive(p.flop_per_byte) && positive(p.flops_per_s),
            "{p:?}"
        );
    }
    for roof in &plot.roofs {
        let rate = match roof.kind {
            RoofKind::Compute { flops_per_s } => flops_per_s,
            RoofKind::Memory { bytes_per_s } => bytes_per_s,
        };
        assert!(positive(rate), "{roof:?}");
    }
}

/// The last counters tier's outcome of a report.
fn outcome(report: &mut Value) -> &mut Value {
    let counters = report["counters"].as_array_mut().expect("counters");
    let last = counters.last_mut().expect("a tier");
    &mut last["Ok"]
}

const LIMIT: Duration = Duration::from_secs(60);

#[test]
fn the_untouched_ladder_replays_everywhere() {
    let plots = replay_everywhere(|_, _| {}, LIMIT);
    assert!(plots.iter().all(Option::is_some));
}

/// Figures JSON can hold that no GPU gives: zero, negative, the largest
/// and the smallest normal numbers.
const ABSURD: [f64; 6] = [0.0, -0.0, -1.0, 1e308, 1e-308, -1e308];

#[test]
fn absurd_peaks_replay_without_panic_or_hang() {
    for x in ABSURD {
        for roof in ["fp32_flops", "tf32_flops", "dram_bytes"] {
            replay_everywhere(
                move |report, _| outcome(report)["peaks"][roof]["per_s"] = json!(x),
                LIMIT,
            );
        }
    }
}

#[test]
fn absurd_levels_replay_without_panic_or_hang() {
    for x in ABSURD {
        for field in ["bytes", "flop_per_byte", "peak_bytes_per_s"] {
            replay_everywhere(
                move |report, _| {
                    let roofline = &mut outcome(report)["student"]["roofline"];
                    for level in roofline["levels"].as_array_mut().into_iter().flatten() {
                        level[field] = json!(x);
                    }
                },
                LIMIT,
            );
        }
    }
}

#[test]
fn absurd_roofline_figures_replay_without_panic_or_hang() {
    for x in ABSURD {
        for field in [
            "arithmetic_intensity",
            "achieved_gflops",
            "ridge_point",
            "fp32_peak_pct",
            "dram_bytes",
        ] {
            replay_everywhere(
                move |report, i| {
                    // Some runs planted, some not: the trail mixes both.
                    if i % 2 == 0 {
                        outcome(report)["student"]["roofline"][field] = json!(x);
                        outcome(report)["starter"]["roofline"][field] = json!(x);
                    }
                },
                LIMIT,
            );
        }
    }
}

#[test]
fn levels_of_other_units_duplicates_and_thousands_are_one_level_each() {
    let plots = replay_everywhere(
        |report, _| {
            let roofline = &mut outcome(report)["student"]["roofline"];
            let levels = roofline["levels"].as_array().cloned().unwrap_or_default();
            let mut planted = Vec::new();
            for unit in ["dram", "tensor_pipe", "l1"] {
                planted.push(json!({
                    "unit": unit, "bytes": 1e6, "flop_per_byte": 3.0, "peak_bytes_per_s": 1e15,
                }));
            }
            for _ in 0..20_000 {
                planted.extend(levels.iter().cloned());
            }
            roofline["levels"] = Value::Array(planted);
        },
        LIMIT,
    );
    for plot in plots.iter().flatten() {
        let roofs: Vec<&str> = plot.roofs.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(roofs, ["FP32", "TF32", "BF16", "smem", "L2", "DRAM"]);
        let marks: Vec<&str> = plot.points.iter().map(|p| p.mark).collect();
        assert_eq!(marks.iter().filter(|m| **m == "◆").count(), 1, "{marks:?}");
        assert_eq!(marks.iter().filter(|m| **m == "▲").count(), 1, "{marks:?}");
    }
}

#[test]
fn a_report_whose_counters_failed_replays_with_the_trail_of_the_others() {
    let plots = replay_everywhere(
        |report, i| {
            if i % 2 == 1 {
                let counters = report["counters"].as_array_mut().expect("counters");
                *counters.last_mut().expect("a tier") = json!({"Err": {
                    "reason": "CUPTI said no", "detail": "", "fix": "",
                }});
            }
        },
        LIMIT,
    );
    for (i, plot) in plots.iter().enumerate() {
        assert_eq!(plot.is_some(), i % 2 == 0, "run {i}");
    }
}

#[test]
fn a_level_of_a_unit_this_flashprof_does_not_know_costs_only_its_record() {
    let dir = tempfile::tempdir().expect("temp folder");
    let path = planted_ladder(dir.path(), &|report, i| {
        if i == 3 {
            outcome(report)["student"]["roofline"]["levels"][0]["unit"] = json!("l3");
        }
    });
    let history = HistoryStore::locate(&path).read().expect("read");
    assert_eq!(history.unreadable_lines, 1);
    assert_eq!(history.records.len(), 6);
}

#[test]
fn a_trail_of_thousands_of_saves_draws_its_newest_nine() {
    let dir = tempfile::tempdir().expect("temp folder");
    let path = planted_ladder(dir.path(), &|_, _| {});
    let mut model = paused_at(&path, 6);
    let recorded = model.history.clone();
    model.history = recorded.iter().cycle().take(5000).cloned().collect();
    let started = std::time::Instant::now();
    let plot = model.roofline_plot().expect("a plot");
    let earlier = plot
        .points
        .iter()
        .filter(|p| p.role == PointRole::Earlier)
        .count();
    assert_eq!(earlier, 9);
    screen(&model, 120, 40);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn absurd_level_figures_are_shown_short() {
    let dir = tempfile::tempdir().expect("temp folder");
    let path = planted_ladder(dir.path(), &|report, _| {
        let roofline = &mut outcome(report)["student"]["roofline"];
        roofline["arithmetic_intensity"] = json!(1e300);
        for level in roofline["levels"].as_array_mut().into_iter().flatten() {
            level["flop_per_byte"] = json!(1e308);
            level["peak_bytes_per_s"] = json!(1e308);
        }
    });
    let mut model = paused_at(&path, 6);
    model.overlay = Some(Overlay::Counters);
    let text = screen(&model, 120, 40);
    let longest_number = text
        .split(|c: char| !c.is_ascii_digit())
        .map(str::len)
        .max()
        .unwrap_or(0);
    assert!(longest_number < 13, "{text}");
    assert!(text.contains("1.00e308"), "{text}");
}
