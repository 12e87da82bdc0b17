//! A case's own tensors: `q.npy`, `k.npy`, `v.npy` and optionally
//! `expected.npy` from the case's folder, each checked against the contract's
//! shapes with a message naming the file.

use std::path::Path;

use super::cases::CaseSpec;
use super::contract::{Inputs, Shape, DH, HKV, HQ};
use crate::lab::definition::CaseError;
use crate::lab::npy;
use crate::lab::typed::Made;

/// The tensors in `dir` as `case`'s inputs.
pub fn load_dir(case: &CaseSpec, dir: &Path) -> Result<Made<Inputs>, CaseError> {
    let wrap = |source: npy::NpyError| CaseError::Invalid {
        case: case.name.clone(),
        message: source.to_string(),
    };
    let (q_shape, q) = npy::read_f32(&dir.join("q.npy")).map_err(wrap)?;
    let (k_shape, k) = npy::read_f32(&dir.join("k.npy")).map_err(wrap)?;
    let (v_shape, v) = npy::read_f32(&dir.join("v.npy")).map_err(wrap)?;
    let [chunk, hq, dh] = q_shape[..] else {
        return Err(case.invalid(format!(
            "q.npy has shape {q_shape:?}, expected [C, {HQ}, {DH}]"
        )));
    };
    if hq != HQ || dh != DH || chunk == 0 {
        return Err(case.invalid(format!(
            "q.npy has shape {q_shape:?}, expected [C, {HQ}, {DH}]"
        )));
    }
    let [seq, hkv, dh] = k_shape[..] else {
        return Err(case.invalid(format!(
            "k.npy has shape {k_shape:?}, expected [P+C, {HKV}, {DH}]"
        )));
    };
    if hkv != HKV || dh != DH || seq < chunk {
        return Err(case.invalid(format!(
            "k.npy has shape {k_shape:?}, expected [P+C, {HKV}, {DH}] with P+C >= C = {chunk}"
        )));
    }
    if v_shape != k_shape {
        return Err(case.invalid(format!(
            "v.npy has shape {v_shape:?}, k.npy {k_shape:?}: they must match"
        )));
    }
    case.check_bounds(chunk, seq - chunk)?;
    let shape = Shape {
        chunk_len: chunk,
        prefix_len: seq - chunk,
    };
    let expected_path = dir.join("expected.npy");
    let expected = if expected_path.exists() {
        let (e_shape, e) = npy::read_f64(&expected_path).map_err(wrap)?;
        if e_shape != q_shape {
            return Err(case.invalid(format!(
                "expected.npy has shape {e_shape:?}, q.npy {q_shape:?}: they must match"
            )));
        }
        Some(e)
    } else {
        None
    };
    Ok(Made {
        inputs: Inputs { shape, q, k, v },
        expected,
        planted_heads: case.planted_heads(),
    })
}
