//! `flashprof fetch-cuda`: NVIDIA's NVRTC, CUPTI and CUDA-headers wheels,
//! installed by pip into flashprof's own folder of the user's cache
//! ([`super::found::fetched_folder`]), where the library search finds them.
//!
//! Running the command (or pressing `f` in the TUI) is the consent: nothing
//! is fetched otherwise, and never while building. pip installs into a
//! fresh sibling folder (`--target`, so no Python environment is touched
//! and an "externally managed" Python does not object), which is then
//! renamed into place: a fetch that fails or is stopped leaves the folder
//! as it was. The cache's `flashprof` folder is made `0700`, and every file
//! pip wrote loses its group and other write bits (a umask of `002` would
//! leave them), so [`super::found::trust`] accepts what was fetched.
//!
//! pip is the one program here that runs code chosen at run time, so it
//! runs with nothing of a student's in reach: in the cache's private
//! `flashprof` folder, never the caller's (with `-m`, Python puts its
//! working folder first on the import path, and a `pip/` or `json.py` in a
//! student's folder would run as the TA), with Python told to put no
//! folder of its own on that path ([`crate::sys::child`]), and with every
//! wheel pinned by its SHA-256 (`--require-hashes`, `--no-deps`: the three
//! wheels depend on nothing), so pip installs NVIDIA's files or nothing.
//! pip's own `--isolated` is not used: it would drop the TA's index and
//! proxy settings, and pip reads no configuration from its working folder.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::found::{fetched_folder, Context};
use crate::display::path_for_display;
use crate::sys::folder::make_private;

/// The command, as messages give it.
pub const COMMAND: &str = "flashprof fetch-cuda";

/// The CUDA release line fetched; it names the folder.
pub const SERIES: &str = "13.0";

/// The wheels, at the versions `scripts/test.sh` tests with: the compiler,
/// the hardware counters, and the runtime for its bf16/FP8 headers.
pub const WHEELS: [&str; 3] = [
    "nvidia-cuda-nvrtc==13.0.88",
    "nvidia-cuda-cupti==13.0.85",
    "nvidia-cuda-runtime==13.0.96",
];

/// The SHA-256 of every file pip may install for [`WHEELS`]: each wheel's
/// x86_64 and aarch64 (SBSA) builds, as PyPI lists them (read with `pip
/// download` and `sha256sum` on 2026-12-06).
const WHEEL_HASHES: [(&str, [&str; 2]); 3] = [
    (
        WHEELS[0],
        [
            "ad9b6d2ead2435f11cbb6868809d2adeeee302e9bb94bcf0539c7a40d80e8575",
            "d27f20a0ca67a4bb34268a5e951033496c5b74870b868bacd046b1b8e0c3267b",
        ],
    ),
    (
        WHEELS[1],
        [
            "4eb01c08e859bf924d222250d2e8f8b8ff6d3db4721288cf35d14252a4d933c8",
            "796bd679890ee55fb14a94629b698b6db54bcfd833d391d5e94017dd9d7d3151",
        ],
    ),
    (
        WHEELS[2],
        [
            "7f82250d7782aa23b6cfe765ecc7db554bd3c2870c43f3d1821f1d18aebf0548",
            "ef9bcbe90493a2b9d810e43d249adb3d02e98dd30200d86607d8d02687c43f55",
        ],
    ),
];

/// The Python that runs pip.
const PYTHON: &str = "python3";

/// pip's words for "this machine cannot reach the index".
const OFFLINE_MARKS: [&str; 4] = [
    "No matching distribution found",
    "Failed to establish a new connection",
    "Temporary failure in name resolution",
    "Network is unreachable",
];

/// Installs [`WHEELS`] into [`fetched_folder`] of `context`, handing each
/// line pip prints to `on_line` as it comes, and returns the folder. The
/// error says what is missing or what failed, in one paragraph.
pub fn fetch(context: &Context, on_line: &mut dyn FnMut(&str)) -> Result<PathBuf, String> {
    let folder = fetched_folder(context).ok_or(
        "no cache folder to install into: neither XDG_CACHE_HOME nor HOME is set to an absolute path",
    )?;
    let parent = folder.parent().unwrap_or(Path::new("/"));
    // Made first: Python runs nowhere else, not even to ask for pip.
    make_private(parent)?;
    require_pip(parent)?;
    remove_abandoned_attempts(parent, &folder);
    let partial = sibling(&folder, "partial");
    let installed = run_pip(parent, &partial, on_line).and_then(|()| {
        on_line("making the fetched files writable by this user only");
        remove_shared_write(&partial).map_err(|e| {
            format!(
                "cannot set the permissions of {}: {e}",
                path_for_display(&partial)
            )
        })
    });
    if let Err(e) = installed.and_then(|()| replace(&partial, &folder)) {
        let _ = std::fs::remove_dir_all(&partial);
        return Err(e);
    }
    Ok(folder)
}

