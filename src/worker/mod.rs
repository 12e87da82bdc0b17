//! The worker process: compiles and runs untrusted kernels on behalf of the
//! caller, one request at a time, and reports each result as an event.
//!
//! It holds all GPU state. When a kernel faults with a sticky CUDA error the
//! context is unusable, so the worker reports the case and exits; the
//! caller starts a fresh worker for the remaining cases. A hang is the
//! caller's to handle: it kills the process after its watchdog expires.

mod baselines;
mod cases;
mod counters;
mod drawn;
mod lines;
mod reference;
pub mod sandbox;
mod selection;
mod stdio;
mod timing;

pub use selection::{GpuSelection, GPU_ENV};
pub use stdio::{exit_when_caller_hangs_up, EXIT_ON_HANGUP_ENV};

use std::io::{BufReader, Write};
use std::time::Instant;

use anyhow::Context;

use self::baselines::{BaselineImages, Baselines};
use crate::facts::arch::parse_arch;
use crate::facts::resources::{theoretical_occupancy, SmLimits, DEFAULT_TARGET};
use crate::gpu::compile::{self, Build, CompileError, CompileOptions};
use crate::gpu::device::{Gpu, GpuError, Kernel};
use crate::lab::definition::{LabCase, LabRef};
use crate::lab::geometry::LaunchGeometry;
use crate::lab::source::StudentSource;
use crate::protocol::{
    read_message, write_message, CompileOutcome, CompileProblem, CompileProblemKind,
    CountersUnavailableReport, Event, FramingError, InputsAhead, LabId, LineSteps, ProfiledKernel,
    Request, TimingConfig, WireCase, MAX_FRAME_BYTES, PROTOCOL_VERSION,
};

