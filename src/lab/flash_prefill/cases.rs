//! Hazard cases as data.
//!
//! Cases live in `assets/cases.toml` (embedded in the binary, and overridable
//! with `--cases FILE`) so a TA can add one without recompiling. A case is a
//! shape plus a recipe: random inputs from the run's seed, then optional
//! planted values and per-head scaling, or tensors of its own from `.npy`
//! files. Generation is deterministic in `(seed, case name)`, so a printed
//! seed reproduces every input of a failing run.

use std::path::{Path, PathBuf};

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::contract::{Inputs, Shape, DH, GROUP, HKV, HQ};
use crate::lab::case_file::{case_rng, case_table, read_case_tables};
use crate::lab::definition::CaseError;
use crate::lab::typed::Made;

/// The cases shipped with flashprof.
pub const EMBEDDED_CASES: &str = include_str!("../../../assets/cases.toml");

/// Which input tensor a recipe step touches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tensor {
    Q,
    K,
    V,
}

impl Tensor {
    fn heads(self) -> usize {
        match self {
            Tensor::Q => HQ,
            Tensor::K | Tensor::V => HKV,
        }
    }
}

/// Positions a plant covers: query rows for `q`, key positions for `k`/`v`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Positions {
    List(Vec<usize>),
    Named(NamedPositions),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NamedPositions {
    /// Every row (q) or every key (k, v).
    All,
    /// Keys of the cached prefix, `0..P`.
    Prefix,
    /// Keys of the chunk itself, `P..P+C`.
    Chunk,
    /// The last cached key, `P-1`.
    LastPrefix,
    /// The last row (q) or the last key of the sequence (k, v).
    Last,
}

/// Overwrites every dimension of one head at some positions with a value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plant {
    pub tensor: Tensor,
    pub head: usize,
    pub positions: Positions,
    pub value: f32,
}

/// Multiplies a range of heads (inclusive; each tensor's own head index) by a factor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scale {
    pub tensors: Vec<Tensor>,
    pub heads: [usize; 2],
    pub factor: f32,
}

/// One hazard case as written in the cases file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaseSpec {
    pub name: String,
    pub summary: String,
    #[serde(default)]
    pub chunk: usize,
    #[serde(default)]
    pub prefix: usize,
    #[serde(default)]
    pub plant: Vec<Plant>,
    #[serde(default)]
    pub scale: Vec<Scale>,
    /// A folder holding `q.npy`, `k.npy`, `v.npy` and optionally `expected.npy`;
    /// relative paths are relative to the cases file. The shape then comes from the files.
    #[serde(default)]
    pub tensors: Option<PathBuf>,
}

/// Largest `chunk` (query rows) a case may declare: far above any hazard,
/// and small enough that every buffer size fits the kernel's `int` arguments.
pub const MAX_CHUNK: usize = 65_536;
/// Largest `prefix` (cached keys) a case may declare.
pub const MAX_PREFIX: usize = 65_536;

/// Parses and validates a cases file. `base` resolves relative tensor folders.
pub fn parse_cases(text: &str, file: &str, base: &Path) -> Result<Vec<CaseSpec>, CaseError> {
    let cases: Vec<CaseSpec> = read_case_tables(text, file, base)?;
    for case in &cases {
        case.validate()?;
    }
    Ok(cases)
}

case_table!(CaseSpec);

/// The embedded cases; they are validated by the test suite, so this cannot fail at run time.
pub fn embedded_cases() -> Vec<CaseSpec> {
    parse_cases(EMBEDDED_CASES, "assets/cases.toml", Path::new("."))
        .expect("the embedded cases file is checked by tests")
}

/// The embedded cases whose whole output the CPU oracle computes: the
/// tests that run every model over every case take these, and the long
/// cases, graded on sampled rows, have tests of their own.
#[cfg(test)]
pub fn whole_oracle_cases() -> Vec<CaseSpec> {
    use crate::lab::typed::TypedLab;
    embedded_cases()
        .into_iter()
        .filter(|case| {
            let problem = super::FlashPrefill::problem(case).expect("sized");
            !problem.oracle_sampled()
        })
        .collect()
}

