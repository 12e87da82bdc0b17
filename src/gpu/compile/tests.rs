//! These tests drive the real NVRTC. Without it (no libnvrtc.so.13 on the
//! library path) each one says why on stderr and returns.

use std::path::{Path, PathBuf};

use super::*;
use crate::facts::kept_state::ModuleVariable;
use crate::facts::resources::{theoretical_occupancy, SmLimits, DEFAULT_TARGET};
use crate::lab::flash_prefill::contract::ENTRY_SIGNATURE;
use crate::lab::flash_prefill::FLASH_PREFILL;
use crate::lab::source::SourceForm;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sources")
}

fn source(path: &str, text: &str) -> StudentSource {
    StudentSource::from_bytes(path, text.as_bytes(), FLASH_PREFILL).expect("valid source")
}

/// Compiles with the default options and the real NVRTC.
fn try_compile(src: &StudentSource) -> Result<CompiledKernel, CompileError> {
    try_compile_with(src, &CompileOptions::default())
}

/// Compiles with the real NVRTC (scripts/test.sh provides it): without it
/// these tests would say nothing, so they fail instead of passing unseen.
fn try_compile_with(
    src: &StudentSource,
    opts: &CompileOptions,
) -> Result<CompiledKernel, CompileError> {
    let result = compile(src, opts);
    if let Err(missing @ CompileError::LibraryMissing { .. }) = &result {
        panic!("{missing}: run the tests through scripts/test.sh");
    }
    result
}

fn only_error(result: Result<CompiledKernel, CompileError>) -> Diagnostic {
    let Err(CompileError::Failed { diagnostics, log }) = result else {
        panic!("expected a failed compile, got {result:?}");
    };
    let errors: Vec<Diagnostic> = diagnostics
        .into_iter()
        .filter(|d| d.severity == Severity::Error)
        .collect();
    assert_eq!(errors.len(), 1, "{log}");
    errors.into_iter().next().expect("one error")
}

/// Eight lines of body; line 7 is whatever the caller passes.
fn body_with_line_7(line_7: &str) -> String {
    let mut lines: Vec<String> = (1..=8).map(|n| format!("// line {n}")).collect();
    lines[0] = "const int h = blockIdx.y;".into();
    lines[6] = line_7.into();
    lines[7] = "out[h] = q[h];".into();
    lines.join("\n")
}

/// A whole file whose line 7 is whatever the caller passes.
fn unit_with_line_7(line_7: &str) -> String {
    format!("#include <cuda_runtime.h>\n\n// helper comment\n\n{ENTRY_SIGNATURE}\n{{\n{line_7}\n    out[0] = q[0];\n}}\n")
}

#[test]
#[ignore = "reads the lab's seed text beside the checkout (../shared/seeds), which a clone lacks"]
fn the_starter_body_from_the_lab_text_compiles_to_a_cubin() {
    let seed = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/seeds/lab-flash-prefill.txt");
    let lab_text = std::fs::read_to_string(&seed)
        .unwrap_or_else(|e| panic!("no lab text at {}: {e}", seed.display()));
    let (_, starter) = lab_text
        .split_once("Starter code\n")
        .expect("the lab text has a starter");
    let src = source("starter.cu", starter);
    assert_eq!(src.form(), SourceForm::Body);
    let result = try_compile(&src);
    let kernel = result.expect("the starter compiles");
    assert_eq!(kernel.format, ImageFormat::Cubin);
    assert!(
        kernel.image.starts_with(b"\x7fELF"),
        "a CUBIN is an ELF file"
    );
    assert!(kernel.diagnostics.is_empty(), "{}", kernel.log);
    let usage = kernel.resources.as_ref().expect("ptxas reported the entry");
    assert!(usage.registers > 0);
    assert_eq!(usage.static_smem_bytes, 0);
    let occupancy =
        theoretical_occupancy(usage, &kernel.geometry, &SmLimits::typical(DEFAULT_TARGET));
    // Once NVRTC is loaded and warm, a recompile costs this much.
    let again = compile(&src, &CompileOptions::default()).expect("compiles again");
    assert_eq!(again.image.len(), kernel.image.len());
    eprintln!(
        "starter: NVRTC {:.1} ms (then {:.1} ms warm) for sm_90; {} registers, {} blocks/SM ({:.0}% occupancy, {:?})",
        kernel.compile_ms,
        again.compile_ms,
        usage.registers,
        occupancy.blocks_per_sm,
        occupancy.fraction * 100.0,
        occupancy.limiter
    );
}

#[test]
fn a_file_with_nvcc_headers_and_math_macros_compiles() {
    let text = "#include <cuda_runtime.h>\n#include <math.h>\n#include <cmath>\n#include <stdio.h>\n\
                #include <cuda_fp16.h>\n#include <stdint.h>\n#include <cfloat>\n"
        .to_owned()
        + ENTRY_SIGNATURE
        + " {\n  const uint32_t i = threadIdx.x;\n  float m = -INFINITY;\n  if (isnan(NAN)) m = fmaxf(m, -FLT_MAX);\n\
           out[i] = expf(q[i] - m) + (float)(HQ * DH);\n}\n";
    let result = try_compile(&source("headers.cu", &text));
    let kernel = result.unwrap_or_else(|e| panic!("{e}"));
    assert!(kernel.diagnostics.is_empty(), "{}", kernel.log);
}

