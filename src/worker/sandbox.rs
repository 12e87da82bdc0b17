//! Confines the worker before it reads its first request: the student's code
//! (NVRTC parses it, the driver loads it) then runs with the least the job
//! needs. See docs/SECURITY.md, "Sandbox".
//!
//! * Landlock (through the `landlock` crate, best effort for older kernels):
//!   read-only access to the NVIDIA and system library folders (libraries are
//!   opened lazily, long after start-up), `/sys`, the worker's own `/proc`
//!   entry and a few global `/proc` files the driver reads; read-write access
//!   (with device ioctls) to `/dev/nvidia*`; no file may be written, created,
//!   removed or executed anywhere else; no TCP bind or connect; no signals to,
//!   and no abstract-socket connections with, processes outside the sandbox.
//! * Resource limits: no core dumps, no file growth (the worker writes only
//!   pipes), a modest number of open files.
//! * `CUDA_CACHE_DISABLE=1`, so the driver does not write a JIT cache.
//!
//! It is applied before the GPU is opened, so the driver's own threads
//! (created when the context is) inherit it: Landlock binds threads, not
//! processes, on kernels before Landlock ABI 8.
//!
//! `FLASHPROF_NO_SANDBOX=1` turns it off for debugging, and says so loudly.
#![allow(unsafe_code)]

use std::ffi::OsStr;
use std::fs::File;
use std::ops::RangeInclusive;
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};

use landlock::{
    path_beneath_rules, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible,
    LandlockStatus, PathBeneath, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetError,
    RulesetStatus, Scope, ABI,
};

use crate::facts::device::GpuProblem;
use crate::gpu::found::children;
use crate::protocol::{SandboxLevel, SandboxReport};

/// Set to `1` to run the worker without a sandbox (debugging only).
pub const DISABLE_ENV: &str = "FLASHPROF_NO_SANDBOX";

/// More paths the worker may read (`:`-separated), for a driver or library
/// installed somewhere unusual.
pub const EXTRA_READ_ENV: &str = "FLASHPROF_SANDBOX_READ";

/// Single files the worker may read (`:`-separated): the tensor files of
/// cases that bring their own, set by the caller (the worker command's
/// `reading_tensors`). Each is
/// opened with no link anywhere on its path and granted as the file it was
/// then, so a file swapped for a link after the caller listed it grants
/// nothing (docs/SECURITY.md, row 40).
pub const TENSOR_FILES_ENV: &str = "FLASHPROF_SANDBOX_TENSOR_FILES";

/// The most address space, in MiB, a worker without a GPU may map (its
/// compiles' memory limit); unset: [`DEFAULT_COMPILE_MEMORY_MB`].
pub const COMPILE_MEMORY_ENV: &str = "FLASHPROF_COMPILE_MEMORY_MB";

/// 4 GiB: the heaviest lab kernels compile in well under 1 GiB with NVRTC
/// 13.0, while a compile bomb reaches 8-10 GB (docs/SECURITY.md).
pub const DEFAULT_COMPILE_MEMORY_MB: u64 = 4096;
/// The largest compile memory limit a TA may ask for, in MiB (16 TiB): far
/// above any machine's memory, and small enough that the limit in bytes
/// (`mb << 20`) cannot wrap.
pub const MAX_COMPILE_MEMORY_MB: u64 = 1 << 24;

/// The Landlock ABI whose rights flashprof asks for (tested on Linux 6.18).
const TARGET_ABI: ABI = ABI::V7;

/// Soft and hard limit on open files: the driver holds a few dozen.
const MAX_OPEN_FILES: u64 = 1024;

/// Folders the dynamic loader searches by default, its cache, and the time
/// zone (the driver reads it).
const SYSTEM_LIBRARY_PATHS: [&str; 10] = [
    "/lib",
    "/lib64",
    "/lib32",
    "/usr/lib",
    "/usr/lib64",
    "/usr/lib32",
    "/usr/local/lib",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
];

/// NVIDIA install roots besides `/usr/local/cuda*` (found by listing `/usr/local`).
const NVIDIA_ROOTS: [&str; 2] = ["/usr/local/nvidia", "/opt/nvidia"];

/// Global `/proc` files and folders the CUDA driver and CUPTI read.
const PROC_PATHS: [&str; 10] = [
    "/proc/driver/nvidia",
    "/proc/devices",
    "/proc/modules",
    "/proc/cpuinfo",
    "/proc/meminfo",
    "/proc/stat",
    "/proc/filesystems",
    "/proc/version",
    "/proc/sys",
    "/proc/self/", // resolved now to this process's own /proc/<pid>
];