impl CaseSpec {
    pub(super) fn invalid(&self, message: impl Into<String>) -> CaseError {
        CaseError::Invalid {
            case: self.name.clone(),
            message: message.into(),
        }
    }

    fn validate(&self) -> Result<(), CaseError> {
        if self.tensors.is_some() {
            if !self.plant.is_empty() || !self.scale.is_empty() {
                return Err(self.invalid("a case with its own tensors takes no plant or scale"));
            }
            return Ok(());
        }
        if self.chunk == 0 {
            return Err(self.invalid("chunk must be at least 1"));
        }
        self.check_bounds(self.chunk, self.prefix)?;
        let shape = self.declared_shape();
        for plant in &self.plant {
            if !plant.value.is_finite() {
                return Err(self.invalid(format!(
                    "plant value {} is not a finite number (use a large finite value such as 3.0e38 to test overflow)",
                    plant.value
                )));
            }
            if plant.head >= plant.tensor.heads() {
                return Err(self.invalid(format!(
                    "plant head {} is out of range for {:?} (0..{})",
                    plant.head,
                    plant.tensor,
                    plant.tensor.heads()
                )));
            }
            let limit = positions_limit(plant.tensor, shape);
            let positions = resolve_positions(&plant.positions, plant.tensor, shape);
            if let Some(bad) = positions.iter().find(|&&p| p >= limit) {
                return Err(self.invalid(format!(
                    "plant position {bad} is past the end of {:?} ({limit} positions)",
                    plant.tensor
                )));
            }
            if positions.is_empty() {
                return Err(self.invalid("a plant covers no position (an empty prefix?)"));
            }
        }
        for scale in &self.scale {
            if !scale.factor.is_finite() {
                return Err(self.invalid(format!(
                    "scale factor {} is not a finite number",
                    scale.factor
                )));
            }
            if scale.heads[0] > scale.heads[1] {
                return Err(self.invalid("scale heads are [first, last] with first <= last"));
            }
        }
        Ok(())
    }

    /// `chunk` and `prefix` within their bounds, and every tensor's element
    /// count computable without overflow.
    pub(super) fn check_bounds(&self, chunk: usize, prefix: usize) -> Result<(), CaseError> {
        if chunk > MAX_CHUNK {
            return Err(self.invalid(format!(
                "chunk {chunk} is more than the limit of {MAX_CHUNK} rows"
            )));
        }
        if prefix > MAX_PREFIX {
            return Err(self.invalid(format!(
                "prefix {prefix} is more than the limit of {MAX_PREFIX} keys"
            )));
        }
        let elements = chunk
            .checked_add(prefix)
            .and_then(|seq| seq.checked_mul(HKV * DH))
            .zip(chunk.checked_mul(HQ * DH));
        match elements {
            Some((kv, q)) if i32::try_from(kv).is_ok() && i32::try_from(q).is_ok() => Ok(()),
            _ => Err(self.invalid(format!(
                "chunk {chunk} with prefix {prefix} makes tensors too large to index"
            ))),
        }
    }

    pub fn declared_shape(&self) -> Shape {
        Shape {
            chunk_len: self.chunk,
            prefix_len: self.prefix,
        }
    }

    /// Query heads (bit `h` for head `h`) whose scores the plants make
    /// large: the planted heads of `q`, or, when only keys are planted, the
    /// query heads that read the planted KV heads.
    pub fn planted_heads(&self) -> u32 {
        let mut q_heads = 0u32;
        let mut k_heads = 0u32;
        for plant in &self.plant {
            match plant.tensor {
                Tensor::Q => q_heads |= 1 << plant.head,
                Tensor::K => {
                    for h in plant.head * GROUP..(plant.head + 1) * GROUP {
                        k_heads |= 1 << h;
                    }
                }
                Tensor::V => {}
            }
        }
        if q_heads != 0 {
            q_heads
        } else {
            k_heads
        }
    }