#[test]
fn an_error_on_student_line_7_is_reported_there_in_both_forms() {
    let line_7 = "    float broken = undefined_name + 1.0f;";
    for text in [body_with_line_7(line_7), unit_with_line_7(line_7)] {
        let result = try_compile(&source("student/k.cu", &text));
        let error = only_error(result);
        assert_eq!(error.file, "student/k.cu");
        assert_eq!(error.line, 7);
        assert_eq!(error.column, Some(20));
        assert_eq!(error.source_line.as_deref(), Some(line_7));
        assert!(
            error.message.contains("undefined_name"),
            "{}",
            error.message
        );
    }
}

#[test]
fn warnings_point_at_the_student_line_and_do_not_fail() {
    let line_7 = "    int unused_here = 3;";
    for text in [body_with_line_7(line_7), unit_with_line_7(line_7)] {
        let result = try_compile(&source("w.cu", &text));
        let kernel = result.unwrap_or_else(|e| panic!("{e}"));
        let [warning] = &kernel.diagnostics[..] else {
            panic!("expected one warning: {}", kernel.log);
        };
        assert_eq!(warning.severity, Severity::Warning);
        assert_eq!((warning.file.as_str(), warning.line), ("w.cu", 7));
        assert_eq!(warning.source_line.as_deref(), Some(line_7));
    }
}

#[test]
fn an_unclosed_body_is_blamed_on_the_student_file() {
    let result = try_compile(&source(
        "open.cu",
        "if (threadIdx.x == 0) {\n  out[0] = 1.0f;\n",
    ));
    let error = only_error(result);
    assert_eq!((error.file.as_str(), error.line), ("open.cu", 2));
    assert_eq!(error.message, "expected a \"}\"\nnote: to match this \"{\"");
}

#[test]
fn wrong_names_and_signatures_stop_before_nvrtc() {
    let dir = tempfile::tempdir().expect("temp dir");
    let renamed = dir.path().join("renamed.cu");
    std::fs::write(
        &renamed,
        ENTRY_SIGNATURE.replace("attention_prefill", "attn") + " {}\n",
    )
    .expect("write");
    let error =
        compile_file(&renamed, FLASH_PREFILL, &CompileOptions::default()).expect_err("wrong name");
    assert!(
        matches!(&error, CompileError::Source(SourceError::WrongEntryName { name, .. }) if name == "attn"),
        "{error:?}"
    );
    assert!(error.to_string().contains(ENTRY_SIGNATURE));

    let reshaped = dir.path().join("reshaped.cu");
    std::fs::write(
        &reshaped,
        ENTRY_SIGNATURE.replace(", int prefixLen", "") + " {}\n",
    )
    .expect("write");
    let error = compile_file(&reshaped, FLASH_PREFILL, &CompileOptions::default())
        .expect_err("wrong signature");
    assert!(
        matches!(
            error,
            CompileError::Source(SourceError::WrongSignature { .. })
        ),
        "{error:?}"
    );

    let missing = dir.path().join("missing.cu");
    let error =
        compile_file(&missing, FLASH_PREFILL, &CompileOptions::default()).expect_err("no file");
    assert!(
        matches!(error, CompileError::Source(SourceError::Missing { .. })),
        "{error:?}"
    );
}

#[test]
fn an_entry_point_hidden_by_the_preprocessor_is_missing() {
    let text = format!("#if 0\n{ENTRY_SIGNATURE} {{}}\n#endif\n__global__ void helper() {{}}\n");
    // The file-level check sees the definition; only the compiler knows it is dropped.
    let src = StudentSource::from_bytes("hidden.cu", text.as_bytes(), FLASH_PREFILL);
    let Ok(src) = src else {
        panic!("accepted before compiling: {src:?}");
    };
    let result = try_compile(&src);
    assert_eq!(
        result,
        Err(CompileError::MissingEntryPoint {
            path: "hidden.cu".into(),
            entry: "attention_prefill",
        })
    );
}

#[test]
fn without_a_real_arch_the_image_is_ptx() {
    let opts = CompileOptions::for_arch(None);
    let result = try_compile_with(&source("p.cu", "out[0] = q[0];"), &opts);
    let kernel = result.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(kernel.format, ImageFormat::Ptx);
    assert!(String::from_utf8_lossy(&kernel.image).contains(".entry attention_prefill("));
    assert_eq!(kernel.resources, None);
}

#[test]
fn an_unknown_arch_is_an_option_error() {
    let opts = CompileOptions::for_arch(Some("sm_1".into()));
    let result = try_compile_with(&source("a.cu", "out[0] = q[0];"), &opts);
    assert!(
        matches!(result, Err(CompileError::InvalidOption { .. })),
        "{result:?}"
    );
}

