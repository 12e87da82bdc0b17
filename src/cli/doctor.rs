//! `flashprof doctor`: what flashprof found where (driver, GPU, NVRTC,
//! CUPTI, compute-sanitizer, profiling permission), and for each thing
//! missing the command or setting that fixes it.

use std::path::{Path, PathBuf};

use clap::Args;
use serde::Serialize;

use super::ExitCode;
use crate::gpu::found::{self, Found, CUPTI_FIX, NVRTC_FIX};

#[derive(Args, Debug)]
pub struct DoctorArgs {
    /// Print the findings as JSON (schema flashprof.doctor/1, docs/JSON.md).
    #[arg(short, long)]
    pub json: bool,
}

/// One line of the report.
#[derive(Debug, Serialize)]
pub struct Finding {
    /// `driver`, `gpu`, `peaks`, `nvrtc`, `cuda_headers`, `cupti`, `compute_sanitizer`, `profiling`.
    pub item: &'static str,
    pub ok: bool,
    /// `ok`, `missing`, or `unknown` (what cannot be told on this machine,
    /// such as the counter permission without an NVIDIA kernel driver).
    pub state: State,
    /// What was found, where, and how it was found.
    pub found: String,
    /// What makes it work, when it does not.
    pub fix: Option<String>,
}

/// What doctor could tell about one thing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    Ok,
    Missing,
    Unknown,
}

impl State {
    /// The mark a line starts with, as wide for every state, and its colour.
    fn mark(self) -> (&'static str, &'static str) {
        match self {
            State::Ok => ("ok     ", "32"),
            State::Missing => ("MISSING", "31"),
            State::Unknown => ("unknown", "33"),
        }
    }
}

impl Finding {
    fn ok(item: &'static str, found: String) -> Self {
        Self {
            item,
            ok: true,
            state: State::Ok,
            found,
            fix: None,
        }
    }

    fn missing(item: &'static str, found: String, fix: impl Into<String>) -> Self {
        Self {
            item,
            ok: false,
            state: State::Missing,
            found,
            fix: Some(fix.into()),
        }
    }

    /// Not known here; `fix` says where it can be.
    fn unknown(item: &'static str, found: String, fix: impl Into<String>) -> Self {
        Self {
            state: State::Unknown,
            ..Self::missing(item, found, fix)
        }
    }
}

#[derive(Serialize)]
struct Document<'a> {
    schema: &'static str,
    flashprof_version: &'static str,
    /// Whether a kernel can be compiled (NVRTC found and loadable): the exit code is 0.
    can_compile: bool,
    findings: &'a [Finding],
    searched: Vec<String>,
    /// Library files found but not loaded, each with the reason.
    refused: Vec<String>,
}

pub fn run(args: DoctorArgs) -> ExitCode {
    let findings = diagnose();
    let can_compile = findings.iter().any(|f| f.item == "nvrtc" && f.ok);
    let libraries = found::current();
    if args.json {
        let document = Document {
            schema: "flashprof.doctor/1",
            flashprof_version: env!("CARGO_PKG_VERSION"),
            can_compile,
            findings: &findings,
            searched: libraries.searched_folders(),
            refused: libraries
                .refusals()
                .into_iter()
                .chain(&crate::gpu::headers::current().refused)
                .map(ToString::to_string)
                .collect(),
        };
        println!(
            "{}",
            serde_json::to_string_pretty(&document).expect("plain data serializes")
        );
    } else {
        print_findings(&findings);
        let existing: Vec<String> = libraries
            .searched
            .iter()
            .filter(|p| p.folder.is_dir())
            .map(|p| format!("{} ({})", p.folder.display(), p.origin))
            .collect();
        println!(
            "\nlooked in {} places; these exist: {}",
            libraries.searched.len(),
            if existing.is_empty() {
                "none".to_owned()
            } else {
                existing.join(", ")
            }
        );
        if libraries.python_asked {
            println!("(and asked python3 for its site-packages)");
        }
        for refusal in libraries.refusals() {
            println!("{refusal} (not loaded: only files of this user or root, in folders no one else can write, are)");
        }
        for refusal in &crate::gpu::headers::current().refused {
            println!("{refusal} (not used: only headers of this user or root, in folders no one else can write, are)");
        }
    }
    if can_compile {
        ExitCode::Pass
    } else {
        ExitCode::Environment
    }
}

/// The findings as doctor prints them: one line each, its fix under it.
pub fn print_findings(findings: &[Finding]) {
    use std::io::IsTerminal;
    let coloured = crate::display::colour(std::io::stdout().is_terminal());
    for finding in findings {
        let (mark, code) = finding.state.mark();
        let mark = match coloured {
            true => format!("\x1b[{code}m{mark}\x1b[0m"),
            false => mark.to_string(),
        };
        println!("{mark} {:<18} {}", finding.item, finding.found);
        if let Some(fix) = &finding.fix {
            println!("        {:<18} fix: {fix}", "");
        }
    }
}

