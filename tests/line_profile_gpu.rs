//! The line profile's collector on a real GPU (ignored here:
//! scripts/gpu-tests.sh runs it with `--ignored`). A flash-lab file whose
//! kernel reads an unpadded shared tile down a column (a 32-way bank
//! conflict) and reads the cache with a stride (uncoalesced) is sampled
//! (PC Sampling) and counted (SASS Metrics) through CUPTI, then summed per
//! line through the cubin's line table: each finding lands on its own line.

use std::time::Instant;

use flashprof::gpu::compile::line_table::{attribute, Attribution, LineTable};
use flashprof::gpu::compile::{compile, CompileOptions};
use flashprof::gpu::cupti::lines::LineSampler;
use flashprof::gpu::cupti::Cupti;
use flashprof::gpu::device;
use flashprof::grade::lines::{by_line, merge, reason_words, LineKey};
use flashprof::lab::flash_prefill::contract::ENTRY_SIGNATURE;
use flashprof::lab::flash_prefill::FLASH_PREFILL;
use flashprof::lab::source::StudentSource;

/// The file, numbered so each line's role is known (line 1 is the signature).
fn conflicted_kernel() -> String {
    [
        ENTRY_SIGNATURE,
        "{",
        "    __shared__ float tile[32][32];",
        "    const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 31;",
        "    tile[warp][lane] = q[threadIdx.x];",
        "    __syncthreads();",
        "    float v = tile[lane][warp];",
        "    const float s = kCache[lane * 64];",
        "    for (int i = 0; i < 64; ++i) v = v * 1.0001f + s;",
        "    if (v == 12345.0f) out[0] = v;",
        "}",
    ]
    .join("\n")
        + "\n"
}

const CONFLICT_LINE: u32 = 7;
const STRIDED_LINE: u32 = 8;

#[test]
#[ignore = "needs a GPU with CUPTI: scripts/gpu-tests.sh runs it with --ignored"]
fn a_bank_conflict_and_an_uncoalesced_load_show_on_their_own_lines() {
    let text = conflicted_kernel();
    let src = StudentSource::from_bytes("conflicted.cu", text.as_bytes(), FLASH_PREFILL)
        .expect("valid source");
    let kernel = compile(&src, &CompileOptions::default()).expect("compiles");
    let gpu = device::open(0).expect("a GPU");
    let entry = FLASH_PREFILL.abi().entry_point;
    let loaded = gpu
        .load(&kernel.image, entry, kernel.geometry)
        .expect("loads");
    let case = FLASH_PREFILL.timing_case(&[]).expect("the timing case");
    let data = FLASH_PREFILL.generate(&case, 7).expect("inputs");
    let mut ws = gpu
        .workspace(FLASH_PREFILL, &data, 0x7fc0_0000)
        .expect("workspace");
    let mut launch = || -> anyhow::Result<()> {
        gpu.launch(&loaded, &mut ws)
            .and_then(|()| gpu.synchronize())
            .map_err(|e| anyhow::anyhow!("{e}"))
    };
    launch().expect("a plain launch first");

    let cupti = Cupti::load().expect("CUPTI");
    let mut sampler = LineSampler::enable(&cupti, gpu.context()).expect("the sampler");
    let started = Instant::now();
    let sampled = sampler
        .sample(entry, 10, 8192, &mut launch)
        .expect("PC sampling");
    let sample_ms = started.elapsed().as_secs_f64() * 1e3;
    let started = Instant::now();
    let counted = sampler.count(entry, &mut launch).expect("SASS metrics");
    let count_ms = started.elapsed().as_secs_f64() * 1e3;
    println!(
        "chip {}: {} samples ({} dropped) over {} PCs in {sample_ms:.1} ms; {} instructions counted in {count_ms:.1} ms",
        sampler.chip(),
        sampled.total_samples,
        sampled.dropped_samples,
        sampled.readings.len(),
        counted.len()
    );
    assert!(sampled.total_samples > 0);
    assert!(!counted.is_empty());

    let table = LineTable::from_cubin(&kernel.image).expect("line table");
    let lines = text.lines().count() as u32;
    let student = src.marker_name();
    let charge = |offset: u64| {
        let frames = table.frames(entry, offset)?;
        Some(match attribute(&frames, &student, lines) {
            Attribution::Student { line, .. } => LineKey::Student(line),
            Attribution::Own => LineKey::Own,
        })
    };
    let rows = by_line(&merge(sampled.readings, counted), charge);
    for row in &rows {
        println!(
            "{:?}\t{:5.1}%\t{}\texecuted {}\tshared {}/{}\tsectors {}/{}\t{}",
            row.line,
            row.share * 100.0,
            row.main_reason().map(reason_words).unwrap_or_default(),
            row.counts.executed,
            row.counts.shared_wavefronts,
            row.counts.shared_wavefronts_ideal,
            row.counts.global_sectors,
            row.counts.global_sectors_ideal,
            row.findings().join("; ")
        );
    }
    let findings = |line: u32| -> Vec<String> {
        rows.iter()
            .find(|r| r.line == LineKey::Student(line))
            .map(|r| r.findings())
            .unwrap_or_default()
    };
    let conflict = findings(CONFLICT_LINE);
    assert!(
        conflict
            .iter()
            .any(|f| f.starts_with("32-way bank conflict")),
        "{conflict:?}"
    );
    let strided = findings(STRIDED_LINE);
    assert!(
        strided
            .iter()
            .any(|f| f.ends_with("the global sectors a coalesced access needs")),
        "{strided:?}"
    );
    // Neither finding appears on any other line.
    for row in &rows {
        if row.line != LineKey::Student(CONFLICT_LINE) {
            assert!(
                !row.findings().iter().any(|f| f.contains("bank conflict")),
                "{row:?}"
            );
        }
        if row.line != LineKey::Student(STRIDED_LINE) {
            assert!(
                !row.findings().iter().any(|f| f.contains("global sectors")),
                "{row:?}"
            );
        }
    }
}
