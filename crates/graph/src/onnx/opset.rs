//! Operator versions. An ONNX model imports one opset of the standard domain, but each
//! operator's definition changes at its own versions (its schemas' `since_version`): at
//! opset N, the definition in effect is the operator's newest version ≤ N. Most opset
//! bumps change only a few operators (opsets 22–28 added element types to most of them
//! and changed no semantics of the ones we take), so a model of a new opset imports
//! wherever the definitions it uses are ones a converter implements, and only an
//! operator whose newer definition no converter implements is refused, by name and
//! version.
//!
//! [`schema_table`](super::schema_table) is generated from the onnx package
//! (tests/onnx/gen_schema_table.py); each converter in [`super::CONVERTERS`] names the
//! newest definition it implements.

use super::schema_table::{NEWEST_OPSET, SCHEMAS};

/// Why an operator cannot be imported at a model's opset.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VersionError {
    /// The opset is outside 1..=[`NEWEST_OPSET`].
    #[error("opset {0} is not supported (1 to {NEWEST_OPSET} are)")]
    Opset(i64),
    /// The operator is not in the standard domain at all.
    #[error("`{0}` is not an operator of the standard ONNX domain")]
    Unknown(String),
    /// The operator did not exist yet at the model's opset.
    #[error("`{op}` is not defined at opset {opset} (it was added in opset {first})")]
    NotYetDefined { op: String, opset: i64, first: i64 },
    /// The definition in effect is newer than the one the converter implements.
    #[error(
        "`{op}` version {version} (in effect at opset {opset}) is not supported: the importer \
         implements its definitions up to version {implemented}"
    )]
    Newer {
        op: String,
        version: i64,
        opset: i64,
        implemented: i64,
    },
}

/// The versions at which `op`'s definition changed, ascending.
pub fn versions(op: &str) -> Option<&'static [i64]> {
    SCHEMAS
        .binary_search_by(|(name, _)| (*name).cmp(op))
        .ok()
        .map(|i| SCHEMAS[i].1)
}

/// Checks that `opset` is one the table knows.
pub fn check_opset(opset: i64) -> Result<(), VersionError> {
    if (1..=NEWEST_OPSET).contains(&opset) {
        Ok(())
    } else {
        Err(VersionError::Opset(opset))
    }
}

/// The version of `op`'s definition in effect at `opset`.
pub fn in_effect(op: &str, opset: i64) -> Result<i64, VersionError> {
    let vs = versions(op).ok_or_else(|| VersionError::Unknown(op.to_string()))?;
    vs.iter()
        .rev()
        .copied()
        .find(|&v| v <= opset)
        .ok_or_else(|| VersionError::NotYetDefined {
            op: op.to_string(),
            opset,
            first: vs[0],
        })
}

/// The version in effect of `op` at `opset`, if a converter implementing definitions up
/// to `implemented` takes it.
pub fn check(op: &str, opset: i64, implemented: i64) -> Result<i64, VersionError> {
    let version = in_effect(op, opset)?;
    if version > implemented {
        return Err(VersionError::Newer {
            op: op.to_string(),
            version,
            opset,
            implemented,
        });
    }
    Ok(version)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_sorted_for_lookup() {
        assert!(SCHEMAS.windows(2).all(|w| w[0].0 < w[1].0));
        assert!(SCHEMAS
            .iter()
            .all(|(_, v)| v.windows(2).all(|w| w[0] < w[1])));
    }

    #[test]
    fn the_definition_in_effect_is_the_newest_not_after_the_opset() {
        // Softmax changed at 1, 11 and 13
        assert_eq!(in_effect("Softmax", 12), Ok(11));
        assert_eq!(in_effect("Softmax", 13), Ok(13));
        assert_eq!(in_effect("Softmax", 28), Ok(13));
        assert!(matches!(
            in_effect("LayerNormalization", 16),
            Err(VersionError::NotYetDefined { first: 17, .. })
        ));
        assert!(matches!(
            in_effect("FancyOp", 16),
            Err(VersionError::Unknown(_))
        ));
    }

    #[test]
    fn a_newer_definition_than_implemented_is_refused_by_name_and_version() {
        let e = check("Softmax", 13, 11).unwrap_err();
        assert_eq!(
            e.to_string(),
            "`Softmax` version 13 (in effect at opset 13) is not supported: the importer \
             implements its definitions up to version 11"
        );
        assert_eq!(check("Softmax", 12, 11), Ok(11));
        assert!(check_opset(0).is_err());
        assert!(check_opset(NEWEST_OPSET + 1).is_err());
        assert!(check_opset(NEWEST_OPSET).is_ok());
    }
}
