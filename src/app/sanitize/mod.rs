//! The sanitizer pass: NVIDIA's compute-sanitizer (racecheck, memcheck,
//! synccheck, initcheck) over a submission on one small case.
//!
//! compute-sanitizer follows child processes, so each tool runs this very
//! executable as `flashprof check COPY --case NAME --no-timing --no-counters`
//! (COPY: the exact text that was checked, written into the pass's private
//! folder) under `compute-sanitizer --tool T --target-processes all`; the worker that
//! check starts (sandboxed as always) is the process it instruments. The four
//! tools run side by side, each writing its text log into a private
//! temporary folder; [`parse`] reads each log, and every report becomes a
//! [`Finding`] whose sites name the student's file and line (kernels are
//! compiled with `-lineinfo` and the prepared source carries `#line` markers)
//! with a one-line diagnosis. Any finding fails the verdict. docs/SANITIZER.md
//! has the cost measured on an H200.

pub mod parse;

use crate::sys::child::Limited;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

pub use crate::outcome::sanitizer::{
    Access, Finding, SanitizerOutcome, SanitizerTool, Site, ToolRun, ToolStatus,
};

/// What the diagnoses need to know of the student's file.
#[derive(Debug, Clone)]
pub struct StudentFile {
    /// The names a report may give the file (`#line` carries the display path).
    pub names: Vec<String>,
    pub lines: Vec<String>,
    /// The kernel's entry point, which a site need not name.
    pub entry_point: String,
}

impl StudentFile {
    pub fn new(display_path: &str, text: &str, entry_point: &str) -> Self {
        let mut names = vec![display_path.to_owned()];
        if let Some(base) = Path::new(display_path).file_name() {
            names.push(base.to_string_lossy().into_owned());
        }
        Self {
            names,
            lines: text.lines().map(str::to_owned).collect(),
            entry_point: entry_point.to_owned(),
        }
    }

    fn owns(&self, site: &Site) -> bool {
        self.names.iter().any(|n| n == &site.file)
    }

    /// `line 48`, `line 65 (in loadShared4)`, or `line 3 of other.h`.
    fn place(&self, site: &Site) -> String {
        let mut text = if self.owns(site) {
            format!("line {}", site.line)
        } else {
            format!("line {} of {}", site.line, site.file)
        };
        let function = parse::short_function(&site.function);
        if !function.is_empty() && function != self.entry_point {
            text.push_str(&format!(" (in {function})"));
        }
        text
    }
}

/// Fills in each site's code and the finding's diagnosis.
pub fn diagnose(finding: &mut Finding, student: &StudentFile) {
    for access in &mut finding.accesses {
        if student.owns(&access.site) {
            access.site.code = student
                .lines
                .get((access.site.line as usize).wrapping_sub(1))
                .map(|l| l.trim().to_owned());
        }
    }
    finding.diagnosis = diagnosis_of(finding, student);
}

fn diagnosis_of(finding: &Finding, student: &StudentFile) -> String {
    let headline = finding.headline.trim_end_matches('.');
    let Some(first) = finding.accesses.first() else {
        let detail = finding
            .details
            .first()
            .map(|d| format!(": {d}"))
            .unwrap_or_default();
        return format!("{headline}{detail}");
    };
    match finding.tool {
        SanitizerTool::Racecheck if finding.accesses.len() > 1 => {
            // The access with the most hazards against the first is the one to name.
            let others = &finding.accesses[1..];
            let worst = others
                .iter()
                .max_by_key(|a| a.hazards.unwrap_or(0))
                .unwrap_or(&others[0]);
            let mut also: Vec<u32> = others
                .iter()
                .map(|a| a.site.line)
                .filter(|&l| l != worst.site.line)
                .collect();
            also.sort_unstable();
            also.dedup();
            let also = if also.is_empty() {
                String::new()
            } else {
                let list: Vec<String> = also.iter().map(|l| l.to_string()).collect();
                format!(" (and at line {})", list.join(", "))
            };
            let kind = |a: &Access| {
                if a.kind.is_empty() {
                    "access".to_owned()
                } else {
                    a.kind.clone()
                }
            };
            format!(
                "shared memory {} at {}{also} races with the {} at {}: a __syncthreads() is missing between them",
                kind(worst),
                student.place(&worst.site),
                kind(first),
                student.place(&first.site),
            )
        }
        SanitizerTool::Synccheck => format!(
            "{headline} at {}: every thread of the block (and of each warp) must reach the same __syncthreads()",
            student.place(&first.site)
        ),
        SanitizerTool::Initcheck => format!(
            "{headline} at {}: the kernel reads global memory that nothing wrote",
            student.place(&first.site)
        ),
        _ => {
            let detail = finding
                .details
                .iter()
                .find(|d| d.starts_with("Access") || d.starts_with("Address"))
                .map(|d| format!(": {d}"))
                .unwrap_or_default();
            format!("{headline} at {}{detail}", student.place(&first.site))
        }
    }
}

