//! Messages between flashprof and its worker process.
//!
//! Student kernels run in a separate worker process so that a hang or a sticky
//! CUDA fault costs one case, never the caller. The two sides exchange one
//! JSON object per line: requests on the worker's stdin, events on a private
//! copy of its stdout (the worker points its own fd 1 at stderr at start, so
//! a kernel's `printf` cannot forge a result). Every event the worker sends is
//! a complete, self-describing result, so the caller can stream them to a
//! screen phase by phase.

mod framing;
mod wire_case;

pub use wire_case::WireCase;

pub use framing::{read_message, write_message, FramingError, MAX_FRAME_BYTES};

use serde::{Deserialize, Serialize};

use crate::facts::device::{DeviceInfo, GpuProblem};
use crate::facts::diagnostics::Diagnostic;
use crate::facts::kept_state::KernelFacts;
use crate::facts::metrics::MetricValue;
use crate::facts::resources::{Occupancy, ResourceUsage};
use crate::gpu::compile::Build;
use crate::grade::compare::Comparison;
use crate::grade::experiment::Experiments;
use crate::grade::floor::{Floor, Impossible};
use crate::grade::integrity::Integrity;
use crate::grade::launch_audit::LaunchFinding;
use crate::grade::roofline::{DevicePeaks, Roofline};
use crate::grade::stats::{Speedup, TimingSummary};
use crate::lab::definition::{LabRef, Problem};
use crate::lab::geometry::LaunchGeometry;
use crate::lab::registry;

/// Bumped whenever a message changes shape; both sides check it in the handshake.
/// 2: compiled images travel as binary frames (framing.rs), not JSON arrays.
/// 3: a compile names its build (quick or optimized) and may name the target GPU.
/// 4: counters carry the GPU's peaks (the request the cached ones), the
/// device its SM attributes and UUID, the roofline its per-unit loads.
/// 5: honest timing: every timed and profiled launch audited on fresh
/// inputs (`TimingOutcome::finding`, `floor`, `impossible`; a counters
/// profile that did not compute its output carries no values).
/// 6: the line profile (`Request::Lines`, `Event::Lines`).
/// 7: a case travels as its lab's name and recipe ([`WireCase`]), decoded
/// once by the worker's lab.
/// 8: timing rules 3 (`TimingOutcome::data`, `precision`, `drift`,
/// `two_groups`).
/// 9: a line profile names the kernel it is of (`Request::Lines::kernel`);
/// the starter's comes with the image the worker built it from; a line
/// worker can be readied ahead of its profile (`Request::PrepareLines`); a
/// worker lets go of CUPTI's profiler when asked (`Request::ReleaseCounters`).
/// 10: the non-finite experiments' new changes (`scratch_finite`,
/// `sentinels_tagged`) and the trial's `sentinels_tagged`.
/// 11: a line profile's `setup_ms` and `worker_ms`.
/// 12: a compile problem of its own for the missing CUDA headers
/// (`CompileProblemKind::HeadersMissing`).
/// 13: a line profile is asked for in steps (`Request::Lines::steps`): the
/// samples first, the counts in a second request.
/// 14: the lab is said as the worker starts (`Request::ChooseLab`), so its
/// baselines build while the student's build is made.
/// 15: a timing request names its speed gate (`TimingConfig::gate`), and
/// its outcome what ended the pairs (`TimingOutcome::stopped`); the lab is
/// said with the shape whose inputs to draw ahead (`ChooseLab::inputs`).
pub const PROTOCOL_VERSION: u32 = 15;

/// The rules a speedup was measured under, kept with every timing and in
/// the gradebook's journal so that a row timed under other rules is timed
/// again. 1 (or absent): one checked launch, then timed launches on the
/// same inputs and output. 2: fresh inputs, a poisoned output, L2 evicted
/// and persisting lines reset before every timed and profiled launch, each
/// audited after it ran, and the physical floor (docs/INTEGRITY.md). 3:
/// every launch's data as hard as the hazard cases (the lab's plants moved
/// each launch, block ids renamed, drawn from the operating system's
/// entropy), planted rows always audited, the precision rule, the pristine
/// copies fingerprinted after every student launch, and the starter's drift.
pub const TIMING_RULES: u32 = 3;

