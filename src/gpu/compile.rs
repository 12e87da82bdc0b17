//! Student source to GPU image, through NVRTC.
//!
//! [`compile`] turns a checked [`StudentSource`] into a CUBIN for the GPU
//! that will run it (so the driver loads it without a JIT step), with line
//! info for the profiler and ptxas's resource report. Everything a student
//! needs to fix a failure comes back as [`Diagnostic`]s that point into
//! their own file; the raw log is kept next to them.

pub(crate) mod image;
pub mod line_table;
mod nvrtc;

use std::ffi::CString;
use std::path::Path;
use std::time::Instant;

use cudarc::nvrtc::sys::nvrtcResult;

use self::nvrtc::{CallError, Program};
use crate::facts::diagnostics;
use crate::facts::kept_state::KernelFacts;
use crate::facts::resources::{parse_ptxas_log, ResourceUsage};
use crate::gpu::headers::CudaHeaders;
use crate::lab::definition::LabRef;
use crate::lab::geometry::LaunchGeometry;
use crate::lab::source::{PreparedSource, SourceError, StudentSource, CUDA_TYPE_HEADERS};

use crate::facts::diagnostics::{Diagnostic, Severity};

/// The start of the builtins library's name, which NVRTC opens on its own
/// at compile time (`libnvrtc-builtins.so.13.0`, `.so.12.8`).
const BUILTINS_LIBRARY: &str = "libnvrtc-builtins.so";

/// What a person does about a missing NVRTC: one command.
fn library_hint() -> String {
    use crate::gpu::found::{NVRTC_FIX, NVRTC_PIP};
    format!(
        "fix: {NVRTC_FIX} (it installs NVIDIA's wheels with pip into flashprof's own folder; \
         or by hand: {NVRTC_PIP}; or set FLASHPROF_CUDA_LIB to the folder holding it; \
         `flashprof doctor` lists where flashprof looked)"
    )
}

/// The version of the NVRTC this process loaded, if one is loaded.
pub fn nvrtc_version() -> Option<(i32, i32)> {
    nvrtc::library_present().then(nvrtc::version).flatten()
}

/// How to compile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompileOptions {
    /// A real architecture such as `sm_90` gives a CUBIN for exactly that
    /// GPU; `None` gives PTX for NVRTC's default virtual architecture, which
    /// the driver compiles when loading.
    pub arch: Option<String>,
    pub build: Build,
}

impl Default for CompileOptions {
    /// Hopper (H100/H200), the GPUs the lab runs on, fully optimised.
    fn default() -> Self {
        Self::for_arch(Some("sm_90".into()))
    }
}

/// Which build of a kernel: the one that is timed and profiled, or one
/// made only to get verdicts before the optimizer has finished.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Build {
    /// NVRTC's defaults: what the student would ship, and what is timed.
    #[default]
    Optimized,
    /// Made for verdicts in milliseconds; never timed or profiled.
    Quick(QuickBuild),
}

/// How a quick build trades code quality for compile time. On a heavy
/// register-tiled kernel (kernels/flash-prefill/bench/unrolled-register-tiles.cu) NVRTC
/// 13.0 needs seconds with its defaults, almost all of it in NVVM's
/// optimizer; both of these skip it (docs/PERFORMANCE.md has the figures).
/// Neither changes what the program means, only how well it is optimised,
/// so a verdict that differs between a quick and the optimized build points
/// at undefined behaviour in the kernel (a race, an uninitialised read).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QuickBuild {
    /// `--Ofast-compile=max`: NVRTC's own "compile speed first" level.
    #[default]
    FastCompile,
    /// `-G`: device debug code, no optimisation at all.
    Debug,
}

impl QuickBuild {
    pub const ALL: [QuickBuild; 2] = [QuickBuild::FastCompile, QuickBuild::Debug];

    /// The NVRTC option that makes this build.
    pub fn flag(self) -> &'static str {
        match self {
            Self::FastCompile => "--Ofast-compile=max",
            Self::Debug => "-G",
        }
    }

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::FastCompile => "fast-compile",
            Self::Debug => "debug",
        }
    }
}

