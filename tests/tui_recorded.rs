//! The screen drawn from the kernel ladder recorded on the H200 (shipped
//! for `flashprof replay --ladder`): measured figures, not hand-made ones,
//! at each size the TUI is designed for. The snapshots show the layout with
//! real figures and diagnoses, and the roofline of counters saved before the
//! memory levels existed (DRAM point only, with the earlier rungs as a
//! trail); docs/screens/ holds copies.

mod tui_support;

use flashprof::app::history::HistoryStore;
use flashprof::tui::model::{Completed, Model, Replay};
use flashprof::tui::theme::Theme;
use flashprof::tui::update::show_replay_position;
use std::time::Duration;
use tui_support::drive::screen;

/// The recorded ladder as a paused replay at its `position`-th run.
fn ladder_at(position: usize) -> Model {
    let dir = tempfile::tempdir().expect("temp folder");
    let path = flashprof::embedded::LADDER
        .unpack(dir.path())
        .expect("unpack the recorded ladder");
    let store = HistoryStore::locate(&path);
    let history = store.read().expect("read the recorded history");
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
    model.replay = Some(Replay {
        runs,
        summaries,
        position,
        paused: true,
        interval: Duration::from_secs(1),
    });
    show_replay_position(&mut model);
    model
}

#[test]
fn the_top_rung_of_the_recorded_ladder_at_every_size() {
    let mut model = ladder_at(4);
    for (width, height) in [(80, 24), (120, 40), (160, 50)] {
        let text = screen(&model, width, height);
        insta::assert_snapshot!(format!("ladder_rung_4_{width}x{height}"), text);
        assert!(text.contains("✓ pass"), "{text}");
    }
    model.present = true;
    insta::assert_snapshot!("ladder_rung_4_present_120x40", screen(&model, 120, 40));
}

#[test]
fn the_trend_over_the_recorded_ladder_rises_with_each_rung() {
    let model = ladder_at(4);
    let speedups: Vec<f64> = model.trend(|o| o.speedup).into_iter().flatten().collect();
    assert_eq!(speedups.len(), 5, "{speedups:?}");
    assert!(speedups.windows(2).all(|w| w[1] > w[0]), "{speedups:?}");
}

#[test]
fn the_recorded_ladder_draws_its_rungs_on_the_roofline_without_memory_levels() {
    let model = ladder_at(4);
    let plot = model.roofline_plot().expect("the recording has counters");
    let marks: Vec<&str> = plot.points.iter().map(|p| p.mark).collect();
    // Four rungs before this one, the starter, and the kernel at DRAM only:
    // these reports predate the L2 and shared-memory levels.
    assert_eq!(marks, ["1", "2", "3", "4", "○", "●"]);
    assert!(plot
        .roofs
        .iter()
        .all(|r| r.name != "L2" && r.name != "smem"));
    let rates: Vec<f64> = plot.points.iter().map(|p| p.flops_per_s).collect();
    assert!(
        rates[1] < rates[2] && rates[2] < rates[3] && rates[3] < rates[5],
        "{rates:?}"
    );
}