/// Read-only, harmless character devices.
const PLAIN_DEVICES: [&str; 4] = ["/dev/null", "/dev/zero", "/dev/urandom", "/dev/random"];

/// Confines this process. `written_fds` are the descriptors the worker writes
/// (its protocol pipe); stdout and stderr are checked as well.
pub fn confine(written_fds: &[RawFd]) -> SandboxReport {
    // The driver would otherwise keep compiled PTX under ~/.nv/ComputeCache.
    std::env::set_var("CUDA_CACHE_DISABLE", "1");
    let report = if disabled() {
        SandboxReport {
            level: SandboxLevel::Disabled,
            compile_memory_mb: None,
            notice: format!(
                "SANDBOX OFF ({DISABLE_ENV} is set): student code can read every file this user can"
            ),
        }
    } else {
        let limits = limit_resources(written_fds);
        let threads = thread_count();
        let tool = tool_folders();
        let (mut level, mut landlock) = match restrict_files(&tool) {
            Ok(status) => describe(&status),
            Err(e) => (
                SandboxLevel::Unavailable,
                format!("Landlock could not be applied ({e})"),
            ),
        };
        if !tool.is_empty() {
            let shown: Vec<String> = tool.iter().map(|p| p.display().to_string()).collect();
            landlock.push_str(&format!(
                "; an NVIDIA tool is attached, so {} may be written and sockets and signals are not scoped",
                shown.join(" and ")
            ));
        }
        if let Err(e) = name_a_thread() {
            if level == SandboxLevel::Full {
                level = SandboxLevel::Partial;
            }
            landlock.push_str(&format!(
                "; WARNING: naming a thread through /proc failed ({e}), and cuInit does that"
            ));
        }
        let mut notice = format!("sandbox: {landlock}; {limits}");
        if threads > 1 {
            notice.push_str(&format!(
                "; {} threads started before it are not confined",
                threads - 1
            ));
        }
        SandboxReport {
            level,
            notice,
            compile_memory_mb: None,
        }
    };
    eprintln!("flashprof worker: {}", report.notice);
    report
}

/// `flashprof __sandbox-probe PATH...`: confines this process exactly as a
/// worker confines itself, then tries to read each path and prints one line
/// per path (`read N bytes` or `refused: ...`). It lets a test on any
/// machine, and a site checking its CUDA install, see what the sandbox lets
/// a worker read, without a GPU and without going through the compiler.
pub fn probe(paths: &[std::path::PathBuf]) -> SandboxReport {
    let report = confine(&[]);
    for path in paths {
        match std::fs::read(path) {
            Ok(bytes) => println!("{}: read {} bytes", path.display(), bytes.len()),
            Err(e) => println!("{}: refused: {e}", path.display()),
        }
    }
    report
}

/// Does what `cuInit` does when it starts its helper thread: names it by
/// writing `/proc/self/task/<tid>/comm` (glibc's way for another thread).
/// The driver fails with `CUDA_ERROR_OPERATING_SYSTEM` when it cannot.
fn name_a_thread() -> std::io::Result<()> {
    use std::os::unix::thread::JoinHandleExt;
    let (release, wait) = std::sync::mpsc::channel::<()>();
    let thread = std::thread::spawn(move || {
        let _ = wait.recv();
    });
    // SAFETY: the thread is alive until `release` is dropped below; the name
    // is a NUL-terminated string of fewer than 16 bytes.
    let code =
        unsafe { libc::pthread_setname_np(thread.as_pthread_t(), c"flashprof-probe".as_ptr()) };
    drop(release);
    let _ = thread.join();
    match code {
        0 => Ok(()),
        errno => Err(std::io::Error::from_raw_os_error(errno)),
    }
}

/// Adds to a driver failure that it happened inside the sandbox, and how to
/// tell whether the sandbox caused it.
pub fn explain(problem: GpuProblem, report: &SandboxReport) -> GpuProblem {
    match problem {
        GpuProblem::DriverError { detail } if report.level != SandboxLevel::Disabled => {
            GpuProblem::DriverError {
                detail: format!(
                    "{detail} (inside flashprof's sandbox: if {DISABLE_ENV}=1 cures it, \
                     the sandbox denies the driver something; docs/SECURITY.md)"
                ),
            }
        }
        other => other,
    }
}

