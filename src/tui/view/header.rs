//! The top line (file, what is happening, which GPU) and the bottom line
//! (a notice, or the main keys).

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use crate::display::line_for_display;
use crate::facts::device::{DeviceInfo, GpuProblem};
use crate::outcome::CheckReport;
use crate::tui::model::{CaseRow, CudaMissing, CudaPiece, Model, Phase, Remedy};
use crate::tui::theme::Theme;

use super::layout::footer_lines;
use super::text::between_words;

pub fn draw(frame: &mut Frame, area: Rect, model: &Model) {
    let theme = model.theme;
    let mut spans = vec![Span::styled("flashprof ", theme.accent())];
    // A replay names each run's kernel after its verdict instead.
    if model.replay.is_none() {
        spans.push(Span::raw(format!("{}  ", model.file_label)));
    }
    spans.extend(activity(model));
    let gpu = gpu(model);
    if let (Some(_), Some(_)) = (&model.replay, &model.last) {
        // A replayed kernel's name (a lecture step's title) comes before the
        // GPU: the GPU is shown when the whole name fits beside it, else the
        // name takes the line, cut between words when even that is short.
        let name = spans
            .pop()
            .map(|s| s.content.into_owned())
            .unwrap_or_default();
        let used: usize = spans.iter().map(Span::width).sum();
        let room = usize::from(area.width).saturating_sub(used);
        let fits_beside_gpu = Span::raw(name.as_str()).width() + 2 + gpu.width() <= room;
        spans.push(Span::raw(between_words(&name, room)));
        if !fits_beside_gpu {
            frame.render_widget(Paragraph::new(Line::from(spans)), area);
            return;
        }
    }
    spans.push(Span::raw("  "));
    spans.push(gpu);
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

fn activity(model: &Model) -> Vec<Span<'static>> {
    let theme = model.theme;
    if let Some(replay) = &model.replay {
        let state = if replay.paused { "paused" } else { "playing" };
        let mut spans = vec![Span::styled(
            format!(
                "replay {}/{} {state}, {} s/run",
                replay.position + 1,
                replay.runs.len(),
                replay.interval.as_secs_f64()
            ),
            theme.warn(),
        )];
        // The verdict before the name: a narrow header cuts from the right.
        if let Some(run) = &model.last {
            spans.push(Span::raw("  "));
            spans.push(verdict(&run.report, theme));
            spans.push(Span::raw(format!(
                "  {}",
                kernel_name(&run.source, &model.file_label)
            )));
        }
        return spans;
    }
    // Said before what is running: no save can come until the file does.
    if model.file_gone {
        return vec![Span::styled(
            format!(
                "{} was deleted; waiting for it to come back",
                model.file_label
            ),
            theme.bad(),
        )];
    }
    if let Some(missing) = &model.cuda_missing {
        return vec![cuda_missing(missing, theme)];
    }
    let mut spans = Vec::new();
    if let Some(live) = &model.live {
        spans.push(Span::styled(
            phase_words(live.phase, &model.cases),
            theme.warn(),
        ));
        if model.queued.is_some() {
            spans.push(Span::raw(" (a newer save waits)"));
        }
        return spans;
    }
    // The reason comes first, where it is never cut: the footer is one
    // line under a wide hint and loses the end of a long one.
    if let Some(reason) = &model.stopped {
        return vec![Span::styled(
            format!("NOT CHECKED: {}", line_for_display(reason)),
            theme.bad(),
        )];
    }
    let Some(last) = &model.last else {
        return vec![Span::raw("waiting for the first check")];
    };
    spans.push(verdict(&last.report, theme));
    if model.last_is_stale() {
        spans.push(Span::styled(" (previous save)", theme.stale()));
    }
    spans
}

/// What a lecture calls a replayed kernel: the first line of its leading
/// comment that is not meant for flashprof (a ladder rung's says which rung
/// and what it adds, a planted bug's what is wrong), else the file's name.
/// The text is the student's, so it is shown made harmless.
fn kernel_name(source: &str, file_label: &str) -> String {
    let first_words = source
        .lines()
        .map(str::trim)
        .skip_while(|line| line.is_empty())
        .take_while(|line| {
            line.starts_with("//") || line.starts_with("/*") || line.starts_with('*')
        })
        .map(|line| {
            line.trim_start_matches(['/', '*', '!'])
                .trim_end_matches("*/")
                .trim()
        })
        // Lines for flashprof (a planted bug's expected failures, the launch
        // geometry) say nothing a lecture hall reads.
        .find(|words| {
            !words.is_empty()
                && !words.starts_with("flashprof-expect:")
                && !words.starts_with("@flashprof")
        });
    match first_words {
        Some(words) => line_for_display(words).into_owned(),
        None => file_label.to_owned(),
    }
}