/// Compiles every `.cu` file under `dir` (recursively) and returns how many
/// there were; fails when there are none, so an emptied folder cannot pass.
fn compile_every_cu_under(dir: &Path) -> usize {
    let mut files = Vec::new();
    collect_cu_files(dir, &mut files);
    assert!(!files.is_empty(), "no .cu files under {}", dir.display());
    for file in &files {
        match compile_file(file, FLASH_PREFILL, &CompileOptions::default()) {
            Err(error) => panic!("{}: {error}", file.display()),
            Ok(kernel) => assert!(kernel.resources.is_some(), "{}", file.display()),
        }
    }
    files.len()
}

fn collect_cu_files(dir: &Path, files: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            collect_cu_files(&path, files);
        } else if path.extension().is_some_and(|ext| ext == "cu") {
            files.push(path);
        }
    }
}

#[test]
fn every_fixture_source_compiles() {
    assert!(compile_every_cu_under(&fixtures()) >= 2);
}

#[test]
fn fixtures_cover_both_forms_and_declare_their_geometry() {
    let body = StudentSource::from_path(&fixtures().join("row_per_warp_body.cu"), FLASH_PREFILL)
        .expect("body");
    let unit =
        StudentSource::from_path(&fixtures().join("kv_tile_tu.cu"), FLASH_PREFILL).expect("unit");
    assert_eq!(
        (body.form(), unit.form()),
        (SourceForm::Body, SourceForm::TranslationUnit)
    );
    let result = try_compile(&unit);
    let kernel = result.unwrap_or_else(|e| panic!("{e}"));
    let usage = kernel.resources.expect("resources");
    // qRows 64x64, kTile 32x65, vTile 32x64 floats.
    assert_eq!(usage.static_smem_bytes, (64 * 64 + 32 * 65 + 32 * 64) * 4);
    assert_eq!(usage.barriers, 1);
}

#[test]
fn every_shipped_kernel_compiles() {
    let kernels = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("kernels")
        .join("flash-prefill");
    let bugs = compile_every_cu_under(&kernels.join("bugs"));
    assert!(bugs >= 12, "one planted bug per hazard, found {bugs}");
    for name in ["starter.cu", "reference.cu"] {
        let kernel = compile_file(
            &kernels.join(name),
            FLASH_PREFILL,
            &CompileOptions::default(),
        )
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(kernel.resources.is_some(), "{name} has a resource report");
    }
    let reference = compile_file(
        &kernels.join("reference.cu"),
        FLASH_PREFILL,
        &CompileOptions::default(),
    )
    .expect("compiles");
    assert!(
        reference.geometry.dynamic_smem_bytes > 48 * 1024,
        "the reference declares its geometry"
    );
    let support = FLASH_PREFILL.support().file;
    let oracle = compile_trusted(support.path, support.text, &CompileOptions::default())
        .expect("the lab's float64 reference compiles");
    assert!(!oracle.is_empty());
    let probes = compile_trusted(
        "kernels/probes.cu",
        crate::gpu::device::PROBES_SOURCE,
        &CompileOptions::default(),
    )
    .expect("flashprof's measuring kernels compile");
    assert!(!probes.is_empty());
    // The tensor-core benchmarks must not stop the probes compiling for a
    // GPU without TF32 and BF16 (their bodies are left empty there), and
    // every benchmark is in the image for each target.
    for arch in ["sm_75", "sm_80", "sm_86", "sm_90"] {
        let options = CompileOptions::for_arch(Some(arch.into()));
        let image = compile_trusted(
            "kernels/probes.cu",
            crate::gpu::device::PROBES_SOURCE,
            &options,
        )
        .unwrap_or_else(|e| panic!("the probes compile for {arch}: {e}"));
        for entry in [
            "fma_peak",
            "tf32_peak",
            "bf16_peak",
            "stream_copy",
            "fresh_words",
            "fresh_words_changed",
            "fresh_halves",
            "fresh_halves_changed",
            "fresh_bytes",
            "fresh_bytes_changed",
            "fingerprint_bytes",
        ] {
            assert!(image::defines_function(&image, entry), "{entry} for {arch}");
        }
    }
}

/// A kernel that keeps 160 accumulators live across a loop, under
/// `__launch_bounds__(256, 1)`: ptxas may spend up to 255 registers a thread
/// on it, as long as a block of 256 threads still fits.
const REGISTER_HUNGRY: &str = r#"
#define LIVE 160
extern "C" __global__ void __launch_bounds__(256, 1) attention_prefill(const float* q, const float* kCache, const float* vCache, float* out, int chunkLen, int prefixLen)
{
    float acc[LIVE];
#pragma unroll
    for (int i = 0; i < LIVE; ++i) acc[i] = q[threadIdx.x + i * 256];
    for (int j = 0; j < prefixLen; ++j) {
        const float k = kCache[j];
#pragma unroll
        for (int i = 0; i < LIVE; ++i) acc[i] = fmaf(acc[i], k, vCache[j * LIVE + i]);
    }
#pragma unroll
    for (int i = 0; i < LIVE; ++i) out[threadIdx.x + i * 256] = acc[i];
}
"#;

