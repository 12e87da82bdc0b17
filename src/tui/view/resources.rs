//! The resources panel: what ptxas says the kernel uses, the occupancy that
//! allows on Hopper, and how each changed since the previous check.

use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::text::{bytes, delta, panel};
use crate::gpu::resources::{theoretical_occupancy, Limiter, SmLimits};
use crate::tui::model::Model;

pub fn draw(frame: &mut Frame, area: Rect, model: &Model) {
    let shown = model.compile();
    let block = panel("resources", shown.is_some_and(|s| s.stale), model.theme);
    let outcome = shown.map(|s| s.value);
    let lines = match outcome.and_then(|o| o.resources.as_ref().map(|r| (o, r))) {
        None => vec![Line::raw("after a successful compile")],
        Some((outcome, usage)) => {
            let before = model.previous_resources.as_ref();
            let geometry = outcome.geometry.unwrap_or_default();
            let occupancy = theoretical_occupancy(usage, &geometry, &SmLimits::hopper());
            let limiter = match occupancy.limiter {
                Limiter::Registers => "regs",
                Limiter::SharedMemory => "smem",
                Limiter::Threads => "threads",
                Limiter::Blocks => "blocks",
            };
            let spills = usage.spill_store_bytes + usage.spill_load_bytes;
            vec![
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
                Line::raw(format!(
                    "occupancy {:.0}% ({} blocks, {limiter})",
                    occupancy.fraction * 100.0,
                    occupancy.blocks_per_sm
                )),
            ]
        }
    };
    frame.render_widget(Paragraph::new(lines).block(block), area);
}
