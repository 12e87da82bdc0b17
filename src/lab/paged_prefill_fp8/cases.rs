//! The FP8 lab's hazard cases: the family's recipes
//! ([`crate::lab::paged::recipe`]) with the cache's format, its two scales
//! and whether bytes far outside `[-1, 1)` are placed, laid out in FP8.
//!
//! Memory is laid out as the contract says (the family's block table), with
//! an FP8 NaN byte ([`FP8_NAN`]) in every cache slot no context covers, so
//! a stray read shows as NaN. Real cache values are `U(-1, 1)` quantised
//! with the case's scales; bf16 tensors are `U(-1, 1)` rounded to bf16.
//! A plant sets `q` rows and keys to its value (cached keys as the byte
//! nearest `value / kScale`); every plant of this lab scores past `expf`'s
//! range (the smallest, 3, gives `3 * 3 * 128 * scale = 102`).

use std::path::Path;

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::{bf16, Batch, Inputs, KvFormat, FP8_NAN, INSTANCE};
use crate::lab::case_file::case_rng;
use crate::lab::paged::generate::{lay_out, lay_out_counted, Counted, Draw, PlantSites};
pub use crate::lab::paged::recipe::CaseSpec;
use crate::lab::paged::recipe::{CaseInputs, Fp8Keys, PagedCaseError, TIMING_CONTEXT, TIMING_NEW};
use crate::lab::paged::tags;

/// The cases shipped with flashprof.
pub const EMBEDDED_CASES: &str = include_str!("../../../assets/paged-prefill-fp8-cases.toml");

/// The dimension of K where wide cases put large bytes.
pub const WIDE_DIM: usize = 77;
/// A wide key's largest dequantised magnitude in [`WIDE_DIM`]: with `|q| < 1`
/// it adds at most `96 * scale = 8.5` to a score, far from `expf`'s range.
pub const WIDE_KEY_BOUND: f32 = 96.0;
/// One value byte in this many is wide in a wide case.
pub const WIDE_VALUE_EVERY: u32 = 16;

/// The embedded cases; the tests validate them, so this cannot fail at run time.
pub fn embedded_cases() -> Vec<CaseSpec> {
    INSTANCE
        .parse_cases(
            EMBEDDED_CASES,
            "assets/paged-prefill-fp8-cases.toml",
            Path::new("."),
        )
        .expect("the embedded FP8 cases are checked by tests")
}

/// `spec`'s inputs from the run's seed (or its own tensors), with the
/// expected output a case's own tensors bring.
pub fn generate(spec: &CaseSpec, seed: u64) -> Result<CaseInputs<Inputs>, PagedCaseError> {
    let keys = spec.fp8_keys()?;
    if let Some(dir) = &spec.tensors {
        let scales = (keys.k_scale, keys.v_scale);
        return super::tensors::load_dir(dir, spec.window, keys.format, scales);
    }
    let mut rng = case_rng(seed, &spec.name);
    let batch = INSTANCE.lengths_batch(spec);
    let mut inputs = match is_timing(spec) {
        true => lay_out_fp8_counted(batch, keys, &mut rng),
        false => lay_out_fp8(batch, spec.share_prefix, keys, &mut rng),
    };
    for plant in &spec.plant {
        let key_byte = inputs.format.encode(plant.value / inputs.k_scale);
        let sites = PlantSites::of(&inputs.tensors.batch, plant);
        let value = bf16::round(plant.value);
        sites.set(
            &mut inputs.tensors.q,
            &mut inputs.tensors.k_new,
            &mut inputs.tensors.k_cache,
            value,
            key_byte,
        );
    }
    if let Some(reach) = spec.high_blocks {
        inputs.tensors = inputs
            .tensors
            .placed_high(reach, (tags::fp8_key_tag, tags::fp8_value_tag));
    }
    Ok(CaseInputs {
        inputs,
        expected: None,
    })
}

