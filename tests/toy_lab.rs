//! A third lab defined only here, with its own head count, head dimension
//! and entry point, goes through the same engine as the shipped labs: the
//! source checks (its signature, its body constants, its geometry), NVRTC,
//! its cases, its oracle, the element comparison and its diagnosis. Nothing
//! outside this file and `src/lab/` knows it exists. (Running it on a GPU
//! would take one line in `lab::registry`, since the worker finds labs by
//! name; see docs/LABS.md.)

use std::path::Path;

use flashprof::gpu::compile::{compile, CompileOptions};
use flashprof::grade::compare::{compare, OutputShape, Tolerance};
use flashprof::grade::integrity::{integrity_problem, Integrity};
use flashprof::grade::roofline::Work;
use flashprof::lab::definition::{
    CaseData, CaseError, Diagnosis, Graded, KernelFile, LabInfo, LabRef, Problem, RooflineWords,
    Shipped, SupportKernels,
};
use flashprof::lab::geometry::{GridY, LaunchGeometry};
use flashprof::lab::source::{SourceError, SourceForm, StudentSource};
use flashprof::lab::typed::{check_args_against_signature, Arg, Made, Recipe, TypedLab};

const HEADS: usize = 16;
const DIM: usize = 32;

const SIGNATURE: &str = "extern \"C\" __global__ void toy_attention(const float* q, const float* k, const float* v, float* out, int rows)";

/// Causal self-attention of one sequence, 16 heads of 32, no grouping.
const STARTER: &str = r#"
extern "C" __global__ void toy_attention(const float* q, const float* k, const float* v, float* out, int rows)
{
    const int row = blockIdx.x, head = blockIdx.y, d = threadIdx.x;
    if (row >= rows || d >= TD) return;
    float m = -INFINITY, l = 0.0f, acc = 0.0f;
    for (int j = 0; j <= row; ++j) {
        float s = 0.0f;
        for (int e = 0; e < TD; ++e) s += q[(row * TH + head) * TD + e] * k[(j * TH + head) * TD + e];
        s *= 0.1767766952966369f;
        const float mNew = fmaxf(m, s);
        const float scale = expf(m - mNew), p = expf(s - mNew);
        l = l * scale + p;
        acc = acc * scale + p * v[(j * TH + head) * TD + d];
        m = mNew;
    }
    out[(row * TH + head) * TD + d] = acc / l;
}
"#;

#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ToyCase {
    name: String,
    #[serde(default)]
    summary: String,
    rows: usize,
}

impl Recipe for ToyCase {
    fn name(&self) -> &str {
        &self.name
    }
    fn summary(&self) -> &str {
        &self.summary
    }
}

struct Inputs {
    rows: usize,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
}

struct ToyLab;

const TOY: LabRef = LabRef(&ToyLab);

fn tensor(len: usize, seed: u64) -> Vec<f32> {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..len)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

