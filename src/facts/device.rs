//! The GPU a worker found, or why it found none.

use serde::{Deserialize, Serialize};

use super::arch::{self, SmAttributes};
use super::resources::SmLimits;
use crate::grade::roofline::{DevicePeaks, PeakSource, Roof};

/// The GPU a worker runs on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceInfo {
    pub ordinal: usize,
    pub name: String,
    pub compute_capability: (i32, i32),
    pub sm_count: i32,
    pub l2_bytes: i32,
    pub max_sm_clock_mhz: f64,
    pub memory_bytes: usize,
    pub driver_version: i32,
    /// The SM limits the driver reports; absent in reports saved before
    /// flashprof read them.
    #[serde(default)]
    pub sm_attributes: Option<SmAttributes>,
    /// `CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE`, MHz; 0 when unknown.
    #[serde(default)]
    pub memory_clock_mhz: f64,
    /// `CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH`, bits; 0 when unknown.
    #[serde(default)]
    pub memory_bus_bits: i32,
    /// The GPU's UUID in hex (what its measured peaks are cached under);
    /// empty in older reports.
    #[serde(default)]
    pub uuid: String,
}

impl DeviceInfo {
    /// The SM limits of this GPU: the driver's, or a typical GPU of its
    /// capability in a report saved without them.
    pub fn sm_limits(&self) -> SmLimits {
        match &self.sm_attributes {
            Some(attributes) => SmLimits::from_attributes(attributes, self.compute_capability),
            None => SmLimits::typical(self.compute_capability),
        }
    }

    /// Peaks from the attributes: SM count x boost clock x the
    /// architecture's per-SM rates, and the memory's double data rate x
    /// bus width. What the datasheet says, not what a kernel reaches.
    pub fn attribute_peaks(&self) -> DevicePeaks {
        let traits = arch::traits(self.compute_capability);
        let sm_clocks_per_s = f64::from(self.sm_count) * self.max_sm_clock_mhz * 1e6;
        let roof = |per_s| Roof {
            per_s,
            source: PeakSource::Attributes,
            pipe_pct_at_peak: None,
        };
        DevicePeaks {
            name: self.name.clone(),
            fp32_flops: roof(sm_clocks_per_s * f64::from(traits.fp32_lanes_per_sm) * 2.0),
            tf32_flops: traits
                .tf32_flops_per_clock_per_sm
                .map(|flops| roof(sm_clocks_per_s * f64::from(flops))),
            bf16_flops: traits
                .bf16_flops_per_clock_per_sm
                .map(|flops| roof(sm_clocks_per_s * f64::from(flops))),
            dram_bytes: roof(
                2.0 * self.memory_clock_mhz * 1e6 * f64::from(self.memory_bus_bits) / 8.0,
            ),
        }
    }

    /// The NVRTC target for this GPU, e.g. `sm_90`.
    pub fn arch(&self) -> String {
        format!(
            "sm_{}{}",
            self.compute_capability.0, self.compute_capability.1
        )
    }
}

/// Why there is no usable GPU, with what still works.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum GpuProblem {
    /// `libcuda.so` could not be loaded.
    NoDriver { detail: String },
    /// The driver loaded but reported no CUDA device.
    NoDevice { detail: String },
    /// The driver refused to start (version mismatch, device busy, ...).
    DriverError { detail: String },
}