#[test]
fn heavy_register_use_lowers_the_largest_block() {
    let result = try_compile(&source("hungry.cu", REGISTER_HUNGRY));
    let kernel = result.unwrap_or_else(|e| panic!("{e}"));
    let usage = kernel.resources.expect("ptxas reported the entry");
    let limit = usage.max_threads_per_block;
    eprintln!(
        "register-hungry kernel: {} registers, {} B spilled, at most {limit} threads a block",
        usage.registers,
        usage.spill_bytes()
    );
    assert!(usage.registers > 64, "too few registers to test: {usage:?}");
    // The launch bounds promise that the declared 256 threads fit; the
    // registers forbid the full 1,024.
    assert!((256..1024).contains(&limit), "{usage:?}");
    assert_eq!(limit % 32, 0, "whole warps only");
    // Consistent with the register file: the allowed warps fit in 64K
    // registers at 256-register granularity, and one more warp would not.
    let per_warp = (usage.registers * 32).div_ceil(256) * 256;
    let warps = limit / 32;
    assert!(warps * per_warp <= 65536, "{usage:?}");
    assert!((warps + 1) * per_warp > 65536, "{usage:?}");
}

#[test]
fn a_failure_without_a_placed_diagnostic_carries_the_raw_log() {
    for (path, body) in [
        (
            "big.cu",
            "__shared__ float big[70000];\nbig[threadIdx.x] = q[0];\nout[0] = big[1];",
        ),
        ("a\"b.cu", "out[0] = q[0];"),
    ] {
        let result = try_compile(&source(path, body));
        let Err(CompileError::Failed { diagnostics, log }) = result else {
            // A file name NVRTC accepts as it is compiles: nothing to show.
            assert!(path.contains('"'), "{path}: {result:?}");
            continue;
        };
        assert!(!log.trim().is_empty(), "{path}: NVRTC gave no log");
        let error = diagnostics
            .iter()
            .find(|d| d.severity == Severity::Error)
            .unwrap_or_else(|| panic!("{path}: no error diagnostic from {log:?}"));
        let clean = log.replace('\0', "");
        for line in clean.lines().filter(|l| !l.trim().is_empty()) {
            assert!(
                error.message.contains(line.trim()),
                "{path}: {error:?} / {log:?}"
            );
        }
        assert_eq!(error.line, 0);
    }
}

/// A whole file: `globals` at file scope, then the entry point around `body`.
fn unit_with_globals(globals: &str, body: &str) -> String {
    format!("{globals}\n{ENTRY_SIGNATURE}\n{{\n{body}\n    out[0] = q[0];\n}}\n")
}

/// What the optimized sm_90 build of [`unit_with_globals`] keeps and reads.
fn facts_with_globals(globals: &str, body: &str) -> KernelFacts {
    facts_of(&unit_with_globals(globals, body))
}

/// What the optimized sm_90 build of `text` keeps and reads.
fn facts_of(text: &str) -> KernelFacts {
    facts_for(text, &CompileOptions::default())
}

fn facts_for(text: &str, opts: &CompileOptions) -> KernelFacts {
    try_compile_with(&source("kept.cu", text), opts)
        .unwrap_or_else(|e| panic!("{e}"))
        .facts
}

fn variable(name: &str, bytes: u64) -> ModuleVariable {
    ModuleVariable {
        name: name.into(),
        bytes,
    }
}

#[test]
fn a_module_global_memo_is_kept_with_its_name_and_size() {
    let facts = facts_with_globals(
        "__device__ float g_memo[4 << 20];",
        "    g_memo[threadIdx.x] += q[threadIdx.x];",
    );
    assert_eq!(facts.kept, [variable("g_memo", 16 << 20)]);
    assert_eq!(
        facts.summary().as_deref(),
        Some("keeps 16.0 MiB in `g_memo` between launches")
    );
}

#[test]
fn static_counters_are_kept_at_file_scope_and_in_a_function() {
    // CUDA allows `static` in a kernel only without `__device__`; both
    // live in global memory for the module's lifetime.
    let facts = facts_with_globals(
        "static __device__ unsigned launches;",
        "    static unsigned calls;\n    atomicAdd(&launches, 1u);\n    calls++;",
    );
    assert_eq!(
        facts.kept,
        [
            variable("attention_prefill::calls", 4),
            variable("launches", 4)
        ]
    );
}

#[test]
fn an_initialised_table_the_kernel_writes_is_kept() {
    let facts = facts_with_globals(
        "__device__ int table[4] = {1, 2, 3, 4};",
        "    table[threadIdx.x % 4] += 1;",
    );
    assert_eq!(facts.kept, [variable("table", 16)]);
}

