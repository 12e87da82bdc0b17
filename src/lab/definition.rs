//! What a lab is to the engine: one value that carries everything that
//! differs between labs.
//!
//! The engine (source checks, NVRTC, the GPU runner, grading, the screens)
//! is written against [`Lab`] alone: the lab as data ([`LabInfo`]: names,
//! kernel, tolerance, cases, baselines) and nine verbs. A lab says which
//! kernel it launches and with which arguments ([`Abi`]); a case it parsed
//! knows how it becomes concrete inputs ([`CaseRecipe::generate`]), and those
//! inputs the exact answer ([`CaseInputs::oracle`]) and how to read a wrong
//! one ([`CaseInputs::diagnose`]); a problem size says what it costs
//! ([`Problem::work`]). Nothing outside `lab/` names a head count or a tensor.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::geometry::{GeometryError, LaunchGeometry};
use crate::grade::compare::{Comparison, OutputShape, Tolerance};
use crate::grade::experiment::Experiments;
use crate::grade::integrity::Integrity;
use crate::grade::roofline::{Roofline, Work, REREAD_FACTOR};

pub use super::args::{ArgKind, ArgSpec, ArgValue};

/// The kernel a lab launches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Abi {
    /// The symbol every submission must export.
    pub entry_point: &'static str,
    /// The C signature, shown in messages and read for the ABI check.
    pub signature: &'static str,
    /// The parameters, in the signature's order (exactly one output).
    pub args: Vec<ArgSpec>,
}

/// A problem size as the engine and the screens see it.
// `remote = "Self"` makes the derives plain functions (`Problem::serialize`,
// `Problem::deserialize`) that the trait impls below call: reading goes
// through [`ProblemRecord`], which also takes the first lab's old shape,
// without a second list of the fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub struct Problem {
    /// How tables name the size (`64x1000`; `5s/118t` for 5 sequences, 118 new tokens).
    pub label: String,
    /// The size in words, for titles (`C = 64, P = 1000`).
    pub detail: String,
    /// What a query row sees, for the heatmap's caption.
    pub row_hint: String,
    pub output: OutputShape,
    /// Query heads that share one KV head (drawn as groups).
    pub head_group: usize,
    /// First output row of each sequence: one entry for a single sequence.
    pub sequence_starts: Vec<usize>,
    /// Rows of the longest sequence (what a batched grid is sized by).
    pub max_sequence_rows: usize,
    pub work: Work,
}

impl Serialize for Problem {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        Problem::serialize(self, serializer)
    }
}

impl<'de> Deserialize<'de> for Problem {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(match ProblemRecord::deserialize(deserializer)? {
            ProblemRecord::Current(problem) => problem,
            ProblemRecord::FlashPrefillShape {
                chunk_len,
                prefix_len,
            } => super::flash_prefill::contract::Shape {
                chunk_len,
                prefix_len,
            }
            .problem(),
        })
    }
}

/// A problem as stored: current records, or the first lab's `{chunk_len,
/// prefix_len}` shape that histories written before labs were values hold.
#[derive(Deserialize)]
#[serde(untagged)]
enum ProblemRecord {
    Current(#[serde(with = "Problem")] Problem),
    FlashPrefillShape { chunk_len: usize, prefix_len: usize },
}

/// Attention work (flops) above which a check case's output is graded
/// against the GPU float64 reference, which the CPU oracle proves on
/// sampled rows (docs/CASES.md, "Long cases"): the whole output on the CPU
/// would take seconds of every check there, and minutes of CI.
pub const WHOLE_ORACLE_FLOPS: f64 = 4e9;

impl Problem {
    /// Whether a case of this size is graded against the GPU reference
    /// proven on sampled rows, not the CPU oracle's whole output.
    pub fn oracle_sampled(&self) -> bool {
        self.work.flops > WHOLE_ORACLE_FLOPS
    }

