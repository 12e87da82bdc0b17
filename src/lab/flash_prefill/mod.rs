//! The first lab, `flash-prefill`: chunked flash prefill against a cached
//! prefix (attention-v1 contract, fp32). One sequence: `chunkLen` new query
//! rows after `prefixLen` cached keys, all K/V in one contiguous array.

pub mod bugs;
pub mod cases;
pub mod contract;
pub mod diagnosis;
pub mod golden;
pub mod oracle;
pub mod redraw;
pub mod tensors;
pub mod verdict;

use rand_chacha::ChaCha8Rng;

use crate::lab::redraw::Redraw;
use std::path::Path;

use self::cases::{parse_cases, CaseSpec, EMBEDDED_CASES};
use self::contract::{Inputs, ARGS, DH, ENTRY_POINT, ENTRY_SIGNATURE, GROUP, HKV, HQ};
use super::definition::{
    shipped, CaseData, CaseError, CaseSummary, Diagnosis, Graded, LabInfo, LabRef, OracleLaunch,
    Problem, RooflineWords,
};
use super::geometry::{GridY, LaunchGeometry};
use super::typed::{Arg, Made, TypedLab};

/// Longest chunk or prefix a timing shape may ask for: keeps every buffer far
/// below a GPU's memory.
const MAX_LENGTH: usize = 65_536;

/// The `flash-prefill` lab.
pub struct FlashPrefill;

/// The first lab, as the engine takes it.
pub const FLASH_PREFILL: LabRef = LabRef(&FlashPrefill);

impl TypedLab for FlashPrefill {
    type Case = CaseSpec;
    type Inputs = Inputs;
    const ARGS: &'static [Arg<Inputs>] = ARGS;
    const INFO: LabInfo = LabInfo {
        name: "flash-prefill",
        contract: "attention-v1",
        description: "chunked flash prefill against a cached prefix: one sequence, contiguous K/V, 32 query heads, 8 KV heads, dim 64",
        default_file: "prefill.cu",
        entry_point: ENTRY_POINT,
        signature: ENTRY_SIGNATURE,
        body_constants:
            &[("HQ", HQ), ("HKV", HKV), ("DH", DH), ("GROUP", GROUP)],
        default_geometry: LaunchGeometry {
            rows_per_block: 64,
            threads: 256,
            dynamic_smem_bytes: 0,
            grid_y: GridY::QueryHead,
            splits: 1,
        },
        roofline: RooflineWords::PLAIN,
        tolerance: contract::TOLERANCE,
        cases: EMBEDDED_CASES,
        // What the timing case's random_tensor draws Q, K and V from.
        timing_draw: -1.0..1.0,
        kernels: shipped!("flash-prefill", "oracle_f64", OracleLaunch::WarpPerRowHead { threads: 256 }),
    };

    fn parse_cases(text: &str, file: &str, base: &Path) -> Result<Vec<CaseSpec>, CaseError> {
        parse_cases(text, file, base)
    }

    fn generate(case: &CaseSpec, seed: u64) -> Result<Made<Inputs>, CaseError> {
        case.generate(seed)
    }

    fn problem_of(inputs: &Inputs) -> Problem {
        inputs.shape.problem()
    }

    fn problem(case: &CaseSpec) -> Result<Problem, CaseError> {
        if case.tensors.is_some() {
            return Ok(case.generate(0)?.inputs.shape.problem());
        }
        Ok(case.declared_shape().problem())
    }

    fn grid(geometry: &LaunchGeometry, problem: &Problem) -> (u32, u32, u32) {
        let x = problem
            .output
            .rows
            .div_ceil(geometry.rows_per_block as usize)
            .max(1) as u32;
        let y = geometry.grid_y.blocks(HQ, HKV);
        (x, y, 1)
    }

    fn oracle(inputs: &Inputs, rows: Option<&[usize]>) -> Vec<f64> {
        let Inputs { shape, q, k, v } = inputs;
        match rows {
            None => oracle::attention(*shape, q, k, v),
            Some(rows) => oracle::attention_rows(*shape, q, k, v, rows),
        }
    }