fn lay_out_fp8(
    batch: Batch,
    share: Option<[usize; 2]>,
    keys: Fp8Keys,
    rng: &mut ChaCha8Rng,
) -> Inputs {
    let Fp8Keys {
        format,
        k_scale,
        v_scale,
        wide,
    } = keys;
    let quantise =
        |rng: &mut ChaCha8Rng, scale: f32| format.encode(rng.random_range(-1.0f32..1.0) / scale);
    let wide_key = largest_code_up_to(format, WIDE_KEY_BOUND / k_scale);
    let mut cached = |rng: &mut ChaCha8Rng, d: usize| {
        let mut key = quantise(rng, k_scale);
        let mut value = quantise(rng, v_scale);
        if wide {
            let sign = if rng.random::<bool>() { 0x80 } else { 0 };
            if d == WIDE_DIM && rng.random::<bool>() {
                key = wide_key | sign;
            }
            if d == WIDE_DIM + 1 && format == KvFormat::E5m2 {
                key = rng.random_range(1u8..4) | sign; // 2^-16 .. 3 * 2^-16
            }
            if rng.random_range(0..WIDE_VALUE_EVERY) == 0 {
                value = top_code(format, rng) | sign;
            }
        }
        (key, value)
    };
    let draw = Draw {
        activation: &|rng: &mut ChaCha8Rng| bf16::round(rng.random_range(-1.0f32..1.0)),
        unowned: (FP8_NAN, FP8_NAN),
        cached: &mut cached,
    };
    Inputs {
        tensors: lay_out(batch, share, rng, draw),
        format,
        k_scale,
        v_scale,
    }
}

/// Whether `spec` is the timing shape (no case may be as large: the lab
/// refuses any other spec of its lengths).
fn is_timing(spec: &CaseSpec) -> bool {
    spec.name == "timing" && spec.context == TIMING_CONTEXT && spec.new == TIMING_NEW
}

/// The timing shape's tensors: its block table drawn from `rng` as a case's
/// is, its values by counter (uniform in `[-1, 1)` before quantising, as a
/// case's are).
fn lay_out_fp8_counted(batch: Batch, keys: Fp8Keys, rng: &mut ChaCha8Rng) -> Inputs {
    let Fp8Keys {
        format,
        k_scale,
        v_scale,
        ..
    } = keys;
    let activation = |x: f32| bf16::round(x);
    let key = |x: f32| format.encode(x / k_scale);
    let value = |x: f32| format.encode(x / v_scale);
    let draw = Counted {
        range: -1.0..1.0,
        activation: &activation,
        key: &key,
        value: &value,
        unowned: (FP8_NAN, FP8_NAN),
    };
    Inputs {
        tensors: lay_out_counted(batch, rng, draw),
        format,
        k_scale,
        v_scale,
    }
}

/// The timing shape: the family's timing lengths (16 sequences, contexts
/// 512 to 4096, 3930 new tokens) at head dim 128, E4M3, kScale 0.5, vScale
/// 2.0, window and ALiBi off, as a case (so with spare blocks);
/// `summary` says its size from its lengths.
pub fn timing_spec(summary: impl Fn(&Batch) -> String) -> CaseSpec {
    let mut spec = CaseSpec {
        name: "timing".into(),
        context: TIMING_CONTEXT.to_vec(),
        new: TIMING_NEW.to_vec(),
        format: Some(KvFormat::E4m3),
        ..CaseSpec::default()
    };
    INSTANCE.spell_out(&mut spec);
    spec.summary = format!(
        "the timing shape, {}",
        summary(&INSTANCE.lengths_batch(&spec))
    );
    spec
}

/// The positive code of the largest value at most `bound`.
fn largest_code_up_to(format: KvFormat, bound: f32) -> u8 {
    (0u8..0x80)
        .filter(|&c| format.decode(c) <= bound)
        .max_by(|&a, &b| format.decode(a).total_cmp(&format.decode(b)))
        .unwrap_or(0)
}

