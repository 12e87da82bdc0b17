//! `flashprof [FILE]` (the live TUI) and `flashprof replay PATH`.

use std::path::{Path, PathBuf};

use clap::Args;

use super::refusal::Refusal;
use super::ExitCode;
use crate::app::check::{GateUse, RunOptions};
use crate::app::history::HistoryStore;
use crate::app::lab_memory;
use crate::display::{line_for_display, path_for_display};
use crate::lab::definition::LabRef;
use crate::tui::{run_live, run_replay, LiveSetup};

#[derive(Args, Debug)]
pub struct TuiArgs {
    /// The kernel file to watch. Default: the lab's own file (each lab's is
    /// listed below), written from the lab's starter kernel when it does not
    /// exist; any other missing file is refused (with the nearest name)
    /// unless --new is given.
    pub file: Option<PathBuf>,
    /// Start FILE (which must not exist, and must end in .cu) from the lab's
    /// starter kernel, then watch it.
    #[arg(long = "new", requires = "file")]
    pub new: bool,
    #[command(flatten)]
    pub lab: super::LabArg,
    #[command(flatten)]
    pub remote: super::remote::RemoteArgs,
    /// Each check after the first adds its run number to the seed.
    #[command(flatten)]
    pub run: super::plan::RunArgs,
    /// The counters are collected after the timing unless this is given.
    #[command(flatten)]
    pub no_counters: super::plan::NoCountersArg,
    /// Profile no lines: by default every save that passes is profiled line
    /// by line (the source view, `l`) by a worker of its own, which samples
    /// and counts the kernel (docs/LINE-PROFILE.md).
    #[arg(long)]
    pub no_lines: bool,
    /// Lecture mode: the speedup and the pass count in large digits, the heatmap large.
    #[arg(long)]
    pub present: bool,
    #[command(flatten)]
    pub quick_build: super::QuickBuildArg,
}

#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// A `.flashprof` folder, its `history.jsonl`, or the folder holding `.flashprof`.
    /// Without one, the session recorded on an H200 that ships inside flashprof.
    pub path: Option<PathBuf>,
    /// Play the kernel ladder recorded on an H200 instead: the starter, then
    /// each rung of kernels/flash-prefill/ladder/ (docs/LADDER.md).
    #[arg(long, conflicts_with = "path")]
    pub ladder: bool,
    /// Play the paged-decode walk recorded on an H200 instead: the starter,
    /// each step of kernels/paged-decode/walk/, the reference, along the
    /// memory roof (docs/LADDER.md).
    #[arg(long, conflicts_with_all = ["path", "ladder"])]
    pub decode_walk: bool,
    /// Lecture mode: the speedup and the pass count in large digits, the heatmap large.
    #[arg(long)]
    pub present: bool,
}

impl TuiArgs {
    /// What every check of the session asks for: counters on unless
    /// refused, and the gates in effect, which the screen never shows as a
    /// verdict but whose threshold ends a save's timing once its interval
    /// is clear of it (docs/INTEGRITY.md, rule 7).
    pub(super) fn options(&self) -> RunOptions {
        RunOptions {
            quick_build: self.quick_build.choice.0,
            lines: !self.no_lines,
            gates: GateUse::Lenient("flashprof"),
            ..self.run.options(!self.no_counters.no_counters)
        }
    }
}

pub fn run(args: TuiArgs) -> Result<ExitCode, Refusal> {
    let (lab, file) = match &args.file {
        // --lab, then the file's own declaration, then what this file was last opened with.
        Some(file) => {
            let remembered = super::declared_lab_of(file).or_else(|| lab_memory::recall(file));
            (args.lab.choose(remembered.as_deref())?, file.clone())
        }
        // No file: the lab's own default file, never another lab's.
        None => {
            let lab = args.lab.choose(None)?;
            (lab, PathBuf::from(lab.default_file()))
        }
    };
    let is_default_file = file.file_name() == Some(std::ffi::OsStr::new(lab.default_file()));
    let default_file_absent = is_default_file && std::fs::symlink_metadata(&file).is_err();
    let write = args.new || default_file_absent;
    if write {
        refuse_new(&file)?;
    } else {
        super::refuse_missing(&file)?;
    }
    refuse_without_terminal()?;
    if write {
        write_starter(&file, lab)?;
    }
    super::proven_oracle(lab)?;
    if let Err(e) = lab_memory::remember(&file, lab.name()) {
        eprintln!(
            "flashprof: cannot remember the lab for this file: {}",
            line_for_display(&e.to_string())
        );
    }
    let command = super::worker_command(&args.remote)?;
    let options = args.options();
    let setup = LiveSetup {
        plan: options
            .plan(lab)?
            .of_source(file.display().to_string(), String::new()),
        reproduce: args.remote.reproduce_on(options.reproduce(&file, lab)),
        file,
        command,
        present: args.present,
    };
    finish(run_live(setup))
}

