//! CPU models of the planted bugs in `kernels/flash-prefill/bugs/` whose effect is on the
//! values (the others crash, hang, race or write where they must not, which
//! the runner observes without a model).
//!
//! Each model runs the starter's per-row online softmax in `f32`, one key at
//! a time, with the bug's defect; what the bug reads past a buffer's end is
//! the value given for the guard bands (NaN, as on the GPU, or a finite
//! value, as in the runner's guard experiment). The diagnosis *replays* a
//! suspect's model on a few failing rows: a model that reproduces the
//! kernel's output there names the cause with certainty. The verdict tests
//! grade each model's whole output on every shipped case and check that the
//! check's one line names the bug.

use super::contract::{Shape, DH, GROUP, HQ, TOLERANCE};
use crate::grade::compare::TILE_ROWS;
use crate::lab::evidence::{self, Element, Replay, Written};

/// A planted value bug of the flash-prefill lab, named as its kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlashBug {
    /// `j < pos`: each row misses its own key.
    CausalOffByOne,
    /// The accumulators are not multiplied by alpha when the max moves.
    MissingAccRescale,
    /// `l` is not multiplied by alpha when the max moves.
    MissingLRescale,
    /// `expf(s)` with no running max.
    NoMaxSubtraction,
    /// Keys in pairs, the last pair's second key loaded past the end and weighted 0.
    OobRead,
    /// Blocks of a partial last row tile return early.
    RowsNeverWritten,
    /// The key-tile count rounds down, dropping each block's last partial key tile.
    TileEdge,
}

impl FlashBug {
    #[cfg(test)]
    pub const ALL: [FlashBug; 7] = [
        FlashBug::CausalOffByOne,
        FlashBug::MissingAccRescale,
        FlashBug::MissingLRescale,
        FlashBug::NoMaxSubtraction,
        FlashBug::OobRead,
        FlashBug::RowsNeverWritten,
        FlashBug::TileEdge,
    ];

    /// The planted kernel's file name, without `.cu`.
    pub fn name(self) -> &'static str {
        match self {
            FlashBug::CausalOffByOne => "causal-off-by-one",
            FlashBug::MissingAccRescale => "missing-acc-rescale",
            FlashBug::MissingLRescale => "missing-l-rescale",
            FlashBug::NoMaxSubtraction => "no-max-subtraction",
            FlashBug::OobRead => "oob-read",
            FlashBug::RowsNeverWritten => "rows-never-written",
            FlashBug::TileEdge => "tile-edge",
        }
    }
}

/// A case's input tensors: `q`, `kCache`, `vCache`.
pub type Tensors<'a> = (&'a [f32], &'a [f32], &'a [f32]);

/// What the kernel with `bug` writes into row `row` of `out` (every head),
/// or `None` when it never writes the row; `guard` is what a read past the
/// end of `vCache` returns.
pub fn row_output(
    shape: Shape,
    (q, k, v): Tensors<'_>,
    bug: FlashBug,
    guard: f32,
    row: usize,
) -> Option<Vec<f32>> {
    let (c, p) = (shape.chunk_len, shape.prefix_len);
    if bug == FlashBug::RowsNeverWritten && row >= c / TILE_ROWS * TILE_ROWS {
        return None;
    }
    let keys = keys_seen(shape, bug, row);
    let mut out = vec![0.0f32; HQ * DH];
    for (head, out_head) in out.chunks_exact_mut(DH).enumerate() {
        let g = head / GROUP;
        let query = &q[Shape::q_index(row, head, 0)..][..DH];
        let (mut m, mut l) = (f32::NEG_INFINITY, 0.0f32);
        let mut acc = [0.0f32; DH];
        for j in 0..keys {
            let key = &k[Shape::kv_index(j, g, 0)..][..DH];
            let value = &v[Shape::kv_index(j, g, 0)..][..DH];
            let s = query.iter().zip(key).map(|(a, b)| a * b).sum::<f32>() * 0.125;
            let (alpha, weight) = if bug == FlashBug::NoMaxSubtraction {
                (1.0, s.exp())
            } else {
                let m_new = m.max(s);
                let alpha = (m - m_new).exp();
                m = m_new;
                (alpha, (s - m_new).exp())
            };
            l = if bug == FlashBug::MissingLRescale {
                l + weight
            } else {
                alpha * l + weight
            };
            let keep = if bug == FlashBug::MissingAccRescale {
                1.0
            } else {
                alpha
            };
            for (a, x) in acc.iter_mut().zip(value) {
                *a = keep * *a + weight * x;
            }
        }
        if bug == FlashBug::OobRead && row + 1 == c && (p + c) % 2 == 1 {
            // The masked second key of the last pair, loaded from past the end.
            for a in &mut acc {
                *a += 0.0 * guard;
            }
        }
        for (o, a) in out_head.iter_mut().zip(acc) {
            *o = a / l;
        }
    }
    Some(out)
}

