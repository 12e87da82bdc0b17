//! Whom a file, a folder or a link can be trusted from, written once: this
//! process's user and root, and no one else able to write (docs/SECURITY.md).
//! The library search (`gpu::found`), the gradebook's `--out` folder and
//! every student path read through a link follow these rules.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use super::effective_uid;

/// Links followed in one path before it is refused (the kernel's own limit).
const MAX_LINKS: usize = 40;

/// Why a file or folder with owner `uid` and `mode` cannot be trusted by
/// user `euid`, or `None` when it can. `holds_library`: the folder that
/// holds the library itself, where even a sticky bit does not make a write
/// bit for others acceptable.
pub fn untrusted_because(
    uid: u32,
    mode: u32,
    is_dir: bool,
    holds_library: bool,
    euid: u32,
) -> Option<String> {
    if uid != euid && uid != 0 {
        return Some(format!("owned by uid {uid}"));
    }
    let sticky_root = is_dir && mode & 0o1000 != 0 && uid == 0 && !holds_library;
    match (mode & 0o020 != 0, mode & 0o002 != 0) {
        _ if sticky_root => None,
        (true, true) => Some("writable by group and others".into()),
        (true, false) => Some("writable by group".into()),
        (false, true) => Some("writable by others".into()),
        (false, false) => None,
    }
}

/// Why a link with owner `link_uid`, in a folder with owner `folder_uid` and
/// `folder_mode`, cannot be followed for user `euid`: someone other than
/// this user and root owns it, or could replace it (the folder is theirs, or
/// writable by others without the sticky bit that keeps a link its owner's).
pub fn untrusted_link(
    link_uid: u32,
    folder_uid: u32,
    folder_mode: u32,
    euid: u32,
) -> Option<String> {
    let other = |uid| uid != euid && uid != 0;
    if other(link_uid) {
        return Some(format!("is owned by uid {link_uid}"));
    }
    if other(folder_uid) {
        return Some(format!("is in a folder owned by uid {folder_uid}"));
    }
    let sticky = folder_mode & 0o1000 != 0;
    match (folder_mode & 0o020 != 0, folder_mode & 0o002 != 0) {
        _ if sticky => None,
        (false, false) => None,
        (true, false) => Some("is in a folder writable by group".into()),
        (_, true) => Some("is in a folder writable by others".into()),
    }
}

/// `folder` opened (for lookups through its descriptor) when every link on
/// its path is one [`check_links`] follows and the folder opened is the one
/// that walk arrived at, so a folder swapped in between the two is refused
/// too, and so is one that was missing when walked and is there when
/// opened (a link put back between the two). Refusals are
/// `PermissionDenied`, with the reason.
pub fn open_walked_folder(folder: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let refused = |why: String| std::io::Error::new(std::io::ErrorKind::PermissionDenied, why);
    let walked = check_links(folder).map_err(refused)?;
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(folder)?;
    let meta = opened.metadata()?;
    if walked != Some((meta.dev(), meta.ino())) {
        return Err(refused(format!(
            "{} changed while it was checked",
            crate::display::path_for_display(folder)
        )));
    }
    Ok(opened)
}

