//! Every lab's GPU float64 reference (its `support.cu`; the paged prefill
//! labs' tiled body) against the CPU oracle on a real GPU (ignored here:
//! scripts/gpu-tests.sh runs it with `--ignored`): on every embedded case,
//! the whole output and a row list out of order, and on sampled rows of
//! the timing shape, both of which a timing relies on.

use std::time::Instant;

use flashprof::gpu::compile::{compile_trusted, CompileOptions};
use flashprof::gpu::device::{self, Gpu};
use flashprof::grade::compare::POISON_BITS;
use flashprof::lab::definition::{CaseData, LabRef};
use flashprof::lab::registry::labs;

/// As the timing's own check of the GPU reference: relative, with an offset
/// that keeps near-zero outputs from turning rounding into a large ratio.
const AGREEMENT: f64 = 1e-9;

fn worst_difference(gpu_values: &[f64], cpu_values: &[f64]) -> f64 {
    assert_eq!(gpu_values.len(), cpu_values.len());
    gpu_values
        .iter()
        .zip(cpu_values)
        .map(|(got, want)| match (got.is_nan(), want.is_nan()) {
            (true, true) => 0.0,
            (false, false) => (got - want).abs() / (want.abs() + 1e-6),
            _ => f64::INFINITY,
        })
        .fold(0.0, f64::max)
}

/// The GPU reference of `rows` (all when `None`) against the CPU oracle's.
fn agreement(
    gpu: &Gpu,
    oracle: &cudarc::driver::CudaFunction,
    lab: LabRef,
    data: &CaseData,
    rows: Option<&[usize]>,
) -> (f64, f64) {
    let ws = gpu.workspace(lab, data, POISON_BITS).expect("workspace");
    let started = Instant::now();
    let on_gpu = gpu
        .reference_f64(oracle, &ws, rows)
        .expect("the GPU reference");
    let gpu_ms = started.elapsed().as_secs_f64() * 1e3;
    (worst_difference(&on_gpu, &lab.oracle(data, rows)), gpu_ms)
}

#[test]
#[ignore = "needs a GPU: scripts/gpu-tests.sh runs it with --ignored"]
fn every_lab_s_gpu_reference_agrees_with_the_cpu_oracle() {
    let gpu = device::open(0).expect("a GPU");
    let options = CompileOptions::for_arch(Some(gpu.info.arch()));
    let mut failures = Vec::new();
    for lab in labs() {
        let lab = LabRef(lab);
        let support = lab.support();
        let image = compile_trusted(support.file.path, support.file.text, &options)
            .expect("the float64 reference compiles");
        let oracle = gpu.load_support(&image, support.oracle_f64).expect("loads");
        let cases = lab
            .parse_cases(lab.embedded_cases(), "embedded", std::path::Path::new("."))
            .expect("the embedded cases parse");
        let mut worst: f64 = 0.0;
        for case in &cases {
            let data = lab.generate(case, 11).expect("generates");
            let rows = data.problem.output.rows;
            // Out of order, the last row first: list order is output order.
            let listed: Vec<usize> = (0..rows).rev().step_by(3).collect();
            for (what, rows) in [("every row", None), ("listed rows", Some(&listed[..]))] {
                let (off, _) = agreement(&gpu, &oracle, lab, &data, rows);
                worst = worst.max(off);
                if off > AGREEMENT {
                    failures.push(format!("{} {} ({what}): {off:.2e}", lab.name(), case.name));
                }
            }
        }
        let timing = lab.timing_case(&[]).expect("the timing case");
        let data = lab.generate(&timing, 11).expect("generates");
        let rows = data.problem.output.rows;
        let sampled: Vec<usize> = [rows - 1, 0, rows / 2, rows / 3, 7 * rows / 8, 1]
            .into_iter()
            .collect();
        let (off, _) = agreement(&gpu, &oracle, lab, &data, Some(&sampled));
        if off > AGREEMENT {
            failures.push(format!("{} timing rows: {off:.2e}", lab.name()));
        }
        // The whole timing output once more, for its time (what a timing pays).
        let ws = gpu.workspace(lab, &data, POISON_BITS).expect("workspace");
        gpu.reference_f64(&oracle, &ws, None).expect("warm-up");
        let started = Instant::now();
        gpu.reference_f64(&oracle, &ws, None)
            .expect("the whole timing output");
        println!(
            "{}: {} cases, worst {worst:.2e} (timing rows {off:.2e}); whole timing output {:.1} ms",
            lab.name(),
            cases.len(),
            started.elapsed().as_secs_f64() * 1e3
        );
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
