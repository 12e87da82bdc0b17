//! `flashprof grade`: a whole class's submissions into one gradebook, and
//! `flashprof grade --merge` to join the folders of sharded runs.
//!
//! This file turns arguments into a [`BatchPlan`] and draws progress; the
//! grading itself, the journal and the outputs live in [`crate::app::batch`].

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Instant;

use clap::Args;

use super::refusal::Refusal;
use super::ExitCode;
use crate::app::batch::gradebook::count_by_status;
use crate::app::batch::journal::{self, GradeMode, JOURNAL_FILE};
use crate::app::batch::lock::{LockError, OutLock};
use crate::app::batch::merge::{is_among, merge_folders, MergeError};
use crate::app::batch::output::{write_atomically, write_outputs, GRADEBOOK_CSV};
use crate::app::batch::shard::Shard;
use crate::app::batch::submissions::{self, cap_per_folder, discover_dir, from_files};
use crate::app::batch::{prepare_out_folder, run_batch, BatchError, BatchEvent, BatchPlan};
use crate::app::check::{GateUse, RunOptions};
use crate::display::{line_for_display, path_for_display};
use crate::gpu::device;
use crate::outcome::Verdict;
use crate::worker::GpuSelection;

/// What `--lab` does in `grade`, unlike the commands that check one file.
const LAB_HELP: &str = "The lab the whole class is graded against (`flashprof labs` lists \
     them; default: the first lab). A file's own `lab=` key never changes it: a file \
     declaring another lab is a rejected row";

/// What `--gpu-host` moves in `grade`: the workers, nothing of the class's files.
const GPU_HOST_HELP: &str = "Run each submission's worker (compile, cases, timing) on \
     another machine through the system's ssh, e.g. `user@node`, on the node's GPU 0 or \
     those --gpus names; the submissions are read, and the journal and gradebook \
     written, here (docs/REMOTE.md)";

#[derive(Args, Debug)]
#[command(mut_arg("lab", |arg| arg.help(LAB_HELP)))]
#[command(mut_arg("gpu_host", |arg| arg.help(GPU_HOST_HELP)))]
pub struct GradeArgs {
    /// A folder (every *.cu in it, recursively) or the submission files; with --merge, the output folders to join.
    #[arg(required = true, value_name = "DIR|FILES")]
    pub inputs: Vec<PathBuf>,
    #[command(flatten)]
    pub lab: super::LabArg,
    #[command(flatten)]
    pub remote: super::remote::RemoteArgs,
    /// The output folder: journal.jsonl, gradebook.csv, report.json and runs/.
    #[arg(long, value_name = "OUTDIR")]
    pub out: PathBuf,
    /// Join the journals of the given output folders (shards) into --out.
    #[arg(long, conflicts_with_all = ["shard", "compile_only", "jobs", "gpus", "seed"])]
    pub merge: bool,
    /// Workers running at once (default: one per GPU; with --compile-only one
    /// per CPU, at most as many as the available memory holds at
    /// FLASHPROF_COMPILE_MEMORY_MB each).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub jobs: Option<u32>,
    /// GPU ordinals to use, comma-separated (default: every GPU found; with
    /// --gpu-host or --gpu-slurm, the node's GPU 0).
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub gpus: Vec<usize>,
    /// Grade only shard K of N (1-based): submission i of the sorted list when i % N == K-1.
    #[arg(long, value_name = "K/N")]
    pub shard: Option<Shard>,
    /// Compile with NVRTC only; no GPU is needed or touched.
    #[arg(long)]
    pub compile_only: bool,
    /// Submissions graded per first-level folder below DIR (a student's
    /// folder); the rest are listed as not graded, with the reason. Never
    /// applies to files named one by one.
    #[arg(long, value_name = "N", default_value_t = submissions::DEFAULT_MAX_PER_FOLDER,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub max_per_folder: usize,
    /// Also run compute-sanitizer (racecheck, memcheck, synccheck, initcheck)
    /// over each submission on the first case; a hazard fails it (docs/SANITIZER.md).
    #[arg(long, conflicts_with_all = ["compile_only", "merge"])]
    pub sanitize: bool,
    /// Without --seed, a resumed run keeps its journal's seed, so its inputs.
    #[command(flatten)]
    pub run: super::plan::RunArgs,
}

impl GradeArgs {
    /// What every submission's check asks for: no counters, a sanitizer
    /// pass when asked, and a verdict of the speed gates in effect (a
    /// gates file that cannot be read refuses the run).
    pub(super) fn options(&self) -> RunOptions {
        RunOptions {
            sanitize: self.sanitize,
            gates: GateUse::Required,
            ..self.run.options(false)
        }
    }
}

