//! Launch geometry: how many blocks and threads a kernel runs with.
//!
//! Each lab has a default launch (the first lab: one block of 256 threads
//! per 64 query rows of one query head). A student file may declare its own
//! geometry, and the lab it is written for, in a comment line
//! (see [`LaunchGeometry::parse_directive`]) so that a tiled kernel can pick
//! its tile height, thread count, dynamic shared memory (above 48 KiB too)
//! and whether a block serves one query head or a whole KV group.

use serde::{Deserialize, Serialize};

use crate::display::quoted_short;

/// The marker that starts a geometry declaration inside a `.cu` file.
pub const DIRECTIVE: &str = "@flashprof";

/// What the second grid dimension enumerates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GridY {
    /// `blockIdx.y` is the query head, 0..32 (the lab's layout).
    QueryHead,
    /// `blockIdx.y` is the KV head, 0..8; the block serves its 4 query heads.
    KvGroup,
}

/// What a block's `blockIdx.y` is, as a sentence names it: `grid.y = query head`.
impl std::fmt::Display for GridY {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            GridY::QueryHead => "query head",
            GridY::KvGroup => "KV group",
        })
    }
}

/// Grid and block shape for one launch of `attention_prefill`.
impl GridY {
    /// Blocks along grid y: one per query head, or one per KV group.
    pub fn blocks(self, query_heads: usize, kv_heads: usize) -> u32 {
        match self {
            GridY::QueryHead => query_heads as u32,
            GridY::KvGroup => kv_heads as u32,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LaunchGeometry {
    /// Query rows one block covers: `gridDim.x = ceil(chunkLen / rows_per_block)`.
    pub rows_per_block: u32,
    /// Threads per block (`blockDim.x`).
    pub threads: u32,
    /// Dynamic shared memory per block, bytes.
    pub dynamic_smem_bytes: u32,
    /// What `blockIdx.y` enumerates.
    pub grid_y: GridY,
    /// Partitions a block's work is split into along grid z (the decode
    /// lab's `splits=N`); 1 for the labs that have no such key. A recording
    /// made before the key existed reads as 1.
    #[serde(default = "one_split")]
    pub splits: u32,
}

fn one_split() -> u32 {
    1
}

/// The launch as a report line says it (`64 rows/block, 128 threads, 0 B
/// dynamic smem, grid.y = query_head`).
impl std::fmt::Display for LaunchGeometry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} rows/block, {} threads, {} B dynamic smem, grid.y = {}",
            self.rows_per_block, self.threads, self.dynamic_smem_bytes, self.grid_y
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct GeometryError {
    /// 1-based line of the student's file.
    pub line: usize,
    pub message: String,
}

/// Hopper's per-block limits, checked up front so a bad declaration is a
/// clear message rather than a launch failure.
pub const MAX_THREADS: u32 = 1024;
const MAX_DYNAMIC_SMEM: u32 = 227 * 1024;

impl LaunchGeometry {
    /// Reads the geometry declared in `source`, or the lab default when none is.
    ///
    /// The declaration is one comment line, for example
    /// `// @flashprof rows_per_block=128 threads=256 dynamic_smem=98304 grid=kv_group`.
    /// Every key is optional; omitted keys keep the lab default. A comment
    /// (rather than a `#pragma`) keeps the file compiling unchanged under nvcc.
    pub fn from_source(source: &str, default: Self) -> Result<Self, GeometryError> {
        Ok(declared(source, |body| Self::parse_directive(body, default))?.unwrap_or(default))
    }

    /// Parses the `key=value` pairs after the [`DIRECTIVE`] marker.
    pub fn parse_directive(body: &str, default: Self) -> Result<Self, String> {
        let mut geometry = default;
        for (key, value) in directive_pairs(body)? {
            let number = || whole_number(key, value);
            match key {
                "rows_per_block" => geometry.rows_per_block = number()?,
                "threads" => geometry.threads = number()?,
                "dynamic_smem" => geometry.dynamic_smem_bytes = number()?,
                // Which lab the file is for: read by `declared_lab`.
                "lab" => {}
                "grid" => {
                    geometry.grid_y = match value {
                        "head" => GridY::QueryHead,
                        "kv_group" => GridY::KvGroup,
                        _ => {
                            return Err(format!(
                                "`grid` is `head` or `kv_group`, found `{}`",
                                shown(value)
                            ))
                        }
                    }
                }
                _ => {
                    return Err(format!(
                    "unknown key `{}` (known: lab, rows_per_block, threads, dynamic_smem, grid)",
                    shown(key)
                ))
                }
            }
        }
        geometry.validate()?;
        Ok(geometry)
    }

    fn validate(&self) -> Result<(), String> {
        if self.rows_per_block == 0 {
            return Err("rows_per_block must be at least 1".into());
        }
        if self.threads == 0 || self.threads > MAX_THREADS {
            return Err(format!(
                "threads must be 1..={MAX_THREADS}, found {}",
                self.threads
            ));
        }
        if self.dynamic_smem_bytes > MAX_DYNAMIC_SMEM {
            return Err(format!(
                "dynamic_smem may be at most {MAX_DYNAMIC_SMEM} bytes (227 KiB on Hopper), found {}",
                self.dynamic_smem_bytes
            ));
        }
        Ok(())
    }
}

/// What the one [`DIRECTIVE`] line of `source` declares, read by `parse`;
/// `None` when there is none. Every lab refuses a second line: the reader
/// would be left guessing which one counts.
pub fn declared<T>(
    source: &str,
    parse: impl Fn(&str) -> Result<T, String>,
) -> Result<Option<T>, GeometryError> {
    let mut found: Option<(usize, T)> = None;
    for (index, text) in source.lines().enumerate() {
        let line = index + 1;
        let Some(body) = directive_body(text) else {
            continue;
        };
        if let Some((first, _)) = found {
            return Err(GeometryError {
                line,
                message: format!("a second {DIRECTIVE} declaration (the first is on line {first})"),
            });
        }
        let declared = parse(body).map_err(|message| GeometryError { line, message })?;
        found = Some((line, declared));
    }
    Ok(found.map(|(_, declared)| declared))
}

/// The `key=value` pairs of a directive's body, in order; a pair without
/// `=` is refused, and so is a key given twice (two labs, say), which
/// would leave the reader guessing which one counts.
pub fn directive_pairs(body: &str) -> Result<Vec<(&str, &str)>, String> {
    let mut pairs: Vec<(&str, &str)> = Vec::new();
    for pair in body.split_whitespace() {
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| format!("expected key=value, found `{}`", shown(pair)))?;
        if pairs.iter().any(|(given, _)| *given == key) {
            return Err(format!("`{}` is given twice", shown(key)));
        }
        pairs.push((key, value));
    }
    Ok(pairs)
}

/// The whole number a directive's `key` is given.
pub fn whole_number(key: &str, value: &str) -> Result<u32, String> {
    value
        .parse::<u32>()
        .map_err(|_| format!("`{key}` needs a whole number, found `{}`", shown(value)))
}

/// The most of a student's value (a lab name, a key, a number) that
/// messages quote; every lab's name and every real value is far shorter.
const MAX_SHOWN_VALUE: usize = 64;

/// A key or value of the `@flashprof` line as refusals quote it, in every
/// lab's keys: visible and short.
pub(crate) fn shown(text: &str) -> String {
    quoted_short(text, MAX_SHOWN_VALUE)
}

/// The lab a file declares with `lab=NAME` on its `@flashprof` line, with the
/// line. The name is the student's text and is quoted in messages, so its
/// control characters are made visible and a name longer than any lab's is
/// cut short (neither names a lab).
pub fn declared_lab(source: &str) -> Option<(usize, String)> {
    source.lines().enumerate().find_map(|(index, text)| {
        directive_body(text)?
            .split_whitespace()
            .find_map(|pair| pair.strip_prefix("lab="))
            .map(|name| (index + 1, shown(name)))
    })
}

/// The text after the marker when `line` is a `//` comment holding a declaration.
/// Byte-order marks before it are blank, as they are to the source scanner:
/// an editor's mark must not hide a first-line declaration.
pub fn directive_body(line: &str) -> Option<&str> {
    let comment = line
        .trim_start_matches(|c: char| c.is_whitespace() || c == '\u{feff}')
        .strip_prefix("//")?;
    comment.trim_start().strip_prefix(DIRECTIVE)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEFAULT: LaunchGeometry = LaunchGeometry {
        rows_per_block: 64,
        threads: 256,
        dynamic_smem_bytes: 0,
        grid_y: GridY::QueryHead,
        splits: 1,
    };

    #[test]
    fn no_declaration_gives_the_labs_default() {
        let g = LaunchGeometry::from_source("__global__ void f() {}", DEFAULT).unwrap();
        assert_eq!(g, DEFAULT);
    }

    #[test]
    fn declaration_overrides_only_named_keys() {
        let src = "x\n  // @flashprof rows_per_block=128 dynamic_smem=98304 grid=kv_group\n";
        let g = LaunchGeometry::from_source(src, DEFAULT).unwrap();
        assert_eq!(g.rows_per_block, 128);
        assert_eq!(g.threads, 256);
        assert_eq!(g.dynamic_smem_bytes, 98304);
        assert_eq!(g.grid_y, GridY::KvGroup);
    }

    /// That `src` declares the paged-prefill lab on `line`, and 128 threads.
    fn assert_paged_prefill_in_128_threads(src: &str, line: usize) {
        assert_eq!(declared_lab(src), Some((line, "paged-prefill".to_owned())));
        let g = LaunchGeometry::from_source(src, DEFAULT).unwrap();
        assert_eq!(g.threads, 128);
    }

    #[test]
    fn the_lab_key_names_the_lab_and_leaves_the_geometry_alone() {
        assert_paged_prefill_in_128_threads("\n// @flashprof lab=paged-prefill threads=128\n", 2);
        assert_eq!(declared_lab("// @flashprof threads=64"), None);
    }

    #[test]
    fn a_hostile_lab_name_is_quoted_visible_and_short() {
        let declared = |src: &str| declared_lab(src).expect("declared").1;
        assert_eq!(declared("// @flashprof lab=../../etc"), "../../etc");
        assert_eq!(
            declared("// @flashprof lab=\u{1b}]0;pwned\u{7}\u{1b}[31m"),
            "^[]0;pwned^G^[[31m"
        );
        let long = format!("// @flashprof lab={}", "x".repeat(900_000));
        assert_eq!(declared(&long), format!("{}...", "x".repeat(64)));
        assert_eq!(declared("// @flashprof lab= threads=64"), "");
    }

    #[test]
    fn a_byte_order_mark_does_not_hide_a_first_line_declaration() {
        let src = "\u{feff}// @flashprof lab=paged-prefill threads=128\n";
        assert_paged_prefill_in_128_threads(src, 1);
    }

    #[test]
    fn a_key_given_twice_is_refused() {
        let src = "// @flashprof lab=paged-prefill lab=flash-prefill";
        let err = LaunchGeometry::from_source(src, DEFAULT).unwrap_err();
        assert_eq!(err.line, 1);
        assert_eq!(err.message, "`lab` is given twice");
        let err = LaunchGeometry::from_source("// @flashprof threads=64 threads=128", DEFAULT)
            .unwrap_err();
        assert!(
            err.message.contains("`threads` is given twice"),
            "{}",
            err.message
        );
    }

    #[test]
    fn a_hostile_value_is_quoted_visible_and_short() {
        for declaration in [
            format!("threads={}", "9".repeat(900_000)),
            format!("grid={}", "h".repeat(900_000)),
            format!("{}=1", "k".repeat(900_000)),
            "k".repeat(900_000),
        ] {
            let src = format!("// @flashprof {declaration}");
            let err = LaunchGeometry::from_source(&src, DEFAULT).unwrap_err();
            assert!(err.message.len() < 200, "{} bytes", err.message.len());
            assert!(err.message.contains("..."), "{}", err.message);
        }
        let err =
            LaunchGeometry::from_source("// @flashprof grid=\u{1b}]0;t\u{7}", DEFAULT).unwrap_err();
        assert!(err.message.contains("^[]0;t^G"), "{}", err.message);
    }

    #[test]
    fn bad_declarations_name_their_line() {
        let err = LaunchGeometry::from_source("\n// @flashprof threads=2048", DEFAULT).unwrap_err();
        assert_eq!(err.line, 2);
        assert!(err.message.contains("threads"));
        let err = LaunchGeometry::from_source("// @flashprof grid=row", DEFAULT).unwrap_err();
        assert!(err.message.contains("kv_group"));
        let err = LaunchGeometry::from_source("// @flashprof warps=4", DEFAULT).unwrap_err();
        assert!(err.message.contains("unknown key `warps`"));
        let err = LaunchGeometry::from_source("// @flashprof\n// @flashprof threads=64", DEFAULT)
            .unwrap_err();
        assert_eq!(err.line, 2);
    }
}
