//! The decode lab's hazard cases and its timing shape.
//!
//! A recipe names lengths, not tensors: each sequence's `seqLen`, ALiBi,
//! an optional prefix block shared by two sequences and planted high
//! scores. [`CaseSpec::generate`] lays the tensors out the way the
//! contract says the grader does, which is what makes indexing bugs show:
//! a shuffled block table with block 0 in use and no block where
//! `s * maxBlocksPerSeq + j / B` would look, spare blocks, table entries
//! past a sequence's end that point at blocks it does not own, and NaN in
//! every cache slot past a sequence's end and in every spare block (a
//! kernel reading there writes NaN, which never passes).
//!
//! Generation is deterministic in `(seed, case name)`, and each case draws
//! from its own stream, so adding a case changes no other.

use std::path::{Path, PathBuf};

use rand::seq::SliceRandom;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::tensors::load_dir;
use super::{alibi_slope, Batch, Inputs, BLOCK, DH, GROUP, HKV, HQ, LAYOUT};
use crate::lab::case_file::{case_rng, case_table, read_case_tables};
use crate::lab::counter_draw::CounterDraw;
use crate::lab::definition::CaseError as LabCaseError;
use crate::lab::paged::generate::{counted_caches, filled_slots, table_of};
use crate::lab::paged::recipe::shared_prefix_refusal;

/// Most sequences in one launch (the timing shape has this many).
pub const MAX_SEQS: usize = 64;
/// Longest sequence of a case or of the timing shape.
pub const MAX_SEQ_LEN: usize = 8192;
/// Blocks beyond the owned ones that no sequence owns (NaN throughout).
pub const SPARE_BLOCKS: usize = 4;
/// Largest planted magnitude (a score of 16 * 16 * 64 / 8 = 2048).
pub const MAX_PLANT: f32 = 16.0;

/// The timing shape: 64 sequences from 1 to 8192 keys, 22 of them 4096 or
/// longer, in a fixed shuffled order (227,112 keys; 0.93 GB of K and V).
pub const TIMING_SEQ_LEN: [usize; 64] = [
    3968, 2500, 8192, 100, 4095, 8192, 2000, 1024, 3000, 8191, 7, 3333, 3072, 4096, 17, 4000, 3700,
    7500, 5120, 6000, 1, 7424, 8192, 256, 6144, 2, 7000, 400, 64, 7168, 7680, 15, 6912, 2222, 2800,
    1536, 2048, 3900, 5632, 7777, 8000, 3584, 8192, 1800, 33, 513, 200, 2560, 3500, 512, 3200, 16,
    511, 1000, 700, 6656, 7936, 3800, 1500, 2900, 3456, 255, 4608, 6400,
];

/// The embedded hazard cases (`assets/paged-decode-cases.toml`).
pub const EMBEDDED_CASES: &str = include_str!("../../../assets/paged-decode-cases.toml");

/// Which keys of its sequence a plant sets: positions, or `"last"`.
pub type PlantKeys = crate::lab::paged::recipe::PlantKeys<NamedKeys>;

/// A key a plant names by its role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NamedKeys {
    /// The sequence's last key: the token's own.
    Last,
}

/// A high score: query head `head` of sequence `seq` and the listed keys of
/// its KV head set to `value` in every dimension (score `value^2 * 64 / 8`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plant {
    pub seq: usize,
    pub head: usize,
    pub keys: PlantKeys,
    pub value: f32,
}

/// One hazard case as written in the cases file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaseSpec {
    pub name: String,
    pub summary: String,
    /// Keys of each sequence, its token's own included.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub seq_len: Vec<usize>,
    #[serde(default)]
    pub alibi: bool,
    /// Two sequences whose first block is the same physical block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share_prefix: Option<[usize; 2]>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plant: Vec<Plant>,
    /// A folder of the case's own tensors ([`super::tensors::load_dir`]),
    /// relative to the cases file: such a case takes no recipe keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tensors: Option<PathBuf>,
}

/// A recipe that cannot be laid out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("case `{case}`: {message}")]
pub struct CaseError {
    pub case: String,
    pub message: String,
}

case_table!(CaseSpec);

/// Parses and checks a cases file of this lab (shown as `file`).
/// `base` resolves relative tensor folders.
pub fn parse_cases(text: &str, file: &str, base: &Path) -> Result<Vec<CaseSpec>, LabCaseError> {
    let cases: Vec<CaseSpec> = read_case_tables(text, file, base)?;
    for case in &cases {
        case.validate().map_err(|e| LabCaseError::Invalid {
            case: e.case,
            message: e.message,
        })?;
    }
    Ok(cases)
}