/// What the caller asks of the worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "request", rename_all = "snake_case")]
pub enum Request {
    /// Compile a student file (and load it, when a GPU is present).
    /// Every later request is for this file's lab.
    Compile {
        lab: LabId,
        source_path: String,
        source_text: String,
        #[serde(default)]
        build: Build,
        /// The architecture to build for (`sm_90`) when the worker has no
        /// GPU of its own: a build made beside the GPU worker, whose image
        /// that worker then loads. A worker with a GPU builds for it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        target_arch: Option<String>,
    },
    /// Load a kernel image compiled earlier (a restarted worker skips NVRTC).
    Load {
        lab: LabId,
        #[serde(with = "framing::image_bytes")]
        image: Vec<u8>,
        geometry: LaunchGeometry,
    },
    /// Run one hazard case twice on fresh inputs from `seed` and grade it.
    RunCase { case: WireCase, seed: u64 },
    /// Time the loaded kernel against the lab's starter on `case`'s inputs.
    Time {
        case: WireCase,
        seed: u64,
        config: TimingConfig,
    },
    /// Profile the loaded kernel and the starter with hardware counters on `case`'s inputs.
    Counters {
        case: WireCase,
        seed: u64,
        tier: CounterTier,
        /// The metric names when `tier` is `Custom`.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        metrics: Vec<String>,
        /// This GPU's roofs as measured by an earlier worker (the caller's
        /// cache); without them the worker runs the peak benchmarks.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        known_peaks: Option<DevicePeaks>,
    },
    /// Sample and count every instruction of the loaded kernel over a
    /// launch on `case`'s inputs (docs/LINE-PROFILE.md). A worker that has
    /// served it times nothing after: the caller starts one for lines.
    Lines {
        case: WireCase,
        seed: u64,
        kernel: ProfiledKernel,
        steps: LineSteps,
    },
    /// Do everything a line profile of `case` at `seed` needs but the
    /// profile: the baselines, CUPTI's setup, the inputs; answered by
    /// `Event::LinesPrepared`. A line worker started ahead of a save.
    PrepareLines { case: WireCase, seed: u64 },
    /// End this worker's CUPTI profiler session (the counters'), if it has
    /// one: PC Sampling in another process on the same GPU failed to stop
    /// while one was open. Answered by `Event::CountersReleased`; the next
    /// counters request sets it up again.
    ReleaseCounters,
    /// The lab every later request is for, said as soon as the worker is
    /// started: the lab's baselines (its starter, float64 reference and
    /// flashprof's probes) start building on a thread of the worker's while
    /// the student's build is made, and so do the inputs of the shape the
    /// check will time, count or profile, when `inputs` names it (absent in
    /// requests from before it). Answered by `Event::LabChosen`.
    ChooseLab {
        lab: LabId,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        inputs: Option<InputsAhead>,
    },
    /// Finish cleanly.
    Shutdown,
}

/// The shape a worker will time, count or profile lines on, and the seed
/// its inputs are drawn from, named ahead so they are drawn ahead.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputsAhead {
    pub case: WireCase,
    pub seed: u64,
}

/// What a line profile request collects. The samples say where the time
/// goes and take a few tenths of a second; the counts (SASS Metrics runs
/// the kernel patched, hundreds of times slower) add the memory findings.
/// A save's profile asks for the samples first, shows them, then asks the
/// same worker for the counts (docs/LINE-PROFILE.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LineSteps {
    /// The sampled launch, then the counted one.
    Both,
    /// The sampled launch only.
    Samples,
    /// The counted launch only, in a worker that has sampled.
    Counts,
}

impl LineSteps {
    pub fn samples(self) -> bool {
        self != LineSteps::Counts
    }

    pub fn counts(self) -> bool {
        self != LineSteps::Samples
    }
}

/// Which kernel a line profile is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProfiledKernel {
    /// The kernel loaded last: the student's build.
    Student,
    /// The lab's starter, as the worker built it for timing.
    Starter,
}

