//! The paged lab's hazard cases: recipes in TOML, inputs from a seed.
//!
//! A recipe names lengths, not tensors: per-sequence context and new-token
//! counts, a window, ALiBi, an optional shared prefix block and planted
//! high scores. [`CaseSpec::generate`] turns it into tensors laid out the
//! way the contract says the grader lays memory out, which is what makes
//! the cases catch indexing bugs at all: a shuffled block table (with
//! block 0 in use and no block sitting where `s * maxBlocksPerSeq + k`
//! would put it), spare blocks, table entries past a context that point at
//! other sequences' blocks, and finite sentinels in every cache slot no
//! context covers. A kernel that reads the wrong place reads a wrong number.
//!
//! Generation is deterministic in `(seed, case name)`, so a printed seed
//! reproduces a failing run, and each case gets its own stream so adding a
//! case does not change the others.

use std::path::{Path, PathBuf};

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::lab::case_file::{read_case_tables, CaseTable};
use crate::lab::definition::CaseError;

use super::contract::{standard_alibi_slopes, Batch, Inputs, BLOCK, DH, GROUP, HKV, HQ, SENTINEL_K, SENTINEL_V};

/// The cases shipped with flashprof.
pub const EMBEDDED_CASES: &str = include_str!("../../../assets/paged-cases.toml");

/// Most sequences in one case.
pub const MAX_SEQS: usize = 16;
/// Longest context of a case sequence.
pub const MAX_CONTEXT: usize = 4096;
/// Most new tokens of a case sequence.
pub const MAX_NEW: usize = 512;
/// Most visible (row, key) pairs per head in a case: keeps the CPU oracle,
/// and the eight bug models CI runs beside it, well under a second.
pub const MAX_VISIBLE_PAIRS: u64 = 100_000;
/// Largest planted magnitude (a score of 16 * 16 * 64 / 8 = 2048).
pub const MAX_PLANT: f32 = 16.0;
/// Blocks beyond `numSeqs * maxBlocksPerSeq` in a generated case, never
/// owned by a context: stray reads land in sentinels.
pub const SPARE_BLOCKS: usize = 4;

/// The timing shape's context lengths (contract, section 1).
pub const TIMING_CONTEXT: [usize; 16] = [
    4096, 3584, 3072, 2816, 2560, 2048, 2048, 1792, 1536, 1280, 1024, 1000, 768, 640, 512, 4000,
];
/// The timing shape's new-token counts.
pub const TIMING_NEW: [usize; 16] = [
    512, 64, 256, 128, 384, 512, 1, 200, 448, 96, 320, 160, 512, 64, 256, 17,
];

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

/// Which key positions of the sequence a plant sets in K (cache or `kNew`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum PlantKeys {
    /// Positions in the sequence (below the context: the cache; from it on: `kNew`).
    List(Vec<usize>),
    Named(NamedKeys),
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
/// head set to `value` in every dimension (score `value^2 * 64 / 8`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plant {
    pub seq: usize,
    pub head: usize,
    pub rows: PlantRows,
    pub keys: PlantKeys,
    pub value: f32,
}

/// One hazard case as written in the cases file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// A folder of the case's own tensors (see [`super::tensors::load_dir`]);
    /// relative to the cases file. Such a case takes only `window` besides.
    #[serde(default)]
    pub tensors: Option<PathBuf>,
}

/// A paged case or its tensors that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PagedCaseError {
    #[error("cases file {file}: {message}")]
    Parse { file: String, message: String },
    #[error("case `{case}`: {message}")]
    Invalid { case: String, message: String },
    #[error("{file}: {message}")]
    Tensor { file: String, message: String },
}

/// A case's inputs, plus the expected output it brings (custom tensors only).
#[derive(Debug, Clone, PartialEq)]
pub struct CaseInputs {
    pub inputs: Inputs,
    pub expected: Option<Vec<f64>>,
}

/// Parses and validates a cases file; `base` resolves relative tensor folders.
pub fn parse_cases(text: &str, file: &str, base: &Path) -> Result<Vec<CaseSpec>, PagedCaseError> {
    let cases: Vec<CaseSpec> = read_case_tables(text, file, base).map_err(|e| match e {
        CaseError::Parse { file, message } => PagedCaseError::Parse { file, message },
        CaseError::Invalid { case, message } => PagedCaseError::Invalid { case, message },
    })?;
    for case in &cases {
        case.validate()?;
    }
    Ok(cases)
}

