//! Laying a paged batch out in memory the way the contracts say the grader
//! does, which is what makes the cases catch indexing bugs at all: a
//! shuffled block table (block 0 in use, no block sitting where
//! `s * maxBlocksPerSeq + k` would put it), spare blocks, table entries past
//! a context that point at blocks the sequence does not own, and a marker
//! (a sentinel value or NaN, the lab's choice) in every cache slot no
//! context covers. A kernel that reads the wrong place reads a wrong number.
//!
//! The element types are the lab's: the generator here draws in a fixed
//! order and asks the lab for each value, so a lab's cases stay the same
//! for the same seed.

use rand::seq::SliceRandom;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use rayon::prelude::*;

use super::batch::{Batch, PrefillTensors};
use super::layout::{kv_head_of, standard_alibi_slopes, CacheLayout, BLOCK, HKV};
use super::recipe::Plant;
use crate::lab::counter_draw::CounterDraw;

/// How a lab draws its elements.
pub struct Draw<'a, A, C> {
    /// One element of `q`, `kNew` or `vNew`.
    pub activation: &'a dyn Fn(&mut ChaCha8Rng) -> A,
    /// What every cache slot no context covers holds (K, V).
    pub unowned: (C, C),
    /// One cached (K, V) pair at head dimension `dim`.
    pub cached: &'a mut dyn FnMut(&mut ChaCha8Rng, usize) -> (C, C),
}

/// `batch`'s tensors, drawn from `rng` in a fixed order: the block table,
/// `q`, `kNew`, `vNew`, then each owned cache slot's K and V; the standard
/// ALiBi slopes when the batch asks for ALiBi.
pub fn lay_out<A, C: Copy>(
    batch: Batch,
    share: Option<[usize; 2]>,
    rng: &mut ChaCha8Rng,
    draw: Draw<'_, A, C>,
) -> PrefillTensors<A, C> {
    let (table, owned) = block_table(&batch, share, rng);
    let batch = Batch {
        block_table: table,
        ..batch
    };
    let mut tensor = |len: usize| (0..len).map(|_| (draw.activation)(rng)).collect::<Vec<A>>();
    let q = tensor(batch.q_elems());
    let k_new = tensor(batch.kv_new_elems());
    let v_new = tensor(batch.kv_new_elems());
    let mut k_cache = vec![draw.unowned.0; batch.cache_elems()];
    let mut v_cache = vec![draw.unowned.1; batch.cache_elems()];
    let layout = batch.layout;
    let mut filled = vec![false; batch.num_blocks];
    for (s, blocks) in owned.iter().enumerate() {
        for (k, &block) in blocks.iter().enumerate() {
            if std::mem::replace(&mut filled[block], true) {
                continue; // a shared prefix block, filled by its first owner
            }
            let slots = (batch.context[s] - k * BLOCK).min(BLOCK);
            for g in 0..HKV {
                for d in 0..layout.dim {
                    for o in 0..slots {
                        let (key, value) = (draw.cached)(rng, d);
                        k_cache[layout.k_cache_index(block, g, d, o)] = key;
                        v_cache[layout.v_cache_index(block, g, d, o)] = value;
                    }
                }
            }
        }
    }
    PrefillTensors {
        alibi_slopes: batch.alibi.then(standard_alibi_slopes),
        batch,
        q,
        k_new,
        v_new,
        k_cache,
        v_cache,
    }
}

/// How a timing shape draws its elements by counter ([`CounterDraw`]):
/// each value uniform in `range`, made into the lab's types.
pub struct Counted<'a, A, C> {
    pub range: std::ops::Range<f32>,
    /// One element of `q`, `kNew` or `vNew`.
    pub activation: &'a (dyn Fn(f32) -> A + Sync),
    /// One cached key, and one cached value.
    pub key: &'a (dyn Fn(f32) -> C + Sync),
    pub value: &'a (dyn Fn(f32) -> C + Sync),
    /// What every cache slot no context covers holds (K, V).
    pub unowned: (C, C),
}

/// `batch`'s tensors for a timing shape: the block table drawn from `rng`
/// as a case's is, then every element by counter from a seed drawn after
/// it, on every core (the same tensors as [`lay_out`] lays out, with
/// other values).
pub fn lay_out_counted<A: Send, C: Copy + Send + Sync>(
    batch: Batch,
    rng: &mut ChaCha8Rng,
    draw: Counted<'_, A, C>,
) -> PrefillTensors<A, C> {
    let (table, owned) = block_table(&batch, None, rng);
    let batch = Batch {
        block_table: table,
        ..batch
    };
    let seed: u64 = rng.random();
    let activations = |tensor: u64, len: usize| {
        CounterDraw::new(seed, tensor).tensor(len, draw.range.clone(), draw.activation)
    };
    let slots = filled_slots(batch.num_blocks, &owned, |s| batch.context[s]);
    let (k_cache, v_cache) = counted_caches(
        &batch.layout,
        &slots,
        seed,
        &draw.range,
        draw.unowned,
        (draw.key, draw.value),
    );
    PrefillTensors {
        alibi_slopes: batch.alibi.then(standard_alibi_slopes),
        q: activations(0, batch.q_elems()),
        k_new: activations(1, batch.kv_new_elems()),
        v_new: activations(2, batch.kv_new_elems()),
        k_cache,
        v_cache,
        batch,
    }
}