pub fn run(args: GradeArgs) -> Result<ExitCode, Refusal> {
    if args.merge {
        return merge(&args);
    }
    // The class is graded against the lab the TA names, never a file's choice.
    let lab = args.lab.choose(None)?;
    let usage = |message: String| Refusal::new(ExitCode::Usage, message);
    let nothing = |message: String| Refusal::new(ExitCode::NothingToGrade, message);
    // When nothing named is there, it is the TA's typo or a glob that
    // matched nothing: no gradebook is made of it. Among files that are,
    // a missing one is a student's missing work: a `missing` row.
    let present = |input: &PathBuf| std::fs::symlink_metadata(input).is_ok();
    if let Some(absent) = args.inputs.iter().find(|i| !present(i)) {
        if !args.inputs.iter().any(present) {
            return Err(nothing(format!(
                "{}: no such file or folder{}; nothing was graded",
                path_for_display(absent),
                match args.inputs.len() {
                    1 => "",
                    _ => ", nor any other name given",
                }
            )));
        }
    }
    let submissions = match args.inputs.as_slice() {
        [dir] if dir.is_dir() => {
            let found = discover_dir(dir).map_err(|e| usage(e.to_string()))?;
            if found.skipped_hidden > 0 {
                eprintln!(
                    "flashprof grade: skipped {} .cu files in hidden folders (.flashprof/ and others): not submissions",
                    found.skipped_hidden
                );
            }
            if found.submissions.is_empty() {
                return Err(nothing(format!(
                    "{}: no *.cu submission in this folder or below it; nothing was graded",
                    path_for_display(dir)
                )));
            }
            let mut submissions = found.submissions;
            let capped = cap_per_folder(&mut submissions, args.max_per_folder);
            if capped > 0 {
                eprintln!(
                    "flashprof grade: {capped} submissions past {} in their folder are listed, not \
                     graded (--max-per-folder)",
                    args.max_per_folder
                );
            }
            submissions
        }
        files => {
            if let Some(dir) = files.iter().find(|f| f.is_dir()) {
                return Err(usage(format!(
                    "{} is a folder; give one folder, or files only",
                    path_for_display(dir)
                )));
            }
            from_files(files)
        }
    };
    let submissions = match args.shard {
        Some(shard) => shard.select(submissions),
        None => submissions,
    };
    let (mode, slots) = worker_slots(&args).map_err(usage)?;
    if mode == GradeMode::Full {
        super::proven_oracle(lab)?;
    }
    let mut options = args.options();
    // A compile-only run times nothing; a resumed one keeps its journal's inputs.
    if mode != GradeMode::Full {
        options.timing = None;
    }
    options.seed = options.seed.or_else(|| journal_seed(&args));
    // The gates file is read before the worker's command is looked for.
    let check = options.plan(lab)?;
    let command = super::worker_command(&args.remote)?;
    let plan = BatchPlan {
        check,
        submissions,
        out_dir: args.out.clone(),
        mode,
        slots,
    };
    let mut bar = ProgressBar::new(std::io::stderr().is_terminal());
    let summary = run_batch(&plan, &command, |event| bar.update(&event));
    bar.clear();
    match summary {
        Ok(s) => {
            println!(
                "graded {} submissions now, {} already in the journal ({} with grader errors); gradebook: {}",
                s.graded_now,
                s.skipped,
                s.errors,
                path_for_display(&args.out.join(GRADEBOOK_CSV))
            );
            print_summary(&s.by_status);
            if let Some(no_gate) = &s.no_gate {
                eprintln!("{no_gate}");
            }
            Ok(if s.errors > 0 {
                ExitCode::Environment
            } else if mode == GradeMode::CompileOnly && !args.compile_only {
                // Compiled only because no GPU was found: a job script must
                // not read that as a graded class.
                ExitCode::NoGpu
            } else {
                ExitCode::Pass
            })
        }
        Err(e @ (BatchError::Locked(LockError::Busy { .. }) | BatchError::UnsafeOut { .. })) => {
            Err(usage(e.to_string()))
        }
        Err(e) => Err(Refusal::new(ExitCode::Environment, e.to_string())),
    }
}

/// The seed of the journal already in the output folder, so a resumed run grades on the same inputs.
fn journal_seed(args: &GradeArgs) -> Option<u64> {
    let contents = journal::read(&args.out.join(JOURNAL_FILE)).ok()?;
    contents.entries.last().map(|e| e.seed)
}

