use super::*;
use crate::lab::flash_prefill::contract::ENTRY_SIGNATURE;
use crate::lab::flash_prefill::FLASH_PREFILL;

const ENTRY: &str =
    "extern \"C\" __global__ void attention_prefill(const float* q, const float* kCache, \
                     const float* vCache, float* out, int chunkLen, int prefixLen)";

fn tu(body: &str) -> String {
    format!("{ENTRY} {{\n{body}\n}}\n")
}

fn accepted(text: &str) -> StudentSource {
    StudentSource::from_bytes("k.cu", text.as_bytes(), FLASH_PREFILL).expect("should be accepted")
}

fn rejected(text: &[u8]) -> SourceError {
    StudentSource::from_bytes("k.cu", text, FLASH_PREFILL).expect_err("should be rejected")
}

#[test]
fn a_file_without_kernels_is_a_body() {
    let source = accepted("const int h = blockIdx.y;\nout[h] = q[h];\n");
    assert_eq!(source.form(), SourceForm::Body);
    assert_eq!(source.line(2), Some("out[h] = q[h];"));
}

#[test]
fn entry_point_spellings_are_all_accepted() {
    let spellings = [
        tu(""),
        "extern   \"C\"\n__global__\nvoid\nattention_prefill (\n const float *q, const float* __restrict__ k,\n\
         float const* v, float *out, int chunkLen, int prefixLen) {}"
            .into(),
        "__global__ extern \"C\" void attention_prefill(const float* a, const float* b, const float* c, \
         float* d, int e, int f) {}"
            .into(),
        "extern \"C\" {\n__global__ void __launch_bounds__(256) attention_prefill(const float*, const float*, \
         const float*, float*, int, int);\n}\n"
            .into(),
    ];
    for text in spellings {
        let source = accepted(&text);
        assert_eq!(source.form(), SourceForm::TranslationUnit, "{text}");
    }
}

#[test]
fn a_commented_out_kernel_does_not_make_a_translation_unit() {
    let source = accepted("// __global__ void other(int n) {}\nout[0] = 1.0f;");
    assert_eq!(source.form(), SourceForm::Body);
}

#[test]
fn a_kernel_with_another_name_shows_the_expected_signature() {
    let text = "#include <math.h>\n\nextern \"C\" __global__ void my_attention(const float* q,\n  int n) {}\n";
    let error = rejected(text.as_bytes());
    let SourceError::WrongEntryName {
        line,
        ref name,
        ref found,
        ..
    } = error
    else {
        panic!("unexpected {error:?}");
    };
    assert_eq!((line, name.as_str()), (3, "my_attention"));
    assert_eq!(
        found,
        "extern \"C\" __global__ void my_attention(const float* q, int n) {}"
    );
    let message = error.to_string();
    assert!(message.contains(ENTRY_SIGNATURE), "{message}");
    assert!(message.starts_with("k.cu:3:"), "{message}");
}

#[test]
fn wrong_parameter_lists_name_the_difference() {
    let cases = [
        (
            "const float* q, const float* k, const float* v, float* out, int c",
            "takes 5 parameters; the lab passes 6",
        ),
        (
            "const float* q, const float* k, const float* v, double* out, int c, int p",
            "parameter 4 is `double*`, but the lab passes `float*`",
        ),
        (
            "const float* q, const float* k, const float* v, float* out, int c, unsigned p",
            "parameter 6 is `unsigned`",
        ),
    ];
    for (params, problem_start) in cases {
        let text = format!("\n\nextern \"C\" __global__ void attention_prefill({params}) {{}}");
        let error = rejected(text.as_bytes());
        let SourceError::WrongSignature {
            line, ref problem, ..
        } = error
        else {
            panic!("unexpected {error:?}");
        };
        assert_eq!(line, 3);
        assert!(problem.starts_with(problem_start), "{problem}");
        assert!(error.to_string().contains(ENTRY_SIGNATURE));
    }
}