#[test]
fn constant_data_and_read_only_tables_are_not_kept() {
    // `__constant__` memory is not writable from a kernel; a `const` table
    // and the lab's shape constants (`HQ`, `DH`, in the prelude) sit in the
    // same ELF section as writable data, and only the code tells them apart.
    let facts = facts_with_globals(
        "__constant__ float weights[64];\n\
         __device__ const int lut[4] = {5, 6, 7, 8};\n\
         static constexpr float kScale = 0.5f;",
        "    out[threadIdx.x] = weights[threadIdx.x % 64] * kScale + lut[threadIdx.x % 4] + HQ * DH;",
    );
    assert_eq!(facts.kept, []);
}

#[test]
fn the_starter_keeps_and_reads_nothing() {
    let starter = include_str!("../../../kernels/flash-prefill/starter.cu");
    let facts = facts_of(starter);
    assert!(facts.is_empty(), "{facts:?}");
    assert_eq!(facts.summary(), None);
}

#[test]
fn a_global_timer_read_in_inline_asm_is_noted() {
    let facts = facts_with_globals(
        "",
        "    unsigned long long t;\n\
         asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(t));\n\
         if (t == 0) out[1] = 0.0f;",
    );
    assert!(facts.reads_global_timer, "{facts:?}");
    assert!(!facts.reads_clock, "{facts:?}");
    assert_eq!(facts.summary().as_deref(), Some("reads the global timer"));
}

#[test]
fn an_l2_evict_last_load_in_inline_asm_is_noted() {
    // ptxas takes `ld.global.L2::evict_last` only for 256-bit loads, which
    // need sm_100; on Hopper the same hint goes through a cache policy.
    let blackwell = unit_with_globals(
        "",
        "    unsigned long long a, b, c, d;\n\
         asm volatile(\"ld.global.L2::evict_last.v4.b64 {%0, %1, %2, %3}, [%4];\"\n\
             : \"=l\"(a), \"=l\"(b), \"=l\"(c), \"=l\"(d) : \"l\"(q));\n\
         out[1] = (float)(a + b + c + d);",
    );
    let facts = facts_for(&blackwell, &CompileOptions::for_arch(Some("sm_100".into())));
    assert_eq!(facts.eviction_hints, ["L2::evict_last"]);
    assert_eq!(
        facts.summary().as_deref(),
        Some("eviction hints: L2::evict_last")
    );
    let hopper = unit_with_globals(
        "",
        "    unsigned long long policy;\n    float v;\n\
         asm volatile(\"createpolicy.fractional.L2::evict_last.b64 %0, 1.0;\" : \"=l\"(policy));\n\
         asm volatile(\"ld.global.L2::cache_hint.f32 %0, [%1], %2;\" : \"=f\"(v) : \"l\"(q), \"l\"(policy));\n\
         out[1] = v;",
    );
    let facts = facts_of(&hopper);
    assert_eq!(
        facts.eviction_hints,
        ["createpolicy", "L2::evict_last", "L2::cache_hint"]
    );
}

/// A flash-lab kernel that computes through bf16 and both FP8 formats.
fn bf16_fp8_kernel() -> String {
    "#include <cuda_bf16.h>\n#include <cuda_fp8.h>\n#include <cuda_fp16.h>\n".to_owned()
        + ENTRY_SIGNATURE
        + " {\n  const int i = threadIdx.x;\n  __nv_fp8_e4m3 a(q[i]);\n  __nv_fp8_e5m2 b(kCache[i]);\n\
           __nv_bfloat16 x = __float2bfloat16_rn(float(a) * float(b));\n\
           out[i] = __bfloat162float(__hmul(x, x)) + __half2float(__float2half(vCache[i]));\n}\n"
}

#[test]
fn a_bf16_and_fp8_kernel_compiles_with_the_real_headers() {
    let search = crate::gpu::headers::current();
    let Some(headers) = &search.found else {
        panic!(
            "{} (refused: {:?}): scripts/test.sh fetches them",
            crate::gpu::headers::missing_message("cuda_fp8.h"),
            search.refused
        );
    };
    let result = try_compile(&source("fp8.cu", &bf16_fp8_kernel()));
    let kernel = result.unwrap_or_else(|e| panic!("{e}"));
    assert!(kernel.diagnostics.is_empty(), "{}", kernel.log);
    eprintln!("compiled against {headers}");
}

#[test]
fn without_the_headers_fp16_keeps_its_stand_in_and_bf16_is_refused_with_the_fix() {
    let opts = CompileOptions::default();
    let fp16_only =
        "#include <cuda_fp16.h>\n".to_owned() + ENTRY_SIGNATURE + " { out[0] = q[0]; }\n";
    compile_with_headers(&source("fp32.cu", &fp16_only), &opts, None)
        .unwrap_or_else(|e| panic!("{e}"));
    let refused = compile_with_headers(&source("fp8.cu", &bf16_fp8_kernel()), &opts, None)
        .expect_err("no headers, no bf16");
    let CompileError::HeadersMissing { path, header, .. } = &refused else {
        panic!("{refused:?}");
    };
    assert_eq!((path.as_str(), *header), ("fp8.cu", "cuda_bf16.h"));
    let message = refused.to_string();
    assert!(
        message.contains(crate::gpu::headers::HEADERS_FIX),
        "{message}"
    );
}

