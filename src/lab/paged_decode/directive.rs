//! The launch a decode kernel declares on its `// @flashprof` line.
//!
//! The lab's keys are `threads=N`, `grid=head|kv_group` and `splits=N`
//! (plus `lab=NAME`, read by [`crate::lab::geometry::declared_lab`]); the
//! first lab's `rows_per_block` and `dynamic_smem` mean nothing for one
//! token per sequence and are refused by name, so a file copied from
//! another lab says what to change rather than launching in a shape its
//! author did not mean.

use crate::lab::geometry::{
    declared, directive_pairs, shown, whole_number, GeometryError, MAX_THREADS,
};

use super::{DEFAULT_THREADS, HKV, HQ, MAX_SPLITS};

/// What grid x enumerates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GridX {
    /// `blockIdx.x` is the query head, 0..32 (the contract's default).
    QueryHead,
    /// `blockIdx.x` is the KV head, 0..8; the block serves its 4 query heads.
    KvGroup,
}

/// One launch's shape: grid `(32 or 8, numSeqs, splits)`, `threads` per block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DecodeGeometry {
    pub threads: u32,
    pub grid_x: GridX,
    /// Partitions per sequence, grid z (1..=16).
    pub splits: u32,
}

impl Default for DecodeGeometry {
    /// The contract's default launch: grid `(32, numSeqs)`, 128 threads.
    fn default() -> Self {
        DecodeGeometry {
            threads: DEFAULT_THREADS,
            grid_x: GridX::QueryHead,
            splits: 1,
        }
    }
}

impl DecodeGeometry {
    /// The grid for a batch of `num_seqs` sequences.
    pub fn grid(self, num_seqs: usize) -> (u32, u32, u32) {
        let x = match self.grid_x {
            GridX::QueryHead => HQ,
            GridX::KvGroup => HKV,
        };
        (x as u32, num_seqs as u32, self.splits)
    }
}

/// The geometry `source` declares, or the default when it declares none.
/// A second declaration line is refused, as in every lab.
pub fn from_source(source: &str) -> Result<DecodeGeometry, GeometryError> {
    Ok(declared(source, parse_directive)?.unwrap_or_default())
}

/// Parses the `key=value` pairs after the `@flashprof` marker.
pub fn parse_directive(body: &str) -> Result<DecodeGeometry, String> {
    let mut geometry = DecodeGeometry::default();
    for (key, value) in directive_pairs(body)? {
        let number = || whole_number(key, value);
        match key {
            "lab" => {}
            "threads" => geometry.threads = number()?,
            "splits" => geometry.splits = number()?,
            "grid" => {
                geometry.grid_x = match value {
                    "head" => GridX::QueryHead,
                    "kv_group" => GridX::KvGroup,
                    _ => {
                        let value = shown(value);
                        return Err(format!("`grid` is `head` or `kv_group`, found `{value}`"));
                    }
                }
            }
            "rows_per_block" | "dynamic_smem" => {
                return Err(format!(
                    "`{key}` is not a key of the paged-decode lab (one token per sequence; known: lab, threads, grid, splits)"
                ))
            }
            _ => {
                let key = shown(key);
                return Err(format!("unknown key `{key}` (known: lab, threads, grid, splits)"));
            }
        }
    }
    if geometry.threads == 0 || geometry.threads > MAX_THREADS {
        return Err(format!(
            "threads must be 1..={MAX_THREADS}, found {}",
            geometry.threads
        ));
    }
    if geometry.splits == 0 || geometry.splits as usize > MAX_SPLITS {
        return Err(format!(
            "splits must be 1..={MAX_SPLITS} (the workspace holds {MAX_SPLITS} partitions), found {}",
            geometry.splits
        ));
    }
    Ok(geometry)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A refusal quotes a student's key or value cut short and visible: a
    /// 900,000-character value once became a 900 KB gradebook cell.
    #[test]
    fn refusals_quote_a_long_key_or_value_cut_short() {
        let long = "9".repeat(900_000);
        for body in [
            format!("threads={long}x"),
            format!("grid={long}"),
            format!("{long}=1"),
            format!("no-equals-{long}"),
        ] {
            let err = parse_directive(&body).unwrap_err();
            assert!(
                err.len() < 200 && err.contains("..."),
                "{}",
                &err[..err.len().min(300)]
            );
        }
    }

    #[test]
    fn no_declaration_is_the_contracts_launch() {
        let g = from_source("__global__ void f() {}").unwrap();
        assert_eq!(g, DecodeGeometry::default());
        assert_eq!(g.grid(64), (32, 64, 1));
        assert_eq!(g.threads, 128);
    }

    #[test]
    fn the_three_keys_shape_the_grid() {
        let g =
            from_source("x\n// @flashprof lab=paged-decode threads=256 grid=kv_group splits=16\n")
                .unwrap();
        assert_eq!(
            g,
            DecodeGeometry {
                threads: 256,
                grid_x: GridX::KvGroup,
                splits: 16
            }
        );
        assert_eq!(g.grid(5), (8, 5, 16));
        let g = from_source("// @flashprof threads=32").unwrap();
        assert_eq!(g.grid(3), (32, 3, 1));
        assert_eq!(
            parse_directive("grid=head splits=1").unwrap(),
            DecodeGeometry::default()
        );
    }

    #[test]
    fn the_shipped_kernels_declare_what_they_are_written_for() {
        let read = |f: &str| {
            std::fs::read_to_string(format!(
                "{}/kernels/paged-decode/{f}",
                env!("CARGO_MANIFEST_DIR")
            ))
            .unwrap()
        };
        assert_eq!(from_source(&read("starter.cu")).unwrap().threads, 32);
        let reference = from_source(&read("reference.cu")).unwrap();
        assert_eq!((reference.grid_x, reference.splits), (GridX::KvGroup, 16));
    }

    #[test]
    fn bad_declarations_are_refused_with_their_line_and_bound() {
        let err = |src: &str| from_source(src).unwrap_err();
        let e = err("\n// @flashprof splits=17");
        assert_eq!(e.line, 2);
        assert!(e.message.contains("1..=16"), "{}", e.message);
        assert!(err("// @flashprof splits=0").message.contains("found 0"));
        assert!(err("// @flashprof splits=-1")
            .message
            .contains("whole number"));
        assert!(err("// @flashprof threads=2048")
            .message
            .contains("1..=1024"));
        assert!(err("// @flashprof threads=0").message.contains("found 0"));
        assert!(err("// @flashprof grid=row").message.contains("kv_group"));
        assert!(err("// @flashprof rows_per_block=64")
            .message
            .contains("not a key of the paged-decode lab"));
        assert!(err("// @flashprof dynamic_smem=1024")
            .message
            .contains("not a key"));
        assert!(err("// @flashprof warps=4")
            .message
            .contains("unknown key `warps`"));
        assert!(err("// @flashprof splits=4 splits=8")
            .message
            .contains("given twice"));
        assert!(err("// @flashprof splits").message.contains("key=value"));
        assert_eq!(
            err("// @flashprof threads=64\n// @flashprof splits=2").line,
            2
        );
        // A student's 20-digit number is a refusal, not an overflow.
        assert!(err("// @flashprof splits=99999999999999999999")
            .message
            .contains("whole number"));
    }
}
