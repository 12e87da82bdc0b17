//! The lab itself, with no GPU and no screen: the tensor contract, launch
//! geometry, student source files and the hazard cases.

pub mod cases;
pub mod contract;
pub mod geometry;
pub mod npy;
pub mod paged;
pub mod source;
