//! The line profile of a check (`check --lines`, the TUI with `--lines` on
//! every passing save; docs/LINE-PROFILE.md): a worker of its own loads the build the
//! cases ran and samples and counts it on the timing inputs; each
//! instruction is charged to a line of the student's file through the
//! build's line table, here in the caller. The lab's starter is profiled
//! the same way once per line worker's GPU, so a student can compare.

use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::session::{LoadedBuild, Unanswered, WorkerSession};
use super::CheckPlan;
use crate::app::worker_handle::{WorkerCommand, WorkerHandle};
use crate::facts::device::DeviceInfo;
use crate::gpu::compile::line_table::{attribute, Attribution, LineTable};
use crate::grade::lines::{by_line, merge, source_of, LineKey, LineProfile};
use crate::lab::definition::{LabCase, LabRef};
use crate::lab::geometry::LaunchGeometry;
use crate::lab::source::marker_name;
use crate::protocol::{Event, LineSteps, LinesOutcome, ProfiledKernel, WireCase};

/// The line profile a plan asks for.
#[derive(Debug, Clone)]
pub struct LinesPlan {
    /// The case whose inputs are sampled: the timing shape.
    pub case: LabCase,
    pub timeout: Duration,
}

/// The line workers of one front end, and the starter's profile, which is
/// the same for every save on one GPU.
///
/// Each save's profile runs in a worker that has profiled nothing before,
/// in the order that worked every time on the H100 (2026-12-06): the build
/// loaded, then CUPTI's line APIs set up, then the student's launches
/// sampled and counted (and, on the first save, the starter's). A worker is
/// let go after the save it served. A front end with later saves (the TUI,
/// `bench`) starts the next one at once, in the background, and readies it
/// (a build loaded, the baselines, the inputs), so a save pays for none of
/// that; [`LineWorker::settle`] waits for it before a check times anything.
#[derive(Default)]
pub struct LineWorker {
    /// Start and ready the next save's worker after each profile.
    ahead: bool,
    /// The next worker while it is being started and readied, then ready.
    next: Option<JoinHandle<Option<WorkerHandle>>>,
    ready: Option<WorkerHandle>,
    /// The starter's profile once it was taken (a failed one is tried
    /// again on the next save).
    starter: Option<(String, Box<LineProfile>)>,
    /// The seed of every profile of this front end: the first check's. The
    /// profile is no verdict, so its inputs need not change between saves,
    /// and a worker readied ahead makes them before the save.
    seed: Option<u64>,
}

type StarterProfile = Result<Box<LineProfile>, String>;

impl LineWorker {
    /// Line workers for a session of saves: each next one started and
    /// readied in the background after a profile.
    pub fn for_saves() -> Self {
        Self {
            ahead: true,
            ..Self::default()
        }
    }

    /// Waits until the next worker is started and readied, so that its
    /// start (CUDA's setup, the baselines' build, the inputs) is over
    /// before a check times anything on the GPU.
    pub fn settle(&mut self) {
        if let Some(next) = self.next.take() {
            self.ready = next.join().ok().flatten();
        }
    }

    /// Ends the worker started ahead, if any.
    pub fn shutdown(mut self) {
        self.settle();
        if let Some(handle) = self.ready.take() {
            handle.shutdown();
        }
    }
}

/// How a profile keeps in step with its save: whether a newer save has
/// made it stale, and where its samples go as soon as they are charged.
pub(super) struct SaveHooks<'a> {
    pub stale: &'a dyn Fn() -> bool,
    pub on_heat: &'a mut dyn FnMut(&LineProfile),
    /// When the check's lines phase began: `heat_ms` counts from there.
    pub phase_started: Instant,
}

/// Collects the profile of `build`, the build the cases ran, in a line
/// worker (the one readied ahead, else a new one), then charges it; the
/// starter's profile rides along, collected on the first check on `gpu`.
pub(super) fn profile_lines(
    plan: &CheckPlan,
    lines: &LinesPlan,
    command: &WorkerCommand,
    build: &LoadedBuild<'_>,
    gpu: Option<&DeviceInfo>,
    kept: &mut LineWorker,
    save: SaveHooks<'_>,
) -> Result<LineProfile, String> {
    let SaveHooks {
        stale,
        on_heat,
        phase_started,
    } = save;
    let started = Instant::now();
    kept.settle();
    let waited_ms = super::ms_since(started);
    // One that ended while idle (a remote link dropped) is replaced.
    let mut worker = kept
        .ready
        .take()
        .and_then(|mut ready| ready.ended().is_none().then_some(ready));
    let seed = *kept.seed.get_or_insert(plan.seed);
    let mut session = WorkerSession::new(command, &mut worker, plan.lab);
    let steps = StudentSteps {
        plan,
        lines,
        build,
        seed,
        stale,
        phase_started,
    };
    let profile = steps.profile(&mut session, on_heat);
    drop(session);
    // This worker has sampled: it serves no other profile.
    let mut used = worker.take();
    let profile = profile.map(|mut profile| {
        profile.waited_ms = waited_ms;
        let starter = StarterRun {
            command,
            plan,
            lines,
            build,
            seed,
            stale,
        };
        // A newer save stopped the counts: the starter waits for a save
        // that is still wanted (a new worker's start would be wasted here).
        profile.starter = Some(match stale() {
            true => Err(crate::app::worker_handle::WorkerFailure::Superseded.to_string()),
            false => starter.profile_kept(gpu, &mut kept.starter, &mut used),
        });
        profile
    });
    if !kept.ahead {
        if let Some(used) = used {
            used.shutdown();
        }
        return profile;
    }
    let ready = Ready {
        command: command.clone(),
        lab: plan.lab,
        image: build.image.to_vec(),
        geometry: build.geometry,
        case: WireCase::from(&lines.case),
        seed,
        timeout: lines.timeout,
    };
    kept.next = Some(std::thread::spawn(move || {
        if let Some(used) = used {
            used.shutdown();
        }
        ready.start()
    }));
    profile
}

