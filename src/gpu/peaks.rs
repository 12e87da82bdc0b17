//! The roofs of the GPU in use: what the driver's attributes promise,
//! checked by short micro-benchmarks (`kernels/probes.cu`: an FMA loop,
//! a TF32 and a BF16 tensor-core loop, a streaming copy), each a few
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

/// Runs the benchmarks; each tensor one only where the attributes say the
/// GPU has its tensor cores.
fn measure(gpu: &Gpu, probes: &[u8]) -> GpuResult<DevicePeaks> {
    let measured = |per_s| Roof {
        per_s,
        source: PeakSource::Measured,
        pipe_pct_at_peak: None,
    };
    let mut peaks = gpu.info.attribute_peaks();
    peaks.fp32_flops = measured(ProbeLaunch::new(gpu, probes, Benchmark::Fma)?.best_rate()?);
    for (benchmark, roof) in Benchmark::tensor_roofs(&mut peaks) {
        if let Some(roof) = roof {
            *roof = measured(ProbeLaunch::new(gpu, probes, benchmark)?.best_rate()?);
        }
    }
    let copy = gpu.load_support(probes, "stream_copy")?;
    peaks.dram_bytes = measured(copy_rate(gpu, &copy)?);
    Ok(peaks)
}

/// A compute benchmark of `kernels/probes.cu`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Benchmark {
    /// `fma_peak`: 16 FLOP a thread per iteration.
    Fma,
    /// `tf32_peak`: four m16n8k8 products a warp per iteration.
    Tf32,
    /// `bf16_peak`: four m16n8k16 products a warp per iteration.
    Bf16,
}

/// Independent tensor-core products a warp issues per iteration.
const PRODUCTS_PER_WARP_ITERATION: f64 = 4.0;

impl Benchmark {
    /// The tensor-core benchmarks, each with the roof of `peaks` it measures
    /// (`None` where the GPU lacks those tensor cores).
    pub fn tensor_roofs(peaks: &mut DevicePeaks) -> [(Benchmark, &mut Option<Roof>); 2] {
        [
            (Benchmark::Tf32, &mut peaks.tf32_flops),
            (Benchmark::Bf16, &mut peaks.bf16_flops),
        ]
    }

