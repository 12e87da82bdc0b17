//! Roofline reading of one profiled launch: how busy each unit of the GPU
//! was against its own peak, which one holds the kernel back (if any), and
//! how far the kernel is from the GPU's compute and memory roofs.
//!
//! The inputs are plain numbers so this stays pure: the caller copies them
//! out of the CUPTI metric values (the worker names the metric for each
//! unit). The verdict uses a fixed threshold of [`BOUND_THRESHOLD_PCT`] of a
//! unit's peak: a kernel that reaches it on some unit is limited by the
//! busiest such unit, and the advice follows from which unit that is; one
//! that reaches it nowhere is stalled on latency or short of parallelism,
//! which achieved occupancy helps tell apart.

use serde::{Deserialize, Serialize};

/// Share of a peak (percent) at or above which a kernel counts as bound by it.
pub const BOUND_THRESHOLD_PCT: f64 = 60.0;

/// Where a peak figure came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PeakSource {
    /// A micro-benchmark on this GPU reached it.
    Measured,
    /// Derived from the driver's attributes (SM count, clocks, bus width)
    /// and the architecture's per-SM rates: what the datasheet would say.
    Attributes,
}

/// One roof: a rate and where the figure came from.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Roof {
    /// FLOP/s or bytes/s.
    pub per_s: f64,
    pub source: PeakSource,
    /// How busy CUPTI read the roof's pipe (percent of its peak) while its
    /// benchmark ran; `per_s` is then scaled to a full pipe. `None` until
    /// read (and for DRAM, which has no pipe).
    #[serde(default)]
    pub pipe_pct_at_peak: Option<f64>,
}

impl Roof {
    /// Records that the benchmark kept its pipe `load` percent busy and
    /// scales the rate to a full pipe; a load that is missing or not
    /// plausible (under half, or over 100.5%) changes nothing. True when it
    /// scaled.
    pub fn scale_to_full_pipe(&mut self, load: Option<f64>) -> bool {
        match load.filter(|pct| (50.0..=100.5).contains(pct)) {
            Some(pct) => {
                self.per_s *= 100.0 / pct.min(100.0);
                self.pipe_pct_at_peak = Some(pct);
                true
            }
            None => false,
        }
    }
}

/// Peak rates of the GPU in use.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DevicePeaks {
    pub name: String,
    /// FP32 FLOP/s on the FMA pipe (an FMA counts as two).
    pub fp32_flops: Roof,
    /// Dense TF32 tensor-core FLOP/s; `None` on GPUs without TF32 tensor cores.
    pub tf32_flops: Option<Roof>,
    /// Dense BF16 tensor-core FLOP/s with FP32 accumulate (the rate of
    /// `mma.sync ... .f32.bf16.bf16.f32`); `None` on GPUs without BF16
    /// tensor cores, and in reports and cached peaks saved before flashprof
    /// measured it.
    #[serde(default)]
    pub bf16_flops: Option<Roof>,
    /// DRAM bytes per second.
    pub dram_bytes: Roof,
}

impl DevicePeaks {
    /// Arithmetic intensity (FLOP per DRAM byte) where the FP32 and DRAM roofs meet.
    pub fn ridge_point(&self) -> f64 {
        self.fp32_flops.per_s / self.dram_bytes.per_s
    }

    /// The roof of `kind`, where the GPU has it.
    pub fn tensor_roof(&self, kind: TensorRoof) -> Option<&Roof> {
        match kind {
            TensorRoof::Tf32 => self.tf32_flops.as_ref(),
            TensorRoof::Bf16 => self.bf16_flops.as_ref(),
        }
    }

    /// The tensor-core roofs the GPU has, each with its name, slowest first.
    pub fn tensor_roofs(&self) -> impl Iterator<Item = (&'static str, &Roof)> {
        [("TF32", &self.tf32_flops), ("BF16", &self.bf16_flops)]
            .into_iter()
            .filter_map(|(name, roof)| Some((name, roof.as_ref()?)))
    }

    /// Whether every roof `other` has, this one has too: cached peaks
    /// measured by an older flashprof lack the roofs it did not know.
    pub fn has_every_roof_of(&self, other: &DevicePeaks) -> bool {
        other
            .tensor_roofs()
            .all(|(name, _)| self.tensor_roofs().any(|(mine, _)| mine == name))
    }

    /// The roofs in one line, each with where it came from.
    pub fn summary(&self) -> String {
        let source = |roof: &Roof| {
            let source = match roof.source {
                PeakSource::Measured => "measured",
                PeakSource::Attributes => "from attributes",
            };
            match roof.pipe_pct_at_peak {
                Some(pct) => format!(
                    "{source} at {:.1} with the pipe {pct:.0}% busy",
                    roof.per_s * pct.min(100.0) / 100.0 / 1e12
                ),
                None => source.to_string(),
            }
        };
        let tensor: String = self
            .tensor_roofs()
            .map(|(name, roof)| {
                format!(
                    ", {name} tensor {:.0} TFLOP/s ({})",
                    roof.per_s / 1e12,
                    source(roof)
                )
            })
            .collect();
        format!(
            "FP32 {:.1} TFLOP/s ({}){tensor}, DRAM {:.2} TB/s ({})",
            self.fp32_flops.per_s / 1e12,
            source(&self.fp32_flops),
            self.dram_bytes.per_s / 1e12,
            source(&self.dram_bytes)
        )
    }
}

/// The tensor-core roof a lab's arithmetic is read against: the operand
/// type its contract's matrix products can run on the tensor cores in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TensorRoof {
    Tf32,
    Bf16,
}

impl TensorRoof {
    /// `BF16`, as the roofs are named.
    pub fn name(self) -> &'static str {
        match self {
            TensorRoof::Tf32 => "TF32",
            TensorRoof::Bf16 => "BF16",
        }
    }
}

/// Below this load (percent) the tensor pipe counts as unused.
pub const TENSOR_IDLE_PCT: f64 = 5.0;

/// How a launch used the tensor cores its lab's arithmetic is read against.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TensorUse {
    pub roof: TensorRoof,
    /// The roof, in FLOP/s.
    pub roof_flops_per_s: f64,
    /// The useful rate (the algorithm's flops over the time) as a share of the roof.
    pub peak_pct: f64,
    /// How busy CUPTI read the tensor pipe; `None` when not measured.
    pub pipe_pct: Option<f64>,
}

impl TensorUse {
    /// Whether the tensor pipe was measured and found (nearly) idle.
    pub fn unused(&self) -> bool {
        self.pipe_pct.is_some_and(|pct| pct < TENSOR_IDLE_PCT)
    }

    /// The tensor cores' use in one clause.
    pub fn describe(&self, achieved_gflops: f64) -> String {
        let name = self.roof.name();
        let rate = format!(
            "{:.1} TFLOP/s useful = {:.1}% of the {name} tensor roof ({:.0} TFLOP/s)",
            achieved_gflops / 1e3,
            self.peak_pct,
            self.roof_flops_per_s / 1e12
        );
        match self.pipe_pct {
            Some(pct) if pct < TENSOR_IDLE_PCT => format!(
                "{name} tensor cores unused: the tensor pipe is {pct:.0}% busy, so the dot \
                 products run on the CUDA cores; {rate}"
            ),
            Some(pct) => format!("{name} tensor cores in use: tensor pipe {pct:.0}% busy, {rate}"),
            None => format!("{name} tensor cores: tensor pipe not measured, {rate}"),
        }
    }
}

