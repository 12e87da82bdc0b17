//! Loading NVIDIA's shared libraries from wherever [`super::found`] found
//! them, without asking the user to set `LD_LIBRARY_PATH`.
//!
//! cudarc and CUPTI open their libraries by bare name (`libnvrtc.so.13`),
//! and NVRTC opens its builtins library (`libnvrtc-builtins.so.13.0`) by bare
//! name at its first compile; that only works when the folder is on the
//! loader path, which a wheel's or a toolkit's usually is not. Loading a
//! library once by absolute path makes later by-name opens resolve to it
//! (the loader matches the SONAME of objects already in the process), so we
//! preload NVRTC and its builtins, and the driver, by path. The handles are
//! kept for the life of the process on purpose.
//!
//! Only trusted files are loaded ([`super::found::trust`]), and no bare
//! name is opened when the loader's search through `LD_LIBRARY_PATH` would
//! take an untrusted file for it ([`super::found::Libraries::by_name_blocked`]).

use std::path::Path;
use std::sync::OnceLock;

/// Names tried through the loader's own search when nothing was found in a folder.
const NVRTC_BY_NAME: [&str; 2] = ["libnvrtc.so.13", "libnvrtc.so.12"];

fn load(path: &Path) -> Option<libloading::Library> {
    // SAFETY: loading NVIDIA's libraries runs only their initialisers, which
    // have no preconditions on our side.
    #[allow(unsafe_code)]
    let lib = unsafe { libloading::Library::new(path) };
    lib.ok()
}

/// Makes NVRTC (and its builtins) loadable by name if it can be found
/// anywhere flashprof looks. Idempotent. Returns whether NVRTC is now loadable.
pub fn preload_nvrtc() -> bool {
    static LOADED: OnceLock<Vec<libloading::Library>> = OnceLock::new();
    let libs = LOADED.get_or_init(|| match &super::found::current().nvrtc {
        // NVRTC first: its builtins library needs nothing of it, but a
        // builtins without its NVRTC is of no use.
        Some(found) => load(&found.library)
            .into_iter()
            .chain(found.companion.as_deref().and_then(load))
            .collect(),
        None if nvrtc_by_name_blocked() => Vec::new(),
        None => NVRTC_BY_NAME
            .iter()
            .find_map(|name| load(Path::new(name)))
            .into_iter()
            .collect(),
    });
    !libs.is_empty() && !nvrtc_by_name_blocked()
}

/// Whether a by-name open of NVRTC (cudarc's, or ours) could load an untrusted file.
pub fn nvrtc_by_name_blocked() -> bool {
    super::found::current()
        .by_name_blocked(&super::found::NVRTC_NAMES)
        .is_some()
}

/// The refusal that forbids opening the driver by name, if any.
pub fn driver_by_name_blocked() -> Option<super::found::Refused> {
    super::found::current()
        .by_name_blocked(&super::found::DRIVER_NAMES)
        .cloned()
}

/// Makes the driver library loadable by name if it sits in a known folder
/// (WSL2 keeps it in `/usr/lib/wsl/lib`). Idempotent.
pub fn preload_driver() -> bool {
    static LOADED: OnceLock<Option<libloading::Library>> = OnceLock::new();
    LOADED
        .get_or_init(|| {
            if driver_by_name_blocked().is_some() {
                return None;
            }
            load(Path::new("libcuda.so.1")).or_else(|| {
                super::found::current()
                    .driver
                    .as_ref()
                    .and_then(|found| load(&found.library))
            })
        })
        .is_some()
}

/// The folders flashprof looks in, for error messages.
pub fn searched_folders() -> String {
    super::found::current().searched_folders().join(", ")
}
