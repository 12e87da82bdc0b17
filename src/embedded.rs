//! The recorded H200 session, compiled into the binary by `build.rs` so an
//! installed flashprof can replay it without a checkout.

include!(concat!(env!("OUT_DIR"), "/embedded.rs"));

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