    /// How many case watchdogs (`--case-timeout`) a case of this size gets:
    /// one, or one per [`WHOLE_ORACLE_FLOPS`] of work begun for a larger
    /// case, whose launches, inputs and diagnosis replays all grow with it,
    /// so a kernel that finishes is never called one that hangs.
    pub fn watchdogs(&self) -> f64 {
        (self.work.flops / WHOLE_ORACLE_FLOPS).ceil().max(1.0)
    }

    /// A size that could not be worked out (a case whose tensors cannot be
    /// read); running the case says why.
    pub fn unknown() -> Self {
        Self {
            label: "?".into(),
            detail: "size unknown".into(),
            row_hint: String::new(),
            output: OutputShape {
                rows: 0,
                heads: 0,
                dim: 0,
            },
            head_group: 1,
            sequence_starts: Vec::new(),
            max_sequence_rows: 0,
            work: Work {
                flops: 0.0,
                compulsory_bytes: 0,
                output_bytes: 0,
                tensor_roof: None,
            },
        }
    }
}

/// What a case's recipe can do, in the lab's own types: make the case's
/// inputs, say its size, and cross the worker pipe. The engine holds it in
/// [`LabCase`] and never needs its type.
pub trait CaseRecipe: Send + Sync {
    /// The case's concrete inputs from the run's seed.
    fn generate(&self, seed: u64) -> Result<CaseData, CaseError>;
    /// The case's problem size without its tensors (what a case that is not
    /// run is shown with).
    fn problem(&self) -> Result<Problem, CaseError>;
    /// The recipe as the JSON text it crosses the worker pipe in.
    fn to_json(&self) -> String;
}

/// A hazard case, for any lab: its name, its summary, the folder of its own
/// tensors if it brings them, and the lab's own recipe, decoded once (when
/// the cases file was parsed, or when the case crossed the worker pipe).
#[derive(Clone)]
pub struct LabCase {
    pub name: String,
    pub summary: String,
    /// The folder the case reads its own tensors from, if it brings them.
    pub own_tensors: Option<std::path::PathBuf>,
    /// The lab whose recipe this is (the pipe names it, so the worker can decode it).
    pub lab: &'static str,
    pub recipe: std::sync::Arc<dyn CaseRecipe>,
}

impl LabCase {
    /// The case's concrete inputs from the run's seed.
    pub fn generate(&self, seed: u64) -> Result<CaseData, CaseError> {
        self.recipe.generate(seed)
    }
}

impl std::fmt::Debug for LabCase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LabCase")
            .field("lab", &self.lab)
            .field("name", &self.name)
            .field("recipe", &self.recipe.to_json())
            .finish()
    }
}

/// Two cases are the same when every field and the recipe's JSON are.
impl PartialEq for LabCase {
    fn eq(&self, other: &Self) -> bool {
        (&self.name, &self.summary, &self.own_tensors, self.lab)
            == (&other.name, &other.summary, &other.own_tensors, other.lab)
            && self.recipe.to_json() == other.recipe.to_json()
    }
}

/// One case's concrete inputs, ready to launch and to grade.
#[derive(Clone)]
pub struct CaseData {
    pub problem: Problem,
    /// The lab's own inputs, with what they can do.
    pub inputs: std::sync::Arc<dyn CaseInputs>,
    /// The case's own expected output, when it brings one (checked in addition to the oracle).
    pub expected: Option<Vec<f64>>,
    /// Query heads (bit `h` for head `h`) where the case plants large
    /// scores; 0 when it plants nothing, so no diagnosis may speak of a plant.
    pub planted_heads: u32,
}

impl std::fmt::Debug for CaseData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaseData")
            .field("problem", &self.problem.label)
            .field("planted_heads", &self.planted_heads)
            .finish_non_exhaustive()
    }
}

/// One launch's output and how it compares, for a diagnosis.
#[derive(Debug, Clone, Copy)]
pub struct Graded<'a> {
    /// The launch the kernel ran with (its declared geometry): what a
    /// lab's models of a planted bug follow where the launch shapes the
    /// work (the decode lab's `splits=`).
    pub launch: &'a LaunchGeometry,
    pub out: &'a [f32],
    pub reference: &'a [f64],
    pub comparison: &'a Comparison,
    pub integrity: &'a Integrity,
    /// What reruns under changed conditions showed (empty when none ran).
    pub experiments: &'a Experiments,
}