/// Runs the worker loop on this process's stdin and stdout until shutdown or a fatal error.
pub fn main() -> anyhow::Result<()> {
    let started = Instant::now();
    let mut protocol_out = stdio::take_protocol_stdout().context("redirecting stdout")?;
    stdio::exit_when_caller_hangs_up();
    let mut input = BufReader::new(std::io::stdin().lock());
    // Before the GPU is opened, so the driver's threads are confined too.
    let mut sandbox = sandbox::confine(&[std::os::fd::AsRawFd::as_raw_fd(&protocol_out)]);
    let gpu = GpuSelection::from_env()
        .map_err(|detail| crate::facts::device::GpuProblem::DriverError { detail })
        .and_then(|selection| selection.open().map_err(|p| sandbox::explain(p, &sandbox)));
    if gpu.is_err() {
        // No CUDA context reserves address space here (none was asked for,
        // or none could be made): the students' compiles run under the
        // memory limit (a failure to set it is said).
        let limited = match sandbox::limit_compile_memory() {
            Ok(mb) => {
                sandbox.compile_memory_mb = Some(mb);
                format!("address space at most {mb} MiB")
            }
            Err(e) => format!("WARNING: {e}"),
        };
        eprintln!("flashprof worker: {limited}");
        sandbox.notice.push_str(&format!("; {limited}"));
    }
    let ready = Event::Ready {
        protocol: PROTOCOL_VERSION,
        gpu: gpu.as_ref().map(|g| g.info.clone()).map_err(Clone::clone),
        start_ms: started.elapsed().as_secs_f64() * 1e3,
        sandbox: Some(sandbox),
    };
    write_message(&mut protocol_out, &ready)?;
    let mut worker = Worker::new(gpu.ok());
    loop {
        let request: Request = match read_message(&mut input) {
            Ok(r) => r,
            Err(FramingError::Closed) => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        if request == Request::Shutdown {
            return Ok(());
        }
        let (event, must_exit) = worker.serve(request);
        write_message(&mut protocol_out, &event)?;
        protocol_out.flush()?;
        if must_exit {
            return Ok(());
        }
    }
}

struct Worker {
    gpu: Option<Gpu>,
    /// The lab chosen last (`ChooseLab`, or a compiled or loaded kernel's):
    /// every request after it is for this lab.
    lab: Option<LabRef>,
    student: Option<Kernel>,
    baselines: Option<Baselines>,
    /// The chosen lab's baseline images, compiling on a thread of their own
    /// since `ChooseLab` (always for `lab`: a new lab waits this build out).
    baseline_images: Option<std::thread::JoinHandle<Result<BaselineImages, String>>>,
    /// Enabled on the first counters request; an error is kept so it is reported, not retried.
    counters: Option<Result<counters::Counters, CountersUnavailableReport>>,
    /// Enabled on the first line request, kept the same way.
    lines: Option<Result<lines::LineProfiler, String>>,
    line_inputs: lines::KeptInputs,
    /// The inputs of the shape timed, counted and profiled, kept between
    /// requests (and drawn ahead when `ChooseLab` names them).
    drawn: drawn::DrawnInputs,
    /// Cases rerun under changed conditions since the kernel was loaded (at most [`MAX_PROBED_CASES`]).
    probed_cases: usize,
}

/// A failed request: the event to send and whether the context is now unusable.
fn failure(error: impl std::fmt::Display, fatal: bool) -> (Event, bool) {
    (
        Event::Failed {
            message: error.to_string(),
            fatal,
        },
        fatal,
    )
}

impl Drop for Worker {
    /// The process exits right after (see [`Worker::finish_baseline_build`]).
    fn drop(&mut self) {
        self.finish_baseline_build();
    }
}

impl Worker {
    fn new(gpu: Option<Gpu>) -> Worker {
        Worker {
            gpu,
            lab: None,
            student: None,
            baselines: None,
            baseline_images: None,
            counters: None,
            lines: None,
            line_inputs: None,
            drawn: drawn::DrawnInputs::default(),
            probed_cases: 0,
        }
    }

    fn serve(&mut self, request: Request) -> (Event, bool) {
        match request {
            Request::Compile {
                lab,
                source_path,
                source_text,
                build,
                target_arch,
            } => match self
                .choose_lab(&lab)
                .and_then(|()| self.target(build, target_arch))
            {
                Ok(options) => self.compile(&source_path, &source_text, &options),
                Err(e) => failure(e, false),
            },
            Request::Load {
                lab,
                image,
                geometry,
            } => match self.choose_lab(&lab) {
                Ok(()) => self.load(&image, geometry),
                Err(e) => failure(e, false),
            },
            Request::RunCase { case, seed } => match self.case(&case) {
                Ok(case) => self.run_case(&case, seed),
                Err(e) => failure(e, false),
            },
            Request::Time { case, seed, config } => match self.case(&case) {
                Err(e) => failure(e, false),
                Ok(case) => self.time(&case, seed, config),
            },
            Request::Counters {
                case,
                seed,
                tier,
                metrics,
                known_peaks,
            } => match self.case(&case) {
                Err(e) => failure(e, false),
                Ok(case) => self.counters(counters::CountersRequest {
                    case,
                    seed,
                    tier,
                    custom_metrics: metrics,
                    known_peaks,
                }),
            },
            Request::ReleaseCounters => {
                self.counters = None;
                (Event::CountersReleased, false)
            }
            Request::ChooseLab { lab, inputs } => match self.choose_lab(&lab) {
                Ok(()) => {
                    self.build_baselines_ahead();
                    match inputs.map(|ahead| self.draw_ahead(ahead)) {
                        Some(Err(e)) => failure(e, false),
                        Some(Ok(())) | None => (Event::LabChosen, false),
                    }
                }
                Err(e) => failure(e, false),
            },
            Request::PrepareLines { case, seed } => match self.case(&case) {
                Ok(case) => self.prepare_lines(&case, seed),
                Err(e) => failure(e, false),
            },
            Request::Lines {
                case,
                seed,
                kernel,
                steps,
            } => match self.case(&case) {
                Ok(case) => self.lines(&case, seed, kernel, steps),
                Err(e) => failure(e, false),
            },
            Request::Shutdown => failure("shutdown is handled by the loop", true),
        }
    }

    /// Times the loaded kernel against the starter on `case`'s inputs.
    fn time(&mut self, case: &LabCase, seed: u64, config: TimingConfig) -> (Event, bool) {
        match self.baselines() {
            Err(e) => {
                let sticky = e.sticky;
                failure(e, sticky)
            }
            Ok(()) => {
                let (Some(gpu), Some(student), Some(baselines)) =
                    (&self.gpu, &self.student, &mut self.baselines)
                else {
                    return failure("timing needs a GPU and a loaded kernel", false);
                };
                let drawn = &mut self.drawn;
                match timing::time(gpu, student, baselines, drawn, case, seed, config) {
                    Ok(outcome) => (Event::Timing(outcome), false),
                    Err(e) => failure(&e, e.sticky),
                }
            }
        }
    }

    /// Builds the lab's baselines and checks the GPU and the loaded kernel a
    /// measurement (`what` it is, "... needs") stands on: the failure to
    /// answer with when one is missing, `None` when all three are there.
    fn unmeasurable(&mut self, what: &str) -> Option<(Event, bool)> {
        if let Err(e) = self.baselines() {
            let sticky = e.sticky;
            return Some(failure(e, sticky));
        }
        match (&self.gpu, &self.student, &self.baselines) {
            (Some(_), Some(_), Some(_)) => None,
            _ => Some(failure(format!("{what} a GPU and a loaded kernel"), false)),
        }
    }

    fn counters(&mut self, request: counters::CountersRequest) -> (Event, bool) {
        if let Some(answer) = self.unmeasurable("counters need") {
            return answer;
        }
        let (Some(gpu), Some(student), Some(baselines)) =
            (&self.gpu, &self.student, &mut self.baselines)
        else {
            unreachable!("unmeasurable checked all three");
        };
        let profiler = self
            .counters
            .get_or_insert_with(|| counters::Counters::enable(gpu));
        let profiler = match profiler {
            Ok(p) => p,
            Err(report) => return (Event::Counters(Err(report.clone())), false),
        };
        match profiler.collect(gpu, student, baselines, &mut self.drawn, &request) {
            Ok(outcome) => (Event::Counters(Ok(outcome)), false),
            Err(e) => {
                let sticky = e.sticky;
                failure(e, sticky)
            }
        }
    }

    /// What a line profile needs before the save's build is loaded, so
    /// that the profile of the next save starts sooner: the baselines, the
    /// inputs and their workspace. CUPTI is set up by the profile itself,
    /// after the build is loaded: the order of every profile that worked on
    /// the H100.
    fn prepare_lines(&mut self, case: &LabCase, seed: u64) -> (Event, bool) {
        if let Some(answer) = self.unmeasurable("a line profile needs") {
            return answer;
        }
        let (Some(gpu), Some(baselines)) = (&self.gpu, &self.baselines) else {
            unreachable!("unmeasurable checked them");
        };
        let prepared = lines::inputs(
            &mut self.line_inputs,
            &mut self.drawn,
            baselines.lab,
            case,
            seed,
        )
        .and_then(|prepared| prepared.upload(gpu, baselines.lab));
        if let Err(e) = prepared {
            let sticky = e.sticky;
            return failure(e, sticky);
        }
        (Event::LinesPrepared, false)
    }

    fn lines(
        &mut self,
        case: &LabCase,
        seed: u64,
        kernel: ProfiledKernel,
        steps: LineSteps,
    ) -> (Event, bool) {
        let started = std::time::Instant::now();
        if let Some(answer) = self.unmeasurable("a line profile needs") {
            return answer;
        }
        let (Some(gpu), Some(student), Some(baselines)) =
            (&self.gpu, &self.student, &mut self.baselines)
        else {
            unreachable!("unmeasurable checked all three");
        };
        let profiled = match kernel {
            ProfiledKernel::Student => student.clone(),
            ProfiledKernel::Starter => baselines.starter.clone(),
        };
        let entry = baselines.lab.abi().entry_point;
        let prepared = match lines::inputs(
            &mut self.line_inputs,
            &mut self.drawn,
            baselines.lab,
            case,
            seed,
        ) {
            Ok(prepared) => prepared,
            Err(e) => return failure(e, false),
        };
        if lines::launch_only() {
            // Only the student's launch is for Nsight Compute to see.
            if kernel == ProfiledKernel::Starter {
                return (Event::Lines(Err(lines::no_collector(None))), false);
            }
            return match lines::launch_once(gpu, &profiled, baselines, &prepared.data) {
                Ok(why) => (Event::Lines(Err(why)), false),
                Err(e) => {
                    let sticky = e.sticky;
                    failure(e, sticky)
                }
            };
        }
        let mut setup_ms = 0.0;
        let profiler = self.lines.get_or_insert_with(|| {
            let set_up = std::time::Instant::now();
            let profiler = lines::LineProfiler::enable(gpu);
            setup_ms = timing::elapsed_ms(set_up);
            profiler
        });
        let profiler = match profiler {
            Ok(profiler) => profiler,
            Err(why) => return (Event::Lines(Err(why.clone())), false),
        };
        match profiler.collect(gpu, &profiled, entry, baselines, prepared, steps) {
            Ok(mut outcome) => {
                if kernel == ProfiledKernel::Starter {
                    outcome.starter_image = baselines.starter_image.clone();
                }
                outcome.setup_ms = setup_ms;
                outcome.worker_ms = timing::elapsed_ms(started);
                (Event::Lines(Ok(outcome)), false)
            }
            Err(e) => {
                let sticky = e.sticky;
                failure(e, sticky)
            }
        }
    }

    /// Switches to the requested lab (its baselines are rebuilt on next use).
    fn choose_lab(&mut self, id: &LabId) -> Result<(), String> {
        let lab = id.resolve()?;
        if self.lab != Some(lab) {
            self.finish_baseline_build();
            self.lab = Some(lab);
            self.student = None;
            self.baselines = None;
        }
        Ok(())
    }

    /// Starts drawing the inputs `ahead` names on a thread of their own,
    /// once the chosen lab has read their case; a worker without a GPU
    /// never times, counts or profiles, so it draws nothing.
    fn draw_ahead(&mut self, ahead: InputsAhead) -> Result<(), String> {
        let case = self.case(&ahead.case)?;
        if let (Some(_), Some(lab)) = (&self.gpu, self.lab) {
            self.drawn.ahead(lab, case, ahead.seed);
        }
        Ok(())
    }

    /// A case as it arrived (JSON), decoded once by the chosen lab.
    fn case(&self, case: &WireCase) -> Result<LabCase, String> {
        let lab = self
            .lab
            .ok_or("no lab chosen: compile or load a kernel first")?;
        case.decode(&*lab).map_err(|e| e.to_string())
    }

    fn lab(&self) -> Result<LabRef, GpuError> {
        self.lab
            .ok_or_else(|| GpuError::message("no lab chosen: compile or load a kernel first"))
    }

    fn arch(&self) -> Option<String> {
        self.gpu.as_ref().map(|g| g.info.arch())
    }

    /// What to build for: this worker's GPU; without one, the architecture
    /// the caller named (a build beside the GPU worker), else the lab's Hopper.
    fn target(&self, build: Build, target_arch: Option<String>) -> Result<CompileOptions, String> {
        let arch = match (self.arch(), target_arch) {
            (Some(own), _) => own,
            (None, Some(named)) if parse_arch(&named).is_some() => named,
            (None, Some(named)) => {
                return Err(format!("`{named}` is not a GPU architecture such as sm_90"))
            }
            (None, None) => {
                return Ok(CompileOptions {
                    build,
                    ..CompileOptions::default()
                })
            }
        };
        Ok(CompileOptions {
            arch: Some(arch),
            build,
        })
    }

    fn compile(&mut self, path: &str, text: &str, options: &CompileOptions) -> (Event, bool) {
        let started = Instant::now();
        let mut outcome = CompileOutcome::failed(None);
        outcome.build = options.build;
        let Some(lab) = self.lab else {
            return failure("no lab chosen for this compile", false);
        };
        let source = match StudentSource::from_bytes(path, text.as_bytes(), lab) {
            Ok(s) => s,
            Err(e) => {
                outcome.problem = Some(CompileProblem {
                    kind: CompileProblemKind::BadSource,
                    message: e.to_string(),
                });
                return (Event::Compiled(outcome), false);
            }
        };
        let compiled = compile::compile(&source, options);
        outcome.compile_ms = started.elapsed().as_secs_f64() * 1e3;
        let compiled = match compiled {
            Ok(c) => c,
            Err(CompileError::Failed { diagnostics, .. }) => {
                outcome.diagnostics = diagnostics;
                return (Event::Compiled(outcome), false);
            }
            Err(e) => {
                let kind = match e {
                    CompileError::Source(_) | CompileError::MissingEntryPoint { .. } => {
                        CompileProblemKind::BadSource
                    }
                    CompileError::LibraryMissing { .. } => CompileProblemKind::CompilerMissing,
                    CompileError::HeadersMissing { .. } => CompileProblemKind::HeadersMissing,
                    _ => CompileProblemKind::CompilerFailed,
                };
                outcome.problem = Some(CompileProblem {
                    kind,
                    message: e.to_string(),
                });
                return (Event::Compiled(outcome), false);
            }
        };
        if compiled.image.len() as u64 > MAX_FRAME_BYTES {
            // It could not be sent back to the caller for a restart anyway.
            outcome.diagnostics = compiled.diagnostics;
            outcome.problem = Some(CompileProblem {
                kind: CompileProblemKind::BadSource,
                message: format!(
                    "{path}: the compiled kernel image is {} bytes, more than the {MAX_FRAME_BYTES}-byte \
                     limit (a very large initialised __device__ table?)",
                    compiled.image.len()
                ),
            });
            return (Event::Compiled(outcome), false);
        }
        outcome.ok = true;
        outcome.diagnostics = compiled.diagnostics;
        outcome.resources = compiled.resources;
        outcome.geometry = Some(compiled.geometry);
        outcome.kernel_facts = Box::new(compiled.facts);
        if self.gpu.is_some() {
            match self.load(&compiled.image, compiled.geometry) {
                (Event::Loaded { load_ms }, _) => outcome.load_ms = Some(load_ms),
                other => return other,
            }
            // NVRTC leaves ptxas's report out when it serves a cached
            // result, and ptxas never reports `__launch_bounds__`; the
            // driver knows both for a loaded kernel.
            if let Some(driver) = self.student.as_ref().and_then(|k| k.resources().ok()) {
                match &mut outcome.resources {
                    Some(ptxas) => ptxas.max_threads_per_block = driver.max_threads_per_block,
                    None => outcome.resources = Some(driver),
                }
            }
        }
        // The GPU in use, or without one the compile target's typical SM.
        let limits = match &self.gpu {
            Some(gpu) => gpu.info.sm_limits(),
            None => SmLimits::typical(
                options
                    .arch
                    .as_deref()
                    .and_then(parse_arch)
                    .unwrap_or(DEFAULT_TARGET),
            ),
        };
        outcome.occupancy = outcome
            .resources
            .as_ref()
            .map(|usage| theoretical_occupancy(usage, &compiled.geometry, &limits));
        outcome.image = compiled.image;
        (Event::Compiled(outcome), false)
    }

    fn load(&mut self, image: &[u8], geometry: LaunchGeometry) -> (Event, bool) {
        let Some(gpu) = &self.gpu else {
            return failure("no GPU in this worker", false);
        };
        let Some(lab) = self.lab else {
            return failure("no lab chosen for this load", false);
        };
        let started = Instant::now();
        match gpu.load(image, lab.abi().entry_point, geometry) {
            Ok(kernel) => {
                self.student = Some(kernel);
                // A new kernel is a new check: its failing cases may be probed again.
                self.probed_cases = 0;
                let load_ms = started.elapsed().as_secs_f64() * 1e3;
                (Event::Loaded { load_ms }, false)
            }
            Err(e) => failure(format!("loading the compiled kernel: {e}"), e.sticky),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::registry;

    /// `ChooseLab` for `lab`, naming the timing shape of `shape_of` to draw ahead.
    fn choose(worker: &mut Worker, lab: LabId, shape_of: Option<LabRef>) -> (Event, bool) {
        let inputs = shape_of.map(|owner| InputsAhead {
            case: WireCase::from(&owner.timing_case(&[]).expect("the timing shape")),
            seed: 7,
        });
        worker.serve(Request::ChooseLab { lab, inputs })
    }

    fn refused((event, fatal): (Event, bool)) -> bool {
        matches!(event, Event::Failed { fatal: false, .. }) && !fatal
    }

    /// The lab said as the worker starts is the one its later requests
    /// are for; a worker without a GPU starts no baseline build and draws
    /// no inputs ahead; inputs named with another lab's case, and a lab of
    /// another contract, are refused with the worker still usable.
    #[test]
    fn choosing_a_lab_sets_it_and_a_foreign_contract_is_refused() {
        let mut worker = Worker::new(None);
        let lab = LabRef(registry::find("paged-decode").expect("a shipped lab"));
        let chosen = choose(&mut worker, LabId::of(lab), Some(lab));
        assert_eq!(chosen, (Event::LabChosen, false));
        assert!(worker.lab == Some(lab));
        assert!(worker.baseline_images.is_none());
        assert!(worker.drawn.is_empty(), "no GPU, so nothing is drawn ahead");
        let flash = LabRef(registry::find("flash-prefill").expect("a shipped lab"));
        assert!(refused(choose(&mut worker, LabId::of(lab), Some(flash))));
        assert!(worker.lab == Some(lab));
        let mut foreign = LabId::of(lab);
        foreign.contract.push_str("-other");
        assert!(refused(choose(&mut worker, foreign, None)));
        assert!(worker.lab == Some(lab));
    }
}
