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
    pub values: Vec<f64>,
    /// What it decides, for messages: "the axes of `node` (ReduceSum)".
    pub user: String,
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
}