fn disabled() -> bool {
    std::env::var_os(DISABLE_ENV).is_some_and(|v| !v.is_empty() && v != "0")
}

fn thread_count() -> usize {
    std::fs::read_dir("/proc/self/task").map_or(1, |d| d.count())
}

/// What the kernel enforced, as a level and a phrase.
fn describe(status: &landlock::RestrictionStatus) -> (SandboxLevel, String) {
    let abi = match status.landlock {
        LandlockStatus::Available { effective_abi, .. } => effective_abi as i32,
        _ => 0,
    };
    match status.ruleset {
        RulesetStatus::FullyEnforced => (
            SandboxLevel::Full,
            format!(
                "Landlock ABI {abi} fully enforced (reads: NVIDIA and system libraries, /sys, \
                 own /proc; read-write: /dev/nvidia*, own thread names; no other file access, \
                 no TCP, signals and abstract sockets scoped)"
            ),
        ),
        RulesetStatus::PartiallyEnforced => (
            SandboxLevel::Partial,
            format!(
                "Landlock ABI {abi} partly enforced: file reads and writes are confined, but this \
                 kernel cannot restrict {}",
                missing_features(abi).join(", ")
            ),
        ),
        RulesetStatus::NotEnforced => (
            SandboxLevel::Unavailable,
            match status.landlock {
                LandlockStatus::NotEnabled => {
                    "NOT confined: Landlock is built into this kernel but not enabled \
                     (add `lsm=...,landlock` to the kernel command line)"
                        .to_owned()
                }
                _ => "NOT confined: this kernel has no Landlock (Linux 5.13 or newer has it)"
                    .to_owned(),
            },
        ),
    }
}

/// What an older Landlock ABI leaves out of flashprof's ruleset.
fn missing_features(abi: i32) -> Vec<&'static str> {
    [
        (2, "renaming files across folders"),
        (3, "truncation"),
        (4, "TCP"),
        (5, "device ioctls"),
        (6, "signals and abstract sockets"),
    ]
    .into_iter()
    .filter(|(since, _)| abi < *since)
    .map(|(_, what)| what)
    .collect()
}

/// Variables that Nsight Compute and compute-sanitizer set in the processes
/// they attach to (seen on the H200 with CUDA 13.0: ncu 2025.3.1 and
/// compute-sanitizer). The TA starts the tool; a student cannot set the
/// worker's environment.
const TOOL_ENV: [&str; 4] = [
    "NVIDIA_PROCESS_INJECTION_CRASH_REPORTING",
    "NV_NSIGHT_INJECTION_TRANSPORT_TYPE",
    "NV_SANITIZER_INJECTION_TRANSPORT_TYPE",
    "CUDA_INJECTION64_PATH",
];

/// Whether an NVIDIA developer tool is attached to this process.
fn tool_attached() -> bool {
    TOOL_ENV.iter().any(|var| std::env::var_os(var).is_some())
}

/// Folders an attached tool writes in the target process: its lock folder
/// (`/tmp/nvidia`), its process-tree tracker (`/tmp/NVIDIA-treetracker-*`,
/// made by the tool before it starts flashprof) and shared memory; nothing
/// else under /tmp. Empty without a tool.
fn tool_folders() -> Vec<PathBuf> {
    if !tool_attached() {
        return Vec::new();
    }
    // The lock folder may not exist yet, and a rule can only name what does.
    let _ = std::fs::create_dir_all("/tmp/nvidia");
    let mut folders = vec![PathBuf::from("/tmp/nvidia"), PathBuf::from("/dev/shm")];
    folders.extend(children(Path::new("/tmp"), "NVIDIA-"));
    folders.retain(|folder| folder.is_dir());
    folders
}