/// The roofs the counters use: measured by the benchmarks (or read from
/// their cache), else from the device attributes.
fn peaks_finding(gpu: &crate::gpu::device::Gpu) -> Finding {
    let options = crate::gpu::compile::CompileOptions::for_arch(Some(gpu.info.arch()));
    let cache = crate::app::peaks_cache::path()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    if let Some(peaks) = crate::app::peaks_cache::load(&gpu.info) {
        return Finding::ok(
            "peaks",
            format!("{}; measured earlier, cached in {cache}", peaks.summary()),
        );
    }
    let mut found = match crate::gpu::compile::compile_trusted(
        "kernels/probes.cu",
        crate::gpu::device::PROBES_SOURCE,
        &options,
    ) {
        Ok(probes) => crate::gpu::peaks::measure_peaks(gpu, &probes),
        Err(e) => crate::gpu::peaks::FoundPeaks {
            peaks: gpu.info.attribute_peaks(),
            origin: format!("from the device attributes (the benchmarks did not compile: {e})"),
        },
    };
    if crate::app::peaks_cache::store(&gpu.info, &found.peaks) {
        found.origin.push_str(&format!(", cached in {cache}"));
    }
    Finding::ok(
        "peaks",
        format!("{}; {}", found.peaks.summary(), found.origin),
    )
}

fn describe(found: &Found) -> String {
    format!("{} (via {})", found.library.display(), found.origin)
}

/// Everything doctor reports, in order.
pub fn diagnose() -> Vec<Finding> {
    let mut findings = Vec::new();
    // The driver and the GPU.
    match crate::gpu::device::open(0) {
        Ok(gpu) => {
            let info = &gpu.info;
            findings.push(Finding::ok(
                "driver",
                format!(
                    "CUDA driver {}.{}{}",
                    info.driver_version / 1000,
                    (info.driver_version % 1000) / 10,
                    loaded_from("libcuda.so")
                        .map(|p| format!(" at {}", p.display()))
                        .unwrap_or_default()
                ),
            ));
            findings.push(Finding::ok(
                "gpu",
                format!(
                    "{} (sm_{}{}, {} SMs)",
                    info.name, info.compute_capability.0, info.compute_capability.1, info.sm_count
                ),
            ));
            findings.push(peaks_finding(&gpu));
        }
        Err(problem) => {
            let no_driver = matches!(problem, crate::facts::device::GpuProblem::NoDriver { .. });
            findings.push(if no_driver {
                Finding::missing(
                    "driver",
                    "no libcuda.so.1 (no NVIDIA driver)".into(),
                    "install the NVIDIA driver (on WSL2, the Windows driver provides /usr/lib/wsl/lib/libcuda.so.1); \
                     without one flashprof still compiles and reports registers and occupancy",
                )
            } else {
                Finding::ok(
                    "driver",
                    loaded_from("libcuda.so")
                        .map(|p| format!("libcuda at {}", p.display()))
                        .unwrap_or_else(|| "libcuda loaded".into()),
                )
            });
            findings.push(Finding::missing(
                "gpu",
                problem.describe(),
                "run on a machine with an NVIDIA GPU (Volta or newer) to grade and time; compiling works without one",
            ));
        }
    }
    findings.extend(library_findings());
    // compute-sanitizer.
    findings.push(match compute_sanitizer() {
        Some(path) => Finding::ok("compute_sanitizer", path.display().to_string()),
        None => Finding::missing(
            "compute_sanitizer",
            "not on PATH nor in a CUDA toolkit".into(),
            "install the CUDA toolkit (it ships compute-sanitizer) and put its bin folder on PATH",
        ),
    });
    // Profiling permission.
    findings.push(profiling_permission());
    findings
}

