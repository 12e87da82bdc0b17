//! The paged prefill labs' case recipe: one `[[case]]` table of their cases
//! files, validated against the lab's [`PrefillContract`].
//!
//! A recipe names lengths, not tensors: per-sequence context and new-token
//! counts, a window, ALiBi, an optional shared prefix block and planted
//! high scores; an FP8 cache adds its format, its two scales and whether
//! bytes far outside `[-1, 1)` are placed. Or it names a folder of the
//! case's own tensors. Every lab of the family reads the same table, so a
//! key means the same in each; the contract says which cache keys apply.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::batch::Batch;
use super::fp8::KvFormat;
use super::high_blocks::Reach;
use super::layout::{CacheLayout, BLOCK, HQ};
use crate::lab::case_file::{case_table, read_case_tables};
use crate::lab::definition::CaseError;

/// Most sequences in one case.
pub const MAX_SEQS: usize = 16;
/// Longest context of a case sequence: a long-context case's 32k and room
/// beyond it.
pub const MAX_CONTEXT: usize = 65_536;
/// Most new tokens of a case sequence.
pub const MAX_NEW: usize = 512;
/// Most visible (row, key) pairs per head in a case. Below
/// [`crate::lab::definition::WHOLE_ORACLE_FLOPS`] of work (about 490k pairs
/// at head dimension 64) the CPU oracle computes the whole output; above,
/// it recomputes sampled rows of the GPU float64 reference, and this bound
/// keeps those rows' sequences, which it gathers whole, under a second.
pub const MAX_VISIBLE_PAIRS: u64 = 8_000_000;
/// Most elements one generated cache (K or V) may hold, a high-blocks
/// case's landing blocks counted: 64 Mi, room for the 32k case's 34M, so a
/// cases file cannot ask the host and the GPU for gigabytes.
pub const MAX_CACHE_ELEMS: u64 = 1 << 26;
/// Largest planted magnitude (a score of 16 * 16 * 64 / 8 = 2048 at head dim 64).
pub const MAX_PLANT: f32 = 16.0;
/// Blocks beyond `numSeqs * maxBlocksPerSeq` in a generated case, never
/// owned by a context: stray reads land in sentinels.
pub const SPARE_BLOCKS: usize = 4;

/// The timing shape's context lengths (both prefill contracts, section 1).
pub const TIMING_CONTEXT: [usize; 16] = [
    4096, 3584, 3072, 2816, 2560, 2048, 2048, 1792, 1536, 1280, 1024, 1000, 768, 640, 512, 4000,
];
/// The timing shape's new-token counts.
pub const TIMING_NEW: [usize; 16] = [
    512, 64, 256, 128, 384, 512, 1, 200, 448, 96, 320, 160, 512, 64, 256, 17,
];

/// What a cache element is, which decides the cache keys a recipe takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheType {
    /// fp32 values: no cache keys.
    F32,
    /// FP8 bytes: `format` (required), `k_scale`, `v_scale`, `wide`.
    Fp8,
}

/// What a paged prefill lab's contract fixes: its cache's layout and element.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrefillContract {
    pub layout: CacheLayout,
    pub cache: CacheType,
}

/// Which new tokens of the sequence a plant sets in `q`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum PlantRows {
    /// Token indices within the sequence's new tokens.
    List(Vec<usize>),
    Named(NamedRows),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NamedRows {
    All,
    Last,
}

/// Which key positions of the sequence a plant sets in K (cache or `kNew`):
/// positions, or a key named by its role (`Named`, the lab's roles; the
/// prefill labs' are [`NamedKeys`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum PlantKeys<Named = NamedKeys> {
    /// Positions in the sequence (below the context: the cache; from it on: `kNew`).
    List(Vec<usize>),
    Named(Named),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NamedKeys {
    /// The last cached key, in the last block of the context.
    LastCached,
    /// The first new token's key.
    FirstNew,
    /// The sequence's very last key: only its last row sees it.
    LastNew,
}

/// A high score: `q` rows of one query head and K positions of its KV
/// head set to `value` in every dimension (score `value^2 * DH * scale`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plant {
    pub seq: usize,
    pub head: usize,
    pub rows: PlantRows,
    pub keys: PlantKeys,
    pub value: f32,
}

impl Plant {
    /// The new tokens (indices within the sequence's `new`) the plant sets in `q`.
    pub fn rows(&self, new: usize) -> Vec<usize> {
        match &self.rows {
            PlantRows::List(list) => list.clone(),
            PlantRows::Named(NamedRows::All) => (0..new).collect(),
            PlantRows::Named(NamedRows::Last) => new.checked_sub(1).into_iter().collect(),
        }
    }