/// Where compute-sanitizer was looked for, and how to get it, when it is not there.
pub fn not_installed_message(looked: &[PathBuf]) -> String {
    let places: Vec<String> = looked.iter().map(|p| p.display().to_string()).collect();
    format!(
        "compute-sanitizer is not installed (looked for {}). It comes with the CUDA toolkit: \
install it with `sudo apt install cuda-sanitizer-13-0` from NVIDIA's CUDA apt repository, or the \
whole toolkit (https://developer.nvidia.com/cuda-downloads), then put its bin folder on PATH or \
point FLASHPROF_COMPUTE_SANITIZER at the executable",
        if places.is_empty() {
            "it nowhere".to_owned()
        } else {
            places.join(", ")
        }
    )
}

/// The compute-sanitizer to run: `FLASHPROF_COMPUTE_SANITIZER` if set (and
/// then only it), else the first on PATH, in `$CUDA_HOME/bin`,
/// `$CUDA_PATH/bin`, `/usr/local/cuda/bin` or `/usr/local/cuda-*/bin`
/// (newest first). The error is the message for the user.
pub fn locate() -> Result<PathBuf, String> {
    let candidates = candidates(
        std::env::var_os("FLASHPROF_COMPUTE_SANITIZER"),
        std::env::var_os("PATH"),
        [std::env::var_os("CUDA_HOME"), std::env::var_os("CUDA_PATH")],
        Path::new("/usr/local"),
    );
    candidates
        .iter()
        .find(|p| is_executable(p))
        .cloned()
        .ok_or_else(|| not_installed_message(&candidates))
}

fn candidates(
    explicit: Option<OsString>,
    path: Option<OsString>,
    homes: [Option<OsString>; 2],
    usr_local: &Path,
) -> Vec<PathBuf> {
    const NAME: &str = "compute-sanitizer";
    if let Some(explicit) = explicit.filter(|e| !e.is_empty()) {
        // Made whole: the sanitizer runs in a private folder of its own.
        let named = PathBuf::from(explicit);
        return vec![std::path::absolute(&named).unwrap_or(named)];
    }
    let mut found: Vec<PathBuf> = path
        .map(|p| std::env::split_paths(&p).map(|d| d.join(NAME)).collect())
        .unwrap_or_default();
    found.extend(
        homes
            .into_iter()
            .flatten()
            .map(|h| PathBuf::from(h).join("bin").join(NAME)),
    );
    found.push(usr_local.join("cuda/bin").join(NAME));
    let mut versioned: Vec<PathBuf> = std::fs::read_dir(usr_local)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("cuda-"))
                })
                .collect()
        })
        .unwrap_or_default();
    versioned.sort();
    versioned.reverse();
    found.extend(versioned.into_iter().map(|d| d.join("bin").join(NAME)));
    found.retain(|p| p.is_absolute());
    let mut unique = Vec::new();
    for p in found {
        if !unique.contains(&p) {
            unique.push(p);
        }
    }
    unique
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Everything one sanitizer pass needs.
#[derive(Debug, Clone)]
pub struct SanitizePlan {
    pub sanitizer: PathBuf,
    /// This executable (it re-enters as `check`).
    pub exe: PathBuf,
    /// The exact text that was checked: the tools run on a private copy of
    /// it, never on the student's path, which may have changed since.
    pub text: String,
    pub lab: String,
    pub case: String,
    /// The cases file the case comes from, when not the lab's embedded one.
    pub cases_file: Option<PathBuf>,
    pub seed: u64,
    pub tools: Vec<SanitizerTool>,
    /// Per tool; a tool still running then is stopped and reported as not finished.
    pub timeout: Duration,
    pub student: StudentFile,
    /// Extra environment (the GPU a batch slot is pinned to), for the tool and what it runs.
    pub env: Vec<(OsString, OsString)>,
}

