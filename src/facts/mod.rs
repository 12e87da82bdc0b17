//! Facts about GPUs and compiled kernels, as plain data: the compiler's
//! diagnostics, ptxas's resource report and occupancy, hardware-counter names
//! and values, the device a worker found, what a kernel keeps between
//! launches. The GPU runner produces them, the protocol carries them and the
//! screens show them; keeping them here, with no unsafe code and no NVIDIA
//! library, lets those layers share the types without depending on each
//! other.

pub mod arch;
pub mod device;
pub mod diagnostics;
pub mod kept_state;
pub mod metrics;
pub mod resources;

/// Bytes as `B`, `KiB`, `MiB` or `GiB`, whichever reads best: the one size
/// format of the reports and screens.
pub fn byte_size(n: impl Into<u64>) -> String {
    const KIB: u64 = 1 << 10;
    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;
    let n = n.into();
    // Shown to one decimal, so the casts' rounding (above 2^53 bytes) never shows.
    match n {
        0..KIB => format!("{n} B"),
        KIB..MIB => format!("{:.1} KiB", n as f64 / KIB as f64),
        MIB..GIB => format!("{:.1} MiB", n as f64 / MIB as f64),
        _ => format!("{:.1} GiB", n as f64 / GIB as f64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_in_the_largest_unit_that_fits() {
        assert_eq!(byte_size(4u32), "4 B");
        assert_eq!(byte_size(1023u32), "1023 B");
        assert_eq!(byte_size(2048u32), "2.0 KiB");
        assert_eq!(byte_size(16u64 << 20), "16.0 MiB");
        assert_eq!(byte_size(3u64 << 30), "3.0 GiB");
    }
}