    /// The key positions the plant sets, in a sequence of `context` cached
    /// and `new` new tokens.
    pub fn keys(&self, context: usize, new: usize) -> Vec<usize> {
        match &self.keys {
            PlantKeys::List(list) => list.clone(),
            PlantKeys::Named(NamedKeys::LastCached) => context.checked_sub(1).into_iter().collect(),
            PlantKeys::Named(NamedKeys::FirstNew) => vec![context],
            PlantKeys::Named(NamedKeys::LastNew) => vec![context + new - 1],
        }
    }
}

/// One hazard case as written in the cases file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaseSpec {
    pub name: String,
    pub summary: String,
    #[serde(default)]
    pub context: Vec<usize>,
    #[serde(default)]
    pub new: Vec<usize>,
    /// 0 (or negative): off.
    #[serde(default)]
    pub window: i32,
    #[serde(default)]
    pub alibi: bool,
    /// Two sequences whose first context block is the same physical block.
    #[serde(default)]
    pub share_prefix: Option<[usize; 2]>,
    #[serde(default)]
    pub plant: Vec<Plant>,
    /// A folder of the case's own tensors, relative to the cases file.
    /// Such a case takes only `window` (and an FP8 cache's keys) besides.
    #[serde(default)]
    pub tensors: Option<PathBuf>,
    /// An FP8 cache's format.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<KvFormat>,
    /// An FP8 cache's K scale (default [`Fp8Keys::DEFAULT_K_SCALE`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub k_scale: Option<f32>,
    /// An FP8 cache's V scale (default [`Fp8Keys::DEFAULT_V_SCALE`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub v_scale: Option<f32>,
    /// FP8 bytes near the format's top in V and large ones in one dimension of K.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wide: Option<bool>,
    /// The cache's blocks placed past 2^31 or 2^32 elements (`"past-2^31"`,
    /// `"past-2^32"`), mapped only where they and their wrapped offsets are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub high_blocks: Option<Reach>,
}

/// An FP8 case's cache keys, with their defaults.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fp8Keys {
    pub format: KvFormat,
    pub k_scale: f32,
    pub v_scale: f32,
    pub wide: bool,
}

impl Fp8Keys {
    pub const DEFAULT_K_SCALE: f32 = 0.5;
    pub const DEFAULT_V_SCALE: f32 = 2.0;
}

/// A paged case or its tensors that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PagedCaseError {
    #[error("case `{case}`: {message}")]
    Invalid { case: String, message: String },
    #[error("{file}: {message}")]
    Tensor { file: String, message: String },
}

impl From<super::tensors::TensorError> for PagedCaseError {
    fn from(error: super::tensors::TensorError) -> Self {
        PagedCaseError::Tensor {
            file: error.file,
            message: error.message,
        }
    }
}

impl PagedCaseError {
    /// The engine's error for case `case`: a tensor file's refusal is the case's.
    pub fn for_case(self, case: &str) -> CaseError {
        match self {
            PagedCaseError::Invalid { case, message } => CaseError::Invalid { case, message },
            PagedCaseError::Tensor { file, message } => CaseError::Invalid {
                case: case.to_owned(),
                message: format!("{file}: {message}"),
            },
        }
    }
}

/// What a case's generator or loader made: the inputs, and the expected
/// output a case's own tensors may bring.
#[derive(Debug, Clone, PartialEq)]
pub struct CaseInputs<I> {
    pub inputs: I,
    pub expected: Option<Vec<f64>>,
}

case_table!(CaseSpec);

impl PrefillContract {
    /// Parses and validates a cases file (shown as `file`); `base` resolves
    /// relative tensor folders.
    pub fn parse_cases(
        &self,
        text: &str,
        file: &str,
        base: &Path,
    ) -> Result<Vec<CaseSpec>, CaseError> {
        let mut cases: Vec<CaseSpec> = read_case_tables(text, file, base)?;
        for case in &mut cases {
            case.validate(self).map_err(|e| e.for_case(&case.name))?;
            self.spell_out(case);
        }
        Ok(cases)
    }

    /// That `case` is a case of this instance (one decoded from the worker
    /// pipe, which no cases file checked).
    pub fn check(&self, case: &CaseSpec) -> Result<(), CaseError> {
        case.validate(self).map_err(|e| e.for_case(&case.name))
    }

    /// `case` with the defaults of its cache keys written in: an FP8 case
    /// names its scales and `wide` as its recipe always has (a class's
    /// journal keys its rows by that text).
    pub fn spell_out(&self, case: &mut CaseSpec) {
        if let Some(keys) = case.fp8() {
            case.k_scale = Some(keys.k_scale);
            case.v_scale = Some(keys.v_scale);
            case.wide = Some(keys.wide);
        }
    }

