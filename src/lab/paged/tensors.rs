//! A paged case from tensors on disk (a TA's own batch) or embedded in the
//! binary (a golden case), read through one schema.
//!
//! A lab declares its files as data ([`TensorSpec`]: name, element type,
//! shape over named dimensions such as `T` or `numBlocks`); [`read`] binds
//! each named dimension from the first file that has it and holds every
//! later file to it, so the refusals are the same in every lab: the file,
//! its shape, the shape expected and where each dimension came from. The
//! int32 arrays that describe the batch are checked against each other
//! ([`prefill_batch`]) before anything runs, because a kernel handed
//! inconsistent arrays indexes out of bounds and the student would be
//! blamed for it. Every refusal names the file and the offending value,
//! since the person reading it is fixing a NumPy script.

use std::path::Path;

use super::batch::Batch;
use super::bf16;
use super::layout::{CacheLayout, BLOCK, HKV, HQ};
use super::recipe::{CacheType, PrefillContract};
use crate::lab::case_file::read_tensor_file;
use crate::lab::npy;

/// A tensor file that cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{file}: {message}")]
pub struct TensorError {
    /// The file as the reader knows it (its path, or its name when embedded).
    pub file: String,
    pub message: String,
}

/// An [`npy`] reader of one element type: the shape and the elements.
pub type NpyReader<T> = fn(&[u8]) -> Result<(Vec<usize>, Vec<T>), npy::NpyError>;

/// Where a case's files come from: a folder, or named byte buffers.
pub struct TensorFiles<'a> {
    source: Source<'a>,
    /// Says which lab's case needs a missing file.
    needed_by: &'static str,
}

#[derive(Clone, Copy)]
enum Source<'a> {
    Dir(&'a Path),
    Embedded(&'a [(&'a str, &'a [u8])]),
}

impl<'a> TensorFiles<'a> {
    /// These files, for a case of kind `needed_by` when one is missing.
    pub fn needing(&self, needed_by: &'static str) -> Self {
        Self {
            source: self.source,
            needed_by,
        }
    }

    /// The files of folder `dir`, for a case of kind `needed_by` ("a paged case").
    pub fn in_dir(dir: &'a Path, needed_by: &'static str) -> Self {
        Self {
            source: Source::Dir(dir),
            needed_by,
        }
    }

    /// Files embedded in the binary, by name.
    pub fn embedded(files: &'a [(&'a str, &'a [u8])], needed_by: &'static str) -> Self {
        Self {
            source: Source::Embedded(files),
            needed_by,
        }
    }

    /// File `name` as the reader knows it.
    pub fn label(&self, name: &str) -> String {
        match self.source {
            Source::Dir(dir) => dir.join(name).display().to_string(),
            Source::Embedded(_) => name.to_owned(),
        }
    }

    /// A refusal of file `name`.
    pub fn refuse(&self, name: &str, message: impl Into<String>) -> TensorError {
        TensorError {
            file: self.label(name),
            message: message.into(),
        }
    }

    /// The bytes of `name`, or `None` when it is not there.
    pub fn optional(&self, name: &str) -> Result<Option<Vec<u8>>, TensorError> {
        match self.source {
            Source::Dir(dir) => {
                read_tensor_file(dir, name).map_err(|e| self.refuse(name, e.to_string()))
            }
            Source::Embedded(files) => Ok(files
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, b)| b.to_vec())),
        }
    }

    /// The bytes of `name`, which must be there.
    pub fn required(&self, name: &str) -> Result<Vec<u8>, TensorError> {
        self.optional(name)?.ok_or_else(|| {
            self.refuse(
                name,
                format!("missing ({} needs this file)", self.needed_by),
            )
        })
    }

    /// `name` decoded by `decode` (an [`npy`] reader), which must be there.
    pub fn decoded<T>(
        &self,
        name: &str,
        decode: NpyReader<T>,
    ) -> Result<(Vec<usize>, Vec<T>), TensorError> {
        decode(&self.required(name)?).map_err(|e| self.refuse(name, e.to_string()))
    }
}