#[test]
fn the_fp8_labs_kernels_compile_with_the_headers_and_are_refused_with_the_fix_without() {
    use crate::lab::paged_prefill::PAGED_PREFILL;
    use crate::lab::paged_prefill_fp8::PAGED_PREFILL_FP8;
    let opts = CompileOptions::default();
    let shipped = |lab: crate::lab::definition::LabRef, file: &str, text: &str| {
        StudentSource::from_bytes(file, text.as_bytes(), lab).expect("valid source")
    };
    let starter = shipped(
        PAGED_PREFILL_FP8,
        "starter.cu",
        include_str!("../../../kernels/paged-prefill-fp8/starter.cu"),
    );
    let reference = shipped(
        PAGED_PREFILL_FP8,
        "reference.cu",
        include_str!("../../../kernels/paged-prefill-fp8/reference.cu"),
    );
    for kernel in [&starter, &reference] {
        try_compile(kernel).unwrap_or_else(|e| panic!("{}: {e}", kernel.display_path()));
        let refused = compile_with_headers(kernel, &opts, None).expect_err("no headers");
        assert!(
            matches!(refused, CompileError::HeadersMissing { .. }),
            "{refused:?}"
        );
        assert!(
            refused
                .to_string()
                .contains(crate::gpu::headers::HEADERS_FIX),
            "{refused}"
        );
    }
    // The paged family's float64 references (the FP8 lab's and the fp32
    // one's, each behind the family's tiled body) include no header, so they
    // compile either way, into the one function each names.
    for lab in [PAGED_PREFILL_FP8, PAGED_PREFILL] {
        let support = lab.support();
        assert!(support.file.text.contains("namespace tiled_oracle"));
        let oracle = compile_trusted(support.file.path, support.file.text, &opts)
            .unwrap_or_else(|e| panic!("{}'s float64 reference: {e}", lab.name()));
        assert!(image::defines_function(&oracle, support.oracle_f64));
    }
    // The fp32 labs' shipped kernels need no header this machine lacks.
    for (lab, text) in [
        (
            PAGED_PREFILL,
            include_str!("../../../kernels/paged-prefill/starter.cu"),
        ),
        (
            FLASH_PREFILL,
            include_str!("../../../kernels/flash-prefill/starter.cu"),
        ),
    ] {
        compile_with_headers(&shipped(lab, "starter.cu", text), &opts, None)
            .unwrap_or_else(|e| panic!("{e}"));
    }
}

#[test]
fn a_missing_nvrtc_is_told_the_fetch_command_first_and_the_pip_line_second() {
    let hint = library_hint();
    let fetch = hint.find("fix: flashprof fetch-cuda").expect(&hint);
    let pip = hint.find(crate::gpu::found::NVRTC_PIP).expect(&hint);
    assert!(fetch < pip, "{hint}");
    assert!(hint.contains("flashprof doctor"), "{hint}");
}

/// Every SASS instruction of the entry point of `kernel`, compiled from
/// `src`, charged to a line of the student's file or to flashprof's own
/// code: (student line, the frames it was reached through) per instruction,
/// `None` for flashprof's own. Fails on an instruction the table does not
/// place, a line past the file's end, or a file that is neither the
/// student's, the prelude, nor a header.
fn charged_lines(
    src: &StudentSource,
    kernel: &CompiledKernel,
) -> Vec<Option<(u32, Vec<line_table::Frame>)>> {
    use line_table::{attribute, Attribution, LineTable, SASS_INSTRUCTION_BYTES};
    let table = LineTable::from_cubin(&kernel.image)
        .unwrap_or_else(|e| panic!("{}: {e}", src.display_path()));
    let entry = src.lab().abi().entry_point;
    let bytes = table
        .functions()
        .find(|(name, _)| *name == entry)
        .map(|(_, bytes)| bytes)
        .unwrap_or_else(|| panic!("{}: no line table for {entry}", src.display_path()));
    assert!(bytes > 0, "{}", src.display_path());
    let student = src.marker_name();
    let lines = src.text().lines().count() as u32;
    (0..bytes)
        .step_by(SASS_INSTRUCTION_BYTES as usize)
        .map(|offset| {
            let frames = table.frames(entry, offset).unwrap_or_else(|| {
                panic!("{}: {entry}+{offset:#x} is not placed", src.display_path())
            });
            let outermost = &frames.last().expect("a frame").file;
            assert!(
                line_table::is_file(outermost, &student)
                    || line_table::is_file(outermost, crate::lab::source::PRELUDE_FILE),
                "{}: {entry}+{offset:#x} comes from {frames:?}",
                src.display_path()
            );
            match attribute(&frames, &student, lines) {
                Attribution::Student { line, through } => {
                    assert!(
                        (1..=lines).contains(&line),
                        "{}: {entry}+{offset:#x} charged to line {line} of {lines}",
                        src.display_path()
                    );
                    Some((line, through))
                }
                Attribution::Own => None,
            }
        })
        .collect()
}