/// A unit of the GPU whose use CUPTI measures as a share of its peak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    /// FP32 multiply-add pipe (FFMA, FADD, FMUL, and IMAD).
    FmaPipe,
    /// Tensor cores.
    TensorPipe,
    /// Integer, compare and logic pipe.
    AluPipe,
    /// Special functions and conversions (MUFU: exp, reciprocal, ...).
    SpecialFunctionPipe,
    /// Double precision.
    Fp64Pipe,
    /// Load/store instruction issue to the memory pipeline.
    LoadStorePipe,
    /// Warp instruction issue of the whole SM.
    InstructionIssue,
    /// Shared-memory data path of L1.
    SharedMemory,
    L1,
    L2,
    Dram,
}

impl Unit {
    pub fn label(self) -> &'static str {
        match self {
            Unit::FmaPipe => "FP32 FMA pipe",
            Unit::TensorPipe => "tensor pipe",
            Unit::AluPipe => "ALU pipe",
            Unit::SpecialFunctionPipe => "special-function pipe",
            Unit::Fp64Pipe => "FP64 pipe",
            Unit::LoadStorePipe => "load/store issue",
            Unit::InstructionIssue => "instruction issue",
            Unit::SharedMemory => "shared memory",
            Unit::L1 => "L1/TEX",
            Unit::L2 => "L2",
            Unit::Dram => "DRAM",
        }
    }

    /// Whether the unit moves data rather than computing.
    pub fn is_memory(self) -> bool {
        matches!(
            self,
            Unit::SharedMemory | Unit::L1 | Unit::L2 | Unit::Dram | Unit::LoadStorePipe
        )
    }

    /// What to try when this unit is the one at its peak.
    fn next_step(self) -> &'static str {
        match self {
            Unit::FmaPipe => {
                "the FP32 pipe is nearly full: fewer instructions per useful flop, or move the \
                 matrix products to tensor cores (3xTF32 keeps fp32 accuracy)"
            }
            Unit::TensorPipe => {
                "the tensor cores are nearly full: what is left is overlap (load the next tile \
                 while this one multiplies) and fewer split-precision products"
            }
            Unit::AluPipe => {
                "integer and compare work dominates: hoist index arithmetic and masks out of the \
                 inner loop"
            }
            Unit::SpecialFunctionPipe => {
                "exp, division and conversions dominate: exp2f on pre-scaled scores, one \
                 reciprocal per row instead of a division per element"
            }
            Unit::Fp64Pipe => {
                "double precision is the busy unit: look for double literals (1.0 instead of \
                 1.0f) and double math functions"
            }
            Unit::LoadStorePipe => {
                "too many load/store instructions: wider loads (float4) and each value kept in \
                 a register instead of re-read"
            }
            Unit::InstructionIssue => {
                "the SM issues an instruction nearly every cycle: fewer instructions per flop \
                 (unrolling, register tiling)"
            }
            Unit::SharedMemory => {
                "shared-memory bandwidth: bank conflicts, or the same value read by many \
                 threads; keep reused values in registers (register tiling)"
            }
            Unit::L1 => "L1 bandwidth: reuse data from registers or shared memory",
            Unit::L2 => {
                "L2 bandwidth: tiles are re-read from L2; larger tiles, or share K/V across a \
                 KV group"
            }
            Unit::Dram => {
                "DRAM bandwidth: move fewer bytes (each input read once, reuse through shared \
                 memory)"
            }
        }
    }
}

/// How busy one unit was, as a percentage of its peak over the kernel's
/// elapsed cycles, as CUPTI (and Nsight Compute) report it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct UnitLoad {
    pub unit: Unit,
    pub pct_of_peak: f64,
}

impl UnitLoad {
    pub fn new(unit: Unit, pct_of_peak: f64) -> Self {
        Self { unit, pct_of_peak }
    }

    /// `tensor pipe 44%`.
    pub fn describe(&self) -> String {
        format!("{} {:.0}%", self.unit.label(), self.pct_of_peak)
    }
}

/// What was measured for one launch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    /// `dram__bytes_read.sum`.
    pub dram_bytes_read: f64,
    /// `dram__bytes_write.sum`.
    pub dram_bytes_write: f64,
    /// `gpu__time_duration.sum`, nanoseconds.
    pub duration_ns: f64,
    /// `sm__throughput.avg.pct_of_peak_sustained_elapsed` when the costly
    /// full set was collected: the busiest SM sub-unit, named or not.
    pub sm_throughput_pct: Option<f64>,
    /// `sm__warps_active.avg.pct_of_peak_sustained_active`.
    pub achieved_occupancy_pct: Option<f64>,
    /// Each unit CUPTI measured. When DRAM is missing it is computed from
    /// the bytes; when no compute unit is there, the useful FP32 rate
    /// stands in for the FMA pipe (a lower bound of its use).
    pub units: Vec<UnitLoad>,
    /// Whether `units` holds the full breakdown or only the quick set's.
    pub full_breakdown: bool,
    /// The bytes moved at the levels above DRAM (L2, shared memory), each
    /// with its bandwidth where CUPTI gave one.
    #[serde(default)]
    pub levels: Vec<LevelTraffic>,
}

/// The bytes one memory level moved during a launch, and its peak.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LevelTraffic {
    /// [`Unit::L2`] or [`Unit::SharedMemory`].
    pub unit: Unit,
    pub bytes: f64,
    /// The level's peak bandwidth during this launch (its peak bytes per
    /// cycle times the clock it ran at); `None` when not measured.
    pub peak_bytes_per_s: Option<f64>,
}

/// One memory level of a hierarchical roofline: the kernel's intensity
/// there (useful flops over the bytes that level moved) and the level's roof.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MemoryLevel {
    pub unit: Unit,
    pub bytes: f64,
    pub flop_per_byte: f64,
    /// Bytes per second; `None` draws the point without a roof.
    pub peak_bytes_per_s: Option<f64>,
}

/// Where a launch sits on a roofline: an intensity and a useful rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RooflinePoint {
    pub flop_per_byte: f64,
    pub flops_per_s: f64,
}

impl RooflinePoint {
    /// The point, when it can be drawn on log axes.
    fn placed(flop_per_byte: f64, flops_per_s: f64) -> Option<Self> {
        let positive = |x: f64| x.is_finite() && x > 0.0;
        (positive(flop_per_byte) && positive(flops_per_s)).then_some(Self {
            flop_per_byte,
            flops_per_s,
        })
    }
}

/// Which kind of roof limits the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Bound {
    /// A compute unit (named in the verdict) is near its peak.
    Compute,
    /// A memory unit (named in the verdict) is near its peak.
    Bandwidth,
    /// No unit is close: latency, occupancy or too little parallel work.
    Neither,
}

