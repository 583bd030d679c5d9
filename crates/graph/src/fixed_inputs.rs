//! Inputs a module is built for one value of. ONNX lets a network input decide what
//! other frameworks take as attributes: a reduction's axes, Reshape's target shape,
//! Resize's sizes, Pad's pads, Slice's bounds, a diagonal, a depth. Where such a value
//! decides a shape or a kernel's structure, a module compiled for fixed shapes cannot
//! take it at run time. When the caller gives the value at build time (`tessera run
//! --input NAME=FILE`, or [`crate::onnx::ImportOptions::input_values`]), the import
//! builds for it and records a [`FixedInput`]; the built module then refuses any other
//! value for that input ([`check`], once per input set), naming what it decides — as a
//! module built for one shape refuses another. Taking such values at run time is issue
//! 61's (shapes known only at run time).

use crate::error::GraphError;
use serde::{Deserialize, Serialize};
use tessera_runtime::NDArray;

/// A network input whose value the module was built for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FixedInput {
    /// The network input.
    pub input: String,
    /// Its value's shape and elements (integers exactly up to 2^53; larger ones, such as
    /// Slice's "to the end" 2^63 − 1, compare after the same conversion).
    pub shape: Vec<usize>,
    /// (A NaN or an infinity, which JSON cannot hold as a number, is kept as the string
    /// `"NaN"`, `"inf"` or `"-inf"`: Resize's scales and OneHot's values are floats.)
    #[serde(with = "json_floats")]
    pub values: Vec<f64>,
    /// What it decides, for messages: "the axes of `node` (ReduceSum)".
    pub user: String,
}

/// `f64`s in JSON, whose numbers are finite: a NaN or an infinity as a string (serde_json
/// writes them as `null`, which reads back as no number at all).
mod json_floats {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    #[serde(untagged)]
    enum Float {
        Number(f64),
        Named(String),
    }

    pub fn serialize<S: Serializer>(values: &[f64], s: S) -> Result<S::Ok, S::Error> {
        let named = |v: f64| match v {
            v if v.is_nan() => Float::Named("NaN".into()),
            v if v > 0.0 => Float::Named("inf".into()),
            _ => Float::Named("-inf".into()),
        };
        let out: Vec<Float> = values
            .iter()
            .map(|&v| {
                if v.is_finite() {
                    Float::Number(v)
                } else {
                    named(v)
                }
            })
            .collect();
        out.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
        Vec::<Float>::deserialize(d)?
            .into_iter()
            .map(|f| match f {
                Float::Number(v) => Ok(v),
                Float::Named(n) => match n.as_str() {
                    "NaN" => Ok(f64::NAN),
                    "inf" => Ok(f64::INFINITY),
                    "-inf" => Ok(f64::NEG_INFINITY),
                    other => Err(serde::de::Error::custom(format!(
                        "`{other}` is not a number (nor NaN, inf, -inf)"
                    ))),
                },
            })
            .collect()
    }
}

impl FixedInput {
    /// The record for `value` of `input`, used as `user` says.
    pub fn new(input: &str, value: &NDArray, user: String) -> FixedInput {
        FixedInput {
            input: input.to_string(),
            shape: value.shape().to_vec(),
            values: value.to_f64_vec(),
            user,
        }
    }

    /// Whether `value` is the one the module was built for (NaN equal to NaN).
    fn holds(&self, value: &NDArray) -> bool {
        let got = value.to_f64_vec();
        value.shape() == self.shape.as_slice()
            && got.len() == self.values.len()
            && got
                .iter()
                .zip(&self.values)
                .all(|(a, b)| a == b || (a.is_nan() && b.is_nan()))
    }

    /// The value as the messages print it.
    fn shown(values: &[f64]) -> String {
        const SHOWN: usize = 16;
        let mut parts: Vec<String> = values.iter().take(SHOWN).map(|v| v.to_string()).collect();
        if values.len() > SHOWN {
            parts.push(format!("… ({} in all)", values.len()));
        }
        format!("[{}]", parts.join(", "))
    }
}

/// Checks `value`, given for input `name`, against the values the module was built for.
pub fn check(fixed: &[FixedInput], name: &str, value: &NDArray) -> Result<(), GraphError> {
    for f in fixed.iter().filter(|f| f.input == name) {
        if !f.holds(value) {
            return Err(GraphError::Input {
                name: name.to_string(),
                reason: format!(
                    "is {}, but the module was built for {} (it decides {}, which a built \
                     module cannot change): build it again with this value",
                    FixedInput::shown(&value.to_f64_vec()),
                    FixedInput::shown(&f.values),
                    f.user
                ),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_value_built_for_passes() {
        let axes = NDArray::from_slice::<i64>(&[2], &[0, 2]).unwrap();
        let f = vec![FixedInput::new(
            "axes",
            &axes,
            "the axes of `r` (ReduceSum)".into(),
        )];
        assert!(check(&f, "axes", &axes).is_ok());
        assert!(check(&f, "x", &NDArray::from_slice::<i64>(&[1], &[7]).unwrap()).is_ok());
        let other = NDArray::from_slice::<i64>(&[2], &[0, 1]).unwrap();
        let e = check(&f, "axes", &other).unwrap_err().to_string();
        assert!(e.contains("[0, 1]") && e.contains("[0, 2]"), "{e}");
        assert!(e.contains("the axes of `r` (ReduceSum)"), "{e}");
        let shorter = NDArray::from_slice::<i64>(&[1], &[0]).unwrap();
        assert!(check(&f, "axes", &shorter).is_err());
    }

    /// A fixed float value with a NaN or an infinity (OneHot's values, Resize's scales)
    /// survives a module file's JSON header, and is still the only value that passes.
    #[test]
    fn non_finite_values_survive_json() {
        let v = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.5];
        let value = NDArray::from_slice_f32(&[4], &v).unwrap();
        let f = FixedInput::new("values", &value, "the values of `o` (OneHot)".into());
        let json = serde_json::to_string(&f).unwrap();
        assert!(json.contains(r#"["NaN","inf","-inf",0.5]"#), "{json}");
        let back: FixedInput = serde_json::from_str(&json).unwrap();
        assert!(back.values[0].is_nan());
        assert_eq!(back.values[1..], [f64::INFINITY, f64::NEG_INFINITY, 0.5]);
        assert!(check(&[back], "values", &value).is_ok());
        let bad = json.replace("\"inf\"", "\"infinity\"");
        let e = serde_json::from_str::<FixedInput>(&bad)
            .unwrap_err()
            .to_string();
        assert!(e.contains("`infinity` is not a number"), "{e}");
    }
}