/// The labs' shipped kernels (starters, references, ladder rungs, walks,
/// bugs, cheats, benchmarks): every instruction of each build is charged to
/// a line of that file or to flashprof's own code, and most to the file.
#[test]
fn every_shipped_kernel_s_instructions_are_charged_to_its_own_lines() {
    use rayon::prelude::*;
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels");
    let mut kernels = Vec::new();
    for lab in crate::lab::registry::labs() {
        let mut files = Vec::new();
        collect_cu_files(&root.join(lab.name()), &mut files);
        // The lab's trusted float64 reference and flashprof's measuring
        // kernels are not student files.
        files.retain(|f| {
            let name = f.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name != "support.cu" && !name.ends_with("-probe.cu")
        });
        assert!(files.len() >= 3, "{}: {files:?}", lab.name());
        kernels.extend(files.into_iter().map(|file| (lab, file)));
    }
    assert!(kernels.len() >= 60, "{} kernels", kernels.len());
    // NVRTC compiles side by side: every kernel on its own core.
    kernels.par_iter().for_each(|(lab, file)| {
        let src = StudentSource::from_path(file, crate::lab::definition::LabRef(*lab))
            .expect("valid source");
        let kernel = try_compile(&src).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let charged = charged_lines(&src, &kernel);
        let student = charged.iter().filter(|c| c.is_some()).count();
        assert!(
            student * 2 > charged.len(),
            "{}: only {student} of {} instructions on the file's lines",
            file.display(),
            charged.len()
        );
    });
}

/// A helper on lines 1-5 and the entry point calling it on line 9 (lines
/// 6-10).
fn helper_and_entry() -> String {
    format!(
        "__device__ float soften(float x, float y) {{\n\
         float z = x * y;\n\
         if (z > 1.0f) z = sqrtf(z);\n\
         return z + x;\n\
         }}\n\
         {ENTRY_SIGNATURE}\n\
         {{\n\
         const int i = blockIdx.x * blockDim.x + threadIdx.x;\n\
         out[i] = soften(q[i], kCache[i]);\n\
         }}\n"
    )
}

/// A student helper inlined into the kernel keeps its own lines (its chain
/// names the call); the kernel's lines are its own, in both forms.
#[test]
fn an_inlined_helper_keeps_its_lines_and_names_its_call() {
    let text = helper_and_entry();
    let src = source("helper.cu", &text);
    let kernel = try_compile(&src).expect("compiles");
    let charged = charged_lines(&src, &kernel);
    let lines: std::collections::BTreeSet<u32> =
        charged.iter().flatten().map(|(l, _)| *l).collect();
    assert!(lines.is_subset(&[2, 3, 4, 6, 8, 9, 10].into()), "{lines:?}");
    assert!(lines.contains(&3) && lines.contains(&9), "{lines:?}");
    // The helper's rows carry the call they were inlined at.
    let table = line_table::LineTable::from_cubin(&kernel.image).expect("table");
    let inlined = (0..4096)
        .step_by(16)
        .filter_map(|offset| table.frames("attention_prefill", offset))
        .find(|frames| frames.len() == 2 && frames[0].line == 3)
        .expect("an instruction of line 3 inlined at line 9");
    assert_eq!(inlined[1].line, 9);
    assert!(
        inlined[0]
            .inlined_function
            .as_deref()
            .is_some_and(|name| name.contains("soften")),
        "{inlined:?}"
    );

    // A body: the wrapper is flashprof's, every line of the body the student's.
    let body = "const int i = blockIdx.x * blockDim.x + threadIdx.x;\n\
                float v = q[i] * 2.0f;\n\
                out[i] = v + kCache[i];\n";
    let src = source("body.cu", body);
    let kernel = try_compile(&src).expect("compiles");
    let lines: std::collections::BTreeSet<u32> = charged_lines(&src, &kernel)
        .into_iter()
        .flatten()
        .map(|(l, _)| l)
        .collect();
    assert!(lines.contains(&3), "{lines:?}");
    assert!(lines.is_subset(&[1, 2, 3].into()), "{lines:?}");
}

