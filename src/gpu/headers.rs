//! Where the CUDA headers of the 16- and 8-bit float types are: `cuda_fp16.h`,
//! `cuda_bf16.h` and `cuda_fp8.h`.
//!
//! NVRTC ships none of them. They come from a CUDA toolkit's `include/` or
//! from NVIDIA's `nvidia-cuda-runtime` wheel (`nvidia/cu13/include`), and
//! they are looked for beside every library folder [`super::found`]
//! searches, so they obey the same rules: never the working folder's
//! ancestors, and only a folder whose headers (and every folder above them)
//! belong to this user or root and can be written by no one else
//! ([`super::found::trust`]). A kernel of the NVRTC in use must be compiled
//! with headers of the same CUDA major (a 12.x `cuda_fp8.h` under NVRTC 13
//! is refused and `doctor` says so).
//!
//! When they are found, NVRTC gets `-I` with their folder and the worker's
//! sandbox may read it; the include policy (`lab::source::includes`) lets a
//! submission name exactly these three. When they are not, `cuda_fp16.h`
//! keeps its stand-in (the fp32 labs include it) and a file that includes
//! `cuda_bf16.h` or `cuda_fp8.h` is refused with [`HEADERS_FIX`].

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::found::{self, Context, Origin, Place, Refused, Searched};
pub use crate::lab::source::CUDA_TYPE_HEADERS;

/// The one step that gives a machine the headers (the 13.0 line, as NVRTC):
/// the fetch installs the runtime wheel that holds them beside NVRTC.
/// By hand, only inside a virtualenv, as [`super::found::NVRTC_PIP`] says why.
pub const HEADERS_FIX: &str =
    "flashprof fetch-cuda (or, inside a virtualenv that is active when flashprof runs, pip install 'nvidia-cuda-runtime==13.0.*')";

/// The folder the caller found, handed to the worker so both use the same one.
pub const INCLUDE_VARIABLE: &str = "FLASHPROF_CUDA_INCLUDE";

/// Headers that the three include under NVRTC (or may, in another release),
/// checked like them when present: NVRTC reads whatever `-I` folder holds them.
const COMPANIONS: [&str; 8] = [
    "cuda_fp16.hpp",
    "cuda_bf16.hpp",
    "cuda_fp8.hpp",
    "vector_types.h",
    "vector_functions.h",
    "vector_functions.hpp",
    "device_types.h",
    VERSION_HEADER,
];

/// The header whose `CUDART_VERSION` names the folder's CUDA release.
const VERSION_HEADER: &str = "cuda_runtime_api.h";

/// A folder holding all three headers, trusted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CudaHeaders {
    /// The folder, its links resolved (what `-I` and the sandbox get).
    pub folder: PathBuf,
    /// The CUDA major of `CUDART_VERSION` (13 for 13000).
    pub major: u32,
    /// `CUDART_VERSION` itself (13000), for messages.
    pub version: u32,
    pub origin: Origin,
}

impl std::fmt::Display for CudaHeaders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CUDA {}.{} headers in {} (via {})",
            self.version / 1000,
            self.version % 1000 / 10,
            crate::display::line_for_display(&self.folder.display().to_string()),
            self.origin
        )
    }
}

/// What a search found.
#[derive(Debug, Clone, Default)]
pub struct HeaderSearch {
    /// The first trusted folder of the wanted CUDA major.
    pub found: Option<CudaHeaders>,
    /// Trusted folders of another major, not used (doctor names them).
    pub other_major: Vec<CudaHeaders>,
    /// Header files found but not trusted, with the reason.
    pub refused: Vec<Refused>,
    /// Every folder looked in, in order.
    pub searched: Vec<Place>,
}

/// The include folders to search: [`INCLUDE_VARIABLE`], then the `include`
/// folder that goes with each library folder, in the library search's order.
pub fn include_places(context: &Context, library_places: &[Place]) -> Vec<Place> {
    let mut places: Vec<Place> = Vec::new();
    let mut add = |folder: PathBuf, origin: Origin| {
        let place = Place { folder, origin };
        if !places.contains(&place) {
            places.push(place);
        }
    };
    if let Some(value) = context.var(INCLUDE_VARIABLE) {
        add(PathBuf::from(value), Origin::Variable(INCLUDE_VARIABLE));
    }
    for place in library_places {
        if let Some(folder) = include_beside(&place.folder) {
            add(folder, place.origin);
        }
    }
    places
}

