//! The timed launches' data in a paged prefill batch (`lab::redraw`): every
//! block id renamed with its contents, and two of the cases' hazards at a
//! sequence, row and head drawn for each launch, so neither a plan made
//! from the block table nor a shortcut that skips the planted rows lasts
//! from one launch to the next.

use rand::seq::IndexedRandom;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::batch::Batch;
use super::generate::PlantSites;
use super::layout::HQ;
use super::recipe::{Plant, PlantKeys, PlantRows};
use crate::lab::redraw::{BlockMove, PlantValue, Redraw};

/// What an instance plants: in `q` and `kNew` (the activation) and in the
/// K cache (the key, scale applied), values about the cases' 4.0, so that
/// a planted query meets a planted key at a score of about 4 x 4 x DH /
/// sqrt(DH). Drawn from a range where the element type allows, so close
/// large scores decide each other's weights and precision matters.
#[derive(Debug, Clone, Copy)]
pub struct Large {
    pub activation: PlantValue,
    pub key: PlantValue,
}

/// Large values drawn about the cases' 4.0 (float and bf16 elements).
pub const ABOUT_FOUR: PlantValue = PlantValue::Drawn {
    low: 3.5,
    high: 4.5,
};

/// A launch's redraw of `batch`: the block move, then a query row whose
/// largest score is its own key, the last it sees (`last-key`), and one
/// whose large scores fall on two cached keys (`overflow`, the `expf`
/// overflow of a kernel that does not subtract the row max), each at a
/// random head.
pub fn prefill_redraw(batch: &Batch, large: Large, rng: &mut ChaCha8Rng) -> Redraw {
    let mut launched = batch.clone();
    let (elems, blocks) = (batch.layout.block_elems(), batch.num_blocks);
    let mut redraw = blocks_moved(elems, blocks, &mut launched.block_table, rng);
    let seqs: Vec<usize> = (0..batch.num_seqs())
        .filter(|&s| batch.new[s] > 0)
        .collect();
    if let Some(&seq) = seqs.choose(rng) {
        let row = rng.random_range(0..batch.new[seq]);
        let keys = vec![batch.context[seq] + row];
        let last_key = at_random_head(seq, row, keys, rng);
        plant(&mut redraw, &launched, "last-key", &last_key, large);
    }
    let cached: Vec<usize> = seqs.into_iter().filter(|&s| batch.context[s] > 0).collect();
    if let Some(&seq) = cached.choose(rng) {
        let row = rng.random_range(0..batch.new[seq]);
        let keys = (0..2)
            .map(|_| rng.random_range(0..batch.context[seq]))
            .collect();
        let overflow = at_random_head(seq, row, keys, rng);
        plant(&mut redraw, &launched, "overflow", &overflow, large);
    }
    redraw
}

/// A paged launch's redraw before its plants: every one of `blocks` ids of
/// the K and V caches (`block_elems` elements a block) renamed, and `table`
/// renamed with them into the block table as the launch sees it, which the
/// plants are placed through.
pub fn blocks_moved(
    block_elems: usize,
    blocks: usize,
    table: &mut Vec<i32>,
    rng: &mut ChaCha8Rng,
) -> Redraw {
    let moved = BlockMove::shuffled(
        "blockTable",
        vec![("kCache", block_elems), ("vCache", block_elems)],
        blocks,
        rng,
    );
    *table = moved.moved_table(table);
    Redraw {
        blocks: Some(moved),
        ..Redraw::default()
    }
}

/// Query `row` of `seq` at a head drawn from `rng`, meeting `keys`.
fn at_random_head(seq: usize, row: usize, keys: Vec<usize>, rng: &mut ChaCha8Rng) -> Plant {
    Plant {
        seq,
        head: rng.random_range(0..HQ),
        rows: PlantRows::List(vec![row]),
        keys: PlantKeys::List(keys),
        value: 0.0,
    }
}

/// Plants `plant` on the launched (moved) table and records its rows as
/// decided by `kind`.
fn plant(redraw: &mut Redraw, launched: &Batch, kind: &'static str, plant: &Plant, large: Large) {
    let sites = PlantSites::of(launched, plant);
    redraw.plant_at("q", &sites.q, large.activation);
    redraw.plant_at("kNew", &sites.k_new, large.activation);
    redraw.plant_at("kCache", &sites.k_cache, large.key);
    for row in plant.rows(launched.new[plant.seq]) {
        redraw.decides(kind, launched.start(plant.seq) + row);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::paged::layout::CacheLayout;
    use rand::SeedableRng;

    fn batch() -> Batch {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let lengths = Batch::from_lengths(
            CacheLayout::new(64, 4),
            vec![40, 0, 17],
            vec![5, 9, 3],
            0,
            false,
            4,
            12,
        );
        let (table, _) = super::super::generate::block_table(&lengths, None, &mut rng);
        Batch {
            block_table: table,
            ..lengths
        }
    }

    #[test]
    fn each_launch_moves_the_plants_and_the_blocks() {
        let batch = batch();
        let large = Large {
            activation: ABOUT_FOUR,
            key: ABOUT_FOUR,
        };
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let first = prefill_redraw(&batch, large, &mut rng);
        let second = prefill_redraw(&batch, large, &mut rng);
        assert_ne!(first.plants, second.plants);
        assert_ne!(first.blocks, second.blocks);
        for redraw in [&first, &second] {
            let kinds: Vec<&str> = redraw.rows.iter().map(|r| r.kind).collect();
            assert_eq!(kinds, ["last-key", "overflow"]);
            assert!(redraw.planted_rows().iter().all(|&r| r < batch.total_new()));
            // The overflow row's keys are cached: planted through the moved table.
            assert!(!redraw.spans_of("kCache").is_empty());
        }
    }
}
