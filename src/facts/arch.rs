//! What the driver does not report about a GPU architecture: per-SM
//! arithmetic rates and allocation granularities, by compute capability,
//! and for each a typical set of the driver's SM attributes (used to place
//! a compile on an SM when no GPU is present, and in tests).
//!
//! Rates are NVIDIA's published per-SM figures (architecture whitepapers
//! and the CUDA programming guide's throughput table); granularities those
//! of NVIDIA's occupancy calculator.

use serde::{Deserialize, Serialize};

/// The SM attributes `cuDeviceGetAttribute` reports, as the driver gives them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SmAttributes {
    /// `CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR`
    pub registers_per_sm: u32,
    /// `CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK`
    pub registers_per_block: u32,
    /// `CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR`
    pub smem_per_sm_bytes: u32,
    /// `CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN`
    pub smem_per_block_optin_bytes: u32,
    /// `CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK`
    pub smem_reserved_per_block_bytes: u32,
    /// `CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR`
    pub threads_per_sm: u32,
    /// `CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR`
    pub blocks_per_sm: u32,
    /// `CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK`
    pub threads_per_block: u32,
    /// `CU_DEVICE_ATTRIBUTE_WARP_SIZE`
    pub warp_size: u32,
}

/// Per-SM facts of one compute capability that no attribute gives.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ArchTraits {
    pub compute_capability: (i32, i32),
    /// A GPU of this capability, for messages and tests.
    pub example: &'static str,
    /// FP32 lanes (FMA per clock) per SM.
    pub fp32_lanes_per_sm: u32,
    /// Dense TF32 tensor-core FLOP per clock per SM; `None` without TF32.
    pub tf32_flops_per_clock_per_sm: Option<u32>,
    /// Dense BF16 tensor-core FLOP per clock per SM with FP32 accumulate
    /// (what `mma.sync ... .f32.bf16.bf16.f32` runs at), as the example
    /// GPU's datasheet gives it; `None` without BF16 tensor cores (Volta
    /// and Turing have FP16 ones only). One capability can cover parts at
    /// two rates: GeForce Ampere, Ada and Blackwell parts (and the L40) run
    /// FP32 accumulate at half the rate of their datacenter siblings (the
    /// A40, the L4, the L40S). This figure is then only the fallback for a
    /// GPU whose benchmark did not run; the benchmark decides.
    pub bf16_flops_per_clock_per_sm: Option<u32>,
    /// Dense tensor-core operations per clock per SM of the fastest data
    /// type the capability has (FP8 on Hopper and Ada, INT4 on Turing and
    /// Ampere, FP4 on Blackwell; FP16 on Volta), from the example GPU's
    /// datasheet and rounded up: an upper bound no kernel's flops can beat,
    /// which the physical floor of a timing needs (docs/INTEGRITY.md).
    pub fastest_dense_ops_per_clock_per_sm: u32,
    /// Registers are handed to warps in multiples of this.
    pub register_granularity_per_warp: u32,
    /// Shared memory is handed to blocks in multiples of this.
    pub smem_granularity_bytes: u32,
    /// What the driver reports for a GPU of this capability.
    pub typical: SmAttributes,
}

const fn attributes(
    smem_per_sm_kib: u32,
    smem_per_block_kib: u32,
    reserved: u32,
    threads_per_sm: u32,
    blocks_per_sm: u32,
) -> SmAttributes {
    SmAttributes {
        registers_per_sm: 65536,
        registers_per_block: 65536,
        smem_per_sm_bytes: smem_per_sm_kib * 1024,
        smem_per_block_optin_bytes: smem_per_block_kib * 1024,
        smem_reserved_per_block_bytes: reserved,
        threads_per_sm,
        blocks_per_sm,
        threads_per_block: 1024,
        warp_size: 32,
    }
}