    /// Builds the inputs for this case from the run's seed.
    pub fn generate(&self, seed: u64) -> Result<Made<Inputs>, CaseError> {
        if let Some(dir) = &self.tensors {
            return super::tensors::load_dir(self, dir);
        }
        // A case reaches the worker as JSON, past the cases file's checks:
        // its lengths are bounded again, which also keeps them in the
        // kernel's `int` arguments.
        self.check_bounds(self.chunk, self.prefix)?;
        let shape = self.declared_shape();
        let mut rng = case_rng(seed, &self.name);
        let mut q = random_tensor(&mut rng, shape.q_elems());
        let mut k = random_tensor(&mut rng, shape.kv_elems());
        let mut v = random_tensor(&mut rng, shape.kv_elems());
        for scale in &self.scale {
            for &tensor in &scale.tensors {
                let data = select(tensor, &mut q, &mut k, &mut v);
                let last = scale.heads[1].min(tensor.heads() - 1);
                for head in scale.heads[0]..=last {
                    for_each_head_slice(data, tensor.heads(), head, |x| *x *= scale.factor);
                }
            }
        }
        for plant in &self.plant {
            let positions = resolve_positions(&plant.positions, plant.tensor, shape);
            let heads = plant.tensor.heads();
            let data = select(plant.tensor, &mut q, &mut k, &mut v);
            for pos in positions {
                let start = (pos * heads + plant.head) * DH;
                data[start..start + DH].fill(plant.value);
            }
        }
        Ok(Made {
            inputs: Inputs { shape, q, k, v },
            expected: None,
            planted_heads: self.planted_heads(),
        })
    }
}

fn select<'a>(
    tensor: Tensor,
    q: &'a mut [f32],
    k: &'a mut [f32],
    v: &'a mut [f32],
) -> &'a mut [f32] {
    match tensor {
        Tensor::Q => q,
        Tensor::K => k,
        Tensor::V => v,
    }
}

fn for_each_head_slice(data: &mut [f32], heads: usize, head: usize, mut f: impl FnMut(&mut f32)) {
    for position in data.chunks_exact_mut(heads * DH) {
        position[head * DH..(head + 1) * DH]
            .iter_mut()
            .for_each(&mut f);
    }
}

fn positions_limit(tensor: Tensor, shape: Shape) -> usize {
    match tensor {
        Tensor::Q => shape.chunk_len,
        Tensor::K | Tensor::V => shape.seq_len(),
    }
}

fn resolve_positions(positions: &Positions, tensor: Tensor, shape: Shape) -> Vec<usize> {
    let limit = positions_limit(tensor, shape);
    match positions {
        Positions::List(list) => list.clone(),
        Positions::Named(named) => match named {
            NamedPositions::All => (0..limit).collect(),
            NamedPositions::Prefix => (0..shape.prefix_len.min(limit)).collect(),
            NamedPositions::Chunk => (shape.prefix_len.min(limit)..limit).collect(),
            NamedPositions::LastPrefix => shape.prefix_len.checked_sub(1).into_iter().collect(),
            NamedPositions::Last => vec![limit - 1],
        },
    }
}

