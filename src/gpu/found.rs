//! Where NVIDIA's libraries are on this machine: NVRTC (13.x, else 12.x),
//! CUPTI and the driver, looked for where people actually have them.
//!
//! In order: flashprof's and CUDA's own variables (`FLASHPROF_CUDA_LIB`,
//! `FLASHPROF_CUPTI_PATH`, `CUDA_HOME`, `CUDA_PATH`), `LD_LIBRARY_PATH`, a
//! checkout's `.cuda-wheels/` (beside the binary, never the working folder:
//! a TA works inside students' folders), the folder `flashprof fetch-cuda`
//! installs into ([`fetched_folder`], in the user's cache), Python's site-packages (`PYTHONPATH`, the active virtualenv or conda
//! environment, the user's site, pyenv, the system's), conda installs, CUDA
//! toolkits, and WSL2's driver folder. Each site-packages is searched in both
//! wheel layouts: `nvidia/cu13/lib` (the 13.x wheels) and
//! `nvidia/cuda_nvrtc/lib`, `nvidia/cuda_cupti/lib` (the 12.x wheels).
//!
//! Only when none of those holds NVRTC is Python asked for its own paths,
//! under a timeout. The answer is kept for the process ([`current`]) until
//! [`search_again`] replaces it (the TUI's `r`, after a fetch or a `pip
//! install` in another terminal). Nothing here loads a library;
//! [`crate::gpu::libraries`] does.
//!
//! A library is only ever chosen when it is trusted ([`trust`]): the file
//! and every folder from it up to `/` belong to this process's user or to
//! root and can be written by no one else (a sticky root-owned folder such
//! as `/tmp` may be above it, never hold it). Anything else is kept in
//! [`Libraries::refused`] with the reason, for `flashprof doctor`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::sys::effective_uid;
use crate::sys::folder::flashprof_cache;
use crate::sys::trust::untrusted_because;

/// The one step that gives a machine with Python but no CUDA a compiler:
/// flashprof's own fetch ([`crate::gpu::fetch`]).
pub const NVRTC_FIX: &str = crate::gpu::fetch::COMMAND;
/// The same done by hand with pip. Only inside a virtualenv: `--user`
/// fails there, and a system Python marked externally managed refuses any
/// install of its own (the fetch uses `--target`, which neither refuses).
/// flashprof finds a virtualenv's wheels when it is the one active (or the
/// one flashprof itself was installed into).
pub const NVRTC_PIP: &str =
    "inside a virtualenv that is active when flashprof runs, pip install 'nvidia-cuda-nvrtc==13.0.*'";
/// The same for the hardware counters: the fetch installs CUPTI beside NVRTC.
pub const CUPTI_FIX: &str = "flashprof fetch-cuda (or, inside a virtualenv that is active when flashprof runs, pip install 'nvidia-cuda-cupti==13.0.*')";

/// The variable naming NVRTC's folder (searched first; how a worker is told).
pub const NVRTC_VARIABLE: &str = "FLASHPROF_CUDA_LIB";

/// How long Python may take to name its paths.
const PYTHON_TIMEOUT: Duration = Duration::from_secs(3);

/// NVRTC majors flashprof can drive, preferred first.
const NVRTC_MAJORS: [u32; 2] = [13, 12];

/// Why a folder was searched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Named by an environment variable.
    Variable(&'static str),
    /// On `LD_LIBRARY_PATH`.
    LoaderPath,
    /// A checkout's `.cuda-wheels/` (what `scripts/test.sh` installs).
    Checkout,
    /// The folder `flashprof fetch-cuda` installs into ([`fetched_folder`]).
    Fetched,
    /// A Python site-packages (pip wheels).
    Python,
    /// A conda environment.
    Conda,
    /// A CUDA toolkit install.
    Toolkit,
    /// The driver's folder under WSL2.
    Wsl,
    /// The dynamic loader's own search (the ld.so cache).
    System,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Variable(name) => write!(f, "${name}"),
            Self::LoaderPath => f.write_str("LD_LIBRARY_PATH"),
            Self::Checkout => f.write_str("the checkout's .cuda-wheels"),
            Self::Fetched => f.write_str("flashprof fetch-cuda's folder"),
            Self::Python => f.write_str("Python site-packages"),
            Self::Conda => f.write_str("conda"),
            Self::Toolkit => f.write_str("CUDA toolkit"),
            Self::Wsl => f.write_str("WSL2 driver folder"),
            Self::System => f.write_str("the loader's default path"),
        }
    }
}

/// One folder to look in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub folder: PathBuf,
    pub origin: Origin,
}

/// A library found in a folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The library file, its links resolved (so the sandbox can allow its real folder).
    pub library: PathBuf,
    /// For NVRTC: the builtins library it opens by name at compile time.
    pub companion: Option<PathBuf>,
    /// The major version in the file name (13, 12).
    pub major: u32,
    pub origin: Origin,
}

/// A library file that was not chosen because it is not trusted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The file as found (its links resolved when they could be).
    pub library: PathBuf,
    pub origin: Origin,
    /// Why, naming the file or folder at fault (already neutralised for display).
    pub reason: String,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "refused {} (via {}): {}",
            crate::display::line_for_display(&self.library.display().to_string()),
            self.origin,
            self.reason
        )
    }
}