/// A folder beside `folder` that belongs to this process: `NAME.WHAT-PID`.
fn sibling(folder: &Path, what: &str) -> PathBuf {
    let name = folder.file_name().unwrap_or_default().to_string_lossy();
    folder.with_file_name(format!("{name}.{what}-{}", std::process::id()))
}

/// The fetched folder a partial attempt `NAME.partial-PID` stands for.
fn folder_of(partial: &Path) -> PathBuf {
    let name = partial.file_name().unwrap_or_default().to_string_lossy();
    let stem = name
        .split_once(".partial-")
        .map_or(&*name, |(stem, _)| stem);
    partial.with_file_name(stem)
}

/// `python3 -m pip` works, run in `home`, or why not, with what to do about it.
fn require_pip(home: &Path) -> Result<(), String> {
    let by_hand = format!(
        "or install the wheels yourself, inside a virtualenv that is active when flashprof runs: pip install {}",
        quoted_wheels()
    );
    let answer = python(home)
        .args(["-m", "pip", "--version"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    match answer {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(format!(
            "{PYTHON} was not found on PATH: flashprof fetches NVIDIA's NVRTC wheels with pip, \
             so it needs Python 3 with pip (on Debian or Ubuntu: sudo apt install python3-pip); {by_hand}"
        )),
        Err(e) => Err(format!("cannot start {PYTHON}: {e}")),
        Ok(status) if !status.success() => Err(format!(
            "`{PYTHON} -m pip` does not work here ({status}): install pip (on Debian or Ubuntu: \
             sudo apt install python3-pip; elsewhere: {PYTHON} -m ensurepip --user); {by_hand}"
        )),
        Ok(_) => Ok(()),
    }
}

fn quoted_wheels() -> String {
    WHEELS.map(|w| format!("'{w}'")).join(" ")
}

/// `python3`, to run in `home` (flashprof's private folder), without the
/// pip settings that would turn an install into one folder into something
/// else: `--user` (which pip refuses beside `--target`), another target or
/// prefix, and the demand for a virtualenv (nothing of one is touched).
/// pip's index settings are kept.
fn python(home: &Path) -> Command {
    let mut command = crate::sys::child::command_in(PYTHON, home);
    for name in [
        "PIP_USER",
        "PIP_TARGET",
        "PIP_PREFIX",
        "PIP_REQUIRE_VIRTUALENV",
    ] {
        command.env_remove(name);
    }
    command
}

/// Removes what a fetch that was killed left beside `folder`: the
/// `.partial-PID` and `.old-PID` folders ([`sibling`]) of processes that
/// have ended.
fn remove_abandoned_attempts(parent: &Path, folder: &Path) {
    let name = folder.file_name().unwrap_or_default().to_string_lossy();
    for what in ["partial", "old", "requirements"] {
        let prefix = format!("{name}.{what}-");
        for leftover in super::found::children(parent, &prefix) {
            let file_name = leftover.file_name().unwrap_or_default().to_string_lossy();
            let Ok(pid) = file_name[prefix.len()..].parse::<u32>() else {
                continue;
            };
            if !Path::new(&format!("/proc/{pid}")).exists() {
                // A folder (an attempt) or a file (its requirements).
                if std::fs::remove_dir_all(&leftover).is_err() {
                    let _ = std::fs::remove_file(&leftover);
                }
            }
        }
    }
}

/// The requirements file pip is given: each wheel pinned by its hashes.
fn pinned_requirements() -> String {
    WHEEL_HASHES
        .iter()
        .map(|(wheel, hashes)| {
            let pins: Vec<String> = hashes
                .iter()
                .map(|h| format!("--hash=sha256:{h}"))
                .collect();
            format!("{wheel} {}\n", pins.join(" "))
        })
        .collect()
}

/// pip, run in `home`, installing [`WHEELS`] into `target`; its output
/// goes to `on_line`.
fn run_pip(home: &Path, target: &Path, on_line: &mut dyn FnMut(&str)) -> Result<(), String> {
    on_line(&format!(
        "{PYTHON} -m pip install --require-hashes --no-deps --target {} {}",
        path_for_display(target),
        WHEELS.join(" ")
    ));
    // Beside the fetched folder, named as the other attempts are, so one a
    // killed fetch left is removed with them.
    let requirements = sibling(&folder_of(target), "requirements");
    write_private_file(&requirements, &pinned_requirements())
        .map_err(|e| format!("cannot write {}: {e}", path_for_display(&requirements)))?;
    let result = run_pip_with(home, &requirements, target, on_line);
    let _ = std::fs::remove_file(&requirements);
    result
}

/// Writes `text` into a new file only this user can read (never over
/// something already there).
fn write_private_file(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(text.as_bytes())
}

fn run_pip_with(
    home: &Path,
    requirements: &Path,
    target: &Path,
    on_line: &mut dyn FnMut(&str),
) -> Result<(), String> {
    let mut child = python(home)
        .args([
            "-m",
            "pip",
            "install",
            "--no-input",
            "--disable-pip-version-check",
            "--require-hashes",
            "--no-deps",
        ])
        .args([
            "--progress-bar",
            "off",
            "--only-binary",
            ":all:",
            "--target",
        ])
        .arg(target)
        .arg("--requirement")
        .arg(requirements)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {PYTHON}: {e}"))?;
    // Both pipes are read at once (either can fill while pip waits on the
    // other), in order of arrival, into one stream of lines.
    let (sender, lines) = std::sync::mpsc::channel::<String>();
    let readers: Vec<_> = [
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
    ]
    .into_iter()
    .flatten()
    .map(|pipe| {
        let sender = sender.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                if sender.send(line).is_err() {
                    return;
                }
            }
        })
    })
    .collect();
    drop(sender);
    let mut last = Vec::new();
    for line in lines {
        let line = crate::display::line_for_display(&line).into_owned();
        on_line(&line);
        if !line.trim().is_empty() {
            last.push(line);
        }
    }
    for reader in readers {
        let _ = reader.join();
    }
    let status = child
        .wait()
        .map_err(|e| format!("cannot wait for pip: {e}"))?;
    if status.success() {
        return Ok(());
    }
    let said = last
        .iter()
        .rev()
        .find(|l| l.contains("ERROR"))
        .or(last.last())
        .cloned()
        .unwrap_or_else(|| "nothing".into());
    let offline = last
        .iter()
        .any(|l| OFFLINE_MARKS.iter().any(|mark| l.contains(mark)));
    let hint = if offline {
        "; pip could not reach its package index: is this machine online (or is pip's index, PIP_INDEX_URL, reachable)?"
    } else {
        ""
    };
    Err(format!(
        "pip could not install NVIDIA's wheels ({status}); it said: {said}{hint}"
    ))
}