    fn diagnose(inputs: &Inputs, data: &CaseData, graded: &Graded<'_>) -> Diagnosis {
        diagnosis::diagnose(&diagnosis::Reading {
            shape: inputs.shape,
            planted_heads: data.planted_heads,
            large_heads: diagnosis::large_value_heads(inputs),
            out: graded.out,
            reference: graded.reference,
            cmp: graded.comparison,
            integrity: graded.integrity,
            experiments: graded.experiments,
            tensors: Some((&inputs.q, &inputs.k, &inputs.v)),
        })
    }

    /// Scores are `q . k / 8`: shrinking `q` shrinks every score by the same factor.
    fn scores_shrunk(inputs: &Inputs, factor: f32) -> Option<Inputs> {
        let mut shrunk = inputs.clone();
        crate::lab::experiment::shrink_scores(&mut shrunk.q, None, factor, |x| x);
        Some(shrunk)
    }

    fn verdict(cases: &[CaseSummary<'_>]) -> Option<String> {
        verdict::verdict(cases)
    }

    fn redraw(inputs: &Inputs, rng: &mut ChaCha8Rng) -> Redraw {
        redraw::redraw(inputs, rng)
    }
    fn timing_case(overrides: &[(String, String)]) -> Result<CaseSpec, String> {
        let mut shape = contract::TIMING_SHAPE;
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
                        Self::INFO.name
                    ))
                }
            }
        }
        Ok(CaseSpec {
            name: "timing".into(),
            summary: format!("the timing shape, {}", shape.problem().detail),
            chunk: shape.chunk_len,
            prefix: shape.prefix_len,
            plant: Vec::new(),
            scale: Vec::new(),
            tensors: None,
        })
    }

    fn prove_oracle() -> Result<String, String> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::args::ArgValue;

    /// The long case's sampled rows, as the check grades them: the CPU
    /// oracle's answer there is the definition's, within the golden bound.
    #[test]
    fn the_long_prefix_case_is_graded_on_sampled_rows_held_to_the_definition() {
        use crate::lab::flash_prefill::contract::{Shape, SCALE};
        use crate::lab::golden::{by_definition, prove};
        let spec = crate::lab::case_file::named(cases::embedded_cases(), "long-prefix-16k");
        let problem = FlashPrefill::problem(&spec).unwrap();
        assert!(problem.oracle_sampled());
        // 8.6 GFLOP: three case watchdogs, 15 s at the default.
        assert_eq!(problem.watchdogs(), 3.0);
        let inputs = FlashPrefill::generate(&spec, 5).unwrap().inputs;
        let shape = inputs.shape;
        assert!(shape.prefix_len >= 16_384);
        let rows = [0, 37, shape.chunk_len - 1];
        let sampled = FlashPrefill::oracle(&inputs, Some(&rows));
        let mut expected = Vec::with_capacity(sampled.len());
        for &row in &rows {
            let seen = shape.prefix_len + row + 1;
            for head in 0..HQ {
                let g = head / GROUP;
                let scores: Vec<f64> = (0..seen)
                    .map(|j| {
                        let dot: f64 = (0..DH)
                            .map(|d| {
                                f64::from(inputs.q[Shape::q_index(row, head, d)])
                                    * f64::from(inputs.k[Shape::kv_index(j, g, d)])
                            })
                            .sum();
                        dot * SCALE
                    })
                    .collect();
                let value = |j: usize, d: usize| f64::from(inputs.v[Shape::kv_index(j, g, d)]);
                expected.extend(by_definition(&scores, value, DH));
            }
        }
        let proof = prove(&sampled, &expected, 1.0, (HQ, DH)).expect("within the golden bound");
        assert_eq!(proof.elements, rows.len() * HQ * DH);
    }

    #[test]
    fn a_case_packs_into_the_signatures_order() {
        let case = FLASH_PREFILL
            .timing_case(&[("chunk".into(), "3".into()), ("prefix".into(), "5".into())])
            .expect("a timing shape");
        let data = FLASH_PREFILL.generate(&case, 2).expect("inputs");
        let args = FLASH_PREFILL.args(&data);
        assert!(matches!(args[0], ArgValue::F32(q) if q.len() == 3 * HQ * DH));
        assert!(matches!(args[1], ArgValue::F32(k) if k.len() == 8 * HKV * DH));
        assert_eq!(args[3], ArgValue::Output);
        assert_eq!(&args[4..], &[ArgValue::Scalar(3), ArgValue::Scalar(5)]);
    }
}