/// The names a by-name open of the driver may resolve (cudarc tries more than one).
pub const DRIVER_NAMES: [&str; 2] = ["libcuda.so.1", "libcuda.so"];
/// The same for NVRTC.
pub const NVRTC_NAMES: [&str; 3] = ["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"];
/// The same for CUPTI.
pub const CUPTI_NAMES: [&str; 2] = ["libcupti.so.13", "libcupti.so"];

/// `library` with its links resolved, if it and every folder from it up
/// to `/` are trusted by this process's user (`sys::trust::untrusted_because`); else
/// the reason, naming the path at fault (neutralised for display).
pub fn trust(library: &Path) -> Result<PathBuf, String> {
    use std::os::unix::fs::MetadataExt;
    let shown = |p: &Path| crate::display::line_for_display(&p.display().to_string()).into_owned();
    let euid =
        effective_uid().ok_or("this process's user could not be read from /proc/self/status")?;
    let real = std::fs::canonicalize(library).map_err(|e| format!("{}: {e}", shown(library)))?;
    for (index, path) in real.ancestors().enumerate() {
        let meta = std::fs::symlink_metadata(path).map_err(|e| format!("{}: {e}", shown(path)))?;
        if index == 0 && !meta.is_file() {
            return Err(format!("{}: not a regular file", shown(path)));
        }
        if let Some(why) =
            untrusted_because(meta.uid(), meta.mode(), meta.is_dir(), index == 1, euid)
        {
            return Err(format!("{}: {why}", shown(path)));
        }
    }
    Ok(real)
}

/// What the dynamic loader would open for a bare `name` from
/// `LD_LIBRARY_PATH` (an empty or relative entry counts from the working
/// folder, as the loader does), when that file is not trusted.
pub fn loader_path_refusal(context: &Context, name: &str) -> Option<Refused> {
    let value = context.var("LD_LIBRARY_PATH")?;
    let cwd = context.cwd.clone().unwrap_or_default();
    std::env::split_paths(value).find_map(|entry| {
        let folder = match entry.is_absolute() {
            true => entry,
            false => cwd.join(entry),
        };
        let library = folder.join(name);
        if !library.is_file() {
            return None;
        }
        // The first entry holding the name is the one the loader takes.
        Some(trust(&library).err().map(|reason| Refused {
            library,
            origin: Origin::LoaderPath,
            reason,
        }))
    })?
}

impl Found {
    /// The folder that really holds the library.
    pub fn folder(&self) -> &Path {
        self.library.parent().unwrap_or(Path::new("/"))
    }
}

/// What a search reads from the process: its variables, working folder and
/// binary. Tests build one by hand.
#[derive(Debug, Clone, Default)]
pub struct Context {
    pub vars: Vec<(String, OsString)>,
    pub cwd: Option<PathBuf>,
    pub exe: Option<PathBuf>,
    /// Whether Python may be asked for its paths when scanning finds no NVRTC.
    pub ask_python: bool,
}

impl Context {
    /// This process's context.
    pub fn current() -> Self {
        Self {
            vars: std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v)))
                .collect(),
            cwd: std::env::current_dir().ok(),
            exe: std::env::current_exe().ok(),
            ask_python: true,
        }
    }

    /// A variable's value, unless unset or empty.
    pub fn var(&self, name: &str) -> Option<&OsString> {
        self.vars
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
            .filter(|v| !v.is_empty())
    }

    fn home(&self) -> Option<PathBuf> {
        self.var("HOME").map(PathBuf::from)
    }
}

/// Everything found, for one context.
#[derive(Debug, Clone, Default)]
pub struct Libraries {
    pub nvrtc: Option<Found>,
    pub cupti: Option<Found>,
    /// libcupti.so.12 when no .13 was found: reported, not used.
    pub cupti_12: Option<Found>,
    pub driver: Option<Found>,
    /// Every folder looked in, in order.
    pub searched: Vec<Place>,
    /// Whether Python was asked for its paths (scanning found no NVRTC).
    pub python_asked: bool,
    /// Library files found but not trusted, in the order met.
    pub refused: Vec<Refused>,
    /// Untrusted files that a by-name open (the loader's own search through
    /// `LD_LIBRARY_PATH`) would take: such an open must not be made.
    pub by_name_refused: Vec<Refused>,
}

impl Libraries {
    /// Searches for everything in `context`.
    pub fn search(context: &Context) -> Self {
        let mut refused = Vec::new();
        let mut places = places(context);
        let mut nvrtc = nvrtc_in(&places, &mut refused);
        let mut python_asked = false;
        if nvrtc.is_none() && context.ask_python {
            python_asked = true;
            let asked: Vec<Place> = python_paths()
                .iter()
                .flat_map(|site| wheel_folders(site, Origin::Python))
                .filter(|p| !places.contains(p))
                .collect();
            nvrtc = nvrtc_in(&asked, &mut refused);
            places.extend(asked);
        }
        let cupti = file_in(&places, "libcupti.so.13", 13, &mut refused);
        let cupti_12 = match cupti {
            Some(_) => None,
            None => file_in(&places, "libcupti.so.12", 12, &mut refused),
        };
        let driver = file_in(&places, "libcuda.so.1", 1, &mut refused);
        let mut by_name_refused: Vec<Refused> = Vec::new();
        for name in DRIVER_NAMES.iter().chain(&NVRTC_NAMES).chain(&CUPTI_NAMES) {
            if let Some(refusal) = loader_path_refusal(context, name) {
                by_name_refused.push(refusal);
            }
        }
        Self {
            nvrtc,
            cupti,
            cupti_12,
            driver,
            searched: places,
            python_asked,
            refused,
            by_name_refused,
        }
    }

