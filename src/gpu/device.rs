//! The CUDA device as the grader needs it: one context, kernels loaded from
//! compiled images, inputs surrounded by guard bands, and timed launches.
//!
//! Only this module (and `peaks`, for its benchmarks) launches kernels. A launch is `unsafe` in cudarc because
//! it cannot check argument types; here the arguments are pushed from the
//! lab's own list ([`crate::lab::definition::Abi`]), whose signature the
//! compile step verified the kernel has before any image gets here.
#![allow(unsafe_code)]

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use cudarc::driver::sys::{CUdevice_attribute, CUfunction_attribute};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaSlice, CudaStream, DriverError, LaunchConfig, PushKernelArg,
};
use cudarc::nvrtc::Ptx;

use crate::facts::arch::SmAttributes;
use crate::facts::device::{DeviceInfo, GpuProblem};
use crate::facts::resources::ResourceUsage;
use crate::lab::args::{self, Laid, BF16_OUTPUT_GUARD_BITS};
pub use crate::lab::args::{GUARD_ELEMS, INPUT_GUARD_BITS, OUTPUT_GUARD_BITS};
use crate::lab::definition::{CaseData, LabRef, Problem};
use crate::lab::geometry::LaunchGeometry;

/// flashprof's own measuring kernels (the clock probe and the L2 sweep), the
/// same for every lab, compiled once per worker.
pub const PROBES_SOURCE: &str = include_str!("../../kernels/probes.cu");

mod fresh;
pub use fresh::{Draw, FreshKernels};

/// A device error with the CUDA name, e.g. `CUDA_ERROR_ILLEGAL_ADDRESS`.
#[derive(Debug, thiserror::Error)]
#[error("{call}: {name}")]
pub struct GpuError {
    pub call: &'static str,
    pub name: String,
    /// Sticky errors poison the context: the process must restart before the next launch.
    pub sticky: bool,
    pub out_of_memory: bool,
}

pub(super) fn gpu_err(call: &'static str) -> impl Fn(DriverError) -> GpuError {
    move |e: DriverError| {
        use cudarc::driver::sys::CUresult::*;
        let name = e
            .error_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|_| format!("{:?}", e.0));
        let sticky = matches!(
            e.0,
            CUDA_ERROR_ILLEGAL_ADDRESS
                | CUDA_ERROR_ILLEGAL_INSTRUCTION
                | CUDA_ERROR_MISALIGNED_ADDRESS
                | CUDA_ERROR_INVALID_ADDRESS_SPACE
                | CUDA_ERROR_INVALID_PC
                | CUDA_ERROR_HARDWARE_STACK_ERROR
                | CUDA_ERROR_LAUNCH_FAILED
                | CUDA_ERROR_ASSERT
                | CUDA_ERROR_LAUNCH_TIMEOUT
        );
        GpuError {
            call,
            name,
            sticky,
            out_of_memory: e.0 == CUDA_ERROR_OUT_OF_MEMORY,
        }
    }
}

pub type GpuResult<T> = Result<T, GpuError>;

/// An open GPU: context, stream and the facts a report needs.
pub struct Gpu {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    pub info: DeviceInfo,
}

/// A loaded kernel of the lab's entry point, with its launch geometry.
#[derive(Clone)]
pub struct Kernel {
    function: CudaFunction,
    pub geometry: LaunchGeometry,
    build: u64,
}

impl Kernel {
    /// Identifies the compiled image and launch geometry within this process:
    /// equal for two loads of the same build, so measurements can be reused.
    pub fn build(&self) -> u64 {
        self.build
    }

    /// Registers, static shared memory, stack frame and the largest block as
    /// the driver reports them (spill sizes are only in ptxas's report, so
    /// they read 0 here).
    pub fn resources(&self) -> GpuResult<ResourceUsage> {
        let attribute = |a| {
            self.function
                .get_attribute(a)
                .map_err(gpu_err("cuFuncGetAttribute"))
        };
        Ok(ResourceUsage {
            registers: attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_NUM_REGS)? as u32,
            static_smem_bytes: attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?
                as u32,
            local_bytes: attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)?
                as u32,
            max_threads_per_block: attribute(
                CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
            )? as u32,
            spill_store_bytes: 0,
            spill_load_bytes: 0,
            barriers: 0,
            raw_lines: vec![
                "(read from the driver: NVRTC served a cached build without ptxas's report)".into(),
            ],
        })
    }
}

/// What evicts L2 between launches: a read-only sweep over a large buffer.
pub struct L2Flusher {
    buffer: CudaSlice<f32>,
    sink: CudaSlice<f32>,
    sweep: CudaFunction,
}

/// One tensor on the device with guard bands either side.
struct Guarded<T> {
    /// What kernels are given.
    buffer: CudaSlice<T>,
    host: Vec<T>,
    len: usize,
    /// For fresh launches: the uploaded values, which no kernel is given;
    /// each fresh launch's `buffer` is drawn from them.
    pristine: Option<CudaSlice<T>>,
}

