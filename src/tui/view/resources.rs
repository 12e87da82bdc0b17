//! The resources panel: what ptxas says the kernel uses, the occupancy that
//! allows on the worker's GPU (as the worker computed it), and how each
//! changed since the previous check.
//!
//! Lines stay within the 22 columns the panel has at 80 wide (the limiter
//! beside the occupancy, the blocks per SM on their own line). A block too
//! large to launch takes the occupancy line's place (occupancy means nothing
//! then, nor blocks per SM), and the largest block the kernel allows comes
//! last and says the limit.

use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::text::{delta, panel};
use crate::facts::byte_size;
use crate::facts::resources::{Limiter, ResourceUsage};
use crate::tui::model::Model;

pub fn draw(frame: &mut Frame, area: Rect, model: &Model) {
    let shown = model.compile();
    let block = panel("resources", shown.is_some_and(|s| s.stale), model.theme);
    let outcome = shown.map(|s| s.value);
    let lines = match outcome.and_then(|o| Some((o.resources.as_ref()?, o.geometry?, o.occupancy?)))
    {
        None => vec![Line::raw("once the file compiles")],
        Some((usage, geometry, occupancy)) => {
            let before = model.previous_resources.as_ref();
            let occupancy_line = match occupancy.limiter {
                Limiter::ThreadsPerBlock => Line::styled(
                    format!("fails: {} threads", geometry.threads),
                    model.theme.bad(),
                ),
                limiter => Line::raw(format!(
                    "occupancy {:.0}% ({})",
                    occupancy.fraction * 100.0,
                    limiter_word(limiter)
                )),
            };
            let blocks_line = (occupancy.limiter != Limiter::ThreadsPerBlock)
                .then(|| Line::raw(format!("{} blocks per SM", occupancy.blocks_per_sm)));
            let spills = usage.spill_bytes();
            let mut lines = vec![
                Line::raw(format!(
                    "registers {}{}",
                    usage.registers,
                    delta(usage.registers, before.map(|b| b.registers))
                )),
                Line::raw(format!(
                    "smem {}{}",
                    smem_words(usage.static_smem_bytes, geometry.dynamic_smem_bytes),
                    delta(usage.static_smem_bytes, before.map(|b| b.static_smem_bytes))
                )),
                Line::raw(format!(
                    "spills {}{}",
                    byte_size(spills),
                    delta(spills, before.map(ResourceUsage::spill_bytes))
                )),
                occupancy_line,
            ];
            lines.extend(blocks_line);
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

/// Shared memory a block uses: only the kind it has when it has one kind,
/// so the line fits the panel at 80 columns.
fn smem_words(static_bytes: u32, dynamic_bytes: u32) -> String {
    match (static_bytes, dynamic_bytes) {
        (0, 0) => "none".into(),
        (_, 0) => format!("{} static", byte_size(static_bytes)),
        (0, _) => format!("{} dynamic", byte_size(dynamic_bytes)),
        _ => format!(
            "{} + {} dyn",
            byte_size(static_bytes),
            byte_size(dynamic_bytes)
        ),
    }
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

#[cfg(test)]
mod tests {
    use super::smem_words;

    #[test]
    fn shared_memory_names_only_the_kinds_a_block_has() {
        assert_eq!(smem_words(0, 0), "none");
        assert_eq!(smem_words(0, 69_632), "68.0 KiB dynamic");
        assert_eq!(smem_words(2048, 0), "2.0 KiB static");
        assert_eq!(smem_words(2048, 1024), "2.0 KiB + 1.0 KiB dyn");
    }
}