#[test]
fn a_mangled_entry_point_is_rejected() {
    let text = ENTRY.replace("extern \"C\" ", "") + " {}";
    let error = rejected(text.as_bytes());
    assert!(
        matches!(&error, SourceError::WrongSignature { problem, .. } if problem.contains("extern \"C\"")),
        "{error:?}"
    );
}

#[test]
fn bad_bytes_are_located() {
    assert_eq!(
        rejected(b"int a;\nint\0 b;"),
        SourceError::Binary {
            path: "k.cu".into(),
            offset: 10,
            line: 2
        }
    );
    assert_eq!(
        rejected(b"a\nb\nc = \xff;"),
        SourceError::NotUtf8 {
            path: "k.cu".into(),
            offset: 8,
            line: 3
        }
    );
}

#[test]
fn empty_and_comment_only_files_are_rejected() {
    for text in ["", " \n\t\r\n", "// nothing here\n/* or here */\n"] {
        assert_eq!(
            rejected(text.as_bytes()),
            SourceError::Empty {
                path: "k.cu".into()
            }
        );
    }
}

#[test]
fn oversized_input_names_size_and_limit() {
    let big = vec![b' '; MAX_SOURCE_BYTES as usize + 1];
    let error = rejected(&big);
    assert_eq!(
        error,
        SourceError::TooLarge {
            path: "k.cu".into(),
            size: MAX_SOURCE_BYTES + 1,
            limit: MAX_SOURCE_BYTES
        }
    );
    assert!(error.to_string().contains("1048577 bytes"));
}

#[test]
fn a_bad_geometry_declaration_is_a_source_error() {
    let error = rejected(b"x = 1;\n// @flashprof threads=0\n");
    assert!(
        matches!(&error, SourceError::Geometry { source, .. } if source.line == 2),
        "{error:?}"
    );
}

#[test]
fn declared_geometry_is_read() {
    let source = accepted("// @flashprof rows_per_block=32 threads=128\nout[0] = 0.0f;\n");
    assert_eq!(source.geometry().rows_per_block, 32);
    assert_eq!(source.geometry().threads, 128);
}

#[test]
fn a_byte_order_mark_is_dropped() {
    let source = accepted("\u{feff}out[0] = 0.0f;");
    assert_eq!(source.text(), "out[0] = 0.0f;");
}

/// Found by `fuzz/fuzz_targets/source.rs` (input in
/// `fuzz/regressions/source/`): only the first of two marks was stripped, the
/// second hid the `#include` from the include policy, and the accepted text
/// was refused when checked again.
#[test]
fn a_second_byte_order_mark_does_not_hide_an_include_from_the_policy() {
    let text = "\u{feff}\u{feff}#include \"/etc/passwd\"\nout[0] = 0.0f;\n";
    assert!(matches!(
        rejected(text.as_bytes()),
        SourceError::RefusedInclude { line: 1, .. }
    ));
    // A mark later in the text does not hide a directive either.
    let text = "out[0] = 0.0f;\n\u{feff}#include \"/etc/passwd\"\n";
    assert!(matches!(
        rejected(text.as_bytes()),
        SourceError::RefusedInclude { line: 2, .. }
    ));
    // Every leading mark is dropped, so the kept text validates unchanged.
    let source = accepted("\u{feff}\u{feff}out[0] = 0.0f;\n");
    assert_eq!(source.text(), "out[0] = 0.0f;\n");
    assert_eq!(accepted(source.text()), source);
}

#[test]
fn files_on_disk_are_checked_before_reading() {
    let dir = tempfile::tempdir().expect("temp dir");
    let missing = dir.path().join("nope.cu");
    assert!(matches!(
        StudentSource::from_path(&missing, FLASH_PREFILL),
        Err(SourceError::Missing { .. })
    ));
    assert!(matches!(
        StudentSource::from_path(dir.path(), FLASH_PREFILL),
        Err(SourceError::NotAFile { .. })
    ));
    let huge = dir.path().join("huge.cu");
    let file = std::fs::File::create(&huge).expect("create");
    file.set_len(MAX_SOURCE_BYTES * 3).expect("grow");
    assert!(matches!(
        StudentSource::from_path(&huge, FLASH_PREFILL),
        Err(SourceError::TooLarge { size, .. }) if size == MAX_SOURCE_BYTES * 3
    ));
    let good = dir.path().join("good.cu");
    std::fs::write(&good, "out[0] = 0.0f;\n").expect("write");
    let source = StudentSource::from_path(&good, FLASH_PREFILL).expect("readable");
    assert_eq!(source.display_path(), good.display().to_string());
}