/// What a tensor file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Element {
    /// float32, every element finite.
    F32,
    /// float32, NaN allowed (a cache's slots no sequence reads); the lab
    /// checks the slots that are read.
    F32Any,
    /// float32 whose every element is a finite bf16 value (NumPy has no bfloat16).
    Bf16,
    /// uint8 (FP8 bytes, any value).
    U8,
}

/// One axis of a tensor's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dim {
    /// Fixed by the contract.
    Is(usize),
    /// Named, at least 1: bound by the first file that has it.
    Named(&'static str),
}

/// One tensor file of a case, as data.
#[derive(Debug, Clone)]
pub struct TensorSpec {
    pub file: &'static str,
    pub element: Element,
    pub shape: Vec<Dim>,
    /// Said after the expected shape when it is refused (`x-packed, X = 4`).
    pub note: String,
    /// Said after the expected shape when this file is the one that binds
    /// its named dimensions (`with T >= 1`).
    pub binding: &'static str,
}

impl TensorSpec {
    pub fn new(file: &'static str, element: Element, shape: &[Dim]) -> Self {
        Self {
            file,
            element,
            shape: shape.to_vec(),
            note: String::new(),
            binding: "",
        }
    }

    /// This spec, saying `binding` when it refuses the file that names its
    /// dimensions first.
    pub fn binding(self, binding: &'static str) -> Self {
        Self { binding, ..self }
    }

    /// This spec, saying `note` when it refuses a file.
    pub fn noting(self, note: impl Into<String>) -> Self {
        Self {
            note: note.into(),
            ..self
        }
    }
}

/// A tensor's elements, in the file's type.
#[derive(Debug, Clone, PartialEq)]
pub enum Elements {
    F32(Vec<f32>),
    U8(Vec<u8>),
}

/// The tensors of a schema, read and checked, with the dimensions they bound.
pub struct Read {
    dims: Vec<Known>,
    tensors: Vec<(&'static str, Elements)>,
}

impl Read {
    /// The value of named dimension `name`.
    ///
    /// # Panics
    /// When no file of the schema names it (a schema written wrong).
    pub fn dim(&self, name: &str) -> usize {
        self.dims
            .iter()
            .find(|(n, ..)| *n == name)
            .map(|&(_, value, _)| value)
            .unwrap_or_else(|| panic!("no file of the schema has dimension {name}"))
    }

    fn take(&mut self, file: &str) -> Elements {
        let at = self
            .tensors
            .iter()
            .position(|(f, _)| *f == file)
            .unwrap_or_else(|| panic!("{file} is not in the schema"));
        self.tensors.swap_remove(at).1
    }

    /// The float32 (or bf16) elements of `file`.
    pub fn f32s(&mut self, file: &str) -> Vec<f32> {
        match self.take(file) {
            Elements::F32(values) => values,
            Elements::U8(_) => panic!("{file} holds bytes"),
        }
    }

