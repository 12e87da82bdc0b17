//! Timing the student's kernel against the starter, in one process, under
//! rules no kernel can game (docs/INTEGRITY.md).
//!
//! The GPU float64 reference is first checked against the CPU oracle on
//! sampled rows of the host's own inputs. Every launch after that, the
//! checked one included, gets in this order: fresh inputs drawn on the GPU
//! from a seed of the operating system's entropy (recorded in the report),
//! with the lab's hazards planted at positions chosen for that launch and
//! its block ids moved (`lab::redraw`), a poisoned output, L2 evicted,
//! persisting L2 lines reset; then the launch, alone between the events.
//! The checked launch's whole output is graded against the float64
//! reference. Every later launch (warm-ups, timed) is audited after it ran
//! (`grade::launch_audit`): inputs unchanged, the grader's pristine copies
//! unwritten, no poison left, its planted rows and a random sample
//! recomputed in float64 on its own inputs, and no class of rows far less
//! exact than the checked launch's (`grade::precision`). Launches alternate
//! starter, student, ... so drift hits both alike; a few pairs launch the
//! starter twice, so the starter after itself is compared with the starter
//! after the student, with the SM clock read right after every launch
//! (`grade::drift`). Timing stops as the request's
//! stopping rule says (`grade::stopping`: by default once the speedup's 95%
//! interval is within 1%, or wholly above or below the request's gate). A median below the physical floor
//! (`grade::floor`) is impossible. Any finding withholds the speedup.

use std::time::Instant;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::drawn::DrawnInputs;
use super::{reference, Baselines};
use crate::facts::arch::traits;
use crate::gpu::device::{Draw, Gpu, GpuError, Kernel, Workspace};
use crate::grade::compare::{compare, POISON_BITS};
use crate::grade::drift::{StarterDrift, TwoGroups};
use crate::grade::floor::{Ceilings, Floor};
use crate::grade::launch_audit::{
    row_shares, FindingKind, LaunchAudit, LaunchFinding, LaunchId, LaunchPhase, RowShare,
};
use crate::grade::precision::{self, ClassShares};
use crate::grade::roofline::Bandwidth;
use crate::grade::stats::{speedup, summarize};
use crate::grade::stopping::StoppingRule;
use crate::lab::args::ArgKind;
use crate::lab::definition::{CaseData, CaseInputs, LabCase, LabRef};
use crate::lab::redraw::Redraw;
use crate::protocol::{
    Precision, ReferenceCheck, TimedData, TimingConfig, TimingOutcome, TimingPhases, TIMING_RULES,
};

/// Headroom on the best DRAM bandwidth known (the attribute figure or the
/// L2 sweep's): the floor must sit under any honest streaming kernel.
const DRAM_HEADROOM: f64 = 1.10;

