//! What ptxas says a kernel uses, and the occupancy that allows.
//!
//! Both are pure: the compiler log is parsed as text, and occupancy follows
//! the same allocation rules as NVIDIA's occupancy calculator, so the TUI can
//! show "64 registers: 4 blocks, 50% of the SM's warps" straight after a
//! compile, before any GPU runs the kernel. The largest block the kernel can
//! launch is derived the same way from its registers; once a GPU loads the
//! kernel, the driver's figure (which also honours `__launch_bounds__`)
//! replaces that estimate.

use serde::{Deserialize, Serialize};

use super::arch::{self, SmAttributes};
use crate::lab::geometry::LaunchGeometry;

/// Resources ptxas reported for one entry function.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceUsage {
    /// Registers per thread.
    pub registers: u32,
    /// Shared memory the kernel declares statically (`__shared__` arrays), bytes.
    pub static_smem_bytes: u32,
    /// Per-thread stack frame (local memory), bytes.
    pub local_bytes: u32,
    pub spill_store_bytes: u32,
    pub spill_load_bytes: u32,
    /// Named barriers used (`__syncthreads` uses barrier 0).
    pub barriers: u32,
    /// The most threads one block of this kernel may have; a larger launch
    /// fails. 0 means unknown: history saved before flashprof read it.
    #[serde(default)]
    pub max_threads_per_block: u32,
    /// The ptxas lines this was read from, for showing verbatim.
    pub raw_lines: Vec<String>,
}

impl ResourceUsage {
    /// Bytes spilled to local memory, stores and loads together (as every
    /// screen and table shows them).
    pub fn spill_bytes(&self) -> u32 {
        self.spill_store_bytes + self.spill_load_bytes
    }

    /// Whether a block of `threads` is more than this kernel can launch
    /// with; never while the limit is unknown.
    pub fn rejects_block_of(&self, threads: u32) -> bool {
        self.max_threads_per_block != 0 && threads > self.max_threads_per_block
    }
}

/// Reads the resources of entry function `entry` from a compile log made
/// with `--ptxas-options=-v`. `None` when ptxas did not compile that entry.
///
/// ptxas reports each entry in a section that starts with "Compiling entry
/// function"; a section may also describe device functions that were not
/// inlined, so the stack line is taken only from the entry's own
/// "Function properties" block.
pub fn parse_ptxas_log(log: &str, entry: &str) -> Option<ResourceUsage> {
    let section = entry_section(log, entry)?;
    let mut usage = ResourceUsage::default();
    let mut in_own_properties = false;
    for line in &section {
        let detail = ptxas_detail(line);
        if let Some(function) = detail.strip_prefix("Function properties for ") {
            in_own_properties = function.trim() == entry;
        } else if detail.contains("bytes stack frame") {
            if in_own_properties {
                read_stack_line(detail, &mut usage);
            }
        } else if detail.starts_with("Used ") {
            read_used_line(detail, &mut usage);
        }
    }
    usage.max_threads_per_block =
        max_threads_for_registers(usage.registers, &SmLimits::typical(target(section[0])));
    usage.raw_lines = section.into_iter().map(str::to_owned).collect();
    Some(usage)
}

/// The architecture an entry's header names (`... for 'sm_89'`); the
/// compile default, Hopper, when it names none.
fn target(header: &str) -> (i32, i32) {
    header
        .rsplit_once(" for '")
        .and_then(|(_, arch)| arch::parse_arch(arch.trim_end().trim_end_matches('\'')))
        .unwrap_or(DEFAULT_TARGET)
}

/// Compute capability of the compile target when no GPU is present (`CompileOptions::default`).
pub const DEFAULT_TARGET: (i32, i32) = (9, 0);