impl Bound {
    /// One or two words for a label.
    pub fn word(self) -> &'static str {
        match self {
            Bound::Compute => "compute-bound",
            Bound::Bandwidth => "memory-bound",
            Bound::Neither => "latency-bound",
        }
    }
}

/// The bound, the unit that decided it, and what to try next.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub bound: Bound,
    /// The busiest measured unit, whether or not it reached the threshold.
    #[serde(default)]
    pub busiest: Option<UnitLoad>,
    /// The figures that decided it, in one line (without the bound's name).
    pub reason: String,
    /// The next thing to try, following from the busiest unit.
    #[serde(default)]
    pub next_step: String,
}

/// DRAM traffic, reads and writes each against their own floor.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DramTraffic {
    pub read_bytes: f64,
    pub write_bytes: f64,
    /// Every input read once.
    pub read_floor_bytes: u64,
    /// The output written once.
    pub write_floor_bytes: u64,
    /// Reads over their floor; 1.0 is ideal, below 1 means an input stayed in L2 between launches.
    /// NaN without a floor.
    #[serde(with = "crate::nonfinite")]
    pub reads_over_floor: f64,
    /// Writes over the output's size. Below 1 is normal: output lines still
    /// dirty in L2 when the kernel ends are written back later, uncounted.
    #[serde(with = "crate::nonfinite")]
    pub writes_over_floor: f64,
}

impl DramTraffic {
    /// Reads and writes, each against its floor, in one line.
    pub fn summary(&self) -> String {
        format!(
            "read {:.1} MB ({:.2}x the inputs), written {:.1} MB ({:.2}x the output)",
            self.read_bytes / 1e6,
            self.reads_over_floor,
            self.write_bytes / 1e6,
            self.writes_over_floor
        )
    }
}

/// The roofline figures of one launch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Roofline {
    /// Reads plus writes.
    pub dram_bytes: f64,
    #[serde(default)]
    pub dram: Option<DramTraffic>,
    pub compulsory_bytes: u64,
    /// FLOP per DRAM byte; infinite when CUPTI counted no DRAM byte.
    #[serde(with = "crate::nonfinite")]
    pub arithmetic_intensity: f64,
    /// Where this device's FP32 and DRAM roofs meet, in FLOP per byte.
    pub ridge_point: f64,
    /// The algorithm's flops over the kernel's time (not the instructions it ran).
    pub achieved_gflops: f64,
    pub fp32_peak_pct: f64,
    /// The same useful rate against the TF32 tensor roof, where the GPU has one.
    #[serde(default)]
    pub tf32_peak_pct: Option<f64>,
    /// The tensor cores against the roof the lab's arithmetic is read
    /// against ([`Work::tensor_roof`]), where the lab names one and the GPU has it.
    #[serde(default)]
    pub tensor: Option<TensorUse>,
    pub dram_bandwidth_pct: f64,
    /// Every measured unit, busiest first.
    #[serde(default)]
    pub units: Vec<UnitLoad>,
    pub verdict: Verdict,
    /// The levels above DRAM that were measured, closest to the SM first;
    /// empty in reports saved before flashprof read them.
    #[serde(default)]
    pub levels: Vec<MemoryLevel>,
}

impl Roofline {
    /// The launch at its DRAM intensity.
    pub fn dram_point(&self) -> Option<RooflinePoint> {
        RooflinePoint::placed(self.arithmetic_intensity, self.achieved_gflops * 1e9)
    }

    /// The shared-memory level, then the L2 level, each when measured. A
    /// stored report may hold any list (other units, one unit many times):
    /// only the first of each of these two is a level.
    pub fn levels_above_dram(&self) -> impl Iterator<Item = &MemoryLevel> {
        [Unit::SharedMemory, Unit::L2]
            .into_iter()
            .filter_map(|unit| self.levels.iter().find(|level| level.unit == unit))
    }

    /// The launch at `level`'s intensity, when that level was measured.
    pub fn level_point(&self, level: &MemoryLevel) -> Option<RooflinePoint> {
        RooflinePoint::placed(level.flop_per_byte, self.achieved_gflops * 1e9)
    }

    /// The useful rate against the tensor roof to show: the lab's own
    /// ([`Roofline::tensor`]), else TF32's; with the roof's name in lower case.
    pub fn tensor_share(&self) -> Option<(String, f64)> {
        match &self.tensor {
            Some(tensor) => Some((tensor.roof.name().to_lowercase(), tensor.peak_pct)),
            None => self.tf32_peak_pct.map(|pct| ("tf32".to_owned(), pct)),
        }
    }

    /// Puts the DRAM reads against the compulsory reads into the verdict's
    /// reason, after the tensor cores' use and before the busiest unit;
    /// `inputs` names what a kernel must read once, in a lab's words.
    pub fn say_reads(&mut self, inputs: &str) {
        let Some(dram) = &self.dram else {
            return;
        };
        let clause = format!(
            "DRAM reads {:.1} MB = {:.2}x {inputs} read once ({:.1} MB)",
            dram.read_bytes / 1e6,
            dram.reads_over_floor,
            dram.read_floor_bytes as f64 / 1e6
        );
        let lead = self.tensor.map(|t| t.describe(self.achieved_gflops));
        let reason = &self.verdict.reason;
        self.verdict.reason = match lead {
            Some(lead) => match reason
                .strip_prefix(&lead)
                .and_then(|r| r.strip_prefix("; "))
            {
                Some(rest) => format!("{lead}; {clause}; {rest}"),
                None => format!("{clause}; {reason}"),
            },
            None => format!("{clause}; {reason}"),
        };
    }

    /// The measured units, busiest first, as `tensor pipe 71%, L2 40%, ...`.
    pub fn units_summary(&self) -> String {
        self.units
            .iter()
            .map(UnitLoad::describe)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Measurements that cannot be placed on a roofline.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RooflineError {
    #[error("the kernel duration must be positive, got {0} ns")]
    NoDuration(f64),
    #[error("DRAM byte counts must be finite and not negative")]
    BadByteCount,
}

/// What a bandwidth-bound lab grades first: the compulsory bytes over the
/// median timed launch (L2 evicted before each), against the faster of two
/// streaming probes timed in the same run, a device-to-device copy (bytes
/// read plus written) and a read-only stream (a decode kernel mostly reads).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Bandwidth {
    pub compulsory_bytes: u64,
    pub median_ms: f64,
    pub achieved_bytes_per_s: f64,
    pub copy_bytes_per_s: f64,
    pub read_bytes_per_s: f64,
}

impl Bandwidth {
    /// `None` when the median or both probes are not positive and finite
    /// (a launch that took no time has no bandwidth to show).
    pub fn of(
        compulsory_bytes: u64,
        median_ms: f64,
        copy_bytes_per_s: f64,
        read_bytes_per_s: f64,
    ) -> Option<Self> {
        let positive = |x: f64| x.is_finite() && x > 0.0;
        if !positive(median_ms) || !(positive(copy_bytes_per_s) || positive(read_bytes_per_s)) {
            return None;
        }
        Some(Self {
            compulsory_bytes,
            median_ms,
            achieved_bytes_per_s: compulsory_bytes as f64 / (median_ms * 1e-3),
            copy_bytes_per_s,
            read_bytes_per_s,
        })
    }