pub fn time(
    gpu: &Gpu,
    student: &Kernel,
    baselines: &mut Baselines,
    drawn: &mut DrawnInputs,
    case: &LabCase,
    seed: u64,
    config: TimingConfig,
) -> Result<TimingOutcome, GpuError> {
    let started = Instant::now();
    let lab = baselines.lab;
    let data = drawn.get(lab, case, seed)?;
    let shape = data.problem.output;
    // Unknown to the kernel before it runs, so no launch can be worked out
    // ahead; a replay names the seed a report printed.
    let draw_seed: u64 = config
        .draw_seed
        .map_or_else(|| rand::random::<u64>() | 1, |seed| seed.get());
    let mut bench = Bench::new(gpu, baselines, &data, draw_seed, config.cold_l2)?;
    bench.remember_pristine()?;
    let inputs_ms = elapsed_ms(started);

    // The GPU reference against the CPU oracle, on the host's own inputs.
    bench.prepare_copy()?;
    let reference_check = check_reference(&bench, &data, seed)?;
    let tolerance = lab.tolerance();
    let mut sides = Sides {
        starter: LaunchAudit::new(shape, tolerance),
        student: LaunchAudit::new(shape, tolerance),
        starter_finding: None,
        finding: None,
        checked: ClassShares::default(),
        timed: ClassShares::default(),
    };

    // The checked launch: planted and drawn like every later one, the whole
    // output graded.
    let checked = LaunchId {
        phase: LaunchPhase::Checked,
        number: 1,
        of: 1,
    };
    bench.prepare_next()?;
    gpu.launch(student, &mut bench.ws)?;
    gpu.synchronize()?;
    let output = gpu.read_output(&bench.ws)?;
    let reference = gpu.reference_f64(&bench.baselines.oracle_f64, &bench.ws, None)?;
    let output_check = compare(shape, tolerance, &output.output, &reference);
    let shares = row_shares(shape, tolerance, &output.output, &reference);
    sides.checked = ClassShares::of(&shares, |row| bench.redraw.kind_of(row));
    // A write into the grader's pristine copies comes first: the inputs
    // are compared with those copies, so it shows as a changed input too.
    sides.finding = match bench.harness_written(checked)? {
        Some(finding) => Some(finding),
        None => bench.changed_inputs(checked)?,
    };
    sides.student.remember(checked, &output.output);
    let reference_ms = elapsed_ms(started) - inputs_ms;

    let mut warmup_ms = Vec::new();
    for number in 1..=config.warmup as usize {
        let id = LaunchId {
            phase: LaunchPhase::WarmUp,
            number,
            of: config.warmup as usize,
        };
        let times = bench.pair(student, &mut sides, id, false)?;
        warmup_ms.push(times.student);
    }
    let most = config.repetitions.max(1);
    let mut starter_ms = Vec::with_capacity(most as usize);
    let mut student_ms = Vec::with_capacity(most as usize);
    let mut starter_after_starter = Vec::new();
    // The SM clock read right after each starter launch: those after the
    // starter, those after the student's kernel.
    let mut clocks: (Vec<f64>, Vec<f64>) = (Vec::new(), Vec::new());
    let mut stopped = None;
    for number in 1..=most as usize {
        let id = LaunchId {
            phase: LaunchPhase::Timed,
            number,
            of: most as usize,
        };
        // Pairs 1, 3, 5: the starter once more, right after itself.
        let twice = number % 2 == 1 && number < 2 * DRIFT_PAIRS;
        let times = bench.pair(student, &mut sides, id, twice)?;
        starter_ms.push(times.starter.ms);
        clocks.1.push(times.starter.clock_mhz);
        student_ms.push(times.student);
        if let Some(again) = times.starter_again {
            starter_after_starter.push(again.ms);
            clocks.0.push(again.clock_mhz);
        }
        stopped = config.stopping.stop(
            &starter_ms,
            &student_ms,
            most,
            sides.finding.is_some(),
            config.gate,
        );
        if stopped.is_some() {
            break;
        }
    }
    let launches_ms = elapsed_ms(started) - inputs_ms - reference_ms;
    let sm_clock_mhz = gpu.measure_sm_clock(&bench.baselines.clock_probe, 2_000_000)?;
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
    // Every starter launch after the first timed one followed the student's kernel.
    let drift = StarterDrift::of(&starter_after_starter, &starter_ms, (&clocks.0, &clocks.1));
    let mut all_student_ms = warmup_ms.clone();
    all_student_ms.extend(&student_ms);
    let correct = output_check.passed
        && output.out_of_bounds_writes == 0
        && inputs_intact
        && reference_check.agrees
        && sides.finding.is_none()
        && sides.starter_finding.is_none()
        && impossible.is_none()
        && !drift.as_ref().is_some_and(StarterDrift::withholds);
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
        floor: Some(Box::new(floor)),
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
        data: Some(Box::new(TimedData {
            draw_seed,
            planted: bench
                .redraw
                .rows
                .iter()
                .map(|r| r.kind.to_owned())
                .collect(),
            unchanged_inputs: bench.unchanged_inputs(),
            warmup_ms,
        })),
        precision: Some(Box::new(Precision {
            checked: sides.checked,
            timed: sides.timed,
        })),
        drift: drift.map(Box::new),
        two_groups: TwoGroups::of(&all_student_ms).map(Box::new),
        stopped,
    })
}