/// Clears the group and other write bits of `root` and everything under
/// it; links are left alone (trust follows them to what they name).
fn remove_shared_write(root: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::symlink_metadata(root)?;
    if meta.file_type().is_symlink() {
        return Ok(());
    }
    let mode = meta.permissions().mode();
    if mode & 0o022 != 0 {
        std::fs::set_permissions(root, std::fs::Permissions::from_mode(mode & !0o022))?;
    }
    if meta.is_dir() {
        for entry in std::fs::read_dir(root)? {
            remove_shared_write(&entry?.path())?;
        }
    }
    Ok(())
}

/// Puts `partial` where `folder` is: an earlier fetch is moved aside first
/// and removed after, so the folder is whole at every moment but one rename.
fn replace(partial: &Path, folder: &Path) -> Result<(), String> {
    let shown = path_for_display(folder);
    let aside = sibling(folder, "old");
    let had_one = std::fs::symlink_metadata(folder).is_ok();
    if had_one {
        std::fs::rename(folder, &aside)
            .map_err(|e| format!("cannot move the earlier fetch {shown} aside: {e}"))?;
    }
    if let Err(e) = std::fs::rename(partial, folder) {
        if had_one {
            let _ = std::fs::rename(&aside, folder);
        }
        return Err(format!("cannot put the fetched wheels in {shown}: {e}"));
    }
    if had_one {
        let _ = std::fs::remove_dir_all(&aside);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(path: &Path) -> u32 {
        std::fs::symlink_metadata(path)
            .unwrap()
            .permissions()
            .mode()
            & 0o7777
    }

    #[test]
    fn every_fix_by_hand_is_one_that_works_where_it_is_offered() {
        // `pip install --user` fails inside a virtualenv and on a system
        // Python marked externally managed (PEP 668); a bare `pip install`
        // works only inside a virtualenv, and each fix says so.
        use crate::gpu::found::{CUPTI_FIX, NVRTC_PIP};
        use crate::gpu::headers::HEADERS_FIX;
        for fix in [NVRTC_PIP, CUPTI_FIX, HEADERS_FIX] {
            assert!(!fix.contains("--user"), "{fix}");
            assert!(
                fix.contains(
                    "inside a virtualenv that is active when flashprof runs, pip install '"
                ),
                "{fix}"
            );
        }
    }

    #[test]
    fn shared_write_bits_are_cleared_everywhere_and_nothing_else_changes() {
        let root = tempfile::tempdir().unwrap();
        let lib = root.path().join("nvidia/cu13/lib");
        std::fs::create_dir_all(&lib).unwrap();
        let file = lib.join("libnvrtc.so.13");
        std::fs::write(&file, b"").unwrap();
        for (path, bits) in [
            (&file, 0o775),
            (&lib, 0o777),
            (&root.path().join("nvidia"), 0o770),
        ] {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(bits)).unwrap();
        }
        remove_shared_write(root.path()).unwrap();
        assert_eq!(mode(&file), 0o755);
        assert_eq!(mode(&lib), 0o755);
        assert_eq!(mode(&root.path().join("nvidia")), 0o750);
    }

    #[test]
    fn every_wheel_is_pinned_by_both_of_its_builds() {
        let requirements = pinned_requirements();
        let lines: Vec<&str> = requirements.lines().collect();
        assert_eq!(lines.len(), WHEELS.len());
        for (line, wheel) in lines.iter().zip(WHEELS) {
            let mut words = line.split(' ');
            assert_eq!(words.next(), Some(wheel));
            let hashes: Vec<&str> = words
                .map(|w| w.strip_prefix("--hash=sha256:").expect("a pin"))
                .collect();
            assert_eq!(hashes.len(), 2, "{line}");
            assert!(hashes[0] != hashes[1], "{line}");
            assert!(
                hashes
                    .iter()
                    .all(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit())),
                "{line}"
            );
        }
    }

    #[test]
    fn a_new_fetch_replaces_an_earlier_one_whole() {
        let root = tempfile::tempdir().unwrap();
        let folder = root.path().join("cuda-13.0");
        std::fs::create_dir_all(folder.join("stale")).unwrap();
        let partial = sibling(&folder, "partial");
        std::fs::create_dir_all(partial.join("fresh")).unwrap();
        replace(&partial, &folder).unwrap();
        assert!(folder.join("fresh").is_dir());
        assert!(!folder.join("stale").exists());
        assert_eq!(
            super::super::found::children(root.path(), ""),
            vec![folder.clone()],
            "nothing left beside it"
        );
    }

    #[test]
    fn only_the_leftovers_of_ended_processes_are_removed() {
        let root = tempfile::tempdir().unwrap();
        let folder = root.path().join("cuda-13.0");
        let ours = sibling(&folder, "partial");
        // No process has the largest pid the kernel allows and more.
        let ended = root.path().join("cuda-13.0.partial-4294967295");
        let unrelated = root.path().join("cuda-13.0.notes-1");
        for path in [&ours, &ended, &unrelated] {
            std::fs::create_dir_all(path).unwrap();
        }
        // A killed fetch's requirements file, named for the folder.
        let requirements = root.path().join("cuda-13.0.requirements-4294967295");
        std::fs::write(&requirements, "pins").unwrap();
        assert_eq!(
            sibling(&folder_of(&ours), "requirements"),
            root.path()
                .join(format!("cuda-13.0.requirements-{}", std::process::id()))
        );
        remove_abandoned_attempts(root.path(), &folder);
        assert!(!requirements.exists());
        assert!(ours.is_dir(), "this process is alive");
        assert!(!ended.exists());
        assert!(unrelated.is_dir());
    }
}
