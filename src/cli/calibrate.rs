//! `flashprof calibrate`: measure the reference kernel against the starter
//! on this GPU and record the speed gate for its model.
//!
//! The reference (kernels/flash-prefill/reference.cu, a plain tiled kernel) is timed in
//! several independent runs, each interleaving it with the starter as a
//! check does; the median of their speedups sets the threshold by
//! [`threshold_from_reference`]. Several runs, not one, because a single
//! run's speedup moves with clocks and neighbours on a shared node.

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use clap::Args;

use super::refusal::Refusal;
use super::ExitCode;
use crate::app::check::run_check;
use crate::app::check::{CaseChoice, RunOptions};
use crate::app::gate::{
    threshold_from_reference, user_gates_path, GateTable, GpuGate, LASTING_RUNS,
};
use crate::grade::stats::summarize;
use crate::worker::GpuSelection;

/// The tiled reference kernel, embedded so an installed binary can calibrate.
#[derive(Args, Debug)]
pub struct CalibrateArgs {
    #[command(flatten)]
    pub lab: super::LabArg,
    #[command(flatten)]
    pub remote: super::remote::RemoteArgs,
    /// The gates file to update (default: $XDG_CONFIG_HOME/flashprof/gates.toml).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Independent timed runs of reference against starter (fewer than 3
    /// make a provisional gate, said wherever it judges).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=50))]
    pub runs: u32,
    /// The GPU ordinal to calibrate.
    #[arg(long, default_value_t = 0)]
    pub gpu: usize,
}

pub fn run(args: CalibrateArgs) -> Result<ExitCode, Refusal> {
    let out = args.out.clone().or_else(user_gates_path).ok_or_else(|| {
        Refusal::new(
            ExitCode::Usage,
            "no HOME or XDG_CONFIG_HOME; give --out FILE",
        )
    })?;
    let command = super::worker_command(&args.remote)?.on_gpu(GpuSelection::Ordinal(args.gpu));
    let lab = args.lab.choose(None)?;
    // The reference timed against the starter on fixed inputs: no cases, no counters.
    let options = RunOptions {
        seed: Some(1),
        cases: CaseChoice::TimingOnly,
        ..RunOptions::default()
    };
    let reference = lab.reference();
    let plan = options
        .plan(lab)?
        .of_source(reference.path.into(), reference.text.into());
    let mut worker = None;
    let mut speedups = Vec::new();
    let mut device = None;
    for run in 1..=args.runs {
        let report = run_check(&plan, &command, &mut worker, |_| {})
            .map_err(|e| Refusal::new(ExitCode::Environment, e.to_string()))?;
        let gpu = report.gpu.map_err(|problem| {
            Refusal::new(
                ExitCode::NoGpu,
                format!("needs a GPU: {}", problem.describe()),
            )
        })?;
        let Some(speedup) = report.timing.as_ref().and_then(|t| t.speedup.as_ref()) else {
            let why = report
                .timing
                .as_ref()
                .and_then(|t| t.withheld())
                .or(report.timing_error)
                .unwrap_or_else(|| "the reference was not timed".into());
            return Err(Refusal::new(
                ExitCode::Environment,
                format!("run {run}: no speedup: {why}"),
            ));
        };
        println!(
            "run {run}/{}: reference {:.3} ms, starter {:.3} ms, speedup {:.2}x{}",
            args.runs,
            speedup.student.median,
            speedup.starter.median,
            speedup.point,
            if speedup.noisy { " (noisy)" } else { "" }
        );
        speedups.push(speedup.point);
        device = Some(gpu.name);
    }
    if let Some(w) = worker {
        w.shutdown();
    }
    let (Some(name), Ok(summary)) = (device, summarize(&speedups)) else {
        return Err(Refusal::new(ExitCode::Environment, "no usable measurement"));
    };
    let gate = GpuGate {
        lab: lab.name().to_owned(),
        name,
        threshold: threshold_from_reference(summary.median),
        reference_speedup: Some((summary.median * 10.0).round() / 10.0),
        measured_on: Some(today()),
        timing_rules: Some(crate::protocol::TIMING_RULES),
        provisional: args.runs < LASTING_RUNS,
    };
    println!(
        "{}: reference median {:.2}x over {} runs -> speed gate {:.1}x{}",
        gate.name,
        summary.median,
        summary.n,
        gate.threshold,
        match gate.provisional {
            true => format!(" (provisional: {LASTING_RUNS} runs or more make a lasting gate)"),
            false => String::new(),
        }
    );
    GateTable::load(&out)
        .and_then(|mut table| {
            table.upsert(gate);
            table.save(&out)
        })
        .map_err(|e| Refusal::new(ExitCode::Environment, e.to_string()))?;
    println!("written to {}", out.display());
    Ok(ExitCode::Pass)
}

/// Today's UTC date as `YYYY-MM-DD`.
fn today() -> String {
    let days = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / 86_400);
    let (year, month, day) = civil_date(days as i64);
    format!("{year:04}-{month:02}-{day:02}")
}

/// The proleptic Gregorian date `days` after 1970-01-01, counted in 400-year eras.
fn civil_date(days: i64) -> (i64, u32, u32) {
    let shifted = days + 719_468; // days from 0000-03-01, so leap days fall at a year's end
    let era = shifted.div_euclid(146_097);
    let day_of_era = shifted.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153; // 0 = March
    let day = (day_of_year - (153 * month_index + 2) / 5 + 1) as u32;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::civil_date;

    #[test]
    fn civil_dates_match_known_days() {
        assert_eq!(civil_date(0), (1970, 1, 1));
        assert_eq!(civil_date(59), (1970, 3, 1));
        assert_eq!(civil_date(11_016), (2000, 2, 29));
        assert_eq!(civil_date(20_787), (2026, 11, 30));
        assert_eq!(civil_date(-1), (1969, 12, 31));
    }
}
