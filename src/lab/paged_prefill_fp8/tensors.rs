//! An FP8 case from tensors on disk (a TA's own batch) or embedded (the
//! golden cases), through the family's schema
//! ([`crate::lab::paged::tensors`]).
//!
//! The bf16 tensors (`q.npy`, `k_new.npy`, `v_new.npy`) are float32 arrays
//! whose every value is exactly a bf16 value (NumPy has no bfloat16: write
//! `torch_tensor.float().numpy()`); a value that is not is refused naming
//! the file and its first such index, since the kernel would receive a
//! different number than the oracle read. The caches are uint8 arrays of
//! FP8 bytes, their format given by the case (the bytes cannot say). The
//! int32 files and the optional ones go through the family's checks.

use std::path::Path;

use super::{Batch, Inputs, KvFormat, BLOCK, DH, HKV, HQ, LAYOUT, X};
use crate::lab::npy;
use crate::lab::paged::recipe::{CaseInputs, PagedCaseError};
use crate::lab::paged::tensors::{self, Dim, Element, TensorFiles, TensorSpec};

/// The bf16 and FP8 files, in the order they are read.
pub const SCHEMA: [TensorSpec; 5] = [
    TensorSpec {
        file: "q.npy",
        element: Element::Bf16,
        shape: &[Dim::Named("T"), Dim::Is(HQ), Dim::Is(DH)],
        note: "",
    },
    TensorSpec {
        file: "k_new.npy",
        element: Element::Bf16,
        shape: &[Dim::Named("T"), Dim::Is(HKV), Dim::Is(DH)],
        note: "",
    },
    TensorSpec {
        file: "v_new.npy",
        element: Element::Bf16,
        shape: &[Dim::Named("T"), Dim::Is(HKV), Dim::Is(DH)],
        note: "",
    },
    TensorSpec {
        file: "k_cache.npy",
        element: Element::U8,
        shape: &[Dim::Named("numBlocks"), Dim::Is(HKV), Dim::Is(DH / X), Dim::Is(BLOCK), Dim::Is(X)],
        note: "uint8 FP8 bytes, x-packed, X = 16",
    },
    TensorSpec {
        file: "v_cache.npy",
        element: Element::U8,
        shape: &[Dim::Named("numBlocks"), Dim::Is(HKV), Dim::Is(DH), Dim::Is(BLOCK)],
        note: "uint8",
    },
];

/// Loads and validates the case files in `dir`; `window`, `format` and the
/// `(kScale, vScale)` come from the case recipe.
pub fn load_dir(
    dir: &Path,
    window: i32,
    format: KvFormat,
    scales: (f32, f32),
) -> Result<CaseInputs<Inputs>, PagedCaseError> {
    load(&TensorFiles::in_dir(dir, "a case"), window, format, scales)
}

/// Loads from named byte buffers (the embedded golden cases).
pub fn load_bytes(
    files: &[(&str, &[u8])],
    window: i32,
    format: KvFormat,
    scales: (f32, f32),
) -> Result<CaseInputs<Inputs>, PagedCaseError> {
    load(&TensorFiles::embedded(files, "a case"), window, format, scales)
}

fn load(
    files: &TensorFiles,
    window: i32,
    format: KvFormat,
    (k_scale, v_scale): (f32, f32),
) -> Result<CaseInputs<Inputs>, PagedCaseError> {
    let mut read = tensors::read(files, &SCHEMA, &[])?;
    let (total, num_blocks) = (read.dim("T"), read.dim("numBlocks"));
    let batch = tensors::prefill_batch(files, LAYOUT, total, num_blocks, window)?;
    let alibi_slopes = tensors::alibi(files)?;
    let expected = tensors::expected(files, total, DH)?;
    Ok(CaseInputs {
        inputs: Inputs {
            batch: Batch {
                alibi: alibi_slopes.is_some(),
                ..batch
            },
            format,
            k_scale,
            v_scale,
            q: read.f32s("q.npy"),
            k_new: read.f32s("k_new.npy"),
            v_new: read.f32s("v_new.npy"),
            k_cache: read.bytes("k_cache.npy"),
            v_cache: read.bytes("v_cache.npy"),
            alibi_slopes,
        },
        expected,
    })
}