/// A machine without NVRTC or the CUDA headers the file wants, said as what
/// it is (nothing of the file is judged), with what is under way or the two
/// keys that help.
fn cuda_missing(missing: &CudaMissing, theme: Theme) -> Span<'static> {
    let (short, long) = match missing.piece {
        CudaPiece::Nvrtc => ("NO NVRTC", "NO NVRTC on this machine"),
        CudaPiece::Headers => ("NO CUDA HEADERS", "NO CUDA HEADERS for this file"),
    };
    let text = match &missing.remedy {
        Some(Remedy::Searching) => format!("{long}: looking again..."),
        Some(Remedy::Fetching { last_line }) => {
            format!("{short}: fetching... {}", line_for_display(last_line))
        }
        None => format!("{long} (f fetch, r look again)"),
    };
    Span::styled(text, theme.warn())
}

/// What a running check is doing, ending in "..." while it does it.
pub(super) fn phase_words(phase: Phase, cases: &[CaseRow]) -> String {
    match phase {
        Phase::Compiling => "compiling...".to_string(),
        Phase::Case(i) => format!(
            "case {}/{} {}...",
            i + 1,
            cases.len(),
            cases.get(i).map_or("", |c| c.name.as_str())
        ),
        Phase::Timing => "timing against the starter...".to_string(),
        Phase::Counters => "reading hardware counters...".to_string(),
        Phase::Lines => "profiling lines...".to_string(),
        Phase::Counting => crate::app::check::COUNTS_COMING.to_string(),
    }
}

/// A finished check in a few words: compile error, no GPU, or the passes.
pub(super) fn verdict(report: &CheckReport, theme: Theme) -> Span<'static> {
    let passed = report.cases_passed();
    if !report.compile.ok {
        Span::styled("COMPILE ERROR", theme.bad())
    } else if report.gpu.is_err() {
        Span::styled("compiled, not graded (no GPU)", theme.warn())
    } else if report.all_passed() {
        Span::styled(
            format!("PASS {passed}/{}", report.cases.len()),
            theme.good(),
        )
    } else {
        Span::styled(format!("FAIL {passed}/{}", report.cases.len()), theme.bad())
    }
}

fn gpu(model: &Model) -> Span<'static> {
    let span = gpu_span(model.gpu.as_ref(), model.theme);
    match (&model.worker_place, &model.link) {
        // A remote worker: the node (and Slurm job) after the GPU, then what the link costs.
        (Some(place), Some(link)) => {
            Span::styled(format!("{} on {place}, {link}", span.content), span.style)
        }
        (Some(place), None) => Span::styled(format!("{} on {place}", span.content), span.style),
        (None, _) => span,
    }
}

/// The GPU the checks run on, "?" before a worker has said.
pub(super) fn gpu_span(
    gpu: Option<&Result<DeviceInfo, GpuProblem>>,
    theme: Theme,
) -> Span<'static> {
    match gpu {
        None => Span::raw("GPU: ?"),
        Some(Ok(device)) => Span::raw(format!("GPU: {} ({})", device.name, device.arch())),
        Some(Err(_)) => Span::styled("no GPU: compile only", theme.warn()),
    }
}

pub fn draw_footer(frame: &mut Frame, area: Rect, model: &Model) {
    let lines = match &model.notice {
        Some(notice) => footer_lines(notice, area.width)
            .into_iter()
            .map(|line| Line::styled(line, model.theme.warn()))
            .collect(),
        None if model.cuda_missing.is_some() => vec![Line::from(format!(
            "q quit  f fetch {}  r look again  h history  ? help",
            model.cuda_missing.as_ref().map_or("", CudaMissing::noun)
        ))],
        None if model.replay.is_some() => vec![Line::from(
            "q quit  space pause  ←/→ step  +/- speed  enter map  l lines  h history  ? help",
        )],
        None => vec![Line::from(
            "q quit  r rerun  ↑↓/tab cases  enter map  c counters  l lines  h history  ? help",
        )],
    };
    frame.render_widget(Paragraph::new(lines), area);
}

#[cfg(test)]
mod tests {
    use super::kernel_name;

    #[test]
    fn a_kernel_is_named_by_its_first_comment_line_else_by_its_file() {
        let planted = "// flashprof-expect: tile-edge fail\n// @flashprof threads=64\n// Bug: the last tile is skipped.\n";
        for (text, name) in [
            (
                "\n// Ladder rung 1: tile the rows.\n//\n// more\n__global__ void k() {}\n",
                "Ladder rung 1: tile the rows.",
            ),
            ("/*\n * Split precision\n */\n", "Split precision"),
            ("__global__ void k() {}", "prefill.cu"),
            (planted, "Bug: the last tile is skipped."),
            // A student's comment reaches the terminal only made harmless.
            ("// rung \u{1b}[2J\u{202e}one\n", "rung ^[[2Jone"),
        ] {
            assert_eq!(kernel_name(text, "prefill.cu"), name);
        }
    }
}
