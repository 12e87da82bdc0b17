//! What the three paged labs (`paged-prefill`, `paged-prefill-fp8`,
//! `paged-decode`) share: vLLM's paged KV cache ([`layout`]: heads, blocks,
//! the x-packed K and the V layouts, block tables, ALiBi slopes) and the
//! misreadings of that cache no planted bug models, which the prefill labs'
//! diagnoses try ([`misread`]); and, for their tests, the engine's reading
//! of one output (`testing`). Each lab's own knowledge (its sequences,
//! element types, tolerance, bugs) stays in its folder.

pub mod batch;
pub mod bf16;
pub mod diagnosis;
pub mod fp8;
pub mod generate;
pub mod layout;
pub mod misread;
pub mod problem;
pub mod recipe;
pub mod tensors;
#[cfg(test)]
pub mod testing;
