//! Turning a [`CheckReport`] into what a person or a program reads: a plain
//! table for terminals and logs, and versioned JSON for tools.

pub mod gradebook;
pub mod integrity;
mod table;

pub use table::render_table;

use serde::Serialize;

use crate::app::check::CheckReport;

/// The JSON schema identifier; bumped on any incompatible change (docs/JSON.md).
pub const JSON_SCHEMA: &str = "flashprof.check/1";

#[derive(Serialize)]
struct JsonDocument<'a> {
    schema: &'static str,
    flashprof_version: &'static str,
    passed: bool,
    #[serde(flatten)]
    report: &'a CheckReport,
}

/// The report as one pretty-printed JSON document.
pub fn render_json(report: &CheckReport) -> String {
    let document = JsonDocument {
        schema: JSON_SCHEMA,
        flashprof_version: env!("CARGO_PKG_VERSION"),
        passed: report.all_passed(),
        report,
    };
    serde_json::to_string_pretty(&document).expect("report types serialize without failure")
}
