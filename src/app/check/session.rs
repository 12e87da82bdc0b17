//! The worker a check talks to, as one session. It starts the worker (on
//! this machine or far away, as the `WorkerCommand` says), waits out a link
//! that drops, gives a replacement worker the kept build again, and holds
//! the one rule for when a worker is let go ([`lets_go`]). Each verb builds
//! its request once and takes its answer out of the event through
//! [`Answer`], said once per answer.

use std::time::{Duration, Instant};

use super::builds::compile_timeout;
use super::lines::LinesPlan;
use super::ms_since;
use super::plan::{CountersPlan, TimingPlan};
use crate::app::worker_handle::{WorkerCommand, WorkerFailure, WorkerHandle};
use crate::facts::device::{DeviceInfo, GpuProblem};
use crate::grade::roofline::DevicePeaks;
use crate::lab::definition::{LabCase, LabRef};
use crate::lab::geometry::LaunchGeometry;
use crate::outcome::{CountersResult, LinkLost, Progress};
use crate::protocol::{
    CaseOutcome, CaseStatus, CompileOutcome, CompileProblem, CompileProblemKind, CounterTier,
    Event, InputsAhead, LabId, LineSteps, LinesOutcome, ProfiledKernel, Request, TimingConfig,
    TimingOutcome, WireCase,
};

/// How long a worker may take to start (CUDA initialisation included).
pub(super) const WORKER_START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long loading a built image into the worker may take (a module load
/// takes milliseconds; a dead link or driver is what this catches).
const LOAD_TIMEOUT: Duration = Duration::from_secs(60);

/// The waits before each new attempt to reach a remote worker whose link
/// dropped (docs/REMOTE.md): a blip of a few seconds costs no case.
const RECONNECT_BACKOFF: [Duration; 3] = [
    Duration::from_millis(500),
    Duration::from_secs(1),
    Duration::from_secs(2),
];

/// Whether starting a worker waits out a failing link.
#[derive(Debug, Clone, Copy)]
enum Start {
    /// One attempt: a link that fails is said at once.
    Once,
    /// Again after each wait of [`RECONNECT_BACKOFF`] while the link to the
    /// node fails; any other failure is final at once.
    Reconnecting,
}

/// A build as a worker loads it: the image and its launch geometry.
pub(super) struct LoadedBuild<'a> {
    pub image: &'a [u8],
    pub geometry: LaunchGeometry,
}

/// One check's worker: the handle the caller keeps between checks, and what
/// a replacement needs.
pub(super) struct WorkerSession<'a> {
    command: &'a WorkerCommand,
    worker: &'a mut Option<WorkerHandle>,
    lab: LabRef,
    /// The build the cases run, which a replacement worker loads.
    image: Vec<u8>,
    geometry: LaunchGeometry,
    /// How many times a worker was replaced and given the build again.
    restarts: usize,
    /// Why a remote worker cannot be reached again (docs/REMOTE.md): the
    /// remaining requests are not run rather than each waiting on the link.
    lost: Option<LinkLost>,
    /// Whether a worker started is told its lab at once ([`Self::say_lab`]).
    baselines_ahead: bool,
    /// The shape it is told to draw the inputs of, with the lab.
    inputs_ahead: Option<InputsAhead>,
}

/// What a request got instead of the answer it wanted.
#[derive(Debug)]
pub(super) enum Unanswered {
    /// There was no worker to ask.
    NoWorker,
    /// The worker answered something else: its own `Failed`, or another event.
    Answered(Box<Event>),
    /// No answer came (a hang, a death, a failed link); the worker was let go.
    Lost(WorkerFailure),
}

impl Unanswered {
    /// Its words for a report: the worker's own message, `unexpected` and
    /// what came instead, or why nothing came (after `lost`, when given).
    pub(super) fn message(self, unexpected: &str, lost: Option<&str>) -> String {
        match (self, lost) {
            (Self::Answered(event), _) => match *event {
                Event::Failed { message, .. } => message,
                other => format!("{unexpected}: {other:?}"),
            },
            (Self::Lost(failure), Some(lost)) => format!("{lost}: {failure}"),
            (other, _) => other.to_string(),
        }
    }
}

impl std::fmt::Display for Unanswered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NoWorker => f.write_str("no worker"),
            Self::Answered(event) => write!(f, "{event:?}"),
            Self::Lost(failure) => write!(f, "{failure}"),
        }
    }
}

/// An answer a request waits for.
trait Answer: Sized {
    /// The answer `event` carries, or the event when it carries another.
    fn from_event(event: Event) -> Result<Self, Box<Event>>;
}