fn restrict_files(tool: &[PathBuf]) -> Result<landlock::RestrictionStatus, RulesetError> {
    let read = AccessFs::from_read(TARGET_ABI) & !AccessFs::Execute;
    let devices: BitFlags<AccessFs> =
        read | AccessFs::WriteFile | AccessFs::IoctlDev | AccessFs::Truncate;
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(TARGET_ABI))?
        .handle_access(AccessNet::from_all(TARGET_ABI))?;
    // An attached tool talks to its front end over Unix sockets: the
    // scoping of abstract sockets and signals is left off for it.
    if tool.is_empty() {
        ruleset = ruleset.scope(Scope::from_all(TARGET_ABI))?;
    }
    ruleset
        .create()?
        .add_rules(path_beneath_rules(readable_paths(), read))?
        .add_rules(path_beneath_rules(
            PLAIN_DEVICES,
            AccessFs::ReadFile | AccessFs::WriteFile,
        ))?
        // Listing /dev shows names only; the driver looks for its nodes there.
        .add_rules(path_beneath_rules(["/dev"], AccessFs::ReadDir))?
        // cuInit names its threads through /proc/self/task/<tid>/comm and fails
        // with CUDA_ERROR_OPERATING_SYSTEM if it cannot. Resolved now, this is
        // the worker's own /proc/<pid>/task: no other process's entries.
        .add_rules(path_beneath_rules(
            ["/proc/self/task/"],
            read | AccessFs::WriteFile | AccessFs::Truncate,
        ))?
        .add_rules(path_beneath_rules(nvidia_devices(), devices))?
        .add_rules(path_beneath_rules(tool, AccessFs::from_all(TARGET_ABI)))?
        .add_rules(
            granted_tensor_files()
                .into_iter()
                .map(|file| Ok::<_, RulesetError>(PathBeneath::new(file, AccessFs::ReadFile))),
        )?
        .restrict_self()
}

/// The files [`TENSOR_FILES_ENV`] names that are regular files reached with
/// no link on their path, each held open (as `O_PATH`) for its grant, so the
/// grant is that file and not what its path names later. Any other is left
/// out: the worker's read of it is then refused.
fn granted_tensor_files() -> Vec<File> {
    let Some(list) = std::env::var_os(TENSOR_FILES_ENV) else {
        return Vec::new();
    };
    std::env::split_paths(&list)
        .filter_map(|path| open_without_links(&path).ok())
        .filter(|file| file.metadata().is_ok_and(|m| m.file_type().is_file()))
        .collect()
}

/// Opens `path` as an `O_PATH` handle, refusing a link at any step of it
/// (`openat2` with `RESOLVE_NO_SYMLINKS`, Linux 5.6); where the kernel has
/// no `openat2`, a link as the last step is still refused (`O_NOFOLLOW`).
fn open_without_links(path: &Path) -> std::io::Result<File> {
    use std::os::fd::FromRawFd;
    use std::os::unix::ffi::OsStrExt;
    let name = std::ffi::CString::new(path.as_os_str().as_bytes())?;
    let flags = libc::O_PATH | libc::O_CLOEXEC | libc::O_NOFOLLOW;
    // SAFETY: `open_how` is plain integers; zero is a valid value of each.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = flags as u64;
    how.resolve = libc::RESOLVE_NO_SYMLINKS;
    // SAFETY: `name` is NUL-terminated and `how` a valid `open_how` of the
    // size passed; both outlive the calls.
    let mut fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            libc::AT_FDCWD,
            name.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    } as RawFd;
    // ENOSYS: a kernel before 5.6; EPERM: a container's seccomp profile
    // that refuses the call it does not know.
    let unknown_call = [Some(libc::ENOSYS), Some(libc::EPERM)];
    if fd < 0 && unknown_call.contains(&std::io::Error::last_os_error().raw_os_error()) {
        // SAFETY: as above, with plain `openat`.
        fd = unsafe { libc::openat(libc::AT_FDCWD, name.as_ptr(), flags) };
    }
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened here and is owned by nothing else.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// Everything the worker may read: library folders, /sys, parts of /proc.
fn readable_paths() -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = SYSTEM_LIBRARY_PATHS.iter().map(PathBuf::from).collect();
    paths.extend(NVIDIA_ROOTS.iter().map(PathBuf::from));
    paths.extend(children(Path::new("/usr/local"), "cuda"));
    paths.extend(environment_library_folders());
    paths.extend(mapped_library_folders());
    // NVRTC reads the CUDA type headers from their folder at compile time;
    // the search (before confinement) allowed only a trusted one.
    paths.extend(
        crate::gpu::headers::current()
            .found
            .as_ref()
            .map(|h| h.folder.clone()),
    );
    paths.push("/sys".into());
    paths.extend(PROC_PATHS.iter().map(PathBuf::from));
    paths.retain(|p| is_narrow(p));
    paths.sort();
    paths.dedup();
    paths
}

/// An absolute path that holds neither the whole filesystem nor the user's home.
fn is_narrow(path: &Path) -> bool {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    path.is_absolute()
        && path.parent().is_some()
        && !home.is_some_and(|home| home.starts_with(path))
}