/// The `.npy` files of `inputs` (with `expected` when given), as name -> bytes:
/// what a TA's script writes, and what the tests load back.
pub fn encode(inputs: &Inputs, expected: Option<&[f64]>) -> Vec<(&'static str, Vec<u8>)> {
    let b = &inputs.batch;
    let (t, s) = (b.total_new(), b.num_seqs());
    let ok = "shapes follow the batch";
    let mut files = vec![
        ("q.npy", npy::encode_f32(&[t, HQ, DH], &inputs.q).expect(ok)),
        (
            "k_new.npy",
            npy::encode_f32(&[t, HKV, DH], &inputs.k_new).expect(ok),
        ),
        (
            "v_new.npy",
            npy::encode_f32(&[t, HKV, DH], &inputs.v_new).expect(ok),
        ),
        (
            "k_cache.npy",
            npy::encode_u8(&[b.num_blocks, HKV, DH / X, BLOCK, X], &inputs.k_cache).expect(ok),
        ),
        (
            "v_cache.npy",
            npy::encode_u8(&[b.num_blocks, HKV, DH, BLOCK], &inputs.v_cache).expect(ok),
        ),
        (
            "block_table.npy",
            npy::encode_i32(&[s, b.max_blocks_per_seq], &b.block_table).expect(ok),
        ),
        (
            "q_start.npy",
            npy::encode_i32(&[s + 1], &b.q_start).expect(ok),
        ),
        ("seq_len.npy", npy::encode_i32(&[s], &b.seq_len).expect(ok)),
    ];
    if let Some(slopes) = &inputs.alibi_slopes {
        files.push((
            "alibi_slopes.npy",
            npy::encode_f32(&[HQ], slopes).expect(ok),
        ));
    }
    if let Some(e) = expected {
        files.push(("expected.npy", npy::encode_f64(&[t, HQ, DH], e).expect(ok)));
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::paged_prefill_fp8::LAYOUT;
    use crate::lab::paged_prefill_fp8::cases::embedded_cases;

    fn sample() -> Inputs {
        let spec = embedded_cases().into_iter().find(|c| c.alibi).unwrap();
        crate::lab::paged_prefill_fp8::cases::generate(&spec, 5).unwrap().inputs
    }

    fn load(
        files: &[(&'static str, Vec<u8>)],
        inputs: &Inputs,
    ) -> Result<CaseInputs<Inputs>, PagedCaseError> {
        let refs: Vec<(&str, &[u8])> = files.iter().map(|(n, b)| (*n, b.as_slice())).collect();
        load_bytes(
            &refs,
            inputs.batch.sliding_window,
            inputs.format,
            (inputs.k_scale, inputs.v_scale),
        )
    }

    #[test]
    fn a_directory_round_trips_into_the_same_inputs() {
        let inputs = sample();
        let dir = tempfile::tempdir().unwrap();
        for (name, bytes) in encode(&inputs, None) {
            std::fs::write(dir.path().join(name), bytes).unwrap();
        }
        let scales = (inputs.k_scale, inputs.v_scale);
        let loaded = load_dir(
            dir.path(),
            inputs.batch.sliding_window,
            inputs.format,
            scales,
        )
        .unwrap();
        assert_eq!(loaded.inputs, inputs);
        assert!(loaded.expected.is_none());
    }

    #[test]
    fn a_value_that_is_not_bf16_is_refused_at_its_index() {
        let mut inputs = sample();
        let at = LAYOUT.head_index(3, 17, 100);
        inputs.q[at] = 0.1;
        let err = load(&encode(&inputs, None), &inputs)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("q.npy: element [3, 17, 100] is 0.1: not a bf16 value"),
            "{err}"
        );
        let mut inputs = sample();
        inputs.v_new[5] = f32::NAN;
        let err = load(&encode(&inputs, None), &inputs)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("v_new.npy: element [0, 0, 5] is NaN: not finite"),
            "{err}"
        );
    }

    #[test]
    fn caches_must_be_uint8_of_the_fp8_shapes() {
        let inputs = sample();
        let mut files = encode(&inputs, None);
        let n = inputs.batch.num_blocks;
        files[3].1 = npy::encode_u8(&[n, 8, 16, 16, 8], &inputs.k_cache).unwrap();
        let err = load(&files, &inputs).unwrap_err().to_string();
        assert!(
            err.contains("k_cache.npy: shape") && err.contains("X = 16"),
            "{err}"
        );
        let mut files = encode(&inputs, None);
        let floats: Vec<f32> = inputs.v_cache.iter().map(|&b| f32::from(b)).collect();
        files[4].1 = npy::encode_f32(&[n, 8, 128, 16], &floats).unwrap();
        let err = load(&files, &inputs).unwrap_err().to_string();
        assert!(
            err.contains("v_cache.npy") && err.contains("`<f4`, expected `|u1`"),
            "{err}"
        );
    }

    #[test]
    fn the_int32_files_go_through_the_second_labs_checks() {
        let inputs = sample();
        let mut files = encode(&inputs, None);
        let mut table = inputs.batch.block_table.clone();
        table[1] = -1;
        let s = inputs.batch.num_seqs();
        files[5].1 = npy::encode_i32(&[s, inputs.batch.max_blocks_per_seq], &table).unwrap();
        let err = load(&files, &inputs).unwrap_err().to_string();
        assert!(err.contains("block_table.npy: entry [0][1] = -1"), "{err}");
        assert_eq!(tensors::multi_index(&[2, 3, 4], 23), [1, 2, 3]);
    }
}
