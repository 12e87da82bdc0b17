//! A decode case from tensors on disk (a TA's own batch) or embedded (the
//! golden case), through the family's schema ([`crate::lab::paged::tensors`]).
//!
//! The files are checked against the contract and against each other
//! before anything runs: a kernel handed a block id past the cache or a
//! `seqLen` longer than its table row reads out of bounds, and the student
//! would be blamed. Each refusal names the file and what is wrong with it,
//! since the person reading it is fixing a NumPy script. Lengths come from
//! the files; ALiBi is on exactly when `alibi_slopes.npy` is there.

use std::path::Path;

use super::cases::{MAX_SEQS, MAX_SEQ_LEN};
use super::{Batch, Inputs, DH, HKV, HQ, LAYOUT};
use crate::lab::npy;
pub use crate::lab::paged::tensors::TensorError;
use crate::lab::paged::tensors::{self, cache_schema, Dim, Element, TensorFiles, TensorSpec};

/// `q.npy`, read after the cache (NaN allowed where no sequence reads,
/// [`cache_schema`]) and the block ids checked against it.
fn q_schema() -> TensorSpec {
    TensorSpec::new(
        "q.npy",
        Element::F32,
        &[Dim::Named("numSeqs"), Dim::Is(HQ), Dim::Is(DH)],
    )
}

/// A case's inputs, plus the expected output its folder brings, if any.
pub type Loaded = (Inputs, Option<Vec<f64>>);

/// Loads and checks a case folder's files.
pub fn load_dir(dir: &Path) -> Result<Loaded, TensorError> {
    load(&TensorFiles::in_dir(dir, "a decode case"))
}

/// Loads from named byte buffers (the embedded golden case).
pub fn load_bytes(files: &[(&str, &[u8])]) -> Result<Loaded, TensorError> {
    load(&TensorFiles::embedded(files, "a decode case"))
}

fn load(files: &TensorFiles) -> Result<Loaded, TensorError> {
    let (seq_shape, seq_len) = files.decoded("seq_len.npy", npy::decode_i32)?;
    let seqs = match seq_shape[..] {
        [s] if (1..=MAX_SEQS).contains(&s) => s,
        _ => {
            return Err(files.refuse(
                "seq_len.npy",
                format!("shape {seq_shape:?}, expected [numSeqs] with 1 to {MAX_SEQS} sequences"),
            ))
        }
    };
    if let Some((s, &len)) = seq_len
        .iter()
        .enumerate()
        .find(|(_, &l)| l < 1 || l as usize > MAX_SEQ_LEN)
    {
        return Err(files.refuse(
            "seq_len.npy",
            format!("seqLen[{s}] = {len}, outside 1..={MAX_SEQ_LEN}"),
        ));
    }
    let (table_shape, block_table) = files.decoded("block_table.npy", npy::decode_i32)?;
    let per_seq = match table_shape[..] {
        [s, m] if s == seqs && m > 0 => m,
        _ => {
            return Err(files.refuse(
                "block_table.npy",
                format!(
                    "shape {table_shape:?}, expected [{seqs}, maxBlocksPerSeq] (numSeqs from \
                     seq_len.npy, maxBlocksPerSeq at least 1)"
                ),
            ))
        }
    };
    tensors::check_table_width(files, &seq_len, per_seq)?;
    let seqs_known = [("numSeqs", seqs, "seq_len.npy")];
    let mut caches = tensors::read(files, &cache_schema(LAYOUT, Element::F32Any), &seqs_known)?;
    let num_blocks = caches.dim("numBlocks");
    tensors::check_block_ids(files, &block_table, per_seq, num_blocks)?;
    let q = tensors::read(files, &[q_schema()], &seqs_known)?.f32s("q.npy");
    let alibi_slopes = tensors::alibi(files)?;
    let expected = tensors::expected(files, seqs, DH)?;
    let inputs = Inputs {
        batch: Batch {
            seq_len,
            max_blocks_per_seq: per_seq,
            num_blocks,
            block_table,
            alibi: alibi_slopes.is_some(),
        },
        q,
        k_cache: caches.f32s("k_cache.npy"),
        v_cache: caches.f32s("v_cache.npy"),
        alibi_slopes,
    };
    // Slots past a sequence's end may hold NaN (the grader puts it there);
    // the slots a sequence reads may not.
    for s in 0..seqs {
        for pos in 0..inputs.batch.len_of(s) {
            for g in 0..HKV {
                for d in 0..DH {
                    if !(inputs.key(s, pos, g, d).is_finite()
                        && inputs.value(s, pos, g, d).is_finite())
                    {
                        return Err(TensorError {
                            file: format!(
                                "{} / {}",
                                files.label("k_cache.npy"),
                                files.label("v_cache.npy")
                            ),
                            message: format!(
                                "sequence {s} reads a non-finite element at position {pos}, KV \
                                 head {g}, dim {d}"
                            ),
                        });
                    }
                }
            }
        }
    }
    Ok((inputs, expected))
}