impl TypedLab for ToyLab {
    type Case = ToyCase;
    type Inputs = Inputs;
    const ARGS: &'static [Arg<Inputs>] = &[
        Arg::f32_input("q", |i| &i.q),
        Arg::f32_input("k", |i| &i.k),
        Arg::f32_input("v", |i| &i.v),
        Arg::f32_output("out"),
        Arg::int("rows", |i| i.rows as i32),
    ];
    const INFO: LabInfo = LabInfo {
        name: "toy",
        contract: "toy-v1",
        description: "a test lab: 16 heads of 32, one causal sequence",
        default_file: "toy.cu",
        entry_point: "toy_attention",
        signature: SIGNATURE,
        body_constants: &[("TH", HEADS), ("TD", DIM)],
        default_geometry: LaunchGeometry {
            rows_per_block: 1,
            threads: DIM as u32,
            dynamic_smem_bytes: 0,
            grid_y: GridY::QueryHead,
            splits: 1,
        },
        roofline: RooflineWords::PLAIN,
        tolerance: Tolerance {
            abs: 1e-4,
            rel: 1e-3,
        },
        cases: "[[case]]\nname = \"tiny\"\nrows = 5\n\n[[case]]\nname = \"longer\"\nsummary = \"past one warp of keys\"\nrows = 40\n",
        timing_draw: -1.0..1.0,
        kernels: Shipped {
            starter: KernelFile {
                path: "toy/starter.cu",
                text: STARTER,
            },
            reference: KernelFile {
                path: "toy/starter.cu",
                text: STARTER,
            },
            support: SupportKernels {
                file: KernelFile {
                    path: "toy/starter.cu",
                    text: STARTER,
                },
                oracle_f64: "toy_attention",
                launch: flashprof::lab::definition::OracleLaunch::WarpPerRowHead { threads: 32 },
            },
        },
    };

    fn parse_cases(text: &str, file: &str, _: &Path) -> Result<Vec<ToyCase>, CaseError> {
        #[derive(serde::Deserialize)]
        struct File {
            case: Vec<ToyCase>,
        }
        let parsed: File = toml::from_str(text).map_err(|e| CaseError::Parse {
            file: file.into(),
            message: e.to_string(),
        })?;
        for c in &parsed.case {
            if c.rows == 0 || c.rows > 4096 {
                return Err(CaseError::Invalid {
                    case: c.name.clone(),
                    message: "rows must be 1..=4096".into(),
                });
            }
        }
        Ok(parsed.case)
    }
    fn generate(case: &ToyCase, seed: u64) -> Result<Made<Inputs>, CaseError> {
        let len = case.rows * HEADS * DIM;
        Ok(Made::plain(Inputs {
            rows: case.rows,
            q: tensor(len, seed),
            k: tensor(len, seed + 1),
            v: tensor(len, seed + 2),
        }))
    }
    fn problem_of(inputs: &Inputs) -> Problem {
        let rows = inputs.rows;
        let len = rows * HEADS * DIM;
        let pairs = (rows * (rows + 1) / 2) as f64;
        Problem {
            label: format!("{rows}r"),
            detail: format!("{rows} rows"),
            row_hint: "row r sees keys 0..r".into(),
            output: OutputShape {
                rows,
                heads: HEADS,
                dim: DIM,
            },
            head_group: 1,
            sequence_starts: vec![0],
            max_sequence_rows: rows,
            work: Work {
                flops: pairs * (HEADS * DIM * 4) as f64,
                compulsory_bytes: (4 * len * 4) as u64,
                output_bytes: (len * 4) as u64,
                tensor_roof: None,
            },
        }
    }
    fn grid(_: &LaunchGeometry, problem: &Problem) -> (u32, u32, u32) {
        (problem.output.rows as u32, HEADS as u32, 1)
    }
    fn oracle(inputs: &Inputs, rows: Option<&[usize]>) -> Vec<f64> {
        let Inputs { q, k, v, .. } = inputs;
        let all: Vec<usize> = (0..inputs.rows).collect();
        let at = |t: &[f32], r: usize, h: usize, d: usize| f64::from(t[(r * HEADS + h) * DIM + d]);
        let mut out = Vec::new();
        for &row in rows.unwrap_or(&all) {
            for h in 0..HEADS {
                let scores: Vec<f64> = (0..=row)
                    .map(|j| {
                        (0..DIM)
                            .map(|e| at(q, row, h, e) * at(k, j, h, e))
                            .sum::<f64>()
                            / (DIM as f64).sqrt()
                    })
                    .collect();
                let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
                let total: f64 = weights.iter().sum();
                for d in 0..DIM {
                    out.push(
                        weights
                            .iter()
                            .enumerate()
                            .map(|(j, w)| w * at(v, j, h, d))
                            .sum::<f64>()
                            / total,
                    );
                }
            }
        }
        out
    }
    fn diagnose(_: &Inputs, _: &CaseData, graded: &Graded<'_>) -> Diagnosis {
        Diagnosis::plain(integrity_problem(graded.integrity).unwrap_or_else(|| {
            match graded.comparison.passed {
                true => "correct".into(),
                false => format!("{} elements wrong", graded.comparison.failing),
            }
        }))
    }
    fn timing_case(_: &[(String, String)]) -> Result<ToyCase, String> {
        Ok(ToyCase {
            name: "timing".into(),
            summary: String::new(),
            rows: 1024,
        })
    }
    fn prove_oracle() -> Result<String, String> {
        Ok("the toy has no golden case".into())
    }
}

