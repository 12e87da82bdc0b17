//! A test lab that declares every argument kind the fp32 labs do not use:
//! a bf16 and a uint8 input, a float scalar, float and uint32 scratch, and a
//! bf16 output. Shared by `tests/toy_kinds_lab.rs` and the stand-in worker
//! (examples/stand_in_worker.rs), which runs [`cpu_kernel`] on the launch
//! arguments exactly as `gpu::device` would lay them out for a GPU.
#![allow(dead_code)] // the test and the stand-in each use their own part

use std::path::Path;

use flashprof::grade::compare::{OutputShape, Tolerance};
use flashprof::grade::roofline::Work;
use flashprof::lab::args::{bf16_bits, bf16_value, Laid, GUARD_ELEMS, SCRATCH_F32_BITS};
use flashprof::lab::definition::{
    CaseData, CaseError, Diagnosis, Graded, KernelFile, Lab, LabInfo, LabRef, Problem,
    RooflineWords, Shipped, SupportKernels,
};
use flashprof::lab::geometry::{GridY, LaunchGeometry};
use flashprof::lab::typed::{Arg, Made, Recipe, TypedLab};

pub const HEADS: usize = 2;
pub const DIM: usize = 8;

pub const SIGNATURE: &str = "extern \"C\" __global__ void toy_kinds(const __nv_bfloat16* x, const uint8_t* codes, float scale, float* partial, unsigned* counters, int rows, __nv_bfloat16* out)";

/// `out = x * scale + codes`, elementwise, each row also leaving its sum in
/// `partial` and a count in `counters` (scratch the grader resets).
const STARTER: &str = r#"#include <cuda_bf16.h>
extern "C" __global__ void toy_kinds(const __nv_bfloat16* x, const uint8_t* codes, float scale, float* partial, unsigned* counters, int rows, __nv_bfloat16* out)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * TH * TD) return;
    out[i] = __float2bfloat16(__bfloat162float(x[i]) * scale + (float)codes[i]);
}
"#;

#[derive(serde::Serialize, serde::Deserialize)]
pub struct KindsCase {
    pub name: String,
    pub rows: usize,
}

impl Recipe for KindsCase {
    fn name(&self) -> &str {
        &self.name
    }
    fn summary(&self) -> &str {
        "every new argument kind"
    }
}

pub struct Inputs {
    pub rows: usize,
    /// bf16 bits, `[rows][HEADS][DIM]`.
    pub x: Vec<u16>,
    pub codes: Vec<u8>,
    pub scale: f32,
}

pub struct KindsLab;

pub const KINDS: LabRef = LabRef(&KindsLab);

impl TypedLab for KindsLab {
    type Case = KindsCase;
    type Inputs = Inputs;
    const ARGS: &'static [Arg<Inputs>] = &[
        Arg::bf16_input("x", |i| &i.x),
        Arg::u8_input("codes", |i| &i.codes),
        Arg::float("scale", |i| i.scale),
        Arg::f32_scratch("partial", |i| i.rows * HEADS),
        Arg::u32_scratch("counters", |i| i.rows),
        Arg::int("rows", |i| i.rows as i32),
        Arg::bf16_output("out"),
    ];
    const INFO: LabInfo = LabInfo {
        name: "toy-kinds",
        contract: "toy-kinds-v1",
        description: "a test lab with every argument kind",
        default_file: "kinds.cu",
        entry_point: "toy_kinds",
        signature: SIGNATURE,
        body_constants: &[("TH", HEADS), ("TD", DIM)],
        default_geometry: LaunchGeometry {
            rows_per_block: 1,
            threads: 128,
            dynamic_smem_bytes: 0,
            grid_y: GridY::QueryHead,
            splits: 1,
        },
        roofline: RooflineWords::PLAIN,
        // bf16 keeps 8 bits of mantissa: half an ulp is 2^-9 of the value.
        tolerance: Tolerance {
            abs: 1e-6,
            rel: 4e-3,
        },
        cases: "",
        timing_draw: -1.0..1.0,
        kernels: Shipped {
            starter: KernelFile {
                path: "toy-kinds/starter.cu",
                text: STARTER,
            },
            reference: KernelFile {
                path: "toy-kinds/starter.cu",
                text: STARTER,
            },
            support: SupportKernels {
                file: KernelFile {
                    path: "toy-kinds/starter.cu",
                    text: STARTER,
                },
                oracle_f64: "toy_kinds",
                launch: flashprof::lab::definition::OracleLaunch::WarpPerRowHead { threads: 128 },
            },
        },
    };

    fn parse_cases(_: &str, _: &str, _: &Path) -> Result<Vec<KindsCase>, CaseError> {
        Ok(Vec::new())
    }
    fn generate(case: &KindsCase, seed: u64) -> Result<Made<Inputs>, CaseError> {
        let len = case.rows * HEADS * DIM;
        let x = (0..len)
            .map(|i| bf16_bits(((i as u64 * 7 + seed) % 23) as f32 / 8.0 - 1.25))
            .collect();
        let codes = (0..len).map(|i| ((i * 5 + 3) % 251) as u8).collect();
        Ok(Made::plain(Inputs {
            rows: case.rows,
            x,
            codes,
            scale: 0.75,
        }))
    }
    fn problem_of(inputs: &Inputs) -> Problem {
        let len = inputs.rows * HEADS * DIM;
        Problem {
            label: format!("{}r", inputs.rows),
            detail: format!("{} rows", inputs.rows),
            row_hint: String::new(),
            output: OutputShape {
                rows: inputs.rows,
                heads: HEADS,
                dim: DIM,
            },
            head_group: 1,
            sequence_starts: vec![0],
            max_sequence_rows: inputs.rows,
            work: Work {
                flops: 2.0 * len as f64,
                compulsory_bytes: (len * 5) as u64,
                output_bytes: (len * 2) as u64,
                tensor_roof: None,
            },
        }
    }
    fn grid(_: &LaunchGeometry, problem: &Problem) -> (u32, u32, u32) {
        (problem.output.elements().div_ceil(128) as u32, 1, 1)
    }
    fn oracle(inputs: &Inputs, rows: Option<&[usize]>) -> Vec<f64> {
        let row_len = HEADS * DIM;
        let all: Vec<usize> = (0..inputs.rows).collect();
        rows.unwrap_or(&all)
            .iter()
            .flat_map(|&row| row * row_len..(row + 1) * row_len)
            .map(|i| {
                f64::from(bf16_value(inputs.x[i])) * f64::from(inputs.scale)
                    + f64::from(inputs.codes[i])
            })
            .collect()
    }
    fn diagnose(_: &Inputs, _: &CaseData, graded: &Graded<'_>) -> Diagnosis {
        let cmp = graded.comparison;
        Diagnosis::plain(format!(
            "{} of {} wrong, {} unwritten, {} NaN",
            cmp.failing, cmp.elements, cmp.unwritten, cmp.nan
        ))
    }
    fn timing_case(_: &[(String, String)]) -> Result<KindsCase, String> {
        Ok(KindsCase {
            name: "timing".into(),
            rows: 64,
        })
    }
    fn prove_oracle() -> Result<String, String> {
        Ok("the toy has no golden case".into())
    }
}

