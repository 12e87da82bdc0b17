//! Fresh inputs for every launch after the upload (docs/INTEGRITY.md, rule
//! 2): each launch is handed a copy of its inputs made on the GPU from
//! pristine copies no kernel is given, drawn again, planted and with block
//! ids moved as the lab's [`Redraw`] says, by `kernels/probes.cu`'s one rule
//! (`FreshRule` there, [`FreshRule`] here; the two layouts must agree).
//! The same rule, run again after the launch, counts the elements the launch
//! changed, and a fingerprint of the pristine copies finds a kernel that
//! wrote into them.
#![allow(unsafe_code)]

use cudarc::driver::{CudaFunction, CudaSlice, DevicePtr, DeviceRepr, PushKernelArg};

use super::{gpu_err, grid_stride, DeviceArg, Gpu, GpuError, GpuResult, Guarded, Workspace};
use crate::lab::args::GUARD_ELEMS;
use crate::lab::redraw::{PlantValue, Redraw};

/// How a fresh launch's values come from their pristine copies: every float
/// (and bf16) element inside `low..high` drawn again from `seed`, every
/// finite FP8 byte given a fresh sign and low mantissa bits; an empty range
/// copies.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Draw {
    pub seed: u64,
    pub low: f32,
    pub high: f32,
}

impl Draw {
    /// The pristine values themselves (what the host generated and knows).
    pub const COPY: Self = Self {
        seed: 0,
        low: 1.0,
        high: 0.0,
    };
}

/// flashprof's kernels that make and verify fresh inputs (kernels/probes.cu):
/// one pair per element size, and the pristine copies' fingerprint.
pub struct FreshKernels {
    /// 4-byte words: float and int tensors.
    words: FreshPair,
    /// 2-byte elements: bf16.
    halves: FreshPair,
    /// Bytes: FP8.
    bytes: FreshPair,
    fingerprint: CudaFunction,
}

/// The kernel that draws a tensor's fresh copy, and the one that counts
/// where a launch's copy differs from that draw.
struct FreshPair {
    fill: CudaFunction,
    changed: CudaFunction,
}

impl FreshKernels {
    /// The kernels of kernels/probes.cu, from its compiled image `probes`.
    pub fn load(gpu: &Gpu, probes: &[u8]) -> GpuResult<FreshKernels> {
        let pair = |name: &str| -> GpuResult<FreshPair> {
            Ok(FreshPair {
                fill: gpu.load_support(probes, name)?,
                changed: gpu.load_support(probes, &format!("{name}_changed"))?,
            })
        };
        Ok(FreshKernels {
            words: pair("fresh_words")?,
            halves: pair("fresh_halves")?,
            bytes: pair("fresh_bytes")?,
            fingerprint: gpu.load_support(probes, "fingerprint_bytes")?,
        })
    }
}

/// One planted span as `kernels/probes.cu` reads it.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct PlantSpan {
    start: u64,
    end: u64,
    low: f32,
    high: f32,
    bits: u32,
    constant: u32,
}

// SAFETY: plain `repr(C)` data with no pointers, laid out as `PlantSpan` in
// kernels/probes.cu (two u64, two float, two unsigned: 32 bytes).
unsafe impl DeviceRepr for PlantSpan {}

/// How one tensor is drawn, as `kernels/probes.cu`'s `FreshRule` (passed by
/// value; device pointers as 64-bit addresses, 0 for none).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct FreshRule {
    count: u64,
    begin: u64,
    end: u64,
    seed: u64,
    low: f32,
    high: f32,
    mode: u32,
    span_count: u32,
    spans: u64,
    block_source: u64,
    block_map: u64,
    block_elems: u64,
    block_count: u64,
}

// SAFETY: `repr(C)` data laid out as `FreshRule` in kernels/probes.cu (four
// u64, two float, two unsigned, five u64: 88 bytes); its pointers are device
// addresses the kernel only reads, kept alive by [`Drawn`] for every launch.
unsafe impl DeviceRepr for FreshRule {}

