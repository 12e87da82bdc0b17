//! Turning a [`CheckReport`] into what a person or a program reads: a plain
//! table for terminals and logs, and versioned JSON for tools.

pub mod compare;

mod reproduce;
mod table;

pub use reproduce::ReproduceCommand;
pub use table::render_table;

use serde::Serialize;

use crate::app::gate::SpeedGate;
use crate::outcome::{CheckReport, Verdict};

/// The JSON schema identifier; bumped on any incompatible change (docs/JSON.md).
/// 2 (2026-12-07): the compiled image only on request (`--image`).
pub const JSON_SCHEMA: &str = "flashprof.check/2";

#[derive(Serialize)]
struct JsonDocument<'a> {
    schema: &'static str,
    flashprof_version: &'static str,
    passed: bool,
    /// The one verdict rule's word, as a gradebook's `status` and the exit
    /// code have it ([`Verdict::of`]).
    verdict: &'static str,
    /// The speed gate, when the GPU ran the kernel (computed by the command, not the engine).
    #[serde(skip_serializing_if = "Option::is_none")]
    gate: Option<&'a SpeedGate>,
    #[serde(flatten)]
    report: &'a CheckReport,
}

/// The report as one pretty-printed JSON document.
pub fn render_json(report: &CheckReport, gate: Option<&SpeedGate>) -> String {
    let document = JsonDocument {
        schema: JSON_SCHEMA,
        flashprof_version: env!("CARGO_PKG_VERSION"),
        passed: report.all_passed(),
        verdict: Verdict::of(report).word(),
        gate,
        report,
    };
    serde_json::to_string_pretty(&document).expect("report types serialize without failure")
}
