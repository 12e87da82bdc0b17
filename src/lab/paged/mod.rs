//! The paged family: what the three paged labs (`paged-prefill`,
//! `paged-prefill-fp8`, `paged-decode`) are instances of. vLLM's paged KV
//! cache ([`layout`]), a prefill batch and its tensors ([`batch`]), the
//! prefill cases' recipe validated against an instance's contract
//! ([`recipe`]), the grader's memory layout in an instance's element types
//! ([`generate`]), the `.npy` schema and its loader ([`tensors`]), the
//! problem, grid and timing recipe ([`problem`]), the prefill attention in
//! float64 that is each prefill instance's oracle and bug models
//! ([`attention`]), what an output says by
//! itself ([`diagnosis`]), the misreadings no planted bug models
//! ([`misread`]), finite tags for the sentinel slots ([`tags`]), the
//! element formats ([`bf16`], [`fp8`]), and, for their tests, what every
//! instance's tests check (`testing`). Each instance keeps its contract,
//! element draw, its decoding and models' readings of the attention,
//! diagnosis and golden proof in its own folder (docs/LABS.md).

pub mod attention;
pub mod batch;
pub mod bf16;
pub mod diagnosis;
pub mod fp8;
pub mod generate;
pub mod high_blocks;
pub mod layout;
pub mod misread;
pub mod problem;
pub mod recipe;
pub mod redraw;
pub mod tags;
pub mod tensors;
#[cfg(test)]
pub mod testing;
pub mod tiled;