    /// The batch of `spec`'s declared lengths, with the table still empty.
    pub fn lengths_batch(&self, spec: &CaseSpec) -> Batch {
        let max_len = (0..spec.context.len())
            .map(|s| spec.context[s] + spec.new[s])
            .max()
            .unwrap_or(0);
        let per_seq = max_len.div_ceil(BLOCK).max(1);
        Batch::from_lengths(
            self.layout,
            spec.context.clone(),
            spec.new.clone(),
            spec.window,
            spec.alibi,
            per_seq,
            spec.context.len() * per_seq + SPARE_BLOCKS,
        )
    }

    /// The timing shape's lengths (window and ALiBi off, every block owned).
    pub fn timing_lengths(&self) -> Batch {
        let max_len = (0..16)
            .map(|s| TIMING_CONTEXT[s] + TIMING_NEW[s])
            .max()
            .unwrap();
        let per_seq = max_len.div_ceil(BLOCK);
        Batch::from_lengths(
            self.layout,
            TIMING_CONTEXT.to_vec(),
            TIMING_NEW.to_vec(),
            0,
            false,
            per_seq,
            16 * per_seq,
        )
    }
}

/// Why a `share_prefix` pair cannot be laid out, if it cannot: it must name
/// two different sequences of the case, each with at least a block of keys
/// to share (`keys`: a prefill case's contexts, a decode case's lengths).
pub fn shared_prefix_refusal([a, b]: [usize; 2], keys: &[usize]) -> Option<String> {
    let seqs = keys.len();
    if a == b || a >= seqs || b >= seqs {
        return Some(format!(
            "share_prefix [{a}, {b}] must name two different sequences below {seqs}"
        ));
    }
    let short = [a, b].into_iter().find(|&s| keys[s] < BLOCK)?;
    Some(format!(
        "share_prefix: sequence {short} has {} keys to share, shorter than a block \
         ({BLOCK} keys): sharing a block needs one in both",
        keys[short]
    ))
}

impl CaseSpec {
    fn invalid(&self, message: impl Into<String>) -> PagedCaseError {
        PagedCaseError::Invalid {
            case: self.name.clone(),
            message: message.into(),
        }
    }

    /// The FP8 cache keys, with their defaults; `None` when no format is named.
    pub fn fp8(&self) -> Option<Fp8Keys> {
        Some(Fp8Keys {
            format: self.format?,
            k_scale: self.k_scale.unwrap_or(Fp8Keys::DEFAULT_K_SCALE),
            v_scale: self.v_scale.unwrap_or(Fp8Keys::DEFAULT_V_SCALE),
            wide: self.wide.unwrap_or(false),
        })
    }

    /// The FP8 cache keys of a case whose cache is FP8, which must name its format.
    pub fn fp8_keys(&self) -> Result<Fp8Keys, PagedCaseError> {
        self.fp8().ok_or_else(|| {
            self.invalid("`format` is missing: the cache's format, \"e4m3\" or \"e5m2\"")
        })
    }

    /// Query heads (bit `h` for head `h`) where the case plants large scores.
    pub fn planted_heads(&self) -> u32 {
        self.plant
            .iter()
            .fold(0, |mask, plant| mask | 1 << plant.head)
    }

    pub(crate) fn validate(&self, contract: &PrefillContract) -> Result<(), PagedCaseError> {
        self.validate_cache_keys(contract.cache)?;
        let max_window = (MAX_CONTEXT + MAX_NEW) as i32;
        if self.window > max_window {
            return Err(self.invalid(format!(
                "window {} is longer than any sequence can be (at most {max_window})",
                self.window
            )));
        }
        if self.tensors.is_some() {
            let has_recipe = !self.context.is_empty()
                || !self.new.is_empty()
                || self.alibi
                || self.share_prefix.is_some()
                || !self.plant.is_empty()
                || self.high_blocks.is_some();
            if has_recipe {
                return Err(self.invalid(
                    "a case with its own tensors takes only `window` (lengths come from the \
                     files, ALiBi from alibi_slopes.npy, block ids from block_table.npy)",
                ));
            }
            return Ok(());
        }
        self.validate_lengths()?;
        let batch = contract.lengths_batch(self);
        let pairs = batch.visible_pairs_per_head();
        if pairs > MAX_VISIBLE_PAIRS {
            return Err(self.invalid(format!(
                "{pairs} visible (row, key) pairs per head: a case has at most \
                 {MAX_VISIBLE_PAIRS}, so its CPU oracle's sampled rows stay fast"
            )));
        }
        // Each block of a high-blocks case gets up to two landing blocks.
        let copies = if self.high_blocks.is_some() { 3 } else { 1 };
        let elems = (batch.num_blocks * copies * contract.layout.block_elems()) as u64;
        if elems > MAX_CACHE_ELEMS {
            return Err(self.invalid(format!(
                "a cache of {elems} elements (K and V each): a case has at most \
                 {MAX_CACHE_ELEMS}; every sequence gets the longest one's blocks, so shorten \
                 the longest or use fewer sequences"
            )));
        }
        self.validate_shared_prefix()?;
        for plant in &self.plant {
            self.validate_plant(plant)?;
        }
        Ok(())
    }