/// A case's diagnosis: the line a student reads, and the cause it names as
/// a short stable word of the lab's (what the check's verdict line groups
/// cases by), when it names one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnosis {
    pub line: String,
    pub cause: Option<&'static str>,
    /// Causes whose models write the same output on this case, when it
    /// cannot tell them apart (then `cause` is `None`).
    pub candidates: Vec<&'static str>,
}

impl Diagnosis {
    pub fn new(line: impl Into<String>, cause: &'static str) -> Self {
        Self {
            line: line.into(),
            cause: Some(cause),
            candidates: Vec::new(),
        }
    }

    /// A line that names no single cause (a correct output, or a pattern only).
    pub fn plain(line: impl Into<String>) -> Self {
        Self {
            line: line.into(),
            cause: None,
            candidates: Vec::new(),
        }
    }

    /// A line that says several causes, each of whose models reproduces
    /// the case, and names none: the check's other cases may tell them apart.
    pub fn either(line: impl Into<String>, candidates: Vec<&'static str>) -> Self {
        Self {
            line: line.into(),
            cause: None,
            candidates,
        }
    }

    /// This diagnosis, said of the rerun with the sentinels tagged
    /// ([`CaseInputs::sentinels_tagged`]) rather than of the first run.
    pub fn seen_on_tagged_rerun(mut self) -> Self {
        self.line.push_str(
            " (seen on a rerun with the unused cache slots holding finite tags instead of NaN, \
             where the first run's NaN told no misread from another)",
        );
        self
    }
}

/// How one case of a check ended, as a lab's verdict reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaseState {
    Pass,
    Fail,
    Timeout,
    Crash,
    NotRun,
}

/// One case of a finished check, for [`Lab::verdict`].
#[derive(Debug, Clone, Copy)]
pub struct CaseSummary<'a> {
    pub name: &'a str,
    pub state: CaseState,
    pub comparison: Option<&'a Comparison>,
    pub integrity: Option<&'a Integrity>,
    pub diagnosis: &'a str,
    pub cause: Option<&'a str>,
}

/// A cases file, case or tensor that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CaseError {
    #[error("cases file {file}: {message}")]
    Parse { file: String, message: String },
    #[error("case `{case}`: {message}")]
    Invalid { case: String, message: String },
}

/// The `constexpr int NAME = VALUE;` lines a lab's body constants are.
pub fn int_constants(constants: &[(&'static str, usize)]) -> Vec<(&'static str, String)> {
    constants
        .iter()
        .map(|&(name, value)| (name, format!("constexpr int {name} = {value};")))
        .collect()
}

/// A lab chosen for a run: compared and printed by name.
#[derive(Clone, Copy)]
pub struct LabRef(pub &'static dyn Lab);

impl std::ops::Deref for LabRef {
    type Target = dyn Lab;
    fn deref(&self) -> &Self::Target {
        self.0
    }
}

impl std::fmt::Debug for LabRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.name())
    }
}

impl PartialEq for LabRef {
    fn eq(&self, other: &Self) -> bool {
        self.0.name() == other.0.name()
    }
}

impl Eq for LabRef {}

/// A [`KernelFile`] shipped in this repository, embedded in the binary so
/// an installed flashprof carries it: `shipped_kernel!("kernels/flash-prefill/starter.cu")`.
macro_rules! shipped_kernel {
    ($path:expr) => {
        $crate::lab::definition::KernelFile {
            path: $path,
            text: include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/", $path)),
        }
    };
}
pub(crate) use shipped_kernel;