/// `FreshMode` in kernels/probes.cu.
#[derive(Clone, Copy)]
enum Mode {
    Copy = 0,
    Float = 1,
    Bf16 = 2,
    Fp8 = 3,
}

/// The device side of the last fresh launch's draw, kept for the check
/// after it.
pub(super) struct Drawn {
    draw: Draw,
    /// Per argument (in the entry point's order): its plant spans.
    spans: Vec<Option<(CudaSlice<PlantSpan>, u32)>>,
    blocks: Option<MovedBlocks>,
}

impl Default for Drawn {
    fn default() -> Self {
        Self {
            draw: Draw::COPY,
            spans: Vec::new(),
            blocks: None,
        }
    }
}

/// A block move on the device.
struct MovedBlocks {
    table: &'static str,
    caches: Vec<(&'static str, usize)>,
    /// For each launched block, the pristine block it holds.
    sources: CudaSlice<u32>,
    /// For each pristine id, the launched one.
    map: CudaSlice<u32>,
    count: u64,
}

/// Argument `index`'s own stream of `draw`: two tensors never get the same
/// values (equal Q and K would plant large scores everywhere).
fn tensor_draw(draw: Draw, index: usize) -> Draw {
    Draw {
        seed: draw
            .seed
            .wrapping_add((index as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03)),
        ..draw
    }
}

impl Gpu {
    /// Keeps a pristine device copy of every input tensor, so that each
    /// launch after this one can be given fresh inputs ([`Self::fresh_inputs`]).
    pub fn keep_pristine(&self, ws: &mut Workspace) -> GpuResult<()> {
        for (_, arg) in &mut ws.args {
            match arg {
                DeviceArg::F32(t) => self.keep_copy(t)?,
                DeviceArg::I32(t) => self.keep_copy(t)?,
                DeviceArg::Bf16(t) => self.keep_copy(t)?,
                DeviceArg::U8(t) => self.keep_copy(t)?,
                // Fresh copies are drawn for timed and profiled launches, and
                // the planner refuses a placed case for them; refuse here
                // too rather than hand a launch an input that is not fresh.
                DeviceArg::Placed(_) => {
                    return Err(GpuError::message(
                        "a high-blocks case places its cache past 2^31 elements and has no \
                         fresh copies for timed or profiled launches: choose another case",
                    ))
                }
                DeviceArg::Scalar(_)
                | DeviceArg::F32Scalar(_)
                | DeviceArg::Null
                | DeviceArg::Output
                | DeviceArg::ScratchF32(_)
                | DeviceArg::ScratchU32(_) => {}
            }
        }
        Ok(())
    }

    fn keep_copy<T: DeviceRepr>(&self, tensor: &mut Guarded<T>) -> GpuResult<()> {
        let copy = self
            .stream
            .clone_dtod(&tensor.buffer)
            .map_err(gpu_err("cuMemcpyDtoD"))?;
        tensor.pristine = Some(copy);
        Ok(())
    }

    /// Queues the next launch's inputs: every tensor made from its pristine
    /// copy by `draw` (each from its own stream of `draw.seed`) and
    /// `redraw`'s plants and block move.
    pub fn fresh_inputs(
        &self,
        ws: &mut Workspace,
        kernels: &FreshKernels,
        draw: Draw,
        redraw: &Redraw,
    ) -> GpuResult<()> {
        ws.drawn = self.upload_redraw(ws, draw, redraw)?;
        self.fresh_passes(ws, kernels, |pair| &pair.fill, None)
    }

    /// The inputs the last launch changed, with how many elements of each:
    /// every tensor (guards included) against what [`Self::fresh_inputs`] made.
    pub fn changed_inputs(
        &self,
        ws: &mut Workspace,
        kernels: &FreshKernels,
    ) -> GpuResult<Vec<(String, u64)>> {
        let mut counts = self
            .stream
            .alloc_zeros::<u64>(ws.args.len())
            .map_err(gpu_err("cuMemAlloc"))?;
        self.fresh_passes(ws, kernels, |pair| &pair.changed, Some(&mut counts))?;
        let counts = self
            .stream
            .clone_dtoh(&counts)
            .map_err(gpu_err("cuMemcpyDtoH"))?;
        Ok(ws
            .args
            .iter()
            .zip(counts)
            .filter(|(_, n)| *n > 0)
            .map(|((name, _), n)| ((*name).to_string(), n))
            .collect())
    }

