//! flashprof's own folder of the user's cache, and folders only this user
//! can enter.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use crate::display::path_for_display;

/// flashprof's folder of the user's cache: `$XDG_CACHE_HOME/flashprof`,
/// else `~/.cache/flashprof`; `None` without an absolute cache folder or a
/// home (the XDG rule: a relative value is ignored).
pub fn flashprof_cache(xdg_cache_home: Option<&OsStr>, home: Option<&OsStr>) -> Option<PathBuf> {
    let cache = match xdg_cache_home.map(PathBuf::from) {
        Some(cache) if cache.is_absolute() => cache,
        _ => home
            .map(PathBuf::from)
            .filter(|h| h.is_absolute())?
            .join(".cache"),
    };
    Some(cache.join("flashprof"))
}

/// [`flashprof_cache`] of this process's environment.
pub fn own_flashprof_cache() -> Option<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    flashprof_cache(var("XDG_CACHE_HOME").as_deref(), var("HOME").as_deref())
}

/// Makes `folder` (and what is missing above it) a folder only this user
/// can enter; an existing one of this user is narrowed to that. A link in
/// its place, or a folder of another user, is refused.
pub fn make_private(folder: &Path) -> Result<(), String> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    let shown = path_for_display(folder);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(folder)
        .map_err(|e| format!("cannot create {shown}: {e}"))?;
    let meta = std::fs::symlink_metadata(folder).map_err(|e| format!("{shown}: {e}"))?;
    if !meta.is_dir() {
        return Err(format!("{shown} is not a folder"));
    }
    if Some(meta.uid()) != super::effective_uid() {
        return Err(format!(
            "{shown} belongs to uid {}, not to this user: flashprof uses only a folder of its own",
            meta.uid()
        ));
    }
    std::fs::set_permissions(folder, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| format!("cannot make {shown} private: {e}"))
}

/// A new folder only this user can enter, `<prefix>-<nanoseconds>` in the
/// temporary folder: made new, never an existing path another user could
/// have planted. The error is the path and why it could not be made.
pub fn new_private_temp(prefix: &str) -> Result<PathBuf, (PathBuf, std::io::Error)> {
    use std::os::unix::fs::DirBuilderExt;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let dir = std::env::temp_dir().join(format!("{prefix}-{nanos}"));
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => Ok(dir),
        Err(e) => Err((dir, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_cache_follows_xdg_and_ignores_a_relative_value() {
        let cache = |xdg: Option<&str>, home: Option<&str>| {
            flashprof_cache(xdg.map(OsStr::new), home.map(OsStr::new))
        };
        assert_eq!(
            cache(Some("/x/cache"), Some("/home/ta")),
            Some(PathBuf::from("/x/cache/flashprof"))
        );
        assert_eq!(
            cache(Some("relative"), Some("/home/ta")),
            Some(PathBuf::from("/home/ta/.cache/flashprof"))
        );
        assert_eq!(cache(None, Some("relative")), None);
        assert_eq!(cache(None, None), None);
    }

    #[test]
    fn a_private_folder_is_narrowed_to_this_user_and_a_link_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let folder = root.path().join("a/b");
        make_private(&folder).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&folder), 0o700);
        std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o777)).unwrap();
        make_private(&folder).unwrap();
        assert_eq!(mode(&folder), 0o700, "an open folder is narrowed");
        let link = root.path().join("link");
        std::os::unix::fs::symlink(&folder, &link).unwrap();
        let error = make_private(&link).unwrap_err();
        assert!(error.ends_with("is not a folder"), "{error}");
    }
}