impl<T: cudarc::driver::DeviceRepr> Guarded<T> {
    /// The tensor itself, without its guard bands: what a kernel is given.
    fn inner(&self) -> cudarc::driver::CudaView<'_, T> {
        self.buffer.slice(GUARD_ELEMS..GUARD_ELEMS + self.len)
    }
}

/// A placed input on the device ([`crate::lab::sparse`]): a reserved
/// virtual range mapped only at its extents, each holding its uploaded
/// bytes. A kernel's read anywhere else in or around it faults.
struct PlacedBuffer {
    /// What the kernel is given: offset 0 of the image, which may lie
    /// inside, below or above what is mapped.
    base: cudarc::driver::sys::CUdeviceptr,
    /// The reservation's start and size.
    reserved: (cudarc::driver::sys::CUdeviceptr, usize),
    /// Each mapped extent, in the order it was mapped.
    extents: Vec<MappedExtent>,
    ctx: Arc<CudaContext>,
}

/// One mapped run of a placed input.
struct MappedExtent {
    at: cudarc::driver::sys::CUdeviceptr,
    /// Bytes mapped, whether or not the upload got as far as copying them.
    len: usize,
    /// What was copied there (empty until the copy succeeded).
    uploaded: Vec<u8>,
}

impl Drop for PlacedBuffer {
    fn drop(&mut self) {
        use cudarc::driver::sys::{cuMemAddressFree, cuMemUnmap};
        // A context lost to a sticky fault refuses these too; the process
        // ends then, and its address space with it.
        if self.ctx.bind_to_thread().is_err() {
            return;
        }
        // A launch still queued on an error path may read the extents.
        let _ = self.ctx.synchronize();
        for extent in &self.extents {
            // SAFETY: each extent was mapped at `at` over `len` bytes by
            // `Gpu::upload_placed` and is unmapped once, here.
            unsafe { cuMemUnmap(extent.at, extent.len) };
        }
        // SAFETY: the range was reserved by `Gpu::upload_placed` and nothing maps it now.
        unsafe { cuMemAddressFree(self.reserved.0, self.reserved.1) };
    }
}

/// One launch argument on the device.
enum DeviceArg {
    F32(Guarded<f32>),
    I32(Guarded<i32>),
    /// bf16 values, as their bits.
    Bf16(Guarded<u16>),
    U8(Guarded<u8>),
    /// An input placed across a far larger virtual range.
    Placed(PlacedBuffer),
    Scalar(i32),
    F32Scalar(f32),
    /// A null pointer (an optional input left out).
    Null,
    Output,
    /// Scratch the grader owns: `host` is what it is reset to before every launch.
    ScratchF32(Guarded<f32>),
    ScratchU32(Guarded<u32>),
}

/// The output buffer, in the element type of the lab's output.
enum OutputBuffer {
    F32(Guarded<f32>),
    /// bf16 bits, read back as floats ([`args::bf16_output_value`]).
    Bf16(Guarded<u16>),
}

impl OutputBuffer {
    fn len(&self) -> usize {
        match self {
            Self::F32(g) => g.len,
            Self::Bf16(g) => g.len,
        }
    }
}