    /// A fingerprint of each pristine copy, by input: equal before and after
    /// a launch unless the launch wrote into harness memory.
    pub fn pristine_fingerprints(
        &self,
        ws: &Workspace,
        kernels: &FreshKernels,
    ) -> GpuResult<Vec<(&'static str, u64)>> {
        let mut sums = self
            .stream
            .alloc_zeros::<u64>(ws.args.len().max(1))
            .map_err(gpu_err("cuMemAlloc"))?;
        let mut named = Vec::new();
        for (index, (name, arg)) in ws.args.iter().enumerate() {
            let pristine = match arg {
                DeviceArg::F32(t) => pristine_bytes(self, t),
                DeviceArg::I32(t) => pristine_bytes(self, t),
                DeviceArg::Bf16(t) => pristine_bytes(self, t),
                DeviceArg::U8(t) => pristine_bytes(self, t),
                _ => None,
            };
            let Some((address, bytes, _sync)) = pristine else {
                continue;
            };
            named.push((index, *name));
            let blocks = (self.info.sm_count.max(1) * 8) as u32;
            let mut sum = sums.slice_mut(index..index + 1);
            let mut launch = self.stream.launch_builder(&kernels.fingerprint);
            launch.arg(&address).arg(&bytes).arg(&mut sum);
            // SAFETY: `fingerprint_bytes` takes (const unsigned char*,
            // unsigned long long, unsigned long long*); `address` is a live
            // device buffer of `bytes` bytes (its guard during the launch
            // held by `_sync`), `sum` one u64.
            unsafe { launch.launch(grid_stride(blocks)) }.map_err(gpu_err("cuLaunchKernel"))?;
        }
        let sums = self
            .stream
            .clone_dtoh(&sums)
            .map_err(gpu_err("cuMemcpyDtoH"))?;
        Ok(named
            .into_iter()
            .map(|(index, name)| (name, sums[index]))
            .collect())
    }

    /// `redraw` on the device, checked against the workspace's tensors.
    fn upload_redraw(&self, ws: &Workspace, draw: Draw, redraw: &Redraw) -> GpuResult<Drawn> {
        let mut spans = Vec::with_capacity(ws.args.len());
        for (name, arg) in &ws.args {
            let len = input_len(arg).unwrap_or(0);
            let laid: Vec<PlantSpan> = redraw
                .spans_of(name)
                .into_iter()
                .map(|planted| {
                    if planted.span.end > len {
                        return Err(GpuError::message(format!(
                            "a plant of `{name}` ends at element {}, past its {len}",
                            planted.span.end
                        )));
                    }
                    let (low, high, bits, constant) = match (planted.value, arg) {
                        (PlantValue::Constant(bits), _) => (0.0, 0.0, bits, 1),
                        // FP8 bytes have no uniform draw over a range.
                        (PlantValue::Drawn { .. }, DeviceArg::U8(_)) => {
                            return Err(GpuError::message(format!(
                                "a plant of `{name}` draws over a range; its FP8 bytes take constants only"
                            )))
                        }
                        (PlantValue::Drawn { low, high }, _) => (low, high, 0, 0),
                    };
                    Ok(PlantSpan {
                        start: planted.span.start as u64,
                        end: planted.span.end as u64,
                        low,
                        high,
                        bits,
                        constant,
                    })
                })
                .collect::<GpuResult<_>>()?;
            spans.push(match laid.is_empty() {
                true => None,
                false => Some((
                    self.stream
                        .clone_htod(&laid)
                        .map_err(gpu_err("cuMemcpyHtoD"))?,
                    laid.len() as u32,
                )),
            });
        }
        let blocks = match &redraw.blocks {
            None => None,
            Some(moved) => {
                for (cache, elems) in &moved.caches {
                    let len = ws
                        .args
                        .iter()
                        .find(|(name, _)| name == cache)
                        .and_then(|(_, arg)| input_len(arg));
                    if len != Some(elems * moved.map.len()) {
                        return Err(GpuError::message(format!(
                            "`{cache}` is not {} blocks of {elems} elements",
                            moved.map.len()
                        )));
                    }
                }
                let upload =
                    |ids: &[u32]| self.stream.clone_htod(ids).map_err(gpu_err("cuMemcpyHtoD"));
                Some(MovedBlocks {
                    table: moved.table,
                    caches: moved.caches.clone(),
                    sources: upload(&moved.sources())?,
                    map: upload(&moved.map)?,
                    count: moved.map.len() as u64,
                })
            }
        };
        Ok(Drawn {
            draw,
            spans,
            blocks,
        })
    }