    fn entry(self) -> &'static str {
        match self {
            Benchmark::Fma => "fma_peak",
            Benchmark::Tf32 => "tf32_peak",
            Benchmark::Bf16 => "bf16_peak",
        }
    }

    /// The m, n, k of a tensor benchmark's `mma.sync`.
    fn product_shape(self) -> Option<[u32; 3]> {
        match self {
            Benchmark::Fma => None,
            Benchmark::Tf32 => Some([16, 8, 8]),
            Benchmark::Bf16 => Some([16, 8, 16]),
        }
    }

    fn iterations(self) -> i32 {
        match self {
            Benchmark::Fma => 65_536,
            // A few milliseconds on the H200 each: the BF16 product does
            // twice the TF32 one's work at twice its rate.
            Benchmark::Tf32 | Benchmark::Bf16 => 16_384,
        }
    }

    fn flops(self, threads: u64) -> f64 {
        let iterations = f64::from(self.iterations());
        match self.product_shape() {
            // Eight FMA chains a thread, two FLOP each.
            None => threads as f64 * iterations * 16.0,
            Some([m, n, k]) => {
                let per_product = 2.0 * f64::from(m * n * k);
                (threads / 32) as f64 * iterations * PRODUCTS_PER_WARP_ITERATION * per_product
            }
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
            sink: gpu.zeroed_floats(1)?,
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

/// The two streaming roofs a bandwidth-bound lab is graded against, bytes a
/// second: a copy (`stream_copy`, bytes read plus written) and a read-only
/// stream (`l2_sweep`, which only reads), each over buffers four times L2.
pub fn stream_rates(gpu: &Gpu, probes: &[u8]) -> GpuResult<(f64, f64)> {
    let copy = gpu.load_support(probes, "stream_copy")?;
    let sweep = gpu.load_support(probes, "l2_sweep")?;
    Ok((copy_rate(gpu, &copy)?, read_rate(gpu, &sweep)?))
}

/// Bytes of each buffer a streaming probe moves: four times L2, at least 64 MiB.
fn stream_bytes(gpu: &Gpu) -> usize {
    (gpu.info.l2_bytes.max(0) as usize * 4).max(64 << 20)
}

/// Reads a buffer four times the size of L2 (zeros: the sweep never stores).
fn read_rate(gpu: &Gpu, sweep: &CudaFunction) -> GpuResult<f64> {
    let bytes = stream_bytes(gpu);
    let count = (bytes / 16) as u64;
    let input = gpu.zeroed_floats(bytes / 4)?;
    let mut sink = gpu.zeroed_floats(1)?;
    let blocks = gpu.info.sm_count.max(1) as u32 * 8;
    let mut launch = || {
        let mut builder = gpu.stream().launch_builder(sweep);
        builder.arg(&input).arg(&count).arg(&mut sink);
        // SAFETY: `l2_sweep` takes (const float4*, unsigned long long,
        // float*); the input holds `count` float4s and the sink one float.
        unsafe { builder.launch(config(blocks)) }
            .map(drop)
            .map_err(gpu_err("cuLaunchKernel"))
    };
    fastest(gpu, &mut launch).map(|ms| bytes as f64 / (ms * 1e-3))
}

/// Copies a buffer four times the size of L2 (at least 64 MiB) each way.
fn copy_rate(gpu: &Gpu, copy: &CudaFunction) -> GpuResult<f64> {
    let bytes = stream_bytes(gpu);
    let count = (bytes / 16) as u64;
    let input = gpu.zeroed_floats(bytes / 4)?;
    let mut output = gpu.zeroed_floats(bytes / 4)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The body of `entry` in kernels/probes.cu.
    fn kernel_source(entry: &str) -> &'static str {
        let source = super::super::device::PROBES_SOURCE;
        let start = source
            .find(&format!("void {entry}("))
            .unwrap_or_else(|| panic!("{entry} is in the probes"));
        let end = source[start..].find("\n}\n").expect("the kernel ends") + start;
        &source[start..end]
    }

    #[test]
    fn each_tensor_benchmark_counts_the_products_its_kernel_issues() {
        // One warp of 32 threads: 16,384 iterations of four products.
        let per_warp = |benchmark: Benchmark| benchmark.flops(32) / 16_384.0;
        assert_eq!(per_warp(Benchmark::Tf32), 4.0 * 2_048.0);
        assert_eq!(per_warp(Benchmark::Bf16), 4.0 * 4_096.0);
        assert_eq!(
            Benchmark::Bf16.flops(256 * 1056),
            8.0 * 1056.0 * per_warp(Benchmark::Bf16) * 16_384.0
        );
        // The shapes counted are the ones the kernels run.
        let products = super::super::device::PROBES_SOURCE;
        for (benchmark, product, instruction) in [
            (Benchmark::Tf32, "Tf32Product", "f32.tf32.tf32.f32"),
            (Benchmark::Bf16, "Bf16Product", "f32.bf16.bf16.f32"),
        ] {
            let [m, n, k] = benchmark.product_shape().expect("a tensor benchmark");
            let body = kernel_source(benchmark.entry());
            assert!(body.contains(&format!("tensor_loop<{product}>")), "{body}");
            let definition = format!(
                "TENSOR_PRODUCT({product}, \"mma.sync.aligned.m{m}n{n}k{k}.row.col.{instruction}\")"
            );
            assert!(products.contains(&definition), "{definition}");
        }
        let loop_body = &products[products.find("void tensor_loop(").expect("the loop")..];
        assert!(loop_body.contains("for (int k = 0; k < 4; ++k) Product::run"));
    }

    #[test]
    fn the_tensor_benchmarks_fill_only_the_roofs_the_gpu_has() {
        let mut peaks = crate::facts::device::tests::h200().attribute_peaks();
        peaks.tf32_flops = None;
        let present: Vec<Benchmark> = Benchmark::tensor_roofs(&mut peaks)
            .into_iter()
            .filter_map(|(benchmark, roof)| roof.is_some().then_some(benchmark))
            .collect();
        assert_eq!(present, [Benchmark::Bf16]);
    }
}
