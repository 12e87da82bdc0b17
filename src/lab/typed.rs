//! The interface a lab implements: [`TypedLab`], in the lab's own types.
//!
//! A lab declares its case type (what a cases file holds, [`Recipe`]), its
//! inputs type (what one launch reads) and its argument table ([`Arg`]: the
//! entry point's parameters in order, each with where its value comes from
//! in the inputs), next to the rest of the lab as data ([`LabInfo`]). The
//! blanket `impl<L: TypedLab> Lab for L` below does what every lab used to
//! write by hand: a case to and from the JSON it travels in, and the inputs
//! wrapped with the lab's verbs on them ([`CaseInputs`]: the launch's
//! argument list in the table's order, the oracle, the diagnosis), so the
//! engine holds a case's data without knowing its type and sees only [`Lab`].

use std::path::Path;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::args::{ArgKind, ArgSpec, ArgValue};
use super::definition::{
    Abi, CaseData, CaseError, CaseInputs, CaseRecipe, CaseSummary, Diagnosis, Graded, Lab, LabCase,
    LabInfo, Problem,
};
use super::geometry::{GeometryError, LaunchGeometry};
use super::redraw::Redraw;
use super::sparse::SparseBlocks;
use rand_chacha::ChaCha8Rng;

/// A lab's case type: what one `[[case]]` of its cases file becomes, and what
/// travels to the worker (as JSON, so plain serde data).
pub trait Recipe: Serialize + DeserializeOwned + Send + Sync {
    fn name(&self) -> &str;
    fn summary(&self) -> &str;
    /// The folder the case reads its own tensors from, if it brings them.
    fn own_tensors(&self) -> Option<&Path> {
        None
    }
}

/// Where one argument's value comes from in a lab's inputs `I`.
pub enum Source<I> {
    F32(fn(&I) -> &[f32]),
    OptionalF32(fn(&I) -> Option<&[f32]>),
    I32(fn(&I) -> &[i32]),
    Bf16(fn(&I) -> &[u16]),
    U8(fn(&I) -> &[u8]),
    /// A float input whose blocks may be placed far apart ([`crate::lab::sparse`]).
    PlacedF32(fn(&I) -> (&[f32], Option<&SparseBlocks>)),
    /// A byte input whose blocks may be placed far apart.
    PlacedU8(fn(&I) -> (&[u8], Option<&SparseBlocks>)),
    I32Scalar(fn(&I) -> i32),
    F32Scalar(fn(&I) -> f32),
    F32Output,
    Bf16Output,
    /// Elements of a float scratch buffer for these inputs.
    ScratchF32(fn(&I) -> usize),
    /// Elements of a uint32 scratch buffer for these inputs.
    ScratchU32(fn(&I) -> usize),
}

/// One parameter of the entry point: its name in the signature and where its value comes from.
pub struct Arg<I> {
    pub name: &'static str,
    pub source: Source<I>,
}

impl<I> Arg<I> {
    pub const fn f32_input(name: &'static str, read: fn(&I) -> &[f32]) -> Self {
        Self::new(name, Source::F32(read))
    }
    pub const fn optional_f32_input(name: &'static str, read: fn(&I) -> Option<&[f32]>) -> Self {
        Self::new(name, Source::OptionalF32(read))
    }
    pub const fn i32_input(name: &'static str, read: fn(&I) -> &[i32]) -> Self {
        Self::new(name, Source::I32(read))
    }
    pub const fn bf16_input(name: &'static str, read: fn(&I) -> &[u16]) -> Self {
        Self::new(name, Source::Bf16(read))
    }
    pub const fn u8_input(name: &'static str, read: fn(&I) -> &[u8]) -> Self {
        Self::new(name, Source::U8(read))
    }
    /// A float input that is laid out whole, or placed where the case says.
    pub const fn placed_f32_input(
        name: &'static str,
        read: fn(&I) -> (&[f32], Option<&SparseBlocks>),
    ) -> Self {
        Self::new(name, Source::PlacedF32(read))
    }
    /// A byte input that is laid out whole, or placed where the case says.
    pub const fn placed_u8_input(
        name: &'static str,
        read: fn(&I) -> (&[u8], Option<&SparseBlocks>),
    ) -> Self {
        Self::new(name, Source::PlacedU8(read))
    }
    pub const fn int(name: &'static str, read: fn(&I) -> i32) -> Self {
        Self::new(name, Source::I32Scalar(read))
    }
    pub const fn float(name: &'static str, read: fn(&I) -> f32) -> Self {
        Self::new(name, Source::F32Scalar(read))
    }
    pub const fn f32_output(name: &'static str) -> Self {
        Self::new(name, Source::F32Output)
    }
    pub const fn bf16_output(name: &'static str) -> Self {
        Self::new(name, Source::Bf16Output)
    }
    pub const fn f32_scratch(name: &'static str, elements: fn(&I) -> usize) -> Self {
        Self::new(name, Source::ScratchF32(elements))
    }
    pub const fn u32_scratch(name: &'static str, elements: fn(&I) -> usize) -> Self {
        Self::new(name, Source::ScratchU32(elements))
    }