/// Refuses `--new FILE` where no starter may be written: a path that is no kernel, or
/// a file already there (a starter never overwrites anything).
fn refuse_new(file: &Path) -> Result<(), Refusal> {
    // `--new notes.txt` must not leave a file behind that is no kernel.
    if file.extension().is_none_or(|e| e != "cu") {
        return Err(Refusal::new(
            ExitCode::Usage,
            format!(
                "--new {}: a starter kernel is written only for a path ending in .cu",
                path_for_display(file)
            ),
        ));
    }
    match std::fs::symlink_metadata(file) {
        Ok(_) => Err(already_there(file)),
        Err(_) => Ok(()),
    }
}

/// `--new FILE` where FILE exists.
fn already_there(file: &Path) -> Refusal {
    let mut refusal = Refusal::new(
        ExitCode::Usage,
        format!("cannot create {}: it exists", path_for_display(file)),
    );
    refusal.fix = Some(format!("`flashprof {}` opens it", path_for_display(file)));
    refusal
}

/// `file` written from the lab's starter kernel: only a new file, created
/// `O_EXCL | O_NOFOLLOW`, so a link planted in its place (even a dangling
/// one, even after the check) is refused, never followed.
fn write_starter(file: &Path, lab: LabRef) -> Result<(), Refusal> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(file)
        .and_then(|mut out| std::io::Write::write_all(&mut out, lab.starter().text.as_bytes()))
        .map_err(|e| {
            // Made between the check and the write: still never overwritten.
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                return already_there(file);
            }
            Refusal::new(
                ExitCode::Environment,
                format!("cannot create {}: {e}", path_for_display(file)),
            )
        })?;
    eprintln!(
        "flashprof: created {} from the lab's starter kernel",
        path_for_display(file)
    );
    Ok(())
}

/// The TUI draws on a terminal and reads its keys: without one (a pipe, a
/// script, a CI log) it refuses before it writes or starts anything.
pub(super) fn refuse_without_terminal() -> Result<(), Refusal> {
    use std::io::IsTerminal;
    if std::io::stdin().is_terminal() && std::io::stdout().is_terminal() {
        return Ok(());
    }
    let mut refusal = Refusal::new(
        ExitCode::Usage,
        "the TUI needs a terminal: standard input or output is not one",
    );
    refusal.fix =
        Some("in a script or a pipe, `flashprof check FILE` prints the same verdicts".into());
    Err(refusal)
}

pub fn replay(args: ReplayArgs) -> Result<ExitCode, Refusal> {
    refuse_without_terminal()?;
    let path = match args.path {
        Some(path) => path,
        None => {
            let dir =
                std::env::temp_dir().join(format!("flashprof-recorded-{}", std::process::id()));
            let session = if args.ladder {
                &crate::embedded::LADDER
            } else if args.decode_walk {
                &crate::embedded::DECODE_WALK
            } else {
                &crate::embedded::WALKTHROUGH
            };
            session.unpack(&dir).map_err(|e| {
                Refusal::new(
                    ExitCode::Environment,
                    format!(
                        "cannot unpack the recorded session into {}: {e}",
                        path_for_display(&dir)
                    ),
                )
            })?
        }
    };
    finish(run_replay(HistoryStore::locate(&path), args.present))
}

/// A screen that ran until the user quit, or why it stopped.
fn finish(result: anyhow::Result<()>) -> Result<ExitCode, Refusal> {
    result
        .map(|()| ExitCode::Pass)
        .map_err(|e| Refusal::new(ExitCode::Environment, format!("{e:#}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_starter_is_never_written_through_a_link_even_a_dangling_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let target = dir.path().join("ta-file");
        let link = dir.path().join("prefill.cu");
        std::os::unix::fs::symlink(&target, &link).expect("symlink");
        let lab = LabRef(crate::lab::registry::default_lab());
        let refusal = write_starter(&link, lab).expect_err("refused");
        assert!(
            refusal.message.contains("cannot create"),
            "{}",
            refusal.message
        );
        assert!(!target.exists(), "the starter went through the link");
        let fresh = dir.path().join("fresh.cu");
        write_starter(&fresh, lab).expect("written");
        assert_eq!(
            std::fs::read_to_string(&fresh).expect("read"),
            lab.starter().text
        );
    }
}
