//! The worker process: compiles and runs untrusted kernels on behalf of the
//! caller, one request at a time, and reports each result as an event.
//!
//! It holds all GPU state. When a kernel faults with a sticky CUDA error the
//! context is unusable, so the worker reports the case and exits; the
//! caller starts a fresh worker for the remaining cases. A hang is the
//! caller's to handle: it kills the process after its watchdog expires.

mod counters;
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
use cudarc::driver::CudaFunction;

use crate::facts::arch::parse_arch;
use crate::facts::resources::{theoretical_occupancy, SmLimits, DEFAULT_TARGET};
use crate::gpu::compile::{self, Build, CompileError, CompileOptions};
use crate::gpu::device::{FreshKernels, Gpu, GpuError, Kernel, L2Flusher, PROBES_SOURCE};
use crate::grade::compare::{compare_scaled, rows_of, POISON_BITS};
use crate::grade::experiment::{Experiments, GuardSide};
use crate::grade::integrity::Integrity;
use crate::lab::definition::{CaseData, Graded, LabCase, LabRef};
use crate::lab::experiment::{self, Conditions, FirstRuns, Rerun};
use crate::lab::geometry::LaunchGeometry;
use crate::lab::source::StudentSource;
use crate::lab::verdict::cause;
use crate::protocol::{
    read_message, write_message, CaseOutcome, CaseStatus, CompileOutcome, CompileProblem,
    CompileProblemKind, CountersUnavailableReport, Event, FramingError, LabId, LineSteps,
    ProfiledKernel, Request, TimingConfig, WireCase, MAX_FRAME_BYTES, PROTOCOL_VERSION,
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

/// Kernels the worker needs besides the student's, loaded on first use
/// for the lab in use from [`BaselineImages`] (built ahead when the caller
/// said the lab with `ChooseLab`), and the L2 flusher that timing and counters share.
struct Baselines {
    lab: LabRef,
    starter: Kernel,
    /// The starter's cubin, which a line profile of the starter sends back
    /// for its line table.
    starter_image: Vec<u8>,
    oracle_f64: CudaFunction,
    clock_probe: CudaFunction,
    l2_flusher: L2Flusher,
    /// What gives every timed and profiled launch fresh inputs, and checks them after.
    fresh: FreshKernels,
    /// The empty kernel whose launch is one term of the physical floor.
    empty: CudaFunction,
    /// The compiled probes, kept for the peak benchmarks counters run once
    /// and the streaming roofs a lab graded on bytes is timed against.
    probes: Vec<u8>,
}

/// What [`Baselines`] are loaded from: three NVRTC builds of trusted code,
/// a few hundred milliseconds of CPU between them. When the caller says
/// the lab first (`ChooseLab`), they start on a thread of their own, so
/// they overlap the student's build and cases instead of delaying the first
/// timing, counters or long case; otherwise they are built at first use.
struct BaselineImages {
    starter: compile::CompiledKernel,
    oracle: Vec<u8>,
    probes: Vec<u8>,
}

impl BaselineImages {
    /// The three builds for `lab` on `arch`, side by side.
    fn compile(lab: LabRef, arch: String) -> Result<Self, String> {
        let options = CompileOptions::for_arch(Some(arch));
        std::thread::scope(|scope| {
            let starter = scope.spawn(|| {
                let file = lab.starter();
                let source = StudentSource::from_bytes(file.path, file.text.as_bytes(), lab)
                    .map_err(|e| e.to_string())?;
                compile::compile(&source, &options).map_err(|e| e.to_string())
            });
            let oracle = scope.spawn(|| {
                let support = lab.support();
                compile::compile_trusted(support.file.path, support.file.text, &options)
                    .map_err(|e| e.to_string())
            });
            let probes = compile::compile_trusted("kernels/probes.cu", PROBES_SOURCE, &options)
                .map_err(|e| e.to_string());
            fn joined<T>(
                handle: std::thread::ScopedJoinHandle<'_, Result<T, String>>,
            ) -> Result<T, String> {
                handle
                    .join()
                    .unwrap_or_else(|_| Err("a baseline build panicked".into()))
            }
            // Every thread joined before any error is returned.
            let (starter, oracle) = (joined(starter), joined(oracle));
            Ok(Self {
                starter: starter?,
                oracle: oracle?,
                probes: probes?,
            })
        })
    }

    /// Starts [`Self::compile`] on a thread of its own.
    fn start(lab: LabRef, arch: String) -> std::thread::JoinHandle<Result<Self, String>> {
        std::thread::spawn(move || Self::compile(lab, arch))
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
    /// Cases rerun under changed conditions since the kernel was loaded (at most [`MAX_PROBED_CASES`]).
    probed_cases: usize,
}

/// Most failing cases one worker reruns per loaded kernel to tell causes
/// apart: enough for every case of every shipped lab's check (18 at most),
/// few enough that a broken kernel costs seconds.
const MAX_PROBED_CASES: usize = 24;

/// A case whose first two launches took longer than this is not rerun: the
/// experiments must stay well inside the case's watchdog.
const PROBE_LAUNCH_BUDGET_MS: f64 = 400.0;

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
            probed_cases: 0,
        }
    }

    /// Waits for a baseline build still running and drops what it made,
    /// rather than leave the thread detached: the process may exit next,
    /// and NVRTC's exit-time teardown must not race a thread inside it.
    fn finish_baseline_build(&mut self) {
        if let Some(compiling) = self.baseline_images.take() {
            let _ = compiling.join();
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
            Request::ChooseLab { lab } => match self.choose_lab(&lab) {
                Ok(()) => {
                    self.build_baselines_ahead();
                    (Event::LabChosen, false)
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
                match timing::time(gpu, student, baselines, case, seed, config) {
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
        match profiler.collect(gpu, student, baselines, &request) {
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
        let prepared = lines::inputs(&mut self.line_inputs, baselines.lab, case, seed)
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
        let prepared = match lines::inputs(&mut self.line_inputs, baselines.lab, case, seed) {
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

    /// Starts building the chosen lab's baselines on a thread, unless they
    /// are built or building, or there is no GPU to load them on. Only
    /// `ChooseLab` asks for it: a check that neither times, counts nor
    /// profiles never does, and builds nothing it will not use.
    fn build_baselines_ahead(&mut self) {
        if self.baselines.is_some() || self.baseline_images.is_some() {
            return;
        }
        if let (Some(lab), Some(arch)) = (self.lab, self.arch()) {
            self.baseline_images = Some(BaselineImages::start(lab, arch));
        }
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

    /// Compiles and loads the starter and the support kernels once per worker.
    fn baselines(&mut self) -> Result<(), GpuError> {
        if self.baselines.is_some() {
            return Ok(());
        }
        let lab = self.lab()?;
        let gpu = self
            .gpu
            .as_ref()
            .ok_or_else(|| GpuError::message("no GPU in this worker"))?;
        let images = match self.baseline_images.take() {
            Some(compiling) => compiling
                .join()
                .unwrap_or_else(|_| Err("the baselines' build thread panicked".into())),
            None => BaselineImages::compile(lab, gpu.info.arch()),
        }
        .map_err(GpuError::message)?;
        let BaselineImages {
            starter,
            oracle: oracle_image,
            probes,
        } = images;
        let l2_sweep = gpu.load_support(&probes, "l2_sweep")?;
        self.baselines = Some(Baselines {
            lab,
            starter: gpu.load(&starter.image, lab.abi().entry_point, starter.geometry)?,
            starter_image: starter.image,
            oracle_f64: gpu.load_support(&oracle_image, lab.support().oracle_f64)?,
            clock_probe: gpu.load_support(&probes, "clock_probe")?,
            l2_flusher: gpu.l2_flusher(&l2_sweep)?,
            fresh: FreshKernels::load(gpu, &probes)?,
            empty: gpu.load_support(&probes, "empty_launch")?,
            probes,
        });
        Ok(())
    }

    fn run_case(&mut self, case: &LabCase, seed: u64) -> (Event, bool) {
        let started = Instant::now();
        let Some(lab) = self.lab else {
            return failure("running a case needs a GPU and a loaded kernel", false);
        };
        let inputs = match lab.generate(case, seed) {
            Ok(i) => i,
            Err(e) => return failure(e, false),
        };
        // A case too large for the CPU oracle's whole answer is graded
        // against the GPU float64 reference, which the CPU proves on rows.
        let sampled = (inputs.expected.is_none() && inputs.problem.oracle_sampled())
            .then(|| reference::sampled_rows(seed, inputs.problem.output.rows));
        if sampled.is_some() {
            if let Err(e) = self.baselines() {
                let why = format!("flashprof's float64 reference or starter did not load: {e}");
                return (Event::Case(ungraded(case, &inputs, why)), e.sticky);
            }
        }
        let (Some(gpu), Some(kernel)) = (&self.gpu, &self.student) else {
            return failure("running a case needs a GPU and a loaded kernel", false);
        };
        let oracle_f64 = sampled
            .as_ref()
            .and(self.baselines.as_ref())
            .map(|b| &b.oracle_f64);
        // The oracle needs only the inputs, so it runs on the CPU while the GPU works.
        let ((exact, oracle_ms), launched) = rayon::join(
            || {
                let started = Instant::now();
                let exact = match (&inputs.expected, &sampled) {
                    (Some(expected), _) => expected.clone(),
                    (None, rows) => lab.oracle(&inputs, rows.as_deref()),
                };
                (exact, started.elapsed().as_secs_f64() * 1e3)
            },
            || run_twice(gpu, lab, kernel, &inputs, oracle_f64),
        );
        let (reference, reference_check) = match (&sampled, &launched) {
            (Some(rows), Ok(runs)) => {
                let whole = runs.reference.clone().unwrap_or_default();
                let row_len = inputs.problem.output.heads * inputs.problem.output.dim;
                let proven = rows_of(&whole, rows, row_len);
                let check = reference::agreement(&exact, &proven, rows.len());
                if !check.agrees {
                    let why = format!(
                        "flashprof's GPU float64 reference disagrees with its CPU oracle on {} \
                         sampled rows (largest relative difference {:e})",
                        rows.len(),
                        check.max_rel_diff
                    );
                    return (Event::Case(ungraded(case, &inputs, why)), false);
                }
                (whole, Some(check))
            }
            _ => (exact, None),
        };
        let elapsed_ms = || started.elapsed().as_secs_f64() * 1e3;
        let mut outcome = CaseOutcome {
            oracle_ms,
            reference_check,
            ..CaseOutcome::unmeasured(
                &case.name,
                &case.summary,
                inputs.problem.clone(),
                CaseStatus::Crash,
                String::new(),
            )
        };
        match launched {
            Err(e) => {
                let (diagnosis, word) = crash_diagnosis(lab, &e);
                outcome.diagnosis = diagnosis;
                outcome.cause = Some(word.to_owned());
                let stray_read = e.name == "CUDA_ERROR_ILLEGAL_ADDRESS";
                if let Some(note) = lab.fault_note(&inputs).filter(|_| stray_read) {
                    outcome.diagnosis = format!("{}; {note}", outcome.diagnosis);
                }
                outcome.elapsed_ms = elapsed_ms();
                (Event::Case(outcome), e.sticky)
            }
            Ok(runs) => {
                let comparison = compare_scaled(
                    inputs.problem.output,
                    lab.tolerance(),
                    lab.tolerance_scales(&inputs).as_deref(),
                    &runs.first,
                    &reference,
                );
                outcome.status = if comparison.passed && runs.integrity.is_clean() {
                    CaseStatus::Pass
                } else {
                    CaseStatus::Fail
                };
                // A case graded on sampled rows is too large for the
                // experiments' whole CPU answers.
                let wants_probe = outcome.status == CaseStatus::Fail
                    && outcome.reference_check.is_none()
                    && self.probed_cases < MAX_PROBED_CASES
                    && runs.launch_ms < PROBE_LAUNCH_BUDGET_MS;
                let mut sticky = false;
                let experiments = if wants_probe {
                    self.probed_cases += 1;
                    let first = FirstRuns {
                        data: &inputs,
                        out: &runs.first,
                        reference: &reference,
                        comparison: &comparison,
                        runs_differ: runs.integrity.runs_differ,
                        second: runs.second.as_deref(),
                    };
                    let mut rerun = GpuRerun { gpu, lab, kernel };
                    match experiment::run(&*lab, &first, &mut rerun) {
                        Ok(found) => found,
                        Err(e) => {
                            // The experiment's own launch failed: report what the
                            // first runs showed, and restart if the context is gone.
                            sticky = e.sticky;
                            Experiments::default()
                        }
                    }
                } else {
                    Experiments::default()
                };
                let diagnosis = lab.diagnose(
                    &inputs,
                    &Graded {
                        launch: &kernel.geometry,
                        out: &runs.first,
                        reference: &reference,
                        comparison: &comparison,
                        integrity: &runs.integrity,
                        experiments: &experiments,
                    },
                );
                outcome.diagnosis = diagnosis.line;
                outcome.cause = diagnosis.cause.map(str::to_owned);
                outcome.candidates = diagnosis.candidates.iter().map(|c| c.to_string()).collect();
                outcome.experiments = Box::new(experiments);
                outcome.comparison = Some(comparison);
                outcome.integrity = Some(runs.integrity);
                outcome.elapsed_ms = elapsed_ms();
                (Event::Case(outcome), sticky)
            }
        }
    }
}

/// A case flashprof could not grade, through no fault of the kernel: not
/// run, saying why (a check with a case not run ends incomplete, not failed).
fn ungraded(case: &LabCase, inputs: &CaseData, why: String) -> CaseOutcome {
    CaseOutcome::unmeasured(
        &case.name,
        &case.summary,
        inputs.problem.clone(),
        CaseStatus::NotRun,
        format!("not graded: {why}; not the kernel's fault"),
    )
}

/// Reruns of a case on the GPU under changed conditions, each on a fresh workspace.
struct GpuRerun<'a> {
    gpu: &'a Gpu,
    lab: LabRef,
    kernel: &'a Kernel,
}

impl Rerun for GpuRerun<'_> {
    type Error = GpuError;

    fn rerun(&mut self, data: &CaseData, conditions: &Conditions) -> Result<Vec<f32>, GpuError> {
        let mut ws = self
            .gpu
            .workspace(self.lab, data, conditions.output_start)?;
        for &(index, side) in &conditions.finite_guards {
            let (before, after) = match side {
                GuardSide::Before => (true, false),
                GuardSide::After => (false, true),
                GuardSide::Both => (true, true),
            };
            self.gpu.refill_guards(&mut ws, index, before, after, 0.0)?;
        }
        if conditions.finite_scratch {
            self.gpu.refill_scratch(&mut ws, 0.0);
        }
        self.gpu.poison_output(&mut ws)?;
        self.gpu.launch(self.kernel, &mut ws)?;
        self.gpu.synchronize()?;
        Ok(self.gpu.read_output(&ws)?.output)
    }
}

/// Two launches on the same inputs, poisoned before each, with the integrity facts.
struct CaseRuns {
    first: Vec<f32>,
    /// The second run's output, kept only when it differs from the first.
    second: Option<Vec<f32>>,
    integrity: Integrity,
    /// Wall time of the two launches with their copies.
    launch_ms: f64,
    /// The float64 reference kernel's whole output on the same inputs, when asked for.
    reference: Option<Vec<f64>>,
}

/// The two launches, audited, then `oracle_f64`'s whole answer on the same
/// workspace when it is given.
fn run_twice(
    gpu: &Gpu,
    lab: LabRef,
    kernel: &Kernel,
    inputs: &CaseData,
    oracle_f64: Option<&CudaFunction>,
) -> Result<CaseRuns, GpuError> {
    let started = Instant::now();
    let mut ws = gpu.workspace(lab, inputs, POISON_BITS)?;
    let mut outputs = Vec::with_capacity(2);
    let mut out_of_bounds_writes = 0;
    for _ in 0..2 {
        gpu.poison_output(&mut ws)?;
        gpu.launch(kernel, &mut ws)?;
        gpu.synchronize()?;
        let result = gpu.read_output(&ws)?;
        out_of_bounds_writes = out_of_bounds_writes.max(result.out_of_bounds_writes);
        outputs.push(result.output);
    }
    let second = outputs.pop().unwrap_or_default();
    let first = outputs.pop().unwrap_or_default();
    let runs_differ = first
        .iter()
        .zip(&second)
        .any(|(a, b)| a.to_bits() != b.to_bits());
    let launch_ms = started.elapsed().as_secs_f64() * 1e3;
    let inputs_modified = gpu.modified_inputs(&ws)?;
    // The reference reads the inputs as generated: a kernel that wrote into
    // them is judged on its own output, against an answer it cannot move.
    let reference = match oracle_f64 {
        Some(oracle) if inputs_modified.is_empty() => Some(gpu.reference_f64(oracle, &ws, None)?),
        Some(oracle) => {
            let pristine = gpu.workspace(lab, inputs, POISON_BITS)?;
            Some(gpu.reference_f64(oracle, &pristine, None)?)
        }
        None => None,
    };
    Ok(CaseRuns {
        launch_ms,
        second: runs_differ.then_some(second),
        first,
        integrity: Integrity {
            out_of_bounds_writes,
            inputs_modified,
            runs_differ,
        },
        reference,
    })
}

/// What a failed launch says, and its cause word.
fn crash_diagnosis(lab: LabRef, error: &GpuError) -> (String, &'static str) {
    let pointers: Vec<&str> = lab
        .abi()
        .args
        .iter()
        .filter(|arg| arg.kind.is_pointer())
        .map(|arg| arg.name)
        .collect();
    let buffers = match pointers.split_last() {
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => "a buffer".to_owned(),
    };
    match error.name.as_str() {
        "CUDA_ERROR_ILLEGAL_ADDRESS" => (
            format!("the kernel accessed an illegal address ({error}): an index far outside {buffers}"),
            cause::ILLEGAL_ADDRESS,
        ),
        "CUDA_ERROR_MISALIGNED_ADDRESS" => (
            format!("misaligned memory access ({error}): check vector loads"),
            cause::MISALIGNED_ADDRESS,
        ),
        "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES" => (
            format!(
                "the launch asked for more threads, registers or shared memory than a block of this kernel may have ({error})"
            ),
            cause::TOO_MANY_RESOURCES,
        ),
        "CUDA_ERROR_INVALID_VALUE" => (
            format!("the launch was refused ({error}): check the declared threads and dynamic shared memory"),
            cause::LAUNCH_REFUSED,
        ),
        _ if error.out_of_memory => (
            format!("the GPU ran out of memory ({error})"),
            cause::OUT_OF_MEMORY,
        ),
        _ => (format!("the kernel failed: {error}"), cause::KERNEL_FAILED),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::registry;

    fn failed(name: &str, out_of_memory: bool) -> GpuError {
        GpuError {
            call: "cuStreamSynchronize",
            name: name.to_owned(),
            sticky: true,
            out_of_memory,
        }
    }

    /// The baselines a timing loads, built on their own thread as a lab is
    /// chosen, hold every function the loader then asks for.
    #[test]
    fn every_lab_s_baseline_images_build_on_their_thread_with_what_is_loaded() {
        use crate::gpu::compile::image::defines_function;
        for lab in registry::labs() {
            let lab = LabRef(lab);
            let images = BaselineImages::start(lab, "sm_90".into())
                .join()
                .expect("the build thread ends")
                .unwrap_or_else(|e| panic!("{}: {e}", lab.name()));
            assert!(defines_function(
                &images.starter.image,
                lab.abi().entry_point
            ));
            assert!(defines_function(&images.oracle, lab.support().oracle_f64));
            for probe in [
                "l2_sweep",
                "clock_probe",
                "empty_launch",
                "fingerprint_bytes",
            ] {
                assert!(defines_function(&images.probes, probe), "{probe}");
            }
        }
    }

    /// The lab said as the worker starts is the one its later requests
    /// are for; a worker without a GPU starts no baseline build, and a lab
    /// of another contract is refused with the worker still usable.
    #[test]
    fn choosing_a_lab_sets_it_and_a_foreign_contract_is_refused() {
        let mut worker = Worker::new(None);
        let lab = LabRef(registry::find("paged-decode").expect("a shipped lab"));
        let (event, fatal) = worker.serve(Request::ChooseLab {
            lab: LabId::of(lab),
        });
        assert_eq!(event, Event::LabChosen);
        assert!(!fatal);
        assert!(worker.lab == Some(lab));
        assert!(worker.baseline_images.is_none());
        let mut foreign = LabId::of(lab);
        foreign.contract.push_str("-other");
        let (event, fatal) = worker.serve(Request::ChooseLab { lab: foreign });
        assert!(
            matches!(event, Event::Failed { fatal: false, .. }),
            "{event:?}"
        );
        assert!(!fatal);
        assert!(worker.lab == Some(lab));
    }

    #[test]
    fn every_failed_launch_has_a_cause_word_and_names_the_labs_buffers() {
        let lab = LabRef(registry::find("paged-prefill-fp8").expect("a shipped lab"));
        let (line, word) = crash_diagnosis(lab, &failed("CUDA_ERROR_ILLEGAL_ADDRESS", false));
        assert_eq!(word, cause::ILLEGAL_ADDRESS);
        assert!(line.contains("kCache, vCache"), "{line}");
        let words: Vec<&str> = [
            ("CUDA_ERROR_MISALIGNED_ADDRESS", false),
            ("CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", false),
            ("CUDA_ERROR_INVALID_VALUE", false),
            ("CUDA_ERROR_OUT_OF_MEMORY", true),
            ("CUDA_ERROR_LAUNCH_FAILED", false),
        ]
        .into_iter()
        .map(|(name, oom)| crash_diagnosis(lab, &failed(name, oom)).1)
        .collect();
        assert_eq!(
            words,
            [
                cause::MISALIGNED_ADDRESS,
                cause::TOO_MANY_RESOURCES,
                cause::LAUNCH_REFUSED,
                cause::OUT_OF_MEMORY,
                cause::KERNEL_FAILED
            ]
        );
    }
}