/// The log lines from `entry`'s "Compiling entry function" header up to the
/// next entry's header.
fn entry_section<'a>(log: &'a str, entry: &str) -> Option<Vec<&'a str>> {
    let header = |line: &str| {
        ptxas_detail(line)
            .strip_prefix("Compiling entry function '")
            .and_then(|rest| rest.split_once('\''))
            .map(|(name, _)| name.to_owned())
    };
    let mut lines = log
        .lines()
        .skip_while(|l| header(l).as_deref() != Some(entry));
    let first = lines.next()?;
    let rest = lines.take_while(|l| header(l).is_none() && l.starts_with("ptxas"));
    Some(std::iter::once(first).chain(rest).collect())
}

/// The text after `ptxas info    :` or `ptxas         .`.
fn ptxas_detail(line: &str) -> &str {
    let Some(rest) = line.strip_prefix("ptxas") else {
        return "";
    };
    let rest = rest.trim_start();
    let rest = rest
        .strip_prefix("info")
        .map_or(rest, str::trim_start)
        .trim_start_matches([':', '.']);
    rest.trim()
}

/// `0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads`
fn read_stack_line(detail: &str, usage: &mut ResourceUsage) {
    for (value, what) in counted_items(detail) {
        match what {
            "bytes stack frame" => usage.local_bytes = value,
            "bytes spill stores" => usage.spill_store_bytes = value,
            "bytes spill loads" => usage.spill_load_bytes = value,
            _ => {}
        }
    }
}

/// `Used 40 registers, used 1 barriers, 384 bytes cmem[0], 256 bytes smem`
fn read_used_line(detail: &str, usage: &mut ResourceUsage) {
    for (value, what) in counted_items(detail) {
        match what {
            "registers" => usage.registers = value,
            "barriers" => usage.barriers = value,
            "bytes smem" => usage.static_smem_bytes = value,
            _ => {}
        }
    }
}

/// The `<count> <what>` items of a comma-separated ptxas line, each read
/// past a leading `Used ` or `used `.
fn counted_items(detail: &str) -> impl Iterator<Item = (u32, &str)> {
    detail.split(',').filter_map(|item| {
        let item = item.trim();
        let item = item
            .strip_prefix("Used ")
            .or_else(|| item.strip_prefix("used "))
            .unwrap_or(item);
        leading_number(item)
    })
}

fn leading_number(item: &str) -> Option<(u32, &str)> {
    let (number, rest) = item.trim().split_once(' ')?;
    Some((number.parse().ok()?, rest.trim()))
}

/// The largest block a kernel with `registers` per thread can launch, as
/// far as the register file decides: every warp of the block holds its own
/// registers, rounded up to the allocation unit, and they must all fit in
/// one block's share of the file. Whole warps only, and never more than the
/// hardware's per-block thread cap. `__launch_bounds__` may set a lower
/// limit that only the driver reports.
pub fn max_threads_for_registers(registers: u32, limits: &SmLimits) -> u32 {
    let register_budget = limits.max_registers_per_block.min(limits.registers_per_sm);
    let warps = register_budget
        .checked_div(registers_per_warp(registers, limits))
        .unwrap_or(u32::MAX);
    warps
        .saturating_mul(limits.warp_size)
        .min(limits.max_threads_per_block)
}

/// Registers one warp is handed: whole allocation units.
fn registers_per_warp(registers: u32, limits: &SmLimits) -> u32 {
    (registers * limits.warp_size).next_multiple_of(limits.register_granularity_per_warp)
}

/// Per-SM limits that bound occupancy, with the largest shared-memory
/// carve-out (which the driver picks for kernels that need it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SmLimits {
    pub registers_per_sm: u32,
    /// Registers are handed to warps in multiples of this.
    pub register_granularity_per_warp: u32,
    pub max_registers_per_block: u32,
    pub max_threads_per_block: u32,
    pub smem_per_sm_bytes: u32,
    /// Shared memory the driver reserves for every resident block.
    pub smem_reserved_per_block_bytes: u32,
    pub max_smem_per_block_bytes: u32,
    /// Shared memory is handed to blocks in multiples of this.
    pub smem_granularity_bytes: u32,
    pub max_threads_per_sm: u32,
    pub max_blocks_per_sm: u32,
    pub max_warps_per_sm: u32,
    pub warp_size: u32,
}

