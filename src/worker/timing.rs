//! Timing the student's kernel against the starter, in one process, under
//! rules no kernel can game (docs/INTEGRITY.md).
//!
//! The check's own inputs are launched once and that output is graded in
//! full against a float64 GPU reference, itself checked against the CPU
//! oracle on sampled rows. Every launch after it (warm-ups, timed) gets, in
//! this order: fresh inputs drawn on the GPU from the check's seed, a
//! poisoned output, L2 evicted, persisting L2 lines reset; then the launch,
//! alone between the events. After it, outside the timed region, it is
//! audited (`grade::launch_audit`): inputs unchanged, no poison left, rows
//! chosen then recomputed in float64 on its own inputs. Launches alternate
//! starter, student, ... so drift hits both alike, and timing stops once the
//! speedup's 95% interval is within 1%. A median below the physical floor
//! (`grade::floor`) is impossible. Either finding withholds the speedup.

use std::time::Instant;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::Baselines;
use crate::facts::arch::traits;
use crate::gpu::device::{Draw, Gpu, GpuError, Kernel, Workspace};
use crate::grade::compare::{compare, POISON_BITS};
use crate::grade::floor::{Ceilings, Floor};
use crate::grade::launch_audit::{FindingKind, LaunchAudit, LaunchFinding, LaunchId, LaunchPhase};
use crate::grade::roofline::Bandwidth;
use crate::grade::stats::{speedup, summarize, Speedup};
use crate::lab::definition::{CaseData, LabCase, LabRef};
use crate::protocol::{ReferenceCheck, TimingConfig, TimingOutcome, TimingPhases, TIMING_RULES};

/// Rows of the timed shape whose GPU reference is recomputed on the CPU.
const SAMPLED_ROWS: usize = 12;
/// The GPU reference must match the CPU oracle this closely (relative, float64 against float64).
const REFERENCE_AGREEMENT: f64 = 1e-9;
/// Timed pairs before timing may stop early.
const MIN_TIMED_PAIRS: u32 = 5;
/// Timing stops once the speedup's 95% interval is within this share of it, either side.
const SETTLED_HALF_WIDTH: f64 = 0.01;
/// Headroom on the best DRAM bandwidth known (the attribute figure or the
/// L2 sweep's): the floor must sit under any honest streaming kernel.
const DRAM_HEADROOM: f64 = 1.10;

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
    let mut bench = Bench::new(gpu, baselines, &data, seed, config.cold_l2)?;
    let inputs_ms = elapsed_ms(started);

    let reference = gpu.reference_f64(&bench.baselines.oracle_f64, &bench.ws, None)?;
    let reference_check = check_reference(lab, &data, &reference, seed);
    let reference_ms = elapsed_ms(started) - inputs_ms;

    let tolerance = lab.tolerance();
    let mut sides = Sides {
        starter: LaunchAudit::new(shape, tolerance),
        student: LaunchAudit::new(shape, tolerance),
        starter_finding: None,
        finding: None,
    };

    // The checked launch: the host's inputs, the whole output graded.
    let checked = LaunchId {
        phase: LaunchPhase::Checked,
        number: 1,
        of: 1,
    };
    bench.prepare(Draw::COPY)?;
    gpu.launch(student, &mut bench.ws)?;
    gpu.synchronize()?;
    let output = gpu.read_output(&bench.ws)?;
    let output_check = compare(shape, tolerance, &output.output, &reference);
    sides.finding = bench.changed_inputs(checked)?;
    sides.student.remember(checked, &output.output);

    for number in 1..=config.warmup as usize {
        let id = LaunchId {
            phase: LaunchPhase::WarmUp,
            number,
            of: config.warmup as usize,
        };
        bench.pair(student, &mut sides, id)?;
    }
    let most = config.repetitions.max(1);
    let mut starter_ms = Vec::with_capacity(most as usize);
    let mut student_ms = Vec::with_capacity(most as usize);
    for number in 1..=most as usize {
        let id = LaunchId {
            phase: LaunchPhase::Timed,
            number,
            of: most as usize,
        };
        let (starter, student) = bench.pair(student, &mut sides, id)?;
        starter_ms.push(starter);
        student_ms.push(student);
        // A withheld speedup needs no precision, only the floor of pairs.
        let done =
            sides.finding.is_some() || speedup(&starter_ms, &student_ms).is_ok_and(|s| settled(&s));
        if number as u32 >= MIN_TIMED_PAIRS.min(most) && done {
            break;
        }
    }
    let launches_ms = elapsed_ms(started) - inputs_ms - reference_ms;
    let sm_clock_mhz = gpu.measure_sm_clock(&bench.baselines.clock_probe)?;
    let inputs_intact = gpu.modified_inputs(&bench.ws)?.is_empty();

    let summary = |samples: &[f64]| summarize(samples).map_err(GpuError::message);
    let student_summary = summary(&student_ms)?;
    let bandwidth = match lab.graded_on_bytes() {
        true => {
            let (copy, read) = crate::gpu::peaks::stream_rates(gpu, &bench.baselines.probes)?;
            Bandwidth::of(
                data.problem.work.compulsory_bytes,
                student_summary.median,
                copy,
                read,
            )
        }
        false => None,
    };
    let floor = bench.floor(data.problem.work)?;
    let impossible = floor.judge(student_summary.median);
    let correct = output_check.passed
        && output.out_of_bounds_writes == 0
        && inputs_intact
        && reference_check.agrees
        && sides.finding.is_none()
        && sides.starter_finding.is_none()
        && impossible.is_none();
    Ok(TimingOutcome {
        shape: data.problem,
        config,
        student: student_summary,
        starter: summary(&starter_ms)?,
        speedup: match correct {
            true => Some(speedup(&starter_ms, &student_ms).map_err(GpuError::message)?),
            false => None,
        },
        output_check,
        reference_check,
        sm_clock_mhz,
        max_sm_clock_mhz: gpu.info.max_sm_clock_mhz,
        elapsed_ms: elapsed_ms(started),
        rules: TIMING_RULES,
        finding: sides.finding,
        starter_finding: sides.starter_finding,
        floor: Some(floor),
        impossible,
        audited_launches: bench.audited,
        phases: Some(TimingPhases {
            inputs_ms,
            reference_ms,
            launches_ms,
            audits_ms: bench.audits_ms,
        }),
        profile_refused: None,
        bandwidth,
    })
}

