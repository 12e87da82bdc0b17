//! The screen drawn from the kernel ladder recorded on the H200 (shipped
//! for `flashprof replay --ladder`): measured figures, not hand-made ones,
//! at each size the TUI is designed for. The snapshots show the layout with
//! real figures and diagnoses, and the roofline at the top rung: every roof,
//! the kernel at shared memory, L2 and DRAM, and the saves before it as a
//! trail. The other sessions recorded there (the walkthrough of
//! scripts/gpu-tui-session.sh, the decode walk) are drawn the same way, save
//! by save. docs/screens/ holds copies (scripts/refresh-screens.sh).

mod tui_support;

use crossterm::event::KeyCode;
use flashprof::embedded::RecordedSession;
use flashprof::tui::model::{Model, Overlay};
use tui_support::drive::{key, screen};
use tui_support::replay::paused_at;

/// A recorded session as a paused replay at its `position`-th run.
fn recorded_at(session: &RecordedSession, position: usize) -> Model {
    let dir = tempfile::tempdir().expect("temp folder");
    let path = session.unpack(dir.path()).expect("unpack the recording");
    paused_at(&path, position)
}

/// The recorded ladder as a paused replay at its `position`-th run.
fn ladder_at(position: usize) -> Model {
    recorded_at(&flashprof::embedded::LADDER, position)
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

/// The lecture sizes: the smallest terminal, a laptop's and a projector's.
const LECTURE_SIZES: [(u16, u16); 3] = [(80, 24), (120, 40), (200, 60)];

/// Where plain TF32 is in the recording: fast, and failing six cases.
const PLAIN_TF32: usize = 5;

#[test]
fn the_lecture_replay_names_each_rung_and_its_verdict_at_every_size() {
    let rungs = [
        (0, "starter", "PASS 14/14  The lab's starter kernel"),
        (1, "rung_1", "PASS 14/14  Ladder rung 1: tile the rows."),
        (PLAIN_TF32, "plain_tf32", "FAIL 8/14  Ladder rung 5"),
        (TOP_RUNG, "top_rung", "PASS 14/14  Ladder rung 5"),
    ];
    for (position, name, said) in rungs {
        let mut model = ladder_at(position);
        model.present = true;
        for (width, height) in LECTURE_SIZES {
            let text = screen(&model, width, height);
            insta::assert_snapshot!(format!("ladder_present_{name}_{width}x{height}"), text);
            let header = text.lines().next().unwrap_or_default();
            assert!(
                header.starts_with(&format!("\"flashprof replay {}/7 paused", position + 1)),
                "{text}"
            );
            assert!(header.contains(said), "{name}: {text}");
        }
    }
}

#[test]
fn plain_tf32_says_it_fails_instead_of_showing_the_fastest_speedup_of_the_walk() {
    let mut model = ladder_at(PLAIN_TF32);
    model.present = true;
    for (width, height) in LECTURE_SIZES {
        let text = screen(&model, width, height);
        let speedup: Vec<&str> = text
            .lines()
            .skip_while(|l| !l.contains("SPEEDUP"))
            .take_while(|l| !l.trim_start_matches('"').starts_with('┗'))
            .collect();
        let half = |l: &&str| l.chars().take(l.chars().count() / 2).collect::<String>();
        assert!(
            speedup.iter().any(|l| half(l).contains("fails 6 of 14")),
            "{text}"
        );
        assert!(
            speedup.iter().all(|l| !half(l).contains('█')),
            "the speedup in blocks:\n{text}"
        );
    }
}

/// The roofline panel's rows of `screen`, from its left border on: the
/// rate labels lead each row, the intensity labels are the row over the
/// caption.
fn roofline_panel(screen: &str) -> Vec<String> {
    let lines: Vec<&str> = screen.lines().collect();
    let top = lines
        .iter()
        .position(|l| l.contains("┏ roofline"))
        .expect("a roofline panel");
    let chars: Vec<char> = lines[top].chars().collect();
    let column = (0..chars.len())
        .find(|&i| {
            chars[i..]
                .iter()
                .collect::<String>()
                .starts_with("┏ roofline")
        })
        .expect("the panel's corner");
    lines[top + 1..]
        .iter()
        .take_while(|l| l.chars().nth(column) != Some('┗'))
        .map(|l| l.chars().skip(column + 1).collect())
        .collect()
}

/// The labels of both axes: the first three columns of every row of the
/// plot (the rate axis, `0.1` to `1k` here) and the row of intensities
/// under it.
fn axis_labels(panel: &[String]) -> (Vec<String>, String) {
    let caption = panel
        .iter()
        .position(|l| l.starts_with("kernel"))
        .expect("the caption");
    let rates = panel[..caption - 1]
        .iter()
        .map(|l| l.chars().take(3).collect())
        .collect();
    (rates, panel[caption - 1].clone())
}

#[test]
fn the_roofline_keeps_its_axes_and_labels_its_decades_through_the_replay() {
    let frames: Vec<_> = [1, TOP_RUNG]
        .into_iter()
        .map(|position| {
            let mut model = ladder_at(position);
            model.present = true;
            screen(&model, 120, 40)
        })
        .collect();
    let axes: Vec<_> = frames
        .iter()
        .map(|frame| axis_labels(&roofline_panel(frame)))
        .collect();
    assert_eq!(axes[0], axes[1], "{}\n{}", frames[0], frames[1]);
    // Decades on both axes: TFLOP/s up, flop per byte across.
    let (rates, intensities) = &axes[0];
    let rates: Vec<&str> = rates
        .iter()
        .map(|r| r.trim())
        .filter(|r| !r.is_empty())
        .collect();
    assert_eq!(rates, ["1k", "100", "10", "1"], "{}", frames[0]);
    let intensities: Vec<&str> = intensities.split_whitespace().collect();
    assert!(
        intensities.windows(3).any(|w| w == ["1", "10", "100"]),
        "{}",
        frames[0]
    );
    assert!(frames[0].contains("flop/B →, TFLOP/s ↑"), "{}", frames[0]);
    // The plot itself is fitted to the whole walk, not to one run.
    let plots: Vec<_> = [0, TOP_RUNG]
        .map(|p| ladder_at(p).roofline_plot().expect("counters"))
        .into_iter()
        .collect();
    assert_eq!(plots[0].axes(), plots[1].axes());
    assert_ne!(
        plots[0].fitted_axes(),
        plots[1].fitted_axes(),
        "a walk the axes must span"
    );
}

/// The walkthrough recorded live on the H200 (scripts/gpu-tui-session.sh):
/// each save, in the order saved, and the words its header must say.
const WALKTHROUGH: [(&str, &str); 5] = [
    ("starter", "PASS 14/14"),
    ("compile_error", "COMPILE ERROR"),
    ("missing_l_rescale", "FAIL"),
    ("tile_edge", "FAIL"),
    ("reference", "PASS 14/14"),
];

#[test]
fn the_recorded_walkthrough_at_every_save_and_size() {
    for (position, (name, said)) in WALKTHROUGH.into_iter().enumerate() {
        let mut model = recorded_at(&flashprof::embedded::WALKTHROUGH, position);
        for (width, height) in LECTURE_SIZES {
            let text = screen(&model, width, height);
            let header = text.lines().next().unwrap_or_default();
            assert!(header.contains(said), "{name} at {width}x{height}: {text}");
            insta::assert_snapshot!(format!("walkthrough_{name}_{width}x{height}"), text);
        }
        model.present = true;
        insta::assert_snapshot!(
            format!("walkthrough_{name}_present_120x40"),
            screen(&model, 120, 40)
        );
    }
}

#[test]
fn a_failing_case_of_the_recorded_walkthrough_opens_as_a_heatmap() {
    // The keys the live session pressed: the next failing case, then open it.
    let mut model = recorded_at(&flashprof::embedded::WALKTHROUGH, 2);
    key(&mut model, KeyCode::Tab);
    key(&mut model, KeyCode::Enter);
    assert!(
        matches!(model.overlay, Some(Overlay::Heatmap { .. })),
        "{:?}",
        model.overlay
    );
    let text = screen(&model, 120, 40);
    insta::assert_snapshot!("walkthrough_missing_l_rescale_heatmap_120x40", text);
}

/// The decode walk recorded on the H200 (scripts/gpu-ladder-session.sh
/// decode): the starter, its three steps, the reference, on the projector.
const DECODE_WALK: [&str; 5] = [
    "starter",
    "coalesced_head",
    "kv_group",
    "split",
    "reference",
];

#[test]
fn the_recorded_decode_walk_on_the_projector_at_every_size() {
    for (position, name) in DECODE_WALK.into_iter().enumerate() {
        let mut model = recorded_at(&flashprof::embedded::DECODE_WALK, position);
        model.present = true;
        for (width, height) in LECTURE_SIZES {
            let text = screen(&model, width, height);
            let header = text.lines().next().unwrap_or_default();
            assert!(
                header.contains("PASS"),
                "{name} at {width}x{height}: {text}"
            );
            insta::assert_snapshot!(format!("decode_walk_{name}_present_{width}x{height}"), text);
        }
    }
}

/// docs/screens/ shows the screens these tests draw: every copy
/// scripts/refresh-screens.sh makes from the snapshots is the one there.
#[test]
fn the_screens_in_the_docs_are_the_current_snapshots() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let fresh = tempfile::tempdir().expect("temp folder");
    let status = std::process::Command::new("bash")
        .arg(root.join("scripts/refresh-screens.sh"))
        .env("SCREENS_DIR", fresh.path())
        .status()
        .expect("run scripts/refresh-screens.sh");
    assert!(status.success(), "{status}");
    let mut stale = Vec::new();
    let mut copies = 0;
    for entry in std::fs::read_dir(fresh.path()).expect("list the copies") {
        let path = entry.expect("an entry").path();
        let name = path.file_name().expect("a name").to_owned();
        let made = std::fs::read_to_string(&path).expect("read the copy");
        let shown = std::fs::read_to_string(root.join("docs/screens").join(&name));
        if shown.ok().as_deref() != Some(made.as_str()) {
            stale.push(name.to_string_lossy().into_owned());
        }
        copies += 1;
    }
    assert!(copies > 30, "only {copies} copies made");
    assert!(
        stale.is_empty(),
        "run scripts/refresh-screens.sh: stale or missing {stale:?}"
    );
}