impl SmLimits {
    /// The limits the driver reports for a GPU of `compute_capability`,
    /// with the allocation granularities the driver does not report.
    pub fn from_attributes(attributes: &SmAttributes, compute_capability: (i32, i32)) -> Self {
        let traits = arch::traits(compute_capability);
        let warp_size = attributes.warp_size.max(1);
        Self {
            registers_per_sm: attributes.registers_per_sm,
            register_granularity_per_warp: traits.register_granularity_per_warp,
            max_registers_per_block: attributes.registers_per_block,
            max_threads_per_block: attributes.threads_per_block,
            smem_per_sm_bytes: attributes.smem_per_sm_bytes,
            smem_reserved_per_block_bytes: attributes.smem_reserved_per_block_bytes,
            max_smem_per_block_bytes: attributes.smem_per_block_optin_bytes,
            smem_granularity_bytes: traits.smem_granularity_bytes,
            max_threads_per_sm: attributes.threads_per_sm,
            max_blocks_per_sm: attributes.blocks_per_sm,
            max_warps_per_sm: attributes.threads_per_sm / warp_size,
            warp_size,
        }
    }

    /// A typical GPU of `compute_capability`, for a compile with no GPU to ask.
    pub fn typical(compute_capability: (i32, i32)) -> Self {
        Self::from_attributes(
            &arch::traits(compute_capability).typical,
            compute_capability,
        )
    }
}

/// The resource that caps resident blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Limiter {
    Registers,
    SharedMemory,
    Threads,
    Blocks,
    /// The declared block is larger than this kernel allows: it cannot
    /// launch at all, so no other resource matters.
    ThreadsPerBlock,
}

impl Limiter {
    /// The word gradebooks and JSON use (the serialized name).
    pub fn word(self) -> &'static str {
        match self {
            Self::Registers => "registers",
            Self::SharedMemory => "shared_memory",
            Self::Threads => "threads",
            Self::Blocks => "blocks",
            Self::ThreadsPerBlock => "threads_per_block",
        }
    }
}

/// The limiter as a sentence names it: `limited by registers`.
impl std::fmt::Display for Limiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Limiter::Registers => "registers",
            Limiter::SharedMemory => "shared memory",
            Limiter::Threads => "threads per SM",
            Limiter::Blocks => "blocks per SM",
            Limiter::ThreadsPerBlock => "the block size",
        })
    }
}

/// How full one SM can be with this kernel, ignoring the grid's size.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Occupancy {
    pub blocks_per_sm: u32,
    pub warps_per_sm: u32,
    /// Resident warps over the SM's maximum, 0..=1.
    pub fraction: f64,
    pub limiter: Limiter,
}

/// Blocks of `geometry` that fit on one SM at once, and what stops more.
///
/// Ties go to the fixed hardware limits (threads, then blocks) before the
/// kernel's own registers and shared memory: when they tie, trimming
/// registers or shared memory would not add a block, so naming them would
/// send the student after the wrong thing. A block larger than the kernel
/// allows comes before all of them: it never launches, whatever else fits.
pub fn theoretical_occupancy(
    usage: &ResourceUsage,
    geometry: &LaunchGeometry,
    limits: &SmLimits,
) -> Occupancy {
    if usage.rejects_block_of(geometry.threads) {
        return Occupancy {
            blocks_per_sm: 0,
            warps_per_sm: 0,
            fraction: 0.0,
            limiter: Limiter::ThreadsPerBlock,
        };
    }
    let warps_per_block = geometry.threads.div_ceil(limits.warp_size).max(1);
    let by_threads = (limits.max_warps_per_sm / warps_per_block)
        .min(limits.max_threads_per_sm / (warps_per_block * limits.warp_size));
    let candidates = [
        (Limiter::Threads, by_threads),
        (Limiter::Blocks, limits.max_blocks_per_sm),
        (
            Limiter::Registers,
            blocks_by_registers(usage.registers, warps_per_block, limits),
        ),
        (
            Limiter::SharedMemory,
            blocks_by_smem(
                usage.static_smem_bytes + geometry.dynamic_smem_bytes,
                limits,
            ),
        ),
    ];
    let (limiter, blocks_per_sm) =
        candidates.into_iter().fold(
            candidates[0],
            |best, next| if next.1 < best.1 { next } else { best },
        );
    let warps_per_sm = blocks_per_sm * warps_per_block;
    Occupancy {
        blocks_per_sm,
        warps_per_sm,
        fraction: f64::from(warps_per_sm) / f64::from(limits.max_warps_per_sm),
        limiter,
    }
}