impl std::str::FromStr for QuickBuild {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|q| q.name() == text)
            .ok_or_else(|| format!("unknown quick build `{text}`: choose fast-compile or debug"))
    }
}

impl CompileOptions {
    /// The optimized build for `arch`.
    pub fn for_arch(arch: Option<String>) -> Self {
        Self {
            arch,
            build: Build::Optimized,
        }
    }

    fn image_format(&self) -> ImageFormat {
        match &self.arch {
            Some(arch) if arch.starts_with("sm_") => ImageFormat::Cubin,
            _ => ImageFormat::Ptx,
        }
    }

    fn flags(&self) -> Vec<String> {
        // NVRTC would otherwise search the folder named by the program name
        // (the student's path) for quoted includes; every header a
        // submission may use is handed over in memory instead.
        let mut flags = vec!["-lineinfo".to_owned(), "--no-source-include".to_owned()];
        if let Some(arch) = &self.arch {
            flags.push(format!("--gpu-architecture={arch}"));
        }
        // ptxas only runs when NVRTC produces machine code.
        if self.image_format() == ImageFormat::Cubin {
            flags.push("--ptxas-options=-v".to_owned());
        }
        if let Build::Quick(quick) = self.build {
            flags.push(quick.flag().to_owned());
        }
        flags
    }
}

/// What [`CompiledKernel::image`] holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ImageFormat {
    Cubin,
    /// PTX text, for the driver to compile when loading.
    Ptx,
}