    /// Every refusal once, for `flashprof doctor`.
    pub fn refusals(&self) -> Vec<&Refused> {
        let mut all: Vec<&Refused> = Vec::new();
        for refusal in self.refused.iter().chain(&self.by_name_refused) {
            if !all.iter().any(|r| r.library == refusal.library) {
                all.push(refusal);
            }
        }
        all
    }

    /// The refusal that forbids opening any of `names` by bare name.
    pub fn by_name_blocked(&self, names: &[&str]) -> Option<&Refused> {
        self.by_name_refused.iter().find(|r| {
            r.library
                .file_name()
                .is_some_and(|n| names.iter().any(|name| n == *name))
        })
    }

    /// The folders searched, for messages.
    pub fn searched_folders(&self) -> Vec<String> {
        self.searched
            .iter()
            .map(|p| p.folder.display().to_string())
            .collect()
    }

    /// Environment for a worker process, so it loads the same libraries
    /// without searching again and its sandbox may read their folders:
    /// `FLASHPROF_CUDA_LIB` and `FLASHPROF_CUPTI_PATH`, each only when not
    /// already set.
    pub fn worker_env(&self, context: &Context) -> Vec<(OsString, OsString)> {
        let mut env = Vec::new();
        if context.var(NVRTC_VARIABLE).is_none() {
            if let Some(nvrtc) = &self.nvrtc {
                env.push((NVRTC_VARIABLE.into(), nvrtc.folder().into()));
            }
        }
        let cupti_var = crate::gpu::cupti::PATH_VARIABLE;
        if context.var(cupti_var).is_none() {
            if let Some(cupti) = &self.cupti {
                env.push((cupti_var.into(), cupti.folder().into()));
            }
        }
        env
    }
}

/// A process-wide search: made at first use, kept, and made again only
/// when asked ([`Self::again`]). Holders of an earlier answer keep it whole:
/// a search is replaced, never changed in place.
pub struct Searched<T> {
    slot: Mutex<Option<Arc<T>>>,
    search: fn() -> T,
}

impl<T> Searched<T> {
    pub const fn new(search: fn() -> T) -> Self {
        Self {
            slot: Mutex::new(None),
            search,
        }
    }

    /// The kept answer, searching first if there is none. The lock is held
    /// through a search, so callers racing at first use search once.
    pub fn get(&self) -> Arc<T> {
        let mut slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(slot.get_or_insert_with(|| Arc::new((self.search)())))
    }

    /// A new search, kept from now on.
    pub fn again(&self) -> Arc<T> {
        let mut slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        let fresh = Arc::new((self.search)());
        *slot = Some(Arc::clone(&fresh));
        fresh
    }
}

static CURRENT: Searched<Libraries> = Searched::new(|| Libraries::search(&Context::current()));

/// This process's libraries: the last search (the first call makes it).
pub fn current() -> Arc<Libraries> {
    CURRENT.get()
}

/// Searches this process's context again and keeps the answer, so what was
/// installed since (a fetch, a `pip install` in another terminal) is found.
/// A library this process already loaded stays loaded: the new answer is
/// for what it starts next (a worker, told by [`Libraries::worker_env`]).
pub fn search_again() -> Arc<Libraries> {
    CURRENT.again()
}

/// The one-line message for a machine without NVRTC, with the command that fixes it.
pub fn nvrtc_missing_message() -> String {
    format!(
        "NVRTC (libnvrtc.so.13 or .12) was not found. Fix: {NVRTC_FIX} (it installs NVIDIA's \
         wheels with pip into flashprof's own folder; or by hand: {NVRTC_PIP}; or set \
         FLASHPROF_CUDA_LIB to the folder holding it; `flashprof doctor` lists where flashprof \
         looked and what it refused)"
    )
}

/// Where `flashprof fetch-cuda` installs NVIDIA's wheels: `cuda-13.0` in
/// flashprof's folder of the user's cache (`$XDG_CACHE_HOME`, else
/// `~/.cache`); `None` without an absolute cache folder or a home. Its
/// libraries are used only when trusted, like any other.
pub fn fetched_folder(context: &Context) -> Option<PathBuf> {
    let cache = flashprof_cache(
        context.var("XDG_CACHE_HOME").map(OsString::as_os_str),
        context.var("HOME").map(OsString::as_os_str),
    )?;
    Some(cache.join(format!("cuda-{}", crate::gpu::fetch::SERIES)))
}

