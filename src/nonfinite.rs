//! Serde adapters for floats that may be NaN or infinite.
//!
//! Grading results travel as JSON, and JSON has no number for NaN or
//! infinity: serde_json writes `null` for them and then refuses to read that
//! `null` back as a float. A kernel that writes NaN is exactly what the
//! grader must report, so these adapters write non-finite values as the
//! strings `"NaN"`, `"inf"` and `"-inf"` and accept numbers or those strings.
//! (A NaN's payload is not kept; the comparison counts poisoned elements itself.)

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A float type that converts to and from `f64` without loss.
pub trait Float: Copy {
    fn to_f64(self) -> f64;
    fn from_f64(value: f64) -> Self;
}

impl Float for f64 {
    fn to_f64(self) -> f64 {
        self
    }
    fn from_f64(value: f64) -> Self {
        value
    }
}

impl Float for f32 {
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    fn from_f64(value: f64) -> Self {
        // Only values that came from an f32 are read back, so this is exact.
        value as f32
    }
}

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum Wire {
    Number(f64),
    Text(String),
}

impl Wire {
    fn from_float(value: f64) -> Self {
        if value.is_finite() {
            Wire::Number(value)
        } else if value.is_nan() {
            Wire::Text("NaN".into())
        } else if value > 0.0 {
            Wire::Text("inf".into())
        } else {
            Wire::Text("-inf".into())
        }
    }

    fn into_float<E: serde::de::Error>(self) -> Result<f64, E> {
        match self {
            Wire::Number(value) => Ok(value),
            Wire::Text(text) => match text.as_str() {
                "NaN" => Ok(f64::NAN),
                "inf" => Ok(f64::INFINITY),
                "-inf" => Ok(f64::NEG_INFINITY),
                other => Err(E::custom(format!(
                    "expected a number, \"NaN\", \"inf\" or \"-inf\", found \"{other}\""
                ))),
            },
        }
    }
}

pub fn serialize<F: Float, S: Serializer>(value: &F, serializer: S) -> Result<S::Ok, S::Error> {
    Wire::from_float(value.to_f64()).serialize(serializer)
}

pub fn deserialize<'de, F: Float, D: Deserializer<'de>>(deserializer: D) -> Result<F, D::Error> {
    Wire::deserialize(deserializer)?
        .into_float()
        .map(F::from_f64)
}

/// The same encoding for every element of a `Vec`.
pub mod seq {
    use super::{Float, Wire};
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<F: Float, S: Serializer>(
        values: &[F],
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(values.iter().map(|v| Wire::from_float(v.to_f64())))
    }

    pub fn deserialize<'de, F: Float, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Vec<F>, D::Error> {
        Vec::<Wire>::deserialize(deserializer)?
            .into_iter()
            .map(|wire| wire.into_float().map(F::from_f64))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    #[derive(Debug, Serialize, Deserialize)]
    struct Sample {
        #[serde(with = "super")]
        single: f64,
        #[serde(with = "super::seq")]
        many: Vec<f32>,
    }

    #[test]
    fn non_finite_values_survive_json() {
        let sample = Sample {
            single: f64::NEG_INFINITY,
            many: vec![1.5, f32::NAN, f32::INFINITY, -0.0, f32::from_bits(1)],
        };
        let json = serde_json::to_string(&sample).unwrap();
        assert_eq!(
            json,
            r#"{"single":"-inf","many":[1.5,"NaN","inf",-0.0,1.401298464324817e-45]}"#
        );
        let back: Sample = serde_json::from_str(&json).unwrap();
        assert_eq!(back.single, f64::NEG_INFINITY);
        assert_eq!(back.many[0], 1.5);
        assert!(back.many[1].is_nan());
        assert_eq!(back.many[2], f32::INFINITY);
        assert_eq!(back.many[3].to_bits(), (-0.0f32).to_bits());
        assert_eq!(back.many[4].to_bits(), 1);
    }

    #[test]
    fn unknown_strings_are_refused() {
        let err = serde_json::from_str::<Sample>(r#"{"single":"huge","many":[]}"#).unwrap_err();
        assert!(err.to_string().contains("\"huge\""), "{err}");
    }
}
