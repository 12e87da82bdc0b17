//! A case of this lab from tensors on disk (a TA's own batch) or embedded
//! (the golden case), read by the family's loader
//! ([`crate::lab::paged::tensors`]): float32 tensors, an fp32 cache.

use std::path::Path;

use super::contract::{Inputs, INSTANCE};
use crate::lab::paged::recipe::{CaseInputs, PagedCaseError};
use crate::lab::paged::tensors::TensorFiles;

/// Loads and validates the case files in `dir`; `window` comes from the case recipe.
pub fn load_dir(dir: &Path, window: i32) -> Result<CaseInputs<Inputs>, PagedCaseError> {
    load(&TensorFiles::in_dir(dir, "a paged case"), window)
}

/// Loads from named byte buffers (the embedded golden case).
pub fn load_bytes(
    files: &[(&str, &[u8])],
    window: i32,
) -> Result<CaseInputs<Inputs>, PagedCaseError> {
    load(&TensorFiles::embedded(files, "a paged case"), window)
}

fn load(files: &TensorFiles, window: i32) -> Result<CaseInputs<Inputs>, PagedCaseError> {
    let mut read = INSTANCE.load(files, window)?;
    let tensors = &mut read.tensors;
    Ok(CaseInputs {
        inputs: Inputs {
            q: tensors.f32s("q.npy"),
            k_new: tensors.f32s("k_new.npy"),
            v_new: tensors.f32s("v_new.npy"),
            k_cache: tensors.f32s("k_cache.npy"),
            v_cache: tensors.f32s("v_cache.npy"),
            batch: read.batch,
            alibi_slopes: read.alibi_slopes,
        },
        expected: read.expected,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::npy;
    use crate::lab::paged::tensors::{encode_prefill, Elements};
    use crate::lab::paged_prefill::cases;
    use crate::lab::paged_prefill::cases::embedded_cases;
    use crate::lab::paged_prefill::contract::{DH, HQ};

    /// A valid set of files (from a generated case), as name -> bytes.
    fn files() -> Vec<(String, Vec<u8>)> {
        let spec = embedded_cases()
            .into_iter()
            .find(|c| c.name == "alibi-with-context")
            .unwrap();
        let i = cases::generate(&spec, 5).unwrap().inputs;
        let tensors = [&i.q, &i.k_new, &i.v_new, &i.k_cache, &i.v_cache]
            .map(|values| Elements::F32(values.clone()));
        encode_prefill(
            &INSTANCE,
            &i.batch,
            tensors,
            i.alibi_slopes.as_deref(),
            None,
        )
        .into_iter()
        .map(|(name, bytes)| (name.to_owned(), bytes))
        .collect()
    }

    fn load(files: &[(String, Vec<u8>)]) -> Result<CaseInputs<Inputs>, PagedCaseError> {
        let refs: Vec<(&str, &[u8])> = files
            .iter()
            .map(|(n, b)| (n.as_str(), b.as_slice()))
            .collect();
        load_bytes(&refs, 0)
    }

    fn replace(files: &mut [(String, Vec<u8>)], name: &str, bytes: Vec<u8>) {
        files.iter_mut().find(|(n, _)| n == name).unwrap().1 = bytes;
    }

    fn refused(edit: impl FnOnce(&mut Vec<(String, Vec<u8>)>)) -> String {
        let mut f = files();
        edit(&mut f);
        load(&f).unwrap_err().to_string()
    }

    fn ints(f: &[(String, Vec<u8>)], name: &str) -> (Vec<usize>, Vec<i32>) {
        npy::decode_i32(&f.iter().find(|(n, _)| n == name).unwrap().1).unwrap()
    }

    #[test]
    fn a_directory_round_trips_into_the_same_inputs() {
        let dir = tempfile::tempdir().unwrap();
        for (name, bytes) in files() {
            std::fs::write(dir.path().join(name), bytes).unwrap();
        }
        let loaded = load_dir(dir.path(), 0).unwrap();
        let spec = embedded_cases()
            .into_iter()
            .find(|c| c.name == "alibi-with-context")
            .unwrap();
        assert_eq!(loaded.inputs, cases::generate(&spec, 5).unwrap().inputs);
        assert!(loaded.expected.is_none());
        let w = load_dir(dir.path(), 7).unwrap();
        assert_eq!(w.inputs.batch.window(), Some(7));
    }

    #[test]
    fn each_inconsistency_is_refused_naming_file_and_value() {
        type Edit = Box<dyn FnOnce(&mut Vec<(String, Vec<u8>)>)>;
        // The file `name` replaced by these ints.
        let replaced_by_ints = |name, shape: &'static [usize], ints: &'static [i32]| -> Edit {
            Box::new(move |f| replace(f, name, npy::encode_i32(shape, ints).unwrap()))
        };
        let cases: Vec<(&str, Edit)> = vec![
            (
                "k_new.npy: missing",
                Box::new(|f| f.retain(|(n, _)| n != "k_new.npy")),
            ),
            (
                "q.npy: shape [42, 64, 32]",
                Box::new(|f| {
                    let (_, q) = npy::decode_f32(&f[0].1).unwrap();
                    f[0].1 = npy::encode_f32(&[42, 64, 32], &q).unwrap();
                }),
            ),
            (
                "v_new.npy: shape [41, 8, 64], expected [42, 8, 64]",
                Box::new(|f| {
                    replace(
                        f,
                        "v_new.npy",
                        npy::encode_f32(&[41, 8, 64], &vec![0.0; 41 * 512]).unwrap(),
                    );
                }),
            ),
            (
                "k_cache.npy: shape",
                Box::new(|f| {
                    let (s, k) = npy::decode_f32(&f[3].1).unwrap();
                    f[3].1 = npy::encode_f32(&[s[0], 8, 8, 16, 8], &k).unwrap();
                }),
            ),
            (
                "v_cache.npy: shape",
                Box::new(|f| {
                    let (s, v) = npy::decode_f32(&f[4].1).unwrap();
                    f[4].1 = npy::encode_f32(&[s[0], 8, 16, 64], &v).unwrap();
                }),
            ),
            (
                "q.npy: element 3 is NaN",
                Box::new(|f| {
                    let (s, mut q) = npy::decode_f32(&f[0].1).unwrap();
                    q[3] = f32::NAN;
                    f[0].1 = npy::encode_f32(&s, &q).unwrap();
                }),
            ),
            (
                "block_table.npy: entry [1][2] = -1",
                Box::new(|f| {
                    let (s, mut t) = ints(f, "block_table.npy");
                    t[s[1] + 2] = -1;
                    replace(f, "block_table.npy", npy::encode_i32(&s, &t).unwrap());
                }),
            ),
            (
                "block_table.npy: entry [0][0] = 99999",
                Box::new(|f| {
                    let (s, mut t) = ints(f, "block_table.npy");
                    t[0] = 99999;
                    replace(f, "block_table.npy", npy::encode_i32(&s, &t).unwrap());
                }),
            ),
            (
                "block_table.npy: 2 blocks per sequence; seqLen[0] = 59 needs at least 4",
                Box::new(|f| {
                    let (_, t) = ints(f, "block_table.npy");
                    replace(
                        f,
                        "block_table.npy",
                        npy::encode_i32(&[2, 2], &t[..4]).unwrap(),
                    );
                }),
            ),
            (
                "qStart[0] = 1, must be 0",
                replaced_by_ints("q_start.npy", &[3], &[1, 9, 42]),
            ),
            (
                "qStart[2] = 9 is not above qStart[1] = 9",
                replaced_by_ints("q_start.npy", &[3], &[0, 9, 9]),
            ),
            (
                "qStart[2] = 40, must be T = 42",
                replaced_by_ints("q_start.npy", &[3], &[0, 9, 40]),
            ),
            (
                "q_start.npy: shape [2], expected [3]",
                replaced_by_ints("q_start.npy", &[2], &[0, 42]),
            ),
            (
                "seqLen[1] = 20 is below its 33 new tokens",
                replaced_by_ints("seq_len.npy", &[2], &[59, 20]),
            ),
            (
                "seq_len.npy: element type is `<f4`",
                Box::new(|f| {
                    replace(
                        f,
                        "seq_len.npy",
                        npy::encode_f32(&[2], &[59.0, 49.0]).unwrap(),
                    );
                }),
            ),
            (
                "alibi_slopes.npy: shape [8]",
                Box::new(|f| {
                    replace(
                        f,
                        "alibi_slopes.npy",
                        npy::encode_f32(&[8], &[0.5; 8]).unwrap(),
                    );
                }),
            ),
            (
                "expected.npy: shape [42, 32, 63]",
                Box::new(|f| {
                    f.push((
                        "expected.npy".into(),
                        npy::encode_f64(&[42, 32, 63], &vec![0.0; 42 * 32 * 63]).unwrap(),
                    ));
                }),
            ),
        ];
        for (needle, edit) in cases {
            let err = refused(edit);
            assert!(err.contains(needle), "expected `{needle}` in: {err}");
        }
    }

    #[test]
    fn optional_files_switch_alibi_and_bring_an_expected_output() {
        let mut f = files();
        f.retain(|(n, _)| n != "alibi_slopes.npy");
        assert!(!load(&f).unwrap().inputs.batch.alibi);
        let t = 42;
        f.push((
            "expected.npy".into(),
            npy::encode_f64(&[t, HQ, DH], &vec![0.5; t * HQ * DH]).unwrap(),
        ));
        let loaded = load(&f).unwrap();
        assert_eq!(loaded.expected.unwrap()[7], 0.5);
    }

    #[test]
    fn a_recipe_can_point_at_a_folder_of_tensors() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("mine")).unwrap();
        for (name, bytes) in files() {
            std::fs::write(dir.path().join("mine").join(name), bytes).unwrap();
        }
        let text = "[[case]]\nname = \"own\"\nsummary = \"s\"\ntensors = \"mine\"\nwindow = 5\n";
        let cases = crate::lab::paged_prefill::contract::INSTANCE
            .parse_cases(text, "t.toml", dir.path())
            .unwrap();
        let loaded = cases::generate(&cases[0], 123).unwrap();
        assert_eq!(loaded.inputs.batch.window(), Some(5));
        assert_eq!(loaded.inputs.batch.context, vec![50, 16]);
        assert!(loaded.inputs.batch.alibi);
    }

    #[test]
    fn a_missing_directory_names_the_path() {
        let err = load_dir(Path::new("/nonexistent/case"), 0)
            .unwrap_err()
            .to_string();
        assert!(err.contains("/nonexistent/case/q.npy: missing"), "{err}");
    }
}