/// Both kernels' audits over one timing, and the first finding of each.
struct Sides {
    starter: LaunchAudit,
    student: LaunchAudit,
    starter_finding: Option<LaunchFinding>,
    finding: Option<LaunchFinding>,
}

/// Keeps the first finding of a kernel's launches.
fn record(audited: Result<(), LaunchFinding>, first: &mut Option<LaunchFinding>) {
    if let Err(found) = audited {
        first.get_or_insert(found);
    }
}

/// Whether the speedup's 95% interval is within [`SETTLED_HALF_WIDTH`] of it.
fn settled(speedup: &Speedup) -> bool {
    speedup.ci_high - speedup.ci_low <= 2.0 * SETTLED_HALF_WIDTH * speedup.point
}

fn elapsed_ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1e3
}

/// One workspace shared by every launch of a run, and what auditing and
/// the floor need from them.
pub(super) struct Bench<'a> {
    gpu: &'a Gpu,
    pub(super) baselines: &'a mut Baselines,
    pub(super) ws: Workspace,
    /// Seeds of the fresh inputs: the check's seed decides every draw.
    draws: ChaCha8Rng,
    cold_l2: bool,
    /// The fastest L2 sweep seen, as bytes a second (a measured DRAM bandwidth).
    best_sweep_bytes_per_s: f64,
    pub(super) audited: usize,
    audits_ms: f64,
}

impl<'a> Bench<'a> {
    /// Uploads `data` (guarded, output poisoned) with a pristine copy of
    /// every input, so that each launch can be given fresh inputs.
    pub(super) fn new(
        gpu: &'a Gpu,
        baselines: &'a mut Baselines,
        data: &CaseData,
        seed: u64,
        cold_l2: bool,
    ) -> Result<Self, GpuError> {
        let mut ws = gpu.workspace(baselines.lab, data, POISON_BITS)?;
        gpu.keep_pristine(&mut ws)?;
        Ok(Self {
            gpu,
            baselines,
            ws,
            draws: ChaCha8Rng::seed_from_u64(seed ^ 0xF4E5_11A7_D0E5_5EED),
            cold_l2,
            best_sweep_bytes_per_s: 0.0,
            audited: 0,
            audits_ms: 0.0,
        })
    }

    /// The next launch's fresh inputs, drawn from the lab's range.
    pub(super) fn next_draw(&mut self) -> Draw {
        let range = self.baselines.lab.timing_draw_range();
        Draw {
            seed: self.draws.random(),
            low: range.start,
            high: range.end,
        }
    }

