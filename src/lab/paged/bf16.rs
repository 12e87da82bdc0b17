//! bf16 as the lab stores it: an f32 whose low 16 bits are zero.
//!
//! Inputs travel as such f32 values (on disk as float32 `.npy` arrays, in
//! memory until upload), so the oracle reads them exactly; the upload keeps
//! their top halves ([`bits`]). Rounding is to nearest, ties to even, as
//! `__float2bfloat16_rn` does.

/// `x` rounded to the nearest bf16 (ties to even); NaN stays a quiet NaN,
/// overflow goes to infinity.
pub fn round(x: f32) -> f32 {
    let bits = x.to_bits();
    if x.is_nan() {
        return f32::from_bits((bits | 0x0040_0000) & 0xFFFF_0000);
    }
    let lsb = (bits >> 16) & 1;
    f32::from_bits(bits.wrapping_add(0x7FFF + lsb) & 0xFFFF_0000)
}

/// Whether `x` is exactly a bf16 value.
pub fn is_exact(x: f32) -> bool {
    x.to_bits() & 0xFFFF == 0
}

/// The bf16 bit pattern of an exact value (its top half).
pub fn bits(x: f32) -> u16 {
    debug_assert!(is_exact(x), "{x} is not a bf16 value");
    (x.to_bits() >> 16) as u16
}

/// The first index of `values` that is not exactly a bf16 value.
pub fn first_inexact(values: &[f32]) -> Option<usize> {
    values.iter().position(|&x| !is_exact(x))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// The nearest bf16 by comparing the two candidates in f64.
    fn nearest(x: f32) -> f32 {
        let down = f32::from_bits(x.to_bits() & 0xFFFF_0000);
        let up = f32::from_bits((x.to_bits() & 0xFFFF_0000) + 0x1_0000);
        let (dd, du) = (
            (f64::from(x) - f64::from(down)).abs(),
            (f64::from(up) - f64::from(x)).abs(),
        );
        match dd.partial_cmp(&du).unwrap() {
            std::cmp::Ordering::Less => down,
            std::cmp::Ordering::Greater => up,
            _ if (down.to_bits() >> 16) & 1 == 0 => down,
            _ => up,
        }
    }

    #[test]
    fn rounding_picks_the_nearest_neighbour_ties_to_even() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        for _ in 0..200_000 {
            let x = f32::from_bits(rng.random::<u32>());
            // Finite inputs whose upper neighbour is finite (or infinity itself).
            if !x.is_finite() || x.abs() > f32::from_bits(0x7F7F_0000) {
                continue;
            }
            let r = round(x);
            assert_eq!(r.to_bits(), nearest(x).to_bits(), "{x:e}");
            assert!(is_exact(r));
        }
        // Ties, both ways.
        assert_eq!(round(f32::from_bits(0x3F80_8000)).to_bits(), 0x3F80_0000);
        assert_eq!(round(f32::from_bits(0x3F81_8000)).to_bits(), 0x3F82_0000);
        assert_eq!(round(f32::from_bits(0x3F80_8001)).to_bits(), 0x3F81_0000);
        assert_eq!(round(f32::MAX), f32::INFINITY);
        assert!(round(f32::NAN).is_nan() && is_exact(round(f32::NAN)));
        assert_eq!(round(-0.0).to_bits(), (-0.0f32).to_bits());
        assert_eq!(round(1.0), 1.0);
    }

    #[test]
    fn exactness_checks_and_bits() {
        assert!(is_exact(1.5) && is_exact(-448.0) && !is_exact(0.1));
        assert_eq!(first_inexact(&[1.0, 2.0, 0.1, 0.3]), Some(2));
        assert_eq!(first_inexact(&[1.0, 0.5]), None);
        assert_eq!(bits(1.0), 0x3F80);
        assert_eq!(bits(-2.0), 0xC000);
    }
}