impl CaseTable for CaseSpec {
    fn name(&self) -> &str {
        &self.name
    }
    fn tensors_mut(&mut self) -> &mut Option<PathBuf> {
        &mut self.tensors
    }
}

/// The embedded cases; the test suite validates them, so this cannot fail at run time.
pub fn embedded_cases() -> Vec<CaseSpec> {
    parse_cases(EMBEDDED_CASES, "assets/paged-cases.toml", Path::new("."))
        .expect("the embedded paged cases are checked by tests")
}

impl CaseSpec {
    fn invalid(&self, message: impl Into<String>) -> PagedCaseError {
        PagedCaseError::Invalid {
            case: self.name.clone(),
            message: message.into(),
        }
    }

    pub(crate) fn validate(&self) -> Result<(), PagedCaseError> {
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
                || !self.plant.is_empty();
            if has_recipe {
                return Err(self.invalid(
                    "a case with its own tensors takes only `window` (lengths come from the \
                     files, ALiBi from alibi_slopes.npy)",
                ));
            }
            return Ok(());
        }
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
        let batch = self.lengths_batch();
        let pairs = batch.visible_pairs_per_head();
        if pairs > MAX_VISIBLE_PAIRS {
            return Err(self.invalid(format!(
                "{pairs} visible (row, key) pairs per head: a case has at most \
                 {MAX_VISIBLE_PAIRS}, so its CPU checks stay fast"
            )));
        }
        if let Some([a, b]) = self.share_prefix {
            if a == b || a >= seqs || b >= seqs {
                return Err(self.invalid(format!(
                    "share_prefix [{a}, {b}] must name two different sequences below {seqs}"
                )));
            }
            if let Some(&s) = [a, b].iter().find(|&&s| self.context[s] < BLOCK) {
                return Err(self.invalid(format!(
                    "share_prefix: sequence {s} has a context of {} tokens; sharing a block \
                     needs at least {BLOCK} in both",
                    self.context[s]
                )));
            }
        }
        for plant in &self.plant {
            self.validate_plant(plant)?;
        }
        Ok(())
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
        let rows = resolve_rows(&plant.rows, new);
        if let Some(bad) = rows.iter().find(|&&t| t >= new) {
            return Err(self.invalid(format!(
                "plant row {bad} is past sequence {}'s {new} new tokens",
                plant.seq
            )));
        }
        let keys = resolve_keys(&plant.keys, context, new);
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

    /// The batch of the declared lengths, with the table still empty.
    pub(crate) fn lengths_batch(&self) -> Batch {
        let max_len = (0..self.context.len())
            .map(|s| self.context[s] + self.new[s])
            .max()
            .unwrap_or(0);
        let per_seq = max_len.div_ceil(BLOCK).max(1);
        Batch::from_lengths(
            self.context.clone(),
            self.new.clone(),
            self.window,
            self.alibi,
            per_seq,
            self.context.len() * per_seq + SPARE_BLOCKS,
        )
    }

    /// Query heads (bit `h` for head `h`) where the case plants large scores.
    pub fn planted_heads(&self) -> u32 {
        self.plant
            .iter()
            .fold(0, |mask, plant| mask | 1 << plant.head)
    }

    /// Builds this case's inputs from the run's seed (or loads its tensors).
    pub fn generate(&self, seed: u64) -> Result<CaseInputs, PagedCaseError> {
        if let Some(dir) = &self.tensors {
            return super::tensors::load_dir(dir, self.window);
        }
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ stable_hash(&self.name));
        let mut inputs = lay_out(self.lengths_batch(), self.share_prefix, &mut rng);
        for plant in &self.plant {
            apply_plant(&mut inputs, plant);
        }
        Ok(CaseInputs {
            inputs,
            expected: None,
        })
    }
}

/// The timing shape's batch (window and ALiBi off), with its block table
/// drawn from `seed`: 288 blocks per sequence, 4608 blocks.
pub fn timing_batch(seed: u64) -> Batch {
    timing_inputs_or_batch(seed, false).batch
}

/// The timing shape's inputs from `seed` (about 300 MB of cache).
pub fn timing_inputs(seed: u64) -> Inputs {
    timing_inputs_or_batch(seed, true)
}