#[test]
fn the_toy_labs_argument_table_is_its_signature() {
    check_args_against_signature(&ToyLab).expect("the table spells the signature");
    let data = TOY
        .generate(&TOY.timing_case(&[]).expect("timing"), 1)
        .expect("inputs");
    let args = TOY.args(&data);
    assert_eq!(args.len(), 5);
    assert_eq!(args[4], flashprof::lab::args::ArgValue::Scalar(1024));
}

#[test]
fn the_engine_checks_a_file_against_the_toy_labs_own_abi() {
    let source = StudentSource::from_bytes("toy.cu", STARTER.as_bytes(), TOY).expect("accepted");
    assert_eq!(source.form(), SourceForm::TranslationUnit);
    assert_eq!(source.geometry(), ToyLab::INFO.default_geometry);
    // The first lab's kernel is not this lab's: refused, naming the toy's entry point.
    let flash = include_str!("../kernels/flash-prefill/reference.cu");
    let refused =
        StudentSource::from_bytes("flash.cu", flash.as_bytes(), TOY).expect_err("wrong lab");
    assert!(
        matches!(
            &refused,
            SourceError::WrongEntryName {
                entry: "toy_attention",
                ..
            }
        ),
        "{refused}"
    );
    assert!(refused.to_string().contains(SIGNATURE), "{refused}");
    // A body sees the toy's constants and is wrapped in the toy's signature.
    let body =
        StudentSource::from_bytes("body.cu", b"out[threadIdx.x] = TH * TD;", TOY).expect("a body");
    assert_eq!(body.form(), SourceForm::Body);
    let prepared = body.prepared();
    assert!(prepared.text.contains("constexpr int TH = 16;"));
    assert!(prepared.text.contains(SIGNATURE));
    assert_eq!(prepared.entry_point, "toy_attention");
}

#[test]
fn nvrtc_compiles_the_toy_starter_to_its_entry_point() {
    let source = StudentSource::from_bytes("toy.cu", STARTER.as_bytes(), TOY).expect("accepted");
    let kernel = compile(&source, &CompileOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    assert!(!kernel.image.is_empty());
    let usage = kernel.resources.expect("ptxas reports the toy entry point");
    assert!(usage.registers > 0);
}

#[test]
fn the_toy_cases_grade_through_the_shared_comparison_and_diagnosis() {
    let cases = TOY
        .parse_cases(TOY.embedded_cases(), "toy", Path::new("."))
        .expect("cases");
    assert_eq!(cases.len(), 2);
    for case in &cases {
        let data = TOY.generate(case, 9).expect("inputs");
        let reference = TOY.oracle(&data, None);
        assert_eq!(reference.len(), data.problem.output.elements());
        let shape = data.problem.output;
        let integrity = Integrity::default();
        // What a correct kernel writes: the exact answer rounded to f32.
        let right: Vec<f32> = reference.iter().map(|&x| x as f32).collect();
        let good = compare(shape, TOY.tolerance(), &right, &reference);
        assert!(good.passed, "{}", case.name);
        // A kernel that forgets one head.
        let mut wrong = right.clone();
        for row in 0..shape.rows {
            for d in 0..DIM {
                wrong[shape.index(row, 3, d)] = 0.5;
            }
        }
        let bad = compare(shape, TOY.tolerance(), &wrong, &reference);
        assert!(!bad.passed);
        assert_eq!(bad.where_failing.heads, 1 << 3);
        let said = TOY.diagnose(
            &data,
            &Graded {
                launch: &TOY.default_geometry(),
                out: &wrong,
                reference: &reference,
                comparison: &bad,
                integrity: &integrity,
                experiments: &Default::default(),
            },
        );
        assert!(said.line.contains("elements wrong"), "{said:?}");
        // Sampled rows agree with the whole output.
        let last = shape.rows - 1;
        let sampled = TOY.oracle(&data, Some(&[last]));
        assert_eq!(sampled[..], reference[shape.index(last, 0, 0)..]);
    }
    let refused = TOY
        .parse_cases(
            "[[case]]\nname = \"huge\"\nrows = 100000\n",
            "toy",
            Path::new("."),
        )
        .expect_err("bounded");
    assert!(refused.to_string().contains("1..=4096"));
}
