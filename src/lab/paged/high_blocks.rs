//! The high-blocks cases: a paged cache whose block table points past 2^31
//! or 2^32 elements, where a kernel that computes `block * blockStride` in
//! 32-bit arithmetic wraps (vLLM fixed it twice: #1514, #47671).
//!
//! The case's cache stays compact for the CPU (the oracle, the bug models,
//! the diagnoses read it as any case's): a [`HighBlocks`] says where each
//! compact block sits in the virtual cache the kernel is given. The batch's
//! blocks go from the reach's first block on, in order; after them come
//! landing blocks, one at each place a 32-bit offset to one of them wraps
//! to (signed: the low 32 bits sign-extended, up to 2^31 elements below
//! the pointer; unsigned: modulo 2^32), holding the case's sentinels. A
//! kernel with the bug then reads a block that is mapped and wrong, which
//! its CPU model reproduces as the oracle over another block table
//! ([`HighBlocks::wrapped_table`]); a read anywhere else is unmapped and
//! faults. The device maps only these blocks ([`crate::lab::sparse`]).

use serde::{Deserialize, Serialize};

use super::batch::Batch;
use super::layout::BLOCK;
use crate::lab::sparse::SparseBlocks;

/// How far up the cache a high-blocks case places its blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Reach {
    /// Element offsets from 2^31 on: a signed 32-bit offset wraps negative.
    #[serde(rename = "past-2^31")]
    Past2To31,
    /// Element offsets from 2^32 + 2^31 on: both 32-bit offsets wrap, and
    /// to different places (the low 32 bits are 2^31 and up, negative as an
    /// `int`), so a case tells a signed overflow from an unsigned one.
    #[serde(rename = "past-2^32")]
    Past2To32,
}

impl Reach {
    /// The element offset the case's first block starts at.
    pub const fn elements(self) -> i64 {
        match self {
            Reach::Past2To31 => 1 << 31,
            Reach::Past2To32 => 3 << 31,
        }
    }

    /// [`Reach::elements`] as a diagnosis writes it.
    pub const fn label(self) -> &'static str {
        match self {
            Reach::Past2To31 => "2^31",
            Reach::Past2To32 => "2^32 + 2^31",
        }
    }

    /// The first block whose first element is at or past [`Reach::elements`].
    pub const fn first_block(self, block_elems: usize) -> i64 {
        let block = block_elems as i64;
        (self.elements() + block - 1) / block
    }
}

/// The 32-bit type a kernel computes a cache offset in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Wrap {
    /// `int`: the low 32 bits, sign-extended.
    Signed,
    /// `unsigned`: the low 32 bits, zero-extended.
    Unsigned,
}

impl Wrap {
    pub const BOTH: [Wrap; 2] = [Wrap::Signed, Wrap::Unsigned];

    /// The element offset a kernel reads when it computes `offset` in this type.
    pub const fn landing(self, offset: i64) -> i64 {
        match self {
            Wrap::Signed => offset as i32 as i64,
            Wrap::Unsigned => offset as u32 as i64,
        }
    }

    /// The C type, as a diagnosis names it.
    pub const fn c_type(self) -> &'static str {
        match self {
            Wrap::Signed => "int",
            Wrap::Unsigned => "unsigned",
        }
    }

    /// The planted bug's name, as its kernel file and a case's cause say it.
    pub const fn bug_name(self) -> &'static str {
        match self {
            Wrap::Signed => "int32-offset-signed",
            Wrap::Unsigned => "int32-offset-unsigned",
        }
    }

    /// The defect and its fix, in one clause for a check's verdict.
    pub const fn defect(self) -> &'static str {
        match self {
            Wrap::Signed => {
                "cache offsets are computed in int and wrap past 2^31 elements: widen the block id \
                 before multiplying, (size_t)blockTable[...] * blockStride"
            }
            Wrap::Unsigned => {
                "cache offsets are computed in unsigned and wrap past 2^32 elements: widen the \
                 block id before multiplying, (size_t)blockTable[...] * blockStride"
            }
        }
    }

    /// How the wrapped offset lands, for a diagnosis.
    const fn how(self) -> &'static str {
        match self {
            Wrap::Signed => "as an int its low 32 bits are negative",
            Wrap::Unsigned => "as an unsigned it is taken modulo 2^32",
        }
    }
}

/// What an illegal address on `batch` may mean when its blocks are placed
/// high: what this case maps, so the access fell outside it.
pub fn fault_note(batch: &Batch) -> Option<String> {
    let high = batch.high.as_ref()?;
    Some(format!(
        "this case places the cache's blocks from element {} on and maps only them and the \
         blocks a 32-bit offset to one of them lands in, so an access outside both faults: \
         perhaps a block id taken from the wrong table entry, or an offset that wrapped some \
         other way",
        high.reach.label()
    ))
}

