//! The lecture ladder (`kernels/flash-prefill/ladder/`, docs/LADDER.md): every rung is a
//! student file of the first lab that flashprof accepts (its entry point and
//! signature are the lab's), compiles with the real NVRTC for the H200
//! without spilling, and can launch the block it declares. The GPU scripts
//! lean on two more facts checked here: the rungs sort in ladder order, and
//! the top rung has the one switch that turns it into plain TF32.
//! Skips cleanly without NVRTC.

use std::path::{Path, PathBuf};

use flashprof::gpu::compile::{compile, CompileOptions};
use flashprof::lab::flash_prefill::FLASH_PREFILL;
use flashprof::lab::geometry::GridY;
use flashprof::lab::source::{SourceForm, StudentSource};

/// What Hopper gives one block at most (shared memory, bytes).
const MAX_BLOCK_SMEM: u32 = 227 * 1024;

fn rungs() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels/flash-prefill/ladder");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "cu"))
        .collect();
    files.sort();
    files
}

fn name(path: &Path) -> String {
    path.file_name()
        .expect("a file name")
        .to_string_lossy()
        .into_owned()
}

#[test]
fn the_ladder_has_five_rungs_in_order_each_naming_its_idea() {
    let files = rungs();
    let names: Vec<String> = files.iter().map(|p| name(p)).collect();
    assert_eq!(files.len(), 5, "{names:?}");
    for (index, file) in files.iter().enumerate() {
        let rung = index + 1;
        assert!(
            names[index].starts_with(&format!("{rung:02}-")),
            "{names:?}"
        );
        let text = std::fs::read_to_string(file).expect("readable");
        let first = text.lines().next().unwrap_or_default();
        assert!(
            first.starts_with(&format!("// Ladder rung {rung}: ")),
            "{}: the first line names the rung and its idea, found {first:?}",
            names[index]
        );
        assert!(
            text.contains("// Measured on the H200 at C = P = 2048: "),
            "{}: the header gives its measured time",
            names[index]
        );
    }
}

#[test]
fn the_top_rung_has_one_switch_to_plain_tf32() {
    // scripts/gpu-ladder.sh and scripts/gpu-ladder-session.sh make plain TF32
    // by flipping this one line of the last rung.
    let top = rungs().pop().expect("a rung");
    let text = std::fs::read_to_string(&top).expect("readable");
    assert_eq!(
        text.matches("constexpr bool kSplitPrecision = true;")
            .count(),
        1,
        "{}",
        top.display()
    );
    assert!(!text.contains("kSplitPrecision = false;"));
}

/// Checks that `file` is a valid flash-prefill file that compiles without
/// spills and can launch the block it declares; returns its grid layout.
fn compiles_cleanly(file: &Path) -> GridY {
    let label = name(file);
    let source = StudentSource::from_path(file, FLASH_PREFILL)
        .unwrap_or_else(|e| panic!("{label}: not a valid flash-prefill file: {e}"));
    assert_eq!(source.form(), SourceForm::TranslationUnit, "{label}");
    let geometry = source.geometry();
    let kernel = compile(&source, &CompileOptions::default())
        .unwrap_or_else(|error| panic!("{label}: {error}"));
    assert!(!kernel.image.is_empty(), "{label}");
    let usage = kernel.resources.expect("ptxas reports resources");
    assert_eq!(
        (usage.spill_store_bytes, usage.spill_load_bytes),
        (0, 0),
        "{label} spills"
    );
    assert!(
        geometry.threads <= usage.max_threads_per_block,
        "{label}: declares {} threads, can launch {}",
        geometry.threads,
        usage.max_threads_per_block
    );
    assert!(
        usage.static_smem_bytes + geometry.dynamic_smem_bytes <= MAX_BLOCK_SMEM,
        "{label}"
    );
    geometry.grid_y
}

#[test]
fn every_rung_obeys_the_lab_abi_and_compiles_without_spills() {
    for file in rungs() {
        let grid = compiles_cleanly(&file);
        // Rung 1 keeps the lab's one block per query head; the rest share K/V
        // across a KV group.
        let label = name(&file);
        let per_group = !label.starts_with("01-");
        assert_eq!(grid == GridY::KvGroup, per_group, "{label}: grid {grid:?}");
    }
}

#[test]
fn the_kernel_beside_the_ladder_compiles_too() {
    let side = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("kernels/flash-prefill/ladder/side/wmma-3xtf32.cu");
    compiles_cleanly(&side);
}