    /// The bytes of `file`.
    pub fn bytes(&mut self, file: &str) -> Vec<u8> {
        match self.take(file) {
            Elements::U8(values) => values,
            Elements::F32(_) => panic!("{file} holds floats"),
        }
    }
}

/// A dimension already known when a schema is read: its name, value and
/// the file it came from.
pub type Known = (&'static str, usize, &'static str);

/// Reads `schema`'s files in order from `files`, each of its element type
/// and shape, binding named dimensions as they come (after the `known` ones).
pub fn read(
    files: &TensorFiles,
    schema: &[TensorSpec],
    known: &[Known],
) -> Result<Read, TensorError> {
    let mut read = Read {
        dims: known.to_vec(),
        tensors: Vec::new(),
    };
    for spec in schema {
        let (shape, elements) = match spec.element {
            Element::F32 | Element::F32Any | Element::Bf16 => {
                let (shape, values) = files.decoded(spec.file, npy::decode_f32)?;
                (shape, Elements::F32(values))
            }
            Element::U8 => {
                let (shape, values) = files.decoded(spec.file, npy::decode_u8)?;
                (shape, Elements::U8(values))
            }
        };
        check_shape(files, spec, &shape, &mut read.dims)?;
        if let Elements::F32(values) = &elements {
            check_values(files, spec, &shape, values)?;
        }
        read.tensors.push((spec.file, elements));
    }
    Ok(read)
}

/// That `shape` is `spec`'s, binding the named dimensions seen first here.
fn check_shape(
    files: &TensorFiles,
    spec: &TensorSpec,
    shape: &[usize],
    bound: &mut Vec<Known>,
) -> Result<(), TensorError> {
    let value_of = |name: &str, bound: &[(&str, usize, &str)]| {
        bound.iter().find(|(n, ..)| *n == name).map(|&(_, v, _)| v)
    };
    let fits = shape.len() == spec.shape.len()
        && spec.shape.iter().zip(shape).all(|(dim, &got)| match *dim {
            Dim::Is(n) => got == n,
            Dim::Named(name) => got > 0 && value_of(name, bound).is_none_or(|v| v == got),
        });
    if fits {
        for (dim, &got) in spec.shape.iter().zip(shape) {
            if let Dim::Named(name) = *dim {
                if value_of(name, bound).is_none() {
                    bound.push((name, got, spec.file));
                }
            }
        }
        return Ok(());
    }
    let mut expected = Vec::new();
    let mut sources = Vec::new();
    let mut binds = false;
    for dim in &spec.shape {
        match *dim {
            Dim::Is(n) => expected.push(n.to_string()),
            Dim::Named(name) => match bound.iter().find(|(n, ..)| *n == name) {
                Some(&(_, value, from)) => {
                    expected.push(value.to_string());
                    sources.push(format!("{name} from {from}"));
                }
                None => {
                    binds = true;
                    expected.push(name.to_owned());
                }
            },
        }
    }
    // What the file is, then where its dimensions came from.
    let mut why: Vec<String> = (!spec.note.is_empty())
        .then(|| spec.note.clone())
        .into_iter()
        .collect();
    why.extend(sources);
    let mut why = match why.is_empty() {
        true => String::new(),
        false => format!(" ({})", why.join(", ")),
    };
    if binds && !spec.binding.is_empty() {
        why = format!(" {}{why}", spec.binding);
    }
    Err(files.refuse(
        spec.file,
        format!("shape {shape:?}, expected [{}]{why}", expected.join(", ")),
    ))
}

/// That every float of a file is finite (and a bf16 value, for bf16 files).
fn check_values(
    files: &TensorFiles,
    spec: &TensorSpec,
    shape: &[usize],
    values: &[f32],
) -> Result<(), TensorError> {
    match spec.element {
        Element::Bf16 => {
            let Some(at) = values
                .iter()
                .position(|x| !x.is_finite() || !bf16::is_exact(*x))
            else {
                return Ok(());
            };
            let why = match values[at].is_finite() {
                true => "not a bf16 value (round the tensor to bfloat16, then store it as float32)",
                false => "not finite (inputs must be finite)",
            };
            Err(files.refuse(
                spec.file,
                format!(
                    "element {:?} is {}: {why}",
                    multi_index(shape, at),
                    values[at]
                ),
            ))
        }
        Element::F32Any | Element::U8 => Ok(()),
        Element::F32 => match values.iter().position(|x| !x.is_finite()) {
            Some(at) => Err(files.refuse(
                spec.file,
                format!("element {at} is {} (inputs must be finite)", values[at]),
            )),
            None => Ok(()),
        },
    }
}

/// `[a, b, c]` for flat index `at` of an array of `shape`.
pub fn multi_index(shape: &[usize], mut at: usize) -> Vec<usize> {
    let mut index = vec![0; shape.len()];
    for (slot, &extent) in index.iter_mut().zip(shape).rev() {
        *slot = at % extent.max(1);
        at /= extent.max(1);
    }
    index
}

/// Optional files of every paged case: ALiBi slopes (their presence turns
/// ALiBi on) and an expected output.
pub const OPTIONAL: [&str; 2] = ["alibi_slopes.npy", "expected.npy"];

/// `alibi_slopes.npy`, when present: 32 finite slopes.
pub fn alibi(files: &TensorFiles) -> Result<Option<Vec<f32>>, TensorError> {
    let name = OPTIONAL[0];
    let Some(bytes) = files.optional(name)? else {
        return Ok(None);
    };
    let (shape, slopes) = npy::decode_f32(&bytes).map_err(|e| files.refuse(name, e.to_string()))?;
    if shape[..] != [HQ] {
        return Err(files.refuse(name, format!("shape {shape:?}, expected [{HQ}]")));
    }
    if let Some(h) = slopes.iter().position(|x| !x.is_finite()) {
        return Err(files.refuse(name, format!("slope {h} is {}", slopes[h])));
    }
    Ok(Some(slopes))
}

/// `expected.npy`, when present, of shape `[rows, 32, dim]` like `q.npy`.
pub fn expected(
    files: &TensorFiles,
    rows: usize,
    dim: usize,
) -> Result<Option<Vec<f64>>, TensorError> {
    let name = OPTIONAL[1];
    let Some(bytes) = files.optional(name)? else {
        return Ok(None);
    };
    let (shape, values) = npy::decode_f64(&bytes).map_err(|e| files.refuse(name, e.to_string()))?;
    if shape[..] != [rows, HQ, dim] {
        return Err(files.refuse(
            name,
            format!("shape {shape:?}, expected [{rows}, {HQ}, {dim}] like q.npy"),
        ));
    }
    Ok(Some(values))
}

/// That every entry of `table` (`[seqs][per_seq]`, owned or not: a kernel
/// may read any of them) names one of `num_blocks` blocks.
pub fn check_block_ids(
    files: &TensorFiles,
    table: &[i32],
    per_seq: usize,
    num_blocks: usize,
) -> Result<(), TensorError> {
    match table
        .iter()
        .position(|&id| id < 0 || id as usize >= num_blocks)
    {
        Some(at) => Err(files.refuse(
            "block_table.npy",
            format!(
                "entry [{}][{}] = {} is not a block id (0..{num_blocks}, numBlocks from k_cache.npy)",
                at / per_seq,
                at % per_seq,
                table[at]
            ),
        )),
        None => Ok(()),
    }
}

/// That `per_seq` table entries hold the longest of `seq_len`.
pub fn check_table_width(
    files: &TensorFiles,
    seq_len: &[i32],
    per_seq: usize,
) -> Result<(), TensorError> {
    let longest = (0..seq_len.len()).max_by_key(|&s| seq_len[s]).unwrap_or(0);
    let needed = (seq_len[longest] as usize).div_ceil(BLOCK);
    match per_seq < needed {
        true => Err(files.refuse(
            "block_table.npy",
            format!(
                "{per_seq} blocks per sequence; seqLen[{longest}] = {} needs at least {needed}",
                seq_len[longest]
            ),
        )),
        false => Ok(()),
    }
}

/// The int32 arrays of a prefill case (`block_table.npy`, `q_start.npy`,
/// `seq_len.npy`), checked against each other, against `total` rows and
/// `num_blocks` blocks: the batch, ALiBi off.
pub fn prefill_batch(
    files: &TensorFiles,
    layout: CacheLayout,
    total: usize,
    num_blocks: usize,
    window: i32,
) -> Result<Batch, TensorError> {
    // Every paged lab's int32 files, said the way they always were.
    let files = &files.needing("a paged case");
    let (table_shape, block_table) = files.decoded("block_table.npy", npy::decode_i32)?;
    let (seqs, per_seq) = match table_shape[..] {
        [s, m] if s > 0 && m > 0 => (s, m),
        _ => {
            return Err(files.refuse(
                "block_table.npy",
                format!(
                    "shape {table_shape:?}, expected [numSeqs, maxBlocksPerSeq], both at least 1"
                ),
            ))
        }
    };
    let q_start = q_starts(files, seqs, total)?;
    let (seq_len_shape, seq_len) = files.decoded("seq_len.npy", npy::decode_i32)?;
    if seq_len_shape[..] != [seqs] {
        return Err(files.refuse(
            "seq_len.npy",
            format!("shape {seq_len_shape:?}, expected [{seqs}] (numSeqs)"),
        ));
    }
    let new: Vec<usize> = (0..seqs)
        .map(|s| (q_start[s + 1] - q_start[s]) as usize)
        .collect();
    if let Some(s) = (0..seqs).find(|&s| (seq_len[s] as i64) < new[s] as i64) {
        return Err(files.refuse(
            "seq_len.npy",
            format!(
                "seqLen[{s}] = {} is below its {} new tokens (from q_start.npy)",
                seq_len[s], new[s]
            ),
        ));
    }
    let context: Vec<usize> = (0..seqs).map(|s| seq_len[s] as usize - new[s]).collect();
    check_table_width(files, &seq_len, per_seq)?;
    check_block_ids(files, &block_table, per_seq, num_blocks)?;
    Ok(Batch {
        layout,
        context,
        new,
        sliding_window: window,
        alibi: false,
        max_blocks_per_seq: per_seq,
        num_blocks,
        block_table,
        q_start,
        seq_len,
        // A folder's tensors are the cache itself, as compact as the TA wrote it.
        high: None,
    })
}

/// `q_start.npy`: `seqs + 1` offsets from 0 to `total`, each sequence at
/// least one token.
fn q_starts(files: &TensorFiles, seqs: usize, total: usize) -> Result<Vec<i32>, TensorError> {
    let name = "q_start.npy";
    let (shape, q_start) = files.decoded(name, npy::decode_i32)?;
    if shape[..] != [seqs + 1] {
        return Err(files.refuse(
            name,
            format!(
                "shape {shape:?}, expected [{}] (numSeqs + 1, numSeqs from block_table.npy)",
                seqs + 1
            ),
        ));
    }
    if q_start[0] != 0 {
        return Err(files.refuse(name, format!("qStart[0] = {}, must be 0", q_start[0])));
    }
    if let Some(s) = (0..seqs).find(|&s| q_start[s + 1] <= q_start[s]) {
        return Err(files.refuse(
            name,
            format!(
                "qStart[{}] = {} is not above qStart[{s}] = {}: every sequence needs at least one new token",
                s + 1,
                q_start[s + 1],
                q_start[s]
            ),
        ));
    }
    if q_start[seqs] as usize != total {
        return Err(files.refuse(
            name,
            format!(
                "qStart[{seqs}] = {}, must be T = {total} (rows of q.npy)",
                q_start[seqs]
            ),
        ));
    }
    Ok(q_start)
}

/// The two cache files of `layout` (`numBlocks` blocks) holding `element`
/// (FP8 bytes when it is [`Element::U8`]).
pub fn cache_schema(layout: CacheLayout, element: Element) -> [TensorSpec; 2] {
    let CacheLayout { dim, x } = layout;
    let blocks = Dim::Named("numBlocks");
    let k_shape = [
        blocks,
        Dim::Is(HKV),
        Dim::Is(dim / x),
        Dim::Is(BLOCK),
        Dim::Is(x),
    ];
    let v_shape = [blocks, Dim::Is(HKV), Dim::Is(dim), Dim::Is(BLOCK)];
    let (k_what, v_note) = match element {
        Element::U8 => ("uint8 FP8 bytes, ", "uint8"),
        _ => ("", ""),
    };
    [
        TensorSpec::new("k_cache.npy", element, &k_shape)
            .noting(format!("{k_what}x-packed, X = {x}")),
        TensorSpec::new("v_cache.npy", element, &v_shape).noting(v_note),
    ]
}

/// The files of a prefill case folder under `assets/` (a golden case, with
/// its ALiBi slopes and expected output), embedded, by name.
macro_rules! embedded_prefill_files {
    ($dir:literal) => {
        $crate::lab::golden::embedded_files!(
            $dir,
            "q.npy",
            "k_new.npy",
            "v_new.npy",
            "k_cache.npy",
            "v_cache.npy",
            "block_table.npy",
            "q_start.npy",
            "seq_len.npy",
            "alibi_slopes.npy",
            "expected.npy",
        )
    };
}
pub(crate) use embedded_prefill_files;

/// A prefill case's files, read and checked: the batch from its int32
/// arrays, the five tensors (for the lab to take in its element types),
/// the ALiBi slopes and the expected output it may bring.
pub struct PrefillFiles {
    pub batch: Batch,
    pub tensors: Read,
    pub alibi_slopes: Option<Vec<f32>>,
    pub expected: Option<Vec<f64>>,
}

impl PrefillContract {
    /// The element type of `q`, `kNew`, `vNew` (and `out`).
    pub fn activations(&self) -> Element {
        match self.cache {
            CacheType::F32 => Element::F32,
            CacheType::Fp8 => Element::Bf16,
        }
    }