/// The kernels a lab ships from `kernels/<folder>/` (`starter.cu`,
/// `reference.cu`, `support.cu`), its float64 reference being the entry
/// point `oracle_f64` of `support.cu`, launched as `launch` says
/// ([`OracleLaunch`]). With `after`, `support.cu` is compiled behind that
/// shared file (a family's common body, `kernels/<family>/...`).
macro_rules! shipped {
    ($folder:literal, $oracle_f64:literal, $launch:expr) => {
        $crate::lab::definition::shipped!(@support $folder, $oracle_f64, $launch,
            $crate::lab::definition::shipped_kernel!(concat!("kernels/", $folder, "/support.cu")))
    };
    ($folder:literal, $oracle_f64:literal, $launch:expr, after $common:literal) => {
        $crate::lab::definition::shipped!(@support $folder, $oracle_f64, $launch,
            $crate::lab::definition::KernelFile {
                path: concat!("kernels/", $folder, "/support.cu"),
                text: concat!(
                    include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/", $common)),
                    include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/kernels/", $folder, "/support.cu"))
                ),
            })
    };
    (@support $folder:literal, $oracle_f64:literal, $launch:expr, $support:expr) => {
        $crate::lab::definition::Shipped {
            starter: $crate::lab::definition::shipped_kernel!(concat!(
                "kernels/",
                $folder,
                "/starter.cu"
            )),
            reference: $crate::lab::definition::shipped_kernel!(concat!(
                "kernels/",
                $folder,
                "/reference.cu"
            )),
            support: $crate::lab::definition::SupportKernels {
                file: $support,
                oracle_f64: $oracle_f64,
                launch: $launch,
            },
        }
    };
}
pub(crate) use shipped;

/// A kernel source file shipped with a lab.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelFile {
    /// The path shown in messages (relative to the repository).
    pub path: &'static str,
    pub text: &'static str,
}

/// flashprof's own trusted kernels for a lab.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SupportKernels {
    pub file: KernelFile,
    /// A float64 reference with the entry point's arguments, but `double*`
    /// for the output, then a row list and its length (null: every row).
    pub oracle_f64: &'static str,
    pub launch: OracleLaunch,
}

/// How a lab's float64 reference is launched over `rows` output rows (every
/// row, or the listed ones).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OracleLaunch {
    /// One warp per (row, head), `threads` a block.
    WarpPerRowHead { threads: u32 },
    /// One block of `threads` per `rows` rows and KV head: the paged
    /// family's tiled body (kernels/paged-family/tiled-oracle.cuh).
    RowTiles {
        threads: u32,
        rows: u32,
        kv_heads: u32,
    },
}

impl OracleLaunch {
    /// Threads a block.
    pub fn threads(self) -> u32 {
        match self {
            OracleLaunch::WarpPerRowHead { threads } | OracleLaunch::RowTiles { threads, .. } => {
                threads
            }
        }
    }

    /// Blocks for `rows` output rows of `heads` heads.
    pub fn blocks(self, rows: usize, heads: usize) -> u32 {
        let blocks = match self {
            OracleLaunch::WarpPerRowHead { threads } => {
                (rows * heads * 32).div_ceil(threads as usize)
            }
            OracleLaunch::RowTiles {
                rows: tile,
                kv_heads,
                ..
            } => rows.div_ceil(tile as usize) * kv_heads as usize,
        };
        (blocks as u32).max(1)
    }
}

/// What the engine reads about a lab as data: its names, its kernel, its
/// contract's constants, its tolerance, its cases and timing draw, and the
/// kernels it ships. A lab writes it once, as a constant
/// ([`super::typed::TypedLab::INFO`]); every command reads it through [`Lab::info`].
#[derive(Debug, Clone)]
pub struct LabInfo {
    /// The name users type (`--lab flash-prefill`).
    pub name: &'static str,
    /// The contract the ABI follows, with its version (`attention-v1`).
    pub contract: &'static str,
    /// One line for `flashprof labs`.
    pub description: &'static str,
    /// The file the TUI opens (made from the starter) when given none.
    pub default_file: &'static str,
    /// The symbol every submission must export.
    pub entry_point: &'static str,
    /// The C signature, shown in messages and read for the ABI check.
    pub signature: &'static str,
    /// `constexpr int` names a kernel body may use without defining them.
    pub body_constants: &'static [(&'static str, usize)],
    /// The launch a file gets when it declares none.
    pub default_geometry: LaunchGeometry,
    /// How the roofline speaks of this lab's kernels.
    pub roofline: RooflineWords,
    pub tolerance: Tolerance,
    /// The embedded cases file (TOML).
    pub cases: &'static str,
    /// The range the timing case draws its float inputs from, uniformly.
    /// Every timed or profiled launch gets fresh inputs made on the GPU from
    /// the timing case's own: each element in this range drawn again over
    /// it, everything outside it (sentinels, planted values) kept, so the
    /// distribution and the planted structure stay those of the case.
    pub timing_draw: std::ops::Range<f32>,
    /// The starter, reference and support kernels.
    pub kernels: Shipped,
}

