//! What one timed launch's inputs get on top of the fresh draw
//! (docs/INTEGRITY.md, rule 2): the lab's hazards planted at positions
//! chosen for that launch alone, and, in a paged lab, every block id moved
//! with its contents. The timed data is then as hard as the hazard cases,
//! and no kernel can find a plant, or reuse a plan made from the block
//! table, by position.
//!
//! Pure data: the lab says what goes where ([`super::typed::TypedLab::redraw`]),
//! the worker uploads it, and `kernels/probes.cu` applies it on the GPU in the
//! same pass that draws the fresh values (and the same pass that later checks
//! the launch left its inputs alone).

use std::ops::Range;

use rand::seq::SliceRandom;
use rand::Rng;

/// One launch's plants and block move.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Redraw {
    /// Later plants win where two cover the same element.
    pub plants: Vec<Planted>,
    /// The output rows each kind of plant decides, which every audit of
    /// this launch recomputes besides its random sample.
    pub rows: Vec<PlantedRows>,
    pub blocks: Option<BlockMove>,
}

/// A span of one input set by a plant.
#[derive(Debug, Clone, PartialEq)]
pub struct Planted {
    /// The argument's name in the entry point.
    pub input: &'static str,
    /// Elements of the input (not counting guard bands), as launched.
    pub span: Range<usize>,
    pub value: PlantValue,
}

/// What a planted span holds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PlantValue {
    /// Every element these bits, in the element's own width (an FP8 byte,
    /// bf16 bits, a float's bits).
    Constant(u32),
    /// Drawn fresh, uniformly over this range (a head scaled up, say).
    /// Float and bf16 inputs only.
    Drawn { low: f32, high: f32 },
}

/// The output rows a kind of plant decides.
#[derive(Debug, Clone, PartialEq)]
pub struct PlantedRows {
    /// A word naming the plant in findings ("last-key", "overflow").
    pub kind: &'static str,
    pub rows: Vec<usize>,
}

/// Block ids renamed for one launch: block `b` of the pristine cache is
/// launched as block `map[b]`, and every block-table entry `b` reads `map[b]`.
#[derive(Debug, Clone, PartialEq)]
pub struct BlockMove {
    /// The int32 input of block ids.
    pub table: &'static str,
    /// The inputs laid out in blocks, with the elements of one block.
    pub caches: Vec<(&'static str, usize)>,
    pub map: Vec<u32>,
}

impl BlockMove {
    /// A uniformly random renaming of `blocks` ids.
    pub fn shuffled(
        table: &'static str,
        caches: Vec<(&'static str, usize)>,
        blocks: usize,
        rng: &mut impl Rng,
    ) -> BlockMove {
        let mut map: Vec<u32> = (0..blocks as u32).collect();
        map.shuffle(rng);
        BlockMove { table, caches, map }
    }

    /// For each launched block, the pristine block it holds (the inverse of `map`).
    pub fn sources(&self) -> Vec<u32> {
        let mut sources = vec![0u32; self.map.len()];
        for (pristine, &launched) in self.map.iter().enumerate() {
            sources[launched as usize] = pristine as u32;
        }
        sources
    }

    /// A block table as the launch sees it.
    pub fn moved_table(&self, table: &[i32]) -> Vec<i32> {
        table
            .iter()
            .map(
                |&id| match usize::try_from(id).ok().and_then(|i| self.map.get(i)) {
                    Some(&moved) => moved as i32,
                    None => id,
                },
            )
            .collect()
    }

    /// The elements of a block of `input`, when it is one of the moved caches.
    pub fn block_elems(&self, input: &str) -> Option<usize> {
        self.caches
            .iter()
            .find(|(name, _)| *name == input)
            .map(|&(_, elems)| elems)
    }
}

impl Redraw {
    /// Plants `value` over `span` of `input`.
    pub fn plant(&mut self, input: &'static str, span: Range<usize>, value: PlantValue) {
        if !span.is_empty() {
            self.plants.push(Planted { input, span, value });
        }
    }

    /// Plants `value` at every element of `input` listed in `indices` (in
    /// any order), as few spans as their runs make.
    pub fn plant_at(&mut self, input: &'static str, indices: &[usize], value: PlantValue) {
        let mut sorted = indices.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        let mut runs = sorted.chunk_by(|a, b| a + 1 == *b);
        for run in runs.by_ref() {
            self.plant(input, run[0]..run[run.len() - 1] + 1, value);
        }
    }

    /// Records that plants of `kind` decide output `row`.
    pub fn decides(&mut self, kind: &'static str, row: usize) {
        match self.rows.iter_mut().find(|r| r.kind == kind) {
            Some(rows) => rows.rows.push(row),
            None => self.rows.push(PlantedRows {
                kind,
                rows: vec![row],
            }),
        }
    }

