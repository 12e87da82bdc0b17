//! Embeds the sessions recorded on the H200 that `flashprof replay` plays
//! when given no path (and with `--ladder` or `--decode-walk`), so an installed binary carries
//! them. (The starter, reference and support kernels and the cases are
//! single files, embedded with `include_str!` where they are used.)
//!
//! The list is generated rather than written by hand because a recording is
//! a folder of content-addressed sources whose names change with every new
//! recording.

use std::fmt::Write;
use std::path::{Path, PathBuf};

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for path in paths {
        if path.is_dir() {
            files_under(&path, out);
        } else {
            out.push(path);
        }
    }
}

fn table(name: &str, root: &Path, dir: &str) -> String {
    let mut files = Vec::new();
    files_under(&root.join(dir), &mut files);
    let mut code = format!("pub static {name}: &[(&str, &[u8])] = &[\n");
    for file in files {
        let relative = file
            .strip_prefix(root)
            .expect("under the root")
            .to_string_lossy()
            .replace('\\', "/");
        let _ = writeln!(
            code,
            "    ({relative:?}, include_bytes!({:?})),",
            file.display().to_string()
        );
    }
    code.push_str("];\n");
    code
}

fn main() {
    let root =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let mut code = String::new();
    for (name, dir) in [
        ("RECORDED_SESSION", "assets/recorded-session"),
        ("LADDER_SESSION", "assets/recorded-session-ladder"),
        ("DECODE_WALK_SESSION", "assets/recorded-session-decode-walk"),
    ] {
        code.push_str(&table(name, &root, dir));
        println!("cargo:rerun-if-changed={dir}");
    }
    std::fs::write(out.join("embedded.rs"), code).expect("write embedded.rs");
}
