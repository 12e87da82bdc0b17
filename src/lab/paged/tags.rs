//! Finite tags for the cache slots no context covers: the inputs of the
//! rerun that tells misreads apart ([`crate::lab::definition::CaseInputs::sentinels_tagged`]).
//!
//! A paged case fills every slot no sequence owns with a sentinel so that a
//! kernel reading one gets a wrong number. Two labs use NaN there, and then
//! every misread gives the same NaN: a kernel that ignores the block table
//! and one that unpacks keys with the wrong X both write NaN, and so do
//! their models, which proves nothing ([`crate::lab::evidence`]). With each
//! sentinel slot holding a finite value of its own, derived from its index,
//! a kernel's output shows which slots it reached, and only the model that
//! reads the same slots reproduces it.

/// The cache with every element `is_sentinel` picks replaced by `tag(index)`.
pub fn tagged<C: Copy>(
    cache: &[C],
    is_sentinel: impl Fn(C) -> bool,
    tag: impl Fn(usize) -> C,
) -> Vec<C> {
    cache
        .iter()
        .enumerate()
        .map(|(index, &x)| if is_sentinel(x) { tag(index) } else { x })
        .collect()
}

/// A number in `0..count` for the element at `index`, scattered so that
/// neighbouring slots (the next key, the next block) differ.
pub fn scatter(index: usize, count: u32) -> u32 {
    // SplitMix64's finaliser: cheap, and every input bit moves the output.
    let mut z = (index as u64).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    ((z ^ (z >> 31)) % u64::from(count)) as u32
}

/// A tag for a float cache of keys: small, so a misread key's score stays
/// in the range of the true scores and no `exp` overflows.
pub fn key_tag(index: usize) -> f32 {
    (scatter(index, 17) as f32 - 8.0) / 16.0
}

/// A tag for a float cache of values: between 1 and 11, outside the
/// `[-1, 1)` of drawn values, so an output that averaged one in moves.
pub fn value_tag(index: usize) -> f32 {
    1.0 + scatter(index, 1000) as f32 / 100.0
}

/// A tag for an FP8 cache of keys: a code of magnitude 1/8 to 1/4 in E4M3
/// (far smaller in E5M2), either sign; finite in both formats, so a kernel
/// decoding with the wrong one still reads a number.
pub fn fp8_key_tag(index: usize) -> u8 {
    let t = scatter(index, 32) as u8;
    0x20 + (t & 15) + if t >= 16 { 0x80 } else { 0 }
}

/// A tag for an FP8 cache of values: a positive code from 2 to 30 in E4M3
/// (2 to 448 in E5M2), far from the drawn values after their scale.
pub fn fp8_value_tag(index: usize) -> u8 {
    0x40 + scatter(index, 32) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_sentinels_change_and_neighbours_differ() {
        let cache = [0.5, f32::NAN, f32::NAN, -0.25, f32::NAN];
        let out = tagged(&cache, f32::is_nan, value_tag);
        assert_eq!((out[0], out[3]), (0.5, -0.25));
        assert!(out.iter().all(|x| x.is_finite()));
        assert_ne!(out[1], out[2]);
        let keys: Vec<f32> = (0..64).map(key_tag).collect();
        assert!(keys.iter().all(|k| k.abs() <= 0.5));
        assert!((1..64).filter(|&i| keys[i] != keys[i - 1]).count() > 48);
        assert!((0..1000).map(value_tag).all(|v| (1.0..11.0).contains(&v)));
    }

    #[test]
    fn fp8_tags_are_finite_in_both_formats() {
        use crate::lab::paged::fp8::KvFormat;
        for format in [KvFormat::E4m3, KvFormat::E5m2] {
            for index in 0..4096 {
                let (k, v) = (fp8_key_tag(index), fp8_value_tag(index));
                assert!(
                    format.decode(k).is_finite() && format.decode(v).is_finite(),
                    "{index}"
                );
                assert!(format.decode(v) >= 2.0, "{index}");
            }
        }
        assert_ne!(fp8_value_tag(0), fp8_value_tag(1));
    }
}