/// Known capabilities, oldest first.
const TABLE: &[ArchTraits] = &[
    ArchTraits {
        compute_capability: (7, 0),
        example: "V100",
        fp32_lanes_per_sm: 64,
        tf32_flops_per_clock_per_sm: None,
        bf16_flops_per_clock_per_sm: None,
        fastest_dense_ops_per_clock_per_sm: 1024,
        register_granularity_per_warp: 256,
        smem_granularity_bytes: 256,
        typical: attributes(96, 96, 0, 2048, 32),
    },
    ArchTraits {
        compute_capability: (7, 5),
        example: "T4",
        fp32_lanes_per_sm: 64,
        tf32_flops_per_clock_per_sm: None,
        bf16_flops_per_clock_per_sm: None,
        fastest_dense_ops_per_clock_per_sm: 4096,
        register_granularity_per_warp: 256,
        smem_granularity_bytes: 256,
        typical: attributes(64, 64, 0, 1024, 16),
    },
    ArchTraits {
        compute_capability: (8, 0),
        example: "A100",
        fp32_lanes_per_sm: 64,
        tf32_flops_per_clock_per_sm: Some(1024),
        bf16_flops_per_clock_per_sm: Some(2048),
        fastest_dense_ops_per_clock_per_sm: 8192,
        register_granularity_per_warp: 256,
        smem_granularity_bytes: 128,
        typical: attributes(164, 163, 1024, 2048, 32),
    },
    ArchTraits {
        compute_capability: (8, 6),
        example: "RTX 3090",
        fp32_lanes_per_sm: 128,
        tf32_flops_per_clock_per_sm: Some(256),
        bf16_flops_per_clock_per_sm: Some(512),
        fastest_dense_ops_per_clock_per_sm: 4096,
        register_granularity_per_warp: 256,
        smem_granularity_bytes: 128,
        typical: attributes(100, 99, 1024, 1536, 16),
    },
    ArchTraits {
        compute_capability: (8, 9),
        example: "L4",
        fp32_lanes_per_sm: 128,
        tf32_flops_per_clock_per_sm: Some(512),
        bf16_flops_per_clock_per_sm: Some(1024),
        fastest_dense_ops_per_clock_per_sm: 4096,
        register_granularity_per_warp: 256,
        smem_granularity_bytes: 128,
        typical: attributes(100, 99, 1024, 1536, 24),
    },
    ArchTraits {
        compute_capability: (9, 0),
        example: "H200",
        fp32_lanes_per_sm: 128,
        tf32_flops_per_clock_per_sm: Some(2048),
        bf16_flops_per_clock_per_sm: Some(4096),
        fastest_dense_ops_per_clock_per_sm: 8192,
        register_granularity_per_warp: 256,
        smem_granularity_bytes: 128,
        typical: attributes(228, 227, 1024, 2048, 32),
    },
    ArchTraits {
        compute_capability: (10, 0),
        example: "B200",
        fp32_lanes_per_sm: 128,
        tf32_flops_per_clock_per_sm: Some(4096),
        bf16_flops_per_clock_per_sm: Some(8192),
        fastest_dense_ops_per_clock_per_sm: 32768,
        register_granularity_per_warp: 256,
        smem_granularity_bytes: 128,
        typical: attributes(228, 227, 1024, 2048, 32),
    },
    ArchTraits {
        compute_capability: (12, 0),
        example: "RTX 5090",
        fp32_lanes_per_sm: 128,
        tf32_flops_per_clock_per_sm: Some(256),
        bf16_flops_per_clock_per_sm: Some(512),
        fastest_dense_ops_per_clock_per_sm: 8192,
        register_granularity_per_warp: 256,
        smem_granularity_bytes: 128,
        typical: attributes(100, 99, 1024, 1536, 32),
    },
];

/// The traits of `compute_capability`: its own row, else the newest known
/// row at or below it (a minor revision keeps its family's rates), else the
/// oldest row.
pub fn traits(compute_capability: (i32, i32)) -> &'static ArchTraits {
    TABLE
        .iter()
        .rev()
        .find(|row| row.compute_capability <= compute_capability)
        .unwrap_or(&TABLE[0])
}

/// `sm_90` -> (9, 0), `sm_90a` too; `None` for anything else: `sm_` and two
/// or three digits with at most one feature suffix is all a real
/// architecture is, and all a caller may name (the worker builds for it).
pub fn parse_arch(arch: &str) -> Option<(i32, i32)> {
    let rest = arch.strip_prefix("sm_")?;
    let digits = rest.strip_suffix(['a', 'f']).unwrap_or(rest);
    if !(2..=3).contains(&digits.len()) || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (major, minor) = digits.split_at(digits.len() - 1);
    Some((major.parse().ok()?, minor.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_real_architectures_parse() {
        assert_eq!(parse_arch("sm_90"), Some((9, 0)));
        assert_eq!(parse_arch("sm_90a"), Some((9, 0)));
        assert_eq!(parse_arch("sm_100f"), Some((10, 0)));
        for refused in [
            "sm_9",
            "sm_-10",
            "sm_+90",
            "sm_90af",
            "sm_1000",
            "compute_90",
            "sm_90; touch /tmp/x",
            "",
        ] {
            assert_eq!(parse_arch(refused), None, "{refused}");
        }
    }

    #[test]
    fn each_known_capability_finds_its_own_row() {
        for row in TABLE {
            assert_eq!(traits(row.compute_capability), row);
        }
        assert!(TABLE
            .windows(2)
            .all(|w| w[0].compute_capability < w[1].compute_capability));
    }

    #[test]
    fn an_unlisted_capability_takes_its_family_row() {
        // Orin (8.7) shares consumer Ampere's row; a future 9.x keeps Hopper's.
        assert_eq!(traits((8, 7)).example, "RTX 3090");
        assert_eq!(traits((9, 5)).example, "H200");
        assert_eq!(traits((6, 1)).example, "V100");
    }

    #[test]
    fn architecture_names_parse() {
        assert_eq!(parse_arch("sm_90"), Some((9, 0)));
        assert_eq!(parse_arch("sm_90a"), Some((9, 0)));
        assert_eq!(parse_arch("sm_120"), Some((12, 0)));
        assert_eq!(parse_arch("sm_7"), None);
        assert_eq!(parse_arch("compute_90"), None);
    }
}
