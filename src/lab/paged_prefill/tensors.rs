//! A paged case from tensors on disk: a TA's own batch, or the golden case.
//!
//! Files are checked against each other before anything runs, because a
//! kernel handed inconsistent int32 arrays indexes out of bounds and the
//! student would be blamed for it. Every refusal names the file and the
//! offending value, since the person reading it is fixing a NumPy script.
//!
//! The loader works on bytes through a lookup function, so the golden case
//! embedded in the binary goes through exactly the same checks.

use std::path::Path;

use super::cases::{CaseInputs, PagedCaseError};
use super::contract::{Batch, Inputs, BLOCK, DH, HKV, HQ, X};
use crate::lab::case_file::read_tensor_file;
use crate::lab::npy;

/// Required files, in the order they are read.
pub const REQUIRED: [&str; 8] = [
    "q.npy",
    "k_new.npy",
    "v_new.npy",
    "k_cache.npy",
    "v_cache.npy",
    "block_table.npy",
    "q_start.npy",
    "seq_len.npy",
];
/// Optional files: ALiBi slopes (their presence turns ALiBi on) and an expected output.
pub const OPTIONAL: [&str; 2] = ["alibi_slopes.npy", "expected.npy"];

/// Loads and validates `q.npy` ... `seq_len.npy` (and the optional files)
/// from `dir`; `window` comes from the case recipe.
pub fn load_dir(dir: &Path, window: i32) -> Result<CaseInputs, PagedCaseError> {
    let label = |name: &str| dir.join(name).display().to_string();
    let get = |name: &str| {
        read_tensor_file(dir, name).map_err(|e| PagedCaseError::Tensor {
            file: label(name),
            message: e.to_string(),
        })
    };
    load_with(&get, &label, window)
}

/// Loads from named byte buffers (the embedded golden case).
pub fn load_bytes(files: &[(&str, &[u8])], window: i32) -> Result<CaseInputs, PagedCaseError> {
    let get = |name: &str| {
        Ok(files
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, b)| b.to_vec()))
    };
    load_with(&get, &|name: &str| name.to_owned(), window)
}

pub(crate) type Lookup<'a> = &'a dyn Fn(&str) -> Result<Option<Vec<u8>>, PagedCaseError>;