    const fn new(name: &'static str, source: Source<I>) -> Self {
        Self { name, source }
    }

    /// The argument as the engine sees it.
    pub fn spec(&self) -> ArgSpec {
        let kind = match self.source {
            Source::F32(_) | Source::PlacedF32(_) => ArgKind::F32Input,
            Source::OptionalF32(_) => ArgKind::OptionalF32Input,
            Source::I32(_) => ArgKind::I32Input,
            Source::Bf16(_) => ArgKind::Bf16Input,
            Source::U8(_) | Source::PlacedU8(_) => ArgKind::U8Input,
            Source::I32Scalar(_) => ArgKind::I32Scalar,
            Source::F32Scalar(_) => ArgKind::F32Scalar,
            Source::F32Output => ArgKind::F32Output,
            Source::Bf16Output => ArgKind::Bf16Output,
            Source::ScratchF32(_) => ArgKind::ScratchF32,
            Source::ScratchU32(_) => ArgKind::ScratchU32,
        };
        ArgSpec {
            name: self.name,
            kind,
        }
    }

    /// This argument's value for a launch on `inputs`.
    pub fn value<'a>(&self, inputs: &'a I) -> ArgValue<'a> {
        match self.source {
            Source::F32(read) => ArgValue::F32(read(inputs)),
            Source::OptionalF32(read) => read(inputs).map_or(ArgValue::Null, ArgValue::F32),
            Source::I32(read) => ArgValue::I32(read(inputs)),
            Source::Bf16(read) => ArgValue::Bf16(read(inputs)),
            Source::U8(read) => ArgValue::U8(read(inputs)),
            Source::PlacedF32(read) => match read(inputs) {
                (values, Some(blocks)) => ArgValue::PlacedF32(values, blocks),
                (values, None) => ArgValue::F32(values),
            },
            Source::PlacedU8(read) => match read(inputs) {
                (values, Some(blocks)) => ArgValue::PlacedU8(values, blocks),
                (values, None) => ArgValue::U8(values),
            },
            Source::I32Scalar(read) => ArgValue::Scalar(read(inputs)),
            Source::F32Scalar(read) => ArgValue::F32Scalar(read(inputs)),
            Source::F32Output | Source::Bf16Output => ArgValue::Output,
            Source::ScratchF32(elements) | Source::ScratchU32(elements) => {
                ArgValue::Scratch(elements(inputs))
            }
        }
    }
}

/// What a lab's generator made for one case and seed.
pub struct Made<I> {
    pub inputs: I,
    /// The case's own expected output, when it brings one (checked in addition to the oracle).
    pub expected: Option<Vec<f64>>,
    /// Query heads (bit `h` for head `h`) where the case plants large scores.
    pub planted_heads: u32,
}

impl<I> Made<I> {
    /// Inputs with no expected output and no plant (a timing shape).
    pub fn plain(inputs: I) -> Self {
        Self {
            inputs,
            expected: None,
            planted_heads: 0,
        }
    }
}