/// The arguments and the output of one case, guarded, for one lab.
pub struct Workspace {
    pub lab: LabRef,
    pub problem: Problem,
    /// `(name, value)` in the entry point's order.
    args: Vec<(&'static str, DeviceArg)>,
    out: OutputBuffer,
    /// How the inputs of the last fresh launch were made from the pristine copies.
    drawn: fresh::Drawn,
}

/// A buffer argument's device view, by element type.
enum View<'a> {
    F32(cudarc::driver::CudaView<'a, f32>),
    I32(cudarc::driver::CudaView<'a, i32>),
    U16(cudarc::driver::CudaView<'a, u16>),
    U8(cudarc::driver::CudaView<'a, u8>),
    U32(cudarc::driver::CudaView<'a, u32>),
}

/// The trailing arguments of a float64 reference: which rows, or null for all.
struct RowList<'a> {
    rows: Option<&'a CudaSlice<i32>>,
    count: i32,
}

/// What came back from a launch, before any grading.
pub struct LaunchResult {
    pub output: Vec<f32>,
    /// Output guard elements that no longer hold the guard pattern.
    pub out_of_bounds_writes: usize,
}

/// How many CUDA devices the driver sees, or why it sees none.
pub fn count() -> Result<usize, GpuProblem> {
    super::libraries::preload_driver();
    // cudarc opens the driver by name: never where that name is an untrusted file.
    if let Some(refusal) = super::libraries::driver_by_name_blocked() {
        return Err(GpuProblem::NoDriver {
            detail: format!("the driver was not loaded: {refusal}"),
        });
    }
    // cudarc panics when libcuda is absent; ask first so the answer is a message.
    // SAFETY: only tries to dlopen the driver library by its usual names.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err(GpuProblem::NoDriver {
            detail: "libcuda.so could not be loaded (is the NVIDIA driver installed and on the loader path?)"
                .into(),
        });
    }
    if let Err(e) = cudarc::driver::result::init() {
        let failure = gpu_err("cuInit")(e);
        return Err(if failure.name == "CUDA_ERROR_NO_DEVICE" {
            GpuProblem::NoDevice {
                detail: failure.to_string(),
            }
        } else {
            GpuProblem::DriverError {
                detail: failure.to_string(),
            }
        });
    }
    CudaContext::device_count()
        .map(|n| n.max(0) as usize)
        .map_err(|e| GpuProblem::DriverError {
            detail: gpu_err("cuDeviceGetCount")(e).to_string(),
        })
}

/// Opens the CUDA device `ordinal`, or says plainly why there is none.
pub fn open(ordinal: usize) -> Result<Gpu, GpuProblem> {
    let count = count()?;
    if count <= ordinal {
        return Err(GpuProblem::NoDevice {
            detail: format!("device {ordinal} asked for, {count} present"),
        });
    }
    let problem = |call| {
        move |e| GpuProblem::DriverError {
            detail: gpu_err(call)(e).to_string(),
        }
    };
    let ctx = CudaContext::new(ordinal).map_err(problem("cuDevicePrimaryCtxRetain"))?;
    let attribute = |a| ctx.attribute(a).map_err(problem("cuDeviceGetAttribute"));
    let mut driver_version = 0;
    // SAFETY: writes one int through a valid pointer.
    unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut driver_version) };
    let info = DeviceInfo {
        ordinal,
        name: ctx.name().map_err(problem("cuDeviceGetName"))?,
        compute_capability: ctx
            .compute_capability()
            .map_err(problem("cuDeviceGetAttribute"))?,
        sm_count: attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
        l2_bytes: attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?,
        max_sm_clock_mhz: attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)? as f64
            / 1000.0,
        memory_bytes: ctx.total_mem().map_err(problem("cuDeviceTotalMem"))?,
        driver_version,
        sm_attributes: Some(sm_attributes(&ctx).map_err(problem("cuDeviceGetAttribute"))?),
        memory_clock_mhz: attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE)?
            as f64
            / 1000.0,
        memory_bus_bits: attribute(
            CUdevice_attribute::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH,
        )?,
        uuid: ctx
            .uuid()
            .map(|u| {
                u.bytes
                    .iter()
                    .map(|b| format!("{:02x}", *b as u8))
                    .collect()
            })
            .unwrap_or_default(),
    };
    let stream = ctx.default_stream();
    Ok(Gpu { ctx, stream, info })
}