/// How the roofline speaks of a lab's kernels.
#[derive(Debug, Clone, Copy)]
pub struct RooflineWords {
    /// Whether the lab is graded on bytes (a bandwidth-bound kernel): its
    /// timing then measures the streaming probes and every report leads
    /// with achieved bandwidth ([`crate::grade::roofline::Bandwidth`]).
    pub graded_on_bytes: bool,
    /// What a kernel of this lab must read once, in the lab's words (`the
    /// FP8 cache blocks and the bf16 q, kNew and vNew`), when the roofline's
    /// verdict is to say the DRAM reads against it; `None` leaves it out.
    pub compulsory_reads: Option<&'static str>,
    /// Why a kernel of this lab reads its inputs `reads_over_floor` times
    /// from DRAM, in the lab's words, when the lab knows (prefixed to the
    /// roofline's advice once that is about re-reads).
    pub reread_cause: fn(f64) -> Option<String>,
}

impl RooflineWords {
    /// A compute-bound lab with no words of its own for the roofline.
    pub const PLAIN: RooflineWords = RooflineWords {
        graded_on_bytes: false,
        compulsory_reads: None,
        reread_cause: |_| None,
    };
}

/// The kernels a lab ships: `kernels/<lab-name>/{starter,reference,support}.cu`.
#[derive(Debug, Clone, Copy)]
pub struct Shipped {
    pub starter: KernelFile,
    pub reference: KernelFile,
    pub support: SupportKernels,
}

