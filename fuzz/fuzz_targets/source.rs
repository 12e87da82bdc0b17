//! The student-source scanner: tokenizer, kernel finder, include policy,
//! `@flashprof` declarations (`StudentSource::from_bytes`), for every lab.
//!
//! Properties: no panic; an accepted file re-validates to the same value from
//! its own text; its geometry is the one its lab's `declared_geometry` reads
//! and is within the hardware limits; a declared lab is the lab it was
//! checked as; the prepared program holds the student's text verbatim.
#![no_main]

use flashprof::lab::definition::LabRef;
use flashprof::lab::geometry::declared_lab;
use flashprof::lab::registry;
use flashprof::lab::source::StudentSource;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for lab in registry::labs() {
        let lab = LabRef(lab);
        let Ok(source) = StudentSource::from_bytes("student.cu", data, lab) else {
            continue;
        };
        let text = source.text();
        let again = StudentSource::from_bytes("student.cu", text.as_bytes(), lab)
            .expect("an accepted file's own text must validate again");
        assert_eq!(again, source, "re-validation changed the source");

        let geometry = source.geometry();
        // The lab reads its own keys (the decode lab's `splits=N`).
        assert_eq!(lab.declared_geometry(text).ok(), Some(geometry));
        assert!(geometry.rows_per_block >= 1);
        assert!((1..=1024).contains(&geometry.threads));
        assert!(geometry.dynamic_smem_bytes <= 227 * 1024);
        assert!(geometry.splits >= 1);
        if let Some((line, name)) = declared_lab(text) {
            assert_eq!(name, lab.name());
            assert!(source.line(line).is_some());
        }

        let prepared = source.prepared();
        if source.dropped_host_code().is_empty() {
            assert!(prepared.text.contains(text));
        } else {
            // Host-only code is blanked in place: every line keeps its number.
            let compiled_lines = prepared.text.lines().count();
            assert!(compiled_lines >= text.lines().count());
        }
        assert_eq!(prepared.entry_point, lab.abi().entry_point);
        let lines = text.lines().count();
        assert!(source.line(0).is_none() && source.line(lines + 1).is_none());
        if lines > 0 {
            assert!(source.line(lines).is_some());
        }
    }
});