/// A compiled kernel, ready for the driver to load.
#[derive(Debug, Clone, PartialEq)]
pub struct CompiledKernel {
    pub image: Vec<u8>,
    pub format: ImageFormat,
    /// NVRTC's whole log: warnings and ptxas's report.
    pub log: String,
    /// Warnings (a successful compile has no errors).
    pub diagnostics: Vec<Diagnostic>,
    /// ptxas's report for the entry point; `None` for PTX, which ptxas never saw.
    pub resources: Option<ResourceUsage>,
    pub geometry: LaunchGeometry,
    /// What the kernel keeps between launches, and what its PTX reads.
    pub facts: KernelFacts,
    /// Wall time of the NVRTC work, milliseconds.
    pub compile_ms: f64,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CompileError {
    #[error("{library} could not be loaded (tried {}); {hint}", tried.join(", "))]
    LibraryMissing {
        library: String,
        tried: Vec<String>,
        hint: String,
    },
    #[error(transparent)]
    Source(#[from] SourceError),
    /// The file includes a CUDA type header this machine has no trusted copy of.
    #[error("{path}: {message}")]
    HeadersMissing {
        path: String,
        header: &'static str,
        message: String,
    },
    #[error("{}", failure_summary(diagnostics, log))]
    Failed {
        diagnostics: Vec<Diagnostic>,
        log: String,
    },
    #[error(
        "{path}: compiled, but no `{entry}` kernel came out (is its definition inside an #if?)"
    )]
    MissingEntryPoint { path: String, entry: &'static str },
    #[error("NVRTC rejected the compile options: {log}")]
    InvalidOption { log: String },
    #[error("NVRTC failed: {0}")]
    Nvrtc(#[from] CallError),
}

fn failure_summary(diagnostics: &[Diagnostic], log: &str) -> String {
    let errors: Vec<&Diagnostic> = diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .collect();
    match errors.first() {
        Some(first) => format!(
            "{}({}): error: {} ({} error{} in all)",
            first.file,
            first.line,
            first.message,
            errors.len(),
            if errors.len() == 1 { "" } else { "s" }
        ),
        None => format!("compilation failed: {}", log.trim()),
    }
}

/// Reads, checks and compiles the kernel file at `path` for `lab`.
pub fn compile_file(
    path: &Path,
    lab: LabRef,
    opts: &CompileOptions,
) -> Result<CompiledKernel, CompileError> {
    compile(&StudentSource::from_path(path, lab)?, opts)
}

/// Compiles `src` for `opts.arch`, with the CUDA type headers this process found.
pub fn compile(src: &StudentSource, opts: &CompileOptions) -> Result<CompiledKernel, CompileError> {
    compile_with_headers(src, opts, crate::gpu::headers::current().found.as_ref())
}

/// [`compile`] with the given CUDA type headers (`None`: none on this machine).
fn compile_with_headers(
    src: &StudentSource,
    opts: &CompileOptions,
    headers: Option<&CudaHeaders>,
) -> Result<CompiledKernel, CompileError> {
    if !nvrtc::library_present() {
        return Err(CompileError::LibraryMissing {
            library: "NVRTC".into(),
            tried: nvrtc::library_candidates(),
            hint: library_hint(),
        });
    }
    let format = opts.image_format();
    let started = Instant::now();
    let prepared = src.prepared();
    let entry = prepared.entry_point;
    if headers.is_none() {
        // `cuda_fp16.h` keeps its stand-in; the other two have none.
        if let Some(&header) = prepared.cuda_headers.iter().find(|&&h| h != "cuda_fp16.h") {
            return Err(CompileError::HeadersMissing {
                path: src.display_path().to_owned(),
                header,
                message: crate::gpu::headers::missing_message(header),
            });
        }
    }
    let program = create_program(prepared, headers.is_some())?;
    let mut flags = student_flags(opts);
    flags.extend(include_flag(headers));
    let outcome = program.compile(&c_strings(flags)?);
    let log = program.log()?;
    if let Err(failure) = outcome {
        return Err(explain_failure(failure, log, src));
    }
    let image = match format {
        ImageFormat::Cubin => program.cubin()?,
        ImageFormat::Ptx => program.ptx()?,
    };
    let facts = kernel_facts(&program, format, &image)?;
    let compile_ms = started.elapsed().as_secs_f64() * 1e3;
    let resources = parse_ptxas_log(&log, entry);
    // ptxas's report names the entry function, but it is absent when NVRTC
    // serves a cached result, so the image's symbol names decide too.
    let has_entry = match format {
        ImageFormat::Cubin => resources.is_some() || image::defines_function(&image, entry),
        ImageFormat::Ptx => String::from_utf8_lossy(&image).contains(&format!(".entry {entry}(")),
    };
    if !has_entry {
        return Err(CompileError::MissingEntryPoint {
            path: src.display_path().to_owned(),
            entry,
        });
    }
    Ok(CompiledKernel {
        diagnostics: diagnostics::parse_log(&log, src),
        image,
        format,
        log,
        resources,
        geometry: src.geometry(),
        facts,
        compile_ms,
    })
}

/// What the kernel keeps between launches (the cubin's symbols) and what
/// its code reads (the PTX: the clock, the timer, cache-policy hints are
/// named there as written, where SASS would need a disassembler). NVRTC
/// keeps the PTX it made the cubin from, so both come from one program.
fn kernel_facts(
    program: &Program,
    format: ImageFormat,
    image: &[u8],
) -> Result<KernelFacts, CompileError> {
    let mut facts = KernelFacts::default();
    match format {
        ImageFormat::Cubin => {
            let ptx = program.ptx()?;
            let ptx = String::from_utf8_lossy(&ptx);
            facts.kept = image::kept_variables(image, &ptx);
            facts.read_ptx(&ptx);
        }
        // PTX is only made when no real architecture is named, which no
        // check does; it has no symbol table, so its variables go unlisted.
        ImageFormat::Ptx => facts.read_ptx(&String::from_utf8_lossy(image)),
    }
    Ok(facts)
}

/// A student's file is compiled with `-default-device`: what is left of a
/// file written for nvcc once its host code is dropped (`lab::source::host`)
/// may hold unannotated helpers the kernel uses, such as a `constexpr`
/// function that also sizes the launch on the host; NVRTC refuses those as
/// host functions otherwise.
fn student_flags(opts: &CompileOptions) -> Vec<String> {
    let mut flags = opts.flags();
    flags.push("-default-device".to_owned());
    flags
}

/// Compiles one of flashprof's own kernel files (no prelude, no entry-point
/// check) to a CUBIN for `opts.arch`.
pub fn compile_trusted(
    name: &str,
    text: &str,
    opts: &CompileOptions,
) -> Result<Vec<u8>, CompileError> {
    if !nvrtc::library_present() {
        return Err(CompileError::LibraryMissing {
            library: "NVRTC".into(),
            tried: nvrtc::library_candidates(),
            hint: library_hint(),
        });
    }
    let program = Program::create(c_string(text)?, c_string(name)?, Vec::new())?;
    let mut flags = opts.flags();
    flags.extend(include_flag(crate::gpu::headers::current().found.as_ref()));
    if program.compile(&c_strings(flags)?).is_err() {
        return Err(CompileError::InvalidOption {
            log: program.log()?,
        });
    }
    Ok(match opts.image_format() {
        ImageFormat::Cubin => program.cubin()?,
        ImageFormat::Ptx => program.ptx()?,
    })
}

/// `-I` with the CUDA type headers' folder, when there is one.
fn include_flag(headers: Option<&CudaHeaders>) -> Option<String> {
    headers.map(|h| format!("-I{}", h.folder.display()))
}

/// The program with its stand-in headers; with `real_cuda_headers`, the
/// stand-ins of [`CUDA_TYPE_HEADERS`] stay out, since NVRTC takes a header
/// handed over in memory before its `-I` folder and the real `cuda_bf16.h`
/// needs the real `cuda_fp16.h`.
fn create_program(
    prepared: PreparedSource,
    real_cuda_headers: bool,
) -> Result<Program, CompileError> {
    let headers = prepared
        .headers
        .iter()
        .filter(|h| !(real_cuda_headers && CUDA_TYPE_HEADERS.contains(&h.name)))
        .map(|h| Ok((c_string(h.name)?, c_string(h.text)?)))
        .collect::<Result<Vec<_>, CompileError>>()?;
    Ok(Program::create(
        c_string(&prepared.text)?,
        c_string(&prepared.program_name)?,
        headers,
    )?)
}

/// Source text never holds NUL (`StudentSource` rejects it), but a display
/// path handed to `from_bytes` might.
fn c_string(text: &str) -> Result<CString, CompileError> {
    CString::new(text).map_err(|_| {
        CompileError::Nvrtc(CallError {
            call: "nvrtcCreateProgram",
            code: nvrtcResult::NVRTC_ERROR_INVALID_INPUT,
        })
    })
}

fn c_strings(texts: Vec<String>) -> Result<Vec<CString>, CompileError> {
    texts.iter().map(|t| c_string(t)).collect()
}

fn explain_failure(failure: CallError, log: String, src: &StudentSource) -> CompileError {
    match failure.code {
        nvrtcResult::NVRTC_ERROR_COMPILATION => {
            let mut parsed = diagnostics::parse_log(&log, src);
            // Never a failure with nothing to show: the raw log stands in.
            if !parsed.iter().any(|d| d.severity == Severity::Error) {
                parsed.push(diagnostics::unplaced_failure(&log, src));
            }
            CompileError::Failed {
                diagnostics: parsed,
                log,
            }
        }
        nvrtcResult::NVRTC_ERROR_INVALID_OPTION => CompileError::InvalidOption { log },
        // NVRTC loads its builtins library itself, on the first compile.
        nvrtcResult::NVRTC_ERROR_BUILTIN_OPERATION_FAILURE if log.contains(BUILTINS_LIBRARY) => {
            CompileError::LibraryMissing {
                library: "NVRTC's builtins library".into(),
                tried: vec![format!("{BUILTINS_LIBRARY}.*")],
                hint: library_hint(),
            }
        }
        _ => CompileError::Nvrtc(failure),
    }
}

#[cfg(test)]
mod tests;
