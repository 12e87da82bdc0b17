//! The NVRTC log parser (`facts::diagnostics::parse_log`) and the raw-log
//! fallback (`unplaced_failure`), against a fixed student file of each lab.
//!
//! The first byte picks the file (a lab's starter as a translation unit, or
//! a short body); the rest is the log. Properties: no panic; every
//! diagnostic on the student's file that names an existing line carries that
//! line; a caret column is at least 1; the fallback has no NUL and stays
//! within its 16 KiB cut (plus its one-line preface).
#![no_main]

use flashprof::facts::diagnostics::{parse_log, unplaced_failure};
use flashprof::lab::definition::LabRef;
use flashprof::lab::registry;
use flashprof::lab::source::StudentSource;
use libfuzzer_sys::fuzz_target;

const BODY: &str = "// a body\nint row = blockIdx.x;\nout[row] = 0.0f;\n";

fuzz_target!(|data: &[u8]| {
    let Some((&pick, log)) = data.split_first() else {
        return;
    };
    let labs = registry::labs();
    let lab = LabRef(labs[usize::from(pick) % labs.len()]);
    let text = if pick & 0x80 == 0 {
        lab.starter().text
    } else {
        BODY
    };
    let path = if pick & 0x40 == 0 {
        "student.cu"
    } else {
        "dir (1)/a(2).cu"
    };
    let source =
        StudentSource::from_bytes(path, text.as_bytes(), lab).expect("fixed sources are valid");
    let log = String::from_utf8_lossy(log);

    for d in parse_log(&log, &source) {
        if d.file == source.display_path() {
            if let Some(line) = source.line(d.line) {
                assert_eq!(d.source_line.as_deref(), Some(line));
            }
        } else {
            assert!(d.source_line.is_none());
        }
        if let Some(column) = d.column {
            assert!(column >= 1);
        }
    }

    let raw = unplaced_failure(&log, &source);
    assert_eq!(raw.line, 0);
    assert!(!raw.message.contains('\0'));
    assert!(raw.message.len() <= 16 * 1024 + 100);
});