/// Timed pairs that launch the starter twice, for the drift comparison.
const DRIFT_PAIRS: usize = 3;
// The default rule's fewest pairs hold every drift pair (1, 3, 5), so no
// way of stopping skips the drift check.
const _: () = assert!(2 * DRIFT_PAIRS - 1 <= StoppingRule::DEFAULT.min_pairs as usize);

/// Both kernels' audits over one timing, the first finding of each, and the
/// student's shares of the allowance by class of rows.
struct Sides {
    starter: LaunchAudit,
    student: LaunchAudit,
    starter_finding: Option<LaunchFinding>,
    finding: Option<LaunchFinding>,
    /// The checked launch's, over its whole output.
    checked: ClassShares,
    /// The worst of every audited student launch after it.
    timed: ClassShares,
}

/// One pair's times.
struct PairTimes {
    /// Its first starter launch, which followed the student's kernel (of
    /// the pair before, or of the last warm-up).
    starter: Clocked,
    student: f64,
    /// The starter launched right after itself, when the pair did.
    starter_again: Option<Clocked>,
}

/// A launch's time and the SM clock read right after it.
struct Clocked {
    ms: f64,
    clock_mhz: f64,
}

/// How long each launch's clock read spins (see `Gpu::measure_sm_clock`):
/// half a millisecond a launch, about 16 ms over a flash timing's 33.
const LAUNCH_CLOCK_SPIN_NS: u64 = 500_000;

/// Keeps the first finding of a kernel's launches.
fn record(audited: Result<Vec<RowShare>, LaunchFinding>, first: &mut Option<LaunchFinding>) {
    if let Err(found) = audited {
        first.get_or_insert(found);
    }
}

pub(super) fn elapsed_ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1e3
}

/// `data` uploaded (guarded, output poisoned) with a pristine copy of
/// every input, from which each launch's fresh inputs are drawn.
pub(super) fn upload(gpu: &Gpu, lab: LabRef, data: &CaseData) -> Result<Workspace, GpuError> {
    let mut ws = gpu.workspace(lab, data, POISON_BITS)?;
    gpu.keep_pristine(&mut ws)?;
    Ok(ws)
}

/// One workspace shared by every launch of a run, and what auditing and
/// the floor need from them.
pub(super) struct Bench<'a> {
    gpu: &'a Gpu,
    pub(super) baselines: &'a mut Baselines,
    pub(super) ws: Workspace,
    /// The inputs the run was uploaded from: the lab plants on their layout.
    inputs: std::sync::Arc<dyn CaseInputs>,
    /// Seeds of the fresh inputs, plants and block moves.
    draws: ChaCha8Rng,
    /// The plants and block move of the last launch prepared.
    pub(super) redraw: Redraw,
    /// The pristine copies' fingerprints when uploaded, taken only for a
    /// timing (counters and the line profile never check them).
    pristine: Option<Vec<(&'static str, u64)>>,
    cold_l2: bool,
    /// The fastest L2 sweep seen, as bytes a second (a measured DRAM bandwidth).
    best_sweep_bytes_per_s: f64,
    pub(super) audited: usize,
    audits_ms: f64,
}

impl<'a> Bench<'a> {
    /// Uploads `data` (guarded, output poisoned) with a pristine copy of
    /// every input, so that each launch can be given fresh inputs drawn
    /// from `draw_seed`.
    pub(super) fn new(
        gpu: &'a Gpu,
        baselines: &'a mut Baselines,
        data: &CaseData,
        draw_seed: u64,
        cold_l2: bool,
    ) -> Result<Self, GpuError> {
        let ws = upload(gpu, baselines.lab, data)?;
        Ok(Self::on_workspace(
            gpu, baselines, data, ws, draw_seed, cold_l2,
        ))
    }

