//! Files written for nvcc (a `main`, launch code, host helpers, `printf`,
//! templates, `constexpr` helpers used on both sides, host-only headers)
//! compile for real through NVRTC: flashprof keeps the device side and
//! blanks the host code line for line, so an error in the device part
//! still names the student's own line. Skips cleanly without NVRTC.

use std::path::{Path, PathBuf};

use flashprof::facts::diagnostics::Severity;
use flashprof::gpu::compile::{compile, CompileError, CompileOptions};
use flashprof::lab::flash_prefill::FLASH_PREFILL;
use flashprof::lab::source::{SourceError, SourceForm, StudentSource};

const CORPUS: [&str; 7] = [
    "main_launch.cu",
    "host_helpers.cu",
    "printf_both.cu",
    "template_helper.cu",
    "constexpr_both.cu",
    "host_device_fn.cu",
    "struct_host_methods.cu",
];

/// The line each fixture marks as device code, for the error test.
const MARK: &str = "// flashprof-test: device line";

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/nvcc-style")
        .join(name)
}

fn read(name: &str) -> String {
    std::fs::read_to_string(fixture(name)).expect("fixture")
}

/// Compiles with the real NVRTC (scripts/test.sh provides it).
fn compiled(source: &StudentSource) -> Result<(), CompileError> {
    let kernel = compile(source, &CompileOptions::default())?;
    assert!(!kernel.image.is_empty());
    Ok(())
}

#[test]
fn every_nvcc_style_file_is_checked_and_its_host_code_dropped() {
    for name in CORPUS {
        let text = read(name);
        let source = StudentSource::from_bytes(name, text.as_bytes(), FLASH_PREFILL)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(source.form(), SourceForm::TranslationUnit, "{name}");
        assert!(
            !source.dropped_host_code().is_empty(),
            "{name}: no host code was dropped"
        );
        let prepared = source.prepared();
        // Line for line: the prepared text ends with as many lines as the file.
        assert!(
            prepared.text.lines().count() >= text.lines().count(),
            "{name}"
        );
        assert!(!prepared.text.contains("cudaMalloc("), "{name}");
        assert!(!prepared.text.contains("int main("), "{name}");
    }
}

#[test]
fn every_nvcc_style_file_compiles_with_nvrtc() {
    for name in CORPUS {
        let source = StudentSource::from_path(&fixture(name), FLASH_PREFILL).expect("accepted");
        if let Err(error) = compiled(&source) {
            panic!("{name} did not compile: {error}");
        }
    }
}

#[test]
fn an_error_in_the_device_part_names_the_students_line() {
    for name in CORPUS {
        let text = read(name);
        let line = text
            .lines()
            .position(|l| l.contains(MARK))
            .unwrap_or_else(|| panic!("{name} marks no device line"))
            + 1;
        let broken = text.replacen(MARK, "not_declared_anywhere += 1; //", 1);
        let source = StudentSource::from_bytes(name, broken.as_bytes(), FLASH_PREFILL)
            .expect("still accepted");
        let Err(error) = compiled(&source) else {
            panic!("{name}: compiled with an undeclared identifier");
        };
        let CompileError::Failed { diagnostics, .. } = &error else {
            panic!("{name}: {error}");
        };
        let first = diagnostics
            .iter()
            .find(|d| d.severity == Severity::Error)
            .expect("an error");
        assert_eq!(first.file, name, "{name}: {error}");
        assert_eq!(first.line, line, "{name}: {error}");
        assert!(
            first.message.contains("not_declared_anywhere"),
            "{name}: {}",
            first.message
        );
        assert!(first
            .source_line
            .as_deref()
            .is_some_and(|l| l.contains("not_declared_anywhere")));
    }
}

#[test]
fn a_header_next_to_the_file_is_refused_with_what_to_do() {
    let error = StudentSource::from_path(&fixture("header_next_to_file.cu"), FLASH_PREFILL)
        .expect_err("refused");
    assert!(
        matches!(&error, SourceError::RefusedInclude { line: 3, .. }),
        "{error}"
    );
    let message = error.to_string();
    assert!(message.contains("helpers.cuh"), "{message}");
    assert!(message.contains("copy the device code"), "{message}");
}

#[test]
fn a_device_call_to_a_host_only_function_is_refused_with_its_line() {
    let text = "__host__ float host_scale() { return 0.125f; }\n\
                extern \"C\" __global__ void attention_prefill(const float* q, const float* kCache,\n\
                const float* vCache, float* out, int chunkLen, int prefixLen) {\n\
                out[0] = q[0] * host_scale();\n}\n";
    let error =
        StudentSource::from_bytes("k.cu", text.as_bytes(), FLASH_PREFILL).expect_err("refused");
    assert!(
        matches!(&error, SourceError::HostCode { line: 4, .. }),
        "{error}"
    );
    assert!(error.to_string().contains("__host__ __device__"), "{error}");
}
