//! `flashprof check` names what a kernel keeps between launches, in its
//! table and under `--json`, on a machine without a GPU: the compile-only
//! path reads it off the NVRTC build (docs/JSON.md, `compile.kernel_facts`).

mod cli_support;
use cli_support::{flashprof_without_gpu, memo_kernel, text};

#[test]
fn check_names_a_module_global_memo_without_a_gpu() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("memo.cu"), memo_kernel()).expect("write");
    let run = flashprof_without_gpu(&["check", "memo.cu", "--json", "--no-timing"], dir.path());
    let value: serde_json::Value = serde_json::from_slice(&run.stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", text(&run)));
    assert_eq!(value["compile"]["ok"], true, "{value}");
    let facts = &value["compile"]["kernel_facts"];
    assert_eq!(
        facts["kept"],
        serde_json::json!([{"name": "g_memo", "bytes": 16 << 20}]),
        "{value}"
    );
    assert_eq!(facts["reads_clock"], false);
    assert_eq!(facts["reads_global_timer"], false);
    assert_eq!(facts["eviction_hints"], serde_json::json!([]));
    // Compile only: nothing was graded, and the fact did not fail it.
    assert_eq!(run.status.code(), Some(5), "{}", text(&run));

    let run = flashprof_without_gpu(&["check", "memo.cu", "--no-timing"], dir.path());
    let table = String::from_utf8_lossy(&run.stdout);
    assert!(
        table
            .lines()
            .any(|l| l == "integrity note: keeps 16.0 MiB in `g_memo` between launches"),
        "{table}"
    );
}