/// What one case's inputs can do, in the lab's own types: the launch's
/// arguments, the exact answer, the reading of a wrong one. The engine holds
/// them behind [`CaseData`] and never needs their type.
pub trait CaseInputs: Send + Sync {
    /// The launch arguments, one per [`Abi::args`] entry, in order.
    fn args(&self) -> Vec<ArgValue<'_>>;
    /// The float64 answer over the whole output; with `rows`, only those
    /// output rows, laid out one after another in the order given (what
    /// spot-checking a large output needs).
    fn oracle(&self, rows: Option<&[usize]>) -> Vec<f64>;
    /// Per (row, head) of the output, what the tolerance's absolute part is
    /// multiplied by (see [`Tolerance::allowed_scaled`]); `None` when it is
    /// the same everywhere.
    fn tolerance_scales(&self) -> Option<Vec<f64>>;
    /// The likeliest cause of what a launch produced, in the lab's language,
    /// in one line; `data` is the case these inputs belong to.
    fn diagnose(&self, data: &CaseData, graded: &Graded<'_>) -> Diagnosis;
    /// What a launch that faulted on these inputs says about the kernel,
    /// beyond the fault itself: `None` where a fault says nothing more.
    fn fault_note(&self) -> Option<String>;
    /// These inputs with every score multiplied by about `factor` (below 1),
    /// so that no `exp` of a score can overflow; `None` when the lab cannot
    /// shrink its scores (the overflow experiment is then skipped).
    fn scores_shrunk(&self, factor: f32) -> Option<std::sync::Arc<dyn CaseInputs>>;
    /// These inputs with every sentinel (the value a slot no kernel should
    /// read holds, NaN in some labs) replaced by a finite value that tags
    /// the slot, so a misread shows which slot it reached instead of a NaN
    /// every misread shares; `None` when the lab has no such slots.
    fn sentinels_tagged(&self) -> Option<std::sync::Arc<dyn CaseInputs>>;
    /// What one timed launch on these inputs gets on top of the fresh draw
    /// (see [`super::typed::TypedLab::redraw`]).
    fn redraw(&self, rng: &mut rand_chacha::ChaCha8Rng) -> super::redraw::Redraw;
    /// The inputs themselves, for the lab's own unit tests to read back in
    /// its types ([`super::typed::inputs_of`]); the engine never looks.
    #[cfg(test)]
    fn as_any(&self) -> &dyn std::any::Any;
}

/// Everything that differs between labs and is not data, as the engine
/// takes it: parsing, generating and sizing cases, the lab's launch keys and
/// grid, the verdict over a check, the timing shape and the oracle's proof.
/// A lab does not implement this itself: it implements
/// [`super::typed::TypedLab`] in its own types, and the blanket
/// implementation there provides this.
pub trait Lab: Send + Sync {
    /// The lab as data.
    fn info(&self) -> &'static LabInfo;
    /// The kernel it launches, with the kinds of its arguments.
    fn abi(&self) -> Abi;
    /// The launch `source` declares on its `@flashprof` line, in the lab's
    /// keys, or the default when it declares none.
    fn declared_geometry(&self, source: &str) -> Result<LaunchGeometry, GeometryError>;
    /// The grid for `geometry` on `problem`.
    fn grid(&self, geometry: &LaunchGeometry, problem: &Problem) -> (u32, u32, u32);
    /// Parses and checks a cases file; `base` resolves relative tensor folders.
    fn parse_cases(&self, text: &str, file: &str, base: &Path) -> Result<Vec<LabCase>, CaseError>;
    /// A case of this lab from the JSON text of its recipe (as it crossed
    /// the worker pipe).
    fn decode_case(&self, recipe: &str) -> Result<LabCase, CaseError>;
    /// One line for the whole check, read from the pattern across its cases
    /// (which fail, which pass, and the causes their diagnoses name); `None`
    /// when no case ran.
    fn verdict(&self, cases: &[CaseSummary<'_>]) -> Option<String>;
    /// The timing shape, with `KEY=VALUE` overrides from the command line.
    fn timing_case(&self, overrides: &[(String, String)]) -> Result<LabCase, String>;
    /// Checks the oracle against the lab's golden case; `Err` says why it cannot be trusted.
    fn prove_oracle(&self) -> Result<String, String>;
}

/// The lab's data, read where a command wants one field, and its cases'
/// verbs, reached through the case's data.
impl<'a> dyn Lab + 'a {
    pub fn name(&self) -> &'static str {
        self.info().name
    }
    pub fn contract(&self) -> &'static str {
        self.info().contract
    }
    pub fn description(&self) -> &'static str {
        self.info().description
    }
    pub fn default_file(&self) -> &'static str {
        self.info().default_file
    }
    /// Names a kernel body may use without defining them, with their C++
    /// definitions (the lab's shape constants).
    pub fn body_constants(&self) -> Vec<(&'static str, String)> {
        int_constants(self.info().body_constants)
    }
    pub fn default_geometry(&self) -> LaunchGeometry {
        self.info().default_geometry
    }
    pub fn graded_on_bytes(&self) -> bool {
        self.info().roofline.graded_on_bytes
    }
    pub fn compulsory_reads(&self) -> Option<&'static str> {
        self.info().roofline.compulsory_reads
    }
    pub fn reread_cause(&self, reads_over_floor: f64) -> Option<String> {
        (self.info().roofline.reread_cause)(reads_over_floor)
    }
    /// A launch's roofline read in this lab's terms: the DRAM reads against
    /// [`RooflineWords::compulsory_reads`], and [`RooflineWords::reread_cause`] before
    /// the advice once that advice is about re-reads.
    pub fn read_roofline(&self, roofline: &mut Roofline) {
        if let Some(inputs) = self.compulsory_reads() {
            roofline.say_reads(inputs);
        }
        let over = roofline.dram.as_ref().map_or(0.0, |d| d.reads_over_floor);
        if over >= REREAD_FACTOR {
            if let Some(cause) = self.reread_cause(over) {
                roofline.verdict.next_step = format!("{cause}; {}", roofline.verdict.next_step);
            }
        }
    }
    pub fn tolerance(&self) -> Tolerance {
        self.info().tolerance
    }
    pub fn embedded_cases(&self) -> &'static str {
        self.info().cases
    }
    pub fn timing_draw_range(&self) -> std::ops::Range<f32> {
        self.info().timing_draw.clone()
    }
    pub fn starter(&self) -> KernelFile {
        self.info().kernels.starter
    }
    pub fn reference(&self) -> KernelFile {
        self.info().kernels.reference
    }
    pub fn support(&self) -> SupportKernels {
        self.info().kernels.support
    }
    /// The folder a case reads its own tensors from, if it brings them (the
    /// worker's sandbox must let it read there; such a case has no shape to
    /// profile at).
    pub fn own_tensors(&self, case: &LabCase) -> Option<std::path::PathBuf> {
        case.own_tensors.clone()
    }
    /// The case's problem size without its tensors (see [`CaseRecipe::problem`]).
    pub fn problem(&self, case: &LabCase) -> Result<Problem, CaseError> {
        self.own(case)?.recipe.problem()
    }
    /// The case's concrete inputs from the run's seed.
    pub fn generate(&self, case: &LabCase, seed: u64) -> Result<CaseData, CaseError> {
        self.own(case)?.generate(seed)
    }
    /// `case`, when it is a case of this lab: another lab's recipe would
    /// run with this lab's grid and arguments.
    fn own<'c>(&self, case: &'c LabCase) -> Result<&'c LabCase, CaseError> {
        match case.lab == self.name() {
            true => Ok(case),
            false => Err(CaseError::Invalid {
                case: case.name.clone(),
                message: format!("a case of lab `{}`, not of `{}`", case.lab, self.name()),
            }),
        }
    }
    /// A case's launch arguments, one per [`Abi::args`] entry, in order.
    pub fn args<'d>(&self, data: &'d CaseData) -> Vec<ArgValue<'d>> {
        data.inputs.args()
    }
    /// See [`CaseInputs::oracle`].
    pub fn oracle(&self, data: &CaseData, rows: Option<&[usize]>) -> Vec<f64> {
        data.inputs.oracle(rows)
    }
    /// See [`CaseInputs::tolerance_scales`].
    pub fn tolerance_scales(&self, data: &CaseData) -> Option<Vec<f64>> {
        data.inputs.tolerance_scales()
    }
    /// See [`CaseInputs::diagnose`].
    pub fn diagnose(&self, data: &CaseData, graded: &Graded<'_>) -> Diagnosis {
        data.inputs.diagnose(data, graded)
    }
    /// See [`CaseInputs::fault_note`].
    pub fn fault_note(&self, data: &CaseData) -> Option<String> {
        data.inputs.fault_note()
    }
    /// The case's data with every score shrunk by about `factor` (see
    /// [`CaseInputs::scores_shrunk`]); the case's own answer is for the
    /// unshrunk inputs, so it is not kept.
    pub fn scores_shrunk(&self, data: &CaseData, factor: f32) -> Option<CaseData> {
        Some(CaseData {
            problem: data.problem.clone(),
            inputs: data.inputs.scores_shrunk(factor)?,
            expected: None,
            planted_heads: data.planted_heads,
        })
    }
    /// The case's data with its sentinels tagged (see
    /// [`CaseInputs::sentinels_tagged`]); the answer is unchanged, since no
    /// correct kernel reads a sentinel.
    pub fn sentinels_tagged(&self, data: &CaseData) -> Option<CaseData> {
        Some(CaseData {
            inputs: data.inputs.sentinels_tagged()?,
            ..data.clone()
        })
    }
}