/// How the CPU kernel goes wrong, chosen by the case's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flaw {
    None,
    /// Row 1 is never written.
    SkipsARow,
    /// The last element reads `x` one past its end.
    ReadsPastTheEnd,
}

impl Flaw {
    pub fn of(case_name: &str) -> Self {
        match case_name {
            "skips-a-row" => Self::SkipsARow,
            "reads-past-the-end" => Self::ReadsPastTheEnd,
            _ => Self::None,
        }
    }
}

/// The starter, on the CPU: reads its launch arguments by position, as the
/// C signature orders them, each from inside its guard bands (index
/// `GUARD_ELEMS` is element 0, as a device pointer to the inner buffer
/// sees it). It relies on the grader's reset of its scratch: `partial`
/// NaN and `counters` zero at entry (a stale value is added to the output).
pub fn cpu_kernel(args: &mut [Laid], flaw: Flaw) {
    let [Laid::Bf16Input(x), Laid::U8Input(codes), Laid::F32Scalar(scale), Laid::ScratchF32(partial), Laid::ScratchU32(counters), Laid::Scalar(rows), Laid::Bf16Output(out)] =
        args
    else {
        panic!("the arguments are not toy_kinds's signature: {args:?}");
    };
    let g = GUARD_ELEMS;
    let row_len = HEADS * DIM;
    for row in 0..*rows as usize {
        // Stale scratch from an earlier launch spoils the row.
        let stale = f32::from_bits(SCRATCH_F32_BITS).to_bits()
            != partial[g + row * HEADS].to_bits()
            || counters[g + row] != 0;
        let mut sum = 0.0f32;
        for i in row * row_len..(row + 1) * row_len {
            let read = if flaw == Flaw::ReadsPastTheEnd && i + 1 == *rows as usize * row_len {
                i + 1
            } else {
                i
            };
            let value = bf16_value(x[g + read]) * *scale
                + f32::from(codes[g + i])
                + if stale { 1000.0 } else { 0.0 };
            sum += value;
            if !(flaw == Flaw::SkipsARow && row == 1) {
                out[g + i] = bf16_bits(value);
            }
        }
        partial[g + row * HEADS] = sum;
        counters[g + row] += 1;
    }
}

/// The case data's arguments as `gpu::device` lays them out.
pub fn laid_out(lab: &dyn Lab, data: &CaseData, poison_bits: u32) -> Vec<Laid> {
    lab.abi()
        .args
        .iter()
        .zip(lab.args(data))
        .map(|(spec, value)| {
            Laid::new(
                spec.kind,
                value,
                data.problem.output.elements(),
                poison_bits,
            )
            .expect("the value fits its kind")
        })
        .collect()
}

/// The output of a launch as grading reads it.
pub fn output(args: &[Laid]) -> Vec<f32> {
    let Some(Laid::Bf16Output(out)) = args.last() else {
        panic!("the output is the last argument");
    };
    out[GUARD_ELEMS..out.len() - GUARD_ELEMS]
        .iter()
        .map(|&b| flashprof::lab::args::bf16_output_value(b))
        .collect()
}
