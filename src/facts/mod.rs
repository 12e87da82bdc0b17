//! Facts about GPUs and compiled kernels, as plain data: the compiler's
//! diagnostics, ptxas's resource report and occupancy, hardware-counter names
//! and values, the device a worker found. The GPU runner produces them, the
//! protocol carries them and the screens show them; keeping them here, with
//! no unsafe code and no NVIDIA library, lets those layers share the types
//! without depending on each other.

pub mod arch;
pub mod device;
pub mod diagnostics;
pub mod metrics;
pub mod resources;