/// The folders to search, in order, without asking Python.
pub fn places(context: &Context) -> Vec<Place> {
    let mut places = Vec::new();
    let mut add = |folder: PathBuf, origin: Origin| {
        let place = Place { folder, origin };
        if !places.contains(&place) {
            places.push(place);
        }
    };
    for var in [NVRTC_VARIABLE, "CUDA_HOME", "CUDA_PATH"] {
        if let Some(value) = context.var(var) {
            for folder in toolkit_folders(Path::new(value)) {
                add(folder, Origin::Variable(var));
            }
            add(PathBuf::from(value), Origin::Variable(var));
        }
    }
    if let Some(value) = context.var(crate::gpu::cupti::PATH_VARIABLE) {
        let path = PathBuf::from(value);
        let folder = match path.is_dir() {
            true => path,
            false => path.parent().map(Path::to_path_buf).unwrap_or_default(),
        };
        add(folder, Origin::Variable(crate::gpu::cupti::PATH_VARIABLE));
    }
    if let Some(value) = context.var("LD_LIBRARY_PATH") {
        for folder in std::env::split_paths(value).filter(|f| f.is_absolute()) {
            add(folder, Origin::LoaderPath);
        }
    }
    // Beside the binary only (a checkout's target/*/flashprof finds the
    // checkout's wheels): never the working folder's ancestors, which a
    // TA shares with the students whose folders they work in. What is
    // found here is still only used when trusted.
    if let Some(exe) = &context.exe {
        let exe = std::fs::canonicalize(exe).unwrap_or_else(|_| exe.clone());
        for ancestor in exe.ancestors().skip(1) {
            let wheels = ancestor.join(".cuda-wheels");
            if wheels.is_dir() {
                for place in wheel_folders(&wheels, Origin::Checkout) {
                    add(place.folder, place.origin);
                }
            }
        }
    }
    if let Some(fetched) = fetched_folder(context) {
        for place in wheel_folders(&fetched, Origin::Fetched) {
            add(place.folder, place.origin);
        }
    }
    for site in site_packages(context) {
        for place in wheel_folders(&site, Origin::Python) {
            add(place.folder, place.origin);
        }
    }
    for prefix in conda_prefixes(context) {
        add(prefix.join("lib"), Origin::Conda);
        add(prefix.join("targets/x86_64-linux/lib"), Origin::Conda);
        for site in python_dirs(&prefix.join("lib")) {
            for place in wheel_folders(&site, Origin::Conda) {
                add(place.folder, place.origin);
            }
        }
    }
    let mut toolkits = vec![PathBuf::from("/usr/local/cuda")];
    let mut versioned = children(Path::new("/usr/local"), "cuda-");
    // Newest first: cuda-13.0 before cuda-12.8.
    versioned.sort_by(|a, b| b.cmp(a));
    toolkits.extend(versioned);
    toolkits.push(PathBuf::from("/opt/cuda"));
    for toolkit in toolkits {
        for folder in toolkit_folders(&toolkit) {
            add(folder, Origin::Toolkit);
        }
    }
    add(PathBuf::from("/usr/local/nvidia/lib64"), Origin::Toolkit);
    add(PathBuf::from("/usr/lib/wsl/lib"), Origin::Wsl);
    places
}

/// Where a toolkit rooted at `base` keeps its libraries.
fn toolkit_folders(base: &Path) -> [PathBuf; 3] {
    [
        base.join("targets/x86_64-linux/lib"),
        base.join("lib64"),
        base.join("extras/CUPTI/lib64"),
    ]
}

/// The library folders of NVIDIA's wheels under one site-packages (or a
/// `pip --target` folder): the 13.x layout, then the 12.x per-package one.
pub fn wheel_folders(site: &Path, origin: Origin) -> Vec<Place> {
    [
        "nvidia/cu13/lib",
        "nvidia/cuda_nvrtc/lib",
        "nvidia/cuda_cupti/lib",
        "nvidia/cu12/lib",
    ]
    .iter()
    .map(|sub| Place {
        folder: site.join(sub),
        origin,
    })
    .collect()
}

/// Site-packages folders found without running Python.
fn site_packages(context: &Context) -> Vec<PathBuf> {
    let mut sites = Vec::new();
    // Installed from the wheel, the binary is VENV/bin/flashprof and its
    // NVRTC sits in VENV's site-packages, also when the virtualenv is not
    // activated (pipx and `uv tool` link it from ~/.local/bin).
    if let Some(venv) = own_virtualenv(context) {
        sites.extend(python_dirs(&venv.join("lib")));
    }
    if let Some(value) = context.var("PYTHONPATH") {
        sites.extend(std::env::split_paths(value).filter(|f| f.is_absolute()));
    }
    if let Some(venv) = context.var("VIRTUAL_ENV") {
        sites.extend(python_dirs(&Path::new(venv).join("lib")));
    }
    if let Some(home) = context.home() {
        sites.extend(python_dirs(&home.join(".local/lib")));
        for version in children(&home.join(".pyenv/versions"), "") {
            sites.extend(python_dirs(&version.join("lib")));
        }
    }
    for lib in ["/usr/local/lib", "/usr/lib", "/usr/lib64"] {
        sites.extend(python_dirs(Path::new(lib)));
    }
    sites.push(PathBuf::from("/usr/lib/python3/dist-packages"));
    sites
}

/// The virtualenv whose `bin/` holds the running binary (it has a
/// `pyvenv.cfg` beside that folder), links followed.
fn own_virtualenv(context: &Context) -> Option<PathBuf> {
    let exe = context.exe.as_ref()?;
    let exe = std::fs::canonicalize(exe).unwrap_or_else(|_| exe.clone());
    let venv = exe.parent()?.parent()?;
    venv.join("pyvenv.cfg")
        .is_file()
        .then(|| venv.to_path_buf())
}

/// `lib/python3.*/{site,dist}-packages` under one `lib` folder.
fn python_dirs(lib: &Path) -> Vec<PathBuf> {
    let mut versions = children(lib, "python3");
    versions.sort_by(|a, b| b.cmp(a));
    versions
        .into_iter()
        .flat_map(|v| [v.join("site-packages"), v.join("dist-packages")])
        .filter(|d| d.is_dir())
        .collect()
}