/// A positive code near the format's top: E4M3 256..448 (its last binade),
/// E5M2 4096..57344 (far beyond anything E4M3 holds).
fn top_code(format: KvFormat, rng: &mut ChaCha8Rng) -> u8 {
    match format {
        KvFormat::E4m3 => rng.random_range(0x78..=0x7E),
        KvFormat::E5m2 => rng.random_range(0x6C..=0x7B),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The FP8 keys of a validated case of this lab (validation requires `format`).
    pub fn keys_of(spec: &CaseSpec) -> Fp8Keys {
        spec.fp8()
            .expect("an FP8 case names its format (checked when parsed)")
    }
    use crate::lab::paged::testing::{assert_prefill_families, slots_past_contexts};
    use crate::lab::paged_prefill_fp8::SCALE;
    use crate::lab::paged_prefill_fp8::{BLOCK, DH, GROUP, HKV, LAYOUT};
    use std::path::PathBuf;

    fn generated() -> Vec<(CaseSpec, Inputs)> {
        embedded_cases()
            .into_iter()
            .map(|c| {
                let inputs = generate(&c, 7).unwrap().inputs;
                (c, inputs)
            })
            .collect()
    }

    #[test]
    fn the_cases_cover_the_second_labs_families() {
        let all = generated();
        assert_prefill_families(
            &all.iter()
                .map(|(_, i)| &i.tensors.batch)
                .collect::<Vec<_>>(),
        );
        assert!(all.iter().any(|(c, _)| c.share_prefix.is_some()));
        for (case, inputs) in &all {
            assert!(inputs.tensors.batch.num_seqs() >= 2, "{}", case.name);
        }
    }

    #[test]
    fn the_cases_cover_the_fp8_hazards() {
        let all = generated();
        for format in KvFormat::ALL {
            assert!(
                all.iter().filter(|(c, _)| c.format == Some(format)).count() >= 6,
                "{format:?}"
            );
            assert!(
                all.iter()
                    .any(|(c, _)| c.format == Some(format) && keys_of(c).wide),
                "{format:?} wide"
            );
        }
        for (case, inputs) in &all {
            let (k, v) = (keys_of(case).k_scale, keys_of(case).v_scale);
            assert!(
                k != v && k != 1.0 && v != 1.0,
                "{}: scales {k}, {v}",
                case.name
            );
            assert!(inputs
                .tensors
                .q
                .iter()
                .chain(&inputs.tensors.k_new)
                .all(|&x| bf16::is_exact(x)));
        }
        let not_power_of_two = |s: f32| s.to_bits() & 0x007F_FFFF != 0;
        assert!(all
            .iter()
            .any(|(c, _)| not_power_of_two(keys_of(c).k_scale)
                && not_power_of_two(keys_of(c).v_scale)));
        assert!(all
            .iter()
            .any(|(c, _)| keys_of(c).k_scale == 0.5 && keys_of(c).v_scale == 2.0));
        // Wide cases: E4M3 bytes in its last binade, E5M2 values E4M3 cannot hold.
        let holds = |case: &str, byte: &dyn Fn(u8) -> bool| {
            let (_, inputs) = all.iter().find(|(c, _)| c.name == case).unwrap();
            inputs.tensors.v_cache.iter().any(|&b| byte(b))
                || inputs.tensors.k_cache.iter().any(|&b| byte(b))
        };
        let wide = |f: KvFormat| {
            all.iter()
                .find(|(c, _)| keys_of(c).wide && c.format == Some(f))
                .unwrap()
                .0
                .name
                .clone()
        };
        assert!(holds(&wide(KvFormat::E4m3), &|b| (b & 0x7F) >= 0x78
            && b & 0x7F != 0x7F));
        assert!(holds(&wide(KvFormat::E5m2), &|b| KvFormat::E5m2
            .decode(b)
            .abs()
            > 448.0
            && KvFormat::E5m2.decode(b).is_finite()));
        assert!(holds(&wide(KvFormat::E5m2), &|b| (1..4).contains(&(b & 0x7F))));
        // Every plant scores past expf's range; no unplanted score comes near it.
        for (case, inputs) in &all {
            for plant in &case.plant {
                let score = f64::from(plant.value).powi(2) * DH as f64 * SCALE;
                assert!(score > 88.8, "{}: plant scores {score}", case.name);
            }
            if case.plant.is_empty() {
                let worst = largest_score(inputs);
                assert!(worst < 40.0, "{}: a score of {worst}", case.name);
            }
        }
    }

    /// The largest score any visible (row, head, key) of the case has.
    fn largest_score(inputs: &Inputs) -> f64 {
        let b = &inputs.tensors.batch;
        let mut worst = 0f64;
        for row in 0..b.total_new() {
            let (s, i) = b.sequence_of_row(row);
            for head in 0..crate::lab::paged_prefill_fp8::HQ {
                for j in b.first_visible(i)..b.context[s] {
                    let score: f64 = (0..DH)
                        .map(|d| {
                            f64::from(inputs.tensors.q[LAYOUT.head_index(row, head, d)])
                                * inputs.cached_key(s, j, head / GROUP, d)
                        })
                        .sum();
                    worst = worst.max((score * SCALE).abs());
                }
            }
        }
        worst
    }

    #[test]
    fn unused_slots_and_spare_blocks_hold_fp8_nan() {
        for (case, inputs) in generated() {
            let b = &inputs.tensors.batch;
            let owned: std::collections::HashSet<usize> = (0..b.num_seqs())
                .flat_map(|s| (0..b.context_blocks(s)).map(move |k| (s, k)))
                .map(|(s, k)| b.block_of(s, k * BLOCK))
                .collect();
            for (block, o) in slots_past_contexts(b) {
                let k = inputs.tensors.k_cache[LAYOUT.k_cache_index(block, 2, 100, o)];
                let v = inputs.tensors.v_cache[LAYOUT.v_cache_index(block, 6, 3, o)];
                assert_eq!((k, v), (FP8_NAN, FP8_NAN), "{}", case.name);
            }
            let spare = (0..b.num_blocks).find(|id| !owned.contains(id)).unwrap();
            let region = spare * HKV * DH * BLOCK..(spare + 1) * HKV * DH * BLOCK;
            assert!(
                inputs.tensors.k_cache[region.clone()]
                    .iter()
                    .all(|&x| x == FP8_NAN),
                "{}",
                case.name
            );
            assert!(
                inputs.tensors.v_cache[region].iter().all(|&x| x == FP8_NAN),
                "{}",
                case.name
            );
        }
    }

    #[test]
    fn generation_is_deterministic_and_seeded() {
        let spec = &embedded_cases()[0];
        assert_eq!(
            generate(spec, 42).unwrap().inputs,
            generate(spec, 42).unwrap().inputs
        );
        assert_ne!(
            generate(spec, 42).unwrap().inputs.tensors.k_cache,
            generate(spec, 43).unwrap().inputs.tensors.k_cache
        );
    }

    #[test]
    fn bad_recipes_are_refused() {
        let refused = |extra: &str| {
            let text = format!(
                "[[case]]\nname = \"x\"\nsummary = \"s\"\ncontext = [1]\nnew = [1]\nformat = \"e4m3\"\n{extra}"
            );
            INSTANCE
                .parse_cases(&text, "t.toml", Path::new("."))
                .unwrap_err()
                .to_string()
        };
        assert!(refused("k_scale = 0.0").contains("k_scale = 0"));
        assert!(refused("v_scale = -2.0").contains("v_scale = -2"));
        assert!(refused("colour = 1").contains("unknown field"));
        assert!(refused("window = 99999").contains("at most 66048"));
        let text = "[[case]]\nname = \"x\"\nsummary = \"s\"\ncontext = [1]\nnew = [1]\nformat = \"e6m1\"\n";
        assert!(INSTANCE
            .parse_cases(text, "t.toml", Path::new("."))
            .is_err());
    }

    /// Writes every case (seed 1) as a folder of `.npy` files with its recipe's
    /// scalars in `meta.txt`, for the GPU check (scripts/fp8-kernels.sh):
    /// `FP8_CASES_OUT=dir cargo test --lib dump_the_cases -- --ignored`.
    #[test]
    #[ignore = "writes files for the GPU check, run by hand"]
    fn dump_the_cases() {
        let out =
            PathBuf::from(std::env::var("FP8_CASES_OUT").expect("FP8_CASES_OUT names a folder"));
        // A high-blocks case is the GPU's only: its placed ids and landing
        // blocks are no `.npy` file's.
        for case in embedded_cases()
            .into_iter()
            .filter(|c| c.high_blocks.is_none())
        {
            let inputs = generate(&case, 1).unwrap().inputs;
            let dir = out.join(&case.name);
            std::fs::create_dir_all(&dir).unwrap();
            for (name, bytes) in crate::lab::paged_prefill_fp8::tensors::encode(&inputs, None) {
                std::fs::write(dir.join(name), bytes).unwrap();
            }
            let meta = format!(
                "window {}\nformat {}\nk_scale {:e}\nv_scale {:e}\n",
                case.window,
                inputs.format.code(),
                keys_of(&case).k_scale,
                keys_of(&case).v_scale
            );
            std::fs::write(dir.join("meta.txt"), meta).unwrap();
        }
    }
}