    /// The cache keys `cache` takes, and only those.
    fn validate_cache_keys(&self, cache: CacheType) -> Result<(), PagedCaseError> {
        match cache {
            CacheType::F32 => {
                let fp8_key = [
                    ("format", self.format.is_some()),
                    ("k_scale", self.k_scale.is_some()),
                    ("v_scale", self.v_scale.is_some()),
                    ("wide", self.wide.is_some()),
                ]
                .into_iter()
                .find(|(_, given)| *given);
                match fp8_key {
                    Some((key, _)) => Err(self.invalid(format!(
                        "`{key}` is a key of FP8 caches; this lab's cache is fp32"
                    ))),
                    None => Ok(()),
                }
            }
            CacheType::Fp8 => {
                let keys = self.fp8_keys()?;
                for (name, scale) in [("k_scale", keys.k_scale), ("v_scale", keys.v_scale)] {
                    if !scale.is_normal() || scale <= 0.0 || scale > 1e4 {
                        return Err(self.invalid(format!(
                            "{name} = {scale}: a scale is a positive normal float up to 1e4"
                        )));
                    }
                }
                if self.tensors.is_some() && keys.wide {
                    return Err(self.invalid(
                        "`wide` shapes generated bytes; a case with its own tensors has none",
                    ));
                }
                Ok(())
            }
        }
    }

    fn validate_lengths(&self) -> Result<(), PagedCaseError> {
        let seqs = self.context.len();
        if seqs == 0 || seqs > MAX_SEQS {
            return Err(self.invalid(format!(
                "{seqs} sequences: a case has 1 to {MAX_SEQS} (one `context` entry each)"
            )));
        }
        if self.new.len() != seqs {
            return Err(self.invalid(format!(
                "{} `new` entries for {seqs} `context` entries: one of each per sequence",
                self.new.len()
            )));
        }
        if let Some((s, &c)) = self
            .context
            .iter()
            .enumerate()
            .find(|(_, &c)| c > MAX_CONTEXT)
        {
            return Err(self.invalid(format!(
                "sequence {s} has a context of {c} tokens (at most {MAX_CONTEXT})"
            )));
        }
        if let Some(s) = self.new.iter().position(|&n| n == 0) {
            return Err(self.invalid(format!(
                "sequence {s} has no new token: every sequence needs at least 1"
            )));
        }
        if let Some((s, &n)) = self.new.iter().enumerate().find(|(_, &n)| n > MAX_NEW) {
            return Err(self.invalid(format!(
                "sequence {s} has {n} new tokens (at most {MAX_NEW})"
            )));
        }
        Ok(())
    }

    fn validate_shared_prefix(&self) -> Result<(), PagedCaseError> {
        match self
            .share_prefix
            .and_then(|pair| shared_prefix_refusal(pair, &self.context))
        {
            Some(refusal) => Err(self.invalid(refusal)),
            None => Ok(()),
        }
    }

    fn validate_plant(&self, plant: &Plant) -> Result<(), PagedCaseError> {
        let seqs = self.context.len();
        if plant.seq >= seqs {
            return Err(self.invalid(format!(
                "plant sequence {} is out of range (0..{seqs})",
                plant.seq
            )));
        }
        if plant.head >= HQ {
            return Err(self.invalid(format!(
                "plant head {} is out of range (0..{HQ})",
                plant.head
            )));
        }
        if !plant.value.is_finite() || plant.value.abs() > MAX_PLANT {
            return Err(self.invalid(format!(
                "plant value {} must be finite and at most {MAX_PLANT} in magnitude",
                plant.value
            )));
        }
        let (context, new) = (self.context[plant.seq], self.new[plant.seq]);
        let rows = plant.rows(new);
        if let Some(bad) = rows.iter().find(|&&t| t >= new) {
            return Err(self.invalid(format!(
                "plant row {bad} is past sequence {}'s {new} new tokens",
                plant.seq
            )));
        }
        let keys = plant.keys(context, new);
        if let Some(bad) = keys.iter().find(|&&p| p >= context + new) {
            return Err(self.invalid(format!(
                "plant key {bad} is past sequence {}'s {} positions",
                plant.seq,
                context + new
            )));
        }
        if rows.is_empty() || keys.is_empty() {
            return Err(self.invalid(format!(
                "a plant in sequence {} covers no row or no key (last-cached with no context?)",
                plant.seq
            )));
        }
        Ok(())
    }
}