/// What the line profile read of the loaded kernel, per instruction of its
/// entry point; the caller charges each to a line through the cubin's
/// line table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinesOutcome {
    pub chip: String,
    /// The function sampled: the lab's entry point.
    pub function: String,
    pub readings: Vec<crate::grade::lines::InstructionReading>,
    pub total_samples: u64,
    pub dropped_samples: u64,
    /// Samples were taken every 2^this many cycles.
    pub period_log2: u32,
    /// The launch unprofiled, then its sampled and its counted launch.
    pub plain_launch_ms: f64,
    pub sample_ms: f64,
    pub count_ms: f64,
    /// CUPTI's line APIs set up for this profile (0 where the worker had
    /// them set up before).
    #[serde(default)]
    pub setup_ms: f64,
    /// The whole request in the worker: the inputs, CUPTI's setup, the
    /// three launches and their audits.
    #[serde(default)]
    pub worker_ms: f64,
    /// Why there is no profile although both launches ran: a launch that
    /// did not compute its output shows none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
    /// The starter's cubin, as this worker's NVRTC built it, when the
    /// starter was profiled: the caller reads the starter's line table from
    /// it (a remote worker's NVRTC may not build what the caller's would).
    #[serde(
        default,
        with = "framing::image_bytes",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub starter_image: Vec<u8>,
}

/// A lab as the protocol names it: by name, with its contract's version, so
/// a worker built with another definition of the lab refuses rather than
/// grading against it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabId {
    pub name: String,
    pub contract: String,
}

impl LabId {
    pub fn of(lab: LabRef) -> Self {
        Self {
            name: lab.name().to_owned(),
            contract: lab.contract().to_owned(),
        }
    }

    /// The lab this build knows by that name and contract.
    pub fn resolve(&self) -> Result<LabRef, String> {
        let lab = registry::find(&self.name).ok_or_else(|| registry::unknown(&self.name))?;
        if lab.contract() != self.contract {
            return Err(format!(
                "lab `{}` follows contract {} here, but {} was asked for",
                self.name,
                lab.contract(),
                self.contract
            ));
        }
        Ok(LabRef(lab))
    }
}

/// How to time: counts of launches, and whether to flush L2 between them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TimingConfig {
    pub warmup: u32,
    /// The most timed launches of each kernel (interleaved starter, student,
    /// starter, ...); timing stops earlier when `stopping` says.
    pub repetitions: u32,
    /// Evict L2 before every timed launch (outside the timed region).
    pub cold_l2: bool,
    /// When timing stops before `repetitions` (absent in older requests and
    /// reports: the rule they were timed under,
    /// [`StoppingRule::NARROW`]).
    #[serde(default = "crate::grade::stopping::StoppingRule::before_gates")]
    pub stopping: crate::grade::stopping::StoppingRule,
    /// The speed gate's threshold for this lab on the worker's GPU, when
    /// one serves it: the stopping rule may stop once the speedup's
    /// interval is clear of it. Filled in by the session, which knows the
    /// GPU (absent: no gate, or a request from before gates were named).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<f64>,
    /// The timed launches' draw seed when replaying one (`check --draw-seed`);
    /// absent: the operating system's entropy, new each timing.
    /// (Never zero: draw seeds are odd, which also keeps this field small.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draw_seed: Option<std::num::NonZeroU64>,
}

impl Default for TimingConfig {
    fn default() -> Self {
        Self {
            // Every launch is prepared alike (fresh inputs, cold L2), so one
            // warm-up pair is enough to keep module loading out of the times.
            warmup: 1,
            repetitions: 15,
            cold_l2: true,
            stopping: crate::grade::stopping::StoppingRule::DEFAULT,
            gate: None,
            draw_seed: None,
        }
    }
}

/// What the worker reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// First message of every worker: protocol version and the GPU it found.
    Ready {
        protocol: u32,
        gpu: Result<DeviceInfo, GpuProblem>,
        start_ms: f64,
        /// What the worker's sandbox enforces (absent from workers that predate it).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sandbox: Option<SandboxReport>,
    },
    Compiled(CompileOutcome),
    Loaded {
        load_ms: f64,
    },
    Case(CaseOutcome),
    Timing(TimingOutcome),
    Counters(Result<CountersOutcome, CountersUnavailableReport>),
    /// The line profile, or why it could not be collected.
    Lines(Result<LinesOutcome, String>),
    /// Ready for a line profile (`Request::PrepareLines`).
    LinesPrepared,
    /// The counters' profiler session is ended (`Request::ReleaseCounters`).
    CountersReleased,
    /// The lab is chosen (`Request::ChooseLab`).
    LabChosen,
    /// A request could not be served; the worker stays usable unless `fatal`.
    Failed {
        message: String,
        fatal: bool,
    },
}