/// Everything that differs between labs, in the lab's own types: the lab
/// as data ([`TypedLab::INFO`], [`TypedLab::ARGS`]) and its verbs.
pub trait TypedLab: Send + Sync + 'static {
    /// One case of the cases file (and the timing case).
    type Case: Recipe;
    /// What one launch reads, as the oracle and the diagnosis want it.
    type Inputs: Send + Sync + 'static;

    /// The lab as data.
    const INFO: LabInfo;
    /// The entry point's parameters in the signature's order, each with
    /// where its value comes from (exactly one output).
    const ARGS: &'static [Arg<Self::Inputs>];

    /// Parses and checks a cases file; `base` resolves relative tensor folders.
    fn parse_cases(text: &str, file: &str, base: &Path) -> Result<Vec<Self::Case>, CaseError>;
    /// The case's inputs from the run's seed.
    fn generate(case: &Self::Case, seed: u64) -> Result<Made<Self::Inputs>, CaseError>;
    /// The engine's view of the inputs' size.
    fn problem_of(inputs: &Self::Inputs) -> Problem;
    /// The case's size without making its tensors, where that is cheaper.
    fn problem(case: &Self::Case) -> Result<Problem, CaseError> {
        Self::generate(case, 0).map(|made| Self::problem_of(&made.inputs))
    }
    /// The launch `source` declares: the shared keys (`rows_per_block`,
    /// `threads`, `dynamic_smem`, `grid`) unless the lab reads its own.
    fn declared_geometry(source: &str) -> Result<LaunchGeometry, GeometryError> {
        LaunchGeometry::from_source(source, Self::INFO.default_geometry)
    }
    /// The grid for `geometry` on `problem`.
    fn grid(geometry: &LaunchGeometry, problem: &Problem) -> (u32, u32, u32);
    /// The float64 answer over the whole output, or only `rows` one after another.
    fn oracle(inputs: &Self::Inputs, rows: Option<&[usize]>) -> Vec<f64>;
    /// Per (row, head), what scales the tolerance's absolute part (see
    /// [`CaseInputs::tolerance_scales`]); `None` when nothing does.
    fn tolerance_scales(_inputs: &Self::Inputs) -> Option<Vec<f64>> {
        None
    }
    /// What a fault on these inputs says beyond the fault (see [`CaseInputs::fault_note`]).
    fn fault_note(_inputs: &Self::Inputs) -> Option<String> {
        None
    }
    /// The likeliest cause of what a launch produced, in one line of the lab's language.
    fn diagnose(inputs: &Self::Inputs, data: &CaseData, graded: &Graded<'_>) -> Diagnosis;
    /// The inputs with every score multiplied by about `factor`, if the lab can.
    fn scores_shrunk(_inputs: &Self::Inputs, _factor: f32) -> Option<Self::Inputs> {
        None
    }
    /// The inputs with their sentinels tagged (see [`CaseInputs::sentinels_tagged`]).
    fn sentinels_tagged(_inputs: &Self::Inputs) -> Option<Self::Inputs> {
        None
    }
    /// One line for the whole check (see [`Lab::verdict`]).
    fn verdict(cases: &[CaseSummary<'_>]) -> Option<String> {
        super::verdict::common(cases)
    }
    /// What one timed launch on `inputs` (the timing case's) gets on top of
    /// the fresh draw: the lab's hazards at positions drawn from `rng`, and
    /// its block ids moved ([`Redraw`]). Nothing, for a lab with no plants.
    fn redraw(_inputs: &Self::Inputs, _rng: &mut ChaCha8Rng) -> Redraw {
        Redraw::default()
    }
    /// The timing shape, with `KEY=VALUE` overrides from the command line.
    fn timing_case(overrides: &[(String, String)]) -> Result<Self::Case, String>;
    /// That a case decoded from the worker pipe is one this lab's cases
    /// file or timing shape could have made (what parsing checks).
    fn check_case(_case: &Self::Case) -> Result<(), CaseError> {
        Ok(())
    }
    /// Checks the oracle against the lab's golden case.
    fn prove_oracle() -> Result<String, String>;
}

/// A lab's case with the lab that reads it: what the engine holds.
struct TypedCase<L: TypedLab>(L::Case);

impl<L: TypedLab> CaseRecipe for TypedCase<L> {
    fn generate(&self, seed: u64) -> Result<CaseData, CaseError> {
        L::generate(&self.0, seed).map(case_data::<L>)
    }
    fn problem(&self) -> Result<Problem, CaseError> {
        L::problem(&self.0)
    }
    fn to_json(&self) -> String {
        // Through a JSON value: its keys sorted and its floats as f64, as
        // recipes have always crossed the pipe and keyed a class's journal.
        serde_json::to_value(&self.0)
            .expect("a case recipe is plain data")
            .to_string()
    }
}

/// A case of lab `L` as the engine carries it.
pub fn lab_case<L: TypedLab>(case: L::Case) -> LabCase {
    LabCase {
        name: case.name().to_owned(),
        summary: case.summary().to_owned(),
        own_tensors: case.own_tensors().map(Path::to_path_buf),
        lab: L::INFO.name,
        recipe: Arc::new(TypedCase::<L>(case)),
    }
}

/// A lab's inputs with the lab that made them: what the engine holds.
struct Typed<L: TypedLab>(L::Inputs);

impl<L: TypedLab> CaseInputs for Typed<L> {
    fn args(&self) -> Vec<ArgValue<'_>> {
        L::ARGS.iter().map(|arg| arg.value(&self.0)).collect()
    }
    fn oracle(&self, rows: Option<&[usize]>) -> Vec<f64> {
        L::oracle(&self.0, rows)
    }
    fn tolerance_scales(&self) -> Option<Vec<f64>> {
        L::tolerance_scales(&self.0)
    }
    fn fault_note(&self) -> Option<String> {
        L::fault_note(&self.0)
    }
    fn diagnose(&self, data: &CaseData, graded: &Graded<'_>) -> Diagnosis {
        L::diagnose(&self.0, data, graded)
    }
    fn redraw(&self, rng: &mut ChaCha8Rng) -> Redraw {
        L::redraw(&self.0, rng)
    }
    fn scores_shrunk(&self, factor: f32) -> Option<Arc<dyn CaseInputs>> {
        let shrunk = L::scores_shrunk(&self.0, factor)?;
        Some(Arc::new(Typed::<L>(shrunk)))
    }
    fn sentinels_tagged(&self) -> Option<Arc<dyn CaseInputs>> {
        let tagged = L::sentinels_tagged(&self.0)?;
        Some(Arc::new(Typed::<L>(tagged)))
    }
    #[cfg(test)]
    fn as_any(&self) -> &dyn std::any::Any {
        &self.0
    }
}