fn timing_inputs_or_batch(seed: u64, tensors: bool) -> Inputs {
    let max_len = (0..16)
        .map(|s| TIMING_CONTEXT[s] + TIMING_NEW[s])
        .max()
        .unwrap();
    let per_seq = max_len.div_ceil(BLOCK);
    let batch = Batch::from_lengths(
        TIMING_CONTEXT.to_vec(),
        TIMING_NEW.to_vec(),
        0,
        false,
        per_seq,
        16 * per_seq,
    );
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ stable_hash("timing"));
    if tensors {
        lay_out(batch, None, &mut rng)
    } else {
        let table = block_table(&batch, None, &mut rng).0;
        Inputs {
            batch: Batch {
                block_table: table,
                ..batch
            },
            q: Vec::new(),
            k_new: Vec::new(),
            v_new: Vec::new(),
            k_cache: Vec::new(),
            v_cache: Vec::new(),
            alibi_slopes: None,
        }
    }
}

/// The block table for `batch`'s lengths and which block each context owns.
///
/// Ids are a seeded permutation; no owned block sits at the id the
/// "table ignored" bug would compute for its position; block 0 is owned
/// whenever that rule leaves room; entries past a context point at blocks
/// the sequence does not own.
pub(crate) fn block_table(
    batch: &Batch,
    share: Option<[usize; 2]>,
    rng: &mut ChaCha8Rng,
) -> (Vec<i32>, Vec<Vec<usize>>) {
    let (seqs, per_seq) = (batch.num_seqs(), batch.max_blocks_per_seq);
    let mut ids: Vec<usize> = (0..batch.num_blocks).collect();
    ids.shuffle(rng);
    let share = share.map(|[a, b]| (a.min(b), a.max(b)));
    let mut owned: Vec<Vec<usize>> = vec![Vec::new(); seqs];
    let mut next = 0;
    for s in 0..seqs {
        for k in 0..batch.context_blocks(s) {
            let id = match share {
                Some((a, b)) if s == b && k == 0 => owned[a][0],
                _ => {
                    next += 1;
                    ids[next - 1]
                }
            };
            owned[s].push(id);
        }
    }
    let mut spares: Vec<usize> = ids[next..].to_vec();
    let relabel = |owned: &mut Vec<Vec<usize>>, from: usize, to: usize| {
        for id in owned.iter_mut().flatten() {
            if *id == from {
                *id = to;
            }
        }
    };
    for s in 0..seqs {
        for k in 0..owned[s].len() {
            let identity = s * per_seq + k;
            if owned[s][k] == identity {
                if let Some(spare) = spares.pop() {
                    relabel(&mut owned, identity, spare);
                    spares.insert(0, identity);
                }
            }
        }
    }
    if let Some(at) = spares.iter().position(|&id| id == 0) {
        // Relabel some owned block other than the one at (0, 0), where id 0
        // would be the identity.
        let at_origin = owned.first().and_then(|o| o.first()).copied();
        let donor = owned
            .iter()
            .flatten()
            .rev()
            .copied()
            .find(|&id| Some(id) != at_origin);
        if let Some(donor) = donor {
            relabel(&mut owned, donor, 0);
            spares[at] = donor;
        }
    }
    let mut table = vec![0i32; seqs * per_seq];
    for s in 0..seqs {
        for k in 0..per_seq {
            table[s * per_seq + k] = match owned[s].get(k) {
                Some(&id) => id as i32,
                None => loop {
                    let id = rng.random_range(0..batch.num_blocks);
                    if !owned[s].contains(&id) {
                        break id as i32;
                    }
                },
            };
        }
    }
    (table, owned)
}

/// Random tensors laid out in memory as the contract's grader lays them out.
fn lay_out(batch: Batch, share: Option<[usize; 2]>, rng: &mut ChaCha8Rng) -> Inputs {
    let (table, owned) = block_table(&batch, share, rng);
    let batch = Batch {
        block_table: table,
        ..batch
    };
    let q = random_tensor(rng, batch.q_elems());
    let k_new = random_tensor(rng, batch.kv_new_elems());
    let v_new = random_tensor(rng, batch.kv_new_elems());
    let mut k_cache = vec![SENTINEL_K; batch.cache_elems()];
    let mut v_cache = vec![SENTINEL_V; batch.cache_elems()];
    let mut filled = vec![false; batch.num_blocks];
    for (s, blocks) in owned.iter().enumerate() {
        for (k, &block) in blocks.iter().enumerate() {
            if std::mem::replace(&mut filled[block], true) {
                continue; // a shared prefix block, filled by its first owner
            }
            let slots = (batch.context[s] - k * BLOCK).min(BLOCK);
            for g in 0..HKV {
                for d in 0..DH {
                    for o in 0..slots {
                        k_cache[Batch::k_cache_index(block, g, d, o)] =
                            rng.random_range(-1.0f32..1.0);
                        v_cache[Batch::v_cache_index(block, g, d, o)] =
                            rng.random_range(-1.0f32..1.0);
                    }
                }
            }
        }
    }
    Inputs {
        alibi_slopes: batch.alibi.then(standard_alibi_slopes),
        batch,
        q,
        k_new,
        v_new,
        k_cache,
        v_cache,
    }
}