    /// Rule 1's order before a launch: fresh inputs, poisoned output, L2
    /// evicted, everything finished, persisting lines reset.
    pub(super) fn prepare(&mut self, draw: Draw) -> Result<(), GpuError> {
        let gpu = self.gpu;
        gpu.fresh_inputs(&mut self.ws, &self.baselines.fresh, draw)?;
        gpu.poison_output(&mut self.ws)?;
        if self.cold_l2 {
            let flusher = &mut self.baselines.l2_flusher;
            let bytes = Gpu::flush_bytes(flusher) as f64;
            let ms = gpu.timed(|| gpu.flush_l2(flusher))?;
            self.best_sweep_bytes_per_s = self.best_sweep_bytes_per_s.max(bytes / ms * 1e3);
        }
        gpu.synchronize()?;
        gpu.reset_persisting_l2()
    }

    /// A finding when the last launch changed one of its inputs.
    pub(super) fn changed_inputs(
        &mut self,
        launch: LaunchId,
    ) -> Result<Option<LaunchFinding>, GpuError> {
        let changed = self
            .gpu
            .changed_inputs(&mut self.ws, &self.baselines.fresh)?;
        Ok(changed
            .into_iter()
            .next()
            .map(|(input, elements)| LaunchFinding {
                launch,
                kind: FindingKind::InputChanged { input, elements },
            }))
    }

    /// One launch on fresh inputs, timed, then audited: its time and what
    /// the audit found.
    fn audited_launch(
        &mut self,
        kernel: &Kernel,
        audit: &mut LaunchAudit,
        launch: LaunchId,
    ) -> Result<(f64, Result<(), LaunchFinding>), GpuError> {
        let draw = self.next_draw();
        self.prepare(draw)?;
        let gpu = self.gpu;
        let ms = gpu.timed(|| gpu.launch(kernel, &mut self.ws))?;
        Ok((ms, self.audit(audit, launch)?))
    }

    /// One interleaved pair, the starter first, each audited: both times.
    fn pair(
        &mut self,
        student: &Kernel,
        sides: &mut Sides,
        launch: LaunchId,
    ) -> Result<(f64, f64), GpuError> {
        let starter = self.baselines.starter.clone();
        let (starter_ms, audited) = self.audited_launch(&starter, &mut sides.starter, launch)?;
        record(audited, &mut sides.starter_finding);
        let (student_ms, audited) = self.audited_launch(student, &mut sides.student, launch)?;
        record(audited, &mut sides.finding);
        Ok((starter_ms, student_ms))
    }

    /// The audit of the launch that just finished.
    pub(super) fn audit(
        &mut self,
        audit: &mut LaunchAudit,
        launch: LaunchId,
    ) -> Result<Result<(), LaunchFinding>, GpuError> {
        let started = Instant::now();
        self.audited += 1;
        let verdict = match self.changed_inputs(launch)? {
            Some(finding) => Err(finding),
            None => {
                let read = self.gpu.read_output(&self.ws)?;
                let (output, outside) = (read.output, read.out_of_bounds_writes);
                // Rows chosen now, from the operating system's entropy: no
                // seed the kernel could know decides them.
                match audit.plan(launch, &output, &mut rand::rng()) {
                    // Guards are restored before every launch: any write there is this one's.
                    _ if outside > 0 => Err(LaunchFinding {
                        launch,
                        kind: FindingKind::WroteOutside { elements: outside },
                    }),
                    Err(finding) => Err(finding),
                    Ok(plan) => {
                        let reference = self.gpu.reference_f64(
                            &self.baselines.oracle_f64,
                            &self.ws,
                            Some(&plan.rows),
                        )?;
                        audit.judge(launch, &output, plan, &reference)
                    }
                }
            }
        };
        self.audits_ms += elapsed_ms(started);
        Ok(verdict)
    }

    /// The floor of `work` on this GPU from this run's measurements.
    fn floor(&self, work: crate::grade::roofline::Work) -> Result<Floor, GpuError> {
        let info = &self.gpu.info;
        let attribute_bandwidth =
            info.memory_clock_mhz * 1e6 * 2.0 * f64::from(info.memory_bus_bits) / 8.0;
        let arch = traits(info.compute_capability);
        let ceilings = Ceilings {
            dram_bytes_per_s: attribute_bandwidth.max(self.best_sweep_bytes_per_s) * DRAM_HEADROOM,
            tensor_flops_per_s: f64::from(arch.fastest_dense_ops_per_clock_per_sm)
                * f64::from(info.sm_count)
                * info.max_sm_clock_mhz
                * 1e6,
            empty_launch_ms: self.gpu.empty_launch_ms(&self.baselines.empty)?,
        };
        Ok(Floor::of(work, ceilings, self.cold_l2))
    }
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