    /// The roof the share is of: the faster probe.
    pub fn roof_bytes_per_s(&self) -> f64 {
        self.copy_bytes_per_s.max(self.read_bytes_per_s)
    }

    /// Achieved bandwidth as a share of [`Bandwidth::roof_bytes_per_s`] (1.0 = at the roof).
    pub fn share(&self) -> f64 {
        self.achieved_bytes_per_s / self.roof_bytes_per_s()
    }

    /// One line: achieved, its share and the two probes.
    pub fn line(&self) -> String {
        format!(
            "{:.0} GB/s = {:.1}% of {:.0} GB/s ({:.1} MB compulsory in {:.4} ms; copy {:.0} GB/s, read-only {:.0} GB/s)",
            self.achieved_bytes_per_s / 1e9,
            self.share() * 100.0,
            self.roof_bytes_per_s() / 1e9,
            self.compulsory_bytes as f64 / 1e6,
            self.median_ms,
            self.copy_bytes_per_s / 1e9,
            self.read_bytes_per_s / 1e9
        )
    }
}

/// The work a launch must do, from the lab's model of one problem size.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Work {
    /// Floating-point operations of exact attention.
    pub flops: f64,
    /// Fewest DRAM bytes any kernel must move: every input read once, the output written once.
    pub compulsory_bytes: u64,
    /// The output's share of `compulsory_bytes` (the rest is inputs).
    #[serde(default)]
    pub output_bytes: u64,
    /// The tensor-core roof the work is read against besides FP32 (a lab
    /// whose products take bf16 operands: BF16); `None` reads it against
    /// FP32 and TF32 only.
    #[serde(default)]
    pub tensor_roof: Option<TensorRoof>,
}

/// Places one launch doing `work` on `peaks`' roofline.
pub fn analyze(
    work: Work,
    measured: &Measured,
    peaks: &DevicePeaks,
) -> Result<Roofline, RooflineError> {
    if !(measured.duration_ns.is_finite() && measured.duration_ns > 0.0) {
        return Err(RooflineError::NoDuration(measured.duration_ns));
    }
    let dram_bytes = measured.dram_bytes_read + measured.dram_bytes_write;
    if !(dram_bytes.is_finite()
        && measured.dram_bytes_read >= 0.0
        && measured.dram_bytes_write >= 0.0)
    {
        return Err(RooflineError::BadByteCount);
    }
    let seconds = measured.duration_ns * 1e-9;
    let flops_per_s = work.flops / seconds;
    let fp32_peak_pct = 100.0 * flops_per_s / peaks.fp32_flops.per_s;
    let dram_bandwidth_pct = 100.0 * (dram_bytes / seconds) / peaks.dram_bytes.per_s;
    let read_floor_bytes = work.compulsory_bytes.saturating_sub(work.output_bytes);
    let over = |bytes: f64, floor: u64| {
        if floor > 0 {
            bytes / floor as f64
        } else {
            f64::NAN
        }
    };
    let dram = DramTraffic {
        read_bytes: measured.dram_bytes_read,
        write_bytes: measured.dram_bytes_write,
        read_floor_bytes,
        write_floor_bytes: work.output_bytes,
        reads_over_floor: over(measured.dram_bytes_read, read_floor_bytes),
        writes_over_floor: over(measured.dram_bytes_write, work.output_bytes),
    };
    let units = unit_loads(measured, fp32_peak_pct, dram_bandwidth_pct);
    let tensor = work.tensor_roof.and_then(|kind| {
        let roof = peaks.tensor_roof(kind)?;
        Some(TensorUse {
            roof: kind,
            roof_flops_per_s: roof.per_s,
            peak_pct: 100.0 * flops_per_s / roof.per_s,
            pipe_pct: units
                .iter()
                .find(|u| u.unit == Unit::TensorPipe)
                .map(|u| u.pct_of_peak),
        })
    });
    let mut verdict = rereads(verdict(measured, &units), work, &dram, peaks.ridge_point());
    if let Some(tensor) = &tensor {
        verdict.reason = format!("{}; {}", tensor.describe(flops_per_s / 1e9), verdict.reason);
        if tensor.unused() {
            verdict.next_step = format!(
                "no tensor-core work: put QK^T and PV on the tensor cores (mma.sync with {} \
                 operands and fp32 accumulators); {}",
                tensor.roof.name().to_lowercase(),
                verdict.next_step
            );
        }
    }
    Ok(Roofline {
        dram_bytes,
        dram: Some(dram),
        compulsory_bytes: work.compulsory_bytes,
        arithmetic_intensity: if dram_bytes > 0.0 {
            work.flops / dram_bytes
        } else {
            f64::INFINITY
        },
        ridge_point: peaks.ridge_point(),
        achieved_gflops: flops_per_s / 1e9,
        fp32_peak_pct,
        tf32_peak_pct: peaks
            .tf32_flops
            .map(|roof| 100.0 * flops_per_s / roof.per_s),
        tensor,
        dram_bandwidth_pct,
        verdict,
        units,
        levels: memory_levels(work.flops, &measured.levels),
    })
}

/// Each level that moved bytes, closest to the SM first, with its
/// intensity; a peak that is not a positive rate is no roof. A byte count
/// so small that the intensity overflows (a driver's garbage) is no level.
fn memory_levels(flops: f64, traffic: &[LevelTraffic]) -> Vec<MemoryLevel> {
    let positive = |x: &f64| x.is_finite() && *x > 0.0;
    let mut levels: Vec<MemoryLevel> = traffic
        .iter()
        .filter(|t| positive(&t.bytes) && positive(&(flops / t.bytes)))
        .map(|t| MemoryLevel {
            unit: t.unit,
            bytes: t.bytes,
            flop_per_byte: flops / t.bytes,
            peak_bytes_per_s: t.peak_bytes_per_s.filter(positive),
        })
        .collect();
    levels.sort_by_key(|l| l.unit != Unit::SharedMemory);
    levels
}

/// The measured units, completed where a figure is missing, busiest first.
fn unit_loads(measured: &Measured, fp32_peak_pct: f64, dram_pct: f64) -> Vec<UnitLoad> {
    let mut units: Vec<UnitLoad> = measured
        .units
        .iter()
        .copied()
        .filter(|u| u.pct_of_peak.is_finite())
        .collect();
    if !units.iter().any(|u| u.unit == Unit::Dram) {
        units.push(UnitLoad::new(Unit::Dram, dram_pct));
    }
    if units.iter().all(|u| u.unit.is_memory()) {
        units.push(UnitLoad::new(Unit::FmaPipe, fp32_peak_pct));
    }
    units.sort_by(|a, b| b.pct_of_peak.total_cmp(&a.pct_of_peak));
    units
}