/// Where the headers sit next to a library folder: the wheels' `cu13/lib`
/// beside `cu13/include`, the 12.x per-package wheels' in `cuda_runtime/`,
/// a toolkit's or conda's `lib`/`lib64` beside `include`.
fn include_beside(lib: &Path) -> Option<PathBuf> {
    let parent = lib.parent()?;
    let package = parent.file_name()?.to_str()?;
    if package == "cuda_nvrtc" || package == "cuda_cupti" {
        return Some(parent.with_file_name("cuda_runtime").join("include"));
    }
    if lib.ends_with("extras/CUPTI/lib64") {
        return None; // CUPTI's own headers; the toolkit's are beside lib64
    }
    match lib.file_name()?.to_str()? {
        "lib" | "lib64" => Some(parent.join("include")),
        _ => None,
    }
}

/// Searches `places` for a trusted folder holding all three headers of CUDA
/// major `major` (the NVRTC in use; `None` when there is none: any major).
pub fn search(places: &[Place], major: Option<u32>) -> HeaderSearch {
    let mut result = HeaderSearch {
        searched: places.to_vec(),
        ..HeaderSearch::default()
    };
    for place in places {
        let Some(headers) = trusted_folder(place, &mut result.refused) else {
            continue;
        };
        if major.is_none_or(|m| m == headers.major) {
            if result.found.is_none() {
                result.found = Some(headers);
            }
        } else if !result.other_major.contains(&headers) {
            result.other_major.push(headers);
        }
    }
    result
}

/// The headers in `place`, when all three are there and every header file
/// NVRTC may read from the folder is trusted.
fn trusted_folder(place: &Place, refused: &mut Vec<Refused>) -> Option<CudaHeaders> {
    if !CUDA_TYPE_HEADERS
        .iter()
        .all(|name| place.folder.join(name).is_file())
    {
        return None;
    }
    let present = COMPANIONS
        .iter()
        .filter(|name| place.folder.join(name).is_file());
    for name in CUDA_TYPE_HEADERS.iter().chain(present) {
        let file = place.folder.join(name);
        if let Err(reason) = found::trust(&file) {
            let library = std::fs::canonicalize(&file).unwrap_or(file);
            if !refused.iter().any(|r| r.library == library) {
                refused.push(Refused {
                    library,
                    origin: place.origin,
                    reason,
                });
            }
            return None;
        }
    }
    let folder = std::fs::canonicalize(&place.folder).ok()?;
    let version = cudart_version(&folder.join(VERSION_HEADER))?;
    Some(CudaHeaders {
        folder,
        major: version / 1000,
        version,
        origin: place.origin,
    })
}

/// `#define CUDART_VERSION 13000` in `header`, as 13000.
fn cudart_version(header: &Path) -> Option<u32> {
    let text = std::fs::read_to_string(header).ok()?;
    text.lines().find_map(|line| {
        let rest = line.trim_start().strip_prefix('#')?.trim_start();
        let rest = rest.strip_prefix("define")?.trim_start();
        rest.strip_prefix("CUDART_VERSION")?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    })
}

impl HeaderSearch {
    /// This process's search: the library places of [`found::current`],
    /// for the major of the NVRTC it chose.
    fn for_process() -> Self {
        let context = Context::current();
        let libraries = found::current();
        let places = include_places(&context, &libraries.searched);
        search(&places, libraries.nvrtc.as_ref().map(|n| n.major))
    }

    /// The environment entry that tells the worker the folder (unless already told).
    pub fn worker_env(
        &self,
        context: &Context,
    ) -> Option<(std::ffi::OsString, std::ffi::OsString)> {
        let headers = self.found.as_ref()?;
        context
            .var(INCLUDE_VARIABLE)
            .is_none()
            .then(|| (INCLUDE_VARIABLE.into(), headers.folder.clone().into()))
    }
}

static CURRENT: Searched<HeaderSearch> = Searched::new(HeaderSearch::for_process);

/// This process's headers: the last search (the first call makes it).
pub fn current() -> Arc<HeaderSearch> {
    CURRENT.get()
}

/// Searches again beside the libraries of [`found::current`] (so after
/// [`found::search_again`]) and keeps the answer.
pub fn search_again() -> Arc<HeaderSearch> {
    CURRENT.again()
}