/// Says, once for each answer, which event carries it.
macro_rules! carried_by {
    ($($answer:ty: $event:pat => $value:expr;)*) => {$(
        impl Answer for $answer {
            fn from_event(event: Event) -> Result<Self, Box<Event>> {
                match event {
                    $event => Ok($value),
                    other => Err(Box::new(other)),
                }
            }
        }
    )*};
}

/// The answer to a `Load`: how long the load took, in milliseconds.
struct Loaded(f64);

/// The answer to a `PrepareLines`: the worker is ready for a line profile.
pub(super) struct LinesPrepared;

/// The answer to a `ReleaseCounters`: the worker's profiler session is ended.
pub(super) struct CountersReleased;

/// The answer to a `ChooseLab`.
struct LabChosen;

carried_by! {
    CompileOutcome: Event::Compiled(outcome) => outcome;
    Loaded: Event::Loaded { load_ms } => Loaded(load_ms);
    CaseOutcome: Event::Case(outcome) => outcome;
    TimingOutcome: Event::Timing(outcome) => outcome;
    CountersResult: Event::Counters(result) => result;
    Result<LinesOutcome, String>: Event::Lines(result) => result;
    LinesPrepared: Event::LinesPrepared => LinesPrepared;
    CountersReleased: Event::CountersReleased => CountersReleased;
    LabChosen: Event::LabChosen => LabChosen;
}

/// The one rule for when a worker is let go, after `request` got `answer`:
/// - no answer: the worker was stopped (a hang), is gone, or is out of reach;
/// - a fatal `Failed`: the worker is ending;
/// - a case that crashed: the worker exits after a sticky fault, and must
///   surely be gone before the next case;
/// - a load that loaded nothing: a worker without the kernel runs no case,
///   where a replacement loads it again.
fn lets_go(request: &Request, answer: &Result<Event, WorkerFailure>) -> bool {
    match (request, answer) {
        (_, Err(_)) | (_, Ok(Event::Failed { fatal: true, .. })) => true,
        (Request::Load { .. }, Ok(event)) => !matches!(event, Event::Loaded { .. }),
        (_, Ok(Event::Case(outcome))) => outcome.status == CaseStatus::Crash,
        _ => false,
    }
}

impl<'a> WorkerSession<'a> {
    /// A session over `worker` (kept by the caller between checks, or
    /// `None`), starting any worker it needs with `command`.
    pub(super) fn new(
        command: &'a WorkerCommand,
        worker: &'a mut Option<WorkerHandle>,
        lab: LabRef,
    ) -> Self {
        Self {
            command,
            worker,
            lab,
            image: Vec::new(),
            geometry: lab.default_geometry(),
            restarts: 0,
            lost: None,
            baselines_ahead: true,
            inputs_ahead: None,
        }
    }

    /// Whether a worker this session starts is told its lab at once, so it
    /// builds the lab's baselines ahead (the default): a check that neither
    /// times, counts nor profiles leaves the CPU to its cases instead.
    pub(super) fn with_baselines_ahead(mut self, ahead: bool) -> Self {
        self.baselines_ahead = ahead;
        self
    }

    /// The shape a worker this session starts draws the inputs of while
    /// the student's build is made, when it is told its lab: the shape the
    /// check times, counts or profiles, whose inputs a paged lab makes on
    /// the CPU in about a second.
    pub(super) fn with_inputs_ahead(mut self, inputs: Option<InputsAhead>) -> Self {
        self.inputs_ahead = inputs;
        self
    }

