//! `flashprof [FILE]` (the live TUI) and `flashprof replay PATH`.

use std::path::{Path, PathBuf};

use clap::Args;

use super::plan::RunOptions;
use super::refusal::Refusal;
use super::ExitCode;
use crate::app::history::HistoryStore;
use crate::app::lab_memory;
use crate::display::{line_for_display, path_for_display};
use crate::lab::definition::LabRef;
use crate::tui::{run_live, run_replay, LiveSetup};

#[derive(Args, Debug)]
pub struct TuiArgs {
    /// The kernel file to watch; created from the lab's starter kernel if it
    /// does not exist. Default: the lab's own file (`prefill.cu` for
    /// flash-prefill, `paged_prefill.cu` for paged-prefill).
    pub file: Option<PathBuf>,
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
    /// Lecture mode: the speedup and the pass count in large digits, the heatmap large.
    #[arg(long)]
    pub present: bool,
}

impl TuiArgs {
    /// What every check of the session asks for: counters on unless refused.
    pub(super) fn options(&self) -> RunOptions {
        RunOptions {
            quick_build: self.quick_build.choice.0,
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
    // A link in the file's place (dangling or not) is never written through.
    if std::fs::symlink_metadata(&file).is_err() {
        write_starter(&file, lab)?;
        eprintln!(
            "flashprof: created {} from the lab's starter kernel",
            path_for_display(&file)
        );
    }
    super::proven_oracle(lab)?;
    if let Err(e) = lab_memory::remember(&file, lab.name()) {
        eprintln!(
            "flashprof: cannot remember the lab for this file: {}",
            line_for_display(&e.to_string())
        );
    }
    let command = super::worker_command(&args.remote)?;
    let setup = LiveSetup {
        plan: args
            .options()
            .plan(lab)?
            .of_source(file.display().to_string(), String::new()),
        file,
        command,
        present: args.present,
    };
    finish(run_live(setup))
}

pub fn replay(args: ReplayArgs) -> Result<ExitCode, Refusal> {
    let path = match args.path {
        Some(path) => path,
        None => {
            let dir =
                std::env::temp_dir().join(format!("flashprof-recorded-{}", std::process::id()));
            let session = if args.ladder {
                &crate::embedded::LADDER
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

/// Writes `lab`'s starter kernel to `file`, which must not exist: created
/// `O_EXCL | O_NOFOLLOW`, so a link planted in its place after the check is
/// refused, never followed.
fn write_starter(file: &Path, lab: LabRef) -> Result<(), Refusal> {
    use std::os::unix::fs::OpenOptionsExt;
    // A starter only for a kernel file: `flashprof notes.txt` must not
    // leave a file behind (a bare word is refused earlier, in cli).
    let is_kernel_file =
        file.extension().is_some_and(|e| e == "cu") || file == Path::new(lab.default_file());
    if !is_kernel_file {
        return Err(Refusal::new(
            ExitCode::BadSource,
            format!(
                "{}: no such file (a starter kernel is written only for a path ending in .cu)",
                path_for_display(file)
            ),
        ));
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(file)
        .and_then(|mut out| std::io::Write::write_all(&mut out, lab.starter().text.as_bytes()))
        .map_err(|e| {
            Refusal::new(
                ExitCode::Environment,
                format!("cannot create {}: {e}", path_for_display(file)),
            )
        })
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