    /// The spans planted in `input`, sorted and never overlapping: where two
    /// plants cover an element, the later one's value. One sweep over the
    /// spans' ends (a scaled head is thousands of spans, every launch).
    pub fn spans_of(&self, input: &str) -> Vec<Planted> {
        let plants: Vec<&Planted> = self.plants.iter().filter(|p| p.input == input).collect();
        let mut bounds: Vec<usize> = plants
            .iter()
            .flat_map(|p| [p.span.start, p.span.end])
            .collect();
        bounds.sort_unstable();
        bounds.dedup();
        let mut by_start: Vec<usize> = (0..plants.len()).collect();
        by_start.sort_by_key(|&i| plants[i].span.start);
        let mut next = by_start.into_iter().peekable();
        // Plants covering the current piece, the latest on top; ended ones
        // are dropped when they reach the top.
        let mut covering = std::collections::BinaryHeap::new();
        let mut laid: Vec<Planted> = Vec::new();
        for piece in bounds.windows(2) {
            let (start, end) = (piece[0], piece[1]);
            while let Some(i) = next.next_if(|&i| plants[i].span.start <= start) {
                covering.push(i);
            }
            while covering
                .peek()
                .is_some_and(|&i| plants[i].span.end <= start)
            {
                covering.pop();
            }
            let Some(&winner) = covering.peek() else {
                continue;
            };
            let value = plants[winner].value;
            match laid.last_mut() {
                Some(last) if last.span.end == start && last.value == value => last.span.end = end,
                _ => laid.push(Planted {
                    input: plants[winner].input,
                    span: start..end,
                    value,
                }),
            }
        }
        laid
    }

    /// Every planted output row, ascending, once.
    pub fn planted_rows(&self) -> Vec<usize> {
        let mut rows: Vec<usize> = self.rows.iter().flat_map(|r| r.rows.clone()).collect();
        rows.sort_unstable();
        rows.dedup();
        rows
    }

    /// The kind of plant that decides `row`, if any (the first recorded).
    pub fn kind_of(&self, row: usize) -> Option<&'static str> {
        self.rows
            .iter()
            .find(|r| r.rows.contains(&row))
            .map(|r| r.kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    const FOUR: PlantValue = PlantValue::Constant(0x4080_0000);
    const EIGHT: PlantValue = PlantValue::Drawn {
        low: -8.0,
        high: 8.0,
    };

    /// The spans laid out in `k`, each with its value.
    fn k_spans(redraw: &Redraw) -> Vec<(Range<usize>, PlantValue)> {
        redraw
            .spans_of("k")
            .into_iter()
            .map(|p| (p.span, p.value))
            .collect()
    }

    #[test]
    fn a_later_plant_wins_where_two_overlap_and_the_spans_come_out_sorted() {
        let mut redraw = Redraw::default();
        redraw.plant("k", 10..20, FOUR);
        redraw.plant("q", 0..4, FOUR);
        redraw.plant("k", 0..5, FOUR);
        redraw.plant("k", 15..30, EIGHT);
        let spans = k_spans(&redraw);
        assert_eq!(spans, vec![(0..5, FOUR), (10..15, FOUR), (15..30, EIGHT)]);
        // A plant inside an earlier one splits it in two.
        redraw.plant("k", 20..22, FOUR);
        let spans = k_spans(&redraw);
        assert_eq!(
            spans,
            vec![
                (0..5, FOUR),
                (10..15, FOUR),
                (15..20, EIGHT),
                (20..22, FOUR),
                (22..30, EIGHT)
            ]
        );
        assert_eq!(redraw.spans_of("v"), Vec::new());
    }

    #[test]
    fn ten_thousand_spans_of_a_scaled_head_lay_out_as_they_are() {
        let mut redraw = Redraw::default();
        for row in (0..10_000).rev() {
            redraw.plant("q", row * 256..row * 256 + 64, EIGHT);
        }
        redraw.plant("q", 64..128, FOUR);
        let spans = redraw.spans_of("q");
        assert_eq!(spans.len(), 10_001);
        assert_eq!(
            (spans[0].span.clone(), spans[1].span.clone()),
            (0..64, 64..128)
        );
        assert_eq!(spans[1].value, FOUR);
    }

    #[test]
    fn scattered_indices_are_planted_as_their_runs() {
        let mut redraw = Redraw::default();
        redraw.plant_at("kCache", &[9, 3, 4, 5, 10, 20, 4], FOUR);
        let spans: Vec<Range<usize>> = redraw.plants.iter().map(|p| p.span.clone()).collect();
        assert_eq!(spans, vec![3..6, 9..11, 20..21]);
    }

    #[test]
    fn planted_rows_are_listed_once_with_their_kind() {
        let mut redraw = Redraw::default();
        redraw.decides("last-key", 7);
        redraw.decides("overflow", 3);
        redraw.decides("last-key", 3);
        assert_eq!(redraw.planted_rows(), vec![3, 7]);
        assert_eq!(redraw.kind_of(7), Some("last-key"));
        assert_eq!(redraw.kind_of(3), Some("last-key"));
        assert_eq!(redraw.kind_of(4), None);
    }

    #[test]
    fn a_block_move_renames_table_entries_and_knows_where_each_block_came_from() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let moved = BlockMove::shuffled("blockTable", vec![("kCache", 64)], 50, &mut rng);
        let mut seen = moved.map.clone();
        seen.sort_unstable();
        assert_eq!(seen, (0..50).collect::<Vec<u32>>(), "a permutation");
        let sources = moved.sources();
        for (pristine, &launched) in moved.map.iter().enumerate() {
            assert_eq!(sources[launched as usize] as usize, pristine);
        }
        let table = [0, 49, 7, -1];
        let launched = moved.moved_table(&table);
        assert_eq!(
            launched[..3],
            [
                moved.map[0] as i32,
                moved.map[49] as i32,
                moved.map[7] as i32
            ]
        );
        assert_eq!(launched[3], -1, "an entry that is no block id stays");
        assert_eq!(moved.block_elems("kCache"), Some(64));
        assert_eq!(moved.block_elems("vCache"), None);
    }
}