/// The active conda environment, then the usual conda installs and their environments.
fn conda_prefixes(context: &Context) -> Vec<PathBuf> {
    let mut prefixes: Vec<PathBuf> = context
        .var("CONDA_PREFIX")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    let mut bases = vec![
        PathBuf::from("/opt/conda"),
        PathBuf::from("/opt/miniconda3"),
    ];
    if let Some(home) = context.home() {
        for name in [
            "miniconda3",
            "anaconda3",
            "miniforge3",
            "mambaforge",
            "micromamba",
            ".conda",
        ] {
            bases.push(home.join(name));
        }
    }
    for base in bases.into_iter().filter(|b| b.is_dir()) {
        prefixes.extend(children(&base.join("envs"), ""));
        prefixes.push(base);
    }
    prefixes
}

/// Entries of `folder` whose names start with `prefix`, sorted; none when
/// the folder cannot be read.
pub(crate) fn children(folder: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(folder)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found
}

/// NVRTC: folders named by a variable first (whatever their version), then
/// 13.x anywhere, then 12.x anywhere; only a trusted one (with a trusted
/// builtins library, when it has one).
pub fn find_nvrtc(places: &[Place]) -> Option<Found> {
    nvrtc_in(places, &mut Vec::new())
}

/// [`find_nvrtc`], keeping what it refused.
fn nvrtc_in(places: &[Place], refused: &mut Vec<Refused>) -> Option<Found> {
    let (named, others): (Vec<&Place>, Vec<&Place>) = places
        .iter()
        .partition(|p| matches!(p.origin, Origin::Variable(_)));
    let refused = std::cell::RefCell::new(refused);
    let in_place = |place: &Place, major: u32| {
        let library = trusted_in(place, &format!("libnvrtc.so.{major}"), &refused)?;
        let companion = match builtins_in(&place.folder, major) {
            Some(builtins) => match trust(&builtins) {
                Ok(real) => Some(real),
                Err(reason) => {
                    note(
                        &refused,
                        Refused {
                            library: builtins,
                            origin: place.origin,
                            reason,
                        },
                    );
                    return None;
                }
            },
            None => None,
        };
        Some(Found {
            library,
            companion,
            major,
            origin: place.origin,
        })
    };
    named
        .iter()
        .find_map(|p| NVRTC_MAJORS.iter().find_map(|&m| in_place(p, m)))
        .or_else(|| {
            NVRTC_MAJORS
                .iter()
                .find_map(|&m| others.iter().find_map(|p| in_place(p, m)))
        })
}

/// `libnvrtc-builtins.so.MAJOR.MINOR` in `folder` (the name NVRTC opens), resolved.
fn builtins_in(folder: &Path, major: u32) -> Option<PathBuf> {
    let prefix = format!("libnvrtc-builtins.so.{major}.");
    let mut names: Vec<String> = std::fs::read_dir(folder)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&prefix))
        .collect();
    // The SONAME (`.so.13.0`) before fuller names (`.so.13.0.88`).
    names.sort_by_key(|n| (n.matches('.').count(), n.clone()));
    let path = folder.join(names.first()?);
    Some(std::fs::canonicalize(&path).unwrap_or(path))
}

/// Records a refusal once.
fn note(refused: &std::cell::RefCell<&mut Vec<Refused>>, refusal: Refused) {
    let mut refused = refused.borrow_mut();
    if !refused.iter().any(|r| r.library == refusal.library) {
        refused.push(refusal);
    }
}

/// `name` in `place`, its links resolved, if it is there and trusted; a
/// file that is there but not trusted is noted in `refused`.
fn trusted_in(
    place: &Place,
    name: &str,
    refused: &std::cell::RefCell<&mut Vec<Refused>>,
) -> Option<PathBuf> {
    let library = place.folder.join(name);
    if !library.is_file() {
        return None;
    }
    match trust(&library) {
        Ok(real) => Some(real),
        Err(reason) => {
            let library = std::fs::canonicalize(&library).unwrap_or(library);
            note(
                refused,
                Refused {
                    library,
                    origin: place.origin,
                    reason,
                },
            );
            None
        }
    }
}

/// The first `places` folder holding a trusted `name`.
fn file_in(places: &[Place], name: &str, major: u32, refused: &mut Vec<Refused>) -> Option<Found> {
    let refused = std::cell::RefCell::new(refused);
    places.iter().find_map(|place| {
        trusted_in(place, name, &refused).map(|library| Found {
            library,
            companion: None,
            major,
            origin: place.origin,
        })
    })
}