    /// The `which` kernel of each element size's pair over every input
    /// tensor under the workspace's last draw, counting into
    /// `counts[argument]` when counts are asked for.
    fn fresh_passes(
        &self,
        ws: &mut Workspace,
        kernels: &FreshKernels,
        which: fn(&FreshPair) -> &CudaFunction,
        mut counts: Option<&mut CudaSlice<u64>>,
    ) -> GpuResult<()> {
        let drawn = &ws.drawn;
        for (index, (name, arg)) in ws.args.iter_mut().enumerate() {
            let mut count = counts.as_mut().map(|c| c.slice_mut(index..index + 1));
            let own = tensor_draw(drawn.draw, index);
            let spans = drawn.spans.get(index).and_then(Option::as_ref);
            let (pair, mode) = match arg {
                DeviceArg::F32(_) => (&kernels.words, Mode::Float),
                DeviceArg::I32(_) => (&kernels.words, Mode::Copy),
                DeviceArg::Bf16(_) => (&kernels.halves, Mode::Bf16),
                DeviceArg::U8(_) => (&kernels.bytes, Mode::Fp8),
                _ => continue,
            };
            let pass = Pass {
                function: which(pair),
                draw: own,
                mode,
                spans,
                blocks: drawn.blocks.as_ref(),
                name,
            };
            match arg {
                DeviceArg::F32(t) => self.fresh_pass(t, &pass, count.as_mut())?,
                DeviceArg::I32(t) => self.fresh_pass(t, &pass, count.as_mut())?,
                DeviceArg::Bf16(t) => self.fresh_pass(t, &pass, count.as_mut())?,
                DeviceArg::U8(t) => self.fresh_pass(t, &pass, count.as_mut())?,
                _ => {}
            }
        }
        Ok(())
    }