/// The lab's inputs inside a case's data, for the lab's unit tests.
///
/// # Panics
/// When `data` was made by another lab.
#[cfg(test)]
pub fn inputs_of<L: TypedLab>(data: &CaseData) -> &L::Inputs {
    data.inputs
        .as_any()
        .downcast_ref::<L::Inputs>()
        .unwrap_or_else(|| panic!("a case of another lab was handed to `{}`", L::INFO.name))
}

/// A case's data from inputs the lab made.
pub fn case_data<L: TypedLab>(made: Made<L::Inputs>) -> CaseData {
    CaseData {
        problem: L::problem_of(&made.inputs),
        inputs: Arc::new(Typed::<L>(made.inputs)),
        expected: made.expected,
        planted_heads: made.planted_heads,
    }
}

impl<L: TypedLab> Lab for L {
    fn info(&self) -> &'static LabInfo {
        &L::INFO
    }
    fn abi(&self) -> Abi {
        Abi {
            entry_point: L::INFO.entry_point,
            signature: L::INFO.signature,
            args: L::ARGS.iter().map(Arg::spec).collect(),
        }
    }
    fn declared_geometry(&self, source: &str) -> Result<LaunchGeometry, GeometryError> {
        L::declared_geometry(source)
    }
    fn grid(&self, geometry: &LaunchGeometry, problem: &Problem) -> (u32, u32, u32) {
        L::grid(geometry, problem)
    }
    fn parse_cases(&self, text: &str, file: &str, base: &Path) -> Result<Vec<LabCase>, CaseError> {
        Ok(L::parse_cases(text, file, base)?
            .into_iter()
            .map(lab_case::<L>)
            .collect())
    }
    fn decode_case(&self, recipe: &str) -> Result<LabCase, CaseError> {
        let case: L::Case = serde_json::from_str(recipe).map_err(|e| CaseError::Invalid {
            case: "(from the worker pipe)".into(),
            message: e.to_string(),
        })?;
        L::check_case(&case)?;
        Ok(lab_case::<L>(case))
    }
    fn verdict(&self, cases: &[CaseSummary<'_>]) -> Option<String> {
        L::verdict(cases)
    }
    fn timing_case(&self, overrides: &[(String, String)]) -> Result<LabCase, String> {
        L::timing_case(overrides).map(lab_case::<L>)
    }
    fn prove_oracle(&self) -> Result<String, String> {
        L::prove_oracle()
    }
}

/// What every lab's argument table must hold, checked for every hosted lab
/// (and the toy labs of `tests/`) through [`Lab`]: one output, names the signature spells in its order with
/// the C types of their kinds.
pub fn check_args_against_signature(lab: &dyn Lab) -> Result<(), String> {
    let abi = lab.abi();
    let outputs = abi.args.iter().filter(|a| a.kind.is_output()).count();
    if outputs != 1 {
        return Err(format!("{} outputs, not one", outputs));
    }
    let open = abi
        .signature
        .find(&format!("{}(", abi.entry_point))
        .ok_or("the signature does not name the entry point")?;
    let params = &abi.signature[open + abi.entry_point.len() + 1..];
    let params = params
        .trim_end()
        .strip_suffix(')')
        .ok_or("no closing `)`")?;
    let spelled: Vec<String> = params
        .split(',')
        .map(|p| p.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    let declared: Vec<String> = abi
        .args
        .iter()
        .map(|a| format!("{} {}", a.kind.c_type(), a.name))
        .collect();
    if spelled != declared {
        return Err(format!(
            "the signature says {spelled:?}, the argument table {declared:?}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check_args_against_signature;

    /// (That every shipped kernel's entry point takes the signature's
    /// types is the source loader's own check, which every shipped kernel
    /// passes in `gpu::compile::tests`.)
    #[test]
    fn every_labs_argument_table_is_its_contracts_signature() {
        for lab in crate::lab::registry::labs() {
            check_args_against_signature(lab)
                .unwrap_or_else(|e| panic!("{}: {e}", lab.info().name));
        }
    }

    #[test]
    fn every_labs_timing_case_crosses_the_worker_pipe() {
        for lab in crate::lab::registry::labs() {
            let case = lab.timing_case(&[]).expect("a timing case");
            let back = lab
                .decode_case(&case.recipe.to_json())
                .unwrap_or_else(|e| panic!("{}: {e}", lab.info().name));
            assert_eq!(back.name, case.name);
        }
    }
}