/// How far a worker confined itself before reading its first request
/// (docs/SECURITY.md, "Sandbox").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxReport {
    pub level: SandboxLevel,
    /// One line for people: what is enforced, or why not.
    pub notice: String,
    /// The address-space limit (MiB) the worker's compiles run under; only
    /// a worker without a GPU has one (absent from older workers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compile_memory_mb: Option<u64>,
}

/// Whether the worker's Landlock sandbox holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SandboxLevel {
    /// Every restriction flashprof asks for is enforced.
    Full,
    /// The kernel's older Landlock ABI enforces only some of them.
    Partial,
    /// The kernel has no Landlock (or it failed): only the resource limits hold.
    Unavailable,
    /// Turned off on purpose (`FLASHPROF_NO_SANDBOX=1`).
    Disabled,
}

/// Result of compiling a student file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompileOutcome {
    /// Which build this is; only an optimized one is timed or profiled.
    #[serde(default)]
    pub build: Build,
    pub ok: bool,
    pub diagnostics: Vec<Diagnostic>,
    /// Why there is no kernel when it is not the compiler's diagnostics.
    pub problem: Option<CompileProblem>,
    pub resources: Option<ResourceUsage>,
    /// Theoretical occupancy on the worker's GPU (the compile target's typical SM without one) at the declared geometry.
    pub occupancy: Option<Occupancy>,
    pub geometry: Option<LaunchGeometry>,
    /// What the kernel keeps between launches and what its code reads
    /// (empty in reports and from workers that predate it). Boxed, as
    /// most compiles have none, so every message holding one stays small.
    #[serde(default)]
    pub kernel_facts: Box<KernelFacts>,
    /// The compiled image, so a restarted worker can load it without recompiling.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        with = "framing::image_bytes"
    )]
    pub image: Vec<u8>,
    pub compile_ms: f64,
    /// Load time on the GPU, when one is present.
    pub load_ms: Option<f64>,
}

impl CompileOutcome {
    /// No kernel: nothing compiled yet, or `problem` stopped it.
    pub fn failed(problem: Option<CompileProblem>) -> Self {
        Self {
            build: Build::Optimized,
            ok: false,
            diagnostics: Vec::new(),
            problem,
            resources: None,
            occupancy: None,
            geometry: None,
            kernel_facts: Box::default(),
            image: Vec::new(),
            compile_ms: 0.0,
            load_ms: None,
        }
    }
}

/// A compile that failed for a reason other than the code's own errors.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompileProblem {
    pub kind: CompileProblemKind,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompileProblemKind {
    /// The file is unusable: empty, binary, not UTF-8, too large, wrong entry point.
    BadSource,
    /// NVRTC could not be loaded.
    CompilerMissing,
    /// The file includes a CUDA header (`cuda_bf16.h`, `cuda_fp8.h`) and no
    /// trusted folder of them matching this NVRTC was found: the machine's
    /// fault, fixed by `flashprof fetch-cuda`, not the file's.
    HeadersMissing,
    /// NVRTC hung, crashed or failed without diagnostics.
    CompilerFailed,
    /// The submission's compile went past a limit every submission has:
    /// the compile timeout, or the compile memory limit. The student's
    /// result (`compile_error`), kept like any other.
    OverLimit,
}

impl CompileProblemKind {
    /// Why no case of the kernel ran, as a clause: the one wording the
    /// report's case lines and the TUI's cases table share.
    pub fn why_nothing_ran(self) -> &'static str {
        match self {
            Self::BadSource => "the file cannot be used",
            Self::CompilerMissing => "NVRTC is missing",
            Self::HeadersMissing => "the CUDA headers are missing",
            Self::CompilerFailed => "the compiler failed",
            Self::OverLimit => "the compile went past its limit",
        }
    }
}

