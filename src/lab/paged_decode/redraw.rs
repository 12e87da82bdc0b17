//! The timed launches' data (`lab::redraw`): every block id renamed with
//! its contents, and two of the cases' hazards at a sequence and head drawn
//! for each launch: a query whose largest score is its own key, the last of
//! its context (`last-key`), and one whose large scores (about 128, values
//! drawn about the cases' 4.0) fall on two earlier cached keys (`overflow`). The split-K partitions then meet the planted
//! keys wherever the launch put them.

use rand::seq::IndexedRandom;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::contract::{Batch, Inputs, DH, HQ, LAYOUT};
use crate::lab::paged::layout::{kv_head_of, BLOCK};
use crate::lab::paged::redraw::{blocks_moved, ABOUT_FOUR};
use crate::lab::redraw::Redraw;

pub fn redraw(inputs: &Inputs, rng: &mut ChaCha8Rng) -> Redraw {
    let batch = &inputs.batch;
    let mut launched = batch.clone();
    let (elems, blocks) = (LAYOUT.block_elems(), batch.num_blocks);
    let mut redraw = blocks_moved(elems, blocks, &mut launched.block_table, rng);
    let seqs: Vec<usize> = (0..batch.num_seqs()).collect();
    if let Some(&seq) = seqs.choose(rng) {
        let last = batch.len_of(seq) - 1;
        plant(&mut redraw, &launched, "last-key", seq, &[last], rng);
    }
    let long: Vec<usize> = seqs.into_iter().filter(|&s| batch.len_of(s) > 1).collect();
    if let Some(&seq) = long.choose(rng) {
        let earlier: Vec<usize> = (0..2)
            .map(|_| rng.random_range(0..batch.len_of(seq) - 1))
            .collect();
        plant(&mut redraw, &launched, "overflow", seq, &earlier, rng);
    }
    redraw
}

/// Plants the query of `seq` at a random head and its KV head's `keys`
/// (positions in the sequence) through the launched table.
fn plant(
    redraw: &mut Redraw,
    launched: &Batch,
    kind: &'static str,
    seq: usize,
    keys: &[usize],
    rng: &mut ChaCha8Rng,
) {
    let head = rng.random_range(0..HQ);
    let large = ABOUT_FOUR;
    let query = Batch::q_index(seq, head, 0);
    redraw.plant("q", query..query + DH, large);
    let sites: Vec<usize> = keys
        .iter()
        .flat_map(|&pos| {
            let block = launched.block_of(seq, pos);
            (0..DH).map(move |d| Batch::k_cache_index(block, kv_head_of(head), d, pos % BLOCK))
        })
        .collect();
    redraw.plant_at("kCache", &sites, large);
    redraw.decides(kind, seq);
}
