//! The two FP8 formats of the KV cache, decoded exactly, and the rounding
//! that makes a cache from real values.
//!
//! E4M3 is OCP's "fn" variant (vLLM's `fp8` / `fp8_e4m3`): bias 7, no
//! infinities, one NaN pattern per sign (`S.1111.111`), largest finite 448.
//! E5M2 (`fp8_e5m2`) is IEEE-like: bias 15, `S.11111.00` infinite,
//! `S.11111.{01,10,11}` NaN, largest finite 57344. Every FP8 value is exact
//! in f32, so [`decode`] loses nothing; the oracle multiplies by the scale in
//! f64, which is exact too (4 significant bits times 24).

use serde::{Deserialize, Serialize};

/// The cache's element format, as the kernel's `kvFormat` argument names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KvFormat {
    /// `kvFormat = 0`.
    E4m3,
    /// `kvFormat = 1`.
    E5m2,
}

/// The byte every cache slot no context covers holds: NaN in both formats.
pub const FP8_NAN: u8 = 0x7F;

/// The format's usual name, `E4M3` or `E5M2`.
impl std::fmt::Display for KvFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            KvFormat::E4m3 => "E4M3",
            KvFormat::E5m2 => "E5M2",
        })
    }
}

impl KvFormat {
    pub const ALL: [KvFormat; 2] = [KvFormat::E4m3, KvFormat::E5m2];

    /// The value of the kernel's `kvFormat` argument.
    pub fn code(self) -> i32 {
        match self {
            KvFormat::E4m3 => 0,
            KvFormat::E5m2 => 1,
        }
    }

    /// Mantissa bits.
    fn mantissa_bits(self) -> u32 {
        match self {
            KvFormat::E4m3 => 3,
            KvFormat::E5m2 => 2,
        }
    }

    /// Exponent bias.
    fn bias(self) -> i32 {
        match self {
            KvFormat::E4m3 => 7,
            KvFormat::E5m2 => 15,
        }
    }

    /// The largest finite value.
    pub fn max_finite(self) -> f32 {
        match self {
            KvFormat::E4m3 => 448.0,
            KvFormat::E5m2 => 57344.0,
        }
    }

    /// The value of `byte`, exactly, by building its f32 bit pattern.
    pub fn decode(self, byte: u8) -> f32 {
        let m_bits = self.mantissa_bits();
        let sign = if byte & 0x80 != 0 { -1.0f32 } else { 1.0 };
        let exponent = u32::from(byte & 0x7F) >> m_bits;
        let mantissa = u32::from(byte) & ((1 << m_bits) - 1);
        let top = (1u32 << (7 - m_bits)) - 1;
        if exponent == top {
            match self {
                KvFormat::E4m3 if mantissa != (1 << m_bits) - 1 => {}
                KvFormat::E4m3 => return f32::NAN,
                KvFormat::E5m2 if mantissa == 0 => return sign * f32::INFINITY,
                KvFormat::E5m2 => return f32::NAN,
            }
        }
        if exponent == 0 {
            // Subnormal: mantissa units of 2^(1 - bias - m_bits), exact in f32.
            let unit = f32::from_bits(((127 + 1 - self.bias() - m_bits as i32) as u32) << 23);
            return sign * mantissa as f32 * unit;
        }
        let biased = (exponent as i32 - self.bias() + 127) as u32;
        sign * f32::from_bits(biased << 23 | mantissa << (23 - m_bits))
    }