    /// A bench on `ws`, a workspace [`Self::new`] uploaded from `data` for
    /// an earlier bench (a line profile's counts reuse its samples'):
    /// every launch prepares its own inputs, so what the last one left
    /// does not matter.
    pub(super) fn on_workspace(
        gpu: &'a Gpu,
        baselines: &'a mut Baselines,
        data: &CaseData,
        ws: Workspace,
        draw_seed: u64,
        cold_l2: bool,
    ) -> Self {
        Self {
            gpu,
            baselines,
            ws,
            inputs: data.inputs.clone(),
            draws: ChaCha8Rng::seed_from_u64(draw_seed),
            redraw: Redraw::default(),
            pristine: None,
            cold_l2,
            best_sweep_bytes_per_s: 0.0,
            audited: 0,
            audits_ms: 0.0,
        }
    }

    /// The workspace, for a later bench on the same inputs.
    pub(super) fn into_workspace(self) -> Workspace {
        self.ws
    }

    /// Rule 1's order before a launch on the host's own inputs (no draw, no plant).
    pub(super) fn prepare_copy(&mut self) -> Result<(), GpuError> {
        self.redraw = Redraw::default();
        self.prepare(Draw::COPY)
    }

    /// Rule 1's order before a launch on fresh inputs: the next draw, with
    /// the lab's plants and block move for it.
    pub(super) fn prepare_next(&mut self) -> Result<(), GpuError> {
        let range = self.baselines.lab.timing_draw_range();
        let draw = Draw {
            seed: self.draws.random(),
            low: range.start,
            high: range.end,
        };
        self.redraw = self.inputs.redraw(&mut self.draws);
        self.prepare(draw)
    }

