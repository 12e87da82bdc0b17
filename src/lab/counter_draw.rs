//! The bulk values of a timing shape, drawn by a counter: value `i` of a
//! tensor is SplitMix64's `i`-th output from the tensor's seed, a function
//! of (seed, tensor, i) alone and the one the GPU's fresh draws use
//! (`element_bits`, `unit_draw` and `float_draw` in kernels/probes.cu), so a
//! timing shape's hundreds of millions of elements are drawn on every core
//! at once, one mix each. Hazard cases keep their generator's one sequential stream: their
//! values stay those of their seed, golden files and recorded runs included.

use std::ops::Range;

use rayon::prelude::*;

/// SplitMix64's increment.
const GOLDEN_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64's step and finaliser, as kernels/probes.cu's `mix64`: the
/// output after state `x`.
fn mix64(x: u64) -> u64 {
    let x = x.wrapping_add(GOLDEN_GAMMA);
    let x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    let x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// One tensor's stream of values.
#[derive(Debug, Clone, Copy)]
pub struct CounterDraw {
    seed: u64,
}

impl CounterDraw {
    /// The stream of tensor `tensor` (any number a lab gives each tensor)
    /// under `seed`.
    pub fn new(seed: u64, tensor: u64) -> CounterDraw {
        CounterDraw {
            seed: mix64(seed ^ mix64(tensor)),
        }
    }

    /// Value `i` in [0, 1), 24 random bits.
    pub fn unit(self, i: u64) -> f32 {
        let bits = mix64(self.seed.wrapping_add(i.wrapping_mul(GOLDEN_GAMMA)));
        (bits >> 40) as f32 * (1.0 / 16_777_216.0)
    }

    /// Value `i` uniform in `range` (the rounding that could reach its end
    /// gives its start instead, as on the GPU).
    pub fn uniform(self, i: u64, range: &Range<f32>) -> f32 {
        let drawn = (range.end - range.start).mul_add(self.unit(i), range.start);
        if drawn < range.end {
            drawn
        } else {
            range.start
        }
    }

    /// A tensor of `len` values uniform in `range`, each made by `make`.
    pub fn tensor<T: Send>(
        self,
        len: usize,
        range: Range<f32>,
        make: impl Fn(f32) -> T + Sync,
    ) -> Vec<T> {
        (0..len)
            .into_par_iter()
            .map(|i| make(self.uniform(i as u64, &range)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_depends_on_its_seed_tensor_and_index_alone() {
        let draw = CounterDraw::new(7, 2);
        let whole = draw.tensor(1000, -1.0..1.0, |x| x);
        assert_eq!(whole[617], draw.uniform(617, &(-1.0..1.0)));
        assert_eq!(whole, CounterDraw::new(7, 2).tensor(1000, -1.0..1.0, |x| x));
        assert_ne!(whole, CounterDraw::new(8, 2).tensor(1000, -1.0..1.0, |x| x));
        assert_ne!(whole, CounterDraw::new(7, 3).tensor(1000, -1.0..1.0, |x| x));
    }

    #[test]
    fn values_fill_their_range_evenly_and_never_reach_its_end() {
        let values = CounterDraw::new(1, 0).tensor(200_000, -1.0..1.0, |x| x);
        assert!(values.iter().all(|v| (-1.0..1.0).contains(v)));
        let mut tenths = [0usize; 10];
        for v in &values {
            tenths[((v + 1.0) * 5.0) as usize] += 1;
        }
        for count in tenths {
            assert!((19_000..21_000).contains(&count), "{tenths:?}");
        }
    }

    /// The GPU's `mix64` on known inputs (SplitMix64's published outputs
    /// for seed 0 are mix64(0), mix64(0x9E37...), ...).
    #[test]
    fn the_mixer_is_splitmix64_s() {
        assert_eq!(mix64(0), 0xE220_A839_7B1D_CDAF);
        assert_eq!(mix64(0x9E37_79B9_7F4A_7C15), 0x6E78_9E6A_A1B9_65F4);
    }
}