/// A confirmed 32-bit offset overflow on `batch`, in the case's terms, the
/// failing rows said by `rows`; `None` when nothing is placed high or no
/// context block wraps.
pub fn overflow_line(batch: &Batch, wrap: Wrap, rows: &str) -> Option<String> {
    let high = batch.high.as_ref()?;
    let (seq, place, landing) = high.first_wrapped(batch, wrap)?;
    let below = match landing < 0 {
        true => ", below the start of the cache",
        false => "",
    };
    let block_elems = high.blocks.block_elems;
    Some(format!(
        "32-bit offset overflow: block {place} of sequence {seq} read from block {landing}{below} \
         ({rows}); this case places the cache's blocks from element {} on, and block {place} \
         starts at element {}, where an offset computed in {} wraps ({}); {}",
        high.reach.label(),
        place * block_elems as i64,
        wrap.c_type(),
        wrap.how(),
        wrap.defect()
    ))
}

/// A batch's cache placed high: where each compact block sits in the
/// virtual cache, and the block table the kernel is given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HighBlocks {
    pub reach: Reach,
    /// Every compact block's place: the batch's, then the landing blocks.
    pub blocks: SparseBlocks,
    /// `blockTable` as the kernel gets it: every compact id replaced by its place.
    pub table: Vec<i32>,
}

impl HighBlocks {
    /// Places `batch`'s blocks from `reach`'s first block on, in order, and
    /// a landing block at every place a 32-bit offset into one of them wraps
    /// to; returns the placement and how many landing blocks the compact
    /// cache must add after the batch's `num_blocks`.
    ///
    /// # Panics
    /// When the layout's block is not a power of two of elements (a wrapped
    /// offset would land inside a block), or a place does not fit an `int`.
    pub fn place(batch: &Batch, reach: Reach) -> (HighBlocks, usize) {
        let block_elems = batch.layout.block_elems();
        assert!(block_elems.is_power_of_two(), "blocks of 2^k elements");
        let first = reach.first_block(block_elems);
        let end = first + batch.num_blocks as i64;
        // `wraps` holds only while a `past-2^31` cache ends below 2^32
        // elements, where an unsigned offset still fits.
        assert!(
            reach != Reach::Past2To31 || end * block_elems as i64 <= 1 << 32,
            "a past-2^31 cache ends below 2^32 elements"
        );
        let mut at: Vec<i64> = (first..end).collect();
        let mut landings: Vec<i64> = at
            .iter()
            .flat_map(|&place| Wrap::BOTH.map(|wrap| landing_block(wrap, place, block_elems)))
            .filter(|landing| !(first..end).contains(landing))
            .collect();
        landings.sort_unstable();
        landings.dedup();
        let extra = landings.len();
        at.extend(landings);
        let table = batch
            .block_table
            .iter()
            .map(|&c| i32::try_from(at[c as usize]).expect("a place fits an int"))
            .collect();
        let blocks = SparseBlocks { block_elems, at };
        (
            HighBlocks {
                reach,
                blocks,
                table,
            },
            extra,
        )
    }

    /// Whether a kernel with `wrap` offsets reads some block from elsewhere.
    pub fn wraps(&self, wrap: Wrap) -> bool {
        wrap == Wrap::Signed || self.reach == Reach::Past2To32
    }

    /// The place of compact block `block`.
    pub fn place_of(&self, block: usize) -> i64 {
        self.blocks.at[block]
    }

    /// The place a kernel with `wrap` offsets reads for compact block `block`.
    pub fn landing_of(&self, wrap: Wrap, block: usize) -> i64 {
        landing_block(wrap, self.place_of(block), self.blocks.block_elems)
    }

    /// The compact block table a kernel with `wrap` offsets reads through,
    /// given the batch's compact `table`. An entry that lands where nothing
    /// is mapped (the kernel faults there) becomes the first id past the
    /// compact cache, which a CPU model reads as NaN, as a read past a
    /// buffer's end; every case places a landing for each of its blocks.
    pub fn wrapped_table(&self, table: &[i32], wrap: Wrap) -> Vec<i32> {
        let past = self.blocks.at.len();
        let by_place = self.blocks.by_place();
        table
            .iter()
            .map(|&c| {
                let landing = self.landing_of(wrap, c as usize);
                by_place.get(&landing).copied().unwrap_or(past) as i32
            })
            .collect()
    }

    /// The first context block of `batch` a kernel with `wrap` offsets reads
    /// from elsewhere: its sequence, its place and the place read instead.
    pub fn first_wrapped(&self, batch: &Batch, wrap: Wrap) -> Option<(usize, i64, i64)> {
        (0..batch.num_seqs()).find_map(|seq| {
            (0..batch.context_blocks(seq)).find_map(|k| {
                let block = batch.block_of(seq, k * BLOCK);
                let (place, landing) = (self.place_of(block), self.landing_of(wrap, block));
                (place != landing).then_some((seq, place, landing))
            })
        })
    }
}