/// The occupancy limits the driver reports for the context's device.
fn sm_attributes(ctx: &CudaContext) -> Result<SmAttributes, DriverError> {
    use CUdevice_attribute as A;
    let get = |a| ctx.attribute(a).map(|v| v.max(0) as u32);
    Ok(SmAttributes {
        registers_per_sm: get(A::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR)?,
        registers_per_block: get(A::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK)?,
        smem_per_sm_bytes: get(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)?,
        smem_per_block_optin_bytes: get(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?,
        smem_reserved_per_block_bytes: get(
            A::CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK,
        )?,
        threads_per_sm: get(A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)?,
        blocks_per_sm: get(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR)?,
        threads_per_block: get(A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
        warp_size: get(A::CU_DEVICE_ATTRIBUTE_WARP_SIZE)?,
    })
}

/// `blocks` blocks of 256 threads, for flashprof's grid-stride kernels.
fn grid_stride(blocks: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    }
}

impl Gpu {
    /// The raw context, for the profiler.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The stream every launch goes to, for flashprof's own probes.
    pub(super) fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Loads a compiled image and finds `entry` in it.
    pub fn load(&self, image: &[u8], entry: &str, geometry: LaunchGeometry) -> GpuResult<Kernel> {
        let module = self
            .ctx
            .load_module(Ptx::from_binary(image.to_vec()))
            .map_err(gpu_err("cuModuleLoadData"))?;
        let function = module
            .load_function(entry)
            .map_err(gpu_err("cuModuleGetFunction"))?;
        if geometry.dynamic_smem_bytes > 48 * 1024 {
            // Above 48 KiB a kernel must opt in, or the launch fails.
            function
                .set_attribute(
                    CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    geometry.dynamic_smem_bytes as i32,
                )
                .map_err(gpu_err("cuFuncSetAttribute"))?;
        }
        let mut build = DefaultHasher::new();
        (image, geometry).hash(&mut build);
        Ok(Kernel {
            function,
            geometry,
            build: build.finish(),
        })
    }

    /// Uploads a case's inputs with guards (a NaN pattern for floats, the
    /// same bits for int32, a far-out index; a NaN of their own for bf16 and
    /// bytes), scratch reset, and an output poisoned with `poison_bits` (the
    /// float pattern; a bf16 output gets its own poison for it).
    pub fn workspace(
        &self,
        lab: LabRef,
        data: &CaseData,
        poison_bits: u32,
    ) -> GpuResult<Workspace> {
        let elements = data.problem.output.elements();
        let abi = lab.abi();
        let values = lab.args(data);
        if values.len() != abi.args.len() {
            return Err(GpuError::message(format!(
                "the case has {} arguments, the {} lab's kernel {}",
                values.len(),
                lab.name(),
                abi.args.len()
            )));
        }
        let mut out = None;
        let mut args = Vec::with_capacity(values.len());
        for (spec, &value) in abi.args.iter().zip(&values) {
            let laid = Laid::new(spec.kind, value, elements, poison_bits).ok_or_else(|| {
                GpuError::message(format!(
                    "the {} lab's case gives `{}` a value of the wrong kind",
                    lab.name(),
                    spec.name
                ))
            })?;
            let arg = match laid {
                Laid::F32Input(image) => DeviceArg::F32(self.upload(image)?),
                Laid::I32Input(image) => DeviceArg::I32(self.upload(image)?),
                Laid::Bf16Input(image) => DeviceArg::Bf16(self.upload(image)?),
                Laid::U8Input(image) => DeviceArg::U8(self.upload(image)?),
                Laid::Placed(image) => DeviceArg::Placed(self.upload_placed(&image)?),
                Laid::Scalar(n) => DeviceArg::Scalar(n),
                Laid::F32Scalar(x) => DeviceArg::F32Scalar(x),
                Laid::Null => DeviceArg::Null,
                Laid::F32Output(image) => {
                    out = Some(OutputBuffer::F32(self.upload(image)?));
                    DeviceArg::Output
                }
                Laid::Bf16Output(image) => {
                    out = Some(OutputBuffer::Bf16(self.upload(image)?));
                    DeviceArg::Output
                }
                Laid::ScratchF32(image) => DeviceArg::ScratchF32(self.upload(image)?),
                Laid::ScratchU32(image) => DeviceArg::ScratchU32(self.upload(image)?),
            };
            args.push((spec.name, arg));
        }
        let out = out.ok_or_else(|| {
            GpuError::message(format!("the {} lab's kernel has no output", lab.name()))
        })?;
        Ok(Workspace {
            lab,
            problem: data.problem.clone(),
            args,
            out,
            drawn: fresh::Drawn::default(),
        })
    }

    /// A buffer uploaded as its host image is (guards included).
    fn upload<T: cudarc::driver::DeviceRepr + Copy>(&self, host: Vec<T>) -> GpuResult<Guarded<T>> {
        let len = args::inner_len(host.len());
        let buffer = self
            .stream
            .clone_htod(&host)
            .map_err(gpu_err("cuMemcpyHtoD"))?;
        Ok(Guarded {
            buffer,
            host,
            len,
            pristine: None,
        })
    }

    /// A placed input uploaded: its range reserved, every extent mapped at
    /// the device's allocation granularity and its bytes copied in.
    fn upload_placed(&self, image: &crate::lab::sparse::SparseImage) -> GpuResult<PlacedBuffer> {
        use cudarc::driver::sys::{self as cu, CUmemAllocationGranularity_flags as Granularity};
        self.ctx
            .bind_to_thread()
            .map_err(gpu_err("cuCtxSetCurrent"))?;
        let location = cu::CUmemLocation {
            type_: cu::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
            id: self.info.ordinal as i32,
        };
        // SAFETY: a plain C struct, every field then set or left zero (no handle types, no flags).
        let mut prop: cu::CUmemAllocationProp = unsafe { std::mem::zeroed() };
        prop.type_ = cu::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location = location;
        let mut granularity = 0usize;
        // SAFETY: writes one size through a valid pointer; `prop` is initialised.
        unsafe {
            cu::cuMemGetAllocationGranularity(
                &mut granularity,
                &prop,
                Granularity::CU_MEM_ALLOC_GRANULARITY_MINIMUM,
            )
        }
        .result()
        .map_err(gpu_err("cuMemGetAllocationGranularity"))?;
        let mapped = image.mapped(granularity);
        let size = (mapped.reserve.end - mapped.reserve.start) as usize;
        let mut start = 0;
        // SAFETY: writes the reserved address through a valid pointer.
        unsafe { cu::cuMemAddressReserve(&mut start, size, granularity, 0, 0) }
            .result()
            .map_err(gpu_err("cuMemAddressReserve"))?;
        let mut buffer = PlacedBuffer {
            base: start.wrapping_add_signed(-mapped.reserve.start),
            reserved: (start, size),
            extents: Vec::with_capacity(mapped.extents.len()),
            ctx: self.ctx.clone(),
        };
        let access = cu::CUmemAccessDesc {
            location,
            flags: cu::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
        };
        for extent in mapped.extents {
            let at = start + (extent.offset - mapped.reserve.start) as u64;
            let len = extent.bytes.len();
            let mut handle = 0;
            // SAFETY: writes the new allocation's handle through a valid pointer.
            unsafe { cu::cuMemCreate(&mut handle, len, &prop, 0) }
                .result()
                .map_err(gpu_err("cuMemCreate"))?;
            // SAFETY: `at..at + len` is inside the reservation, chunk-aligned, and unmapped.
            let mapping = unsafe { cu::cuMemMap(at, len, 0, handle, 0) }.result();
            // The mapping keeps the memory alive; the handle is not needed again.
            // SAFETY: the handle was created above and is released once.
            unsafe { cu::cuMemRelease(handle) };
            mapping.map_err(gpu_err("cuMemMap"))?;
            // Kept from here on, so that a failure below still unmaps it.
            buffer.extents.push(MappedExtent {
                at,
                len,
                uploaded: Vec::new(),
            });
            // SAFETY: the range was just mapped; one access descriptor.
            unsafe { cu::cuMemSetAccess(at, len, &access, 1) }
                .result()
                .map_err(gpu_err("cuMemSetAccess"))?;
            // SAFETY: the range is mapped and writable, `len` bytes long.
            unsafe { cudarc::driver::result::memcpy_htod_sync(at, &extent.bytes) }
                .map_err(gpu_err("cuMemcpyHtoD"))?;
            if let Some(last) = buffer.extents.last_mut() {
                last.uploaded = extent.bytes;
            }
        }
        Ok(buffer)
    }

    /// Whether a placed input's mapped bytes differ from what was uploaded.
    fn placed_changed(&self, placed: &PlacedBuffer) -> GpuResult<bool> {
        self.synchronize()?;
        for extent in &placed.extents {
            let mut now = vec![0u8; extent.uploaded.len()];
            // SAFETY: the extent is mapped and `now` is no longer than it.
            unsafe { cudarc::driver::result::memcpy_dtoh_sync(&mut now, extent.at) }
                .map_err(gpu_err("cuMemcpyDtoH"))?;
            if now != extent.uploaded {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Drops persisting L2 lines, a host call that acts at once: make it
    /// once the previous launch has finished.
    pub fn reset_persisting_l2(&self) -> GpuResult<()> {
        self.ctx
            .bind_to_thread()
            .map_err(gpu_err("cuCtxSetCurrent"))?;
        // SAFETY: no arguments; acts on the context just made current.
        let result = unsafe { cudarc::driver::sys::cuCtxResetPersistingL2Cache() };
        result
            .result()
            .map_err(gpu_err("cuCtxResetPersistingL2Cache"))
    }

    /// The fastest of a few launches of an empty kernel, in milliseconds.
    pub fn empty_launch_ms(&self, empty: &CudaFunction) -> GpuResult<f64> {
        let mut fastest = f64::INFINITY;
        for _ in 0..5 {
            let ms = self.timed(|| {
                let launch = self.stream.launch_builder(empty);
                // SAFETY: `empty_launch` in kernels/probes.cu takes no arguments.
                unsafe { { launch }.launch(LaunchConfig::for_num_elems(1)) }
                    .map(|_| ())
                    .map_err(gpu_err("cuLaunchKernel"))
            })?;
            fastest = fastest.min(ms);
        }
        Ok(fastest)
    }

    /// Puts `value` in the guard bands of the float input at argument
    /// `index`, before its start and/or past its end, on the host copy and
    /// on the device (the copy is what "unchanged" is checked against).
    pub fn refill_guards(
        &self,
        ws: &mut Workspace,
        index: usize,
        before: bool,
        after: bool,
        value: f32,
    ) -> GpuResult<()> {
        let Some((_, DeviceArg::F32(tensor))) = ws.args.get_mut(index) else {
            return Err(GpuError::message(format!(
                "argument {index} is not a float input"
            )));
        };
        let end = GUARD_ELEMS + tensor.len;
        if before {
            tensor.host[..GUARD_ELEMS].fill(value);
        }
        if after {
            tensor.host[end..].fill(value);
        }
        self.restore(tensor)
    }

    /// Sets the inside of every float scratch buffer (not its guards) to
    /// `value` in its host image: what [`Self::poison_output`] resets it to
    /// before each launch from then on.
    pub fn refill_scratch(&self, ws: &mut Workspace, value: f32) {
        for (_, arg) in &mut ws.args {
            if let DeviceArg::ScratchF32(scratch) = arg {
                scratch.host[GUARD_ELEMS..GUARD_ELEMS + scratch.len].fill(value);
            }
        }
    }

    /// Restores the poisoned output (and its guards) before a launch, and
    /// resets every scratch buffer (NaN or zero, guards included).
    pub fn poison_output(&self, ws: &mut Workspace) -> GpuResult<()> {
        match &mut ws.out {
            OutputBuffer::F32(out) => self.restore(out)?,
            OutputBuffer::Bf16(out) => self.restore(out)?,
        }
        for (_, arg) in &mut ws.args {
            match arg {
                DeviceArg::ScratchF32(scratch) => self.restore(scratch)?,
                DeviceArg::ScratchU32(scratch) => self.restore(scratch)?,
                _ => {}
            }
        }
        Ok(())
    }

    /// Writes a buffer's host image (guards included) over the device's.
    fn restore<T: cudarc::driver::DeviceRepr>(&self, tensor: &mut Guarded<T>) -> GpuResult<()> {
        self.stream
            .memcpy_htod(&tensor.host, &mut tensor.buffer)
            .map_err(gpu_err("cuMemcpyHtoD"))
    }

    /// Launches `function` on the workspace's arguments, with `output` in
    /// the output's place, without waiting.
    ///
    /// # Safety
    /// `function` must take the lab's arguments, in order, with a pointer to
    /// `O` for the output.
    unsafe fn launch_with<O: cudarc::driver::DeviceRepr>(
        &self,
        function: &CudaFunction,
        args: &[(&'static str, DeviceArg)],
        output: &mut cudarc::driver::CudaViewMut<'_, O>,
        config: LaunchConfig,
        row_list: Option<RowList<'_>>,
    ) -> GpuResult<()> {
        const NULL: u64 = 0;
        // cudarc takes each pointer argument as a reference to a view that
        // outlives the builder: the views are made first, one per argument.
        let views: Vec<Option<View<'_>>> = args
            .iter()
            .map(|(_, arg)| match arg {
                DeviceArg::F32(g) | DeviceArg::ScratchF32(g) => Some(View::F32(g.inner())),
                DeviceArg::I32(g) => Some(View::I32(g.inner())),
                DeviceArg::Bf16(g) => Some(View::U16(g.inner())),
                DeviceArg::U8(g) => Some(View::U8(g.inner())),
                DeviceArg::ScratchU32(g) => Some(View::U32(g.inner())),
                DeviceArg::Placed(_)
                | DeviceArg::Scalar(_)
                | DeviceArg::F32Scalar(_)
                | DeviceArg::Null
                | DeviceArg::Output => None,
            })
            .collect();
        let mut launch = self.stream.launch_builder(function);
        let mut output = Some(output);
        for ((_, arg), view) in args.iter().zip(&views) {
            match (arg, view) {
                (_, Some(View::F32(view))) => {
                    launch.arg(view);
                }
                (_, Some(View::I32(view))) => {
                    launch.arg(view);
                }
                (_, Some(View::U16(view))) => {
                    launch.arg(view);
                }
                (_, Some(View::U8(view))) => {
                    launch.arg(view);
                }
                (_, Some(View::U32(view))) => {
                    launch.arg(view);
                }
                (DeviceArg::Scalar(n), None) => {
                    launch.arg(n);
                }
                (DeviceArg::F32Scalar(x), None) => {
                    launch.arg(x);
                }
                (DeviceArg::Null, None) => {
                    launch.arg(&NULL);
                }
                (DeviceArg::Placed(placed), None) => {
                    launch.arg(&placed.base);
                }
                (DeviceArg::Output, None) => {
                    if let Some(out) = output.take() {
                        launch.arg(out);
                    }
                }
                _ => unreachable!("every buffer argument has a view"),
            }
        }
        if let Some(list) = &row_list {
            match list.rows {
                Some(rows) => launch.arg(rows),
                None => launch.arg(&NULL),
            };
            launch.arg(&list.count);
        }
        // SAFETY: the caller guarantees the kernel's parameters match these arguments.
        unsafe { launch.launch(config) }.map_err(gpu_err("cuLaunchKernel"))?;
        Ok(())
    }

    /// Launches the kernel once on the workspace, without waiting.
    pub fn launch(&self, kernel: &Kernel, ws: &mut Workspace) -> GpuResult<()> {
        let config = LaunchConfig {
            grid_dim: ws.lab.grid(&kernel.geometry, &ws.problem),
            block_dim: (kernel.geometry.threads, 1, 1),
            shared_mem_bytes: kernel.geometry.dynamic_smem_bytes,
        };
        let len = ws.out.len();
        // SAFETY: the compile step checked that the entry point has the lab's
        // signature, which is the list these arguments were made from; the
        // output's element type is the one that list names.
        match &mut ws.out {
            OutputBuffer::F32(out) => {
                let mut out = out.buffer.slice_mut(GUARD_ELEMS..GUARD_ELEMS + len);
                unsafe { self.launch_with(&kernel.function, &ws.args, &mut out, config, None) }
            }
            OutputBuffer::Bf16(out) => {
                let mut out = out.buffer.slice_mut(GUARD_ELEMS..GUARD_ELEMS + len);
                unsafe { self.launch_with(&kernel.function, &ws.args, &mut out, config, None) }
            }
        }
    }

    pub fn synchronize(&self) -> GpuResult<()> {
        self.stream
            .synchronize()
            .map_err(gpu_err("cuStreamSynchronize"))
    }

    /// Reads the output back and counts writes into its guard bands (read
    /// apart from the output: a timed launch's output is read back after
    /// every launch, so it is copied once, not twice).
    pub fn read_output(&self, ws: &Workspace) -> GpuResult<LaunchResult> {
        let (output, mut out_of_bounds_writes) = match &ws.out {
            OutputBuffer::F32(out) => {
                let (output, strays) = self.read_guarded(out, OUTPUT_GUARD_BITS, f32::to_bits)?;
                (output, strays)
            }
            OutputBuffer::Bf16(out) => {
                let (bits, strays) = self.read_guarded(out, BF16_OUTPUT_GUARD_BITS, |b| b)?;
                let output = bits.into_iter().map(args::bf16_output_value).collect();
                (output, strays)
            }
        };
        // A write past a scratch buffer's ends is a stray write too.
        for (_, arg) in &ws.args {
            out_of_bounds_writes += match arg {
                DeviceArg::ScratchF32(t) => self.stray_scratch_writes(t, f32::to_bits)?,
                DeviceArg::ScratchU32(t) => self.stray_scratch_writes(t, |w| w)?,
                _ => 0,
            };
        }
        Ok(LaunchResult {
            output,
            out_of_bounds_writes,
        })
    }

    /// A guarded buffer's contents, and how many of its guard elements no
    /// longer hold `guard` (read apart from the contents: a timed launch's
    /// output is read back after every launch, so it is copied once, not twice).
    fn read_guarded<T: cudarc::driver::DeviceRepr + Copy + Default, B: PartialEq>(
        &self,
        tensor: &Guarded<T>,
        guard: B,
        bits: impl Fn(T) -> B,
    ) -> GpuResult<(Vec<T>, usize)> {
        let end = GUARD_ELEMS + tensor.len;
        let read = |range: std::ops::Range<usize>| {
            self.stream
                .clone_dtoh(&tensor.buffer.slice(range))
                .map_err(gpu_err("cuMemcpyDtoH"))
        };
        let contents = read(GUARD_ELEMS..end)?;
        let before = read(0..GUARD_ELEMS)?;
        let after = read(end..tensor.buffer.len())?;
        let strays = before
            .into_iter()
            .chain(after)
            .filter(|&x| bits(x) != guard)
            .count();
        Ok((contents, strays))
    }

    /// Guard elements of a scratch buffer the launch wrote.
    fn stray_scratch_writes<T: cudarc::driver::DeviceRepr + Copy + Default>(
        &self,
        scratch: &Guarded<T>,
        bits: impl Fn(T) -> u32,
    ) -> GpuResult<usize> {
        let host = self
            .stream
            .clone_dtoh(&scratch.buffer)
            .map_err(gpu_err("cuMemcpyDtoH"))?;
        let words: Vec<u32> = host.into_iter().map(bits).collect();
        Ok(args::scratch_guards_written(
            &words,
            scratch.len,
            OUTPUT_GUARD_BITS,
        ))
    }

    /// Names of the inputs (guards included) that differ bit for bit from
    /// what was uploaded (their pristine copies, once fresh launches began).
    pub fn modified_inputs(&self, ws: &Workspace) -> GpuResult<Vec<String>> {
        let mut modified = Vec::new();
        for (name, arg) in &ws.args {
            let changed = match arg {
                DeviceArg::F32(tensor) => self
                    .stream
                    .clone_dtoh(tensor.pristine.as_ref().unwrap_or(&tensor.buffer))
                    .map_err(gpu_err("cuMemcpyDtoH"))?
                    .iter()
                    .zip(&tensor.host)
                    .any(|(a, b)| a.to_bits() != b.to_bits()),
                DeviceArg::I32(tensor) => self.uploaded_changed(tensor)?,
                DeviceArg::Bf16(tensor) => self.uploaded_changed(tensor)?,
                DeviceArg::U8(tensor) => self.uploaded_changed(tensor)?,
                DeviceArg::Placed(placed) => self.placed_changed(placed)?,
                DeviceArg::Scalar(_)
                | DeviceArg::F32Scalar(_)
                | DeviceArg::Null
                | DeviceArg::Output
                | DeviceArg::ScratchF32(_)
                | DeviceArg::ScratchU32(_) => false,
            };
            if changed {
                modified.push((*name).to_string());
            }
        }
        Ok(modified)
    }

    /// Whether a tensor of integers (or bits) differs from what was uploaded.
    fn uploaded_changed<T: cudarc::driver::DeviceRepr + Copy + Default + PartialEq>(
        &self,
        tensor: &Guarded<T>,
    ) -> GpuResult<bool> {
        Ok(self
            .stream
            .clone_dtoh(tensor.pristine.as_ref().unwrap_or(&tensor.buffer))
            .map_err(gpu_err("cuMemcpyDtoH"))?
            != tensor.host)
    }

    /// Runs the lab's trusted float64 reference kernel on the inputs the
    /// workspace's kernels are given: every output row, or only `rows`
    /// (laid out one after another in the order given).
    pub fn reference_f64(
        &self,
        oracle: &CudaFunction,
        ws: &Workspace,
        rows: Option<&[usize]>,
    ) -> GpuResult<Vec<f64>> {
        let shape = ws.problem.output;
        let launch = ws.lab.support().launch;
        let rows_out = rows.map_or(shape.rows, <[usize]>::len);
        let elements = rows_out * shape.heads * shape.dim;
        let grid_dim = (launch.blocks(rows_out, shape.heads), 1, 1);
        let listed = match rows {
            Some(rows) => {
                let indices = rows
                    .iter()
                    .map(|&r| i32::try_from(r).map_err(GpuError::message))
                    .collect::<GpuResult<Vec<i32>>>()?;
                Some(
                    self.stream
                        .clone_htod(&indices)
                        .map_err(gpu_err("cuMemcpyHtoD"))?,
                )
            }
            None => None,
        };
        let mut out = self
            .stream
            .alloc_zeros::<f64>(elements.max(1))
            .map_err(gpu_err("cuMemAlloc"))?;
        let config = LaunchConfig {
            grid_dim,
            block_dim: (launch.threads(), 1, 1),
            shared_mem_bytes: 0,
        };
        let row_list = RowList {
            rows: listed.as_ref(),
            count: rows.map_or(0, |r| r.len() as i32),
        };
        let mut view = out.as_view_mut();
        // SAFETY: a lab's float64 reference takes the entry point's arguments
        // with `double*` for the output, then a row list and its length
        // (`SupportKernels::oracle_f64`).
        unsafe { self.launch_with(oracle, &ws.args, &mut view, config, Some(row_list)) }?;
        let mut values = self
            .stream
            .clone_dtoh(&out)
            .map_err(gpu_err("cuMemcpyDtoH"))?;
        values.truncate(elements);
        Ok(values)
    }

    /// The SM clock right now, in MHz: cycles counted over `spin_ns` of wall
    /// time (`%globaltimer` ticks every microsecond or faster, so 0.5 ms
    /// reads within about 0.2%).
    pub fn measure_sm_clock(&self, probe: &CudaFunction, spin_ns: u64) -> GpuResult<f64> {
        let mut result = self
            .stream
            .alloc_zeros::<u64>(2)
            .map_err(gpu_err("cuMemAlloc"))?;
        let mut launch = self.stream.launch_builder(probe);
        launch.arg(&mut result).arg(&spin_ns);
        // SAFETY: `clock_probe` in kernels/probes.cu takes (unsigned long long*, unsigned long long).
        unsafe {
            launch.launch(LaunchConfig {
                grid_dim: (1, 1, 1),
                block_dim: (1, 1, 1),
                shared_mem_bytes: 0,
            })
        }
        .map_err(gpu_err("cuLaunchKernel"))?;
        let counts = self
            .stream
            .clone_dtoh(&result)
            .map_err(gpu_err("cuMemcpyDtoH"))?;
        Ok(counts[0] as f64 / counts[1].max(1) as f64 * 1000.0)
    }

    /// A zeroed buffer three times the size of L2 and the kernel that sweeps it.
    pub fn l2_flusher(&self, sweep: &CudaFunction) -> GpuResult<L2Flusher> {
        let bytes = (self.info.l2_bytes.max(1) as usize) * 3;
        Ok(L2Flusher {
            buffer: self.zeroed_floats(bytes / 4)?,
            sink: self.zeroed_floats(1)?,
            sweep: sweep.clone(),
        })
    }

    /// Bytes one [`Self::flush_l2`] reads: a streaming read whose time gives
    /// a measured DRAM bandwidth for free.
    pub fn flush_bytes(flusher: &L2Flusher) -> u64 {
        flusher.buffer.len() as u64 * 4
    }

    /// Evicts L2 by reading the flusher's buffer (queued on the stream, not waited for).
    pub fn flush_l2(&self, flusher: &mut L2Flusher) -> GpuResult<()> {
        let count = (flusher.buffer.len() / 4) as u64;
        let blocks = (self.info.sm_count.max(1) * 4) as u32;
        let mut launch = self.stream.launch_builder(&flusher.sweep);
        launch
            .arg(&flusher.buffer)
            .arg(&count)
            .arg(&mut flusher.sink);
        // SAFETY: `l2_sweep` in kernels/probes.cu takes (const float4*, unsigned
        // long long, float*); the buffer holds `count` float4s (4 floats each).
        unsafe { launch.launch(grid_stride(blocks)) }.map_err(gpu_err("cuLaunchKernel"))?;
        Ok(())
    }

    /// Times `launch` with device events; returns milliseconds.
    pub fn timed(&self, launch: impl FnOnce() -> GpuResult<()>) -> GpuResult<f64> {
        let timing = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
        let start = self
            .ctx
            .new_event(timing)
            .map_err(gpu_err("cuEventCreate"))?;
        let end = self
            .ctx
            .new_event(timing)
            .map_err(gpu_err("cuEventCreate"))?;
        start
            .record(&self.stream)
            .map_err(gpu_err("cuEventRecord"))?;
        launch()?;
        end.record(&self.stream).map_err(gpu_err("cuEventRecord"))?;
        end.synchronize().map_err(gpu_err("cuEventSynchronize"))?;
        Ok(start
            .elapsed_ms(&end)
            .map_err(gpu_err("cuEventElapsedTime"))? as f64)
    }

    /// A buffer of `len` zeroed floats on the stream, for flashprof's own
    /// kernels (probes, sinks, the L2 flusher).
    pub(super) fn zeroed_floats(&self, len: usize) -> GpuResult<CudaSlice<f32>> {
        self.stream
            .alloc_zeros::<f32>(len)
            .map_err(gpu_err("cuMemAlloc"))
    }

    /// Loads one of flashprof's own kernels (not a student's) from an image.
    pub fn load_support(&self, image: &[u8], entry: &str) -> GpuResult<CudaFunction> {
        let module = self
            .ctx
            .load_module(Ptx::from_binary(image.to_vec()))
            .map_err(gpu_err("cuModuleLoadData"))?;
        module
            .load_function(entry)
            .map_err(gpu_err("cuModuleGetFunction"))
    }
}

impl GpuError {
    /// An error from setting up the GPU side that is not a CUDA call's failure.
    pub fn message(message: impl std::fmt::Display) -> Self {
        Self {
            call: "setup",
            name: message.to_string(),
            sticky: false,
            out_of_memory: false,
        }
    }
}