/// Uniform in [-1, 1): bounded values keep the tolerance meaningful and never
/// overflow by themselves, so only planted values exercise the overflow path.
fn random_tensor(rng: &mut ChaCha8Rng, len: usize) -> Vec<f32> {
    (0..len).map(|_| rng.random_range(-1.0f32..1.0)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::npy;

    fn case(name: &str) -> CaseSpec {
        crate::lab::case_file::named(embedded_cases(), name)
    }

    #[test]
    fn embedded_cases_parse_and_cover_the_lab_hazards() {
        let names: Vec<String> = embedded_cases().into_iter().map(|c| c.name).collect();
        for required in [
            "planted-overflow",
            "last-key-of-prefix",
            "last-key-of-sequence",
            "chunk-of-1",
            "chunk-of-17",
            "chunk-of-33",
            "prefix-31",
            "prefix-1000",
            "no-prefix",
            "chunk-multiple-of-64",
            "chunk-64-plus-one",
            "large-values-other-heads",
        ] {
            assert!(
                names.iter().any(|n| n == required),
                "missing case {required}"
            );
        }
    }

    #[test]
    fn generation_is_reproducible_and_fresh_per_seed() {
        let c = case("random-small");
        assert_eq!(c.generate(7).unwrap().inputs, c.generate(7).unwrap().inputs);
        assert_ne!(
            c.generate(7).unwrap().inputs.q,
            c.generate(8).unwrap().inputs.q
        );
    }

    #[test]
    fn overflow_plants_sit_exactly_where_declared() {
        let inputs = case("planted-overflow").generate(1).unwrap().inputs;
        let q_at = |r, h, d| inputs.q[Shape::q_index(r, h, d)];
        let k_at = |p, g, d| inputs.k[Shape::kv_index(p, g, d)];
        assert!((0..DH).all(|d| q_at(31, 0, d) == 4.0));
        assert!((0..DH).all(|d| k_at(150, 0, d) == 4.0));
        assert!((0..DH).any(|d| q_at(2, 0, d) != 4.0));
        assert!(
            (0..DH).any(|d| q_at(31, 1, d) != 4.0),
            "other heads stay random"
        );
        assert!((0..DH).any(|d| k_at(150, 1, d) != 4.0));
        let planted_score: f32 = (0..DH)
            .map(|d| q_at(31, 0, d) * k_at(150, 0, d))
            .sum::<f32>()
            * 0.125;
        assert_eq!(planted_score, 128.0);
    }

    #[test]
    fn last_key_plants_the_final_position_only() {
        let c = case("last-key-of-sequence");
        let inputs = c.generate(3).unwrap().inputs;
        let last = inputs.shape.seq_len() - 1;
        assert_eq!(last, 1032);
        assert!((0..DH).all(|d| inputs.k[Shape::kv_index(last, 0, d)] == 4.0));
        let planted_keys = (0..=last)
            .filter(|&p| (0..DH).all(|d| inputs.k[Shape::kv_index(p, 0, d)] == 4.0))
            .count();
        assert_eq!(planted_keys, 1);
        let prefix = case("last-key-of-prefix").generate(3).unwrap().inputs;
        assert!((0..DH).all(|d| prefix.k[Shape::kv_index(999, 0, d)] == 4.0));
        assert!((0..DH).any(|d| prefix.k[Shape::kv_index(1000, 0, d)] != 4.0));
    }

    #[test]
    fn scaling_touches_only_the_named_heads() {
        let plain = case("random-small").generate(5).unwrap().inputs;
        let scaled = case("large-values-other-heads").generate(5).unwrap().inputs;
        let max_abs = |data: &[f32], heads: usize, head: usize| {
            data.chunks_exact(heads * DH)
                .flat_map(|p| p[head * DH..(head + 1) * DH].iter())
                .fold(0f32, |m, x| m.max(x.abs()))
        };
        assert!(max_abs(&scaled.q, HQ, 0) <= 1.0);
        assert!(max_abs(&scaled.q, HQ, 1) > 1.0);
        assert!(max_abs(&scaled.v, HKV, 7) > 1.0);
        assert!(max_abs(&plain.q, HQ, 1) <= 1.0);
    }

    #[test]
    fn bad_case_files_are_rejected_with_the_case_named() {
        let parse = |t: &str| parse_cases(t, "t.toml", Path::new("."));
        let dup =
            "[[case]]\nname='a'\nsummary=''\nchunk=1\n[[case]]\nname='a'\nsummary=''\nchunk=1\n";
        assert!(parse(dup)
            .unwrap_err()
            .to_string()
            .contains("two cases are named `a`"));
        let zero = "[[case]]\nname='z'\nsummary=''\nchunk=0\n";
        assert!(parse(zero)
            .unwrap_err()
            .to_string()
            .contains("chunk must be at least 1"));
        let far = "[[case]]\nname='f'\nsummary=''\nchunk=4\nprefix=2\n[[case.plant]]\ntensor='k'\nhead=0\npositions=[6]\nvalue=1.0\n";
        assert!(parse(far).unwrap_err().to_string().contains("past the end"));
        let head = "[[case]]\nname='h'\nsummary=''\nchunk=4\n[[case.plant]]\ntensor='v'\nhead=8\npositions='all'\nvalue=1.0\n";
        assert!(parse(head)
            .unwrap_err()
            .to_string()
            .contains("out of range"));
        for (text, why) in [
            (
                "chunk=100000000000000\n",
                "chunk 100000000000000 is more than the limit of 65536",
            ),
            (
                "chunk=9007199254740992\n",
                "more than the limit of 65536 rows",
            ),
            (
                "chunk=4\nprefix=65537\n",
                "prefix 65537 is more than the limit of 65536",
            ),
            (
                "chunk=4\n[[case.plant]]\ntensor='k'\nhead=0\npositions='all'\nvalue=nan\n",
                "plant value NaN is not a finite number",
            ),
            (
                "chunk=4\n[[case.plant]]\ntensor='k'\nhead=0\npositions='all'\nvalue=inf\n",
                "plant value inf is not a finite number",
            ),
            (
                "chunk=4\n[[case.scale]]\ntensors=['q']\nheads=[0,1]\nfactor=-inf\n",
                "scale factor -inf is not a finite number",
            ),
        ] {
            let file = format!("[[case]]\nname='b'\nsummary=''\n{text}");
            let error = parse(&file).expect_err(text).to_string();
            assert!(error.contains(why), "{text}: {error}");
        }
        let largest =
            format!("[[case]]\nname='l'\nsummary=''\nchunk={MAX_CHUNK}\nprefix={MAX_PREFIX}\n");
        assert!(parse(&largest).is_ok());
        let typo = "[[case]]\nname='t'\nsummary=''\nchunks=4\n";
        assert!(parse(typo).unwrap_err().to_string().contains("chunks"));
        assert!(parse("").is_err());
    }

    #[test]
    fn a_case_can_bring_its_own_tensors() {
        let dir = tempfile::tempdir().unwrap();
        let (c, p) = (2, 1);
        let q: Vec<f32> = (0..c * HQ * DH).map(|i| i as f32 * 1e-3).collect();
        let kv: Vec<f32> = (0..(c + p) * HKV * DH).map(|i| (i % 7) as f32).collect();
        npy::write_f32(&dir.path().join("q.npy"), &[c, HQ, DH], &q).unwrap();
        npy::write_f32(&dir.path().join("k.npy"), &[c + p, HKV, DH], &kv).unwrap();
        npy::write_f32(&dir.path().join("v.npy"), &[c + p, HKV, DH], &kv).unwrap();
        let text = "[[case]]\nname='own'\nsummary='mine'\ntensors='own'\n";
        std::fs::create_dir(dir.path().join("own")).unwrap();
        for f in ["q.npy", "k.npy", "v.npy"] {
            std::fs::rename(dir.path().join(f), dir.path().join("own").join(f)).unwrap();
        }
        let cases = parse_cases(text, "t.toml", dir.path()).unwrap();
        let made = cases[0].generate(0).unwrap();
        let inputs = &made.inputs;
        assert_eq!(
            inputs.shape,
            Shape {
                chunk_len: 2,
                prefix_len: 1
            }
        );
        assert_eq!(inputs.q, q);
        assert!(made.expected.is_none());
    }
}