/// What the student's profile is taken with.
struct StudentSteps<'a> {
    plan: &'a CheckPlan,
    lines: &'a LinesPlan,
    build: &'a LoadedBuild<'a>,
    seed: u64,
    stale: &'a dyn Fn() -> bool,
    /// When the lines phase began, for `heat_ms`.
    phase_started: Instant,
}

/// What a heat-only profile says while its counts are being taken.
pub const COUNTS_COMING: &str = "counting each instruction...";

impl StudentSteps<'_> {
    /// The student's profile in `session`'s worker, in two steps: the
    /// samples, charged to lines and given to `on_heat` at once (where the
    /// time goes), then the counts in a second request to the same worker
    /// (the memory findings; SASS Metrics runs the kernel patched, hundreds
    /// of times slower). Counts that fail or are stopped leave the samples'
    /// profile, saying why it has none.
    fn profile(
        &self,
        session: &mut WorkerSession<'_>,
        on_heat: &mut dyn FnMut(&LineProfile),
    ) -> Result<LineProfile, String> {
        let (plan, build) = (self.plan, self.build);
        let student = ProfiledKernel::Student;
        let sampled = collect(
            session,
            build,
            self.lines,
            student,
            LineSteps::Samples,
            self.seed,
            self.stale,
        )?;
        let mut heat = charge(&sampled, build.image, &plan.source_path, &plan.source_text)?;
        heat.heat_ms = super::ms_since(self.phase_started);
        heat.counts_missing = Some(COUNTS_COMING.into());
        on_heat(&heat);
        let counted = session
            .lines(
                self.lines,
                self.seed,
                student,
                LineSteps::Counts,
                self.stale,
            )
            .map_err(unanswered)
            .and_then(|answer| answer);
        match counted {
            // A profiled launch that did not compute its output shows no
            // profile: not its counts, nor the samples taken before it.
            Ok(LinesOutcome {
                refused: Some(refused),
                ..
            }) => Err(refused),
            Ok(counted) => {
                let both = LinesOutcome {
                    readings: merge(
                        sampled.readings,
                        counted
                            .readings
                            .iter()
                            .map(|r| (r.offset, r.counts))
                            .collect(),
                    ),
                    count_ms: counted.count_ms,
                    worker_ms: sampled.worker_ms + counted.worker_ms,
                    ..sampled
                };
                let mut profile = charge(&both, build.image, &plan.source_path, &plan.source_text)?;
                profile.heat_ms = heat.heat_ms;
                Ok(profile)
            }
            Err(why) => {
                heat.counts_missing = Some(format!("no counts: {why}"));
                Ok(heat)
            }
        }
    }
}

/// What the starter's profile is taken with: the save's plan, case, seed
/// and build (a worker must hold a student build to profile anything),
/// and when a newer save stops it.
struct StarterRun<'a> {
    command: &'a WorkerCommand,
    plan: &'a CheckPlan,
    lines: &'a LinesPlan,
    build: &'a LoadedBuild<'a>,
    seed: u64,
    stale: &'a dyn Fn() -> bool,
}

