//! An FP8 case from tensors on disk: a TA's own batch, or the golden case.
//!
//! The bf16 tensors (`q.npy`, `k_new.npy`, `v_new.npy`) are float32 arrays
//! whose every value is exactly a bf16 value (NumPy has no bfloat16: write
//! `torch_tensor.float().numpy()`); a value that is not is refused naming
//! the file and its first such index, since the kernel would receive a
//! different number than the oracle read. The caches are uint8 arrays of
//! FP8 bytes, their format given by the case (the bytes cannot say). The
//! int32 files and the optional ones follow the second lab's rules and
//! go through its checks ([`crate::lab::paged_prefill::tensors`]).

use std::path::Path;

use super::{bf16, Inputs, KvFormat, BLOCK, DH, HKV, HQ, X};
use crate::lab::case_file::read_tensor_file;
use crate::lab::npy;
use crate::lab::paged_prefill::cases::PagedCaseError;
use crate::lab::paged_prefill::tensors::{load_alibi, load_batch, load_expected, Lookup};

/// A case's inputs, plus the expected output it brings (custom tensors only).
#[derive(Debug, Clone, PartialEq)]
pub struct CaseInputs {
    pub inputs: Inputs,
    pub expected: Option<Vec<f64>>,
}

/// Loads and validates the case files in `dir`; `window`, `format` and the
/// `(kScale, vScale)` come from the case recipe.
pub fn load_dir(
    dir: &Path,
    window: i32,
    format: KvFormat,
    scales: (f32, f32),
) -> Result<CaseInputs, PagedCaseError> {
    let label = |name: &str| dir.join(name).display().to_string();
    let get = |name: &str| {
        read_tensor_file(dir, name).map_err(|e| PagedCaseError::Tensor {
            file: label(name),
            message: e.to_string(),
        })
    };
    load_with(&get, &label, window, format, scales)
}

/// Loads from named byte buffers (the embedded golden cases).
pub fn load_bytes(
    files: &[(&str, &[u8])],
    window: i32,
    format: KvFormat,
    scales: (f32, f32),
) -> Result<CaseInputs, PagedCaseError> {
    let get = |name: &str| {
        Ok(files
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, b)| b.to_vec()))
    };
    load_with(&get, &|name: &str| name.to_owned(), window, format, scales)
}

/// `[a, b, c]` for flat index `at` of an array of `shape`.
fn multi_index(shape: &[usize], mut at: usize) -> Vec<usize> {
    let mut index = vec![0; shape.len()];
    for (slot, &extent) in index.iter_mut().zip(shape).rev() {
        *slot = at % extent.max(1);
        at /= extent.max(1);
    }
    index
}

fn load_with(
    get: Lookup,
    label: &dyn Fn(&str) -> String,
    window: i32,
    format: KvFormat,
    (k_scale, v_scale): (f32, f32),
) -> Result<CaseInputs, PagedCaseError> {
    let bad = |name: &str, message: String| PagedCaseError::Tensor {
        file: label(name),
        message,
    };
    let required =
        |name: &str| get(name)?.ok_or_else(|| bad(name, "missing (a case needs this file)".into()));
    let bf16s = |name: &str, expected: &dyn Fn(&[usize]) -> Option<String>| {
        let (shape, data) =
            npy::decode_f32(&required(name)?).map_err(|e| bad(name, e.to_string()))?;
        if let Some(message) = expected(&shape) {
            return Err(bad(name, format!("shape {shape:?}, expected {message}")));
        }
        if let Some(at) = data
            .iter()
            .position(|x| !x.is_finite() || !bf16::is_exact(*x))
        {
            let why = match data[at].is_finite() {
                true => "not a bf16 value (round the tensor to bfloat16, then store it as float32)",
                false => "not finite (inputs must be finite)",
            };
            return Err(bad(
                name,
                format!(
                    "element {:?} is {}: {why}",
                    multi_index(&shape, at),
                    data[at]
                ),
            ));
        }
        Ok((shape, data))
    };
    let bytes = |name: &str, expected: &dyn Fn(&[usize]) -> Option<String>| {
        let (shape, data) =
            npy::decode_u8(&required(name)?).map_err(|e| bad(name, e.to_string()))?;
        match expected(&shape) {
            Some(message) => Err(bad(name, format!("shape {shape:?}, expected {message}"))),
            None => Ok((shape, data)),
        }
    };
    let (q_shape, q) = bf16s("q.npy", &|s| match s {
        [t, HQ, DH] if *t > 0 => None,
        _ => Some(format!("[T, {HQ}, {DH}] with T >= 1")),
    })?;
    let total = q_shape[0];
    let new_shape = |s: &[usize]| {
        (s != [total, HKV, DH]).then(|| format!("[{total}, {HKV}, {DH}] (T from q.npy)"))
    };
    let (_, k_new) = bf16s("k_new.npy", &new_shape)?;
    let (_, v_new) = bf16s("v_new.npy", &new_shape)?;
    let (k_shape, k_cache) = bytes("k_cache.npy", &|s| match s {
        [n, HKV, packs, BLOCK, X] if *n > 0 && *packs == DH / X => None,
        _ => Some(format!(
            "[numBlocks, {HKV}, {}, {BLOCK}, {X}] (uint8 FP8 bytes, x-packed, X = {X})",
            DH / X
        )),
    })?;
    let num_blocks = k_shape[0];
    let (_, v_cache) = bytes("v_cache.npy", &|s| {
        (s != [num_blocks, HKV, DH, BLOCK]).then(|| {
            format!("[{num_blocks}, {HKV}, {DH}, {BLOCK}] (uint8, numBlocks from k_cache.npy)")
        })
    })?;
    let batch = load_batch(get, label, total, num_blocks, window)?;
    let alibi_slopes = load_alibi(get, label)?;
    let expected = load_expected(get, label, [total, HQ, DH])?;
    Ok(CaseInputs {
        inputs: Inputs {
            batch: crate::lab::paged_prefill::contract::Batch {
                alibi: alibi_slopes.is_some(),
                ..batch
            },
            format,
            k_scale,
            v_scale,
            q,
            k_new,
            v_new,
            k_cache,
            v_cache,
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
    use crate::lab::paged_prefill_fp8::cases::embedded_cases;

    fn sample() -> Inputs {
        let spec = embedded_cases().into_iter().find(|c| c.alibi).unwrap();
        spec.generate(5).unwrap()
    }

    fn load(
        files: &[(&'static str, Vec<u8>)],
        inputs: &Inputs,
    ) -> Result<CaseInputs, PagedCaseError> {
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
        let at = super::super::q_index(3, 17, 100);
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
        assert_eq!(multi_index(&[2, 3, 4], 23), [1, 2, 3]);
    }
}
