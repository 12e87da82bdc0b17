//! The kernels a worker needs besides the student's: the lab's starter, its
//! float64 reference and flashprof's measuring probes, built from trusted
//! source (side by side, and ahead of need once the caller says the lab)
//! and loaded once per worker and lab.

use cudarc::driver::CudaFunction;

use super::Worker;
use crate::gpu::compile::{self, CompileOptions};
use crate::gpu::device::{FreshKernels, GpuError, Kernel, L2Flusher, PROBES_SOURCE};
use crate::lab::definition::LabRef;
use crate::lab::source::StudentSource;

/// Kernels the worker needs besides the student's, loaded on first use
/// for the lab in use from [`BaselineImages`] (built ahead when the caller
/// said the lab with `ChooseLab`), and the L2 flusher that timing and counters share.
pub(super) struct Baselines {
    pub(super) lab: LabRef,
    pub(super) starter: Kernel,
    /// The starter's cubin, which a line profile of the starter sends back
    /// for its line table.
    pub(super) starter_image: Vec<u8>,
    pub(super) oracle_f64: CudaFunction,
    pub(super) clock_probe: CudaFunction,
    pub(super) l2_flusher: L2Flusher,
    /// What gives every timed and profiled launch fresh inputs, and checks them after.
    pub(super) fresh: FreshKernels,
    /// The empty kernel whose launch is one term of the physical floor.
    pub(super) empty: CudaFunction,
    /// The compiled probes, kept for the peak benchmarks counters run once
    /// and the streaming roofs a lab graded on bytes is timed against.
    pub(super) probes: Vec<u8>,
}

/// What [`Baselines`] are loaded from: three NVRTC builds of trusted code,
/// a few hundred milliseconds of CPU between them. When the caller says
/// the lab first (`ChooseLab`), they start on a thread of their own, so
/// they overlap the student's build and cases instead of delaying the first
/// timing, counters or long case; otherwise they are built at first use.
pub(super) struct BaselineImages {
    pub(super) starter: compile::CompiledKernel,
    pub(super) oracle: Vec<u8>,
    pub(super) probes: Vec<u8>,
}

impl BaselineImages {
    /// The three builds for `lab` on `arch`, side by side.
    pub(super) fn compile(lab: LabRef, arch: String) -> Result<Self, String> {
        let options = CompileOptions::for_arch(Some(arch));
        std::thread::scope(|scope| {
            let starter = scope.spawn(|| {
                let file = lab.starter();
                let source = StudentSource::from_bytes(file.path, file.text.as_bytes(), lab)
                    .map_err(|e| e.to_string())?;
                compile::compile(&source, &options).map_err(|e| e.to_string())
            });
            let oracle = scope.spawn(|| {
                let support = lab.support();
                compile::compile_trusted(support.file.path, support.file.text, &options)
                    .map_err(|e| e.to_string())
            });
            let probes = compile::compile_trusted("kernels/probes.cu", PROBES_SOURCE, &options)
                .map_err(|e| e.to_string());
            fn joined<T>(
                handle: std::thread::ScopedJoinHandle<'_, Result<T, String>>,
            ) -> Result<T, String> {
                handle
                    .join()
                    .unwrap_or_else(|_| Err("a baseline build panicked".into()))
            }
            // Every thread joined before any error is returned.
            let (starter, oracle) = (joined(starter), joined(oracle));
            Ok(Self {
                starter: starter?,
                oracle: oracle?,
                probes: probes?,
            })
        })
    }

    /// Starts [`Self::compile`] on a thread of its own.
    pub(super) fn start(
        lab: LabRef,
        arch: String,
    ) -> std::thread::JoinHandle<Result<Self, String>> {
        std::thread::spawn(move || Self::compile(lab, arch))
    }
}

impl Worker {
    /// Waits for a baseline build still running and drops what it made,
    /// rather than leave the thread detached: the process may exit next,
    /// and NVRTC's exit-time teardown must not race a thread inside it.
    pub(super) fn finish_baseline_build(&mut self) {
        if let Some(compiling) = self.baseline_images.take() {
            let _ = compiling.join();
        }
    }

    /// Starts building the chosen lab's baselines on a thread, unless they
    /// are built or building, or there is no GPU to load them on. Only
    /// `ChooseLab` asks for it: a check that neither times, counts nor
    /// profiles never does, and builds nothing it will not use.
    pub(super) fn build_baselines_ahead(&mut self) {
        if self.baselines.is_some() || self.baseline_images.is_some() {
            return;
        }
        if let (Some(lab), Some(arch)) = (self.lab, self.arch()) {
            self.baseline_images = Some(BaselineImages::start(lab, arch));
        }
    }

    /// Compiles and loads the starter and the support kernels once per worker.
    pub(super) fn baselines(&mut self) -> Result<(), GpuError> {
        if self.baselines.is_some() {
            return Ok(());
        }
        let lab = self.lab()?;
        let gpu = self
            .gpu
            .as_ref()
            .ok_or_else(|| GpuError::message("no GPU in this worker"))?;
        let images = match self.baseline_images.take() {
            Some(compiling) => compiling
                .join()
                .unwrap_or_else(|_| Err("the baselines' build thread panicked".into())),
            None => BaselineImages::compile(lab, gpu.info.arch()),
        }
        .map_err(GpuError::message)?;
        let BaselineImages {
            starter,
            oracle: oracle_image,
            probes,
        } = images;
        let l2_sweep = gpu.load_support(&probes, "l2_sweep")?;
        self.baselines = Some(Baselines {
            lab,
            starter: gpu.load(&starter.image, lab.abi().entry_point, starter.geometry)?,
            starter_image: starter.image,
            oracle_f64: gpu.load_support(&oracle_image, lab.support().oracle_f64)?,
            clock_probe: gpu.load_support(&probes, "clock_probe")?,
            l2_flusher: gpu.l2_flusher(&l2_sweep)?,
            fresh: FreshKernels::load(gpu, &probes)?,
            empty: gpu.load_support(&probes, "empty_launch")?,
            probes,
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::registry;

    /// The baselines a timing loads, built on their own thread as a lab is
    /// chosen, hold every function the loader then asks for.
    #[test]
    fn every_lab_s_baseline_images_build_on_their_thread_with_what_is_loaded() {
        use crate::gpu::compile::image::defines_function;
        for lab in registry::labs() {
            let lab = LabRef(lab);
            let images = BaselineImages::start(lab, "sm_90".into())
                .join()
                .expect("the build thread ends")
                .unwrap_or_else(|e| panic!("{}: {e}", lab.name()));
            assert!(defines_function(
                &images.starter.image,
                lab.abi().entry_point
            ));
            assert!(defines_function(&images.oracle, lab.support().oracle_f64));
            for probe in [
                "l2_sweep",
                "clock_probe",
                "empty_launch",
                "fingerprint_bytes",
            ] {
                assert!(defines_function(&images.probes, probe), "{probe}");
            }
        }
    }
}