/// Verdict of one hazard case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CaseStatus {
    Pass,
    Fail,
    /// Killed by the watchdog.
    Timeout,
    /// The launch raised a CUDA error (illegal address, ...).
    Crash,
    /// Not run: no GPU, or the kernel did not compile.
    NotRun,
}

/// Everything known about one hazard case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaseOutcome {
    pub name: String,
    pub summary: String,
    pub shape: Problem,
    pub status: CaseStatus,
    pub comparison: Option<Comparison>,
    pub integrity: Option<Integrity>,
    pub diagnosis: String,
    /// The cause the diagnosis names, as the lab's short stable word
    /// (`nan-guard-read`, `block-table-ignored`), when it names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
    /// The causes whose models all reproduce this case alike, when the
    /// case alone cannot tell them apart (and `cause` is then absent until
    /// the check's other cases settle it: the outcome layer's `settle_candidates`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub candidates: Vec<String>,
    /// What reruns under changed conditions showed (absent when none ran).
    #[serde(default, skip_serializing_if = "no_experiments")]
    pub experiments: Box<Experiments>,
    /// Wall time of the case inside the worker (inputs, two launches, checks).
    pub elapsed_ms: f64,
    /// CPU oracle time, which overlaps the GPU work.
    #[serde(default)]
    pub oracle_ms: f64,
    /// Present when the output was graded against the GPU float64
    /// reference, the CPU oracle recomputing only sampled rows of it (a
    /// case too large for the CPU's whole answer): how they agreed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_check: Option<ReferenceCheck>,
}

impl CaseOutcome {
    /// A case as it stands before anything is measured: its `status` and
    /// what is said of it, nothing compared, no time spent.
    pub fn unmeasured(
        name: &str,
        summary: &str,
        shape: Problem,
        status: CaseStatus,
        diagnosis: String,
    ) -> CaseOutcome {
        CaseOutcome {
            name: name.to_owned(),
            summary: summary.to_owned(),
            shape,
            status,
            comparison: None,
            integrity: None,
            diagnosis,
            cause: None,
            candidates: Vec::new(),
            experiments: Box::default(),
            elapsed_ms: 0.0,
            oracle_ms: 0.0,
            reference_check: None,
        }
    }
}

fn no_experiments(experiments: &Experiments) -> bool {
    experiments.is_empty()
}

/// Student against starter at the timing shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimingOutcome {
    pub shape: Problem,
    pub config: TimingConfig,
    pub student: TimingSummary,
    pub starter: TimingSummary,
    /// Present only when the timed output was correct: an incorrect kernel gets no speedup.
    pub speedup: Option<Speedup>,
    /// The student's output of the timed shape, graded like a case.
    pub output_check: Comparison,
    /// How closely the GPU float64 reference matched the CPU oracle on sampled rows.
    pub reference_check: ReferenceCheck,
    /// SM clock measured right after the timed launches.
    pub sm_clock_mhz: f64,
    pub max_sm_clock_mhz: f64,
    pub elapsed_ms: f64,
    /// The rules this was measured under ([`TIMING_RULES`]; 1 when absent).
    #[serde(default = "first_timing_rules")]
    pub rules: u32,
    /// The first of the student's launches that did not compute its own
    /// output: the speedup is withheld.
    #[serde(default)]
    pub finding: Option<LaunchFinding>,
    /// The same for the starter (a fault of the grader's, not the student's;
    /// the speedup is withheld too).
    #[serde(default)]
    pub starter_finding: Option<LaunchFinding>,
    /// The shortest time any kernel could do the timed problem in on this GPU.
    #[serde(default)]
    pub floor: Option<Box<Floor>>,
    /// Set when the student's median is below the floor: no speedup.
    #[serde(default)]
    pub impossible: Option<Impossible>,
    /// Launches audited after they ran, both kernels, warm-ups included.
    #[serde(default)]
    pub audited_launches: usize,
    /// Where the timing phase's time went.
    #[serde(default)]
    pub phases: Option<TimingPhases>,
    /// Set when the student's profiled launch was refused (it did not
    /// compute its output, or read too little from DRAM): no speedup either.
    #[serde(default)]
    pub profile_refused: Option<String>,
    /// For a lab graded on bytes: achieved bandwidth against the run's
    /// streaming probes (absent for the other labs and in older reports).
    #[serde(default)]
    pub bandwidth: Option<crate::grade::roofline::Bandwidth>,
    /// What the launches were given (absent before rules 3).
    #[serde(default)]
    pub data: Option<Box<TimedData>>,
    /// How much of the allowance each class of rows used: the checked
    /// launch's and the timed launches' worst.
    #[serde(default)]
    pub precision: Option<Box<Precision>>,
    /// The starter after itself against the starter after the student's
    /// kernel; withholds the speedup past its limit.
    #[serde(default)]
    pub drift: Option<Box<crate::grade::drift::StarterDrift>>,
    /// The student's launch times (warm-ups included) in two groups far
    /// apart, named but not withheld.
    #[serde(default)]
    pub two_groups: Option<Box<crate::grade::drift::TwoGroups>>,
    /// What ended the timed pairs (absent in reports from before it was
    /// told).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<crate::grade::stopping::Stopped>,
}