/// The lab's hazard cases, in order. Every case batches a sequence of 2 to
/// B keys beside its others, so a kernel that ignores K, drops the token's
/// own key or leaves the softmax unnormalised fails every case.
pub fn hazard_cases() -> Vec<CaseSpec> {
    parse_cases(
        EMBEDDED_CASES,
        "assets/paged-decode-cases.toml",
        Path::new("."),
    )
    .expect("the embedded decode cases are checked by tests")
}

impl CaseSpec {
    fn invalid(&self, message: impl Into<String>) -> CaseError {
        CaseError {
            case: self.name.clone(),
            message: message.into(),
        }
    }

    /// Checks the recipe against the contract's bounds (a tensor folder's
    /// files are checked when they are loaded).
    pub fn validate(&self) -> Result<(), CaseError> {
        if self.tensors.is_some() {
            let has_recipe = !self.seq_len.is_empty()
                || self.alibi
                || self.share_prefix.is_some()
                || !self.plant.is_empty();
            if has_recipe {
                return Err(self.invalid(
                    "a case with its own tensors takes no recipe keys (lengths come from \
                     seq_len.npy, ALiBi from alibi_slopes.npy)",
                ));
            }
            return Ok(());
        }
        let seqs = self.seq_len.len();
        if seqs == 0 || seqs > MAX_SEQS {
            return Err(self.invalid(format!("{seqs} sequences: a launch has 1 to {MAX_SEQS}")));
        }
        if let Some((s, &len)) = self
            .seq_len
            .iter()
            .enumerate()
            .find(|(_, &len)| len == 0 || len > MAX_SEQ_LEN)
        {
            return Err(self.invalid(format!(
                "sequence {s} has seqLen {len} (1 to {MAX_SEQ_LEN})"
            )));
        }
        if let Some(refusal) = self
            .share_prefix
            .and_then(|pair| shared_prefix_refusal(pair, &self.seq_len))
        {
            return Err(self.invalid(refusal));
        }
        for p in &self.plant {
            if p.seq >= seqs || p.head >= HQ {
                return Err(self.invalid(format!(
                    "plant at sequence {}, head {}: out of range",
                    p.seq, p.head
                )));
            }
            if !p.value.is_finite() || p.value.abs() > MAX_PLANT {
                return Err(self.invalid(format!(
                    "plant value {} (finite, at most {MAX_PLANT})",
                    p.value
                )));
            }
            if let Some(bad) = plant_keys(p, self.seq_len[p.seq])
                .into_iter()
                .find(|&j| j >= self.seq_len[p.seq])
            {
                return Err(
                    self.invalid(format!("plant key {bad} is past sequence {}'s end", p.seq))
                );
            }
        }
        Ok(())
    }

    /// Query heads (bit `h` for head `h`) where the case plants large scores.
    pub fn planted_heads(&self) -> u32 {
        self.plant.iter().fold(0, |mask, p| mask | 1 << p.head)
    }

    /// This case's inputs: loaded from its folder, or generated from the
    /// run's seed; with the expected output a folder may bring.
    pub fn make(&self, seed: u64) -> Result<(Inputs, Option<Vec<f64>>), CaseError> {
        match &self.tensors {
            Some(dir) => load_dir(dir).map_err(|e| self.invalid(e.to_string())),
            None => Ok((self.generate(seed)?, None)),
        }
    }

    /// Builds this recipe's inputs from the run's seed.
    pub fn generate(&self, seed: u64) -> Result<Inputs, CaseError> {
        self.validate()?;
        if self.tensors.is_some() {
            return Err(self.invalid("its tensors come from its folder, not from a seed"));
        }
        let per_seq = self
            .seq_len
            .iter()
            .map(|l| l.div_ceil(BLOCK))
            .max()
            .unwrap_or(1);
        let mut rng = case_rng(seed, &self.name);
        let batch = lengths_batch(
            &self.seq_len,
            self.alibi,
            per_seq,
            self.seq_len.len() * per_seq + SPARE_BLOCKS,
        );
        let mut inputs = lay_out(batch, self.share_prefix, &mut rng);
        for p in &self.plant {
            let g = p.head / GROUP;
            for d in 0..DH {
                inputs.q[Batch::q_index(p.seq, p.head, d)] = p.value;
            }
            for j in plant_keys(p, self.seq_len[p.seq]) {
                let block = inputs.batch.block_of(p.seq, j);
                for d in 0..DH {
                    inputs.k_cache[Batch::k_cache_index(block, g, d, j % BLOCK)] = p.value;
                }
            }
        }
        Ok(inputs)
    }
}

