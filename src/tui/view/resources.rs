//! The resources panel: what ptxas says the kernel uses, the occupancy that
//! allows on the worker's GPU (as the worker computed it), and how each
//! changed since the previous check.
//!
//! A short terminal keeps only the first four lines, so a block too large to
//! launch takes the occupancy line's place (occupancy means nothing then) and
//! the largest block the kernel allows comes last, for the taller layouts.

use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::text::{bytes, delta, panel};
use crate::facts::resources::Limiter;
use crate::tui::model::Model;

pub fn draw(frame: &mut Frame, area: Rect, model: &Model) {
    let shown = model.compile();
    let block = panel("resources", shown.is_some_and(|s| s.stale), model.theme);
    let outcome = shown.map(|s| s.value);
    let lines = match outcome.and_then(|o| Some((o.resources.as_ref()?, o.geometry?, o.occupancy?)))
    {
        None => vec![Line::raw("after a successful compile")],
        Some((usage, geometry, occupancy)) => {
            let before = model.previous_resources.as_ref();
            let occupancy_line = match occupancy.limiter {
                Limiter::ThreadsPerBlock => Line::styled(
                    format!(
                        "fails: {} threads > max {}",
                        geometry.threads, usage.max_threads_per_block
                    ),
                    model.theme.bad(),
                ),
                limiter => Line::raw(format!(
                    "occupancy {:.0}% ({} blocks, {})",
                    occupancy.fraction * 100.0,
                    occupancy.blocks_per_sm,
                    limiter_word(limiter)
                )),
            };
            let spills = usage.spill_store_bytes + usage.spill_load_bytes;
            let mut lines = vec![
                Line::raw(format!(
                    "registers {}{}",
                    usage.registers,
                    delta(usage.registers, before.map(|b| b.registers))
                )),
                Line::raw(format!(
                    "smem {} + {} dyn{}",
                    bytes(usage.static_smem_bytes),
                    bytes(geometry.dynamic_smem_bytes),
                    delta(usage.static_smem_bytes, before.map(|b| b.static_smem_bytes))
                )),
                Line::raw(format!(
                    "spills {}{}",
                    bytes(spills),
                    delta(
                        spills,
                        before.map(|b| b.spill_store_bytes + b.spill_load_bytes)
                    )
                )),
                occupancy_line,
            ];
            if usage.max_threads_per_block != 0 {
                lines.push(Line::raw(format!(
                    "max {} threads/block",
                    usage.max_threads_per_block
                )));
            }
            lines
        }
    };
    frame.render_widget(Paragraph::new(lines).block(block), area);
}

fn limiter_word(limiter: Limiter) -> &'static str {
    match limiter {
        Limiter::Registers => "regs",
        Limiter::SharedMemory => "smem",
        Limiter::Threads => "threads",
        Limiter::Blocks => "blocks",
        Limiter::ThreadsPerBlock => "block size",
    }
}
