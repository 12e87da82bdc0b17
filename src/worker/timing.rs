//! Timing the student's kernel against the starter, in one process, on one
//! set of inputs.
//!
//! The rules a grader can defend: launches alternate starter, student,
//! starter, ... so clock drift hits both alike; L2 is evicted before each
//! timed launch, outside the timed region; only the kernel sits between the
//! events; and the timed output itself is graded, against a float64 GPU
//! reference that is in turn checked against the CPU oracle on sampled rows.

use std::time::Instant;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::Baselines;
use crate::gpu::device::{Gpu, GpuError, Kernel};
use crate::grade::compare::{compare, POISON_BITS};
use crate::grade::stats::{speedup, summarize};
use crate::lab::definition::{CaseData, LabCase, LabRef};
use crate::protocol::{ReferenceCheck, TimingConfig, TimingOutcome};

/// Rows of the timed shape whose GPU reference is recomputed on the CPU.
const SAMPLED_ROWS: usize = 12;
/// The GPU reference must match the CPU oracle this closely (relative, float64 against float64).
const REFERENCE_AGREEMENT: f64 = 1e-9;

pub fn time(
    gpu: &Gpu,
    student: &Kernel,
    baselines: &mut Baselines,
    case: &LabCase,
    seed: u64,
    config: TimingConfig,
) -> Result<TimingOutcome, GpuError> {
    let started = Instant::now();
    let lab = baselines.lab;
    let data = timing_inputs(lab, case, seed)?;
    let shape = data.problem.output;
    let mut ws = gpu.workspace(lab, &data, POISON_BITS)?;

    let reference = gpu.reference_f64(&baselines.oracle_f64, &ws)?;
    let reference_check = check_reference(lab, &data, &reference, seed);

    gpu.poison_output(&mut ws)?;
    gpu.launch(student, &mut ws)?;
    gpu.synchronize()?;
    let output = gpu.read_output(&ws)?;
    let output_check = compare(shape, lab.tolerance(), &output.output, &reference);

    for _ in 0..config.warmup {
        gpu.launch(&baselines.starter, &mut ws)?;
        gpu.launch(student, &mut ws)?;
    }
    gpu.synchronize()?;
    let mut starter_ms = Vec::with_capacity(config.repetitions as usize);
    let mut student_ms = Vec::with_capacity(config.repetitions as usize);
    for _ in 0..config.repetitions {
        for (kernel, samples) in [
            (&baselines.starter, &mut starter_ms),
            (student, &mut student_ms),
        ] {
            if config.cold_l2 {
                gpu.flush_l2(&mut baselines.l2_flusher)?;
            }
            samples.push(gpu.timed(|| gpu.launch(kernel, &mut ws))?);
        }
    }
    let sm_clock_mhz = gpu.measure_sm_clock(&baselines.clock_probe)?;
    let inputs_intact = gpu.modified_inputs(&ws)?.is_empty();

    let summary = |samples: &[f64]| summarize(samples).map_err(GpuError::message);
    let correct = output_check.passed
        && output.out_of_bounds_writes == 0
        && inputs_intact
        && reference_check.agrees;
    Ok(TimingOutcome {
        shape: data.problem,
        config,
        student: summary(&student_ms)?,
        starter: summary(&starter_ms)?,
        speedup: match correct {
            true => Some(speedup(&starter_ms, &student_ms).map_err(GpuError::message)?),
            false => None,
        },
        output_check,
        reference_check,
        sm_clock_mhz,
        max_sm_clock_mhz: gpu.info.max_sm_clock_mhz,
        elapsed_ms: started.elapsed().as_secs_f64() * 1e3,
    })
}

/// Fresh random inputs for `case`: the same for timing and counters of one run.
pub fn timing_inputs(lab: LabRef, case: &LabCase, seed: u64) -> Result<CaseData, GpuError> {
    lab.generate(case, seed).map_err(GpuError::message)
}

/// Recomputes sampled rows (every head) on the CPU and compares with the GPU reference.
fn check_reference(lab: LabRef, data: &CaseData, reference: &[f64], seed: u64) -> ReferenceCheck {
    let shape = data.problem.output;
    let mut rng = ChaCha8Rng::seed_from_u64(seed.rotate_left(17));
    let mut rows: Vec<usize> = (0..SAMPLED_ROWS)
        .map(|_| rng.random_range(0..shape.rows))
        .collect();
    rows.push(shape.rows - 1);
    rows.sort_unstable();
    rows.dedup();
    let exact = lab.oracle(data, Some(&rows));
    let row_len = shape.heads * shape.dim;
    let mut max_rel_diff = 0f64;
    for (row_exact, &row) in exact.chunks_exact(row_len).zip(&rows) {
        let gpu_row = &reference[shape.index(row, 0, 0)..shape.index(row + 1, 0, 0)];
        for (want, got) in row_exact.iter().zip(gpu_row) {
            // The offset keeps near-zero outputs from turning rounding noise into a large ratio.
            let rel = (got - want).abs() / (want.abs() + 1e-6);
            max_rel_diff = max_rel_diff.max(if rel.is_nan() { f64::INFINITY } else { rel });
        }
    }
    ReferenceCheck {
        rows_checked: rows.len(),
        max_rel_diff,
        agrees: max_rel_diff <= REFERENCE_AGREEMENT,
    }
}
