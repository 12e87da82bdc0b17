//! The screen drawn from the kernel ladder recorded on the H200 (shipped
//! for `flashprof replay --ladder`): measured figures, not hand-made ones,
//! at each size the TUI is designed for. The snapshots show the layout with
//! real figures and diagnoses, and the roofline at the top rung: every roof,
//! the kernel at shared memory, L2 and DRAM, and the saves before it as a
//! trail; docs/screens/ holds copies.

mod tui_support;

use tui_support::drive::screen;
use tui_support::replay::paused_at;

/// The recorded ladder as a paused replay at its `position`-th run.
fn ladder_at(position: usize) -> flashprof::tui::model::Model {
    let dir = tempfile::tempdir().expect("temp folder");
    let path = flashprof::embedded::LADDER
        .unpack(dir.path())
        .expect("unpack the recorded ladder");
    paused_at(&path, position)
}

/// Where the top rung is in the recording: the starter, rungs 1-4, plain
/// TF32, then the top rung (scripts/gpu-ladder-session.sh).
const TOP_RUNG: usize = 6;

#[test]
fn the_top_rung_of_the_recorded_ladder_at_every_size() {
    let mut model = ladder_at(TOP_RUNG);
    for (width, height) in [(80, 24), (120, 40), (160, 50)] {
        let text = screen(&model, width, height);
        insta::assert_snapshot!(format!("ladder_top_rung_{width}x{height}"), text);
        assert!(text.contains("✓ pass"), "{text}");
    }
    model.present = true;
    insta::assert_snapshot!("ladder_top_rung_present_120x40", screen(&model, 120, 40));
}

#[test]
fn the_trend_over_the_recorded_ladder_rises_with_each_rung() {
    let model = ladder_at(4);
    let speedups: Vec<f64> = model.trend(|o| o.speedup).into_iter().flatten().collect();
    assert_eq!(speedups.len(), 5, "{speedups:?}");
    assert!(speedups.windows(2).all(|w| w[1] > w[0]), "{speedups:?}");
}

#[test]
fn the_recorded_ladder_climbs_the_roofline_to_the_top_rung_at_every_memory_level() {
    let model = ladder_at(TOP_RUNG);
    let plot = model.roofline_plot().expect("the recording has counters");
    let mark_of = |role_filter: &dyn Fn(&&flashprof::tui::plot::PlotPoint) -> bool| {
        plot.points
            .iter()
            .filter(role_filter)
            .map(|p| p.mark)
            .collect::<Vec<_>>()
    };
    // The six saves before it (starter, rungs 1-4, plain TF32) as a trail.
    let trail = mark_of(&|p| p.mark.chars().all(|c| c.is_ascii_digit()));
    assert_eq!(trail, ["1", "2", "3", "4", "5", "6"], "{:?}", plot.points);
    // The top rung at each memory level, and the starter.
    for mark in ["▲", "◆", "●", "○"] {
        assert_eq!(
            mark_of(&|p| p.mark == mark).len(),
            1,
            "{mark}: {:?}",
            plot.points
        );
    }
    // Every roof the H200 has: three memory levels, three compute pipes.
    for roof in ["smem", "L2", "DRAM", "FP32", "TF32", "BF16"] {
        assert!(
            plot.roofs.iter().any(|r| r.name == roof),
            "{roof}: {:?}",
            plot.roofs
                .iter()
                .map(|r| r.name.as_str())
                .collect::<Vec<_>>()
        );
    }
    // Each rung does more useful work a second than the one below; the top
    // rung more than all of them.
    let rate = |mark: &str| {
        plot.points
            .iter()
            .find(|p| p.mark == mark)
            .map(|p| p.flops_per_s)
            .expect("the mark is drawn")
    };
    let rungs = ["2", "3", "4", "5", "●"].map(rate);
    assert!(rungs.windows(2).all(|w| w[0] < w[1]), "{rungs:?}");
    // Shared memory moves the most bytes, DRAM the fewest: the points sit
    // left to right in that order at one height.
    let (smem, l2, dram) = (
        plot.points.iter().find(|p| p.mark == "▲").expect("smem"),
        plot.points.iter().find(|p| p.mark == "◆").expect("L2"),
        plot.points.iter().find(|p| p.mark == "●").expect("DRAM"),
    );
    assert!(smem.flop_per_byte < l2.flop_per_byte && l2.flop_per_byte < dram.flop_per_byte);
    assert_eq!(smem.flops_per_s, dram.flops_per_s);
}