fn apply_plant(inputs: &mut Inputs, plant: &Plant) {
    let batch = &inputs.batch;
    let (context, new) = (batch.context[plant.seq], batch.new[plant.seq]);
    let start = batch.start(plant.seq);
    for t in resolve_rows(&plant.rows, new) {
        for d in 0..DH {
            inputs.q[Batch::q_index(start + t, plant.head, d)] = plant.value;
        }
    }
    let kv_head = plant.head / GROUP;
    for pos in resolve_keys(&plant.keys, context, new) {
        for d in 0..DH {
            if pos < context {
                let block = batch.block_of(plant.seq, pos);
                inputs.k_cache[Batch::k_cache_index(block, kv_head, d, pos % BLOCK)] = plant.value;
            } else {
                let row = start + pos - context;
                inputs.k_new[Batch::kv_new_index(row, kv_head, d)] = plant.value;
            }
        }
    }
}

pub(crate) fn resolve_rows(rows: &PlantRows, new: usize) -> Vec<usize> {
    match rows {
        PlantRows::List(list) => list.clone(),
        PlantRows::Named(NamedRows::All) => (0..new).collect(),
        PlantRows::Named(NamedRows::Last) => new.checked_sub(1).into_iter().collect(),
    }
}

pub(crate) fn resolve_keys(keys: &PlantKeys, context: usize, new: usize) -> Vec<usize> {
    match keys {
        PlantKeys::List(list) => list.clone(),
        PlantKeys::Named(NamedKeys::LastCached) => context.checked_sub(1).into_iter().collect(),
        PlantKeys::Named(NamedKeys::FirstNew) => vec![context],
        PlantKeys::Named(NamedKeys::LastNew) => vec![context + new - 1],
    }
}

/// Uniform in [-1, 1): only sentinels and plants go beyond.
fn random_tensor(rng: &mut ChaCha8Rng, len: usize) -> Vec<f32> {
    (0..len).map(|_| rng.random_range(-1.0f32..1.0)).collect()
}