/// What a timing's launches were given, and the student's warm-ups.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimedData {
    /// The seed of every launch's draws, plants and block moves: the
    /// operating system's entropy, new each timing.
    pub draw_seed: u64,
    /// The kinds of hazard every launch carried, at positions of its own.
    pub planted: Vec<String>,
    /// The inputs every launch got unchanged (scalars, int tensors no block
    /// move renames): what a kernel may derive a plan from.
    pub unchanged_inputs: Vec<String>,
    /// The student's warm-up launches, timed like the others.
    pub warmup_ms: Vec<f64>,
}

/// The precision rule's figures ([`crate::grade::precision`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Precision {
    pub checked: crate::grade::precision::ClassShares,
    pub timed: crate::grade::precision::ClassShares,
}

fn first_timing_rules() -> u32 {
    1
}

/// The timing phase's wall time by part, in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct TimingPhases {
    /// Drawing the check's inputs on the CPU and uploading them.
    pub inputs_ms: f64,
    /// The float64 reference over the whole output, and its CPU spot check.
    pub reference_ms: f64,
    /// Preparing, running and auditing every launch.
    pub launches_ms: f64,
    /// Of which the audits (output read back, rows recomputed, compared).
    pub audits_ms: f64,
}

impl TimingOutcome {
    /// Withholds the speedup because the student's profile was refused.
    pub fn refuse_for_profile(&mut self, reason: &str) {
        self.speedup = None;
        self.profile_refused
            .get_or_insert_with(|| reason.to_string());
    }

    /// Whether the starter's drift withholds the speedup.
    fn drift_withholds(&self) -> bool {
        self.drift.as_ref().is_some_and(|d| d.withholds())
    }

    /// Why there is no speedup, in two or three words, for narrow places
    /// (the lecture screen, the side-by-side compare).
    pub fn withheld_word(&self) -> Option<&'static str> {
        use crate::grade::launch_audit::FindingKind;
        if self.speedup.is_some() {
            return None;
        }
        Some(
            match (&self.finding, &self.impossible, &self.profile_refused) {
                (Some(finding), _, _) => match finding.kind {
                    FindingKind::Unwritten { .. } => "output unwritten",
                    FindingKind::Stale { .. } => "stale output",
                    FindingKind::Wrong { .. } => "output wrong",
                    FindingKind::InputChanged { .. } => "inputs changed",
                    FindingKind::WroteOutside { .. } => "wrote outside",
                    FindingKind::LessExact { .. } => "less exact",
                    FindingKind::HarnessWritten { .. } => "harness written",
                },
                (None, Some(_), _) => "impossibly fast",
                (None, None, _) if self.drift_withholds() => "starter slowed",
                (None, None, Some(_)) => "profile refused",
                (None, None, None)
                    if self.starter_finding.is_some() || !self.reference_check.agrees =>
                {
                    "grader fault"
                }
                (None, None, None) => "output wrong",
            },
        )
    }

    /// Why there is no speedup, in one sentence, when there is none.
    pub fn withheld(&self) -> Option<String> {
        if self.speedup.is_some() {
            return None;
        }
        if let Some(finding) = &self.finding {
            return Some(finding.to_string());
        }
        if let Some(impossible) = &self.impossible {
            return Some(impossible.to_string());
        }
        if let Some(drift) = self.drift.as_ref().filter(|d| d.withholds()) {
            return Some(drift.to_string());
        }
        if let Some(refused) = &self.profile_refused {
            return Some(refused.clone());
        }
        if let Some(finding) = &self.starter_finding {
            return Some(format!("the starter's {finding} (a grader fault)"));
        }
        if !self.reference_check.agrees {
            return Some(
                "the GPU float64 reference disagreed with the CPU oracle (a grader fault)".into(),
            );
        }
        Some(format!(
            "the timed output was not correct ({} of {} elements fail)",
            self.output_check.failing, self.output_check.elements
        ))
    }
}