fn load_with(
    get: Lookup,
    label: &dyn Fn(&str) -> String,
    window: i32,
) -> Result<CaseInputs, PagedCaseError> {
    let bad = |name: &str, message: String| PagedCaseError::Tensor {
        file: label(name),
        message,
    };
    let bytes = |name: &str| -> Result<Option<Vec<u8>>, PagedCaseError> { get(name) };
    let required = |name: &str| {
        bytes(name)?.ok_or_else(|| bad(name, "missing (a paged case needs this file)".into()))
    };
    let npy_err = |name: &'static str| move |e: npy::NpyError| bad(name, e.to_string());
    let f32s = |name: &'static str| -> Result<(Vec<usize>, Vec<f32>), PagedCaseError> {
        let (shape, data) = npy::decode_f32(&required(name)?).map_err(npy_err(name))?;
        if let Some(at) = data.iter().position(|x| !x.is_finite()) {
            return Err(bad(
                name,
                format!("element {at} is {} (inputs must be finite)", data[at]),
            ));
        }
        Ok((shape, data))
    };
    let (q_shape, q) = f32s("q.npy")?;
    let total = match q_shape[..] {
        [t, HQ, DH] if t > 0 => t,
        _ => {
            return Err(bad(
                "q.npy",
                format!("shape {q_shape:?}, expected [T, {HQ}, {DH}] with T >= 1"),
            ))
        }
    };
    let (k_new_shape, k_new) = f32s("k_new.npy")?;
    let (v_new_shape, v_new) = f32s("v_new.npy")?;
    for (name, shape) in [("k_new.npy", &k_new_shape), ("v_new.npy", &v_new_shape)] {
        if shape[..] != [total, HKV, DH] {
            return Err(bad(
                name,
                format!("shape {shape:?}, expected [{total}, {HKV}, {DH}] (T from q.npy)"),
            ));
        }
    }
    let (k_cache_shape, k_cache) = f32s("k_cache.npy")?;
    let num_blocks = match k_cache_shape[..] {
        [n, HKV, packs, BLOCK, X] if n > 0 && packs == DH / X => n,
        _ => {
            return Err(bad(
                "k_cache.npy",
                format!(
                    "shape {k_cache_shape:?}, expected [numBlocks, {HKV}, {}, {BLOCK}, {X}] (x-packed, X = {X})",
                    DH / X
                ),
            ))
        }
    };
    let (v_cache_shape, v_cache) = f32s("v_cache.npy")?;
    if v_cache_shape[..] != [num_blocks, HKV, DH, BLOCK] {
        return Err(bad(
            "v_cache.npy",
            format!("shape {v_cache_shape:?}, expected [{num_blocks}, {HKV}, {DH}, {BLOCK}] (numBlocks from k_cache.npy)"),
        ));
    }

    let batch = load_batch(get, label, total, num_blocks, window)?;
    let alibi_slopes = load_alibi(get, label)?;
    let expected = load_expected(get, label, [total, HQ, DH])?;
    let batch = Batch {
        alibi: alibi_slopes.is_some(),
        ..batch
    };
    Ok(CaseInputs {
        inputs: Inputs {
            batch,
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

/// A refusal of file `name`, shown as `label` makes it.
fn bad_file(label: &dyn Fn(&str) -> String, name: &str, message: String) -> PagedCaseError {
    PagedCaseError::Tensor {
        file: label(name),
        message,
    }
}

/// The bytes of file `name`, which must be there.
fn required_file(
    get: Lookup,
    label: &dyn Fn(&str) -> String,
    name: &str,
) -> Result<Vec<u8>, PagedCaseError> {
    get(name)?.ok_or_else(|| bad_file(label, name, "missing (a paged case needs this file)".into()))
}

/// The int32 arrays of a paged case (`block_table.npy`, `q_start.npy`,
/// `seq_len.npy`), checked against each other, against `total` rows and
/// `num_blocks` blocks: the batch, ALiBi off.
pub(crate) fn load_batch(
    get: Lookup,
    label: &dyn Fn(&str) -> String,
    total: usize,
    num_blocks: usize,
    window: i32,
) -> Result<Batch, PagedCaseError> {
    let bad = |name: &str, message: String| bad_file(label, name, message);
    let required = |name: &str| required_file(get, label, name);
    let npy_err = |name: &'static str| {
        let bad = &bad;
        move |e: npy::NpyError| bad(name, e.to_string())
    };
    let i32s = |name: &'static str| npy::decode_i32(&required(name)?).map_err(npy_err(name));
    let (table_shape, block_table) = i32s("block_table.npy")?;
    let (seqs, per_seq) = match table_shape[..] {
        [s, m] if s > 0 && m > 0 => (s, m),
        _ => {
            return Err(bad(
                "block_table.npy",
                format!(
                    "shape {table_shape:?}, expected [numSeqs, maxBlocksPerSeq], both at least 1"
                ),
            ))
        }
    };
    let (q_start_shape, q_start) = i32s("q_start.npy")?;
    if q_start_shape[..] != [seqs + 1] {
        return Err(bad("q_start.npy", format!("shape {q_start_shape:?}, expected [{}] (numSeqs + 1, numSeqs from block_table.npy)", seqs + 1)));
    }
    if q_start[0] != 0 {
        return Err(bad(
            "q_start.npy",
            format!("qStart[0] = {}, must be 0", q_start[0]),
        ));
    }
    if let Some(s) = (0..seqs).find(|&s| q_start[s + 1] <= q_start[s]) {
        return Err(bad(
            "q_start.npy",
            format!(
                "qStart[{}] = {} is not above qStart[{s}] = {}: every sequence needs at least one new token",
                s + 1,
                q_start[s + 1],
                q_start[s]
            ),
        ));
    }
    if q_start[seqs] as usize != total {
        return Err(bad(
            "q_start.npy",
            format!(
                "qStart[{seqs}] = {}, must be T = {total} (rows of q.npy)",
                q_start[seqs]
            ),
        ));
    }
    let (seq_len_shape, seq_len) = i32s("seq_len.npy")?;
    if seq_len_shape[..] != [seqs] {
        return Err(bad(
            "seq_len.npy",
            format!("shape {seq_len_shape:?}, expected [{seqs}] (numSeqs)"),
        ));
    }
    let new: Vec<usize> = (0..seqs)
        .map(|s| (q_start[s + 1] - q_start[s]) as usize)
        .collect();
    if let Some(s) = (0..seqs).find(|&s| (seq_len[s] as i64) < new[s] as i64) {
        return Err(bad(
            "seq_len.npy",
            format!(
                "seqLen[{s}] = {} is below its {} new tokens (from q_start.npy)",
                seq_len[s], new[s]
            ),
        ));
    }
    let context: Vec<usize> = (0..seqs).map(|s| seq_len[s] as usize - new[s]).collect();
    let longest = (0..seqs).max_by_key(|&s| seq_len[s]).unwrap();
    let needed = (seq_len[longest] as usize).div_ceil(BLOCK);
    if per_seq < needed {
        return Err(bad(
            "block_table.npy",
            format!(
                "{per_seq} blocks per sequence; seqLen[{longest}] = {} needs at least {needed}",
                seq_len[longest]
            ),
        ));
    }
    if let Some(at) = block_table
        .iter()
        .position(|&id| id < 0 || id as usize >= num_blocks)
    {
        return Err(bad(
            "block_table.npy",
            format!(
                "entry [{}][{}] = {} is not a block id (0..{num_blocks}, numBlocks from k_cache.npy)",
                at / per_seq,
                at % per_seq,
                block_table[at]
            ),
        ));
    }

    Ok(Batch {
        context,
        new,
        sliding_window: window,
        alibi: false,
        max_blocks_per_seq: per_seq,
        num_blocks,
        block_table,
        q_start,
        seq_len,
    })
}

/// `alibi_slopes.npy`, when present: 32 finite slopes.
pub(crate) fn load_alibi(
    get: Lookup,
    label: &dyn Fn(&str) -> String,
) -> Result<Option<Vec<f32>>, PagedCaseError> {
    let bad = |name: &str, message: String| bad_file(label, name, message);
    let npy_err = |name: &'static str| {
        let bad = &bad;
        move |e: npy::NpyError| bad(name, e.to_string())
    };
    let bytes = |name: &str| get(name);
    Ok(match bytes(OPTIONAL[0])? {
        None => None,
        Some(b) => {
            let (shape, slopes) = npy::decode_f32(&b).map_err(npy_err(OPTIONAL[0]))?;
            if shape[..] != [HQ] {
                return Err(bad(
                    OPTIONAL[0],
                    format!("shape {shape:?}, expected [{HQ}]"),
                ));
            }
            if let Some(h) = slopes.iter().position(|x| !x.is_finite()) {
                return Err(bad(OPTIONAL[0], format!("slope {h} is {}", slopes[h])));
            }
            Some(slopes)
        }
    })
}

/// `expected.npy`, when present, of the given shape.
pub(crate) fn load_expected(
    get: Lookup,
    label: &dyn Fn(&str) -> String,
    shape: [usize; 3],
) -> Result<Option<Vec<f64>>, PagedCaseError> {
    let bad = |name: &str, message: String| bad_file(label, name, message);
    let npy_err = |name: &'static str| {
        let bad = &bad;
        move |e: npy::NpyError| bad(name, e.to_string())
    };
    let bytes = |name: &str| get(name);
    let [total, heads, dims] = shape;
    Ok(match bytes(OPTIONAL[1])? {
        None => None,
        Some(b) => {
            let (shape, e) = npy::decode_f64(&b).map_err(npy_err(OPTIONAL[1]))?;
            if shape[..] != [total, heads, dims] {
                return Err(bad(
                    OPTIONAL[1],
                    format!("shape {shape:?}, expected [{total}, {heads}, {dims}] like q.npy"),
                ));
            }
            Some(e)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::paged_prefill::cases::embedded_cases;

    /// A valid set of files (from a generated case), as name -> bytes.
    fn files() -> Vec<(String, Vec<u8>)> {
        let spec = embedded_cases()
            .into_iter()
            .find(|c| c.name == "alibi-with-context")
            .unwrap();
        let i = spec.generate(5).unwrap().inputs;
        let b = &i.batch;
        let (t, s) = (b.total_new(), b.num_seqs());
        vec![
            ("q.npy".into(), npy::encode_f32(&[t, HQ, DH], &i.q).unwrap()),
            (
                "k_new.npy".into(),
                npy::encode_f32(&[t, HKV, DH], &i.k_new).unwrap(),
            ),
            (
                "v_new.npy".into(),
                npy::encode_f32(&[t, HKV, DH], &i.v_new).unwrap(),
            ),
            (
                "k_cache.npy".into(),
                npy::encode_f32(&[b.num_blocks, HKV, DH / X, BLOCK, X], &i.k_cache).unwrap(),
            ),
            (
                "v_cache.npy".into(),
                npy::encode_f32(&[b.num_blocks, HKV, DH, BLOCK], &i.v_cache).unwrap(),
            ),
            (
                "block_table.npy".into(),
                npy::encode_i32(&[s, b.max_blocks_per_seq], &b.block_table).unwrap(),
            ),
            (
                "q_start.npy".into(),
                npy::encode_i32(&[s + 1], &b.q_start).unwrap(),
            ),
            (
                "seq_len.npy".into(),
                npy::encode_i32(&[s], &b.seq_len).unwrap(),
            ),
            (
                "alibi_slopes.npy".into(),
                npy::encode_f32(&[HQ], i.alibi_slopes.as_ref().unwrap()).unwrap(),
            ),
        ]
    }

    fn load(files: &[(String, Vec<u8>)]) -> Result<CaseInputs, PagedCaseError> {
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
        assert_eq!(loaded.inputs, spec.generate(5).unwrap().inputs);
        assert!(loaded.expected.is_none());
        let w = load_dir(dir.path(), 7).unwrap();
        assert_eq!(w.inputs.batch.window(), Some(7));
    }

    #[test]
    fn each_inconsistency_is_refused_naming_file_and_value() {
        type Edit = Box<dyn FnOnce(&mut Vec<(String, Vec<u8>)>)>;
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
                Box::new(|f| {
                    replace(
                        f,
                        "q_start.npy",
                        npy::encode_i32(&[3], &[1, 9, 42]).unwrap(),
                    );
                }),
            ),
            (
                "qStart[2] = 9 is not above qStart[1] = 9",
                Box::new(|f| {
                    replace(f, "q_start.npy", npy::encode_i32(&[3], &[0, 9, 9]).unwrap());
                }),
            ),
            (
                "qStart[2] = 40, must be T = 42",
                Box::new(|f| {
                    replace(
                        f,
                        "q_start.npy",
                        npy::encode_i32(&[3], &[0, 9, 40]).unwrap(),
                    );
                }),
            ),
            (
                "q_start.npy: shape [2], expected [3]",
                Box::new(|f| {
                    replace(f, "q_start.npy", npy::encode_i32(&[2], &[0, 42]).unwrap());
                }),
            ),
            (
                "seqLen[1] = 20 is below its 33 new tokens",
                Box::new(|f| {
                    replace(f, "seq_len.npy", npy::encode_i32(&[2], &[59, 20]).unwrap());
                }),
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
        let cases = crate::lab::paged_prefill::cases::parse_cases(text, "t.toml", dir.path()).unwrap();
        let loaded = cases[0].generate(123).unwrap();
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