/// FNV-1a: stable across Rust versions and platforms, unlike `DefaultHasher`.
pub(crate) fn stable_hash(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(name: &str) -> CaseSpec {
        embedded_cases()
            .into_iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("no case {name}"))
    }

    fn batches() -> Vec<(String, Batch)> {
        embedded_cases()
            .into_iter()
            .map(|c| (c.name.clone(), c.generate(7).unwrap().inputs.batch))
            .collect()
    }

    #[test]
    fn the_cases_cover_every_hazard_family_of_the_contract() {
        let all = batches();
        let any = |f: &dyn Fn(&Batch) -> bool| all.iter().any(|(_, b)| f(b));
        for c in [0, 1, BLOCK - 1, BLOCK, BLOCK + 1, 1000] {
            assert!(any(&|b| b.context.contains(&c)), "context {c}");
        }
        for n in [1, 17, 33, 65] {
            assert!(any(&|b| b.new.contains(&n)), "new {n}");
        }
        assert!(
            any(&|b| b.q_start.iter().any(|&s| s % 2 == 1)),
            "odd qStart"
        );
        for w in [1, BLOCK - 1, BLOCK, BLOCK + 1] {
            assert!(any(&|b| b.window() == Some(w)), "window {w}");
        }
        // A window longer than one of its sequences (and, to catch the
        // off-by-one, shorter than another).
        assert!(any(&|b| b.window().is_some_and(|w| {
            (0..b.num_seqs()).any(|s| b.len_of(s) < w) && (0..b.num_seqs()).any(|s| b.len_of(s) > w)
        })));
        // A row whose window excludes every cached key of its sequence.
        assert!(any(&|b| (0..b.num_seqs()).any(|s| {
            let ctx = b.context[s];
            ctx > 0 && (0..b.new[s]).any(|t| b.first_visible(ctx + t) >= ctx)
        })));
        assert!(any(&|b| b.alibi && b.context.iter().all(|&c| c == 0)));
        assert!(any(&|b| b.alibi && b.context.iter().any(|&c| c > 0)));
        assert!(any(&|b| b.alibi && b.window().is_some()));
        let specs = embedded_cases();
        assert!(specs.iter().any(|c| c.share_prefix.is_some()));
        // Planted overflow (score 128) in a far cached block and in new tokens.
        let overflow = |cached: bool| {
            specs.iter().any(|c| {
                c.plant.iter().any(|p| {
                    let ctx = c.context[p.seq];
                    let keys = resolve_keys(&p.keys, ctx, c.new[p.seq]);
                    p.value * p.value * 8.0 >= 128.0
                        && keys.iter().any(|&k| {
                            if cached {
                                k >= 16 * BLOCK && k < ctx
                            } else {
                                k >= ctx
                            }
                        })
                })
            })
        };
        assert!(overflow(true) && overflow(false));
        assert!(specs.iter().any(|c| c
            .plant
            .iter()
            .any(|p| p.keys == PlantKeys::Named(NamedKeys::LastCached))));
        assert!(specs.iter().any(|c| c
            .plant
            .iter()
            .any(|p| p.keys == PlantKeys::Named(NamedKeys::LastNew))));
        // GQA: plants on query heads of several KV groups.
        let groups: std::collections::HashSet<usize> = specs
            .iter()
            .flat_map(|c| c.plant.iter().map(|p| p.head / GROUP))
            .collect();
        assert!(groups.len() >= 3, "{groups:?}");
    }

    #[test]
    fn every_case_batches_several_sequences_and_stays_small() {
        for (name, b) in batches() {
            assert!(b.num_seqs() >= 2, "{name}");
            assert!(b.visible_pairs_per_head() <= MAX_VISIBLE_PAIRS, "{name}");
        }
    }

    #[test]
    fn memory_is_laid_out_as_the_contract_says() {
        for spec in embedded_cases() {
            let inputs = spec.generate(11).unwrap().inputs;
            let b = &inputs.batch;
            let name = &spec.name;
            assert!(b.num_blocks >= b.num_seqs() * b.max_blocks_per_seq + SPARE_BLOCKS);
            let max_len = (0..b.num_seqs()).map(|s| b.len_of(s)).max().unwrap();
            assert!(b.max_blocks_per_seq >= max_len.div_ceil(BLOCK));
            let owned: Vec<Vec<usize>> = (0..b.num_seqs())
                .map(|s| {
                    (0..b.context_blocks(s))
                        .map(|k| b.block_of(s, k * BLOCK))
                        .collect()
                })
                .collect();
            let used: std::collections::HashSet<usize> = owned.iter().flatten().copied().collect();
            if b.reads_cache() {
                assert!(used.contains(&0), "{name}: block 0 unused");
            }
            for (s, mine) in owned.iter().enumerate() {
                for k in 0..b.max_blocks_per_seq {
                    let id = b.block_table[s * b.max_blocks_per_seq + k] as usize;
                    assert!(id < b.num_blocks);
                    if k < mine.len() {
                        assert_ne!(id, s * b.max_blocks_per_seq + k, "{name}: identity block");
                    } else {
                        assert!(!mine.contains(&id), "{name}: seq {s} entry {k}");
                    }
                }
                // Slots past the context's end hold sentinels.
                let ctx = b.context[s];
                if ctx % BLOCK != 0 {
                    let block = b.block_of(s, ctx);
                    for o in ctx % BLOCK..BLOCK {
                        assert_eq!(
                            inputs.k_cache[Batch::k_cache_index(block, 3, 9, o)],
                            SENTINEL_K
                        );
                        assert_eq!(
                            inputs.v_cache[Batch::v_cache_index(block, 3, 9, o)],
                            SENTINEL_V
                        );
                    }
                }
            }
            // Spare blocks are sentinel throughout.
            let spare = (0..b.num_blocks).find(|id| !used.contains(id)).unwrap();
            assert_eq!(
                inputs.v_cache[Batch::v_cache_index(spare, 7, 63, 15)],
                SENTINEL_V
            );
            if let Some([a, c]) = spec.share_prefix {
                assert_eq!(owned[a][0], owned[c][0], "{name}: shared prefix");
            }
        }
    }

    #[test]
    fn generation_is_deterministic_and_seeded() {
        let spec = case("mixed-lengths");
        let a = spec.generate(42).unwrap();
        assert_eq!(a, spec.generate(42).unwrap());
        let b = spec.generate(43).unwrap();
        assert_ne!(a.inputs.q, b.inputs.q);
        assert_ne!(a.inputs.batch.block_table, b.inputs.batch.block_table);
        // Cases draw from their own streams.
        assert_ne!(
            case("window-1").generate(42).unwrap().inputs.q[..64],
            a.inputs.q[..64]
        );
    }

    #[test]
    fn plants_land_where_they_are_named() {
        let spec = case("overflow-in-far-cached-block");
        let inputs = spec.generate(3).unwrap().inputs;
        let p = &spec.plant[0];
        let keys = resolve_keys(&p.keys, spec.context[p.seq], spec.new[p.seq]);
        let g = p.head / GROUP;
        for &pos in &keys {
            for d in 0..DH {
                assert_eq!(inputs.cached_key(p.seq, pos, g, d), p.value);
            }
        }
        let row = inputs.batch.start(p.seq);
        assert_eq!(inputs.q[Batch::q_index(row, p.head, 5)], p.value);
    }

    fn rejected(toml: &str) -> String {
        let text = format!("[[case]]\nname = \"x\"\nsummary = \"s\"\n{toml}");
        parse_cases(&text, "t.toml", Path::new("."))
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn bad_recipes_are_refused_with_the_bound() {
        let cases = [
            ("context = [1]\nnew = [0]", "at least 1"),
            ("context = [1, 2]\nnew = [3]", "one of each"),
            ("context = [5000]\nnew = [1]", "at most 4096"),
            ("context = [1]\nnew = [600]", "at most 512"),
            ("context = [4000, 4000]\nnew = [100, 100]", "at most 100000"),
            ("context = []\nnew = []", "1 to 16"),
            ("context = [1]\nnew = [1]\nwindow = 99999", "at most 4608"),
            ("context = [1]\nnew = [1]\ncolour = 3", "unknown field"),
            ("context = [8, 20]\nnew = [1, 1]\nshare_prefix = [0, 1]", "at least 16"),
            ("context = [20, 20]\nnew = [1, 1]\nshare_prefix = [1, 1]", "two different"),
            (
                "context = [1]\nnew = [1]\n[[case.plant]]\nseq = 0\nhead = 32\nrows = \"all\"\nkeys = [0]\nvalue = 4.0",
                "0..32",
            ),
            (
                "context = [1]\nnew = [1]\n[[case.plant]]\nseq = 0\nhead = 0\nrows = \"all\"\nkeys = [0]\nvalue = nan",
                "finite",
            ),
            (
                "context = [1]\nnew = [1]\n[[case.plant]]\nseq = 0\nhead = 0\nrows = \"all\"\nkeys = [2]\nvalue = 4.0",
                "past sequence 0's 2 positions",
            ),
            (
                "context = [0]\nnew = [1]\n[[case.plant]]\nseq = 0\nhead = 0\nrows = \"all\"\nkeys = \"last-cached\"\nvalue = 4.0",
                "covers no row or no key",
            ),
            ("tensors = \"d\"\nalibi = true", "takes only `window`"),
        ];
        for (toml, needle) in cases {
            let err = rejected(toml);
            assert!(err.contains(needle), "{toml}\n=> {err}");
        }
        let dup = "[[case]]\nname = \"a\"\nsummary = \"s\"\ncontext = [0]\nnew = [1]\n";
        let err = parse_cases(&format!("{dup}{dup}"), "t.toml", Path::new("."))
            .unwrap_err()
            .to_string();
        assert!(err.contains("two cases are named `a`"), "{err}");
    }

    #[test]
    fn the_timing_shape_has_the_contracts_totals() {
        let b = timing_batch(1);
        assert_eq!(b.total_new(), 3930);
        assert_eq!(b.visible_pairs_per_head(), 8_533_246);
        assert!((b.flops() / 1e9 - 69.9).abs() < 0.05, "{}", b.flops());
        assert_eq!(b.total_context_blocks(), 2049);
        assert_eq!(b.max_blocks_per_seq, 288);
        assert_eq!(b.num_blocks, 4608);
        let cache_mb = 2.0 * b.cache_elems() as f64 * 4.0 / 1e6;
        assert!((cache_mb - 302.0).abs() < 0.5, "{cache_mb}");
        let mb = b.compulsory_bytes() as f64 / 1e6;
        assert!((mb - 215.0).abs() < 0.5, "{mb}");
        assert!(b.window().is_none() && !b.alibi);
        assert_eq!(*b.q_start.last().unwrap(), 3930);
    }
}