/// Compile-only workers running at once by default: one per CPU, but no
/// more than the memory available now holds at each compile's limit, so a
/// class of compile bombs cannot exhaust the host (at least one).
fn compile_jobs(cpus: usize) -> usize {
    let limit_kb = crate::worker::sandbox::compile_memory_mb() << 10;
    let available_kb = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find_map(|l| l.strip_prefix("MemAvailable:"))
                .and_then(|rest| {
                    rest.trim()
                        .trim_end_matches("kB")
                        .trim()
                        .parse::<u64>()
                        .ok()
                })
        });
    let fit = available_kb.map_or(1, |kb| (kb / limit_kb).max(1));
    cpus.min(usize::try_from(fit).unwrap_or(usize::MAX))
}

/// The mode and one GPU choice per concurrent worker.
fn worker_slots(args: &GradeArgs) -> Result<(GradeMode, Vec<GpuSelection>), String> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let compile_only = |why: Option<String>| {
        if let Some(why) = why {
            // The reason is a sentence of its own (it ends with a full stop).
            eprintln!(
                "flashprof grade: {}; compiling only",
                why.trim_end_matches('.')
            );
        }
        let jobs = args.jobs.map_or_else(|| compile_jobs(cpus), |j| j as usize);
        (GradeMode::CompileOnly, vec![GpuSelection::Disabled; jobs])
    };
    if args.compile_only {
        return Ok(compile_only(None));
    }
    let gpus: Vec<usize> = if args.remote.is_remote() {
        // The workers open the node's GPUs, which cannot be counted from
        // here (this machine may have none): the ones --gpus names, else
        // the node's first. A worker that finds none says so in its row.
        match args.gpus.is_empty() {
            true => vec![0],
            false => args.gpus.clone(),
        }
    } else {
        let found = match device::count() {
            Ok(0) => return Ok(compile_only(Some("no CUDA GPU found".into()))),
            Ok(n) => n,
            Err(problem) => return Ok(compile_only(Some(problem.describe()))),
        };
        if let Some(missing) = args.gpus.iter().find(|&&g| g >= found) {
            return Err(format!(
                "--gpus names GPU {missing}, but {found} are present"
            ));
        }
        match args.gpus.is_empty() {
            true => (0..found).collect(),
            false => args.gpus.clone(),
        }
    };
    let jobs = args.jobs.map_or(gpus.len(), |j| j as usize);
    if jobs > gpus.len() {
        eprintln!("flashprof grade: {jobs} workers on {} GPUs share devices, so timings disturb each other", gpus.len());
    }
    Ok((
        GradeMode::Full,
        (0..jobs)
            .map(|i| GpuSelection::Ordinal(gpus[i % gpus.len()]))
            .collect(),
    ))
}

fn merge(args: &GradeArgs) -> Result<ExitCode, Refusal> {
    if is_among(&args.out, &args.inputs) {
        return Err(Refusal::new(
            ExitCode::Usage,
            "--out must be a new folder, not one of the inputs",
        ));
    }
    // The shards are read and judged first: a refused merge makes nothing.
    let merged = merge_folders(&args.inputs).map_err(|e| {
        let code = match e {
            MergeError::Io(_) => ExitCode::Environment,
            MergeError::Labs { .. } | MergeError::Forged { .. } | MergeError::Untrusted { .. } => {
                ExitCode::Usage
            }
        };
        Refusal::new(code, e.to_string())
    })?;
    // The merged folder is held to grade's own rules: a folder others can
    // write could hold a planted journal or a link in place of the lock.
    prepare_out_folder(&args.out).map_err(|e| Refusal::new(ExitCode::Usage, e.to_string()))?;
    let _lock = OutLock::acquire(&args.out).map_err(|e| {
        let code = match e {
            LockError::Busy { .. } => ExitCode::Usage,
            _ => ExitCode::Environment,
        };
        Refusal::new(code, e.to_string())
    })?;
    for warning in &merged.warnings {
        eprintln!("warning: {}", line_for_display(warning));
    }
    let lines: Result<Vec<String>, _> = merged.entries.iter().map(serde_json::to_string).collect();
    lines
        .map_err(std::io::Error::other)
        .and_then(|lines| {
            std::fs::create_dir_all(&args.out)?;
            let mut text = lines.join("\n");
            text.push('\n');
            write_atomically(&args.out.join(JOURNAL_FILE), &text)?;
            write_outputs(&args.out, &merged.entries, &merged.warnings)
        })
        .map_err(|e| {
            Refusal::new(
                ExitCode::Environment,
                format!("{}: {e}", path_for_display(&args.out)),
            )
        })?;
    println!(
        "merged {} submissions from {} folders; gradebook: {}",
        merged.entries.len(),
        args.inputs.len(),
        path_for_display(&args.out.join(GRADEBOOK_CSV))
    );
    print_summary(&count_by_status(&merged.entries));
    Ok(ExitCode::Pass)
}