/// Why a file that includes `header` cannot be compiled here, with the fix.
pub fn missing_message(header: &str) -> String {
    format!(
        "`{header}` comes from the CUDA headers (NVRTC ships none), and no trusted folder of \
         them matching this NVRTC was found. Fix: {HEADERS_FIX}  (or set {INCLUDE_VARIABLE} to \
         a CUDA include folder; `flashprof doctor` lists where flashprof looked and what it refused)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chmod(path: &Path, mode: u32) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    /// A fake wheel's include folder of CUDA `version` under `site`.
    fn wheel(site: &Path, version: u32) -> PathBuf {
        let include = site.join("nvidia/cu13/include");
        std::fs::create_dir_all(&include).unwrap();
        for name in CUDA_TYPE_HEADERS.iter().chain(&["cuda_fp8.hpp"]) {
            std::fs::write(include.join(name), "#pragma once\n").unwrap();
        }
        std::fs::write(
            include.join(VERSION_HEADER),
            format!("#pragma once\n#define CUDART_VERSION  {version}\n"),
        )
        .unwrap();
        include
    }

    fn places_of(site: &Path) -> Vec<Place> {
        let libraries = found::wheel_folders(site, Origin::Python);
        include_places(&Context::default(), &libraries)
    }

    #[test]
    fn the_include_folder_beside_each_library_layout() {
        for (lib, include) in [
            ("/s/nvidia/cu13/lib", Some("/s/nvidia/cu13/include")),
            (
                "/s/nvidia/cuda_nvrtc/lib",
                Some("/s/nvidia/cuda_runtime/include"),
            ),
            ("/usr/local/cuda/lib64", Some("/usr/local/cuda/include")),
            (
                "/usr/local/cuda/targets/x86_64-linux/lib",
                Some("/usr/local/cuda/targets/x86_64-linux/include"),
            ),
            ("/usr/local/cuda/extras/CUPTI/lib64", None),
            ("/usr/lib/wsl/lib", Some("/usr/lib/wsl/include")),
        ] {
            let beside = include_beside(Path::new(lib)).map(|p| p.display().to_string());
            assert_eq!(beside.as_deref(), include, "{lib}");
        }
    }

    #[test]
    fn a_wheels_headers_are_found_with_their_version() {
        let site = tempfile::tempdir().unwrap();
        let include = wheel(site.path(), 13000);
        let result = search(&places_of(site.path()), Some(13));
        let found = result.found.expect("found");
        assert_eq!(found.folder, std::fs::canonicalize(&include).unwrap());
        assert_eq!((found.major, found.version), (13, 13000));
        assert!(
            found.to_string().starts_with("CUDA 13.0 headers in "),
            "{found}"
        );
        assert!(result.refused.is_empty());
    }

    #[test]
    fn headers_of_another_cuda_major_are_kept_apart() {
        let site = tempfile::tempdir().unwrap();
        wheel(site.path(), 12080);
        let result = search(&places_of(site.path()), Some(13));
        assert!(result.found.is_none());
        assert_eq!(result.other_major[0].major, 12);
        assert!(search(&places_of(site.path()), None).found.is_some());
    }

    #[test]
    fn a_header_folder_writable_by_others_is_refused_with_the_reason() {
        let site = tempfile::tempdir().unwrap();
        let include = wheel(site.path(), 13000);
        chmod(&include, 0o777);
        let result = search(&places_of(site.path()), Some(13));
        assert!(result.found.is_none());
        let refusal = &result.refused[0];
        assert_eq!(
            refusal.reason,
            format!("{}: writable by group and others", include.display())
        );
        // A companion header that others can write spoils the folder too.
        chmod(&include, 0o755);
        chmod(&include.join("cuda_fp8.hpp"), 0o646);
        let result = search(&places_of(site.path()), Some(13));
        assert!(result.found.is_none());
        assert!(result.refused[0]
            .reason
            .ends_with("cuda_fp8.hpp: writable by others"));
        chmod(&include.join("cuda_fp8.hpp"), 0o644);
        assert!(search(&places_of(site.path()), Some(13)).found.is_some());
    }

    #[test]
    fn a_folder_missing_one_header_is_not_a_header_folder() {
        let site = tempfile::tempdir().unwrap();
        let include = wheel(site.path(), 13000);
        std::fs::remove_file(include.join("cuda_fp8.h")).unwrap();
        let result = search(&places_of(site.path()), Some(13));
        assert!(result.found.is_none() && result.refused.is_empty());
    }

    #[test]
    fn the_variable_comes_first_and_the_worker_is_told() {
        let named = tempfile::tempdir().unwrap();
        let site = tempfile::tempdir().unwrap();
        let first = wheel(named.path(), 13000);
        wheel(site.path(), 13000);
        let context = Context {
            vars: vec![(INCLUDE_VARIABLE.into(), first.clone().into())],
            ..Context::default()
        };
        let libraries = found::wheel_folders(site.path(), Origin::Python);
        let result = search(&include_places(&context, &libraries), Some(13));
        let found = result.found.clone().unwrap();
        assert_eq!(found.origin, Origin::Variable(INCLUDE_VARIABLE));
        assert_eq!(result.worker_env(&context), None);
        let (name, value) = result.worker_env(&Context::default()).unwrap();
        assert_eq!(name, INCLUDE_VARIABLE);
        assert_eq!(PathBuf::from(value), found.folder);
    }

    #[test]
    fn the_missing_message_says_the_fix() {
        let message = missing_message("cuda_fp8.h");
        assert!(message.contains(HEADERS_FIX) && message.contains("flashprof doctor"));
    }
}
