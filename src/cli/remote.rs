//! `--gpu-host`, `--gpu-host-flashprof` and `--gpu-slurm`, on every command
//! that starts a worker (docs/REMOTE.md).

use clap::Args;

use super::refusal::Refusal;
use super::ExitCode;
use crate::app::remote::{remote_flashprof, Remote};
use crate::app::worker_handle::WorkerCommand;
use crate::report::ReproduceCommand;

/// The remote flags' heading in every command's help.
const REMOTE_HEADING: &str = "Remote GPU";

/// Where the worker runs: here, over ssh, or in a Slurm allocation.
#[derive(Args, Debug, Clone, Default)]
pub struct RemoteArgs {
    /// Run the worker (compile, cases, timing, counters) on another machine
    /// through the system's ssh, e.g. `user@node`; the screen, the file
    /// watching and the history stay here (docs/REMOTE.md).
    #[arg(long, help_heading = REMOTE_HEADING, value_name = "USER@NODE", conflicts_with = "gpu_slurm")]
    pub gpu_host: Option<String>,
    /// flashprof's program on the node (default: $FLASHPROF_REMOTE_FLASHPROF,
    /// else `flashprof` on the node's PATH).
    #[arg(long, help_heading = REMOTE_HEADING, value_name = "PATH")]
    pub gpu_host_flashprof: Option<String>,
    /// Run the worker inside one Slurm allocation asked for with these
    /// arguments, e.g. "--gres=gpu:1 -p gpu --time=01:00:00" (docs/REMOTE.md).
    #[arg(long, help_heading = REMOTE_HEADING, value_name = "ARGS", allow_hyphen_values = true)]
    pub gpu_slurm: Option<String>,
}

impl RemoteArgs {
    /// Whether the workers run on another machine.
    pub fn is_remote(&self) -> bool {
        self.gpu_host.is_some() || self.gpu_slurm.is_some()
    }

    /// `command` with these flags, so a check that ran on a node reruns there.
    pub fn reproduce_on(&self, mut command: ReproduceCommand) -> ReproduceCommand {
        for (flag, value) in [
            ("--gpu-host", &self.gpu_host),
            ("--gpu-host-flashprof", &self.gpu_host_flashprof),
            ("--gpu-slurm", &self.gpu_slurm),
        ] {
            if let Some(value) = value {
                command = command.with(flag, Some(value));
            }
        }
        command
    }

    /// The worker command for these flags, or `local` when none was given.
    pub fn apply(&self, local: WorkerCommand) -> Result<WorkerCommand, Refusal> {
        let flashprof = remote_flashprof(self.gpu_host_flashprof.as_deref());
        let remote = match (&self.gpu_host, &self.gpu_slurm) {
            (Some(host), _) => Remote::ssh(host),
            (None, Some(args)) => Remote::slurm(args).map_err(|e| format!("--gpu-slurm: {e}")),
            (None, None) => return Ok(local),
        };
        remote
            .map(|remote| WorkerCommand::remote(remote, &flashprof))
            .map_err(|e| Refusal::new(ExitCode::Usage, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reproduce_command_keeps_where_the_worker_ran() {
        let on_node = RemoteArgs {
            gpu_host: Some("ta@gpu-node".into()),
            gpu_host_flashprof: Some("/opt/flashprof bin/flashprof".into()),
            gpu_slurm: None,
        };
        let command = on_node.reproduce_on(ReproduceCommand::new("k.cu", "paged-decode"));
        assert_eq!(
            command.for_seed(7),
            "flashprof check k.cu --lab paged-decode --gpu-host ta@gpu-node \
             --gpu-host-flashprof '/opt/flashprof bin/flashprof' --seed 7"
        );
        let in_slurm = RemoteArgs {
            gpu_slurm: Some("--gres=gpu:1 -p gpu".into()),
            ..RemoteArgs::default()
        };
        let command = in_slurm.reproduce_on(ReproduceCommand::new("k.cu", "flash-prefill"));
        assert_eq!(
            command.for_seed(1),
            "flashprof check k.cu --lab flash-prefill --gpu-slurm '--gres=gpu:1 -p gpu' --seed 1"
        );
        let here =
            RemoteArgs::default().reproduce_on(ReproduceCommand::new("k.cu", "flash-prefill"));
        assert_eq!(
            here.for_seed(1),
            "flashprof check k.cu --lab flash-prefill --seed 1"
        );
    }
}