    /// The byte nearest `x` (ties to the even mantissa), saturating at the
    /// largest finite value as vLLM's quantisation does; NaN gives [`FP8_NAN`].
    ///
    /// By the bits, not by search: it runs for every cached element of a
    /// case (tens of millions at the timing shape). The magnitude's code is
    /// its f32 exponent rebiased and its mantissa rounded to the format's
    /// bits, ties to even (a carry moves to the next binade, as the codes of
    /// one sign are in value order); below the smallest normal it is the
    /// nearest multiple of the subnormal unit.
    pub fn encode(self, x: f32) -> u8 {
        if x.is_nan() {
            return FP8_NAN;
        }
        let m_bits = self.mantissa_bits();
        let magnitude = x.abs();
        let smallest_normal = f32::from_bits(((127 + 1 - self.bias()) as u32) << 23);
        let code = if magnitude < smallest_normal {
            // Units of 2^(1 - bias - m_bits): a power-of-two scaling, exact in f32.
            let units = f32::from_bits(((127 + self.bias() - 1 + m_bits as i32) as u32) << 23);
            (magnitude * units).round_ties_even() as u32
        } else if magnitude >= self.max_finite() {
            u32::MAX
        } else {
            let bits = magnitude.to_bits();
            let exponent = (bits >> 23) as i32 - 127 + self.bias();
            let dropped = 23 - m_bits;
            let mantissa = bits & ((1 << 23) - 1);
            let kept = mantissa >> dropped;
            let rest = mantissa & ((1 << dropped) - 1);
            let half = 1 << (dropped - 1);
            let up = rest > half || (rest == half && kept % 2 == 1);
            ((exponent as u32) << m_bits | kept) + u32::from(up)
        };
        let code = code.min(u32::from(self.largest_finite_code())) as u8;
        if x.is_sign_negative() && code != 0 {
            code | 0x80
        } else {
            code
        }
    }