/// The FP8 lab's reference decodes its cache with the CUDA headers'
/// intrinsics, inlined: their code is charged to the student's lines that
/// call them, with the header named on the way.
#[test]
fn inlined_header_intrinsics_are_charged_to_the_calling_line() {
    let lab = crate::lab::registry::find("paged-prefill-fp8").expect("the FP8 lab");
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels/paged-prefill-fp8/reference.cu");
    let src =
        StudentSource::from_path(&file, crate::lab::definition::LabRef(lab)).expect("valid source");
    let kernel = try_compile(&src).expect("compiles");
    let through_headers: Vec<(u32, Vec<line_table::Frame>)> = charged_lines(&src, &kernel)
        .into_iter()
        .flatten()
        .filter(|(_, through)| {
            through.iter().any(|f| {
                f.file
                    .rsplit('/')
                    .next()
                    .is_some_and(|name| name.starts_with("cuda_fp8"))
            })
        })
        .collect();
    // Its helper `fp8x2` calls `__nv_cvt_fp8x2_to_halfraw2` on line 60.
    let line_60 = src.line(60).expect("line 60");
    assert!(line_60.contains("__nv_cvt_fp8x2_to_halfraw2"), "{line_60}");
    assert!(
        through_headers.iter().any(|(line, _)| *line == 60),
        "{:?}",
        through_headers
            .iter()
            .map(|(line, _)| line)
            .collect::<Vec<_>>()
    );
    for (line, through) in &through_headers {
        let text = src.line(*line as usize).expect("a line of the file");
        assert!(
            !text.trim().is_empty(),
            "line {line} is blank; through {through:?}"
        );
    }
}

/// Two kernels in one file: each sequence's inlined-at rows count from its
/// own start, so each kernel's inlined code names a call in its own body.
#[test]
fn inlined_calls_are_found_in_their_own_kernel_s_sequence() {
    let text = helper_and_entry()
        + "extern \"C\" __global__ void other(const float* a, float* b)\n\
           {\n\
           const int i = threadIdx.x;\n\
           b[i] = soften(a[i], a[i + 1]) * 3.0f;\n\
           }\n";
    let src = source("two.cu", &text);
    let kernel = try_compile(&src).expect("compiles");
    let table = line_table::LineTable::from_cubin(&kernel.image).expect("table");
    for (function, body) in [("attention_prefill", 7..=10), ("other", 12..=15)] {
        let bytes = table
            .functions()
            .find(|(name, _)| *name == function)
            .map(|(_, bytes)| bytes)
            .unwrap_or_else(|| panic!("{function} has a line table"));
        let inlined: Vec<Vec<line_table::Frame>> = (0..bytes)
            .step_by(16)
            .filter_map(|offset| table.frames(function, offset))
            .filter(|frames| frames.len() > 1)
            .collect();
        assert!(!inlined.is_empty(), "{function} inlines soften");
        for frames in inlined {
            let call = frames.last().expect("the outermost frame").line;
            assert!(body.contains(&call), "{function}: {frames:?}");
        }
    }
}

/// Every build flashprof asks NVRTC for: optimized and each quick build,
/// for a real arch, a virtual one and none.
fn every_build_option() -> Vec<CompileOptions> {
    let arches = [
        Some("sm_90".to_owned()),
        Some("compute_90".to_owned()),
        None,
    ];
    let builds = std::iter::once(Build::Optimized).chain(QuickBuild::ALL.map(Build::Quick));
    builds
        .flat_map(|build| {
            arches.iter().map(move |arch| CompileOptions {
                arch: arch.clone(),
                build,
            })
        })
        .collect()
}

#[test]
fn nvrtc_is_never_asked_for_relocatable_device_code() {
    // Device-side launches (dynamic parallelism, device graph launches) need
    // separate compilation; without it a kernel cannot start work the
    // worker's events do not bracket (docs/INTEGRITY.md).
    let separate_compilation = [
        "-rdc",
        "--relocatable-device-code",
        "-dc",
        "--device-c",
        "-dlto",
        "--dlink-time-opt",
        "-ewp",
        "--extensible-whole-program",
    ];
    for options in every_build_option() {
        for flag in options.flags() {
            let name = flag.split('=').next().unwrap_or_default();
            assert!(
                !separate_compilation.contains(&name),
                "{flag} in {options:?}"
            );
        }
    }
}

#[test]
fn nvrtc_itself_refuses_a_launch_from_the_gpu_under_the_student_flags() {
    // The source scan refuses `<<<` in device code before NVRTC sees it;
    // this is the second wall: NVRTC, under exactly the flags a student's
    // file gets, handed the launch directly. The control shows the wall is
    // the missing separate compilation: with `-rdc=true` the same text builds.
    assert!(
        nvrtc::library_present(),
        "run the tests through scripts/test.sh"
    );
    let text = "__global__ void child(float* out) { out[0] = 1.0f; }\n\
                extern \"C\" __global__ void parent(float* out) { child<<<1, 1>>>(out); }\n";
    let builds = |flags: Vec<String>| {
        let program = Program::create(
            c_string(text).unwrap(),
            c_string("launcher.cu").unwrap(),
            Vec::new(),
        )
        .unwrap();
        program.compile(&c_strings(flags).unwrap()).is_ok()
    };
    for options in every_build_option() {
        let flags = student_flags(&options);
        assert!(
            !builds(flags.clone()),
            "{options:?} compiled a device-side launch"
        );
        let control = flags.into_iter().chain(["-rdc=true".to_owned()]).collect();
        assert!(builds(control), "{options:?}: the control did not build");
    }
}