/// The files of `inputs` (and of `expected`, when given) as `.npy` bytes,
/// by name: what a TA's script would write.
#[cfg(test)]
pub(crate) fn encode(inputs: &Inputs, expected: Option<&[f64]>) -> Vec<(&'static str, Vec<u8>)> {
    use super::{BLOCK, X};
    let b = &inputs.batch;
    let seqs = b.num_seqs();
    let f32s = |shape: &[usize], data: &[f32]| npy::encode_f32(shape, data).expect("shape fits");
    let mut files = vec![
        (
            "seq_len.npy",
            npy::encode_i32(&[seqs], &b.seq_len).expect("shape fits"),
        ),
        (
            "block_table.npy",
            npy::encode_i32(&[seqs, b.max_blocks_per_seq], &b.block_table).expect("shape fits"),
        ),
        (
            "k_cache.npy",
            f32s(&[b.num_blocks, HKV, DH / X, BLOCK, X], &inputs.k_cache),
        ),
        (
            "v_cache.npy",
            f32s(&[b.num_blocks, HKV, DH, BLOCK], &inputs.v_cache),
        ),
        ("q.npy", f32s(&[seqs, HQ, DH], &inputs.q)),
    ];
    if let Some(slopes) = &inputs.alibi_slopes {
        files.push(("alibi_slopes.npy", f32s(&[HQ], slopes)));
    }
    if let Some(e) = expected {
        files.push((
            "expected.npy",
            npy::encode_f64(&[seqs, HQ, DH], e).expect("shape fits"),
        ));
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::paged_decode::cases::{hazard_cases, EMBEDDED_CASES};
    use crate::lab::paged_decode::BLOCK;
    use crate::lab::paged_decode::{PagedDecode, PAGED_DECODE};
    use crate::lab::typed;

    /// The first embedded case (five sequences, up to 513 keys) from seed 5.
    fn generated() -> Inputs {
        hazard_cases()[0].generate(5).unwrap()
    }

    /// Batch, then every float bit for bit (the cache holds NaN).
    fn bits(i: &Inputs) -> (Batch, Vec<u32>) {
        let floats = i.q.iter().chain(&i.k_cache).chain(&i.v_cache);
        let slopes = i.alibi_slopes.iter().flatten();
        (
            i.batch.clone(),
            floats.chain(slopes).map(|x| x.to_bits()).collect(),
        )
    }

    /// What loading `generated()`'s files says after `edit` replaces or drops some.
    fn refused(edit: impl FnOnce(&mut Vec<(&'static str, Vec<u8>)>)) -> String {
        let mut files = encode(&generated(), None);
        edit(&mut files);
        let refs: Vec<(&str, &[u8])> = files.iter().map(|(n, b)| (*n, b.as_slice())).collect();
        load_bytes(&refs).unwrap_err().to_string()
    }

    fn replace(files: &mut [(&'static str, Vec<u8>)], name: &str, bytes: Vec<u8>) {
        files.iter_mut().find(|(n, _)| *n == name).unwrap().1 = bytes;
    }

    fn table(files: &[(&'static str, Vec<u8>)]) -> (Vec<usize>, Vec<i32>) {
        npy::decode_i32(
            &files
                .iter()
                .find(|(n, _)| *n == "block_table.npy")
                .unwrap()
                .1,
        )
        .unwrap()
    }

    #[test]
    fn a_case_folder_is_graded_like_the_same_inputs_generated() {
        let name = hazard_cases()
            .into_iter()
            .find(|c| c.alibi)
            .expect("a case with ALiBi")
            .name;
        let case = PAGED_DECODE
            .parse_cases(EMBEDDED_CASES, "cases.toml", Path::new("."))
            .unwrap()
            .into_iter()
            .find(|c| c.name == name)
            .unwrap();
        let made = PAGED_DECODE.generate(&case, 11).unwrap();
        let inputs = typed::inputs_of::<PagedDecode>(&made);
        let oracle = PAGED_DECODE.oracle(&made, None);
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("mine")).unwrap();
        for (name, bytes) in encode(inputs, Some(&oracle)) {
            std::fs::write(dir.path().join("mine").join(name), bytes).unwrap();
        }
        let text = "[[case]]\nname = \"own\"\nsummary = \"s\"\ntensors = \"mine\"\n";
        let case = &PAGED_DECODE
            .parse_cases(text, "t.toml", dir.path())
            .unwrap()[0];
        // Another seed: a folder's tensors do not depend on it.
        let loaded = PAGED_DECODE.generate(case, 99).unwrap();
        let from_files = typed::inputs_of::<PagedDecode>(&loaded);
        assert!(from_files.batch.alibi);
        assert_eq!(bits(from_files), bits(inputs));
        assert_eq!(PAGED_DECODE.oracle(&loaded, None), oracle);
        assert_eq!(loaded.expected.as_deref(), Some(&oracle[..]));
        assert_eq!(loaded.problem, made.problem);
    }

    #[test]
    fn a_missing_file_is_named_with_its_path() {
        let err = load_dir(Path::new("/nonexistent/case"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("/nonexistent/case/seq_len.npy: missing"),
            "{err}"
        );
    }

    #[test]
    fn an_int64_or_float_length_file_is_refused_by_its_dtype() {
        let err = refused(|f| {
            replace(f, "seq_len.npy", npy::encode_f32(&[5], &[1.0; 5]).unwrap());
        });
        assert!(
            err.contains("seq_len.npy: element type is `<f4`, expected `<i4`"),
            "{err}"
        );
    }

    #[test]
    fn a_cache_not_x_packed_is_refused_by_its_shape() {
        let err = refused(|f| {
            let i = generated();
            let n = i.batch.num_blocks;
            replace(
                f,
                "k_cache.npy",
                npy::encode_f32(&[n, HKV, DH, BLOCK], &i.k_cache).unwrap(),
            );
        });
        assert!(
            err.contains("k_cache.npy: shape [") && err.contains("(x-packed, X = 4)"),
            "{err}"
        );
    }

    #[test]
    fn q_must_have_a_row_per_sequence() {
        let err = refused(|f| {
            replace(
                f,
                "q.npy",
                npy::encode_f32(&[4, HQ, DH], &vec![0.0; 4 * HQ * DH]).unwrap(),
            );
        });
        assert!(
            err.contains("q.npy: shape [4, 32, 64], expected [5, 32, 64]"),
            "{err}"
        );
    }

    #[test]
    fn a_block_table_entry_past_the_cache_is_refused_by_position() {
        let n = generated().batch.num_blocks;
        let err = refused(|f| {
            let (shape, mut t) = table(f);
            t[shape[1] + 1] = n as i32;
            replace(f, "block_table.npy", npy::encode_i32(&shape, &t).unwrap());
        });
        assert!(
            err.contains(&format!(
                "block_table.npy: entry [1][1] = {n} is not a block id (0..{n}"
            )),
            "{err}"
        );
    }

    #[test]
    fn a_table_row_too_short_for_a_sequence_is_refused() {
        let err = refused(|f| {
            let (_, t) = table(f);
            replace(
                f,
                "block_table.npy",
                npy::encode_i32(&[5, 1], &t[..5]).unwrap(),
            );
        });
        assert!(
            err.contains("block_table.npy: 1 blocks per sequence; seqLen["),
            "{err}"
        );
    }

    #[test]
    fn a_seq_len_above_the_maximum_is_refused() {
        let err = refused(|f| {
            replace(
                f,
                "seq_len.npy",
                npy::encode_i32(&[5], &[1, 2, 8193, 4, 5]).unwrap(),
            );
        });
        assert!(
            err.contains("seq_len.npy: seqLen[2] = 8193, outside 1..=8192"),
            "{err}"
        );
    }

    #[test]
    fn a_sequence_reading_nan_is_refused() {
        // Sequence 0 one key longer: its next slot holds the grader's NaN
        // (or a spare block's), which the kernel would read.
        let err = refused(|f| {
            let mut lens = generated().batch.seq_len;
            lens[0] += 1;
            replace(f, "seq_len.npy", npy::encode_i32(&[5], &lens).unwrap());
        });
        assert!(
            err.contains("sequence 0 reads a non-finite element"),
            "{err}"
        );
    }

    #[test]
    fn a_case_with_a_folder_takes_no_recipe_keys() {
        let text = "[[case]]\nname = \"own\"\nsummary = \"s\"\ntensors = \"mine\"\nseq_len = [3]\n";
        let err = PAGED_DECODE
            .parse_cases(text, "t.toml", Path::new("."))
            .unwrap_err()
            .to_string();
        assert!(err.contains("takes no recipe keys"), "{err}");
    }
}
