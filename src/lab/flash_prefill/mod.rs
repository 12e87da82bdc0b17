//! The first lab, `flash-prefill`: chunked flash prefill against a cached
//! prefix (attention-v1 contract, fp32). One sequence: `chunkLen` new query
//! rows after `prefixLen` cached keys, all K/V in one contiguous array.

pub mod bugs;
pub mod cases;
pub mod contract;
pub mod diagnosis;
pub mod golden;
pub mod oracle;
pub mod verdict;

use std::path::Path;

use self::cases::{parse_cases, CaseSpec, EMBEDDED_CASES};
use self::contract::{Shape, DH, ENTRY_POINT, ENTRY_SIGNATURE, GROUP, HKV, HQ, TIMING_SHAPE};
use super::definition::{
    int_constants, shipped_kernel, Abi, ArgKind, ArgSpec, ArgValue, CaseData, CaseError,
    CaseSummary, Diagnosis, Graded, KernelFile, Lab, LabCase, LabRef, Problem, SupportKernels,
};
use super::geometry::{GridY, LaunchGeometry};
use crate::grade::compare::Tolerance;

const ABI: Abi = Abi {
    entry_point: ENTRY_POINT,
    signature: ENTRY_SIGNATURE,
    args: &[
        ArgSpec {
            name: "q",
            kind: ArgKind::F32Input,
        },
        ArgSpec {
            name: "kCache",
            kind: ArgKind::F32Input,
        },
        ArgSpec {
            name: "vCache",
            kind: ArgKind::F32Input,
        },
        ArgSpec {
            name: "out",
            kind: ArgKind::F32Output,
        },
        ArgSpec {
            name: "chunkLen",
            kind: ArgKind::I32Scalar,
        },
        ArgSpec {
            name: "prefixLen",
            kind: ArgKind::I32Scalar,
        },
    ],
};

/// Longest chunk or prefix a timing shape may ask for: keeps every buffer far
/// below a GPU's memory.
const MAX_LENGTH: usize = 65_536;

/// The `flash-prefill` lab.
pub struct FlashPrefill;

/// The first lab, as the engine takes it.
pub const FLASH_PREFILL: LabRef = LabRef(&FlashPrefill);

impl FlashPrefill {
    fn spec(case: &LabCase) -> Result<CaseSpec, CaseError> {
        serde_json::from_value(case.recipe.clone()).map_err(|e| CaseError::Invalid {
            case: case.name.clone(),
            message: e.to_string(),
        })
    }

    fn lab_case(spec: &CaseSpec) -> LabCase {
        LabCase {
            name: spec.name.clone(),
            summary: spec.summary.clone(),
            recipe: serde_json::to_value(spec).expect("a case spec is plain data"),
        }
    }

    /// The shape of a case's arguments (`chunkLen` and `prefixLen` are its scalars).
    fn shape_of(data: &CaseData) -> Shape {
        let scalar = |index: usize| match data.args.get(index) {
            Some(ArgValue::Scalar(n)) => usize::try_from(*n).unwrap_or(0),
            _ => 0,
        };
        Shape {
            chunk_len: scalar(4),
            prefix_len: scalar(5),
        }
    }

    fn tensor(data: &CaseData, index: usize) -> &[f32] {
        match data.args.get(index) {
            Some(ArgValue::F32(values)) => values,
            _ => &[],
        }
    }
}

