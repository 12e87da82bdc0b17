//! `flashprof fetch-cuda`: installs NVIDIA's NVRTC, CUPTI and CUDA-headers
//! wheels into flashprof's own cache folder ([`crate::gpu::fetch`]), then
//! says what the library search finds now, as `doctor` says it.

use super::refusal::Refusal;
use super::ExitCode;
use crate::display::path_for_display;
use crate::gpu::{fetch, found, headers};

pub fn run() -> Result<ExitCode, Refusal> {
    let context = found::Context::current();
    eprintln!(
        "flashprof: fetching NVRTC, CUPTI and the CUDA headers ({}) with pip",
        fetch::SERIES
    );
    let folder = fetch::fetch(&context, &mut |line| eprintln!("  {line}"))
        .map_err(|e| Refusal::new(ExitCode::Environment, e))?;
    println!("fetched into {}", path_for_display(&folder));
    // The libraries were searched before (or never): look again, headers
    // after the libraries they sit beside.
    found::search_again();
    headers::search_again();
    let findings = super::doctor::library_findings();
    super::doctor::print_findings(&findings);
    if findings.iter().any(|f| f.item == "nvrtc" && f.ok) {
        return Ok(ExitCode::Pass);
    }
    let mut refusal = Refusal::new(
        ExitCode::Environment,
        format!(
            "the wheels are in {}, but NVRTC is still not usable from there",
            path_for_display(&folder)
        ),
    );
    refusal.fix =
        Some("`flashprof doctor` lists where flashprof looked and what it refused".into());
    Err(refusal)
}