/// What the last library search found: NVRTC (loaded, to read its
/// version), the CUDA type headers, CUPTI.
pub fn library_findings() -> Vec<Finding> {
    let libraries = found::current();
    let mut findings = Vec::new();
    findings.push(match &libraries.nvrtc {
        Some(nvrtc) => match crate::gpu::compile::nvrtc_version() {
            Some((major, minor)) => Finding::ok(
                "nvrtc",
                format!(
                    "NVRTC {major}.{minor}: {}{}",
                    describe(nvrtc),
                    nvrtc
                        .companion
                        .as_ref()
                        .map(|b| format!(", builtins {}", b.display()))
                        .unwrap_or_else(|| ", builtins library NOT beside it".into())
                ),
            ),
            None => Finding::missing(
                "nvrtc",
                format!("{} could not be loaded", describe(nvrtc)),
                NVRTC_FIX,
            ),
        },
        None => match crate::gpu::compile::nvrtc_version() {
            Some((major, minor)) => Finding::ok(
                "nvrtc",
                format!("NVRTC {major}.{minor} (via the loader's default path)"),
            ),
            None => Finding::missing("nvrtc", "libnvrtc.so.13 / .12 not found".into(), NVRTC_FIX),
        },
    });
    findings.push(headers_finding(
        &crate::gpu::headers::current(),
        libraries.nvrtc.as_ref().map(|n| n.major),
    ));
    // CUPTI.
    findings.push(match (&libraries.cupti, &libraries.cupti_12) {
        (Some(cupti), _) => {
            let nvperf = cupti.folder().join("libnvperf_host.so");
            if nvperf.is_file() {
                Finding::ok("cupti", format!("CUPTI 13: {}", describe(cupti)))
            } else {
                Finding::missing(
                    "cupti",
                    format!("{} but no libnvperf_host.so beside it", describe(cupti)),
                    CUPTI_FIX,
                )
            }
        }
        (None, Some(twelve)) => Finding::missing(
            "cupti",
            format!(
                "only CUPTI 12 ({}); hardware counters need libcupti.so.13",
                describe(twelve)
            ),
            CUPTI_FIX,
        ),
        (None, None) => Finding::missing(
            "cupti",
            "libcupti.so.13 not found (hardware counters off; grading works)".into(),
            CUPTI_FIX,
        ),
    });
    findings
}

/// Where the CUDA type headers are (the bf16/FP8 lab needs them), or why not.
fn headers_finding(
    search: &crate::gpu::headers::HeaderSearch,
    nvrtc_major: Option<u32>,
) -> Finding {
    use crate::gpu::headers::{CUDA_TYPE_HEADERS, HEADERS_FIX};
    let names = CUDA_TYPE_HEADERS.join(", ");
    if let Some(headers) = &search.found {
        return Finding::ok("cuda_headers", format!("{names}: {headers}"));
    }
    let unused: Vec<String> = search.other_major.iter().map(ToString::to_string).collect();
    let found = match (unused.is_empty(), nvrtc_major) {
        (false, Some(major)) => format!(
            "only {} (NVRTC is {major}.x: headers of another CUDA major are not used)",
            unused.join("; ")
        ),
        _ => format!(
            "{names} not found (only the bf16/FP8 lab needs them; cuda_fp16.h keeps its stand-in)"
        ),
    };
    Finding::missing("cuda_headers", found, HEADERS_FIX)
}

/// The file a library whose name starts with `prefix` was loaded from.
fn loaded_from(prefix: &str) -> Option<PathBuf> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines()
        .filter_map(|line| line.split_whitespace().nth(5))
        .map(Path::new)
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(prefix))
        })
        .map(Path::to_path_buf)
}

/// `compute-sanitizer` on PATH, or in a CUDA toolkit.
fn compute_sanitizer() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut folders: Vec<PathBuf> = std::env::split_paths(&path).collect();
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        folders.extend(std::env::var_os(var).map(|v| PathBuf::from(v).join("bin")));
    }
    let mut toolkits: Vec<PathBuf> = std::fs::read_dir("/usr/local")
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().starts_with("cuda"))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default();
    toolkits.sort_by(|a, b| b.cmp(a));
    for toolkit in toolkits {
        folders.push(toolkit.join("bin"));
        folders.push(toolkit.join("compute-sanitizer"));
    }
    folders
        .into_iter()
        .map(|f| f.join("compute-sanitizer"))
        .find(|p| p.is_file())
}

/// Whether this user may read hardware counters, from the driver's parameters.
fn profiling_permission() -> Finding {
    let params = std::fs::read_to_string("/proc/driver/nvidia/params").ok();
    let admin_only = params.as_deref().and_then(|text| {
        text.lines()
            .find_map(|l| l.strip_prefix("RmProfilingAdminOnly:"))
            .map(|v| v.trim() == "1")
    });
    // /proc/self belongs to the process's effective user.
    let root = std::fs::metadata("/proc/self")
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
        .unwrap_or(false);
    match admin_only {
        None => Finding::unknown(
            "profiling",
            "no /proc/driver/nvidia/params (no NVIDIA kernel driver here)".into(),
            "needs the NVIDIA driver; on WSL2 counters follow the Windows driver's setting",
        ),
        Some(false) => Finding::ok("profiling", "counters open to every user".into()),
        Some(true) if root => Finding::ok(
            "profiling",
            "counters restricted to administrators; running as root".into(),
        ),
        Some(true) => Finding::missing(
            "profiling",
            "counters restricted to administrators (RmProfilingAdminOnly: 1)".into(),
            crate::gpu::cupti::CountersUnavailable::new(
                crate::gpu::cupti::UnavailableReason::InsufficientPrivileges,
                "",
            )
            .fix(),
        ),
    }
}