    /// The five tensor files of a prefill case, in the order they are read.
    pub fn schema(&self) -> Vec<TensorSpec> {
        let dim = self.layout.dim;
        let rows = Dim::Named("T");
        let activations = self.activations();
        let mut schema = vec![
            TensorSpec::new("q.npy", activations, &[rows, Dim::Is(HQ), Dim::Is(dim)])
                .binding("with T >= 1"),
            TensorSpec::new(
                "k_new.npy",
                activations,
                &[rows, Dim::Is(HKV), Dim::Is(dim)],
            ),
            TensorSpec::new(
                "v_new.npy",
                activations,
                &[rows, Dim::Is(HKV), Dim::Is(dim)],
            ),
        ];
        schema.extend(match self.cache {
            CacheType::F32 => cache_schema(self.layout, Element::F32),
            CacheType::Fp8 => cache_schema(self.layout, Element::U8),
        });
        schema
    }

    /// Reads and checks a prefill case's files; `window` comes from its recipe.
    pub fn load(&self, files: &TensorFiles, window: i32) -> Result<PrefillFiles, TensorError> {
        let tensors = read(files, &self.schema(), &[])?;
        let (total, num_blocks) = (tensors.dim("T"), tensors.dim("numBlocks"));
        let batch = prefill_batch(files, self.layout, total, num_blocks, window)?;
        let alibi_slopes = alibi(files)?;
        let expected = expected(files, total, self.layout.dim)?;
        Ok(PrefillFiles {
            batch: Batch {
                alibi: alibi_slopes.is_some(),
                ..batch
            },
            tensors,
            alibi_slopes,
            expected,
        })
    }
}

/// The `.npy` files of a prefill case (what a TA's script writes): the five
/// tensors as `schema` says (each given as floats, or as bytes for a uint8
/// file), the batch's int32 arrays, and the optional files when given.
#[cfg(test)]
pub fn encode_prefill(
    contract: &PrefillContract,
    batch: &Batch,
    tensors: [Elements; 5],
    alibi_slopes: Option<&[f32]>,
    expected: Option<&[f64]>,
) -> Vec<(&'static str, Vec<u8>)> {
    let ok = "shapes follow the batch";
    let (t, n) = (batch.total_new(), batch.num_blocks);
    let mut files: Vec<(&'static str, Vec<u8>)> = contract
        .schema()
        .iter()
        .zip(tensors)
        .map(|(spec, elements)| {
            let shape: Vec<usize> = spec
                .shape
                .iter()
                .map(|dim| match *dim {
                    Dim::Is(extent) => extent,
                    Dim::Named("T") => t,
                    Dim::Named(_) => n,
                })
                .collect();
            let bytes = match elements {
                Elements::F32(values) => npy::encode_f32(&shape, &values),
                Elements::U8(values) => npy::encode_u8(&shape, &values),
            };
            (spec.file, bytes.expect(ok))
        })
        .collect();
    let s = batch.num_seqs();
    files.extend([
        (
            "block_table.npy",
            npy::encode_i32(&[s, batch.max_blocks_per_seq], &batch.block_table).expect(ok),
        ),
        (
            "q_start.npy",
            npy::encode_i32(&[s + 1], &batch.q_start).expect(ok),
        ),
        (
            "seq_len.npy",
            npy::encode_i32(&[s], &batch.seq_len).expect(ok),
        ),
    ]);
    if let Some(slopes) = alibi_slopes {
        files.push((OPTIONAL[0], npy::encode_f32(&[HQ], slopes).expect(ok)));
    }
    if let Some(expected) = expected {
        let shape = [t, HQ, contract.layout.dim];
        files.push((OPTIONAL[1], npy::encode_f64(&shape, expected).expect(ok)));
    }
    files
}