/// Names the busiest unit, and the bound when it is near its peak.
fn verdict(measured: &Measured, units: &[UnitLoad]) -> Verdict {
    let busiest = units.first().copied();
    let runner_up = units
        .get(1)
        .map(|u| format!("; next {}", u.describe()))
        .unwrap_or_default();
    let occupancy = measured
        .achieved_occupancy_pct
        .map(|pct| format!("; achieved occupancy {pct:.0}%"))
        .unwrap_or_default();
    let unmeasured = if measured.full_breakdown {
        ""
    } else {
        " (quick set: the full set adds ALU, special-function, load/store, L1 and L2)"
    };
    if let Some(top) = busiest.filter(|u| u.pct_of_peak >= BOUND_THRESHOLD_PCT) {
        return Verdict {
            bound: if top.unit.is_memory() {
                Bound::Bandwidth
            } else {
                Bound::Compute
            },
            busiest,
            reason: format!(
                "{} at {:.0}% of its peak{runner_up}",
                top.unit.label(),
                top.pct_of_peak
            ),
            next_step: top.unit.next_step().to_string(),
        };
    }
    let sm = match measured.sm_throughput_pct {
        Some(pct) if pct >= BOUND_THRESHOLD_PCT => format!(
            "; SM throughput {pct:.0}%, from a sub-unit none of these pipes shows \
             (register or dispatch pressure)"
        ),
        Some(pct) => format!("; SM throughput {pct:.0}%"),
        None => String::new(),
    };
    let leaders = units
        .iter()
        .take(2)
        .map(UnitLoad::describe)
        .collect::<Vec<_>>()
        .join(", ");
    // The pipe doing the work, when one does much of it: the advice is then
    // to feed that pipe, not a generic call for occupancy.
    let working_pipe = units.iter().take(2).find(|u| {
        matches!(u.unit, Unit::TensorPipe | Unit::FmaPipe) && u.pct_of_peak >= LEADING_PIPE_PCT
    });
    let next_step = match working_pipe {
        Some(pipe) => format!(
            "the {} does the work but waits on latency ({:.0}% busy): more resident warps \
             (fewer registers or less shared memory a block) or more independent tiles per \
             warp to keep it fed",
            pipe.unit.label(),
            pipe.pct_of_peak
        ),
        None => "latency or too little parallel work: more independent work per thread \
                 (several rows or keys at once), or more resident warps"
            .to_string(),
    };
    Verdict {
        bound: Bound::Neither,
        busiest,
        reason: format!("no unit near its peak (busiest: {leaders}){sm}{occupancy}{unmeasured}"),
        next_step,
    }
}

/// DRAM reads over the inputs from which a bandwidth-bound kernel's
/// re-reads are its cause, whatever unit looks busiest.
pub const REREAD_FACTOR: f64 = 1.5;

/// The verdict of a kernel whose work is bandwidth-bound (below the ridge
/// even when every input byte is read once) and that reads its inputs from
/// DRAM [`REREAD_FACTOR`] times or more: the bytes it reads again are what
/// to remove, so that is the advice.
fn rereads(mut verdict: Verdict, work: Work, dram: &DramTraffic, ridge: f64) -> Verdict {
    let best_intensity = work.flops / work.compulsory_bytes.max(1) as f64;
    if best_intensity < ridge && dram.reads_over_floor >= REREAD_FACTOR {
        verdict.next_step = format!(
            "the work is bandwidth-bound ({best_intensity:.1} flop/B with every input byte read \
             once, below the ridge at {ridge:.1}) and DRAM reads are {:.1}x the inputs: read \
             each input byte once, sharing what one block loads with every head that uses it",
            dram.reads_over_floor
        );
    }
    verdict
}

