//! A buffer far larger than its memory: fixed-size blocks placed at chosen
//! block indices of a virtual range, with physical memory mapped only where
//! a block sits. This is how a case reaches cache offsets past 2^31 or 2^32
//! elements for a few megabytes (CUDA's virtual memory management: reserve
//! the range, map chunks of the allocation granularity, docs/CASES.md).
//!
//! Everything here is pure, so what is reserved, what is mapped and what
//! each mapped byte holds is tested without a GPU; `gpu::device` only
//! reserves, maps and copies what [`SparseBlocks::mapped`] lays out. Every
//! step that walks a placed buffer (upload, the inputs-unchanged audit)
//! walks these extents and nothing else.

use std::ops::Range;

/// Bytes reserved, and never mapped, beyond the first and the last mapped
/// chunk: a read that strays up to 4 GiB past either end faults rather than
/// landing in whatever the driver placed next door.
pub const MARGIN: i64 = 1 << 32;

/// Where each block of a compact buffer sits in the virtual buffer a kernel
/// is given: compact block `c` (elements `c * block_elems ..`) at virtual
/// block `at[c]`, which may be negative (below the pointer the kernel gets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SparseBlocks {
    /// Elements of one block.
    pub block_elems: usize,
    /// The virtual block index of each compact block; no two the same.
    pub at: Vec<i64>,
}

/// What a placed buffer needs on the device: a reserved virtual range and
/// the extents mapped inside it, each with its bytes. Offsets are bytes
/// from the pointer the kernel is given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapped {
    /// The virtual range to reserve, a whole number of chunks: the mapped
    /// extents and a [`MARGIN`] on each side.
    pub reserve: Range<i64>,
    /// Mapped runs of whole chunks, in address order, none touching another.
    pub extents: Vec<Extent>,
}

/// One mapped run of chunks and what it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extent {
    /// Bytes from the kernel's pointer to the run's first byte.
    pub offset: i64,
    pub bytes: Vec<u8>,
}

impl Extent {
    /// The byte range the run covers, from the kernel's pointer.
    pub fn range(&self) -> Range<i64> {
        self.offset..self.offset + self.bytes.len() as i64
    }
}

impl Mapped {
    /// Bytes of physical memory the mapping takes.
    pub fn mapped_bytes(&self) -> u64 {
        self.extents.iter().map(|e| e.bytes.len() as u64).sum()
    }
}

/// A placed buffer's launch image: its compact bytes, where each block
/// goes, and what fills a mapped chunk between blocks (the buffer's guard
/// element, so a read between blocks reads what a read past an end does).
#[derive(Debug, Clone, PartialEq)]
pub struct SparseImage {
    pub blocks: SparseBlocks,
    pub elem_bytes: usize,
    pub compact: Vec<u8>,
    pub fill: Vec<u8>,
}

impl SparseImage {
    /// The reservation and extents at the device's allocation `granularity`.
    pub fn mapped(&self, granularity: usize) -> Mapped {
        self.blocks
            .mapped(self.elem_bytes, &self.compact, &self.fill, granularity)
    }
}

impl SparseBlocks {
    /// Bytes of one block of `elem_bytes`-byte elements.
    fn block_bytes(&self, elem_bytes: usize) -> i64 {
        (self.block_elems * elem_bytes) as i64
    }

    /// The virtual range and mapped extents of a buffer whose compact image
    /// is `compact` (`at.len()` blocks of `elem_bytes`-byte elements), mapped
    /// in chunks of `granularity` bytes: every chunk a block touches is
    /// mapped, its bytes the blocks placed in it and `fill` (one element's
    /// bytes) everywhere else, so a read between blocks sees the fill.
    ///
    /// # Panics
    /// When `compact` is not `at.len()` whole blocks, `fill` not one
    /// element, `granularity` not a positive multiple of the element size,
    /// or two blocks share a place (caller bugs: placements are built, not read).
    pub fn mapped(
        &self,
        elem_bytes: usize,
        compact: &[u8],
        fill: &[u8],
        granularity: usize,
    ) -> Mapped {
        let block_bytes = self.block_bytes(elem_bytes);
        assert_eq!(compact.len() as i64, block_bytes * self.at.len() as i64);
        assert_eq!(fill.len(), elem_bytes, "the fill is one element");
        assert!(granularity > 0 && granularity % elem_bytes == 0);
        assert_eq!(MARGIN % granularity as i64, 0, "the margin is whole chunks");
        let chunk = granularity as i64;
        let mut order: Vec<usize> = (0..self.at.len()).collect();
        order.sort_by_key(|&c| self.at[c]);
        assert!(
            order.windows(2).all(|w| self.at[w[0]] != self.at[w[1]]),
            "two blocks share a place"
        );
        // Chunk runs in address order: a block's chunks join the last run
        // when they overlap or touch it.
        let mut runs: Vec<Range<i64>> = Vec::new();
        for &c in &order {
            let start = self.at[c] * block_bytes;
            let chunks = start.div_euclid(chunk) * chunk
                ..(start + block_bytes + chunk - 1).div_euclid(chunk) * chunk;
            match runs.last_mut() {
                Some(last) if chunks.start <= last.end => last.end = last.end.max(chunks.end),
                _ => runs.push(chunks),
            }
        }
        let extents = runs
            .into_iter()
            .map(|run| {
                let mut bytes: Vec<u8> = fill
                    .iter()
                    .copied()
                    .cycle()
                    .take((run.end - run.start) as usize)
                    .collect();
                for &c in &order {
                    let start = self.at[c] * block_bytes;
                    if run.contains(&start) {
                        let from = (start - run.start) as usize;
                        let block = c * block_bytes as usize..(c + 1) * block_bytes as usize;
                        bytes[from..from + block_bytes as usize].copy_from_slice(&compact[block]);
                    }
                }
                Extent {
                    offset: run.start,
                    bytes,
                }
            })
            .collect::<Vec<_>>();
        let reserve = match (extents.first(), extents.last()) {
            (Some(first), Some(last)) => first.offset - MARGIN..last.range().end + MARGIN,
            _ => 0..0,
        };
        Mapped { reserve, extents }
    }