impl SanitizePlan {
    /// The arguments of compute-sanitizer for `tool`, checking the copy of
    /// the text at `copy` and writing its log to `log`.
    pub fn arguments(&self, tool: SanitizerTool, log: &Path, copy: &Path) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec![
            "--tool".into(),
            tool.name().into(),
            "--target-processes".into(),
            "all".into(),
            "--print-limit".into(),
            "100".into(),
            "--log-file".into(),
            log.into(),
            self.exe.clone().into(),
            "check".into(),
            copy.into(),
            "--lab".into(),
            self.lab.clone().into(),
            "--case".into(),
            self.case.clone().into(),
            "--seed".into(),
            self.seed.to_string().into(),
            "--no-timing".into(),
            "--no-counters".into(),
            // Instrumented kernels run many times slower than plain ones.
            "--case-timeout".into(),
            self.timeout.as_secs().max(1).to_string().into(),
            "--json".into(),
        ];
        if let Some(cases) = &self.cases_file {
            // The tools run in a private folder of their own, so a name
            // relative to the caller's folder is made whole first.
            args.push("--cases".into());
            args.push(
                std::path::absolute(cases)
                    .unwrap_or_else(|_| cases.clone())
                    .into(),
            );
        }
        args
    }
}

/// Runs every tool of `plan` side by side and reads their logs.
pub fn run_pass(plan: &SanitizePlan) -> SanitizerOutcome {
    let started = Instant::now();
    let folder = private_folder();
    let copy = folder
        .as_ref()
        .map_err(Clone::clone)
        .and_then(|dir| copy_of_text(dir, plan));
    // The tools name the copy in their reports; its lines are the student's.
    let mut with_copy = plan.clone();
    if let Ok(copy) = &copy {
        with_copy.student.names.push(copy.display().to_string());
    }
    let plan = &with_copy;
    let mut running: Vec<(SanitizerTool, Result<Limited, String>, PathBuf, Instant)> = Vec::new();
    for &tool in &plan.tools {
        let (child, log) = match (&folder, &copy) {
            (Ok(dir), Ok(copy)) => {
                let log = dir.join(format!("{}.log", tool.name()));
                let stderr = std::fs::File::create(dir.join(format!("{}.stderr", tool.name())));
                let child = stderr.map_err(|e| e.to_string()).and_then(|stderr| {
                    // Run in its own private folder, not the caller's.
                    let mut command = crate::sys::child::command_in(&plan.sanitizer, dir);
                    command
                        .args(plan.arguments(tool, &log, copy))
                        .envs(plan.env.iter().map(|(k, v)| (k, v)))
                        .stdin(Stdio::null())
                        .stdout(Stdio::null())
                        .stderr(stderr);
                    Limited::start(&mut command, plan.timeout, true)
                });
                (child, log)
            }
            (Err(e), _) | (_, Err(e)) => (Err(e.clone()), PathBuf::new()),
        };
        running.push((tool, child, log, Instant::now()));
    }
    // Polled together, so each tool's wall time ends when it does.
    let mut exits: Vec<Option<Exit>> = running.iter().map(|_| None).collect();
    loop {
        let mut waiting = false;
        for ((_, child, _, began), exit) in running.iter_mut().zip(exits.iter_mut()) {
            if let (Ok(child), None) = (child, exit.as_ref()) {
                *exit = poll(child, *began);
                waiting |= exit.is_none();
            }
        }
        if !waiting {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut tools = Vec::new();
    for ((tool, child, log, began), exit) in running.into_iter().zip(exits) {
        let run = match (child, exit) {
            (Err(problem), _) => failed(tool, began, problem),
            (Ok(_), Some(exit)) => finish(tool, exit, &log, plan),
            (Ok(_), None) => failed(tool, began, "lost track of compute-sanitizer".into()),
        };
        tools.push(run);
    }
    if let Ok(dir) = &folder {
        let _ = std::fs::remove_dir_all(dir);
    }
    SanitizerOutcome {
        case: plan.case.clone(),
        sanitizer: plan.sanitizer.display().to_string(),
        tools,
        wall_ms: started.elapsed().as_secs_f64() * 1e3,
    }
}

fn failed(tool: SanitizerTool, began: Instant, problem: String) -> ToolRun {
    ToolRun {
        tool,
        status: ToolStatus::Failed,
        wall_ms: began.elapsed().as_secs_f64() * 1e3,
        findings: Vec::new(),
        summary: None,
        problem: Some(problem),
    }
}

/// How a tool's process ended, and when.
struct Exit {
    /// `None` when it was stopped at the timeout or could not be waited for.
    status: Option<std::process::ExitStatus>,
    wall_ms: f64,
    problem: Option<String>,
}

/// The tool's exit, once it has exited or run past its limit (then it and
/// the processes it follows, one process group, are stopped).
fn poll(tool: &mut Limited, began: Instant) -> Option<Exit> {
    let wall_ms = began.elapsed().as_secs_f64() * 1e3;
    Some(match tool.poll()? {
        Ok(status) => Exit {
            status: Some(status),
            wall_ms,
            problem: None,
        },
        Err(problem) => Exit {
            status: None,
            wall_ms,
            problem: Some(problem),
        },
    })
}

fn finish(tool: SanitizerTool, exit: Exit, log: &Path, plan: &SanitizePlan) -> ToolRun {
    let wall_ms = exit.wall_ms;
    let Some(status) = exit.status else {
        return ToolRun {
            tool,
            status: ToolStatus::Failed,
            wall_ms,
            findings: Vec::new(),
            summary: None,
            problem: exit.problem,
        };
    };
    let text = std::fs::read(log)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let parsed = parse::parse_log(tool, &text);
    let mut findings = parsed.findings;
    for finding in &mut findings {
        diagnose(finding, &plan.student);
    }
    let (status, problem) = if !findings.is_empty() {
        (ToolStatus::Hazards, None)
    } else if parsed.summary.is_some() {
        (ToolStatus::Clean, None)
    } else {
        let stderr = std::fs::read_to_string(log.with_extension("stderr")).unwrap_or_default();
        let tail: Vec<&str> = stderr
            .lines()
            .rev()
            .take(3)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        (
            ToolStatus::Failed,
            Some(
                crate::display::for_display(&format!(
                    "compute-sanitizer ended ({status}) without a summary{}",
                    if tail.is_empty() {
                        String::new()
                    } else {
                        format!(": {}", tail.join(" | "))
                    }
                ))
                .into_owned(),
            ),
        )
    };
    ToolRun {
        tool,
        status,
        wall_ms,
        findings,
        summary: parsed.summary,
        problem,
    }
}

/// A fresh folder only this user can enter, for the tools' logs.
/// Writes the checked text to `dir/submission.cu` (a name of flashprof's:
/// the student's may hold characters NVRTC cannot carry, and the reports'
/// sites are matched to the copy's path).
fn copy_of_text(dir: &Path, plan: &SanitizePlan) -> Result<PathBuf, String> {
    let copy = dir.join("submission.cu");
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&copy)
        .and_then(|mut file| std::io::Write::write_all(&mut file, plan.text.as_bytes()))
        .map(|()| copy.clone())
        .map_err(|e| format!("cannot write {}: {e}", copy.display()))
}

fn private_folder() -> Result<PathBuf, String> {
    let prefix = format!("flashprof-sanitize-{}", std::process::id());
    crate::sys::folder::new_private_temp(&prefix)
        .map_err(|(dir, e)| format!("cannot create {}: {e}", dir.display()))
}

#[cfg(test)]
mod tests;
