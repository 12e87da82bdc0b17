//! An FP8 case from tensors on disk (a TA's own batch) or embedded (the
//! golden cases), read by the family's loader
//! ([`crate::lab::paged::tensors`]).
//!
//! The bf16 tensors (`q.npy`, `k_new.npy`, `v_new.npy`) are float32 arrays
//! whose every value is exactly a bf16 value (NumPy has no bfloat16: write
//! `torch_tensor.float().numpy()`); a value that is not is refused naming
//! the file and its first such index, since the kernel would receive a
//! different number than the oracle read. The caches are uint8 arrays of
//! FP8 bytes, their format given by the case (the bytes cannot say).

use std::path::Path;

use super::{Inputs, KvFormat, PrefillTensors, INSTANCE};
use crate::lab::paged::recipe::{CaseInputs, PagedCaseError};
use crate::lab::paged::tensors::TensorFiles;

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
    load(
        &TensorFiles::embedded(files, "a case"),
        window,
        format,
        scales,
    )
}

fn load(
    files: &TensorFiles,
    window: i32,
    format: KvFormat,
    (k_scale, v_scale): (f32, f32),
) -> Result<CaseInputs<Inputs>, PagedCaseError> {
    let mut read = INSTANCE.load(files, window)?;
    let tensors = &mut read.tensors;
    Ok(CaseInputs {
        inputs: Inputs {
            tensors: PrefillTensors {
                q: tensors.f32s("q.npy"),
                k_new: tensors.f32s("k_new.npy"),
                v_new: tensors.f32s("v_new.npy"),
                k_cache: tensors.bytes("k_cache.npy"),
                v_cache: tensors.bytes("v_cache.npy"),
                batch: read.batch,
                alibi_slopes: read.alibi_slopes,
            },
            format,
            k_scale,
            v_scale,
        },
        expected: read.expected,
    })
}

/// The `.npy` files of `inputs` (with `expected` when given): what a TA's
/// script writes, and what the tests load back.
#[cfg(test)]
pub fn encode(inputs: &Inputs, expected: Option<&[f64]>) -> Vec<(&'static str, Vec<u8>)> {
    use crate::lab::paged::tensors::{encode_prefill, Elements};
    let tensors = [
        Elements::F32(inputs.tensors.q.clone()),
        Elements::F32(inputs.tensors.k_new.clone()),
        Elements::F32(inputs.tensors.v_new.clone()),
        Elements::U8(inputs.tensors.k_cache.clone()),
        Elements::U8(inputs.tensors.v_cache.clone()),
    ];
    let slopes = inputs.tensors.alibi_slopes.as_deref();
    encode_prefill(&INSTANCE, &inputs.tensors.batch, tensors, slopes, expected)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::npy;
    use crate::lab::paged::tensors;
    use crate::lab::paged_prefill_fp8::cases;
    use crate::lab::paged_prefill_fp8::cases::embedded_cases;
    use crate::lab::paged_prefill_fp8::LAYOUT;

    fn sample() -> Inputs {
        let spec = embedded_cases().into_iter().find(|c| c.alibi).unwrap();
        cases::generate(&spec, 5).unwrap().inputs
    }

    fn load(
        files: &[(&'static str, Vec<u8>)],
        inputs: &Inputs,
    ) -> Result<CaseInputs<Inputs>, PagedCaseError> {
        let refs: Vec<(&str, &[u8])> = files.iter().map(|(n, b)| (*n, b.as_slice())).collect();
        load_bytes(
            &refs,
            inputs.tensors.batch.sliding_window,
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
            inputs.tensors.batch.sliding_window,
            inputs.format,
            scales,
        )
        .unwrap();
        assert_eq!(loaded.inputs, inputs);
        assert!(loaded.expected.is_none());
    }

    /// Why the files of `inputs`, changed by `edit`, are refused.
    fn refusal(inputs: &Inputs, edit: impl FnOnce(&mut Vec<(&'static str, Vec<u8>)>)) -> String {
        let mut files = encode(inputs, None);
        edit(&mut files);
        load(&files, inputs).unwrap_err().to_string()
    }

    #[test]
    fn a_value_that_is_not_bf16_is_refused_at_its_index() {
        let mut inputs = sample();
        let at = LAYOUT.head_index(3, 17, 100);
        inputs.tensors.q[at] = 0.1;
        let err = refusal(&inputs, |_| {});
        assert!(
            err.starts_with("q.npy: element [3, 17, 100] is 0.1: not a bf16 value"),
            "{err}"
        );
        let mut inputs = sample();
        inputs.tensors.v_new[5] = f32::NAN;
        let err = refusal(&inputs, |_| {});
        assert!(
            err.starts_with("v_new.npy: element [0, 0, 5] is NaN: not finite"),
            "{err}"
        );
    }

    /// The refusals say what they said before the paged family's schema:
    /// the binding file's bound, the file's kind before where its sizes
    /// came from, and an int32 file as every paged case's.
    #[test]
    fn refusals_keep_their_words() {
        let inputs = sample();
        let t = inputs.tensors.batch.total_new();
        let err = refusal(&inputs, |files| {
            files[0].1 = npy::encode_f32(&[t, 16, 128], &inputs.tensors.q[..t * 16 * 128]).unwrap();
        });
        assert!(err.contains("expected [T, 32, 128] with T >= 1"), "{err}");
        let n = inputs.tensors.batch.num_blocks;
        let err = refusal(&inputs, |files| {
            files[4].1 = npy::encode_u8(&[n, 8, 16, 128], &inputs.tensors.v_cache).unwrap();
        });
        let want = format!("expected [{n}, 8, 128, 16] (uint8, numBlocks from k_cache.npy)");
        assert!(err.contains(&want), "{err}");
        let err = refusal(&inputs, |files| {
            files.retain(|(name, _)| *name != "block_table.npy");
        });
        assert!(
            err.ends_with("block_table.npy: missing (a paged case needs this file)"),
            "{err}"
        );
    }

    #[test]
    fn caches_must_be_uint8_of_the_fp8_shapes() {
        let inputs = sample();
        let n = inputs.tensors.batch.num_blocks;
        let err = refusal(&inputs, |files| {
            files[3].1 = npy::encode_u8(&[n, 8, 16, 16, 8], &inputs.tensors.k_cache).unwrap();
        });
        assert!(
            err.contains("k_cache.npy: shape") && err.contains("X = 16"),
            "{err}"
        );
        let floats: Vec<f32> = inputs
            .tensors
            .v_cache
            .iter()
            .map(|&b| f32::from(b))
            .collect();
        let err = refusal(&inputs, |files| {
            files[4].1 = npy::encode_f32(&[n, 8, 128, 16], &floats).unwrap();
        });
        assert!(
            err.contains("v_cache.npy") && err.contains("`<f4`, expected `|u1`"),
            "{err}"
        );
    }

    #[test]
    fn the_int32_files_go_through_the_second_labs_checks() {
        let inputs = sample();
        let mut table = inputs.tensors.batch.block_table.clone();
        table[1] = -1;
        let s = inputs.tensors.batch.num_seqs();
        let err = refusal(&inputs, |files| {
            files[5].1 =
                npy::encode_i32(&[s, inputs.tensors.batch.max_blocks_per_seq], &table).unwrap();
        });
        assert!(err.contains("block_table.npy: entry [0][1] = -1"), "{err}");
        assert_eq!(tensors::multi_index(&[2, 3, 4], 23), [1, 2, 3]);
    }
}
