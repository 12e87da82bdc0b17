//! vLLM's paged KV cache, as the three paged labs' contracts lay it out.
//!
//! Every paged lab has 32 query heads over 8 KV heads (query head `h`
//! reads KV head `h / 4`) and a cache of 16-token blocks reached through a
//! block table: K x-packed as `[numBlocks][8][DH/X][16][X]`, V as
//! `[numBlocks][8][DH][16]`. What differs between the labs is the head
//! dimension and how many elements X make 16 bytes (4 floats, 16 FP8
//! bytes): a [`CacheLayout`] value, which each lab's contract names once and
//! indexes through. The paged labs' bugs live in this layout, so it is
//! written out here once and tested once.

use crate::lab::geometry::{GridY, LaunchGeometry};

/// Query heads.
pub const HQ: usize = 32;
/// Key/value heads.
pub const HKV: usize = 8;
/// Query heads per KV head: query head `h` reads KV head `h / GROUP`.
pub const GROUP: usize = HQ / HKV;
/// Tokens per cache block.
pub const BLOCK: usize = 16;

/// The KV head query head `head` reads, as every paged contract maps them.
pub const fn kv_head_of(head: usize) -> usize {
    head / GROUP
}

/// One lab's cache: its head dimension and its packing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheLayout {
    /// Head dimension (`DH`).
    pub dim: usize,
    /// Elements packed together along the head dimension of the K cache.
    pub x: usize,
}

impl CacheLayout {
    pub const fn new(dim: usize, x: usize) -> CacheLayout {
        assert!(dim % x == 0, "X must divide the head dimension");
        CacheLayout { dim, x }
    }

    /// Index into a tensor with a row per query head (`q`, `out`: `[rows][32][DH]`).
    pub const fn head_index(&self, row: usize, head: usize, dim: usize) -> usize {
        (row * HQ + head) * self.dim + dim
    }

    /// Index into a tensor with a row per KV head (`kNew`, `vNew`: `[rows][8][DH]`).
    pub const fn kv_index(&self, row: usize, kv_head: usize, dim: usize) -> usize {
        (row * HKV + kv_head) * self.dim + dim
    }

    /// Index into the x-packed `kCache` (`[numBlocks][8][DH/X][16][X]`).
    pub const fn k_cache_index(
        &self,
        block: usize,
        kv_head: usize,
        dim: usize,
        slot: usize,
    ) -> usize {
        (((block * HKV + kv_head) * (self.dim / self.x) + dim / self.x) * BLOCK + slot) * self.x
            + dim % self.x
    }

    /// The slot of element `local` of a block of the x-packed `kCache`
    /// (`local` counted from the block's first element): the inverse of
    /// [`Self::k_cache_index`] in its slot.
    pub const fn k_cache_slot(&self, local: usize) -> usize {
        (local / self.x) % BLOCK
    }

    /// The slot of element `local` of a block of `vCache`: the inverse of
    /// [`Self::v_cache_index`] in its slot.
    pub const fn v_cache_slot(&self, local: usize) -> usize {
        local % BLOCK
    }

    /// Index into `vCache` (`[numBlocks][8][DH][16]`).
    pub const fn v_cache_index(
        &self,
        block: usize,
        kv_head: usize,
        dim: usize,
        slot: usize,
    ) -> usize {
        ((block * HKV + kv_head) * self.dim + dim) * BLOCK + slot
    }

    /// Elements of one cache block (of K or of V).
    pub const fn block_elems(&self) -> usize {
        HKV * self.dim * BLOCK
    }

    /// The names a kernel body may use without defining them.
    pub const fn body_constants(&self) -> [(&'static str, usize); 6] {
        [
            ("HQ", HQ),
            ("HKV", HKV),
            ("DH", self.dim),
            ("GROUP", GROUP),
            ("BLOCK", BLOCK),
            ("X", self.x),
        ]
    }
}

/// The block-table entry (`[numSeqs][maxBlocksPerSeq]`) of position `pos` of sequence `seq`.
pub const fn table_index(seq: usize, max_blocks_per_seq: usize, pos: usize) -> usize {
    seq * max_blocks_per_seq + pos / BLOCK
}

/// The standard ALiBi slope of query head `h` for 32 heads, `2^(-(h+1)/4)`,
/// rounded once to f32 (computed in f64 so every platform agrees).
pub fn alibi_slope(head: usize) -> f32 {
    (2f64).powf(-((head + 1) as f64) / 4.0) as f32
}

/// The 32 standard slopes, in head order.
pub fn standard_alibi_slopes() -> Vec<f32> {
    (0..HQ).map(alibi_slope).collect()
}

/// The launch both prefill labs give a file that declares none: a block
/// per (sequence, query head, 64 new tokens), 128 threads.
pub const PREFILL_GEOMETRY: LaunchGeometry = LaunchGeometry {
    rows_per_block: 64,
    threads: 128,
    dynamic_smem_bytes: 0,
    grid_y: GridY::QueryHead,
    splits: 1,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_layouts_tile_a_block_and_pack_x_elements_together() {
        for layout in [CacheLayout::new(64, 4), CacheLayout::new(128, 16)] {
            let mut seen_k = vec![false; layout.block_elems()];
            let mut seen_v = seen_k.clone();
            for g in 0..HKV {
                for d in 0..layout.dim {
                    for o in 0..BLOCK {
                        seen_k[layout.k_cache_index(0, g, d, o)] = true;
                        seen_v[layout.v_cache_index(0, g, d, o)] = true;
                    }
                }
            }
            assert!(
                seen_k.iter().all(|&s| s) && seen_v.iter().all(|&s| s),
                "{layout:?}"
            );
            let x = layout.x;
            // X consecutive dims of one key are adjacent; the next slot follows them.
            assert_eq!(
                layout.k_cache_index(1, 0, x - 1, 2) + 1,
                layout.k_cache_index(1, 0, 0, 3)
            );
            // The next X group of a key is a whole block of slots further on.
            assert_eq!(
                layout.k_cache_index(1, 0, x, 2),
                layout.k_cache_index(1, 0, 0, 2) + BLOCK * x
            );
            assert_eq!(layout.block_elems(), layout.k_cache_index(1, 0, 0, 0));
        }
    }

    #[test]
    fn the_group_map_and_the_table_follow_the_contracts() {
        assert_eq!(
            (kv_head_of(0), kv_head_of(3), kv_head_of(4), kv_head_of(31)),
            (0, 0, 1, 7)
        );
        assert_eq!(table_index(2, 5, 37), 12);
        assert_eq!(alibi_slope(3), 0.5);
        assert_eq!(alibi_slope(31), 2f32.powi(-8));
        assert!((alibi_slope(0) - 0.840_896_4).abs() < 1e-6);
        let rows = CacheLayout::new(64, 4);
        assert_eq!(rows.head_index(1, 2, 3), (32 + 2) * 64 + 3);
        assert_eq!(rows.kv_index(1, 2, 3), (8 + 2) * 64 + 3);
    }
}