/// How many keys (from key 0) row `row` attends to in the kernel with `bug`.
pub fn keys_seen(shape: Shape, bug: FlashBug, row: usize) -> usize {
    let (c, p) = (shape.chunk_len, shape.prefix_len);
    let pos = p + row;
    let keys = if bug == FlashBug::CausalOffByOne {
        pos
    } else {
        pos + 1
    };
    if bug != FlashBug::TileEdge {
        return keys;
    }
    let first_row = row / TILE_ROWS * TILE_ROWS;
    let last_key = p + (first_row + TILE_ROWS).min(c) - 1;
    keys.min((last_key + 1) / TILE_ROWS * TILE_ROWS)
}

/// Whether `bug`'s model reproduces `out` on `rows` (every head), by
/// [`evidence::replay`]: within the lab's tolerance where the model is
/// finite, and naming some element that fails `reference`.
pub fn replay_matches(
    shape: Shape,
    tensors: Tensors<'_>,
    bug: FlashBug,
    out: &[f32],
    reference: &[f64],
    rows: &[usize],
) -> bool {
    let within = |got: f64, want: f64| (got - want).abs() <= TOLERANCE.allowed(want);
    let mut elements = Vec::with_capacity(rows.len() * HQ * DH);
    for &row in rows {
        let Some(model) = row_output(shape, tensors, bug, f32::NAN, row) else {
            return false;
        };
        let start = Shape::q_index(row, 0, 0);
        elements.extend(model.iter().enumerate().map(|(k, &m)| {
            let at = start + k;
            Element {
                at,
                got: Written::from_output(out[at]),
                model: Written::Value(f64::from(m)),
                failing: !within(f64::from(out[at]), reference[at]),
            }
        }));
    }
    evidence::replay(elements, |_, got, want| within(got, want)) == Replay::Reproduces
}

/// The whole output of the kernel with `bug`; `start` is what `out` held before.
#[cfg(test)]
pub fn model(
    shape: Shape,
    tensors: Tensors<'_>,
    bug: FlashBug,
    guard: f32,
    start: f32,
) -> Vec<f32> {
    use rayon::prelude::*;
    let mut out = vec![start; shape.q_elems()];
    out.par_chunks_mut(HQ * DH)
        .enumerate()
        .for_each(|(row, slot)| {
            if let Some(values) = row_output(shape, tensors, bug, guard, row) {
                slot.copy_from_slice(&values);
            }
        });
    out
}

/// The model of one bug as the experiments' kernel.
#[cfg(test)]
pub struct ModelKernel(pub FlashBug);

#[cfg(test)]
impl crate::lab::experiment::Rerun for ModelKernel {
    type Error = std::convert::Infallible;

    fn rerun(
        &mut self,
        data: &crate::lab::definition::CaseData,
        conditions: &crate::lab::experiment::Conditions,
    ) -> Result<Vec<f32>, Self::Error> {
        let inputs = crate::lab::typed::inputs_of::<super::FlashPrefill>(data);
        // vCache is argument 2; only its end is ever read past.
        let finite_end = conditions
            .finite_guards
            .iter()
            .any(|&(i, side)| i == 2 && side != crate::grade::experiment::GuardSide::Before);
        let guard = if finite_end { 0.0 } else { f32::NAN };
        Ok(model(
            inputs.shape,
            (&inputs.q, &inputs.k, &inputs.v),
            self.0,
            guard,
            f32::from_bits(conditions.output_start),
        ))
    }
}