/// The slots of each of `num_blocks` blocks its first owner fills (0: owned
/// by no one): sequence `s` owns `owned[s]`, in order, over `filled(s)`
/// positions.
pub fn filled_slots(
    num_blocks: usize,
    owned: &[Vec<usize>],
    filled: impl Fn(usize) -> usize,
) -> Vec<usize> {
    let mut slots = vec![0usize; num_blocks];
    for (s, blocks) in owned.iter().enumerate() {
        for (k, &block) in blocks.iter().enumerate() {
            if slots[block] == 0 {
                slots[block] = (filled(s) - k * BLOCK).min(BLOCK);
            }
        }
    }
    slots
}

/// A timing shape's K and V caches in `layout`, by counter from `seed`
/// (tensors 3 and 4): block `b` holds `slots[b]` slots drawn uniform in
/// `range` and made by `make` (K's, V's), `unowned` everywhere else; made
/// on every core, each element written once.
pub fn counted_caches<C: Copy + Send + Sync>(
    layout: &CacheLayout,
    slots: &[usize],
    seed: u64,
    range: &std::ops::Range<f32>,
    unowned: (C, C),
    make: (&(dyn Fn(f32) -> C + Sync), &(dyn Fn(f32) -> C + Sync)),
) -> (Vec<C>, Vec<C>) {
    let (keys, values) = (CounterDraw::new(seed, 3), CounterDraw::new(seed, 4));
    let key = |at: usize| make.0(keys.uniform(at as u64, range));
    let value = |at: usize| make.1(values.uniform(at as u64, range));
    (
        counted_cache(layout, slots, unowned.0, key, |local| {
            layout.k_cache_slot(local)
        }),
        counted_cache(layout, slots, unowned.1, value, |local| {
            layout.v_cache_slot(local)
        }),
    )
}

/// A cache in `layout` whose block `b` holds `slots[b]` drawn slots (the
/// element at index `at` in a filled slot is `value(at)`) and `unowned`
/// everywhere else; `slot_of` names the slot of an element by its place in
/// its block. Collected straight into the cache on every core: a cache of
/// hundreds of megabytes is written once, its pages first touched by the
/// thread that fills them, not filled with `unowned` by one thread first.
fn counted_cache<C, V, S>(
    layout: &CacheLayout,
    slots: &[usize],
    unowned: C,
    value: V,
    slot_of: S,
) -> Vec<C>
where
    C: Copy + Send + Sync,
    V: Fn(usize) -> C + Sync,
    S: Fn(usize) -> usize + Sync,
{
    let block_elems = layout.block_elems();
    (0..slots.len() * block_elems)
        .into_par_iter()
        .map(|at| {
            let (block, local) = (at / block_elems, at % block_elems);
            if slot_of(local) < slots[block] {
                value(at)
            } else {
                unowned
            }
        })
        .collect()
}

/// The block table for `batch`'s lengths and which block each context owns.
///
/// Ids are a seeded permutation; no owned block sits at the id the
/// "table ignored" bug would compute for its position; block 0 is owned
/// whenever that rule leaves room; entries past a context point at blocks
/// the sequence does not own.
pub fn block_table(
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
    let table = table_of(&owned, per_seq, batch.num_blocks, rng);
    (table, owned)
}

/// The `[numSeqs][maxBlocksPerSeq]` table of the blocks each sequence
/// `owned`, every entry past them a random block of `num_blocks` the
/// sequence does not own (so a read past the end lands in another's data).
pub fn table_of(
    owned: &[Vec<usize>],
    per_seq: usize,
    num_blocks: usize,
    rng: &mut ChaCha8Rng,
) -> Vec<i32> {
    let mut table = vec![0i32; owned.len() * per_seq];
    for (s, blocks) in owned.iter().enumerate() {
        for k in 0..per_seq {
            table[s * per_seq + k] = match blocks.get(k) {
                Some(&id) => id as i32,
                None => loop {
                    let id = rng.random_range(0..num_blocks);
                    if !blocks.contains(&id) {
                        break id as i32;
                    }
                },
            };
        }
    }
    table
}

/// Where a plant lands in `batch`: indices into `q`, into the K cache and
/// into `kNew`, each to be set to the plant's value in the lab's type.
pub struct PlantSites {
    pub q: Vec<usize>,
    pub k_cache: Vec<usize>,
    pub k_new: Vec<usize>,
}

