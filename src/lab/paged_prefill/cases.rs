//! The fp32 paged lab's hazard cases: the family's recipes
//! ([`crate::lab::paged::recipe`]) laid out in fp32, with finite sentinels
//! in every cache slot no context covers (a kernel that reads one computes
//! a wrong number rather than a NaN that would hide what it read), and the
//! contract's timing batch.
//!
//! Generation is deterministic in `(seed, case name)`, so a printed seed
//! reproduces a failing run, and each case gets its own stream so adding a
//! case does not change the others.

use std::path::Path;

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::contract::{Batch, Inputs, INSTANCE, SENTINEL_K, SENTINEL_V};
use crate::lab::case_file::case_rng;
use crate::lab::paged::generate::{
    block_table, lay_out, lay_out_counted, Counted, Draw, PlantSites,
};
pub use crate::lab::paged::recipe::CaseSpec;
use crate::lab::paged::recipe::{CaseInputs, PagedCaseError};
use crate::lab::paged::tags;

/// The cases shipped with flashprof.
pub const EMBEDDED_CASES: &str = include_str!("../../../assets/paged-cases.toml");

/// The embedded cases; the test suite validates them, so this cannot fail at run time.
pub fn embedded_cases() -> Vec<CaseSpec> {
    INSTANCE
        .parse_cases(EMBEDDED_CASES, "assets/paged-cases.toml", Path::new("."))
        .expect("the embedded paged cases are checked by tests")
}

/// The embedded cases whose whole output the CPU oracle computes: the
/// tests that run every model over every case take these, and the long
/// cases, graded on sampled rows, have tests of their own.
#[cfg(test)]
pub fn whole_oracle_cases() -> Vec<CaseSpec> {
    embedded_cases()
        .into_iter()
        .filter(|case| {
            let batch = INSTANCE.lengths_batch(case);
            !INSTANCE.problem(&batch).oracle_sampled()
        })
        .collect()
}

/// Builds `spec`'s inputs from the run's seed (or loads its tensors).
pub fn generate(spec: &CaseSpec, seed: u64) -> Result<CaseInputs<Inputs>, PagedCaseError> {
    if let Some(dir) = &spec.tensors {
        return super::tensors::load_dir(dir, spec.window);
    }
    let mut rng = case_rng(seed, &spec.name);
    let mut inputs = lay_out_f32(INSTANCE.lengths_batch(spec), spec.share_prefix, &mut rng);
    for plant in &spec.plant {
        let sites = PlantSites::of(&inputs.batch, plant);
        sites.set(
            &mut inputs.q,
            &mut inputs.k_new,
            &mut inputs.k_cache,
            plant.value,
            plant.value,
        );
    }
    if let Some(reach) = spec.high_blocks {
        inputs = inputs.placed_high(reach, (tags::key_tag, tags::value_tag));
    }
    Ok(CaseInputs {
        inputs,
        expected: None,
    })
}

/// The timing shape's batch (window and ALiBi off), with its block table
/// drawn from `seed`: 288 blocks per sequence, 4608 blocks.
pub fn timing_batch(seed: u64) -> Batch {
    let batch = INSTANCE.timing_lengths();
    let table = block_table(&batch, None, &mut case_rng(seed, "timing")).0;
    Batch {
        block_table: table,
        ..batch
    }
}

/// The timing shape's inputs from `seed` (about 300 MB of cache): its block
/// table as [`timing_batch`] draws it, its values by counter, uniform in
/// `[-1, 1)` as a case's are.
pub fn timing_inputs(seed: u64) -> Inputs {
    let uniform = |x: f32| x;
    lay_out_counted(
        INSTANCE.timing_lengths(),
        &mut case_rng(seed, "timing"),
        Counted {
            range: -1.0..1.0,
            activation: &uniform,
            key: &uniform,
            value: &uniform,
            unowned: (SENTINEL_K, SENTINEL_V),
        },
    )
}

/// Tensors uniform in `[-1, 1)` (only sentinels and plants go beyond).
fn lay_out_f32(batch: Batch, share: Option<[usize; 2]>, rng: &mut ChaCha8Rng) -> Inputs {
    let uniform = |rng: &mut ChaCha8Rng| rng.random_range(-1.0f32..1.0);
    let mut cached = |rng: &mut ChaCha8Rng, _dim: usize| (uniform(rng), uniform(rng));
    let draw = Draw {
        activation: &uniform,
        unowned: (SENTINEL_K, SENTINEL_V),
        cached: &mut cached,
    };
    lay_out(batch, share, rng, draw)
}

#[cfg(test)]
mod tests {
    use super::super::contract::{BLOCK, DH, GROUP, LAYOUT};
    use super::*;
    use crate::lab::paged::recipe::{NamedKeys, PlantKeys, MAX_VISIBLE_PAIRS, SPARE_BLOCKS};
    use crate::lab::paged::testing::{
        assert_prefill_families, assert_table_rows, slots_past_contexts,
    };

    fn case(name: &str) -> CaseSpec {
        crate::lab::case_file::named(embedded_cases(), name)
    }