    pub(super) fn command(&self) -> &'a WorkerCommand {
        self.command
    }

    /// The worker phase: a kept worker that ended since the last check is
    /// let go, and a new one started where none is alive; how long the start
    /// took (0 for a kept worker).
    pub(super) fn start(
        &mut self,
        progress: &mut impl FnMut(Progress),
    ) -> Result<f64, WorkerFailure> {
        // A kept worker may have ended since the last check: a remote one whose
        // connection dropped while idle. Reconnect rather than fail the compile.
        let mut start = Start::Once;
        if let Some(failure) = self.worker.as_mut().and_then(WorkerHandle::ended) {
            if failure.is_transport() {
                start = Start::Reconnecting;
            }
            *self.worker = None;
            progress(Progress::WorkerRestarted {
                reason: format!("the worker ended between checks: {failure}"),
            });
        }
        if self.worker.is_some() {
            return Ok(0.0);
        }
        let spawned = Instant::now();
        let handle = self.spawn(start)?;
        let start_ms = ms_since(spawned);
        progress(Progress::WorkerStarted {
            gpu: handle.gpu.clone(),
            start_ms: handle.start_ms,
            place: handle.place(),
        });
        self.say_lab();
        Ok(start_ms)
    }

    /// A worker for a build that brings its own image, started where none
    /// is alive; nothing is loaded into it.
    pub(super) fn start_if_gone(&mut self) -> Result<(), WorkerFailure> {
        if self.worker.is_none() {
            self.spawn(Start::Once)?;
            self.say_lab();
        }
        Ok(())
    }

    /// Starts a worker in the session's slot.
    fn spawn(&mut self, start: Start) -> Result<&WorkerHandle, WorkerFailure> {
        let mut waits = match start {
            Start::Once => [].iter(),
            Start::Reconnecting => RECONNECT_BACKOFF.iter(),
        };
        loop {
            match WorkerHandle::spawn(self.command, WORKER_START_TIMEOUT) {
                Err(failure @ WorkerFailure::Connection { .. }) => match waits.next() {
                    Some(wait) => std::thread::sleep(*wait),
                    None => return Err(failure),
                },
                spawned => return Ok(self.worker.insert(spawned?)),
            }
        }
    }

    /// Says the session's lab to the session's first worker, when the
    /// session will need its baselines: the worker then builds them on a
    /// thread while the student's build is made. Any failure is left to the
    /// next request, which meets a gone worker by the usual rules (a case
    /// starts a fresh one) and a refusing one builds its baselines when
    /// first needed, as a replacement worker (a restart) does.
    fn say_lab(&mut self) {
        if self.baselines_ahead {
            let choose = Request::ChooseLab {
                lab: LabId::of(self.lab),
                inputs: self.inputs_ahead.clone(),
            };
            let _ = self.ask::<LabChosen>(&choose, LOAD_TIMEOUT);
        }
    }

    /// A live worker with the kept build loaded: the one there, or a
    /// replacement (a restart, said with `reason`).
    pub(super) fn ready(
        &mut self,
        progress: &mut impl FnMut(Progress),
        reason: &str,
    ) -> Result<(), String> {
        if let Some(lost) = &self.lost {
            return Err(lost.message.clone());
        }
        if self.worker.is_some() {
            return Ok(());
        }
        if let Err(failure) = self.spawn(Start::Reconnecting) {
            self.give_up_on_link(&failure);
            return Err(failure.to_string());
        }
        let load = self.load_request(&self.image, self.geometry);
        if let Err(unanswered) = self.ask::<Loaded>(&load, LOAD_TIMEOUT) {
            return Err(format!(
                "the restarted worker could not load the kernel: {unanswered}"
            ));
        }
        self.restarts += 1;
        progress(Progress::WorkerRestarted {
            reason: reason.to_string(),
        });
        Ok(())
    }

    /// Asks nothing more of a node whose link failed this way: the
    /// remaining requests are not run.
    pub(super) fn give_up_on_link(&mut self, failure: &WorkerFailure) {
        if let Some(loss) = failure.link_loss() {
            self.lost = Some(LinkLost {
                loss,
                message: failure.to_string(),
            });
        }
    }

    /// Why the link to the node is given up on, if it is.
    pub(super) fn lost(&self) -> Option<&LinkLost> {
        self.lost.as_ref()
    }

    /// Keeps `build`'s image and geometry for a replacement worker to load.
    pub(super) fn keep(&mut self, build: &CompileOutcome) {
        self.image.clone_from(&build.image);
        if let Some(geometry) = build.geometry {
            self.geometry = geometry;
        }
    }

    /// The build kept for a replacement worker.
    pub(super) fn kept(&self) -> LoadedBuild<'_> {
        LoadedBuild {
            image: &self.image,
            geometry: self.geometry,
        }
    }

    pub(super) fn restarts(&self) -> usize {
        self.restarts
    }

    /// The GPU the worker found.
    pub(super) fn gpu(&self) -> Result<DeviceInfo, GpuProblem> {
        self.worker
            .as_ref()
            .map(|w| w.gpu.clone())
            .unwrap_or_else(|| {
                Err(GpuProblem::NoDevice {
                    detail: "no worker".into(),
                })
            })
    }

    /// The architecture of the worker's GPU, when it has one.
    pub(super) fn gpu_arch(&self) -> Option<String> {
        self.worker
            .as_ref()
            .and_then(|w| w.gpu.as_ref().ok())
            .map(DeviceInfo::arch)
    }

    /// For a remote worker, the program carrying the link and what it added
    /// to the last answered request, in milliseconds.
    pub(super) fn link(&self) -> Option<(&'static str, f64)> {
        self.worker.as_ref().and_then(WorkerHandle::link)
    }

    /// Sends `request` to the worker and waits at most `timeout` for its
    /// answer; the worker is let go as [`lets_go`] says.
    fn ask<T: Answer>(&mut self, request: &Request, timeout: Duration) -> Result<T, Unanswered> {
        self.ask_unless_stale(request, timeout, &|| false)
    }

    /// [`Self::ask`], given up (the worker let go) once `stale()` turns true.
    fn ask_unless_stale<T: Answer>(
        &mut self,
        request: &Request,
        timeout: Duration,
        stale: &dyn Fn() -> bool,
    ) -> Result<T, Unanswered> {
        let handle = self.worker.as_mut().ok_or(Unanswered::NoWorker)?;
        let answer = handle.request_unless_stale(request, timeout, stale);
        if lets_go(request, &answer) {
            *self.worker = None;
        }
        T::from_event(answer.map_err(Unanswered::Lost)?).map_err(Unanswered::Answered)
    }

    /// `first`, the answer to `request`, or when the link dropped under it
    /// (the worker sat idle while a builder had a link of its own), the
    /// answer on a new link, the drop said as happening `when`.
    fn again_on_new_link<T: Answer>(
        &mut self,
        first: Result<T, Unanswered>,
        request: &Request,
        timeout: Duration,
        when: &str,
        progress: &mut impl FnMut(Progress),
    ) -> Result<T, Unanswered> {
        match first {
            Err(Unanswered::Lost(failure)) if failure.is_transport() => {
                progress(Progress::WorkerRestarted {
                    reason: format!("the link dropped {when}: {failure}"),
                });
                self.spawn(Start::Reconnecting).map_err(Unanswered::Lost)?;
                self.ask(request, timeout)
            }
            answered => answered,
        }
    }

    /// Compiles in the worker, which has no GPU: its own memory limit
    /// holds, and a compile past a limit is the submission's.
    pub(super) fn compile(
        &mut self,
        request: &Request,
        progress: &mut impl FnMut(Progress),
    ) -> CompileOutcome {
        let memory_mb = self
            .worker
            .as_ref()
            .and_then(|w| w.sandbox.as_ref())
            .and_then(|s| s.compile_memory_mb);
        match self.ask(request, compile_timeout()) {
            Err(Unanswered::Lost(failure)) if failure.compile_over_limit(memory_mb).is_some() => {
                CompileOutcome::failed(failure.compile_over_limit(memory_mb))
            }
            first => self
                .again_on_new_link(
                    first,
                    request,
                    compile_timeout(),
                    "during the compile",
                    progress,
                )
                .unwrap_or_else(|unanswered| {
                    compiler_failed(unanswered.message(
                        "unexpected answer to compile",
                        Some("the compiler did not finish"),
                    ))
                }),
        }
    }

    /// Loads a build made elsewhere into the live worker, noting how long
    /// that took in `built`. A worker that is gone, or that cannot load it,
    /// is replaced when the next case starts (which loads the kept build
    /// again and reports what went wrong).
    pub(super) fn load_built(
        &mut self,
        built: &mut CompileOutcome,
        progress: &mut impl FnMut(Progress),
    ) {
        let load = self.load_request(&built.image, built.geometry.unwrap_or(self.geometry));
        let first = self.ask(&load, LOAD_TIMEOUT);
        let when = "before the kernel was loaded";
        if let Ok(Loaded(load_ms)) =
            self.again_on_new_link(first, &load, LOAD_TIMEOUT, when, progress)
        {
            built.load_ms = Some(load_ms);
        }
    }

    /// Loads `build` into the worker; how long that took, in milliseconds.
    pub(super) fn load(&mut self, build: &LoadedBuild<'_>) -> Result<f64, Unanswered> {
        let load = self.load_request(build.image, build.geometry);
        self.ask(&load, LOAD_TIMEOUT).map(|Loaded(load_ms)| load_ms)
    }

    /// The one `Load` request: `image` for the session's lab.
    fn load_request(&self, image: &[u8], geometry: LaunchGeometry) -> Request {
        Request::Load {
            lab: LabId::of(self.lab),
            image: image.to_vec(),
            geometry,
        }
    }

    /// Runs one case of the loaded build on inputs drawn from `seed`.
    pub(super) fn run_case(
        &mut self,
        case: &LabCase,
        seed: u64,
        timeout: Duration,
    ) -> Result<CaseOutcome, Unanswered> {
        let request = Request::RunCase {
            case: case.into(),
            seed,
        };
        self.ask(&request, timeout)
    }

    /// Times the loaded build against the starter on the plan's inputs,
    /// naming `gate`, the speed gate's threshold on this worker's GPU, to
    /// the stopping rule.
    pub(super) fn time(
        &mut self,
        plan: &TimingPlan,
        seed: u64,
        gate: Option<f64>,
    ) -> Result<TimingOutcome, Unanswered> {
        let request = Request::Time {
            case: (&plan.case).into(),
            seed,
            config: TimingConfig {
                gate,
                ..plan.config
            },
        };
        self.ask(&request, plan.timeout)
    }

    /// Collects one tier of hardware counters on the plan's inputs; the
    /// worker measures the GPU's peaks only when `known_peaks` has none.
    pub(super) fn counters(
        &mut self,
        plan: &CountersPlan,
        tier: CounterTier,
        seed: u64,
        known_peaks: Option<DevicePeaks>,
    ) -> Result<CountersResult, Unanswered> {
        let request = Request::Counters {
            case: (&plan.case).into(),
            seed,
            tier,
            metrics: plan.custom_metrics.clone(),
            known_peaks,
        };
        self.ask(&request, plan.timeout)
    }

    /// Ends the worker's CUPTI profiler session, so that a line profile in
    /// another process can sample the GPU.
    pub(super) fn release_counters(&mut self, timeout: Duration) -> Result<(), Unanswered> {
        match self.ask::<CountersReleased>(&Request::ReleaseCounters, timeout) {
            // A worker that is gone holds nothing any more.
            Ok(CountersReleased) | Err(Unanswered::NoWorker | Unanswered::Lost(_)) => Ok(()),
            Err(answered) => Err(answered),
        }
    }

    /// Readies the worker for a line profile of `case` at `seed`.
    pub(super) fn prepare_lines(
        &mut self,
        case: WireCase,
        seed: u64,
        timeout: Duration,
    ) -> Result<LinesPrepared, Unanswered> {
        self.ask(&Request::PrepareLines { case, seed }, timeout)
    }

    /// Samples and counts the loaded build line by line on the plan's inputs.
    pub(super) fn lines(
        &mut self,
        plan: &LinesPlan,
        seed: u64,
        kernel: ProfiledKernel,
        steps: LineSteps,
        stale: &dyn Fn() -> bool,
    ) -> Result<Result<LinesOutcome, String>, Unanswered> {
        let request = Request::Lines {
            case: (&plan.case).into(),
            seed,
            kernel,
            steps,
        };
        self.ask_unless_stale(&request, plan.timeout, stale)
    }
}