    /// One pass of a fill kernel (no `changed`) or its counting twin over a
    /// tensor and its guards.
    fn fresh_pass<T: DeviceRepr>(
        &self,
        tensor: &mut Guarded<T>,
        pass: &Pass<'_>,
        changed: Option<&mut cudarc::driver::CudaViewMut<'_, u64>>,
    ) -> GpuResult<()> {
        let pristine = tensor
            .pristine
            .as_ref()
            .ok_or_else(|| GpuError::message("fresh inputs need a pristine copy"))?;
        // Device addresses handed over inside the rule; their guards are
        // held until the launch is queued.
        let mut held = Vec::new();
        let (span_count, spans) = match pass.spans {
            Some((spans, count)) => {
                let (pointer, sync) = spans.device_ptr(&self.stream);
                held.push(sync);
                (*count, pointer)
            }
            None => (0, 0),
        };
        let (mut block_source, mut block_map, mut block_elems, mut block_count) = (0, 0, 0, 0);
        if let Some(moved) = pass.blocks {
            block_count = moved.count;
            if let Some(&(_, elems)) = moved.caches.iter().find(|(n, _)| *n == pass.name) {
                let (pointer, sync) = moved.sources.device_ptr(&self.stream);
                held.push(sync);
                (block_source, block_elems) = (pointer, elems as u64);
            }
            if moved.table == pass.name {
                let (pointer, sync) = moved.map.device_ptr(&self.stream);
                held.push(sync);
                block_map = pointer;
            }
        }
        let rule = FreshRule {
            count: tensor.host.len() as u64,
            begin: GUARD_ELEMS as u64,
            end: (GUARD_ELEMS + tensor.len) as u64,
            seed: pass.draw.seed,
            low: pass.draw.low,
            high: pass.draw.high,
            mode: pass.mode as u32,
            span_count,
            spans,
            block_source,
            block_map,
            block_elems,
            block_count,
        };
        let blocks = (self.info.sm_count.max(1) * 8) as u32;
        let mut launch = self.stream.launch_builder(pass.function);
        launch.arg(pristine).arg(&mut tensor.buffer).arg(&rule);
        if let Some(changed) = changed {
            launch.arg(changed);
        }
        // SAFETY: every fresh kernel of kernels/probes.cu takes (const T*, T*,
        // FreshRule), the counting ones a trailing unsigned long long*, with
        // T the element of its size; `fresh_passes` picks the pair of this
        // tensor's element size; both buffers hold `count` such elements;
        // the rule's addresses are live buffers held above (spans sorted and
        // inside the tensor, checked by `upload_redraw`; block arrays of
        // `block_count` ids, each cache `block_count` blocks of `block_elems`).
        unsafe { launch.launch(grid_stride(blocks)) }.map_err(gpu_err("cuLaunchKernel"))?;
        drop(held);
        Ok(())
    }
}

/// Elements of an input tensor (guard bands left out); `None` for any other argument.
fn input_len(arg: &DeviceArg) -> Option<usize> {
    match arg {
        DeviceArg::F32(t) => Some(t.len),
        DeviceArg::I32(t) => Some(t.len),
        DeviceArg::Bf16(t) => Some(t.len),
        DeviceArg::U8(t) => Some(t.len),
        _ => None,
    }
}

/// What one tensor's pass needs besides the tensor.
struct Pass<'a> {
    function: &'a CudaFunction,
    draw: Draw,
    mode: Mode,
    spans: Option<&'a (CudaSlice<PlantSpan>, u32)>,
    blocks: Option<&'a MovedBlocks>,
    name: &'static str,
}

/// A pristine copy's device address and size in bytes, with the guard that
/// keeps the stream ordered while it is read.
fn pristine_bytes<'a, T>(
    gpu: &'a Gpu,
    tensor: &'a Guarded<T>,
) -> Option<(u64, u64, cudarc::driver::SyncOnDrop<'a>)> {
    let pristine = tensor.pristine.as_ref()?;
    let (address, sync) = pristine.device_ptr(&gpu.stream);
    Some((
        address,
        (tensor.host.len() * std::mem::size_of::<T>()) as u64,
        sync,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::compile::{compile_trusted, CompileOptions};

    /// The parameter of `entry` at `index` in `ptx`, as `.b8 name[bytes]`: its size.
    fn param_bytes(ptx: &str, entry: &str, index: usize) -> usize {
        let name = format!("{entry}_param_{index}[");
        let at = ptx
            .find(&name)
            .unwrap_or_else(|| panic!("{name} in the PTX"));
        let digits: String = ptx[at + name.len()..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().expect("a size")
    }

    #[test]
    fn the_rule_passed_by_value_has_the_layout_the_probes_read() {
        // The kernels read `FreshRule` by value: a field added on one side
        // only would shift every field after it.
        let ptx = compile_trusted(
            "kernels/probes.cu",
            super::super::PROBES_SOURCE,
            &CompileOptions::for_arch(None),
        )
        .expect("the probes compile (scripts/test.sh provides NVRTC)");
        let ptx = String::from_utf8_lossy(&ptx);
        for entry in ["fresh_words", "fresh_halves_changed", "fresh_bytes"] {
            assert_eq!(
                param_bytes(&ptx, entry, 2),
                std::mem::size_of::<FreshRule>(),
                "{entry}"
            );
        }
        assert_eq!(std::mem::size_of::<FreshRule>(), 88);
        assert_eq!(std::mem::size_of::<PlantSpan>(), 32);
        assert_eq!(std::mem::align_of::<PlantSpan>(), 8);
    }
}
