//! Finding NVIDIA's shared libraries without asking the user to set
//! `LD_LIBRARY_PATH`.
//!
//! cudarc and CUPTI open their libraries by bare name (`libnvrtc.so.13`),
//! which only works when the folder is on the loader path. A CUDA toolkit
//! usually is not. Loading a library once by absolute path makes later
//! by-name opens resolve to it (the loader matches the SONAME of objects
//! already in the process), so we preload from the usual install folders.
//! The handles are kept for the life of the process on purpose.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// NVRTC first, then the builtins library it opens by name at compile time.
const NVRTC_LIBRARIES: [&str; 2] = ["libnvrtc.so.13", "libnvrtc-builtins.so.13.0"];

/// Folders searched, in order, after the loader's own path.
fn candidate_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for var in ["FLASHPROF_CUDA_LIB", "CUDA_HOME", "CUDA_PATH"] {
        if let Some(value) = std::env::var_os(var) {
            let base = PathBuf::from(value);
            dirs.push(base.join("targets/x86_64-linux/lib"));
            dirs.push(base.join("lib64"));
            dirs.push(base);
        }
    }
    for base in [
        "/usr/local/cuda",
        "/usr/local/cuda-13.0",
        "/usr/local/cuda-13",
    ] {
        dirs.push(Path::new(base).join("targets/x86_64-linux/lib"));
        dirs.push(Path::new(base).join("lib64"));
    }
    dirs.push(PathBuf::from("/usr/local/nvidia/lib64"));
    dirs
}

/// Opens `name` by bare name, or else from the first candidate folder that has it.
fn open(name: &str, dirs: &[PathBuf]) -> Option<libloading::Library> {
    // SAFETY (for both opens): loading NVIDIA's libraries runs only their
    // initialisers, which have no preconditions on our side.
    #[allow(unsafe_code)]
    let by_name = unsafe { libloading::Library::new(name) };
    if let Ok(lib) = by_name {
        return Some(lib);
    }
    dirs.iter()
        .map(|d| d.join(name))
        .filter(|p| p.exists())
        .find_map(|path| {
            #[allow(unsafe_code)]
            let lib = unsafe { libloading::Library::new(&path) };
            lib.ok()
        })
}

/// Makes NVRTC loadable by name if it can be found anywhere usual. Idempotent.
/// Returns whether NVRTC is now loadable.
pub fn preload_nvrtc() -> bool {
    static LOADED: OnceLock<Vec<libloading::Library>> = OnceLock::new();
    let libs = LOADED.get_or_init(|| {
        let dirs = candidate_dirs();
        NVRTC_LIBRARIES
            .iter()
            .filter_map(|n| open(n, &dirs))
            .collect()
    });
    !libs.is_empty()
}

/// Makes the driver library loadable by name if it sits in a known folder. Idempotent.
pub fn preload_driver() -> bool {
    static LOADED: OnceLock<Option<libloading::Library>> = OnceLock::new();
    LOADED
        .get_or_init(|| open("libcuda.so.1", &candidate_dirs()))
        .is_some()
}

/// The folders flashprof looks in, for error messages.
pub fn searched_folders() -> String {
    candidate_dirs()
        .iter()
        .map(|d| d.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}
