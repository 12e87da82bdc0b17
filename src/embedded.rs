//! Files compiled into the binary by `build.rs`, so an installed flashprof
//! works without a checkout: every shipped kernel and the recorded session.

include!(concat!(env!("OUT_DIR"), "/embedded.rs"));

/// An embedded kernel by its path in the repository, e.g. `kernels/starter.cu`.
pub fn kernel(path: &str) -> Option<&'static [u8]> {
    KERNELS
        .iter()
        .find(|(p, _)| *p == path)
        .map(|(_, bytes)| *bytes)
}

/// Writes the recorded session into `dir` and returns its `history.jsonl`.
pub fn unpack_recorded_session(dir: &std::path::Path) -> std::io::Result<std::path::PathBuf> {
    for (path, bytes) in RECORDED_SESSION {
        let relative = path
            .strip_prefix("assets/recorded-session/")
            .unwrap_or(path);
        let target = dir.join(relative);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(target, bytes)?;
    }
    Ok(dir.join("history.jsonl"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_starter_the_reference_and_every_planted_bug_are_embedded() {
        assert!(super::kernel("kernels/starter.cu").is_some());
        assert!(super::kernel("kernels/reference.cu").is_some());
        let bugs = super::KERNELS
            .iter()
            .filter(|(p, _)| p.starts_with("kernels/bugs/"))
            .count();
        assert!(bugs >= 12, "{bugs} planted bugs embedded");
    }

    #[test]
    fn the_recorded_session_unpacks_into_a_readable_history() {
        let dir = tempfile::tempdir().unwrap();
        let history = super::unpack_recorded_session(dir.path()).unwrap();
        let store = crate::app::history::HistoryStore::locate(&history);
        let read = store.read().unwrap();
        assert!(
            read.records.len() >= 4,
            "{} runs recorded",
            read.records.len()
        );
    }
}