/// A compile with no answer that is the grader's failure, not the submission's.
pub(super) fn compiler_failed(message: String) -> CompileOutcome {
    CompileOutcome::failed(Some(CompileProblem {
        kind: CompileProblemKind::CompilerFailed,
        message,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::check::phases::not_run;
    use crate::lab::flash_prefill::FLASH_PREFILL;

    #[test]
    fn a_worker_is_let_go_after_no_answer_a_fatal_failure_a_crash_or_a_load_that_failed() {
        let lab = FLASH_PREFILL;
        let case = lab.timing_case(&[]).expect("the timing case");
        let run = Request::RunCase {
            case: (&case).into(),
            seed: 1,
        };
        let load = Request::Load {
            lab: LabId::of(lab),
            image: Vec::new(),
            geometry: lab.default_geometry(),
        };
        let failed = |fatal| {
            Ok(Event::Failed {
                message: "no".into(),
                fatal,
            })
        };
        let with_status = |status| {
            let mut outcome = not_run(lab, &case, String::new());
            outcome.status = status;
            Ok(Event::Case(outcome))
        };
        let lost = Err(WorkerFailure::Timeout(Duration::from_secs(1)));
        assert!(lets_go(&run, &lost));
        assert!(lets_go(&run, &failed(true)));
        assert!(!lets_go(&run, &failed(false)));
        assert!(lets_go(&run, &with_status(CaseStatus::Crash)));
        assert!(!lets_go(&run, &with_status(CaseStatus::Fail)));
        assert!(lets_go(&load, &failed(false)));
        assert!(!lets_go(&load, &Ok(Event::Loaded { load_ms: 1.0 })));
    }

    #[test]
    fn an_answer_is_taken_only_from_its_own_event() {
        assert!(matches!(
            Loaded::from_event(Event::Loaded { load_ms: 2.0 }),
            Ok(Loaded(ms)) if ms == 2.0
        ));
        let other = TimingOutcome::from_event(Event::Loaded { load_ms: 2.0 });
        assert!(matches!(other.map_err(|e| *e), Err(Event::Loaded { .. })));
    }
}