    /// The compact block at each virtual block that holds one.
    pub fn by_place(&self) -> std::collections::HashMap<i64, usize> {
        self.at
            .iter()
            .enumerate()
            .map(|(c, &place)| (place, c))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks of 4 one-byte elements, block `c` holding `c + 1` in every byte.
    fn compact(blocks: usize) -> Vec<u8> {
        (0..blocks).flat_map(|c| [c as u8 + 1; 4]).collect()
    }

    /// The byte at `offset` from the kernel's pointer, or `None` where nothing is mapped.
    fn byte_at(mapped: &Mapped, offset: i64) -> Option<u8> {
        mapped
            .extents
            .iter()
            .find(|e| e.range().contains(&offset))
            .map(|e| e.bytes[(offset - e.offset) as usize])
    }

    #[test]
    fn each_block_reads_back_at_its_place_and_the_fill_between() {
        let blocks = SparseBlocks {
            block_elems: 4,
            at: vec![1_000_000, -3, 2, 5],
        };
        let mapped = blocks.mapped(1, &compact(4), &[0xEE], 16);
        for (c, &place) in blocks.at.iter().enumerate() {
            for i in 0..4 {
                assert_eq!(byte_at(&mapped, place * 4 + i), Some(c as u8 + 1));
            }
        }
        // Blocks 2 and 5 share chunk 0..16 and 16..32; block -3 is chunk -16..0,
        // which touches them: one run. The far block is a run of its own.
        let runs: Vec<Range<i64>> = mapped.extents.iter().map(Extent::range).collect();
        assert_eq!(runs, vec![-16..32, 4_000_000..4_000_016]);
        assert_eq!(byte_at(&mapped, 12), Some(0xEE), "between blocks: the fill");
        assert_eq!(byte_at(&mapped, 40), None, "past a run: unmapped");
        assert_eq!(mapped.reserve, -16 - MARGIN..4_000_016 + MARGIN);
        assert_eq!(mapped.mapped_bytes(), 64);
    }

    #[test]
    fn a_block_wider_than_a_chunk_maps_every_chunk_it_covers() {
        let blocks = SparseBlocks {
            block_elems: 6,
            at: vec![3],
        };
        // Bytes 72..96 of 4-byte elements, chunks of 16: 64..96.
        let fill = 7u32.to_le_bytes();
        let compact: Vec<u8> = (0..6u32).flat_map(|x| (x + 100).to_le_bytes()).collect();
        let mapped = blocks.mapped(4, &compact, &fill, 16);
        assert_eq!(mapped.extents.len(), 1);
        assert_eq!(mapped.extents[0].range(), 64..96);
        assert_eq!(&mapped.extents[0].bytes[..8], &[7, 0, 0, 0, 7, 0, 0, 0]);
        assert_eq!(&mapped.extents[0].bytes[8..12], &100u32.to_le_bytes());
        assert_eq!(&mapped.extents[0].bytes[28..], &105u32.to_le_bytes());
        let by_place = blocks.by_place();
        assert_eq!(by_place.get(&3), Some(&0));
        assert_eq!(by_place.get(&4), None);
    }

    #[test]
    #[should_panic(expected = "two blocks share a place")]
    fn two_blocks_in_one_place_are_refused() {
        let blocks = SparseBlocks {
            block_elems: 4,
            at: vec![9, 9],
        };
        blocks.mapped(1, &compact(2), &[0], 4);
    }
}
