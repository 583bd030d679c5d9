//! What a pass on the way to code generation refuses, by pass and function.

/// A function a pass cannot transform, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransformError {
    #[error("{pass}: cannot lower `{func}`: {reason}")]
    Unsupported {
        pass: &'static str,
        func: String,
        reason: String,
    },
}
