//! The map a newcomer reads is the code's: `src/lib.rs` lists every module
//! in layer order and every import points down that order; every module
//! path named in `docs/*.md` and `src/lib.rs` exists; the files that allow
//! `unsafe` are exactly the ones the map lists, here and in
//! docs/ARCHITECTURE.md.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn rust_files(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            rust_files(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

fn lib_doc() -> Vec<String> {
    read(&root().join("src/lib.rs"))
        .lines()
        .filter_map(|l| l.strip_prefix("//!"))
        .map(|l| l.trim().to_owned())
        .collect()
}

/// The top-level modules `src/lib.rs` declares.
fn declared_modules() -> BTreeSet<String> {
    read(&root().join("src/lib.rs"))
        .lines()
        .filter_map(|l| l.strip_prefix("pub mod "))
        .map(|l| l.trim_end_matches(';').to_owned())
        .collect()
}

/// Each top-level module's layer, from the numbered list of the map.
fn layers() -> BTreeMap<String, usize> {
    let mut layers = BTreeMap::new();
    for line in lib_doc() {
        let Some((number, rest)) = line.split_once(". ") else {
            continue;
        };
        let Ok(layer) = number.parse::<usize>() else {
            continue;
        };
        let head = rest.split(':').next().unwrap_or("");
        for name in head.split("[`").skip(1) {
            let name = name.split('`').next().expect("a closing backtick");
            assert!(
                layers.insert(name.to_owned(), layer).is_none(),
                "{name} is named twice in the map"
            );
        }
    }
    layers
}

/// The top-level module a source file belongs to.
fn owner(file: &Path) -> String {
    let relative = file.strip_prefix(root().join("src")).expect("under src");
    let first = relative
        .components()
        .next()
        .expect("a component")
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_owned()
}

#[test]
fn the_map_names_every_module_once_in_layer_order_and_imports_point_down() {
    let layers = layers();
    let named: BTreeSet<String> = layers.keys().cloned().collect();
    assert_eq!(
        named,
        declared_modules(),
        "src/lib.rs's map against its `pub mod`s"
    );
    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    let mut upward = Vec::new();
    for file in &files {
        let from = owner(file);
        let Some(&from_layer) = layers.get(&from) else {
            continue; // lib.rs and main.rs sit above every layer
        };
        for (number, line) in read(file).lines().enumerate() {
            for used in line.split("crate::").skip(1) {
                let to: String = used
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                let Some(&to_layer) = layers.get(&to) else {
                    continue;
                };
                if to != from && to_layer >= from_layer {
                    upward.push(format!("{}:{}: {from} -> {to}", file.display(), number + 1));
                }
            }
        }
    }
    assert!(
        upward.is_empty(),
        "imports that do not point down:\n{}",
        upward.join("\n")
    );
}

/// Where a module path's module part ends: the folder or file of the
/// longest prefix that is a module, and how many segments that took.
fn resolve(segments: &[&str]) -> Option<(Vec<PathBuf>, usize)> {
    let mut folder = root().join("src");
    let mut files = Vec::new();
    let mut taken = 0;
    for segment in segments {
        let file = folder.join(format!("{segment}.rs"));
        let nested = folder.join(segment).join("mod.rs");
        if file.is_file() {
            files = vec![file];
        } else if nested.is_file() {
            files = vec![nested];
        } else {
            break;
        }
        // A module's items may sit in the files of its folder (`pub use`).
        let sub = folder.join(segment);
        if sub.is_dir() {
            rust_files(&sub, &mut files);
        }
        folder = sub;
        taken += 1;
    }
    (taken > 0).then_some((files, taken))
}

fn defines(files: &[PathBuf], name: &str) -> bool {
    let kinds = [
        "fn", "struct", "enum", "trait", "const", "static", "type", "mod", "use",
    ];
    files.iter().any(|file| {
        let text = read(file);
        kinds.iter().any(|kind| {
            text.match_indices(&format!("{kind} {name}"))
                .any(|(at, m)| {
                    let after = text[at + m.len()..].chars().next();
                    !after.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                })
        }) || text.contains(&format!("::{name};"))
            || text.contains(&format!("::{name},"))
            || text.contains(&format!(" {name},"))
    })
}