/// Checks every link met while resolving `path` (as the kernel would, one
/// component at a time, links inside link targets included) against
/// [`untrusted_link`]: the link named, and why, for the first one that
/// cannot be followed. A component that does not exist ends the walk: the
/// read that follows reports it. A student's own links in her own folders
/// are another user's to the TA, and are refused; a TA's own are followed.
/// On success, the device and inode the walk arrived at (when it did), so
/// the caller can refuse a file swapped in after the check.
pub fn check_links(path: &Path) -> Result<Option<(u64, u64)>, String> {
    let shown = |p: &Path| crate::display::line_for_display(&p.display().to_string()).into_owned();
    let euid =
        effective_uid().ok_or("this process's user could not be read from /proc/self/status")?;
    let mut pending: VecDeque<OsString> = path
        .components()
        .map(|c| c.as_os_str().to_owned())
        .collect();
    let mut at = PathBuf::new();
    let mut links = 0;
    while let Some(part) = pending.pop_front() {
        match Path::new(&part).components().next() {
            Some(Component::RootDir) => at = PathBuf::from("/"),
            Some(Component::CurDir) | None => {}
            Some(Component::ParentDir) => {
                if at.as_os_str().is_empty() || at.ends_with("..") {
                    at.push("..");
                } else {
                    at.pop();
                }
            }
            Some(Component::Prefix(_)) | Some(Component::Normal(_)) => {
                let next = at.join(&part);
                let Ok(meta) = std::fs::symlink_metadata(&next) else {
                    return Ok(None);
                };
                if !meta.file_type().is_symlink() {
                    at = next;
                    continue;
                }
                links += 1;
                if links > MAX_LINKS {
                    return Err(format!("{}: more than {MAX_LINKS} links", shown(path)));
                }
                let folder = if at.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    &at
                };
                let folder_meta = std::fs::symlink_metadata(folder)
                    .map_err(|e| format!("{}: {e}", shown(folder)))?;
                if let Some(why) =
                    untrusted_link(meta.uid(), folder_meta.uid(), folder_meta.mode(), euid)
                {
                    return Err(format!("{} is a link that {why}", shown(&next)));
                }
                let target =
                    std::fs::read_link(&next).map_err(|e| format!("{}: {e}", shown(&next)))?;
                for component in target.components().rev() {
                    pending.push_front(component.as_os_str().to_owned());
                }
            }
        }
    }
    // A walk that stayed here (`.`, `a/..`) arrived at the working folder.
    let arrived = if at.as_os_str().is_empty() {
        Path::new(".")
    } else {
        &at
    };
    Ok(std::fs::symlink_metadata(arrived)
        .ok()
        .map(|meta| (meta.dev(), meta.ino())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, PermissionsExt};

    #[test]
    fn only_this_user_or_root_and_no_other_writer_is_trusted() {
        let euid = 1000;
        assert_eq!(untrusted_because(1000, 0o100644, false, false, euid), None);
        assert_eq!(untrusted_because(0, 0o40755, true, true, euid), None);
        assert_eq!(
            untrusted_because(1001, 0o100644, false, false, euid).as_deref(),
            Some("owned by uid 1001")
        );
        // /tmp: sticky, root's, above the library: accepted; as its folder: not.
        assert_eq!(untrusted_because(0, 0o41777, true, false, euid), None);
        assert_eq!(
            untrusted_because(0, 0o41777, true, true, euid).as_deref(),
            Some("writable by group and others")
        );
        // Sticky but not root's: refused.
        assert!(untrusted_because(1000, 0o41777, true, false, euid).is_some());
        assert_eq!(
            untrusted_because(1000, 0o40775, true, false, euid).as_deref(),
            Some("writable by group")
        );
    }

    #[test]
    fn a_link_is_followed_only_when_no_one_else_owns_or_can_replace_it() {
        let euid = 1000;
        assert_eq!(untrusted_link(1000, 1000, 0o40755, euid), None);
        assert_eq!(
            untrusted_link(0, 0, 0o41777, euid),
            None,
            "a root /tmp, sticky"
        );
        assert_eq!(
            untrusted_link(1001, 1000, 0o40755, euid).as_deref(),
            Some("is owned by uid 1001")
        );
        assert_eq!(
            untrusted_link(1000, 1001, 0o40755, euid).as_deref(),
            Some("is in a folder owned by uid 1001")
        );
        assert_eq!(
            untrusted_link(1000, 1000, 0o40777, euid).as_deref(),
            Some("is in a folder writable by others")
        );
    }

    fn chmod(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }

    #[test]
    fn the_walk_meets_every_link_on_the_way_and_refuses_the_replaceable_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        chmod(root, 0o755);
        std::fs::create_dir(root.join("mine")).unwrap();
        std::fs::write(root.join("mine/k.cu"), "x").unwrap();
        // This user's own links, in this user's folders, relative and chained: followed.
        symlink("mine", root.join("via")).unwrap();
        symlink("via/k.cu", root.join("k.cu")).unwrap();
        assert!(check_links(&root.join("k.cu")).expect("followed").is_some());
        let real = std::fs::metadata(root.join("mine/k.cu")).unwrap();
        assert_eq!(
            check_links(&root.join("via/../mine/k.cu")),
            Ok(Some((real.dev(), real.ino())))
        );
        // A folder anyone can write (not sticky): a link there is refused, and
        // so is a path that only passes through it.
        std::fs::create_dir(root.join("open")).unwrap();
        symlink(root.join("mine/k.cu"), root.join("open/k.cu")).unwrap();
        chmod(&root.join("open"), 0o777);
        let refused = check_links(&root.join("open/k.cu")).expect_err("refused");
        assert!(
            refused.ends_with("open/k.cu is a link that is in a folder writable by others"),
            "{refused}"
        );
        symlink("open/k.cu", root.join("outer")).unwrap();
        let refused = check_links(&root.join("outer")).expect_err("refused");
        assert!(refused.contains("open/k.cu is a link"), "{refused}");
        // A loop ends.
        symlink("loop-b", root.join("loop-a")).unwrap();
        symlink("loop-a", root.join("loop-b")).unwrap();
        assert!(check_links(&root.join("loop-a"))
            .expect_err("refused")
            .contains("more than 40 links"));
        // A missing file is left to the read to report.
        assert_eq!(check_links(&root.join("nothing.cu")), Ok(None));
        if effective_uid() == Some(0) {
            // Another user's link in this user's folder (only root can make one here).
            std::os::unix::fs::lchown(root.join("k.cu"), Some(1001), None).expect("lchown");
            let refused = check_links(&root.join("k.cu")).expect_err("refused");
            assert!(
                refused.ends_with("k.cu is a link that is owned by uid 1001"),
                "{refused}"
            );
        }
    }
}
