//! Finding `libcupti.so.13` at run time, and the seam that lets tests replace
//! the library with Rust functions.
//!
//! libcupti has no RPATH and opens `libnvperf_host.so` by bare name the first
//! time a profiler call needs it. Opening that library ourselves, by absolute
//! path from libcupti's folder, makes the later by-name lookup succeed even
//! when the folder is not on `LD_LIBRARY_PATH` (the dynamic loader matches an
//! already-loaded object by its SONAME), and it turns a confusing
//! `NOT_INITIALIZED` from deep inside CUPTI into a clear message up front.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::error::{CountersUnavailable, UnavailableReason};
use super::sys::{EntryPoints, OpenError, SharedLibrary};

/// Environment variable naming libcupti (the file, or the folder holding it).
pub const PATH_VARIABLE: &str = "FLASHPROF_CUPTI_PATH";

const CUPTI_NAME: &str = "libcupti.so.13";
const NVPERF_HOST_NAME: &str = "libnvperf_host.so";

/// Folders CUDA 13 and 12.x toolkits install libcupti in.
const TOOLKIT_FOLDERS: [&str; 3] = [
    "/usr/local/cuda/targets/x86_64-linux/lib",
    "/usr/local/cuda-13.0/targets/x86_64-linux/lib",
    "/usr/local/cuda/extras/CUPTI/lib64",
];

/// Produces the CUPTI entry points, or says why it cannot.
pub trait LibraryLoader {
    fn open(&self) -> Result<Box<dyn EntryPoints>, CountersUnavailable>;
}

/// One place to look for libcupti.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Candidate {
    /// An absolute path; libnvperf_host is expected in the same folder.
    File(PathBuf),
    /// The bare SONAME, resolved by the dynamic loader (`LD_LIBRARY_PATH`,
    /// the ld.so cache); libnvperf_host is then looked up the same way.
    LoaderPath,
}

/// Opens the real library with `dlopen`, trying candidates in order.
#[derive(Debug, Clone)]
pub struct SystemLoader {
    candidates: Vec<Candidate>,
}

impl SystemLoader {
    /// The standard search: [`PATH_VARIABLE`], then the loader path, then the
    /// toolkit folders.
    pub fn from_environment() -> Self {
        Self::searching(std::env::var_os(PATH_VARIABLE))
    }

    /// The standard search with `override_path` in place of the environment
    /// variable's value.
    pub fn searching(override_path: Option<OsString>) -> Self {
        let mut candidates = Vec::new();
        if let Some(path) = override_path.filter(|path| !path.is_empty()) {
            candidates.push(Candidate::File(library_file(PathBuf::from(path))));
        }
        candidates.push(Candidate::LoaderPath);
        candidates.extend(
            TOOLKIT_FOLDERS
                .iter()
                .map(|folder| Candidate::File(Path::new(folder).join(CUPTI_NAME))),
        );
        // Wheels, conda, other toolkits (crate::gpu::found).
        if let Some(found) = &crate::gpu::found::current().cupti {
            let file = Candidate::File(found.library.clone());
            if !candidates.contains(&file) {
                candidates.push(file);
            }
        }
        Self { candidates }
    }

    /// Only the given candidates, in order.
    pub fn with_candidates(candidates: Vec<Candidate>) -> Self {
        Self { candidates }
    }

    pub fn candidates(&self) -> &[Candidate] {
        &self.candidates
    }
}

/// A folder stands for the libcupti inside it.
fn library_file(path: PathBuf) -> PathBuf {
    if path.is_dir() {
        path.join(CUPTI_NAME)
    } else {
        path
    }
}