impl GpuProblem {
    pub fn describe(&self) -> String {
        match self {
            GpuProblem::NoDriver { detail } => format!(
                "no NVIDIA driver: {detail}. Compilation still works; cases and timing need a GPU."
            ),
            GpuProblem::NoDevice { detail } => format!(
                "no CUDA GPU found: {detail}. Compilation still works; cases and timing need a GPU."
            ),
            GpuProblem::DriverError { detail } => {
                format!("the CUDA driver failed to start: {detail}")
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// What the driver reports on the project's H200 (sm_90, 132 SMs).
    pub(crate) fn h200() -> DeviceInfo {
        DeviceInfo {
            ordinal: 0,
            name: "NVIDIA H200".into(),
            compute_capability: (9, 0),
            sm_count: 132,
            l2_bytes: 60 * 1024 * 1024,
            max_sm_clock_mhz: 1980.0,
            memory_bytes: 150_000_000_000,
            driver_version: 13000,
            sm_attributes: Some(arch::traits((9, 0)).typical),
            memory_clock_mhz: 3201.0,
            memory_bus_bits: 6144,
            uuid: String::new(),
        }
    }

    #[test]
    fn attribute_peaks_multiply_out_the_datasheet() {
        let peaks = h200().attribute_peaks();
        assert!((peaks.fp32_flops.per_s / 1e12 - 66.9).abs() < 0.05);
        let tf32 = peaks.tf32_flops.expect("Hopper has TF32").per_s;
        assert!((tf32 / 1e12 - 535.2).abs() < 0.1);
        // 2 x 3.201 GHz x 768 bytes = 4.92 TB/s (the datasheet says 4.8).
        assert!((peaks.dram_bytes.per_s / 1e12 - 4.917).abs() < 0.001);
        assert_eq!(peaks.fp32_flops.source, PeakSource::Attributes);
    }

    #[test]
    fn each_generation_gets_its_own_rates() {
        // (capability, SMs, boost MHz, FP32 TFLOP/s, TF32 TFLOP/s)
        let gpus = [
            ((7, 0), 80, 1530.0, 15.7, None),
            ((7, 5), 40, 1590.0, 8.1, None),
            ((8, 0), 108, 1410.0, 19.5, Some(156.0)),
            ((8, 6), 82, 1695.0, 35.6, Some(35.6)),
            // The L4's datasheet: TF32 120 TFLOP/s with sparsity, 60 dense.
            ((8, 9), 58, 2040.0, 30.3, Some(60.6)),
            // The RTX 5090 (Blackwell GeForce whitepaper): TF32 at the FP32 rate.
            ((12, 0), 170, 2407.0, 104.8, Some(104.8)),
        ];
        for (cc, sms, mhz, fp32, tf32) in gpus {
            let info = DeviceInfo {
                compute_capability: cc,
                sm_count: sms,
                max_sm_clock_mhz: mhz,
                sm_attributes: None,
                ..h200()
            };
            let peaks = info.attribute_peaks();
            assert!((peaks.fp32_flops.per_s / 1e12 - fp32).abs() < 0.1, "{cc:?}");
            let tensor = peaks.tf32_flops.map(|r| (r.per_s / 1e11).round() / 10.0);
            assert_eq!(tensor.is_some(), tf32.is_some(), "{cc:?}");
            if let (Some(got), Some(want)) = (tensor, tf32) {
                assert!((got - want).abs() < 0.2, "{cc:?}: {got} vs {want}");
            }
            assert_eq!(info.sm_limits(), SmLimits::typical(cc));
        }
    }

    #[test]
    fn each_generation_gets_its_datasheet_bf16_rate() {
        // (capability, GPU, SMs, boost MHz, its datasheet's dense BF16
        // TFLOP/s with FP32 accumulate): A100 312; RTX 3090 71 (142 with
        // FP16 accumulate); L4 121 (242 with sparsity); H100 SXM 989.4;
        // B200 2,250 (4,500 with sparsity) at the clock its dense TF32
        // 1,100 implies; RTX 5090 209.5 (419 with FP16 accumulate).
        let gpus = [
            ((8, 0), "A100", 108, 1410.0, 312.0),
            ((8, 6), "RTX 3090", 82, 1695.0, 71.0),
            ((8, 9), "L4", 58, 2040.0, 121.0),
            ((9, 0), "H100 SXM", 132, 1830.0, 989.4),
            ((10, 0), "B200", 148, 1815.0, 2250.0),
            ((12, 0), "RTX 5090", 170, 2407.0, 209.5),
        ];
        for (cc, gpu, sms, mhz, datasheet) in gpus {
            let info = DeviceInfo {
                compute_capability: cc,
                sm_count: sms,
                max_sm_clock_mhz: mhz,
                ..h200()
            };
            let bf16 = info
                .attribute_peaks()
                .bf16_flops
                .expect("BF16 tensor cores");
            let off = bf16.per_s / 1e12 / datasheet - 1.0;
            // NVIDIA rounds the B200's figures; the others agree within 1%.
            let tolerance = if gpu == "B200" { 0.025 } else { 0.01 };
            assert!(
                off.abs() < tolerance,
                "{gpu}: {:.1} TFLOP/s",
                bf16.per_s / 1e12
            );
        }
        for (cc, gpu) in [((7, 0), "V100"), ((7, 5), "T4")] {
            let info = DeviceInfo {
                compute_capability: cc,
                ..h200()
            };
            assert_eq!(info.attribute_peaks().bf16_flops, None, "{gpu}: FP16 only");
        }
    }
}
