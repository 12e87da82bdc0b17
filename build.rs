//! Embeds the files an installed `flashprof` must carry without a checkout:
//! the shipped kernels (starter, reference, planted bugs) and the session
//! recorded on the H200 that `flashprof replay` plays when given no path.
//!
//! The lists are generated rather than written by hand so that a kernel or
//! a recorded file added to the folders is shipped without touching code.

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

fn table(name: &str, root: &Path, dir: &str, extension: Option<&str>) -> String {
    let mut files = Vec::new();
    files_under(&root.join(dir), &mut files);
    let mut code = format!("pub static {name}: &[(&str, &[u8])] = &[\n");
    for file in files {
        if extension.is_some_and(|ext| file.extension().is_none_or(|e| e != ext)) {
            continue;
        }
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
    let mut code = table("KERNELS", &root, "kernels", Some("cu"));
    code.push_str(&table(
        "RECORDED_SESSION",
        &root,
        "assets/recorded-session",
        None,
    ));
    std::fs::write(out.join("embedded.rs"), code).expect("write embedded.rs");
    println!("cargo:rerun-if-changed=kernels");
    println!("cargo:rerun-if-changed=assets/recorded-session");
}
