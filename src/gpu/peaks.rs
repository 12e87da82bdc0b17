//! The roofs of the GPU in use: what the driver's attributes promise,
//! checked by three short micro-benchmarks (`kernels/probes.cu`: an FMA
//! loop, a TF32 tensor-core loop, a streaming copy), each a few
//! milliseconds. The caller caches the result per GPU
//! (`app::peaks_cache`; the sandboxed worker writes no files).
//!
//! A roof that could not be measured keeps its attribute figure, and says so.

// Launching the probes is the only unsafe code here.
#![allow(unsafe_code)]

use cudarc::driver::{CudaFunction, CudaSlice, LaunchConfig, PushKernelArg};

use super::device::{gpu_err, Gpu, GpuResult};
use crate::grade::roofline::{DevicePeaks, PeakSource, Roof};

/// The peaks found for a GPU and how: measured now, read from the cache, or
/// why they are the attributes'.
#[derive(Debug, Clone, PartialEq)]
pub struct FoundPeaks {
    pub peaks: DevicePeaks,
    pub origin: String,
}

/// Measures the GPU's roofs with the probes in `probes`, or says why the
/// attribute figures stand.
pub fn measure_peaks(gpu: &Gpu, probes: &[u8]) -> FoundPeaks {
    match measure(gpu, probes) {
        Ok(peaks) => FoundPeaks {
            peaks,
            origin: "measured now".into(),
        },
        Err(e) => FoundPeaks {
            peaks: gpu.info.attribute_peaks(),
            origin: format!("from the device attributes (benchmarks failed: {e})"),
        },
    }
}

/// Runs the three benchmarks; the tensor one only where the GPU has TF32.
fn measure(gpu: &Gpu, probes: &[u8]) -> GpuResult<DevicePeaks> {
    let attributes = gpu.info.attribute_peaks();
    let measured = |per_s| Roof {
        per_s,
        source: PeakSource::Measured,
        pipe_pct_at_peak: None,
    };
    let fp32 = ProbeLaunch::new(gpu, probes, Benchmark::Fma)?.best_rate()?;
    let tf32 = match attributes.tf32_flops {
        Some(_) => Some(measured(
            ProbeLaunch::new(gpu, probes, Benchmark::Tf32)?.best_rate()?,
        )),
        None => None,
    };
    let copy = gpu.load_support(probes, "stream_copy")?;
    Ok(DevicePeaks {
        name: attributes.name,
        fp32_flops: measured(fp32),
        tf32_flops: tf32,
        dram_bytes: measured(copy_rate(gpu, &copy)?),
    })
}

/// A compute benchmark of `kernels/probes.cu`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Benchmark {
    /// `fma_peak`: 16 FLOP a thread per iteration.
    Fma,
    /// `tf32_peak`: 4 x 2,048 FLOP a warp per iteration.
    Tf32,
}

impl Benchmark {
    fn entry(self) -> &'static str {
        match self {
            Benchmark::Fma => "fma_peak",
            Benchmark::Tf32 => "tf32_peak",
        }
    }

    fn iterations(self) -> i32 {
        match self {
            Benchmark::Fma => 65_536,
            Benchmark::Tf32 => 16_384,
        }
    }

    fn flops(self, threads: u64) -> f64 {
        let iterations = f64::from(self.iterations());
        match self {
            Benchmark::Fma => threads as f64 * iterations * 16.0,
            Benchmark::Tf32 => (threads / 32) as f64 * iterations * 4.0 * 2048.0,
        }
    }
}

const BLOCK: u32 = 256;
const TIMED_RUNS: usize = 3;

/// One compute benchmark, loaded, on eight full blocks per SM.
pub struct ProbeLaunch<'a> {
    gpu: &'a Gpu,
    benchmark: Benchmark,
    function: CudaFunction,
    sink: CudaSlice<f32>,
    blocks: u32,
}

impl<'a> ProbeLaunch<'a> {
    pub fn new(gpu: &'a Gpu, probes: &[u8], benchmark: Benchmark) -> GpuResult<Self> {
        Ok(Self {
            gpu,
            benchmark,
            function: gpu.load_support(probes, benchmark.entry())?,
            sink: gpu
                .stream()
                .alloc_zeros::<f32>(1)
                .map_err(gpu_err("cuMemAlloc"))?,
            blocks: gpu.info.sm_count.max(1) as u32 * 8,
        })
    }

    /// Queues one launch.
    pub fn launch(&mut self) -> GpuResult<()> {
        let iterations = self.benchmark.iterations();
        let mut builder = self.gpu.stream().launch_builder(&self.function);
        builder.arg(&mut self.sink).arg(&iterations);
        // SAFETY: the peak probes in kernels/probes.cu take (float*, int).
        unsafe { builder.launch(config(self.blocks)) }
            .map(drop)
            .map_err(gpu_err("cuLaunchKernel"))
    }

    /// FLOP/s of the fastest of a few timed launches.
    fn best_rate(mut self) -> GpuResult<f64> {
        let threads = u64::from(self.blocks) * u64::from(BLOCK);
        let flops = self.benchmark.flops(threads);
        let gpu = self.gpu;
        fastest(gpu, &mut || self.launch()).map(|ms| flops / (ms * 1e-3))
    }
}

/// Copies a buffer four times the size of L2 (at least 64 MiB) each way.
fn copy_rate(gpu: &Gpu, copy: &CudaFunction) -> GpuResult<f64> {
    let bytes = (gpu.info.l2_bytes.max(0) as usize * 4).max(64 << 20);
    let count = (bytes / 16) as u64;
    let input = gpu
        .stream()
        .alloc_zeros::<f32>(bytes / 4)
        .map_err(gpu_err("cuMemAlloc"))?;
    let mut output = gpu
        .stream()
        .alloc_zeros::<f32>(bytes / 4)
        .map_err(gpu_err("cuMemAlloc"))?;
    let blocks = gpu.info.sm_count.max(1) as u32 * 8;
    let mut launch = || {
        let mut builder = gpu.stream().launch_builder(copy);
        builder.arg(&input).arg(&mut output).arg(&count);
        // SAFETY: `stream_copy` takes (const float4*, float4*, unsigned long
        // long); both buffers hold `count` float4s.
        unsafe { builder.launch(config(blocks)) }
            .map(drop)
            .map_err(gpu_err("cuLaunchKernel"))
    };
    fastest(gpu, &mut launch).map(|ms| 2.0 * bytes as f64 / (ms * 1e-3))
}

fn config(blocks: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// One warm-up launch, then the fastest of [`TIMED_RUNS`], in milliseconds.
fn fastest(gpu: &Gpu, launch: &mut dyn FnMut() -> GpuResult<()>) -> GpuResult<f64> {
    launch()?;
    gpu.synchronize()?;
    let mut best = f64::INFINITY;
    for _ in 0..TIMED_RUNS {
        best = best.min(gpu.timed(&mut *launch)?);
    }
    if best.is_finite() && best > 0.0 {
        Ok(best)
    } else {
        Err(super::device::GpuError::message(format!(
            "a benchmark took {best} ms"
        )))
    }
}
