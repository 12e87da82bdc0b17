//! Which lab the TUI last used for each file, kept in `.flashprof/labs.json`
//! beside the file, so reopening a file needs no `--lab`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::app::history::nofollow::Folder;
use crate::lab::source::{read_regular_file, FollowLinks, MAX_SOURCE_BYTES};

/// Where the memory of `file`'s folder lives.
fn memory_path(file: &Path) -> PathBuf {
    let folder = file.parent().filter(|p| !p.as_os_str().is_empty());
    folder
        .unwrap_or(Path::new("."))
        .join(".flashprof")
        .join("labs.json")
}

fn key(file: &Path) -> String {
    file.file_name().map_or_else(
        || file.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// The memory of `file`'s folder; one that cannot be read safely (a FIFO
/// planted in its place, say) is an empty memory.
fn read_all(file: &Path) -> BTreeMap<String, String> {
    let Some(store) = store_of(file, false).ok().flatten() else {
        return BTreeMap::new();
    };
    read_regular_file(&store.at(MEMORY_FILE), FollowLinks::No, MAX_SOURCE_BYTES)
        .ok()
        .and_then(|read| serde_json::from_slice(&read.bytes).ok())
        .unwrap_or_default()
}

const MEMORY_FILE: &str = "labs.json";

/// The `.flashprof` folder beside `file`, opened with no link followed and
/// only when it is this user's (a planted one is refused, naming it).
fn store_of(file: &Path, create: bool) -> std::io::Result<Option<Folder>> {
    let path = memory_path(file);
    Folder::open(
        path.parent().unwrap_or(Path::new(".flashprof")),
        create,
        true,
    )
}

/// The lab remembered for `file`, if any. The memory may be planted (a
/// submission's folder, unpacked): a name that is no lab's is not
/// remembered, so it can neither stop the TUI nor reach a message.
pub fn recall(file: &Path) -> Option<String> {
    read_all(file)
        .remove(&key(file))
        .filter(|name| crate::lab::registry::find(name).is_some())
}

/// Remembers `lab` for `file`.
pub fn remember(file: &Path, lab: &str) -> std::io::Result<()> {
    let mut all = read_all(file);
    if all.get(&key(file)).map(String::as_str) == Some(lab) {
        return Ok(());
    }
    all.insert(key(file), lab.to_owned());
    let store = store_of(file, true)?.ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "the .flashprof folder is missing",
        )
    })?;
    let text = serde_json::to_string_pretty(&all).map_err(std::io::Error::other)?;
    crate::app::batch::output::write_atomically(&store.at(MEMORY_FILE), &text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_in_place_of_the_memory_is_an_empty_memory() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("k.cu");
        std::fs::create_dir_all(dir.path().join(".flashprof")).expect("mkdir");
        crate::sys::make_fifo(&memory_path(&file));
        assert_eq!(recall(&file), None);
    }

    #[test]
    fn a_planted_store_link_is_neither_read_nor_written_through() {
        let dir = tempfile::tempdir().expect("tempdir");
        let elsewhere = dir.path().join("ta-private");
        std::fs::create_dir_all(&elsewhere).expect("mkdir");
        std::fs::write(elsewhere.join("labs.json"), r#"{"k.cu":"paged-prefill"}"#).expect("write");
        let student = dir.path().join("alice");
        std::fs::create_dir_all(&student).expect("mkdir");
        std::os::unix::fs::symlink(&elsewhere, student.join(".flashprof")).expect("symlink");
        let file = student.join("k.cu");
        assert_eq!(recall(&file), None);
        let error = remember(&file, "flash-prefill").expect_err("refused");
        assert!(error.to_string().contains("symlink"), "{error}");
        let kept = std::fs::read_to_string(elsewhere.join("labs.json")).expect("read");
        assert_eq!(kept, r#"{"k.cu":"paged-prefill"}"#);
    }

    #[test]
    fn a_planted_memory_naming_no_lab_is_no_memory() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join(".flashprof")).expect("mkdir");
        let file = dir.path().join("k.cu");
        for planted in [
            r#"{"k.cu":"\u001b]52;c;ZWNobyBvd25lZA==\u0007"}"#,
            r#"{"k.cu":"no-such-lab"}"#,
            r#"{"k.cu":""}"#,
        ] {
            std::fs::write(memory_path(&file), planted).expect("plant");
            assert_eq!(recall(&file), None, "{planted}");
        }
        std::fs::write(memory_path(&file), r#"{"k.cu":"paged-prefill"}"#).expect("write");
        assert_eq!(recall(&file).as_deref(), Some("paged-prefill"));
    }

    #[test]
    fn each_file_keeps_its_own_lab() {
        let dir = tempfile::tempdir().expect("tempdir");
        let a = dir.path().join("a.cu");
        let b = dir.path().join("b.cu");
        assert_eq!(recall(&a), None);
        remember(&a, "paged-prefill").expect("remember");
        remember(&b, "flash-prefill").expect("remember");
        assert_eq!(recall(&a).as_deref(), Some("paged-prefill"));
        assert_eq!(recall(&b).as_deref(), Some("flash-prefill"));
        remember(&a, "flash-prefill").expect("remember");
        assert_eq!(recall(&a).as_deref(), Some("flash-prefill"));
    }
}