fn plant_keys(p: &Plant, len: usize) -> Vec<usize> {
    match &p.keys {
        PlantKeys::List(list) => list.clone(),
        PlantKeys::Named(NamedKeys::Last) => vec![len - 1],
    }
}

fn lengths_batch(seq_len: &[usize], alibi: bool, per_seq: usize, num_blocks: usize) -> Batch {
    Batch {
        seq_len: seq_len.iter().map(|&l| l as i32).collect(),
        max_blocks_per_seq: per_seq,
        num_blocks,
        block_table: vec![0; seq_len.len() * per_seq],
        alibi,
    }
}

/// The timing shape's batch (ALiBi off) with its block table drawn from
/// `seed`: 512 blocks per table row, the owned blocks plus
/// [`SPARE_BLOCKS`] in the cache (no room for the "table ignored" identity
/// blocks is needed: timing grades speed, the cases grade indexing).
pub fn timing_batch(seed: u64) -> Batch {
    let (batch, _) = timing_table(seed);
    batch
}

/// The timing shape's inputs from `seed` (about 0.93 GB of cache): its
/// block table as [`timing_batch`] draws it, then its values by counter
/// from a seed drawn after it, uniform in `[-1, 1)` as a case's are, every
/// other slot NaN.
pub fn timing_inputs(seed: u64) -> Inputs {
    let (batch, mut rng) = timing_table(seed);
    let counted: u64 = rng.random();
    let range = -1.0f32..1.0;
    let slots = filled_slots(batch.num_blocks, &owned_blocks(&batch), |s| batch.len_of(s));
    let same = |x: f32| x;
    let (k_cache, v_cache) = counted_caches(
        &LAYOUT,
        &slots,
        counted,
        &range,
        (f32::NAN, f32::NAN),
        (&same, &same),
    );
    Inputs {
        q: CounterDraw::new(counted, 0).tensor(batch.q_elems(), range.clone(), |x| x),
        k_cache,
        v_cache,
        alibi_slopes: batch.alibi.then(|| (0..HQ).map(alibi_slope).collect()),
        batch,
    }
}

fn timing_table(seed: u64) -> (Batch, ChaCha8Rng) {
    let per_seq = MAX_SEQ_LEN / BLOCK;
    let blocks: usize = TIMING_SEQ_LEN.iter().map(|l| l.div_ceil(BLOCK)).sum();
    let batch = lengths_batch(&TIMING_SEQ_LEN, false, per_seq, blocks + SPARE_BLOCKS);
    let mut rng = case_rng(seed, "timing");
    let table = block_table(&batch, None, &mut rng);
    (
        Batch {
            block_table: table,
            ..batch
        },
        rng,
    )
}

/// Each sequence's owned blocks, read back from its table.
fn owned_blocks(batch: &Batch) -> Vec<Vec<usize>> {
    (0..batch.num_seqs())
        .map(|s| {
            (0..batch.blocks_of(s))
                .map(|k| batch.block_of(s, k * BLOCK))
                .collect()
        })
        .collect()
}

/// A seeded block table: ids a permutation, block 0 owned, no owned block
/// at the id the "table ignored" bug computes, the shared prefix block in
/// both rows, and entries past a sequence's end naming blocks it does not own.
fn block_table(batch: &Batch, share: Option<[usize; 2]>, rng: &mut ChaCha8Rng) -> Vec<i32> {
    let (seqs, per_seq) = (batch.num_seqs(), batch.max_blocks_per_seq);
    let identity = |s: usize, k: usize| s * per_seq + k;
    let mut free: Vec<usize> = (0..batch.num_blocks).collect();
    free.shuffle(rng);
    let share = share.map(|[a, b]| (a.min(b), a.max(b)));
    let mut owned: Vec<Vec<usize>> = vec![Vec::new(); seqs];
    for s in 0..seqs {
        for k in 0..batch.blocks_of(s) {
            if let Some((a, b)) = share {
                if s == b && k == 0 {
                    let shared = owned[a][0];
                    owned[s].push(shared);
                    continue;
                }
            }
            // The shared block must not be at either sequence's identity.
            let forbidden = |id: usize| {
                id == identity(s, k)
                    || share.is_some_and(|(a, b)| s == a && k == 0 && id == identity(b, 0))
            };
            let at = free
                .iter()
                .rposition(|&id| !forbidden(id))
                .expect("more blocks than owners");
            owned[s].push(free.remove(at));
        }
    }
    // Block 0 in use: hand it to an owned entry other than (0, 0), whose
    // identity id 0 is. Its old id becomes a spare.
    if free.contains(&0) {
        let entry = (0..seqs)
            .rev()
            .flat_map(|s| (0..owned[s].len()).rev().map(move |k| (s, k)))
            .find(|&(s, k)| {
                (s, k) != (0, 0) && !share.is_some_and(|(a, b)| k == 0 && (s == a || s == b))
            });
        if let Some((s, k)) = entry {
            let old = std::mem::replace(&mut owned[s][k], 0);
            free.retain(|&id| id != 0);
            free.push(old);
        }
    }
    table_of(&owned, per_seq, batch.num_blocks, rng)
}