/// Python's own search path and site folders, or nothing if Python is
/// absent, fails or takes longer than [`PYTHON_TIMEOUT`]. Python runs in
/// flashprof's private folder, never in the caller's (a student's folder
/// would be first on its import path).
pub fn python_paths() -> Vec<PathBuf> {
    const SCRIPT: &str = "import site, sys\n\
        paths = list(sys.path)\n\
        try:\n    paths += site.getsitepackages()\nexcept Exception:\n    pass\n\
        try:\n    paths.append(site.getusersitepackages())\nexcept Exception:\n    pass\n\
        print('\\n'.join(p for p in paths if p))\n";
    let mut python = crate::sys::child::command("python3");
    python.args(["-c", SCRIPT]);
    let Ok(finished) = crate::sys::child::run_limited(python, PYTHON_TIMEOUT) else {
        return Vec::new();
    };
    finished
        .stdout
        .iter()
        .map(PathBuf::from)
        .filter(|p| p.is_absolute() && p.is_dir())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(path: &Path) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, b"").unwrap();
    }

    fn context(vars: &[(&str, &Path)]) -> Context {
        Context {
            vars: vars
                .iter()
                .map(|(k, v)| (k.to_string(), v.as_os_str().to_owned()))
                .collect(),
            ..Context::default()
        }
    }

    #[test]
    fn the_13_wheel_layout_on_pythonpath_is_found_with_its_builtins() {
        let site = tempfile::tempdir().unwrap();
        let lib = site.path().join("nvidia/cu13/lib");
        touch(&lib.join("libnvrtc.so.13"));
        touch(&lib.join("libnvrtc-builtins.so.13.0"));
        touch(&lib.join("libcupti.so.13"));
        let found = Libraries::search(&context(&[("PYTHONPATH", site.path())]));
        let nvrtc = found.nvrtc.expect("found");
        assert_eq!(nvrtc.major, 13);
        assert_eq!(nvrtc.origin, Origin::Python);
        let lib = std::fs::canonicalize(&lib).unwrap();
        assert_eq!(nvrtc.folder(), lib);
        assert_eq!(nvrtc.companion, Some(lib.join("libnvrtc-builtins.so.13.0")));
        assert_eq!(found.cupti.expect("cupti").folder(), lib);
    }

    #[test]
    fn the_virtualenv_holding_the_binary_is_searched_without_being_activated() {
        let root = tempfile::tempdir().unwrap();
        let venv = root.path().join("venv");
        touch(&venv.join("pyvenv.cfg"));
        touch(&venv.join("bin/flashprof"));
        let lib = venv.join("lib/python3.12/site-packages/nvidia/cu13/lib");
        touch(&lib.join("libnvrtc.so.13"));
        touch(&lib.join("libnvrtc-builtins.so.13.0"));
        // As pipx and `uv tool` install it: a link in another bin folder.
        touch(&root.path().join("home/.local/bin/.keep"));
        let link = root.path().join("home/.local/bin/flashprof");
        std::os::unix::fs::symlink(venv.join("bin/flashprof"), &link).unwrap();
        for exe in [venv.join("bin/flashprof"), link] {
            let found = Libraries::search(&Context {
                exe: Some(exe.clone()),
                ..context(&[("HOME", &root.path().join("home"))])
            });
            let nvrtc = found.nvrtc.unwrap_or_else(|| panic!("{}", exe.display()));
            assert_eq!(nvrtc.origin, Origin::Python);
            assert_eq!(nvrtc.folder(), std::fs::canonicalize(&lib).unwrap());
        }
        // The same layout without pyvenv.cfg is no virtualenv.
        std::fs::remove_file(venv.join("pyvenv.cfg")).unwrap();
        let found = Libraries::search(&Context {
            exe: Some(venv.join("bin/flashprof")),
            ..context(&[("HOME", &root.path().join("home"))])
        });
        assert!(found.nvrtc.is_none_or(|n| n.folder() != lib));
    }

    #[test]
    fn the_12_per_package_layout_is_found_and_13_is_preferred_elsewhere() {
        let twelve = tempfile::tempdir().unwrap();
        let lib12 = twelve.path().join("nvidia/cuda_nvrtc/lib");
        touch(&lib12.join("libnvrtc.so.12"));
        touch(&lib12.join("libnvrtc-builtins.so.12.4"));
        let home = tempfile::tempdir().unwrap();
        let ctx = context(&[("PYTHONPATH", twelve.path()), ("HOME", home.path())]);
        assert!(places(&ctx).iter().any(|p| p.folder == lib12));
        let only12 = [Place {
            folder: lib12.clone(),
            origin: Origin::Python,
        }];
        let nvrtc = find_nvrtc(&only12).expect("12 found");
        assert_eq!(nvrtc.major, 12);
        assert!(nvrtc
            .companion
            .unwrap()
            .ends_with("libnvrtc-builtins.so.12.4"));
        // A 13.x in the user's site beats a 12.x that comes earlier.
        let user13 = home.path().join("lib13");
        touch(&user13.join("libnvrtc.so.13"));
        let places = vec![
            Place {
                folder: lib12.clone(),
                origin: Origin::Python,
            },
            Place {
                folder: user13.clone(),
                origin: Origin::Python,
            },
        ];
        assert_eq!(find_nvrtc(&places).unwrap().major, 13);
    }

    #[test]
    fn a_variable_wins_whatever_its_version() {
        let named = tempfile::tempdir().unwrap();
        touch(&named.path().join("libnvrtc.so.12"));
        let site = tempfile::tempdir().unwrap();
        touch(&site.path().join("nvidia/cu13/lib/libnvrtc.so.13"));
        let ctx = context(&[
            ("FLASHPROF_CUDA_LIB", named.path()),
            ("PYTHONPATH", site.path()),
        ]);
        let nvrtc = Libraries::search(&ctx).nvrtc.unwrap();
        assert_eq!(nvrtc.major, 12);
        assert_eq!(nvrtc.origin, Origin::Variable("FLASHPROF_CUDA_LIB"));
    }

    #[test]
    fn a_checkout_and_user_site_and_conda_are_searched() {
        let root = tempfile::tempdir().unwrap();
        let checkout = root.path().join("repo");
        std::fs::create_dir_all(checkout.join("src/deep")).unwrap();
        std::fs::create_dir_all(checkout.join(".cuda-wheels")).unwrap();
        let home = root.path().join("home");
        std::fs::create_dir_all(home.join(".local/lib/python3.12/site-packages")).unwrap();
        let conda = root.path().join("env");
        std::fs::create_dir_all(checkout.join("target/debug")).unwrap();
        let ctx = Context {
            exe: Some(checkout.join("target/debug/flashprof")),
            ..context(&[("HOME", &home), ("CONDA_PREFIX", &conda)])
        };
        let folders: Vec<PathBuf> = places(&ctx).into_iter().map(|p| p.folder).collect();
        for expected in [
            checkout.join(".cuda-wheels/nvidia/cu13/lib"),
            home.join(".local/lib/python3.12/site-packages/nvidia/cu13/lib"),
            home.join(".local/lib/python3.12/site-packages/nvidia/cuda_nvrtc/lib"),
            conda.join("lib"),
            PathBuf::from("/usr/lib/wsl/lib"),
        ] {
            assert!(folders.contains(&expected), "{expected:?} in {folders:?}");
        }
    }

    fn chmod(path: &Path, mode: u32) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn a_planted_wheel_above_the_working_folder_is_never_searched_or_chosen() {
        let class = tempfile::tempdir().unwrap();
        let planted = class.path().join(".cuda-wheels/nvidia/cu13/lib");
        touch(&planted.join("libnvrtc.so.13"));
        touch(&planted.join("libcuda.so.1"));
        let alice = class.path().join("alice/deep");
        std::fs::create_dir_all(&alice).unwrap();
        for cwd in [class.path().to_path_buf(), alice] {
            let ctx = Context {
                cwd: Some(cwd.clone()),
                ..Context::default()
            };
            assert!(
                places(&ctx)
                    .iter()
                    .all(|p| !p.folder.starts_with(class.path())),
                "{cwd:?}"
            );
            let found = Libraries::search(&ctx);
            for chosen in [&found.nvrtc, &found.driver].into_iter().flatten() {
                assert!(!chosen.library.starts_with(class.path()), "{chosen:?}");
            }
        }
    }

    #[test]
    fn a_library_in_a_folder_others_can_write_is_refused_with_the_reason() {
        let site = tempfile::tempdir().unwrap();
        let lib = site.path().join("nvidia/cu13/lib");
        touch(&lib.join("libnvrtc.so.13"));
        touch(&lib.join("libcupti.so.13"));
        let ctx = context(&[("PYTHONPATH", site.path())]);
        let from_site = |found: &Libraries| {
            found
                .nvrtc
                .as_ref()
                .is_some_and(|n| n.library.starts_with(site.path()))
        };
        for (mode, why) in [
            (0o775, "writable by group"),
            (0o757, "writable by others"),
            (0o777, "writable by group and others"),
            // A sticky bit makes /tmp acceptable above a library, never as its folder.
            (0o1777, "writable by group and others"),
        ] {
            chmod(&lib, mode);
            let found = Libraries::search(&ctx);
            assert!(!from_site(&found), "{mode:o}");
            let refusal = found
                .refused
                .iter()
                .find(|r| r.library.ends_with("libnvrtc.so.13"))
                .unwrap_or_else(|| panic!("{mode:o}: {:?}", found.refused));
            assert_eq!(refusal.origin, Origin::Python);
            let expected = format!("{}: {why}", lib.display());
            assert_eq!(refusal.reason, expected);
            assert!(refusal.to_string().starts_with("refused "), "{refusal}");
            assert!(found
                .refused
                .iter()
                .any(|r| r.library.ends_with("libcupti.so.13")));
        }
        chmod(&lib, 0o755);
        chmod(&lib.join("libnvrtc.so.13"), 0o646);
        let found = Libraries::search(&ctx);
        assert!(!from_site(&found));
        assert!(found.refused[0]
            .reason
            .ends_with("libnvrtc.so.13: writable by others"));
        // A folder above it that others can write (not sticky) is refused too.
        chmod(&lib.join("libnvrtc.so.13"), 0o644);
        chmod(&site.path().join("nvidia"), 0o777);
        let found = Libraries::search(&ctx);
        assert!(!from_site(&found));
        chmod(&site.path().join("nvidia"), 0o755);
        let found = Libraries::search(&ctx);
        assert!(from_site(&found), "{:?}", found.refused);
        assert!(found.refused.is_empty(), "{:?}", found.refused);
        // Owned by someone else (only root can make such a file here).
        if effective_uid() == Some(0) {
            std::os::unix::fs::chown(&lib, Some(1001), None).unwrap();
            let found = Libraries::search(&ctx);
            assert!(!from_site(&found));
            assert_eq!(
                found.refused[0].reason,
                format!("{}: owned by uid 1001", lib.display())
            );
        }
    }

    #[test]
    fn a_by_name_open_through_an_untrusted_loader_path_entry_is_blocked() {
        let work = tempfile::tempdir().unwrap();
        touch(&work.path().join("libcuda.so.1"));
        chmod(work.path(), 0o777);
        // An empty entry is the working folder, for the loader.
        let ctx = Context {
            cwd: Some(work.path().to_path_buf()),
            ..context(&[("LD_LIBRARY_PATH", Path::new("/nonexistent:"))])
        };
        let refusal = loader_path_refusal(&ctx, "libcuda.so.1").expect("refused");
        assert!(
            refusal.reason.ends_with("writable by group and others"),
            "{refusal}"
        );
        let found = Libraries::search(&ctx);
        assert!(found.by_name_blocked(&DRIVER_NAMES).is_some());
        assert!(found.by_name_blocked(&NVRTC_NAMES).is_none());
        chmod(work.path(), 0o700);
        assert_eq!(loader_path_refusal(&ctx, "libcuda.so.1"), None);
    }

    #[test]
    fn the_worker_is_told_where_unless_already_told() {
        let site = tempfile::tempdir().unwrap();
        let lib = site.path().join("nvidia/cu13/lib");
        touch(&lib.join("libnvrtc.so.13"));
        touch(&lib.join("libcupti.so.13"));
        let ctx = context(&[("PYTHONPATH", site.path())]);
        let env = Libraries::search(&ctx).worker_env(&ctx);
        let names: Vec<_> = env.iter().map(|(k, _)| k.clone()).collect();
        assert_eq!(
            names,
            [
                OsString::from("FLASHPROF_CUDA_LIB"),
                "FLASHPROF_CUPTI_PATH".into()
            ]
        );
        let told = context(&[
            ("PYTHONPATH", site.path()),
            ("FLASHPROF_CUDA_LIB", site.path()),
        ]);
        assert_eq!(Libraries::search(&told).worker_env(&told).len(), 1);
    }

    /// A fetch's folder under `cache` as `flashprof fetch-cuda` leaves it
    /// (flashprof's folder private), holding NVRTC; returns its lib folder.
    fn fetched_under(cache: &Path) -> PathBuf {
        let lib = cache.join("flashprof/cuda-13.0/nvidia/cu13/lib");
        touch(&lib.join("libnvrtc.so.13"));
        touch(&lib.join("libnvrtc-builtins.so.13.0"));
        chmod(&cache.join("flashprof"), 0o700);
        lib
    }

    #[test]
    fn the_fetched_folder_in_the_user_s_cache_is_searched_and_trusted_when_private() {
        let home = tempfile::tempdir().unwrap();
        let lib = fetched_under(&home.path().join(".cache"));
        let ctx = context(&[("HOME", home.path())]);
        assert_eq!(
            fetched_folder(&ctx),
            Some(home.path().join(".cache/flashprof/cuda-13.0"))
        );
        let nvrtc = Libraries::search(&ctx).nvrtc.expect("found in the cache");
        assert_eq!(nvrtc.origin, Origin::Fetched);
        assert_eq!(nvrtc.folder(), std::fs::canonicalize(&lib).unwrap());
        assert_eq!(nvrtc.origin.to_string(), "flashprof fetch-cuda's folder");
        // XDG_CACHE_HOME, when absolute, is the cache; a relative one is ignored.
        let xdg = tempfile::tempdir().unwrap();
        let lib = fetched_under(xdg.path());
        let ctx = context(&[("HOME", home.path()), ("XDG_CACHE_HOME", xdg.path())]);
        let nvrtc = Libraries::search(&ctx)
            .nvrtc
            .expect("found in XDG_CACHE_HOME");
        assert_eq!(nvrtc.folder(), std::fs::canonicalize(&lib).unwrap());
        let ctx = context(&[
            ("HOME", home.path()),
            ("XDG_CACHE_HOME", Path::new("cache")),
        ]);
        assert_eq!(
            fetched_folder(&ctx),
            Some(home.path().join(".cache/flashprof/cuda-13.0"))
        );
        assert_eq!(
            fetched_folder(&Context::default()),
            None,
            "no home, no cache"
        );
    }

    #[test]
    fn a_fetched_folder_others_can_write_is_refused() {
        let home = tempfile::tempdir().unwrap();
        let lib = fetched_under(&home.path().join(".cache"));
        let ctx = context(&[("HOME", home.path())]);
        let flashprof = home.path().join(".cache/flashprof");
        for (mode, why) in [(0o770, "writable by group"), (0o707, "writable by others")] {
            chmod(&flashprof, mode);
            let found = Libraries::search(&ctx);
            assert!(found.nvrtc.is_none(), "{mode:o}: {:?}", found.nvrtc);
            let refusal = found
                .refused
                .iter()
                .find(|r| r.library.ends_with("libnvrtc.so.13"))
                .unwrap_or_else(|| panic!("{mode:o}: {:?}", found.refused));
            assert_eq!(refusal.origin, Origin::Fetched);
            assert_eq!(refusal.reason, format!("{}: {why}", flashprof.display()));
        }
        chmod(&flashprof, 0o700);
        chmod(&lib, 0o775);
        assert!(
            Libraries::search(&ctx).nvrtc.is_none(),
            "its lib folder too"
        );
    }

    #[test]
    fn a_search_made_again_sees_what_was_installed_since() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static SEARCHES: AtomicUsize = AtomicUsize::new(0);
        static KEPT: Searched<usize> = Searched::new(|| SEARCHES.fetch_add(1, Ordering::SeqCst));
        assert_eq!(*KEPT.get(), 0);
        assert_eq!(*KEPT.get(), 0, "kept, not searched again");
        let earlier = KEPT.get();
        assert_eq!(*KEPT.again(), 1);
        assert_eq!(*KEPT.get(), 1, "the new answer is kept");
        assert_eq!(*earlier, 0, "a holder of the old answer keeps it whole");
    }

    #[test]
    fn nothing_found_says_the_command_that_fixes_it() {
        let message = nvrtc_missing_message();
        assert!(message.contains("Fix: flashprof fetch-cuda"), "{message}");
        assert!(message.contains(NVRTC_PIP), "{message}");
        assert!(message.contains("flashprof doctor"));
    }
}