/// Folders named by the loader path and flashprof's own library variables.
fn environment_library_folders() -> Vec<PathBuf> {
    let mut folders = Vec::new();
    for var in ["LD_LIBRARY_PATH", EXTRA_READ_ENV] {
        if let Some(path) = std::env::var_os(var) {
            folders.extend(std::env::split_paths(&path));
        }
    }
    for var in ["FLASHPROF_CUDA_LIB", "CUDA_HOME", "CUDA_PATH"] {
        folders.extend(std::env::var_os(var).map(PathBuf::from));
    }
    if let Some(cupti) = std::env::var_os(crate::gpu::cupti::PATH_VARIABLE).map(PathBuf::from) {
        // A file names libcupti; its folder holds libnvperf_host too.
        match cupti.is_dir() {
            true => folders.push(cupti),
            false => folders.extend(cupti.parent().map(Path::to_path_buf)),
        }
    }
    folders
}

/// Folders of the shared libraries already mapped into this process.
fn mapped_library_folders() -> Vec<PathBuf> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    maps.lines()
        .filter_map(|line| line.split_whitespace().nth(5))
        .filter(|path| path.starts_with('/') && path.contains(".so"))
        .filter_map(|path| Path::new(path).parent().map(Path::to_path_buf))
        .collect()
}

/// The NVIDIA device nodes (`/dev/nvidia0`, `/dev/nvidiactl`, `/dev/nvidia-uvm`,
/// `/dev/nvidia-caps/`, ...).
fn nvidia_devices() -> Vec<PathBuf> {
    children(Path::new("/dev"), "nvidia")
}

/// The compile memory limit this process's environment asks for, in MiB,
/// read once (a typo is said once, not at every compile); below 256 NVRTC
/// cannot load its builtins.
pub fn compile_memory_mb() -> u64 {
    static LIMIT: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *LIMIT.get_or_init(|| compile_memory_from(std::env::var_os(COMPILE_MEMORY_ENV).as_deref()))
}

/// The compile memory limit `text` (the variable's value) asks for, in MiB.
fn compile_memory_from(text: Option<&OsStr>) -> u64 {
    limit_from(
        COMPILE_MEMORY_ENV,
        text,
        "a number of MiB from 256 to 16777216 (16 TiB)",
        256..=MAX_COMPILE_MEMORY_MB,
        DEFAULT_COMPILE_MEMORY_MB,
    )
}

/// A limit on students' compiles that `variable` (the TA's environment)
/// sets to `text`: the number when it is in `allowed`, else `default`, with
/// a line on stderr saying what the value `needs` to be, so a typo never
/// lifts the limit.
pub fn limit_from(
    variable: &str,
    text: Option<&OsStr>,
    needs: &str,
    allowed: RangeInclusive<u64>,
    default: u64,
) -> u64 {
    let Some(text) = text else {
        return default;
    };
    match text.to_str().and_then(|t| t.trim().parse::<u64>().ok()) {
        Some(value) if allowed.contains(&value) => value,
        _ => {
            eprintln!(
                "flashprof: {variable} must be {needs}, found `{}`; using {default}",
                crate::display::line_for_display(&text.to_string_lossy())
            );
            default
        }
    }
}

/// Caps this process's address space at [`compile_memory_mb`] (`RLIMIT_AS`,
/// soft and hard), for a worker that compiles and opens no GPU: the CUDA
/// driver reserves address space of about twice the GPU's memory, so a
/// worker with a context cannot have this limit, and hands its students'
/// compiles to a builder without a GPU instead (docs/ARCHITECTURE.md,
/// "Compile memory"). Says what holds.
pub fn limit_compile_memory() -> Result<u64, String> {
    let mb = compile_memory_mb();
    // A driver that got as far as reserving its address space before it
    // failed would make every compile fail under the limit.
    let mapped_mb = mapped_mb().unwrap_or(0);
    if mapped_mb > mb / 2 {
        return Err(format!(
            "the compile memory limit ({mb} MiB) was not set: {mapped_mb} MiB are already mapped"
        ));
    }
    match set_limit(libc::RLIMIT_AS, mb << 20) {
        true => Ok(mb),
        false => Err(format!(
            "the compile memory limit ({mb} MiB) could not be set: {}",
            std::io::Error::last_os_error()
        )),
    }
}

/// This process's mapped address space (`VmSize`), MiB.
fn mapped_mb() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmSize:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb >> 10)
}