/// Random tensors laid out as the contract's grader lays them out.
fn lay_out(batch: Batch, share: Option<[usize; 2]>, rng: &mut ChaCha8Rng) -> Inputs {
    let table = block_table(&batch, share, rng);
    let batch = Batch {
        block_table: table,
        ..batch
    };
    let owned = owned_blocks(&batch);
    fill(batch, &owned, rng)
}

/// `q` uniform in [-1, 1); every owned slot of the cache uniform, every
/// other slot NaN; a block shared by two sequences is filled once.
fn fill(batch: Batch, owned: &[Vec<usize>], rng: &mut ChaCha8Rng) -> Inputs {
    let q = (0..batch.q_elems())
        .map(|_| rng.random_range(-1.0f32..1.0))
        .collect();
    let mut k_cache = vec![f32::NAN; batch.cache_elems()];
    let mut v_cache = vec![f32::NAN; batch.cache_elems()];
    let mut filled = vec![false; batch.num_blocks];
    for (s, blocks) in owned.iter().enumerate() {
        for (k, &block) in blocks.iter().enumerate() {
            if std::mem::replace(&mut filled[block], true) {
                continue;
            }
            let slots = (batch.len_of(s) - k * BLOCK).min(BLOCK);
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
        alibi_slopes: batch.alibi.then(|| (0..HQ).map(alibi_slope).collect()),
        batch,
        q,
        k_cache,
        v_cache,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::paged::testing::assert_table_rows;
    use crate::lab::paged_decode::partitions;
    use std::collections::HashSet;

    const LAST: PlantKeys = PlantKeys::Named(NamedKeys::Last);

    fn plant(seq: usize, head: usize, keys: PlantKeys, value: f32) -> Plant {
        Plant {
            seq,
            head,
            keys,
            value,
        }
    }

    fn generated() -> Vec<(CaseSpec, Inputs)> {
        hazard_cases()
            .into_iter()
            .map(|c| {
                let inputs = c.generate(7).unwrap();
                (c, inputs)
            })
            .collect()
    }

    #[test]
    fn the_cases_cover_every_hazard_of_the_contract() {
        let all = generated();
        let lens: HashSet<usize> = all.iter().flat_map(|(c, _)| c.seq_len.clone()).collect();
        for len in [1, BLOCK - 1, BLOCK, BLOCK + 1, 511, 512, 513, 8192] {
            assert!(lens.contains(&len), "seqLen {len}");
        }
        for (c, _) in &all {
            assert!(
                c.seq_len.iter().any(|&l| (2..=BLOCK).contains(&l)),
                "{}: no 2..B sequence",
                c.name
            );
            assert!(c.seq_len.len() >= 2, "{}", c.name);
        }
        // The planted overflow far down a table, and the last key as the maximum.
        assert!(all.iter().any(
            |(c, _)| c.plant.iter().any(|p| p.value * p.value * 8.0 >= 128.0
                && plant_keys(p, c.seq_len[p.seq])
                    .iter()
                    .any(|&j| j / BLOCK >= 32))
        ));
        assert!(all
            .iter()
            .any(|(c, _)| c.plant.iter().any(|p| p.keys == LAST)));
        // ALiBi over sequences of one partition and of several.
        assert!(all.iter().any(|(c, _)| c.alibi
            && c.seq_len.iter().any(|&l| partitions(l, 16) > 1)
            && c.seq_len.iter().any(|&l| (2..=BLOCK).contains(&l))));
        let groups: HashSet<usize> = all
            .iter()
            .flat_map(|(c, _)| c.plant.iter().map(|p| p.head / GROUP))
            .collect();
        assert!(groups.len() >= 4, "{groups:?}");
        assert!(all.iter().filter(|(c, _)| c.share_prefix.is_some()).count() >= 2);
        // Sequences cut into 2..15 partitions and into all 16.
        assert!(lens.iter().any(|&l| (2..16).contains(&partitions(l, 16))));
        assert!(lens.iter().any(|&l| partitions(l, 16) == 16));
    }

    #[test]
    fn every_kv_head_is_distinct() {
        for (c, inputs) in generated() {
            let b = &inputs.batch;
            let s = (0..b.num_seqs()).max_by_key(|&s| b.len_of(s)).unwrap();
            let keys: HashSet<Vec<u32>> = (0..HKV)
                .map(|g| (0..DH).map(|d| inputs.key(s, 0, g, d).to_bits()).collect())
                .collect();
            assert_eq!(keys.len(), HKV, "{}", c.name);
        }
    }

    #[test]
    fn memory_is_laid_out_as_the_contract_says() {
        for (spec, inputs) in generated() {
            let b = &inputs.batch;
            let name = &spec.name;
            let owned = owned_blocks(b);
            let used: HashSet<usize> = owned.iter().flatten().copied().collect();
            assert!(used.contains(&0), "{name}: block 0 unused");
            assert!(b.num_blocks >= b.num_seqs() * b.max_blocks_per_seq + SPARE_BLOCKS);
            let (per_seq, blocks) = (b.max_blocks_per_seq, b.num_blocks);
            assert_table_rows(name, &b.block_table, per_seq, blocks, &owned);
            for s in 0..owned.len() {
                // NaN in every slot past the sequence's end.
                let len = b.len_of(s);
                if len % BLOCK != 0 {
                    let block = b.block_of(s, len);
                    for o in len % BLOCK..BLOCK {
                        assert!(
                            inputs.k_cache[Batch::k_cache_index(block, 2, 9, o)].is_nan(),
                            "{name}"
                        );
                        assert!(
                            inputs.v_cache[Batch::v_cache_index(block, 7, 63, o)].is_nan(),
                            "{name}"
                        );
                    }
                }
                assert!(inputs.value(s, len - 1, 4, 4).is_finite());
            }
            let spare = (0..b.num_blocks).find(|id| !used.contains(id)).unwrap();
            assert!(inputs.v_cache[Batch::v_cache_index(spare, 0, 0, 0)].is_nan());
            if let Some([a, c]) = spec.share_prefix {
                assert_eq!(owned[a][0], owned[c][0], "{name}: shared prefix");
            }
        }
    }

    #[test]
    fn plants_land_where_they_are_named() {
        let spec = hazard_cases()
            .into_iter()
            .find(|c| c.name == "overflow-in-far-block")
            .unwrap();
        let inputs = spec.generate(3).unwrap();
        assert_eq!(inputs.key(0, 1000, 5 / GROUP, 17), 4.0);
        assert_eq!(inputs.q[Batch::q_index(0, 5, 63)], 4.0);
        assert_ne!(inputs.key(0, 1000, 0, 17), 4.0);
    }

    #[test]
    fn generation_is_deterministic_and_seeded() {
        let spec = &hazard_cases()[0];
        // Bit for bit: the cache holds NaN, which `==` never equals.
        let bits = |i: &Inputs| -> (Vec<i32>, Vec<u32>) {
            let floats = i.q.iter().chain(&i.k_cache).chain(&i.v_cache);
            (
                i.batch.block_table.clone(),
                floats.map(|x| x.to_bits()).collect(),
            )
        };
        assert_eq!(
            bits(&spec.generate(42).unwrap()),
            bits(&spec.generate(42).unwrap())
        );
        let (a, b) = (spec.generate(42).unwrap(), spec.generate(43).unwrap());
        assert_ne!(a.q, b.q);
        assert_ne!(a.batch.block_table, b.batch.block_table);
    }

    #[test]
    fn bad_recipes_are_refused_with_the_bound() {
        let bad = |edit: &dyn Fn(&mut CaseSpec)| {
            let mut c = hazard_cases().remove(0);
            edit(&mut c);
            c.generate(1).unwrap_err().to_string()
        };
        assert!(bad(&|c| c.seq_len = vec![]).contains("1 to 64"));
        assert!(bad(&|c| c.seq_len[1] = 0).contains("seqLen 0"));
        assert!(bad(&|c| c.seq_len[1] = 8193).contains("1 to 8192"));
        assert!(bad(&|c| c.share_prefix = Some([0, 2])).contains("shorter than a block"));
        assert!(bad(&|c| c.share_prefix = Some([2, 2])).contains("two different"));
        assert!(bad(&|c| c.plant = vec![plant(0, 32, LAST, 1.0)]).contains("out of range"));
        assert!(
            bad(&|c| c.plant = vec![plant(1, 0, PlantKeys::List(vec![15]), 1.0)]).contains("past")
        );
        assert!(bad(&|c| c.plant = vec![plant(1, 0, LAST, f32::NAN)]).contains("finite"));
    }

    /// The GPU harness lays the same recipes out by itself (it runs where
    /// this crate does not); its lists must be these.
    #[test]
    fn the_gpu_harness_runs_these_cases_and_this_timing_shape() {
        let path = format!("{}/scripts/decode-kernels.py", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap();
        for c in hazard_cases() {
            let lens: Vec<String> = c.seq_len.iter().map(|l| l.to_string()).collect();
            let entry = format!(
                "(\"{}\", [{}], {}",
                c.name,
                lens.join(", "),
                if c.alibi { "True" } else { "False" }
            );
            assert!(text.contains(&entry), "{path} lacks {entry}");
        }
        let timing = text
            .split("TIMING = [")
            .nth(1)
            .and_then(|t| t.split(']').next())
            .unwrap();
        let listed: Vec<usize> = timing
            .split(',')
            .filter_map(|n| n.trim().parse().ok())
            .collect();
        assert_eq!(listed, TIMING_SEQ_LEN);
    }

    #[test]
    fn the_timing_shape_has_the_contracts_totals() {
        let b = timing_batch(1);
        assert_eq!(b.num_seqs(), 64);
        assert_eq!(b.len_of(20), 1);
        assert_eq!(TIMING_SEQ_LEN.iter().max(), Some(&8192));
        assert_eq!(TIMING_SEQ_LEN.iter().filter(|&&l| l >= 4096).count(), 22);
        assert_eq!(b.total_keys(), 227_112);
        assert_eq!(b.max_blocks_per_seq, 512);
        assert_eq!(b.num_blocks, b.total_blocks() + SPARE_BLOCKS);
        // About 4 KiB of K and V a key: 0.93 GB compulsory, whole blocks.
        assert_eq!(
            b.compulsory_bytes(),
            4 * (2 * 64 * 32 * 64 + 2 * 14_209 * 8 * 64 * 16)
        );
        let gb = b.compulsory_bytes() as f64 / 1e9;
        assert!((gb - 0.932).abs() < 0.001, "{gb}");
        // Every owned block once: the table's owned entries are a permutation.
        let owned: HashSet<usize> = owned_blocks(&b).into_iter().flatten().collect();
        assert_eq!(owned.len(), b.total_blocks());
        assert!(!b.alibi);
    }

    #[test]
    fn a_cases_file_is_read_with_the_labs_bounds_and_keys() {
        let refused = |text: &str| {
            parse_cases(text, "ta.toml", Path::new("."))
                .unwrap_err()
                .to_string()
        };
        let one = "[[case]]\nname = \"a\"\nsummary = \"s\"\nseq_len = [3, 2]\n";
        let parsed = |text: &str| parse_cases(text, "ta.toml", Path::new(".")).unwrap();
        assert_eq!(parsed(one)[0].seq_len, vec![3, 2]);
        assert!(refused(&format!("{one}window = 4\n")).contains("window"));
        assert!(refused(&format!("{one}tensors = \"t\"\n")).contains("takes no recipe keys"));
        assert!(
            refused("[[case]]\nname = \"a\"\nsummary = \"s\"\nseq_len = [9000]\n")
                .contains("1 to 8192")
        );
        let planted =
            format!("{one}[[case.plant]]\nseq = 1\nhead = 3\nkeys = \"last\"\nvalue = 2.0\n");
        assert_eq!(parsed(&planted)[0].plant[0].keys, LAST);
        assert!(refused(&format!(
            "{one}[[case.plant]]\nseq = 1\nhead = 3\nkeys = \"first\"\nvalue = 2.0\n"
        ))
        .contains("ta.toml"));
    }
}