    /// Fresh inputs, poisoned output, L2 evicted, everything finished,
    /// persisting lines reset.
    fn prepare(&mut self, draw: Draw) -> Result<(), GpuError> {
        let gpu = self.gpu;
        gpu.fresh_inputs(&mut self.ws, &self.baselines.fresh, draw, &self.redraw)?;
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

    /// Fingerprints the pristine copies as uploaded, for [`Self::harness_written`].
    fn remember_pristine(&mut self) -> Result<(), GpuError> {
        let fingerprints = self
            .gpu
            .pristine_fingerprints(&self.ws, &self.baselines.fresh)?;
        self.pristine = Some(fingerprints);
        Ok(())
    }

    /// A finding when the last launch wrote into a pristine copy.
    fn harness_written(&self, launch: LaunchId) -> Result<Option<LaunchFinding>, GpuError> {
        let then = self.pristine.as_ref().ok_or_else(|| {
            GpuError::message("the pristine copies were not fingerprinted before the launch")
        })?;
        let now = self
            .gpu
            .pristine_fingerprints(&self.ws, &self.baselines.fresh)?;
        Ok(now
            .iter()
            .zip(then)
            .find(|(now, then)| now != then)
            .map(|((input, _), _)| LaunchFinding {
                launch,
                kind: FindingKind::HarnessWritten {
                    input: (*input).to_owned(),
                },
            }))
    }

    /// The inputs every launch gets unchanged: scalars, and int tensors
    /// no block move renames (what a kernel may derive a plan from).
    fn unchanged_inputs(&self) -> Vec<String> {
        let moved = self.redraw.blocks.as_ref().map(|b| b.table);
        self.baselines
            .lab
            .abi()
            .args
            .iter()
            .filter(|arg| match arg.kind {
                ArgKind::I32Scalar | ArgKind::F32Scalar => true,
                ArgKind::I32Input => Some(arg.name) != moved,
                _ => false,
            })
            .map(|arg| arg.name.to_owned())
            .collect()
    }

    /// One launch on fresh inputs, timed, then audited: its time and what
    /// the audit found.
    fn audited_launch(
        &mut self,
        kernel: &Kernel,
        audit: &mut LaunchAudit,
        launch: LaunchId,
    ) -> Result<(Clocked, Result<Vec<RowShare>, LaunchFinding>), GpuError> {
        self.prepare_next()?;
        let gpu = self.gpu;
        let ms = gpu.timed(|| gpu.launch(kernel, &mut self.ws))?;
        // Before the audit, so the clock is the one the launch left the GPU
        // at; after every launch alike, so no side's launches follow it more.
        let clock_mhz = gpu.measure_sm_clock(&self.baselines.clock_probe, LAUNCH_CLOCK_SPIN_NS)?;
        Ok((Clocked { ms, clock_mhz }, self.audit(audit, launch)?))
    }

    /// One interleaved pair, the starter first (twice, when `twice`), each
    /// audited, the student's also for harness writes and precision.
    fn pair(
        &mut self,
        student: &Kernel,
        sides: &mut Sides,
        launch: LaunchId,
        twice: bool,
    ) -> Result<PairTimes, GpuError> {
        let starter = self.baselines.starter.clone();
        let (starter_launch, audited) =
            self.audited_launch(&starter, &mut sides.starter, launch)?;
        record(audited, &mut sides.starter_finding);
        let starter_again = match twice {
            true => {
                let (again, audited) = self.audited_launch(&starter, &mut sides.starter, launch)?;
                record(audited, &mut sides.starter_finding);
                Some(again)
            }
            false => None,
        };
        let (student_launch, audited) = self.audited_launch(student, &mut sides.student, launch)?;
        // A write into the grader's pristine copies is named before what
        // the audit saw: the inputs are compared with those copies.
        let audited = match (self.harness_written(launch)?, audited) {
            (Some(written), _) => Err(written),
            (None, Ok(shares)) => {
                let classes = ClassShares::of(&shares, |row| self.redraw.kind_of(row));
                sides.timed.worst(&classes);
                precision::judge(launch, &sides.checked, &classes).map(|()| shares)
            }
            (None, Err(finding)) => Err(finding),
        };
        record(audited, &mut sides.finding);
        Ok(PairTimes {
            starter: starter_launch,
            student: student_launch.ms,
            starter_again,
        })
    }

    /// The audit of the launch that just finished: each recomputed row's
    /// share of the allowance, or why the launch does not count.
    pub(super) fn audit(
        &mut self,
        audit: &mut LaunchAudit,
        launch: LaunchId,
    ) -> Result<Result<Vec<RowShare>, LaunchFinding>, GpuError> {
        let started = Instant::now();
        self.audited += 1;
        let verdict = match self.changed_inputs(launch)? {
            Some(finding) => Err(finding),
            None => {
                let read = self.gpu.read_output(&self.ws)?;
                let (output, outside) = (read.output, read.out_of_bounds_writes);
                let planted = self.redraw.planted_rows();
                // Rows chosen now, from the operating system's entropy: no
                // seed the kernel could know decides them.
                match audit.plan(launch, &output, &planted, &mut rand::rng()) {
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

/// Recomputes sampled rows (every head) on the CPU and compares them with
/// the GPU reference of the same rows, both on the host's own inputs (the
/// workspace prepared as uploaded).
fn check_reference(
    bench: &Bench<'_>,
    data: &CaseData,
    seed: u64,
) -> Result<ReferenceCheck, GpuError> {
    let rows = reference::sampled_rows(seed, data.problem.output.rows);
    let gpu_rows = bench
        .gpu
        .reference_f64(&bench.baselines.oracle_f64, &bench.ws, Some(&rows))?;
    let exact = bench.baselines.lab.oracle(data, Some(&rows));
    Ok(reference::agreement(&exact, &gpu_rows, rows.len()))
}