/// Which counter set to collect: one replay pass first, the costly set after.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CounterTier {
    /// One replay pass on GH100: DRAM bytes, duration, occupancy, FMA work, clock.
    Quick,
    /// Adds SM throughput and the L2 hit rate (nine passes on GH100).
    Full,
    /// Metrics named by the user (`flashprof profile --metrics`).
    Custom,
}

/// The set's name as the report and the TUI say it: `full set, 9 passes`.
impl std::fmt::Display for CounterTier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CounterTier::Quick => "quick",
            CounterTier::Full => "full",
            CounterTier::Custom => "custom",
        })
    }
}

/// Hardware counters of the student's kernel and the starter on one shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CountersOutcome {
    pub tier: CounterTier,
    pub shape: Problem,
    pub chip: String,
    pub passes: usize,
    pub student: KernelCounters,
    pub starter: KernelCounters,
    /// The roofs the rooflines were placed on (absent in older reports).
    #[serde(default)]
    pub peaks: Option<DevicePeaks>,
    /// Whether they were measured now, read from the cache, or taken from
    /// the device attributes, and why.
    #[serde(default)]
    pub peaks_origin: Option<String>,
    pub elapsed_ms: f64,
}

/// One kernel's counters and what they mean.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelCounters {
    pub metrics: Vec<MetricValue>,
    /// Absent when the measurements could not be placed (a zero duration, say).
    pub roofline: Option<Roofline>,
    pub error: Option<String>,
    /// Every value came from an earlier measurement of the same build on the
    /// same inputs in this worker (the starter, after the first save).
    #[serde(default)]
    pub reused: bool,
    /// Why these are not the kernel's profile, when they are not: the
    /// profiled launch did not compute its output, or read fewer DRAM bytes
    /// than its inputs hold. No values are kept then, and no speedup is given.
    #[serde(default)]
    pub refused: Option<String>,
}

impl KernelCounters {
    /// A profile refused as not the kernel's own: no values, the reason.
    pub fn refused(reason: String) -> Self {
        Self {
            metrics: Vec::new(),
            roofline: None,
            error: Some(reason.clone()),
            reused: false,
            refused: Some(reason),
        }
    }
}

/// Why there are no counters, and the exact fix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountersUnavailableReport {
    pub reason: String,
    pub detail: String,
    pub fix: String,
}

/// Proof that the GPU float64 reference agrees with the CPU oracle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReferenceCheck {
    pub rows_checked: usize,
    /// Infinite when either side had a NaN.
    #[serde(with = "crate::nonfinite")]
    pub max_rel_diff: f64,
    pub agrees: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_compile_saved_before_kernel_facts_existed_still_loads() {
        let outcome = CompileOutcome {
            ok: true,
            compile_ms: 65.0,
            ..CompileOutcome::failed(None)
        };
        let mut saved = serde_json::to_value(&outcome).expect("serializes");
        saved
            .as_object_mut()
            .expect("an object")
            .remove("kernel_facts")
            .expect("written today");
        let loaded: CompileOutcome = serde_json::from_value(saved).expect("older report parses");
        assert!(loaded.kernel_facts.is_empty());
        assert_eq!(loaded, outcome);
    }
}