impl StarterRun<'_> {
    /// The starter's profile on `gpu`: the one kept, else a new one (kept
    /// when it worked; a failed one is tried again on the next save), taken
    /// once `spent`, the student's worker, has ended: two profiled contexts
    /// never share the GPU.
    fn profile_kept(
        &self,
        gpu: Option<&DeviceInfo>,
        kept: &mut Option<(String, Box<LineProfile>)>,
        spent: &mut Option<WorkerHandle>,
    ) -> StarterProfile {
        let key = format!(
            "{} on {}",
            self.plan.lab.name(),
            gpu.map_or_else(
                || "an unknown GPU".to_owned(),
                |g| format!("{} {}", g.ordinal, g.name)
            )
        );
        match kept {
            Some((kept_key, starter)) if *kept_key == key => Ok(starter.clone()),
            _ => {
                if let Some(spent) = spent.take() {
                    spent.shutdown();
                }
                let starter = self.profile();
                if let Ok(taken) = &starter {
                    *kept = Some((key, taken.clone()));
                }
                starter
            }
        }
    }

    /// The starter's profile, in a worker of its own, charged through the
    /// starter's own line table (read from the image the worker built it
    /// from).
    ///
    /// A worker's second sampling returned the samples' count but not one
    /// of their instructions (H100, 2026-12-06: every starter profile taken
    /// after the student's in the same worker), so the starter, like every
    /// profile, is sampled by a worker that has sampled nothing before.
    fn profile(&self) -> StarterProfile {
        let mut worker = None;
        let mut session = WorkerSession::new(self.command, &mut worker, self.plan.lab);
        let outcome = collect(
            &mut session,
            self.build,
            self.lines,
            ProfiledKernel::Starter,
            LineSteps::Both,
            self.seed,
            self.stale,
        );
        drop(session);
        if let Some(worker) = worker {
            worker.shutdown();
        }
        let outcome = outcome?;
        let starter = self.plan.lab.starter();
        charge(&outcome, &outcome.starter_image, starter.path, starter.text).map(Box::new)
    }
}

/// What a line worker started ahead is readied with: the last build (a
/// save that changed nothing the worker holds loads its own anyway), the
/// profile's case and seed.
struct Ready {
    command: WorkerCommand,
    lab: LabRef,
    image: Vec<u8>,
    geometry: LaunchGeometry,
    case: WireCase,
    seed: u64,
    timeout: Duration,
}

impl Ready {
    /// A started and readied worker, or none when it could not be readied
    /// (the save then starts its own, and says why if that fails too).
    fn start(self) -> Option<WorkerHandle> {
        let mut worker = None;
        let mut session = WorkerSession::new(&self.command, &mut worker, self.lab);
        session.start_if_gone().ok()?;
        let build = LoadedBuild {
            image: &self.image,
            geometry: self.geometry,
        };
        session.load(&build).ok()?;
        session
            .prepare_lines(self.case, self.seed, self.timeout)
            .ok()?;
        drop(session);
        worker
    }
}

/// A request's failure in words: the worker's own message, or why nothing came.
fn unanswered(unanswered: Unanswered) -> String {
    match unanswered {
        Unanswered::Answered(event) => match *event {
            Event::Failed { message, .. } => message,
            other => format!("the line worker answered {other:?}"),
        },
        lost => lost.to_string(),
    }
}

/// The profile of `kernel` in the session's worker (started if it is not
/// yet), `build` loaded first (a worker readied ahead holds an earlier
/// one, and a worker profiles only with a student build loaded); given up
/// (the worker stopped) when a newer save makes it stale.
fn collect(
    session: &mut WorkerSession<'_>,
    build: &LoadedBuild<'_>,
    lines: &LinesPlan,
    kernel: ProfiledKernel,
    steps: LineSteps,
    seed: u64,
    stale: &dyn Fn() -> bool,
) -> Result<LinesOutcome, String> {
    let worker = match kernel {
        ProfiledKernel::Student => "the line worker",
        ProfiledKernel::Starter => "the starter's line worker",
    };
    session
        .start_if_gone()
        .map_err(|e| format!("{worker} did not start: {e}"))?;
    session.load(build).map_err(unanswered)?;
    let outcome = session
        .lines(lines, seed, kernel, steps, stale)
        .map_err(unanswered)??;
    match outcome.refused {
        Some(refused) => Err(refused),
        None => Ok(outcome),
    }
}

/// Charges each instruction of `outcome` to its line of `source_text`
/// through the line table of `image`, and sums them.
fn charge(
    outcome: &LinesOutcome,
    image: &[u8],
    source_path: &str,
    source_text: &str,
) -> Result<LineProfile, String> {
    let started = Instant::now();
    let table = LineTable::from_cubin(image).map_err(|e| e.to_string())?;
    let student = marker_name(source_path);
    let line_count = source_text.lines().count() as u32;
    let charge = |offset: u64| {
        let frames = table.frames(&outcome.function, offset)?;
        Some(match attribute(&frames, &student, line_count) {
            Attribution::Student { line, .. } => LineKey::Student(line),
            Attribution::Own => LineKey::Own,
        })
    };
    let mut rows = by_line(&outcome.readings, charge);
    for row in &mut rows {
        row.source = source_of(source_text, row.line);
    }
    Ok(LineProfile {
        chip: outcome.chip.clone(),
        total_samples: outcome.total_samples,
        dropped_samples: outcome.dropped_samples,
        period_log2: outcome.period_log2,
        collect_ms: outcome.plain_launch_ms + outcome.sample_ms + outcome.count_ms,
        sampled_ms: outcome.sample_ms,
        counted_ms: outcome.count_ms,
        waited_ms: 0.0,
        setup_ms: outcome.setup_ms,
        worker_ms: outcome.worker_ms,
        charge_ms: super::ms_since(started),
        heat_ms: 0.0,
        counts_missing: None,
        lines: rows,
        starter: None,
    })
}