/// The block a `wrap` offset to the first element of block `place` lands
/// in (exact: a block of 2^k elements divides 2^32).
fn landing_block(wrap: Wrap, place: i64, block_elems: usize) -> i64 {
    let block = block_elems as i64;
    wrap.landing(place * block).div_euclid(block)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::paged::layout::CacheLayout;

    /// A batch of `blocks` blocks, its table naming them shuffled.
    fn batch(layout: CacheLayout, blocks: usize) -> Batch {
        let mut batch = Batch::from_lengths(layout, vec![40, 17], vec![3, 2], 0, false, 3, blocks);
        batch.block_table = vec![4, 0, 2, 1, 5, 3];
        batch
    }

    const FP32: CacheLayout = CacheLayout::new(64, 4);
    const FP8: CacheLayout = CacheLayout::new(128, 16);

    #[test]
    fn the_first_blocks_are_the_issues_ids() {
        // fp32 blocks of 8,192 elements, FP8 of 16,384.
        assert_eq!(Reach::Past2To31.first_block(FP32.block_elems()), 262_144);
        assert_eq!(Reach::Past2To32.first_block(FP32.block_elems()), 786_432);
        assert_eq!(Reach::Past2To31.first_block(FP8.block_elems()), 131_072);
        assert_eq!(Reach::Past2To32.first_block(FP8.block_elems()), 393_216);
    }

    #[test]
    fn a_signed_offset_past_2_to_31_lands_below_the_pointer_and_an_unsigned_one_fits() {
        let b = batch(FP8, 7);
        let (high, extra) = HighBlocks::place(&b, Reach::Past2To31);
        assert_eq!(extra, 7, "one landing per block, the unsigned reads fit");
        assert_eq!(high.place_of(0), 131_072);
        // 131,072 * 16,384 = 2^31: as an int, -2^31, which is block -131,072.
        assert_eq!(high.landing_of(Wrap::Signed, 0), -131_072);
        assert_eq!(high.landing_of(Wrap::Unsigned, 0), 131_072);
        assert_eq!(
            high.table,
            vec![131_076, 131_072, 131_074, 131_073, 131_077, 131_075]
        );
        let signed = high.wrapped_table(&b.block_table, Wrap::Signed);
        // Landings sort below the batch's blocks: landing of block c is 7 + c.
        assert_eq!(signed, vec![11, 7, 9, 8, 12, 10]);
        assert_eq!(
            high.wrapped_table(&b.block_table, Wrap::Unsigned),
            b.block_table
        );
        assert_eq!(
            high.first_wrapped(&b, Wrap::Signed),
            Some((0, 131_076, -131_068))
        );
        assert_eq!(high.first_wrapped(&b, Wrap::Unsigned), None);
    }

    #[test]
    fn past_2_to_32_a_signed_and_an_unsigned_offset_wrap_to_different_blocks() {
        let b = batch(FP32, 6);
        let (high, extra) = HighBlocks::place(&b, Reach::Past2To32);
        assert_eq!(extra, 12, "two landings per block");
        for c in 0..6 {
            // Block 786,432 + c starts at 2^32 + 2^31 + c * 8192 elements.
            assert_eq!(high.landing_of(Wrap::Signed, c), -262_144 + c as i64);
            assert_eq!(high.landing_of(Wrap::Unsigned, c), 262_144 + c as i64);
        }
        // Signed landings sort first (compact 6..12), unsigned after (12..18).
        let signed = high.wrapped_table(&b.block_table, Wrap::Signed);
        assert!(signed.iter().zip(&b.block_table).all(|(w, c)| *w == c + 6));
        let unsigned = high.wrapped_table(&b.block_table, Wrap::Unsigned);
        assert!(unsigned
            .iter()
            .zip(&b.block_table)
            .all(|(w, c)| *w == c + 12));
        // Without its landings, a wrapped read names the first id past the cache.
        let mut bare = high.clone();
        bare.blocks.at.truncate(6);
        assert_eq!(bare.wrapped_table(&[3], Wrap::Signed), vec![6]);
    }

    #[test]
    fn the_mapped_cache_costs_megabytes_and_wrapped_reads_land_on_mapped_bytes() {
        let b = batch(FP32, 70);
        let (high, extra) = HighBlocks::place(&b, Reach::Past2To31);
        let blocks = 70 + extra;
        let compact: Vec<u8> = (0..blocks * FP32.block_elems())
            .flat_map(|i| (i as f32).to_le_bytes())
            .collect();
        let mapped = high
            .blocks
            .mapped(4, &compact, &0x7FC0_0BADu32.to_le_bytes(), 2 << 20);
        assert!(
            mapped.mapped_bytes() <= 12 << 20,
            "{}",
            mapped.mapped_bytes()
        );
        // The reservation spans below the pointer to past 2^31 elements.
        assert!(mapped.reserve.start <= -(1i64 << 33) + (70 << 15));
        assert!(mapped.reserve.end >= (1i64 << 33));
        // Every place a block or its landing sits is inside a mapped extent.
        for c in 0..blocks {
            let at = high.place_of(c) * 8192 * 4;
            assert!(
                mapped.extents.iter().any(|e| e.range().contains(&at)),
                "block {c}"
            );
        }
    }
}