impl Lab for FlashPrefill {
    fn name(&self) -> &'static str {
        "flash-prefill"
    }

    fn contract(&self) -> &'static str {
        "attention-v1"
    }

    fn description(&self) -> &'static str {
        "chunked flash prefill against a cached prefix: one sequence, contiguous K/V, 32 query heads, 8 KV heads, dim 64"
    }

    fn default_file(&self) -> &'static str {
        "prefill.cu"
    }

    fn abi(&self) -> &'static Abi {
        &ABI
    }

    fn body_constants(&self) -> Vec<(&'static str, String)> {
        int_constants(&[("HQ", HQ), ("HKV", HKV), ("DH", DH), ("GROUP", GROUP)])
    }

    fn default_geometry(&self) -> LaunchGeometry {
        LaunchGeometry {
            rows_per_block: 64,
            threads: 256,
            dynamic_smem_bytes: 0,
            grid_y: GridY::QueryHead,
        }
    }

    fn grid(&self, geometry: &LaunchGeometry, problem: &Problem) -> (u32, u32, u32) {
        let x = problem
            .output
            .rows
            .div_ceil(geometry.rows_per_block as usize)
            .max(1) as u32;
        let y = geometry.grid_y.blocks(HQ, HKV);
        (x, y, 1)
    }

    fn oracle_f64_grid(&self, problem: &Problem) -> (u32, u32, u32) {
        // One warp per (row, head).
        let threads = problem.output.rows * HQ * 32;
        let blocks = threads.div_ceil(self.support().oracle_threads as usize) as u32;
        (blocks, 1, 1)
    }

    fn tolerance(&self) -> Tolerance {
        contract::TOLERANCE
    }

    fn embedded_cases(&self) -> &'static str {
        EMBEDDED_CASES
    }

    fn parse_cases(&self, text: &str, file: &str, base: &Path) -> Result<Vec<LabCase>, CaseError> {
        Ok(parse_cases(text, file, base)?
            .iter()
            .map(Self::lab_case)
            .collect())
    }

    fn own_tensors(&self, case: &LabCase) -> Option<std::path::PathBuf> {
        Self::spec(case).ok()?.tensors
    }

    fn problem(&self, case: &LabCase) -> Result<Problem, CaseError> {
        let spec = Self::spec(case)?;
        if spec.tensors.is_some() {
            return Ok(spec.generate(0)?.shape.problem());
        }
        Ok(spec.declared_shape().problem())
    }

    fn generate(&self, case: &LabCase, seed: u64) -> Result<CaseData, CaseError> {
        let spec = Self::spec(case)?;
        let inputs = spec.generate(seed)?;
        let scalar = |n: usize| {
            i32::try_from(n).map_err(|_| CaseError::Invalid {
                case: case.name.clone(),
                message: format!("{n} does not fit the kernel's int argument"),
            })
        };
        Ok(CaseData {
            problem: inputs.shape.problem(),
            args: vec![
                ArgValue::F32(inputs.q),
                ArgValue::F32(inputs.k),
                ArgValue::F32(inputs.v),
                ArgValue::Output,
                ArgValue::Scalar(scalar(inputs.shape.chunk_len)?),
                ArgValue::Scalar(scalar(inputs.shape.prefix_len)?),
            ],
            expected: inputs.expected,
            planted_heads: spec.planted_heads(),
        })
    }

    fn oracle(&self, data: &CaseData, rows: Option<&[usize]>) -> Vec<f64> {
        let shape = Self::shape_of(data);
        let (q, k, v) = (
            Self::tensor(data, 0),
            Self::tensor(data, 1),
            Self::tensor(data, 2),
        );
        match rows {
            None => oracle::attention(shape, q, k, v),
            Some(rows) => oracle::attention_rows(shape, q, k, v, rows),
        }
    }

    fn diagnose(&self, data: &CaseData, graded: &Graded<'_>) -> Diagnosis {
        diagnosis::diagnose(&diagnosis::Reading {
            shape: Self::shape_of(data),
            planted_heads: data.planted_heads,
            out: graded.out,
            reference: graded.reference,
            cmp: graded.comparison,
            integrity: graded.integrity,
            experiments: graded.experiments,
            tensors: Some((
                Self::tensor(data, 0),
                Self::tensor(data, 1),
                Self::tensor(data, 2),
            )),
        })
    }

    /// Scores are `q . k / 8`: shrinking `q` shrinks every score by the same factor.
    fn scores_shrunk(&self, data: &CaseData, factor: f32) -> Option<CaseData> {
        let mut shrunk = data.clone();
        let Some(ArgValue::F32(q)) = shrunk.args.get_mut(0) else {
            return None;
        };
        q.iter_mut().for_each(|x| *x *= factor);
        shrunk.expected = None;
        Some(shrunk)
    }

    fn verdict(&self, cases: &[CaseSummary<'_>]) -> Option<String> {
        verdict::verdict(cases)
    }

    fn timing_case(&self, overrides: &[(String, String)]) -> Result<LabCase, String> {
        let mut shape = TIMING_SHAPE;
        for (key, value) in overrides {
            let length = |min: usize| match value.parse::<usize>() {
                Ok(n) if (min..=MAX_LENGTH).contains(&n) => Ok(n),
                _ => Err(format!(
                    "`{key}` needs a whole number in {min}..={MAX_LENGTH}, found `{value}`"
                )),
            };
            match key.as_str() {
                "chunk" => shape.chunk_len = length(1)?,
                "prefix" => shape.prefix_len = length(0)?,
                _ => {
                    return Err(format!(
                        "the {} lab's timing shape has the keys chunk and prefix, not `{key}`",
                        self.name()
                    ))
                }
            }
        }
        Ok(Self::lab_case(&CaseSpec {
            name: "timing".into(),
            summary: format!("the timing shape, {}", shape.problem().detail),
            chunk: shape.chunk_len,
            prefix: shape.prefix_len,
            plant: Vec::new(),
            scale: Vec::new(),
            tensors: None,
        }))
    }

    fn timing_draw_range(&self) -> std::ops::Range<f32> {
        // What the timing case's random_tensor draws Q, K and V from.
        -1.0..1.0
    }

    fn starter(&self) -> KernelFile {
        shipped_kernel!("kernels/starter.cu")
    }

    fn reference(&self) -> KernelFile {
        shipped_kernel!("kernels/reference.cu")
    }

    fn support(&self) -> SupportKernels {
        SupportKernels {
            file: shipped_kernel!("kernels/support.cu"),
            oracle_f64: "oracle_f64",
            oracle_threads: 256,
        }
    }

    fn prove_oracle(&self) -> Result<String, String> {
        golden::prove_embedded()
            .map(|proof| {
                format!(
                    "{} elements within {:.1e}",
                    proof.elements, proof.max_relative_error
                )
            })
            .map_err(|e| e.to_string())
    }
}