/// Sets the resource limits and says what holds.
fn limit_resources(written_fds: &[RawFd]) -> String {
    let mut done = Vec::new();
    if set_limit(libc::RLIMIT_CORE, 0) {
        done.push("no core dumps".to_owned());
    }
    // A file size limit of zero kills a writer of regular files (SIGXFSZ);
    // the worker writes only pipes, unless someone redirected it to a file.
    let written: Vec<RawFd> = written_fds.iter().copied().chain([1, 2]).collect();
    if written.iter().any(|&fd| is_regular_file(fd)) {
        done.push("file size unlimited (output goes to a file)".to_owned());
    } else if set_limit(libc::RLIMIT_FSIZE, 0) {
        done.push("no file growth".to_owned());
    }
    let open_files = current_limit(libc::RLIMIT_NOFILE)
        .map_or(MAX_OPEN_FILES, |current| current.min(MAX_OPEN_FILES));
    if set_limit(libc::RLIMIT_NOFILE, open_files) {
        done.push(format!("at most {open_files} open files"));
    }
    done.join(", ")
}

fn current_limit(resource: libc::__rlimit_resource_t) -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit we own.
    let ok = unsafe { libc::getrlimit(resource, &mut limit) } == 0;
    ok.then_some(limit.rlim_cur)
}

/// Sets both the soft and the hard limit, so the worker cannot raise it again.
fn set_limit(resource: libc::__rlimit_resource_t, value: u64) -> bool {
    let limit = libc::rlimit {
        rlim_cur: value,
        rlim_max: value,
    };
    // SAFETY: setrlimit reads one rlimit we own.
    unsafe { libc::setrlimit(resource, &limit) == 0 }
}

fn is_regular_file(fd: RawFd) -> bool {
    // SAFETY: fstat writes one stat we own; a bad descriptor only fails.
    unsafe {
        let mut stat: libc::stat = std::mem::zeroed();
        libc::fstat(fd, &mut stat) == 0 && (stat.st_mode & libc::S_IFMT) == libc::S_IFREG
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A limit past 2^44 MiB once wrapped when turned into bytes (a
    /// divide-by-zero panic, or compiles under 256 MiB while the message
    /// said 16 EiB): past 16 TiB it is a typo, and the default holds.
    #[test]
    fn a_compile_memory_limit_too_large_to_be_bytes_keeps_the_default() {
        let asked = |text: &str| compile_memory_from(Some(OsStr::new(text)));
        assert_eq!(asked("8192"), 8192);
        assert_eq!(asked("16777216"), MAX_COMPILE_MEMORY_MB);
        assert_eq!(asked("16777217"), DEFAULT_COMPILE_MEMORY_MB);
        assert_eq!(asked(&(1u64 << 45).to_string()), DEFAULT_COMPILE_MEMORY_MB);
        assert_eq!(asked("255"), DEFAULT_COMPILE_MEMORY_MB);
        assert!(MAX_COMPILE_MEMORY_MB.checked_mul(1 << 20).is_some());
    }

    #[test]
    fn an_older_abi_names_what_it_cannot_restrict() {
        assert_eq!(
            missing_features(3),
            ["TCP", "device ioctls", "signals and abstract sockets"]
        );
        assert!(missing_features(7).is_empty());
    }

    #[test]
    fn a_driver_failure_inside_the_sandbox_says_how_to_rule_it_out() {
        let report = |level| SandboxReport {
            level,
            compile_memory_mb: None,
            notice: String::new(),
        };
        let failed = || GpuProblem::DriverError {
            detail: "cuInit: CUDA_ERROR_OPERATING_SYSTEM".into(),
        };
        let explained = explain(failed(), &report(SandboxLevel::Full)).describe();
        assert!(explained.contains(DISABLE_ENV), "{explained}");
        assert_eq!(explain(failed(), &report(SandboxLevel::Disabled)), failed());
        let no_driver = GpuProblem::NoDriver { detail: "x".into() };
        assert_eq!(
            explain(no_driver.clone(), &report(SandboxLevel::Full)),
            no_driver
        );
    }

    #[test]
    fn the_readable_paths_never_open_the_root_or_home() {
        let paths = readable_paths();
        assert!(!paths.iter().any(|p| p == Path::new("/")));
        if let Some(home) = std::env::var_os("HOME") {
            assert!(!paths.iter().any(|p| Path::new(&home).starts_with(p)));
        }
        assert!(paths.iter().any(|p| p == Path::new("/sys")));
        // The CUDA type headers NVRTC reads at compile time, where found.
        if let Some(headers) = &crate::gpu::headers::current().found {
            assert!(paths.contains(&headers.folder), "{paths:?}");
        }
    }
}
