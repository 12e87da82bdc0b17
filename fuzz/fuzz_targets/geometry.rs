//! `@flashprof` declarations on their own: `LaunchGeometry::from_source`,
//! `parse_directive` and `declared_lab` on any text.
//!
//! Properties: no panic; an accepted geometry is within the limits and, written
//! back as a declaration, reads as itself; an error names a line of the text.
#![no_main]

use flashprof::lab::geometry::{declared_lab, GridY, LaunchGeometry, DIRECTIVE};
use flashprof::lab::registry;
use libfuzzer_sys::fuzz_target;

fn directive(g: &LaunchGeometry) -> String {
    let grid = match g.grid_y {
        GridY::QueryHead => "head",
        GridY::KvGroup => "kv_group",
    };
    format!(
        "// {DIRECTIVE} rows_per_block={} threads={} dynamic_smem={} grid={grid}\n",
        g.rows_per_block, g.threads, g.dynamic_smem_bytes
    )
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for lab in registry::labs() {
        let default = lab.default_geometry();
        match LaunchGeometry::from_source(text, default) {
            Ok(g) => {
                assert!(g.rows_per_block >= 1);
                assert!((1..=1024).contains(&g.threads));
                assert!(g.dynamic_smem_bytes <= 227 * 1024);
                let back = LaunchGeometry::from_source(&directive(&g), default)
                    .expect("a geometry written back must read");
                assert_eq!(back, g);
            }
            Err(e) => {
                assert!(e.line >= 1 && e.line <= text.lines().count().max(1));
                assert!(!e.message.is_empty());
            }
        }
        if let Ok(g) = LaunchGeometry::parse_directive(text, default) {
            assert!((1..=1024).contains(&g.threads));
        }
    }
    if let Some((line, _name)) = declared_lab(text) {
        assert!(line >= 1 && line <= text.lines().count());
    }
});
