//! How the engine sees a paged lab's launch: the problem a prefill batch
//! poses, the grid a prefill kernel gets, the oracle's rows, and a case
//! that is either a recipe of the cases file or the contract's timing batch.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::batch::Batch;
use super::layout::{GROUP, HKV, HQ};
use super::recipe::{CacheType, PrefillContract};
use crate::grade::compare::{rows_of, OutputShape};
use crate::grade::roofline::{TensorRoof, Work};
use crate::lab::definition::{CaseError, Problem};
use crate::lab::geometry::LaunchGeometry;
use crate::lab::typed;

/// A case of a lab whose timing batch no cases file spells out (its block
/// table comes from the seed): a recipe of the cases file, or that batch.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Timed<S> {
    Timing {
        timing_shape: String,
        summary: String,
    },
    Case(S),
}

impl<S: typed::Recipe> typed::Recipe for Timed<S> {
    fn name(&self) -> &str {
        match self {
            Timed::Timing { .. } => "timing",
            Timed::Case(spec) => spec.name(),
        }
    }
    fn summary(&self) -> &str {
        match self {
            Timed::Timing { summary, .. } => summary,
            Timed::Case(spec) => spec.summary(),
        }
    }
    fn own_tensors(&self) -> Option<&Path> {
        match self {
            Timed::Timing { .. } => None,
            Timed::Case(spec) => spec.own_tensors(),
        }
    }
}

impl<S> Timed<S> {
    /// The timing batch `shape` of lab `lab`, which takes no keys, its size
    /// said by `detail`.
    pub fn timing(
        lab: &str,
        shape: &str,
        overrides: &[(String, String)],
        detail: String,
    ) -> Result<Self, String> {
        fixed_timing_shape(lab, overrides)?;
        Ok(Timed::Timing {
            timing_shape: shape.into(),
            summary: format!("the timing shape, {detail}"),
        })
    }

    /// That a timing case names `shape`, the one this lab has.
    pub fn check_timing_shape(timing_shape: &str, shape: &str) -> Result<(), CaseError> {
        match timing_shape == shape {
            true => Ok(()),
            false => Err(CaseError::Invalid {
                case: "timing".into(),
                message: format!("unknown timing shape `{timing_shape}` (this lab has `{shape}`)"),
            }),
        }
    }
}

/// That `overrides` name no key: a paged lab's timing shape is its
/// contract's fixed batch.
pub fn fixed_timing_shape(lab: &str, overrides: &[(String, String)]) -> Result<(), String> {
    match overrides.first() {
        Some((key, _)) => Err(format!(
            "the {lab} lab's timing shape is the contract's fixed batch; it has no key `{key}`"
        )),
        None => Ok(()),
    }
}

/// The grid of a paged prefill launch: one block per (sequence, `grid_y`
/// unit, `rows_per_block` new tokens).
pub fn prefill_grid(geometry: &LaunchGeometry, problem: &Problem) -> (u32, u32, u32) {
    let x = problem.sequence_starts.len().max(1) as u32;
    let y = geometry.grid_y.blocks(HQ, HKV);
    let z = problem
        .max_sequence_rows
        .div_ceil(geometry.rows_per_block as usize)
        .max(1) as u32;
    (x, y, z)
}

/// The oracle's answer for `rows` one after another, from an answer `full`
/// over every row (each `row_len` long); all of it when `rows` is `None`.
pub fn listed_rows(full: Vec<f64>, rows: Option<&[usize]>, row_len: usize) -> Vec<f64> {
    match rows {
        None => full,
        Some(rows) => rows_of(&full, rows, row_len),
    }
}

impl PrefillContract {
    /// The engine's view of a batch of this instance: its size, and the
    /// work it makes at the instance's element sizes.
    pub fn problem(&self, batch: &Batch) -> Problem {
        let (activation_bytes, cache_bytes, tensor_roof) = match self.cache {
            CacheType::F32 => (4, 4, None),
            // The products take bf16 operands (the FP8 cache dequantised to
            // bf16): the BF16 tensor roof is the instance's compute roof.
            CacheType::Fp8 => (2, 1, Some(TensorRoof::Bf16)),
        };
        prefill_problem(
            batch,
            Work {
                flops: batch.flops(),
                compulsory_bytes: batch.compulsory_bytes(activation_bytes, cache_bytes),
                output_bytes: (batch.q_elems() * activation_bytes) as u64,
                tensor_roof,
            },
        )
    }
}

/// The engine's view of a prefill batch doing `work`.
fn prefill_problem(batch: &Batch, work: Work) -> Problem {
    let rows = batch.total_new();
    let seqs = batch.num_seqs();
    let longest = batch.context.iter().max().copied().unwrap_or(0);
    let mut detail = format!("{seqs} sequences, {rows} new tokens, contexts up to {longest}");
    if let Some(window) = batch.window() {
        detail.push_str(&format!(", window {window}"));
    }
    if batch.alibi {
        detail.push_str(", ALiBi");
    }
    Problem {
        label: format!("{seqs}s/{rows}t"),
        detail,
        row_hint: "rows are new tokens, sequence after sequence".into(),
        output: OutputShape {
            rows,
            heads: HQ,
            dim: batch.layout.dim,
        },
        head_group: GROUP,
        sequence_starts: (0..seqs).map(|s| batch.start(s)).collect(),
        max_sequence_rows: batch.new.iter().max().copied().unwrap_or(0),
        work,
    }
}