impl PlantSites {
    pub fn of(batch: &Batch, plant: &Plant) -> PlantSites {
        let layout = batch.layout;
        let (context, new) = (batch.context[plant.seq], batch.new[plant.seq]);
        let start = batch.start(plant.seq);
        let kv_head = kv_head_of(plant.head);
        let q = plant
            .rows(new)
            .into_iter()
            .flat_map(|t| (0..layout.dim).map(move |d| layout.head_index(start + t, plant.head, d)))
            .collect();
        let (mut k_cache, mut k_new) = (Vec::new(), Vec::new());
        for pos in plant.keys(context, new) {
            for d in 0..layout.dim {
                if pos < context {
                    let block = batch.block_of(plant.seq, pos);
                    k_cache.push(layout.k_cache_index(block, kv_head, d, pos % BLOCK));
                } else {
                    k_new.push(layout.kv_index(start + pos - context, kv_head, d));
                }
            }
        }
        PlantSites { q, k_cache, k_new }
    }

    /// Sets every site of the plant: `activation` in `q` and `kNew`, `key` in the cache.
    pub fn set<A: Copy, C: Copy>(
        &self,
        q: &mut [A],
        k_new: &mut [A],
        k_cache: &mut [C],
        activation: A,
        key: C,
    ) {
        self.q.iter().for_each(|&i| q[i] = activation);
        self.k_new.iter().for_each(|&i| k_new[i] = activation);
        self.k_cache.iter().for_each(|&i| k_cache[i] = key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    /// Each element of a counted cache is its index's draw in a filled
    /// slot and the unowned marker elsewhere, by the layout's own indices
    /// (both layouts' x, a full, an empty and two partial blocks).
    #[test]
    fn a_counted_cache_draws_every_filled_slot_by_its_index_and_marks_the_rest() {
        let range = -1.0f32..1.0;
        let bits = |x: f32| x.to_bits();
        for layout in [CacheLayout::new(64, 4), CacheLayout::new(128, 16)] {
            let slots = [BLOCK, 0, 7, 1, BLOCK];
            let (k, v) = counted_caches(&layout, &slots, 11, &range, (u32::MAX, 0), (&bits, &bits));
            let (keys, values) = (CounterDraw::new(11, 3), CounterDraw::new(11, 4));
            let n = slots.len() * layout.block_elems();
            let (mut want_k, mut want_v) = (vec![u32::MAX; n], vec![0u32; n]);
            for (block, &filled) in slots.iter().enumerate() {
                for g in 0..HKV {
                    for d in 0..layout.dim {
                        for o in 0..filled {
                            let at = layout.k_cache_index(block, g, d, o);
                            want_k[at] = keys.uniform(at as u64, &range).to_bits();
                            let at = layout.v_cache_index(block, g, d, o);
                            want_v[at] = values.uniform(at as u64, &range).to_bits();
                        }
                    }
                }
            }
            assert!(k == want_k, "K cache, x = {}", layout.x);
            assert!(v == want_v, "V cache, x = {}", layout.x);
        }
    }

    /// A counted layout keeps what the sequential one holds of a batch:
    /// the same block table from the same stream, markers in every slot no
    /// context covers, and values in the range everywhere else, the same
    /// for the same seed.
    #[test]
    fn a_counted_layout_keeps_the_table_and_the_markers_and_draws_in_range() {
        let layout = CacheLayout::new(64, 4);
        let batch = || Batch::from_lengths(layout, vec![40, 0, 17], vec![3, 5, 1], 0, false, 4, 12);
        let same = |x: f32| x;
        let counted = |seed| {
            let draw = Counted {
                range: -1.0..1.0,
                activation: &same,
                key: &same,
                value: &same,
                unowned: (2.5f32, 40.0f32),
            };
            lay_out_counted(batch(), &mut ChaCha8Rng::seed_from_u64(seed), draw)
        };
        let tensors = counted(9);
        let (table, owned) = block_table(&batch(), None, &mut ChaCha8Rng::seed_from_u64(9));
        assert_eq!(tensors.batch.block_table, table);
        let in_range = |x: &f32| (-1.0..1.0).contains(x);
        assert!(tensors
            .q
            .iter()
            .chain(&tensors.k_new)
            .chain(&tensors.v_new)
            .all(in_range));
        let mut owned_slots = std::collections::HashSet::new();
        for (s, blocks) in owned.iter().enumerate() {
            for (k, &block) in blocks.iter().enumerate() {
                for o in 0..(batch().context[s] - k * BLOCK).min(BLOCK) {
                    owned_slots.insert((block, o));
                }
            }
        }
        for block in 0..batch().num_blocks {
            for g in 0..HKV {
                for d in 0..64 {
                    for o in 0..BLOCK {
                        let key = tensors.k_cache[layout.k_cache_index(block, g, d, o)];
                        let value = tensors.v_cache[layout.v_cache_index(block, g, d, o)];
                        match owned_slots.contains(&(block, o)) {
                            true => assert!(in_range(&key) && in_range(&value)),
                            false => assert_eq!((key, value), (2.5, 40.0)),
                        }
                    }
                }
            }
        }
        let again = counted(9);
        assert_ne!(counted(10).k_cache, tensors.k_cache);
        assert_eq!((again.q, again.k_cache), (tensors.q, tensors.k_cache));
    }
}