#[test]
fn a_body_is_wrapped_and_renumbered() {
    let prepared = accepted("out[0] = INFINITY;").prepared();
    let text = &prepared.text;
    let signature_at = text.find(ENTRY_SIGNATURE).expect("wrapped");
    let marker_at = text
        .find("#line 1 \"k.cu\"\nout[0] = INFINITY;\n}\n")
        .expect("renumbered");
    assert!(signature_at < marker_at);
    assert!(text.starts_with(&format!("#line 1 \"{PRELUDE_FILE}\"\n")));
    assert!(text.contains("#define INFINITY"));
    assert_eq!(prepared.program_name, "k.cu");
}

#[test]
fn the_program_name_nvrtc_gets_is_safe_whatever_the_file_is_called() {
    let source = StudentSource::from_bytes(
        "class/q\"uote\n\u{1b}]0;t\u{7} ü.cu",
        b"out[0] = 0.0f;",
        crate::lab::flash_prefill::FLASH_PREFILL,
    )
    .expect("accepted");
    let prepared = source.prepared();
    assert_eq!(prepared.program_name, "class/q_uote__]0;t_ ü.cu");
    // The `#line` marker carries the same name (diagnostics naming it are
    // given back the display path: `facts::diagnostics`).
    assert!(
        prepared
            .text
            .contains("#line 1 \"class/q_uote__]0;t_ ü.cu\"\n"),
        "{}",
        prepared.text
    );
}

#[test]
fn a_translation_unit_is_not_wrapped() {
    let prepared = accepted(&tu("out[0] = 0.0f;")).prepared();
    assert_eq!(prepared.text.matches("attention_prefill").count(), 1);
    assert!(prepared
        .text
        .contains(&format!("#line 1 \"k.cu\"\n{ENTRY}")));
}

#[test]
fn names_the_file_defines_are_left_out_of_the_prelude() {
    let text = format!(
        "#define INFINITY (1.0f/0.0f)\nconstexpr int DH = 64;\n{}",
        tu("const int HQ = 32;")
    );
    let prelude = accepted(&text).prepared().text;
    let prelude = &prelude[..prelude.find("#line 1 \"k.cu\"").expect("marker")];
    assert!(!prelude.contains("INFINITY"));
    assert!(!prelude.contains("int DH"));
    // HQ is only shadowed inside the kernel, so the file-scope one stays.
    assert!(prelude.contains("constexpr int HQ = 32;"));
    assert!(prelude.contains("NAN"));
}

#[test]
fn paths_with_quotes_and_backslashes_stay_one_line_marker() {
    let source = StudentSource::from_bytes("C:\\lab\\\"x\".cu", b"out[0] = 0.0f;", FLASH_PREFILL)
        .expect("accepted");
    assert!(source
        .prepared()
        .text
        .contains("#line 1 \"C:_lab__x_.cu\"\n"));
}

#[test]
fn a_fifo_is_refused_without_blocking() {
    let dir = tempfile::tempdir().expect("temp dir");
    let fifo = dir.path().join("x.cu");
    crate::sys::make_fifo(&fifo);
    let (sender, result) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = sender.send(StudentSource::from_path(&fifo, FLASH_PREFILL));
    });
    let outcome = result
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("from_path returned instead of blocking on the FIFO");
    match outcome {
        Err(SourceError::NotRegular { kind, .. }) => assert!(kind.contains("FIFO"), "{kind}"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        StudentSource::from_path(std::path::Path::new("/dev/null"), FLASH_PREFILL),
        Err(SourceError::NotRegular { .. })
    ));
}