/// The gradebook's rows by status, on stderr in one short line:
/// `summary: 14 submissions: 8 compiled, 1 compile_error, 5 rejected`.
fn print_summary(by_status: &[(Verdict, usize)]) {
    let total: usize = by_status.iter().map(|&(_, count)| count).sum();
    let counts: Vec<String> = by_status
        .iter()
        .map(|(verdict, count)| format!("{count} {}", verdict.word()))
        .collect();
    match counts.is_empty() {
        true => eprintln!("summary: no submissions"),
        false => eprintln!("summary: {total} submissions: {}", counts.join(", ")),
    }
}

/// A one-line progress bar with an ETA on stderr; silent when stderr is not a terminal.
struct ProgressBar {
    visible: bool,
    started: Instant,
    done: usize,
    total: usize,
}

const BAR_WIDTH: usize = 30;

impl ProgressBar {
    fn new(visible: bool) -> Self {
        Self {
            visible,
            started: Instant::now(),
            done: 0,
            total: 0,
        }
    }

    fn update(&mut self, event: &BatchEvent) {
        let last = match event {
            BatchEvent::Resumed {
                done,
                to_grade,
                retimed,
                cut_short,
                older_gate,
                limits,
            } => {
                self.total = *to_grade;
                self.started = Instant::now();
                if *done > 0 && self.visible {
                    eprintln!("resuming: {done} submissions already graded, {to_grade} to go");
                }
                if *retimed > 0 {
                    eprintln!(
                        "grading {retimed} submissions again: their rows were timed under earlier \
                         timing rules (v{} is this build's, docs/INTEGRITY.md)",
                        crate::protocol::TIMING_RULES
                    );
                }
                if *older_gate > 0 {
                    eprintln!(
                        "{older_gate} graded submissions keep the speed verdict of the gate that \
                         judged them, not the gates table's current one (each row's `gate` says \
                         which; docs/TA.md)"
                    );
                }
                if *cut_short > 0 {
                    eprintln!(
                        "grading {cut_short} submissions again: a limit cut each short (a case \
                         timeout, or the compile's time or memory) that is other now or was not \
                         recorded (this run: {limits})"
                    );
                }
                String::new()
            }
            BatchEvent::Finished { entry } => {
                self.done += 1;
                format!("{} {}", line_for_display(&entry.id), entry.status.word())
            }
        };
        if !self.visible {
            return;
        }
        let filled = (self.done * BAR_WIDTH).checked_div(self.total).unwrap_or(0);
        let eta = match self.done {
            0 => "?".to_string(),
            done => {
                let per_item = self.started.elapsed().as_secs_f64() / done as f64;
                let left = per_item * (self.total.saturating_sub(done)) as f64;
                format!("{}m{:02}s", (left / 60.0) as u64, (left % 60.0) as u64)
            }
        };
        eprint!(
            "\r\x1b[2K[{}{}] {}/{}  ETA {eta}  {last}",
            "#".repeat(filled),
            " ".repeat(BAR_WIDTH - filled),
            self.done,
            self.total,
        );
        let _ = std::io::stderr().flush();
    }

    fn clear(&self) {
        if self.visible {
            eprint!("\r\x1b[2K");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Command {
        #[command(flatten)]
        grade: GradeArgs,
    }

    fn slots(extra: &[&str]) -> (GradeMode, Vec<GpuSelection>) {
        let mut words = vec!["grade", "class", "--out", "out"];
        words.extend(extra);
        let args = Command::try_parse_from(words)
            .expect("valid arguments")
            .grade;
        worker_slots(&args).expect("slots")
    }

    #[test]
    fn remote_workers_open_the_node_s_gpus_whatever_this_machine_has() {
        // This machine's GPUs (none, on a login node) say nothing of the node's.
        assert_eq!(
            slots(&["--gpu-host", "alice@node"]),
            (GradeMode::Full, vec![GpuSelection::Ordinal(0)])
        );
        assert_eq!(
            slots(&[
                "--gpu-slurm",
                "--gres=gpu:2",
                "--gpus",
                "6,7",
                "--jobs",
                "3"
            ]),
            (
                GradeMode::Full,
                vec![
                    GpuSelection::Ordinal(6),
                    GpuSelection::Ordinal(7),
                    GpuSelection::Ordinal(6)
                ]
            )
        );
        assert_eq!(
            slots(&["--gpu-host", "alice@node", "--compile-only", "--jobs", "2"]).0,
            GradeMode::CompileOnly
        );
    }
}