/// Every `a::b::c` in backticks whose first segment is a top-level module.
fn named_paths(text: &str, modules: &BTreeSet<String>) -> Vec<String> {
    let mut paths = Vec::new();
    for quoted in text.split('`').skip(1).step_by(2) {
        for word in quoted.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':')) {
            let first = word.split("::").next().unwrap_or("");
            if word.contains("::") && modules.contains(first) {
                paths.push(word.trim_end_matches(':').to_owned());
            }
        }
    }
    paths
}

#[test]
fn every_module_path_the_docs_name_exists() {
    let modules = declared_modules();
    let mut documents: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    documents.push(root().join("src/lib.rs"));
    documents.push(root().join("README.md"));
    let mut missing = Vec::new();
    let mut checked = 0;
    for document in &documents {
        for path in named_paths(&read(document), &modules) {
            checked += 1;
            let segments: Vec<&str> = path.split("::").collect();
            let in_module = resolve(&segments).is_some_and(|(files, taken)| {
                segments[taken..]
                    .first()
                    .is_none_or(|item| defines(&files, item))
            });
            // `grade::a_test_name` in SECURITY.md is a test of tests/grade.rs.
            let test_file = root().join("tests").join(format!("{}.rs", segments[0]));
            let a_test =
                segments.len() == 2 && test_file.is_file() && defines(&[test_file], segments[1]);
            let found = in_module || a_test;
            if !found {
                missing.push(format!("{}: `{path}`", document.display()));
            }
        }
    }
    assert!(
        checked > 50,
        "only {checked} paths found: is the scan broken?"
    );
    assert!(
        missing.is_empty(),
        "named but not in the code:\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_files_that_allow_unsafe_are_the_ones_the_map_lists() {
    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    let allowing: BTreeSet<String> = files
        .iter()
        .filter(|f| read(f).contains("allow(unsafe_code)"))
        .map(|f| {
            f.strip_prefix(root())
                .expect("in the checkout")
                .display()
                .to_string()
        })
        .collect();
    let listed: BTreeSet<String> = lib_doc()
        .iter()
        .filter_map(|l| l.strip_prefix("- `src/"))
        .flat_map(|l| {
            let files = l.split(':').next().unwrap_or("");
            files
                .split(", ")
                .map(|f| format!("src/{}", f.trim_matches('`').trim_start_matches("src/")))
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(
        listed, allowing,
        "src/lib.rs's unsafe list against the source"
    );
    let architecture = read(&root().join("docs/ARCHITECTURE.md"));
    for file in &allowing {
        assert!(
            architecture.contains(&format!("`{file}`")),
            "docs/ARCHITECTURE.md does not list {file} among the unsafe files"
        );
    }
}

/// docs/LABS.md's folder list is the tree's: every folder of `src/lab/` is
/// listed, as a lab or a kit, nothing listed is missing, and the folders
/// listed as labs are exactly the ones `labs!` in `src/lab/mod.rs` registers.
#[test]
fn the_labs_guide_lists_every_lab_folder_and_the_registered_labs() {
    let guide = read(&root().join("docs/LABS.md"));
    let mut listed = BTreeMap::new();
    for row in guide.lines().filter(|l| l.starts_with("| `src/lab/")) {
        let mut cells = row.split('|').map(str::trim).filter(|c| !c.is_empty());
        let folder = cells.next().expect("a folder cell");
        let what = cells.next().expect("a description cell");
        let name = folder
            .trim_matches('`')
            .trim_start_matches("src/lab/")
            .trim_end_matches('/')
            .to_owned();
        listed.insert(name, what.starts_with("lab `"));
    }
    let folders: BTreeSet<String> = std::fs::read_dir(root().join("src/lab"))
        .expect("src/lab")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.is_dir())
        .map(|path| {
            path.file_name()
                .expect("a name")
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    let named: BTreeSet<String> = listed.keys().cloned().collect();
    assert_eq!(
        named, folders,
        "docs/LABS.md's folder list against src/lab/"
    );
    let lab_mod = read(&root().join("src/lab/mod.rs"));
    let list = lab_mod
        .split("labs! {")
        .nth(1)
        .and_then(|rest| rest.split('}').next())
        .expect("the labs! list");
    let registered: BTreeSet<String> = list
        .split(',')
        .filter_map(|entry| entry.trim().split("::").next())
        .filter(|folder| !folder.is_empty())
        .map(str::to_owned)
        .collect();
    let labs: BTreeSet<String> = listed
        .iter()
        .filter(|(_, is_lab)| **is_lab)
        .map(|(name, _)| name.clone())
        .collect();
    assert_eq!(
        labs, registered,
        "the labs docs/LABS.md lists against labs!"
    );
}