/// Share of its peak (percent) from which a compute pipe counts as the one
/// doing a latency-bound kernel's work.
const LEADING_PIPE_PCT: f64 = 30.0;

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn a_bandwidth_bound_kernel_reading_its_inputs_again_is_told_to_read_them_once() {
        // The decode timing shape: 0.93 GB, 2 flops a byte at best.
        let work = Work {
            flops: 1.86e9,
            compulsory_bytes: 932_249_600,
            output_bytes: 524_288,
            tensor_roof: None,
        };
        let dram = |reads_over_floor| DramTraffic {
            read_bytes: 0.0,
            write_bytes: 0.0,
            read_floor_bytes: 0,
            write_floor_bytes: 0,
            reads_over_floor,
            writes_over_floor: 1.0,
        };
        let plain = Verdict {
            bound: Bound::Neither,
            busiest: None,
            reason: "no unit near its peak".into(),
            next_step: "latency".into(),
        };
        let advised = rereads(plain.clone(), work, &dram(3.9), 15.0);
        assert!(
            advised.next_step.contains("DRAM reads are 3.9x the inputs"),
            "{}",
            advised.next_step
        );
        assert!(
            advised.next_step.contains("below the ridge at 15.0"),
            "{}",
            advised.next_step
        );
        // Read once, or compute-bound work: the verdict stands.
        assert_eq!(rereads(plain.clone(), work, &dram(1.1), 15.0), plain);
        assert_eq!(rereads(plain.clone(), work, &dram(3.9), 1.0), plain);
    }

    #[test]
    fn bandwidth_is_the_compulsory_bytes_over_the_median_against_the_faster_probe() {
        // The decode reference on the H200: 932 MB in 0.2664 ms.
        let b = Bandwidth::of(932_249_600, 0.2664, 4.235e12, 4.042e12).expect("timed");
        assert!((b.achieved_bytes_per_s / 1e9 - 3499.4).abs() < 0.1);
        assert_eq!(b.roof_bytes_per_s(), 4.235e12);
        assert!((b.share() - 0.8263).abs() < 1e-4);
        // A read-only probe faster than the copy is the roof instead.
        let read = Bandwidth::of(932_249_600, 0.2664, 3.0e12, 4.0e12).expect("timed");
        assert_eq!(read.roof_bytes_per_s(), 4.0e12);
        assert_eq!(
            b.line(),
            "3499 GB/s = 82.6% of 4235 GB/s (932.2 MB compulsory in 0.2664 ms; copy 4235 GB/s, read-only 4042 GB/s)"
        );
        // No time, or no probe, is no bandwidth to show.
        assert_eq!(Bandwidth::of(1, 0.0, 1e12, 1e12), None);
        assert_eq!(Bandwidth::of(1, f64::NAN, 1e12, 1e12), None);
        assert_eq!(Bandwidth::of(1, 1.0, 0.0, f64::NAN), None);
        assert!(Bandwidth::of(1, 1.0, 0.0, 1e9).is_some());
    }

    /// The first lab's timing shape (C = P = 2048): 48 MiB, 8 MiB of it the output.
    const TIMING_WORK: Work = Work {
        flops: 51_547_996_160.0,
        compulsory_bytes: 48 << 20,
        output_bytes: 8 << 20,
        tensor_roof: None,
    };

    const MIB: f64 = 1024.0 * 1024.0;

    /// The H200's datasheet roofs: 132 SMs x 128 lanes x 2 x 1.98 GHz, TF32
    /// at 1024 dense FMA a clock per SM, BF16 at twice that, 4.8 TB/s.
    pub(crate) fn h200() -> DevicePeaks {
        let attributes = |per_s| Roof {
            per_s,
            source: PeakSource::Attributes,
            pipe_pct_at_peak: None,
        };
        DevicePeaks {
            name: "NVIDIA H200".into(),
            fp32_flops: attributes(132.0 * 128.0 * 2.0 * 1.98e9),
            tf32_flops: Some(attributes(132.0 * 2048.0 * 1.98e9)),
            bf16_flops: Some(attributes(132.0 * 4096.0 * 1.98e9)),
            dram_bytes: attributes(4.8e12),
        }
    }

    fn measured(duration_ns: f64, dram_bytes: f64) -> Measured {
        Measured {
            dram_bytes_read: dram_bytes * 0.75,
            dram_bytes_write: dram_bytes * 0.25,
            duration_ns,
            sm_throughput_pct: None,
            achieved_occupancy_pct: None,
            units: Vec::new(),
            full_breakdown: false,
            levels: Vec::new(),
        }
    }

    /// A full-set measurement with these units' loads.
    fn with_units(duration_ns: f64, dram_bytes: f64, loads: &[(Unit, f64)]) -> Measured {
        Measured {
            units: loads
                .iter()
                .map(|&(unit, pct_of_peak)| UnitLoad::new(unit, pct_of_peak))
                .collect(),
            full_breakdown: true,
            ..measured(duration_ns, dram_bytes)
        }
    }

    fn analyze_h200(measured: &Measured) -> Roofline {
        analyze(TIMING_WORK, measured, &h200()).expect("valid measurement")
    }

    #[test]
    fn h200_ridge_point() {
        assert!((h200().fp32_flops.per_s / 1e12 - 66.9).abs() < 0.05);
        assert!((h200().ridge_point() - 13.94).abs() < 0.01);
    }

    #[test]
    fn figures_follow_from_flops_bytes_and_time() {
        // 1 ms and 96 MiB of DRAM traffic: 72 MiB read, 24 MiB written.
        let roofline = analyze_h200(&measured(1e6, 96.0 * MIB));
        assert_eq!(roofline.compulsory_bytes, 48 << 20);
        let flops = TIMING_WORK.flops;
        assert!((roofline.achieved_gflops - flops / 1e6).abs() < 1e-6);
        assert!((roofline.arithmetic_intensity - flops / (96.0 * MIB)).abs() < 1e-9);
        let expected_dram_pct = 100.0 * (96.0 * MIB / 1e-3) / 4.8e12;
        assert!((roofline.dram_bandwidth_pct - expected_dram_pct).abs() < 1e-9);
        let tf32 = roofline.tf32_peak_pct.expect("the H200 has TF32");
        assert!((tf32 - roofline.fp32_peak_pct / 8.0).abs() < 1e-9);
    }

    #[test]
    fn reads_and_writes_are_each_held_to_their_own_floor() {
        // The reference on the H200: 30.9 MB read of 42 MB of inputs (K/V
        // tiles hit L2 across blocks), 7.5 MB written of an 8.4 MB output
        // (the rest still in L2 at the end).
        let mut m = measured(1.5e6, 0.0);
        m.dram_bytes_read = 30.9e6;
        m.dram_bytes_write = 7.5e6;
        let dram = analyze_h200(&m).dram.expect("split traffic");
        assert_eq!(dram.read_floor_bytes, 40 << 20);
        assert_eq!(dram.write_floor_bytes, 8 << 20);
        assert!((dram.reads_over_floor - 30.9e6 / (40.0 * MIB)).abs() < 1e-12);
        assert!((dram.writes_over_floor - 7.5e6 / (8.0 * MIB)).abs() < 1e-12);
    }

    #[test]
    fn a_tensor_core_kernel_is_bound_by_its_tensor_pipe() {
        // The 3xTF32 kernel of the issue: 0.82 ms (94% of the FP32 peak in
        // useful flops), SM throughput 59%, tensor pipe 71%.
        let mut m = with_units(
            0.82e6,
            40e6,
            &[
                (Unit::TensorPipe, 71.0),
                (Unit::FmaPipe, 22.0),
                (Unit::AluPipe, 18.0),
                (Unit::SharedMemory, 35.0),
                (Unit::L2, 12.0),
                (Unit::Dram, 1.0),
            ],
        );
        m.sm_throughput_pct = Some(59.0);
        let roofline = analyze_h200(&m);
        assert!((roofline.fp32_peak_pct - 94.0).abs() < 1.0);
        assert_eq!(roofline.verdict.bound, Bound::Compute);
        assert_eq!(roofline.verdict.busiest.unwrap().unit, Unit::TensorPipe);
        assert_eq!(
            roofline.verdict.reason,
            "tensor pipe at 71% of its peak; next shared memory 35%"
        );
        assert!(roofline.verdict.next_step.contains("tensor cores"));
    }

    #[test]
    fn a_tensor_kernel_short_of_warps_is_told_to_feed_its_tensor_pipe() {
        // The 3xTF32 rung on the H200 (2026-11-30, ncu agreeing within 0.1
        // point): issue 46%, tensor pipe 44%, ALU 30%, occupancy 23%.
        let mut m = with_units(
            1.08e6,
            38e6,
            &[
                (Unit::InstructionIssue, 46.2),
                (Unit::TensorPipe, 44.2),
                (Unit::AluPipe, 29.7),
                (Unit::FmaPipe, 16.6),
            ],
        );
        m.sm_throughput_pct = Some(46.2);
        m.achieved_occupancy_pct = Some(23.0);
        let roofline = analyze_h200(&m);
        assert_eq!(roofline.verdict.bound, Bound::Neither);
        assert_eq!(
            roofline.verdict.reason,
            "no unit near its peak (busiest: instruction issue 46%, tensor pipe 44%); \
             SM throughput 46%; achieved occupancy 23%"
        );
        assert!(
            roofline
                .verdict
                .next_step
                .starts_with("the tensor pipe does the work but waits on latency"),
            "{}",
            roofline.verdict.next_step
        );
    }

    #[test]
    fn a_benchmark_short_of_a_full_pipe_scales_its_roof() {
        // The FMA loop kept the pipe 84% busy at 55.9 TFLOP/s.
        let mut roof = Roof {
            per_s: 55.9e12,
            source: PeakSource::Measured,
            pipe_pct_at_peak: None,
        };
        assert!(!roof.scale_to_full_pipe(None));
        assert!(!roof.scale_to_full_pipe(Some(20.0)), "implausibly low");
        assert_eq!(roof.per_s, 55.9e12);
        assert!(roof.scale_to_full_pipe(Some(84.0)));
        assert!((roof.per_s / 1e12 - 66.55).abs() < 0.01);
        assert_eq!(roof.pipe_pct_at_peak, Some(84.0));
        let peaks = DevicePeaks {
            fp32_flops: roof,
            ..h200()
        };
        assert!(peaks
            .summary()
            .starts_with("FP32 66.5 TFLOP/s (measured at 55.9 with the pipe 84% busy)"));
    }

    #[test]
    fn a_busy_fma_pipe_is_named_with_fp32_advice() {
        let roofline = analyze_h200(&with_units(
            1.2e6,
            48.0 * MIB,
            &[
                (Unit::FmaPipe, 78.0),
                (Unit::AluPipe, 30.0),
                (Unit::TensorPipe, 0.0),
            ],
        ));
        assert_eq!(roofline.verdict.bound, Bound::Compute);
        assert_eq!(roofline.units[0].unit, Unit::FmaPipe);
        assert!(roofline.verdict.reason.starts_with("FP32 FMA pipe at 78%"));
        assert!(roofline.verdict.next_step.contains("tensor cores"));
    }

    #[test]
    fn a_planted_bug_busy_on_the_alu_is_not_called_fp32_compute_bound() {
        // 16.9 ms, 4.6% of the FP32 peak in useful flops, SM throughput 65%.
        let mut m = with_units(
            16.9e6,
            60e6,
            &[
                (Unit::FmaPipe, 9.0),
                (Unit::AluPipe, 64.0),
                (Unit::InstructionIssue, 61.0),
                (Unit::Dram, 0.5),
            ],
        );
        m.sm_throughput_pct = Some(65.0);
        let roofline = analyze_h200(&m);
        assert!((roofline.fp32_peak_pct - 4.6).abs() < 0.1);
        assert_eq!(roofline.verdict.bound, Bound::Compute);
        assert_eq!(roofline.verdict.busiest.unwrap().unit, Unit::AluPipe);
        assert!(roofline.verdict.reason.starts_with("ALU pipe at 64%"));
        assert!(!roofline.verdict.reason.contains("FP32"));
    }

    #[test]
    fn heavy_traffic_is_dram_bound() {
        // 40 GB in 10 ms is 4 TB/s, 83% of HBM3e; with no unit measured the
        // figures come from the bytes and the useful flop rate.
        let roofline = analyze_h200(&measured(1e7, 40e9));
        assert_eq!(roofline.verdict.bound, Bound::Bandwidth);
        assert_eq!(roofline.verdict.busiest.unwrap().unit, Unit::Dram);
        assert!(
            roofline.verdict.reason.starts_with("DRAM at 83%"),
            "{}",
            roofline.verdict.reason
        );
        assert!(roofline.verdict.next_step.contains("fewer bytes"));
    }

    #[test]
    fn shared_memory_traffic_is_memory_bound_on_l1() {
        let roofline = analyze_h200(&with_units(
            5e6,
            48.0 * MIB,
            &[
                (Unit::SharedMemory, 82.0),
                (Unit::L1, 80.0),
                (Unit::FmaPipe, 25.0),
                (Unit::Dram, 2.0),
            ],
        ));
        assert_eq!(roofline.verdict.bound, Bound::Bandwidth);
        assert_eq!(roofline.verdict.busiest.unwrap().unit, Unit::SharedMemory);
        assert!(roofline.verdict.next_step.contains("bank conflicts"));
    }

    #[test]
    fn a_slow_kernel_with_every_unit_low_is_latency_bound() {
        let mut m = with_units(
            28e6,
            45e6,
            &[
                (Unit::FmaPipe, 12.0),
                (Unit::AluPipe, 20.0),
                (Unit::L2, 31.0),
                (Unit::Dram, 0.3),
            ],
        );
        m.sm_throughput_pct = Some(34.0);
        m.achieved_occupancy_pct = Some(12.4);
        let roofline = analyze_h200(&m);
        assert_eq!(roofline.verdict.bound, Bound::Neither);
        assert_eq!(
            roofline.verdict.reason,
            "no unit near its peak (busiest: L2 31%, ALU pipe 20%); SM throughput 34%; achieved occupancy 12%"
        );
        assert!(roofline.verdict.next_step.contains("latency"));
    }

    #[test]
    fn a_busy_sm_with_no_busy_pipe_is_not_called_compute_bound() {
        let mut m = with_units(5e6, 45e6, &[(Unit::FmaPipe, 40.0), (Unit::AluPipe, 30.0)]);
        m.sm_throughput_pct = Some(65.0);
        let roofline = analyze_h200(&m);
        assert_eq!(roofline.verdict.bound, Bound::Neither);
        assert!(roofline
            .verdict
            .reason
            .contains("SM throughput 65%, from a sub-unit"));
    }

    #[test]
    fn the_quick_set_says_what_it_leaves_out() {
        let mut m = measured(5e7, 48.0 * MIB);
        m.units = vec![
            UnitLoad::new(Unit::FmaPipe, 20.0),
            UnitLoad::new(Unit::TensorPipe, f64::NAN),
        ];
        let roofline = analyze_h200(&m);
        assert_eq!(roofline.verdict.bound, Bound::Neither);
        assert!(roofline.verdict.reason.contains("quick set"));
        // NaN (not evaluated) is dropped, DRAM is filled in from the bytes.
        let units: Vec<Unit> = roofline.units.iter().map(|u| u.unit).collect();
        assert_eq!(units, [Unit::FmaPipe, Unit::Dram]);
    }

    #[test]
    fn summaries_name_each_roof_and_floor() {
        assert_eq!(
            h200().summary(),
            "FP32 66.9 TFLOP/s (from attributes), TF32 tensor 535 TFLOP/s (from attributes), \
             BF16 tensor 1071 TFLOP/s (from attributes), DRAM 4.80 TB/s (from attributes)"
        );
        let ampere_without_bf16 = DevicePeaks {
            bf16_flops: None,
            ..h200()
        };
        assert!(!ampere_without_bf16.summary().contains("BF16"));
        let mut m = with_units(1e6, 0.0, &[(Unit::L2, 40.0), (Unit::TensorPipe, 71.0)]);
        m.dram_bytes_read = 42.0 * MIB;
        m.dram_bytes_write = 4.0 * MIB;
        let roofline = analyze_h200(&m);
        assert_eq!(
            roofline.dram.expect("split").summary(),
            "read 44.0 MB (1.05x the inputs), written 4.2 MB (0.50x the output)"
        );
        assert_eq!(roofline.units_summary(), "tensor pipe 71%, L2 40%, DRAM 1%");
    }

    #[test]
    fn peaks_saved_before_bf16_read_without_it_and_lack_it() {
        let mut json = serde_json::to_value(h200()).expect("serialise");
        assert!(json["bf16_flops"]["per_s"].as_f64().is_some());
        json.as_object_mut().expect("object").remove("bf16_flops");
        let old: DevicePeaks = serde_json::from_value(json).expect("an older report");
        assert_eq!(old.bf16_flops, None);
        assert_eq!(old.tf32_flops, h200().tf32_flops);
        let names: Vec<&str> = h200().tensor_roofs().map(|(name, _)| name).collect();
        assert_eq!(names, ["TF32", "BF16"]);
        assert!(!old.has_every_roof_of(&h200()), "BF16 is missing");
        assert!(h200().has_every_roof_of(&old));
        assert!(old.has_every_roof_of(&old));
    }

    #[test]
    fn impossible_measurements_are_refused() {
        let peaks = h200();
        assert_eq!(
            analyze(TIMING_WORK, &measured(0.0, 1.0), &peaks),
            Err(RooflineError::NoDuration(0.0))
        );
        assert_eq!(
            analyze(TIMING_WORK, &measured(1e6, -1.0), &peaks),
            Err(RooflineError::BadByteCount)
        );
        assert_eq!(
            analyze(TIMING_WORK, &measured(1e6, f64::NAN), &peaks),
            Err(RooflineError::BadByteCount)
        );
    }

    #[test]
    fn roofline_survives_a_json_round_trip() {
        let roofline = analyze_h200(&with_units(1e6, 96.0 * MIB, &[(Unit::FmaPipe, 77.0)]));
        let json = serde_json::to_string(&roofline).expect("serialise");
        assert!(json.contains("\"bound\":\"compute\""));
        assert!(json.contains("\"unit\":\"fma_pipe\""));
        let back: Roofline = serde_json::from_str(&json).expect("deserialise");
        assert_eq!(back, roofline);
    }

    #[test]
    fn each_level_has_its_own_intensity_and_roof() {
        let mut m = measured(1e6, 96.0 * MIB);
        m.levels = vec![
            LevelTraffic {
                unit: Unit::L2,
                bytes: 400.0 * MIB,
                peak_bytes_per_s: Some(12e12),
            },
            LevelTraffic {
                unit: Unit::SharedMemory,
                bytes: 6400.0 * MIB,
                peak_bytes_per_s: Some(33e12),
            },
        ];
        let roofline = analyze_h200(&m);
        let units: Vec<Unit> = roofline.levels.iter().map(|l| l.unit).collect();
        assert_eq!(
            units,
            [Unit::SharedMemory, Unit::L2],
            "closest to the SM first"
        );
        let [shared, l2] = [roofline.levels[0], roofline.levels[1]];
        assert!((l2.flop_per_byte - TIMING_WORK.flops / (400.0 * MIB)).abs() < 1e-9);
        assert!((shared.flop_per_byte - TIMING_WORK.flops / (6400.0 * MIB)).abs() < 1e-9);
        assert_eq!(shared.peak_bytes_per_s, Some(33e12));
        // Every level's point shares the useful rate; only the intensity moves.
        let dram = roofline.dram_point().expect("placed");
        let at_l2 = roofline.level_point(&l2).expect("placed");
        assert_eq!(at_l2.flops_per_s, dram.flops_per_s);
        assert!(dram.flop_per_byte > at_l2.flop_per_byte);
    }

    #[test]
    fn a_level_without_bytes_is_dropped_and_one_without_a_peak_has_no_roof() {
        let mut m = measured(1e6, 96.0 * MIB);
        m.levels = vec![
            LevelTraffic {
                unit: Unit::SharedMemory,
                bytes: 0.0,
                peak_bytes_per_s: Some(33e12),
            },
            LevelTraffic {
                unit: Unit::L2,
                bytes: 1e9,
                peak_bytes_per_s: Some(f64::NAN),
            },
        ];
        let levels = analyze_h200(&m).levels;
        assert_eq!(levels.len(), 1);
        assert_eq!(levels[0].unit, Unit::L2);
        assert_eq!(levels[0].peak_bytes_per_s, None);
    }

    #[test]
    fn a_report_saved_before_the_levels_reads_with_none() {
        let roofline = analyze_h200(&measured(1e6, 96.0 * MIB));
        let mut json: serde_json::Value = serde_json::to_value(&roofline).expect("serialise");
        json.as_object_mut().expect("object").remove("levels");
        let back: Roofline = serde_json::from_value(json).expect("an older report");
        assert!(back.levels.is_empty());
        assert_eq!(back.dram_point(), roofline.dram_point());
    }

    /// The roofline as the worker sends it and the history stores it: JSON.
    fn through_json(roofline: &Roofline) -> Roofline {
        let json = serde_json::to_string(roofline).expect("serialise");
        serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"))
    }

    #[test]
    fn a_level_cupti_says_moved_a_subnormal_byte_count_still_travels() {
        // A buggy driver's 1e-310 bytes: the intensity overflows to
        // infinity, which JSON writes as null and could not read back.
        let mut m = measured(1e6, 96.0 * MIB);
        m.levels = vec![
            LevelTraffic {
                unit: Unit::SharedMemory,
                bytes: 1e-310,
                peak_bytes_per_s: Some(33e12),
            },
            LevelTraffic {
                unit: Unit::L2,
                bytes: 400.0 * MIB,
                peak_bytes_per_s: Some(1e308),
            },
        ];
        let roofline = analyze_h200(&m);
        let units: Vec<Unit> = roofline.levels.iter().map(|l| l.unit).collect();
        assert_eq!(units, [Unit::L2], "no intensity, no level");
        assert_eq!(through_json(&roofline), roofline);
    }

    #[test]
    fn a_launch_cupti_says_moved_no_dram_bytes_still_travels() {
        // Zero DRAM bytes: an infinite intensity, kept as such through JSON;
        // a lab with no input floor: reads over it are NaN.
        let work = Work {
            compulsory_bytes: TIMING_WORK.output_bytes,
            ..TIMING_WORK
        };
        let roofline = analyze(work, &measured(1e6, 0.0), &h200()).expect("analysed");
        assert_eq!(roofline.arithmetic_intensity, f64::INFINITY);
        let back = through_json(&roofline);
        assert_eq!(back.arithmetic_intensity, f64::INFINITY);
        let dram = back.dram.expect("DRAM traffic");
        assert!(dram.reads_over_floor.is_nan());
        assert_eq!(back.dram_point(), None, "not drawn");
    }

    /// What a driver could hand back for a counter: anything a double holds.
    fn any_counter() -> impl proptest::strategy::Strategy<Value = f64> {
        use proptest::prelude::*;
        prop_oneof![
            prop::sample::select(vec![
                f64::NAN,
                f64::INFINITY,
                f64::NEG_INFINITY,
                0.0,
                -0.0,
                -1.0,
                1e308,
                f64::MAX,
                1e-308,
                5e-324,
            ]),
            any::<f64>(),
            0.0..1e12,
        ]
    }

    proptest::proptest! {
        /// Whatever CUPTI says each level moved and could move, every level
        /// kept has positive finite bytes and intensity, its roof is a
        /// positive rate or none, and the roofline crosses JSON unchanged.
        #[test]
        fn any_level_counters_give_drawable_levels_that_travel(
            traffic in proptest::collection::vec(
                (any_counter(), proptest::option::of(any_counter())),
                0..4,
            ),
        ) {
            let mut m = measured(1e6, 96.0 * MIB);
            m.levels = traffic
                .into_iter()
                .zip([Unit::SharedMemory, Unit::L2].into_iter().cycle())
                .map(|((bytes, peak_bytes_per_s), unit)| LevelTraffic {
                    unit,
                    bytes,
                    peak_bytes_per_s,
                })
                .collect();
            let roofline = analyze_h200(&m);
            let positive = |x: f64| x.is_finite() && x > 0.0;
            for level in &roofline.levels {
                proptest::prop_assert!(positive(level.bytes) && positive(level.flop_per_byte));
                proptest::prop_assert!(level.peak_bytes_per_s.is_none_or(positive));
                proptest::prop_assert!(roofline.level_point(level).is_some());
            }
            proptest::prop_assert_eq!(through_json(&roofline), roofline);
        }
    }
}