    fn batches() -> Vec<(String, Batch)> {
        embedded_cases()
            .into_iter()
            .map(|c| (c.name.clone(), generate(&c, 7).unwrap().inputs.batch))
            .collect()
    }

    #[test]
    fn the_cases_cover_every_hazard_family_of_the_contract() {
        let all = batches();
        let any = |f: &dyn Fn(&Batch) -> bool| all.iter().any(|(_, b)| f(b));
        assert_prefill_families(&all.iter().map(|(_, b)| b).collect::<Vec<_>>());
        assert!(
            any(&|b| b.q_start.iter().any(|&s| s % 2 == 1)),
            "odd qStart"
        );
        // A window longer than one of its sequences and, to catch the
        // off-by-one, shorter than another.
        assert!(any(&|b| b.window().is_some_and(|w| {
            (0..b.num_seqs()).any(|s| b.len_of(s) < w) && (0..b.num_seqs()).any(|s| b.len_of(s) > w)
        })));
        let specs = embedded_cases();
        assert!(specs.iter().any(|c| c.share_prefix.is_some()));
        // Planted overflow (score 128) in a far cached block and in new tokens.
        let overflow = |cached: bool| {
            specs.iter().any(|c| {
                c.plant.iter().any(|p| {
                    let ctx = c.context[p.seq];
                    let keys = p.keys(ctx, c.new[p.seq]);
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
            let inputs = generate(&spec, 11).unwrap().inputs;
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
            let (per_seq, blocks) = (b.max_blocks_per_seq, b.num_blocks);
            assert_table_rows(name, &b.block_table, per_seq, blocks, &owned);
            // Slots past a context's end hold sentinels.
            for (block, o) in slots_past_contexts(b) {
                let k = inputs.k_cache[LAYOUT.k_cache_index(block, 3, 9, o)];
                let v = inputs.v_cache[LAYOUT.v_cache_index(block, 3, 9, o)];
                assert_eq!((k, v), (SENTINEL_K, SENTINEL_V), "{name}");
            }
            // Spare blocks are sentinel throughout.
            let spare = (0..b.num_blocks).find(|id| !used.contains(id)).unwrap();
            assert_eq!(
                inputs.v_cache[LAYOUT.v_cache_index(spare, 7, 63, 15)],
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
        let a = generate(&spec, 42).unwrap();
        assert_eq!(a, generate(&spec, 42).unwrap());
        let b = generate(&spec, 43).unwrap();
        assert_ne!(a.inputs.q, b.inputs.q);
        assert_ne!(a.inputs.batch.block_table, b.inputs.batch.block_table);
        // Cases draw from their own streams.
        assert_ne!(
            generate(&case("window-1"), 42).unwrap().inputs.q[..64],
            a.inputs.q[..64]
        );
    }

    #[test]
    fn plants_land_where_they_are_named() {
        let spec = case("overflow-in-far-cached-block");
        let inputs = generate(&spec, 3).unwrap().inputs;
        let p = &spec.plant[0];
        let keys = p.keys(spec.context[p.seq], spec.new[p.seq]);
        let g = p.head / GROUP;
        for &pos in &keys {
            for d in 0..DH {
                assert_eq!(inputs.cached_key(p.seq, pos, g, d), p.value);
            }
        }
        let row = inputs.batch.start(p.seq);
        assert_eq!(inputs.q[LAYOUT.head_index(row, p.head, 5)], p.value);
    }

    fn rejected(toml: &str) -> String {
        let text = format!("[[case]]\nname = \"x\"\nsummary = \"s\"\n{toml}");
        INSTANCE
            .parse_cases(&text, "t.toml", Path::new("."))
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn bad_recipes_are_refused_with_the_bound() {
        let cases = [
            ("context = [1]\nnew = [0]", "at least 1"),
            ("context = [1, 2]\nnew = [3]", "one of each"),
            ("context = [70000]\nnew = [1]", "at most 65536"),
            ("context = [1]\nnew = [600]", "at most 512"),
            ("context = [60000, 60000]\nnew = [300, 300]", "at most 8000000"),
            (
                "context = [65000, 1, 1, 1]\nnew = [1, 1, 1, 1]",
                "a case has at most 67108864",
            ),
            (
                "context = [30000, 1]\nnew = [1, 1]\nhigh_blocks = \"past-2^32\"",
                "a case has at most 67108864",
            ),
            ("context = []\nnew = []", "1 to 16"),
            ("context = [1]\nnew = [1]\nwindow = 99999", "at most 66048"),
            ("context = [1]\nnew = [1]\ncolour = 3", "unknown field"),
            ("context = [8, 20]\nnew = [1, 1]\nshare_prefix = [0, 1]", "shorter than a block (16 keys)"),
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
        let err = INSTANCE
            .parse_cases(&format!("{dup}{dup}"), "t.toml", Path::new("."))
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
        let mb = b.compulsory_bytes(4, 4) as f64 / 1e6;
        assert!((mb - 215.0).abs() < 0.5, "{mb}");
        assert!(b.window().is_none() && !b.alibi);
        assert_eq!(*b.q_start.last().unwrap(), 3930);
    }
}
