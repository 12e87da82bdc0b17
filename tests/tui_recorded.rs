//! The screen drawn from the kernel ladder recorded on the H200 (shipped
//! for `flashprof replay --ladder`): measured figures, not hand-made ones,
//! at each size the TUI is designed for. The snapshots show the layout with
//! real figures and diagnoses (the recording holds no counters, so no
//! roofline); docs/screens/ holds copies.

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