    /// The code of [`Self::max_finite`].
    fn largest_finite_code(self) -> u8 {
        match self {
            KvFormat::E4m3 => 0x7E,
            KvFormat::E5m2 => 0x7B,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The byte nearest `x` by search over the format's finite codes in
    /// value order (ties to the even code), saturating; what [`KvFormat::encode`]
    /// must agree with everywhere.
    fn encode_by_search(format: KvFormat, x: f32) -> u8 {
        if x.is_nan() {
            return FP8_NAN;
        }
        let table: Vec<(f32, u8)> = (0u8..0x80)
            .map(|code| (format.decode(code), code))
            .filter(|(value, _)| value.is_finite())
            .collect();
        let magnitude = x.abs();
        let above = table.partition_point(|&(value, _)| value < magnitude);
        let code = match (above.checked_sub(1), table.get(above)) {
            (_, None) => table[table.len() - 1].1,
            (None, Some(&(_, code))) => code,
            (Some(below), Some(&(high, code))) => {
                let (low, low_code) = table[below];
                match (magnitude - low).partial_cmp(&(high - magnitude)) {
                    Some(std::cmp::Ordering::Less) => low_code,
                    Some(std::cmp::Ordering::Greater) => code,
                    _ if low_code % 2 == 0 => low_code,
                    _ => code,
                }
            }
        };
        if x.is_sign_negative() && code != 0 {
            code | 0x80
        } else {
            code
        }
    }

    #[test]
    fn encoding_by_the_bits_agrees_with_the_search_everywhere() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        for format in KvFormat::ALL {
            let mut values = vec![
                0.0f32,
                -0.0,
                f32::INFINITY,
                f32::NEG_INFINITY,
                f32::MIN_POSITIVE,
            ];
            // Every finite code, the midpoints between neighbours, and the
            // floats on either side of each.
            let codes: Vec<f32> = (0u8..0x80)
                .map(|code| format.decode(code))
                .filter(|v| v.is_finite())
                .collect();
            for pair in codes.windows(2) {
                values.extend([pair[0], (pair[0] + pair[1]) / 2.0]);
            }
            values.push(format.max_finite() * 1.0625);
            let around: Vec<f32> = values
                .iter()
                .flat_map(|&v| {
                    [
                        v,
                        f32::from_bits(v.to_bits() + 1),
                        f32::from_bits(v.to_bits().max(1) - 1),
                    ]
                })
                .collect();
            values.extend(around);
            // Random floats over every binade the formats reach and beyond.
            values.extend((0..200_000).map(|_| {
                let exponent = rng.random_range(-30i32..20);
                rng.random_range(1.0f32..2.0) * 2f32.powi(exponent)
            }));
            values.extend((0..50_000).map(|_| rng.random_range(-1.0f32..1.0) / 0.37));
            for &v in &values {
                for x in [v, -v] {
                    assert_eq!(
                        format.encode(x),
                        encode_by_search(format, x),
                        "{format} {x:e}"
                    );
                }
            }
        }
    }

    /// A byte's value from the format's definition, in f64 arithmetic:
    /// sign, then `2^(e - bias) * (1 + m / 2^M)`, or `2^(1 - bias) * m / 2^M`
    /// for `e = 0`; `None` for NaN.
    fn by_definition(byte: u8, exponent_bits: u32, mantissa_bits: u32, ieee: bool) -> Option<f64> {
        let sign = if byte >> 7 == 1 { -1.0 } else { 1.0 };
        let e = i32::from((byte >> mantissa_bits) & ((1 << exponent_bits) - 1) as u8);
        let m = f64::from(byte & ((1 << mantissa_bits) - 1) as u8);
        let bias = (1 << (exponent_bits - 1)) - 1;
        let steps = f64::from(1u32 << mantissa_bits);
        let all_ones = (1 << exponent_bits) - 1;
        if ieee && e == all_ones {
            return (m == 0.0).then_some(sign * f64::INFINITY);
        }
        if !ieee && e == all_ones && m == steps - 1.0 {
            return None;
        }
        Some(match e {
            0 => sign * 2f64.powi(1 - bias) * (m / steps),
            _ => sign * 2f64.powi(e - bias) * (1.0 + m / steps),
        })
    }

    #[test]
    fn every_byte_decodes_as_its_definition_says() {
        for byte in 0..=255u8 {
            for (format, e, m, ieee) in
                [(KvFormat::E4m3, 4, 3, false), (KvFormat::E5m2, 5, 2, true)]
            {
                let got = format.decode(byte);
                match by_definition(byte, e, m, ieee) {
                    None => assert!(got.is_nan(), "{format:?} {byte:#04x}: {got}"),
                    Some(want) => {
                        assert_eq!(f64::from(got), want, "{format:?} {byte:#04x}");
                        assert_eq!(
                            got.is_sign_negative(),
                            byte >= 0x80,
                            "{format:?} {byte:#04x} sign"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn the_special_values_are_where_the_contract_says() {
        let e4 = KvFormat::E4m3;
        let e5 = KvFormat::E5m2;
        let nans = |f: KvFormat| {
            (0..=255u8)
                .filter(|&b| f.decode(b).is_nan())
                .collect::<Vec<_>>()
        };
        assert_eq!(nans(e4), [0x7F, 0xFF]);
        assert_eq!(nans(e5), [0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF]);
        assert!((0..=255u8).all(|b| !e4.decode(b).is_infinite()));
        assert_eq!(
            (e5.decode(0x7C), e5.decode(0xFC)),
            (f32::INFINITY, f32::NEG_INFINITY)
        );
        assert_eq!((e4.decode(0x7E), e5.decode(0x7B)), (448.0, 57344.0));
        let max = |f: KvFormat| {
            (0..=255u8)
                .map(|b| f.decode(b))
                .filter(|v| v.is_finite())
                .fold(0f32, f32::max)
        };
        assert_eq!((max(e4), max(e5)), (e4.max_finite(), e5.max_finite()));
        assert_eq!(
            (e4.decode(0x01), e5.decode(0x01)),
            (2f32.powi(-9), 2f32.powi(-16))
        );
        assert!(e4.decode(FP8_NAN).is_nan() && e5.decode(FP8_NAN).is_nan());
        assert_eq!((e4.code(), e5.code()), (0, 1));
    }

    #[test]
    fn encoding_rounds_to_the_nearest_code_ties_to_even_and_saturates() {
        for format in KvFormat::ALL {
            for byte in 0..=255u8 {
                let value = format.decode(byte);
                if value.is_finite() {
                    // -0 encodes as +0: both are zero.
                    let want = if byte == 0x80 { 0 } else { byte };
                    assert_eq!(format.encode(value), want, "{format:?} {byte:#04x}");
                }
            }
        }
        let e4 = KvFormat::E4m3;
        // 1 + 1/16 lies halfway between 1 (0x38, even) and 1.125 (0x39).
        assert_eq!(e4.encode(1.0625), 0x38);
        assert_eq!(e4.encode(1.1875), 0x3A); // between 1.125 (odd) and 1.25 (even)
        assert_eq!(e4.encode(1.07), 0x39);
        assert_eq!(e4.encode(-1.07), 0xB9);
        assert_eq!(e4.encode(1e6), 0x7E);
        assert_eq!(e4.encode(f32::NEG_INFINITY), 0xFE);
        assert_eq!(KvFormat::E5m2.encode(1e9), 0x7B);
        assert_eq!(e4.encode(f32::NAN), FP8_NAN);
        assert_eq!(e4.encode(2f32.powi(-11)), 0); // below half the smallest subnormal
    }
}