impl LibraryLoader for SystemLoader {
    fn open(&self) -> Result<Box<dyn EntryPoints>, CountersUnavailable> {
        let mut tried = Vec::new();
        let mut nvperf_failure = None;
        for candidate in &self.candidates {
            let (cupti, nvperf_host) = match candidate {
                Candidate::File(path) => {
                    if !path.is_file() {
                        tried.push(format!("{}: no such file", path.display()));
                        continue;
                    }
                    // Only a trusted file, and its nvperf companion (crate::gpu::found::trust).
                    let folder = path.parent().unwrap_or(Path::new("/"));
                    let pair = crate::gpu::found::trust(path).and_then(|cupti| {
                        let nvperf = folder.join(NVPERF_HOST_NAME);
                        match nvperf.is_file() {
                            true => crate::gpu::found::trust(&nvperf).map(|n| (cupti, n)),
                            false => Ok((cupti, nvperf)),
                        }
                    });
                    match pair {
                        Ok(pair) => pair,
                        Err(reason) => {
                            tried.push(format!("refused {}: {reason}", path.display()));
                            continue;
                        }
                    }
                }
                Candidate::LoaderPath => {
                    let blocked = crate::gpu::found::current()
                        .by_name_blocked(&crate::gpu::found::CUPTI_NAMES)
                        .map(ToString::to_string)
                        .or_else(|| {
                            crate::gpu::found::loader_path_refusal(
                                &crate::gpu::found::Context::current(),
                                NVPERF_HOST_NAME,
                            )
                            .map(|r| r.to_string())
                        });
                    if let Some(refusal) = blocked {
                        tried.push(format!("{CUPTI_NAME} by name: {refusal}"));
                        continue;
                    }
                    (PathBuf::from(CUPTI_NAME), PathBuf::from(NVPERF_HOST_NAME))
                }
            };
            match SharedLibrary::open(&cupti, &nvperf_host) {
                Ok(library) => return Ok(Box::new(library)),
                Err(OpenError::Cupti(error)) => tried.push(format!("{}: {error}", cupti.display())),
                Err(OpenError::NvperfHost(error)) => {
                    let line = format!(
                        "found {} but not {}: {error}",
                        cupti.display(),
                        nvperf_host.display()
                    );
                    tried.push(line.clone());
                    nvperf_failure.get_or_insert(line);
                }
            }
        }
        Err(match nvperf_failure {
            Some(line) => CountersUnavailable::new(UnavailableReason::NvperfHostMissing, line),
            None => CountersUnavailable::new(
                UnavailableReason::LibraryMissing,
                format!("tried {}", tried.join("; ")),
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The folder of a real libcupti (with its nvperf libraries), from the
    /// override variable or `LD_LIBRARY_PATH`.
    fn real_library_folder() -> PathBuf {
        let override_folder = std::env::var_os(PATH_VARIABLE).map(|path| {
            let file = library_file(PathBuf::from(path));
            file.parent().map(Path::to_path_buf).unwrap_or_default()
        });
        let loader_path = std::env::var_os("LD_LIBRARY_PATH").unwrap_or_default();
        override_folder
            .into_iter()
            .chain(std::env::split_paths(&loader_path))
            .find(|folder| {
                folder.join(CUPTI_NAME).is_file() && folder.join(NVPERF_HOST_NAME).is_file()
            })
            .unwrap_or_else(|| {
                panic!(
                    "no libcupti.so.13 in {PATH_VARIABLE} or LD_LIBRARY_PATH: \
                     run the tests through scripts/test.sh"
                )
            })
    }

    #[test]
    fn override_comes_first_then_loader_path_then_toolkits() {
        let folder = tempfile::tempdir().expect("temp dir");
        let loader = SystemLoader::searching(Some(folder.path().into()));
        let candidates = loader.candidates();
        assert_eq!(
            candidates[0],
            Candidate::File(folder.path().join(CUPTI_NAME))
        );
        assert_eq!(candidates[1], Candidate::LoaderPath);
        assert_eq!(
            candidates[2],
            Candidate::File(PathBuf::from(
                "/usr/local/cuda/targets/x86_64-linux/lib/libcupti.so.13"
            ))
        );
        assert!(candidates.len() >= 5);
    }

    #[test]
    fn empty_override_is_ignored() {
        let loader = SystemLoader::searching(Some(OsString::new()));
        assert_eq!(loader.candidates()[0], Candidate::LoaderPath);
    }

    #[test]
    fn nothing_found_lists_what_was_tried() {
        let folder = tempfile::tempdir().expect("temp dir");
        let absent = folder.path().join(CUPTI_NAME);
        let loader = SystemLoader::with_candidates(vec![Candidate::File(absent.clone())]);
        let unavailable = loader.open().err().expect("nothing to open");
        assert_eq!(unavailable.reason, UnavailableReason::LibraryMissing);
        assert!(unavailable.detail.contains(&absent.display().to_string()));
    }

    #[test]
    fn libcupti_without_nvperf_beside_it_is_refused() {
        let real = real_library_folder();
        let folder = tempfile::tempdir().expect("temp dir");
        std::os::unix::fs::symlink(real.join(CUPTI_NAME), folder.path().join(CUPTI_NAME))
            .expect("symlink");
        let loader =
            SystemLoader::with_candidates(vec![Candidate::File(folder.path().join(CUPTI_NAME))]);
        let unavailable = loader.open().err().expect("nvperf is missing");
        assert_eq!(unavailable.reason, UnavailableReason::NvperfHostMissing);
        assert!(
            unavailable.detail.contains(NVPERF_HOST_NAME),
            "{}",
            unavailable.detail
        );
    }

    #[test]
    fn real_folder_loads_by_absolute_path() {
        let real = real_library_folder();
        let path = real.join(CUPTI_NAME);
        let loader = SystemLoader::with_candidates(vec![
            Candidate::File(PathBuf::from("/nonexistent/libcupti.so.13")),
            Candidate::File(path.clone()),
        ]);
        let library = loader.open().expect("the real library opens");
        assert_eq!(library.origin(), path.display().to_string());
        assert!(library.entry("cuptiRangeProfilerEnable").is_some());
        assert!(library.entry("cuptiNoSuchFunction").is_none());
    }
}
