//! The batch journal (`app::batch::journal::read` on `journal.jsonl`), read
//! from a real file as a resumed `grade` reads it.
//!
//! Properties: no panic; every non-blank line is an entry or counted as
//! unreadable; the latest-per-id view holds one entry per distinct id, each
//! the last one written for it; the entries written back as journal
//! lines read back with the same ids, hashes and statuses.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use flashprof::app::batch::journal::read;
use libfuzzer_sys::fuzz_target;

fn scratch() -> PathBuf {
    // tmpfs where there is one: the target writes a file per input.
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

fn folder() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = scratch().join(format!("flashprof-fuzz-journal-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    })
}

fuzz_target!(|data: &[u8]| {
    let path = folder().join("journal.jsonl");
    std::fs::write(&path, data).unwrap();
    let journal = read(&path).expect("a readable journal file reads");
    let lines = data
        .split(|&b| b == b'\n')
        .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
        .count();
    assert_eq!(journal.entries.len() + journal.unreadable_lines, lines);

    let latest = journal.latest_per_id();
    let ids: std::collections::BTreeSet<&str> =
        journal.entries.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(latest.len(), ids.len());
    for entry in &latest {
        let last = journal
            .entries
            .iter()
            .rev()
            .find(|e| e.id == entry.id)
            .unwrap();
        assert_eq!(last, entry);
    }

    // Written back as `JournalWriter` writes (one JSON line per entry; its
    // fdatasync per line would make this target disk-bound).
    let again = folder().join("again.jsonl");
    let mut bytes = Vec::new();
    for entry in &journal.entries {
        bytes.extend(serde_json::to_vec(entry).unwrap());
        bytes.push(b'\n');
    }
    std::fs::write(&again, bytes).unwrap();
    let reread = read(&again).unwrap();
    assert_eq!(reread.unreadable_lines, 0);
    assert_eq!(reread.entries.len(), journal.entries.len());
    for (a, b) in reread.entries.iter().zip(&journal.entries) {
        assert_eq!(
            (&a.id, &a.content_hash, a.status),
            (&b.id, &b.content_hash, b.status)
        );
    }
});