fn blocks_by_registers(registers: u32, warps_per_block: u32, limits: &SmLimits) -> u32 {
    if registers == 0 {
        return u32::MAX;
    }
    let per_warp = registers_per_warp(registers, limits);
    if per_warp * warps_per_block > limits.max_registers_per_block {
        return 0;
    }
    (limits.registers_per_sm / per_warp) / warps_per_block
}

fn blocks_by_smem(smem_bytes: u32, limits: &SmLimits) -> u32 {
    if smem_bytes > limits.max_smem_per_block_bytes {
        return 0;
    }
    let per_block = smem_bytes.next_multiple_of(limits.smem_granularity_bytes)
        + limits.smem_reserved_per_block_bytes;
    // Before Ampere nothing is reserved, so a block without shared memory takes none.
    limits
        .smem_per_sm_bytes
        .checked_div(per_block)
        .unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::flash_prefill::FLASH_PREFILL;

    /// The section NVRTC 13.0 printed for a real kernel, plus a non-inlined
    /// device function and a second entry around it.
    const LOG: &str = "\
student.cu(3): warning #177-D: variable \"y\" was declared but never referenced

ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'helper_kernel' for 'sm_90'
ptxas info    : Function properties for helper_kernel
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers, used 0 barriers
ptxas info    : Compiling entry function 'attention_prefill' for 'sm_90'
ptxas info    : Function properties for _Z6squaref
ptxas         .     16 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : Function properties for attention_prefill
ptxas         .     24 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 16384 bytes smem, 384 bytes cmem[0]
ptxas info    : Compile time = 2.622 ms
";

    #[test]
    fn reads_only_the_named_entry() {
        let usage = parse_ptxas_log(LOG, "attention_prefill").expect("entry present");
        assert_eq!(usage.registers, 40);
        assert_eq!(usage.barriers, 1);
        assert_eq!(usage.static_smem_bytes, 16384);
        assert_eq!(
            (
                usage.local_bytes,
                usage.spill_store_bytes,
                usage.spill_load_bytes
            ),
            (24, 8, 12)
        );
        assert_eq!(usage.raw_lines.len(), 7);
        assert!(usage.raw_lines[0].contains("'attention_prefill'"));

        let helper = parse_ptxas_log(LOG, "helper_kernel").expect("helper present");
        assert_eq!(
            (helper.registers, helper.barriers, helper.static_smem_bytes),
            (8, 0, 0)
        );
        assert_eq!(helper.raw_lines.len(), 4);
    }

    #[test]
    fn the_parsed_report_carries_the_register_limited_block_size() {
        let log = "ptxas info    : Compiling entry function 'attention_prefill' for 'sm_90'\n\
                   ptxas info    : Used 168 registers, used 1 barriers, 384 bytes cmem[0]\n";
        let usage = parse_ptxas_log(log, "attention_prefill").expect("entry present");
        // 168 * 32 = 5,376 registers a warp; 65,536 / 5,376 = 12.2, so 12 warps.
        assert_eq!(usage.max_threads_per_block, 12 * 32);
    }

    #[test]
    fn the_register_file_caps_the_block_size() {
        let limit =
            |registers| max_threads_for_registers(registers, &SmLimits::typical(DEFAULT_TARGET));
        // 32 * 32 = 1,024 a warp: 64 warps (2,048 threads) fit, cut to the 1,024 cap.
        assert_eq!(limit(32), 1024);
        // 64 * 32 = 2,048 a warp: 32 warps, exactly 1,024 threads.
        assert_eq!(limit(64), 1024);
        // 128 * 32 = 4,096 a warp: 16 warps, 512 threads.
        assert_eq!(limit(128), 512);
        // 168 * 32 = 5,376 = 21 whole units of 256: 65,536 / 5,376 = 12.2, so 12 warps, 384 threads.
        assert_eq!(limit(168), 384);
        // 170 * 32 = 5,440 rounds up to 22 units, 5,632: 65,536 / 5,632 = 11.6, so 11 warps,
        // 352 threads (unrounded, 5,440 would wrongly allow 12).
        assert_eq!(limit(170), 352);
        // 255 * 32 = 8,160 rounds up to 8,192: 8 warps, 256 threads.
        assert_eq!(limit(255), 256);
        // No registers at all leaves only the hardware cap.
        assert_eq!(limit(0), 1024);
    }

    #[test]
    fn a_report_saved_before_the_block_limit_existed_still_loads() {
        let saved = r#"{"registers":38,"static_smem_bytes":0,"local_bytes":0,
            "spill_store_bytes":0,"spill_load_bytes":0,"barriers":1,"raw_lines":[]}"#;
        let usage: ResourceUsage = serde_json::from_str(saved).expect("older report parses");
        assert_eq!((usage.registers, usage.max_threads_per_block), (38, 0));
        assert!(
            !usage.rejects_block_of(1024),
            "an unknown limit refuses nothing"
        );
    }

    #[test]
    fn a_missing_entry_is_none() {
        assert_eq!(parse_ptxas_log(LOG, "attention"), None);
        assert_eq!(parse_ptxas_log("", "attention_prefill"), None);
    }

    fn occupancy(threads: u32, registers: u32, static_smem: u32, dynamic_smem: u32) -> Occupancy {
        let usage = ResourceUsage {
            registers,
            static_smem_bytes: static_smem,
            ..Default::default()
        };
        let geometry = LaunchGeometry {
            threads,
            dynamic_smem_bytes: dynamic_smem,
            ..FLASH_PREFILL.default_geometry()
        };
        theoretical_occupancy(&usage, &geometry, &SmLimits::typical(DEFAULT_TARGET))
    }

    #[test]
    fn registers_limit_256_threads_at_64_registers_to_half() {
        // 64 regs * 32 lanes = 2048 per warp; 65536 / 2048 = 32 warps = 4 blocks of 8.
        let o = occupancy(256, 64, 0, 0);
        assert_eq!(
            (o.blocks_per_sm, o.warps_per_sm, o.limiter),
            (4, 32, Limiter::Registers)
        );
        assert_eq!(o.fraction, 0.5);
    }

    #[test]
    fn register_granularity_rounds_up_per_warp() {
        // 33 regs * 32 = 1056, rounded to 1280 per warp: 51 warps fit, so 6 blocks of 8.
        let o = occupancy(256, 33, 0, 0);
        assert_eq!((o.blocks_per_sm, o.limiter), (6, Limiter::Registers));
    }

    #[test]
    fn a_tie_with_the_thread_limit_names_threads() {
        // 32 regs: 1024 per warp, 64 warps by registers; 2048 threads also allow 8 blocks.
        let o = occupancy(256, 32, 0, 0);
        assert_eq!(
            (o.blocks_per_sm, o.fraction, o.limiter),
            (8, 1.0, Limiter::Threads)
        );
    }

    #[test]
    fn shared_memory_counts_static_dynamic_and_the_reserve() {
        // 48 KiB + 50 KiB = 98 KiB, plus 1 KiB reserved: 228 / 99 = 2 blocks.
        let o = occupancy(256, 32, 48 * 1024, 50 * 1024);
        assert_eq!(
            (o.blocks_per_sm, o.warps_per_sm, o.limiter),
            (2, 16, Limiter::SharedMemory)
        );
        // 100 bytes rounds up to 128, plus 1 KiB: 228 KiB / 1152 = 202, far above 32.
        assert_eq!(occupancy(32, 16, 100, 0).limiter, Limiter::Blocks);
    }

    #[test]
    fn small_blocks_hit_the_block_limit() {
        let o = occupancy(32, 16, 0, 0);
        assert_eq!((o.blocks_per_sm, o.warps_per_sm, o.fraction), (32, 32, 0.5));
        assert_eq!(o.limiter, Limiter::Blocks);
    }

    #[test]
    fn a_block_that_cannot_fit_has_zero_occupancy() {
        let too_many_regs = occupancy(1024, 255, 0, 0);
        assert_eq!(
            (too_many_regs.blocks_per_sm, too_many_regs.limiter),
            (0, Limiter::Registers)
        );
        let too_much_smem = occupancy(128, 32, 1024, 227 * 1024);
        assert_eq!(
            (too_much_smem.blocks_per_sm, too_much_smem.limiter),
            (0, Limiter::SharedMemory)
        );
        assert_eq!(too_much_smem.fraction, 0.0);
    }

    #[test]
    fn a_block_larger_than_the_kernel_allows_cannot_launch() {
        // As `__launch_bounds__(128)` would leave it: few registers, yet 128 threads at most.
        let usage = ResourceUsage {
            registers: 32,
            max_threads_per_block: 128,
            ..Default::default()
        };
        let with_threads = |threads| {
            let geometry = LaunchGeometry {
                threads,
                ..FLASH_PREFILL.default_geometry()
            };
            theoretical_occupancy(&usage, &geometry, &SmLimits::typical(DEFAULT_TARGET))
        };
        let too_big = with_threads(256);
        assert_eq!(
            (too_big.blocks_per_sm, too_big.warps_per_sm, too_big.limiter),
            (0, 0, Limiter::ThreadsPerBlock)
        );
        assert_eq!(too_big.fraction, 0.0);
        // At the limit itself: 4 warps a block, 16 blocks fill the SM's 64 warps.
        let at_limit = with_threads(128);
        assert_eq!(
            (at_limit.blocks_per_sm, at_limit.limiter),
            (16, Limiter::Threads)
        );
        assert!(usage.rejects_block_of(129) && !usage.rejects_block_of(128));
    }

    #[test]
    fn odd_thread_counts_round_up_to_whole_warps() {
        // 100 threads occupy 4 warps: 16 blocks by warps, 20 by the 2048-thread limit.
        let o = occupancy(100, 16, 0, 0);
        assert_eq!(
            (o.blocks_per_sm, o.warps_per_sm, o.limiter),
            (16, 64, Limiter::Threads)
        );
    }

    /// The attribute sets drivers report, per generation.
    fn limits_of(compute_capability: (i32, i32)) -> SmLimits {
        SmLimits::typical(compute_capability)
    }

    fn occupancy_on(
        compute_capability: (i32, i32),
        threads: u32,
        registers: u32,
        smem: u32,
    ) -> Occupancy {
        let usage = ResourceUsage {
            registers,
            static_smem_bytes: smem,
            ..Default::default()
        };
        let geometry = LaunchGeometry {
            threads,
            dynamic_smem_bytes: 0,
            ..FLASH_PREFILL.default_geometry()
        };
        theoretical_occupancy(&usage, &geometry, &limits_of(compute_capability))
    }

    #[test]
    fn limits_follow_the_driver_attributes_of_each_generation() {
        // (capability, warps per SM, blocks per SM, smem per SM, smem per block, reserve)
        let expected = [
            ((7, 0), 64, 32, 96 * 1024, 96 * 1024, 0),
            ((7, 5), 32, 16, 64 * 1024, 64 * 1024, 0),
            ((8, 0), 64, 32, 164 * 1024, 163 * 1024, 1024),
            ((8, 6), 48, 16, 100 * 1024, 99 * 1024, 1024),
            ((8, 9), 48, 24, 100 * 1024, 99 * 1024, 1024),
            ((9, 0), 64, 32, 228 * 1024, 227 * 1024, 1024),
        ];
        for (cc, warps, blocks, smem_sm, smem_block, reserve) in expected {
            let limits = limits_of(cc);
            assert_eq!(
                (
                    limits.max_warps_per_sm,
                    limits.max_blocks_per_sm,
                    limits.smem_per_sm_bytes,
                    limits.max_smem_per_block_bytes,
                    limits.smem_reserved_per_block_bytes
                ),
                (warps, blocks, smem_sm, smem_block, reserve),
                "{cc:?}"
            );
        }
    }

    #[test]
    fn the_same_kernel_fills_each_generation_differently() {
        // 256 threads, 64 registers: 2,048 registers a warp, 32 warps by the
        // register file everywhere (64 K), so 4 blocks where 32+ warps fit.
        let o = |cc| occupancy_on(cc, 256, 64, 0);
        // V100, A100, H200: 64 warp slots, half full.
        for cc in [(7, 0), (8, 0), (9, 0)] {
            assert_eq!((o(cc).blocks_per_sm, o(cc).fraction), (4, 0.5), "{cc:?}");
        }
        // T4: 1,024 threads a SM, so 4 blocks fill all 32 warp slots.
        assert_eq!(
            (
                o((7, 5)).blocks_per_sm,
                o((7, 5)).fraction,
                o((7, 5)).limiter
            ),
            (4, 1.0, Limiter::Threads)
        );
        // RTX 3090 and L4: 48 warp slots; 32 by registers is two thirds.
        let ampere = o((8, 6));
        assert_eq!(
            (ampere.blocks_per_sm, ampere.limiter),
            (4, Limiter::Registers)
        );
        assert!((ampere.fraction - 2.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn shared_memory_caps_differ_by_generation() {
        // 40 KiB of shared memory, 128 threads, few registers.
        let o = |cc| occupancy_on(cc, 128, 32, 40 * 1024);
        // V100: 96 KiB, no reserve, 256-byte units: 2 blocks.
        assert_eq!(
            (o((7, 0)).blocks_per_sm, o((7, 0)).limiter),
            (2, Limiter::SharedMemory)
        );
        // T4: 64 KiB: 1 block.
        assert_eq!(o((7, 5)).blocks_per_sm, 1);
        // A100: 164 KiB / 41 KiB = 4; L4: 100 KiB / 41 KiB = 2; H200: 228 / 41 = 5.
        assert_eq!(o((8, 0)).blocks_per_sm, 4);
        assert_eq!(o((8, 9)).blocks_per_sm, 2);
        assert_eq!(o((9, 0)).blocks_per_sm, 5);
        // 64 KiB fits a block on an A100 but not on a T4.
        assert_eq!(occupancy_on((7, 5), 128, 32, 65 * 1024).blocks_per_sm, 0);
        assert_eq!(occupancy_on((8, 0), 128, 32, 65 * 1024).blocks_per_sm, 2);
    }

    #[test]
    fn the_driver_figures_win_over_the_typical_set() {
        // An A100 whose driver reports a smaller opt-in carve-out (as under MIG or vGPU).
        let mut reported = crate::facts::arch::traits((8, 0)).typical;
        reported.smem_per_sm_bytes = 100 * 1024;
        reported.threads_per_sm = 1024;
        let limits = SmLimits::from_attributes(&reported, (8, 0));
        assert_eq!(
            (limits.smem_per_sm_bytes, limits.max_warps_per_sm),
            (100 * 1024, 32)
        );
        assert_eq!(limits.smem_granularity_bytes, 128);
    }

    #[test]
    fn the_block_size_estimate_uses_the_log_target() {
        let log = "ptxas info    : Compiling entry function 'attention_prefill' for 'sm_75'\n\
                   ptxas info    : Used 255 registers, used 1 barriers, 384 bytes cmem[0]\n";
        let usage = parse_ptxas_log(log, "attention_prefill").expect("entry present");
        // 255 * 32 rounds to 8,192 a warp: 8 warps of the 64 K file on a T4 too.
        assert_eq!(usage.max_threads_per_block, 256);
        assert_eq!(
            target("ptxas info    : Compiling entry function 'x' for 'sm_89'"),
            (8, 9)
        );
        assert_eq!(
            target("ptxas info    : Compiling entry function 'x'"),
            DEFAULT_TARGET
        );
    }
}
