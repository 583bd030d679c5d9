//! `tessera-ir`: the loop-level program IR of Tessera.
//!
//! - [`dtype`]: scalar and vector data types.
//! - [`expr`]: expressions (immutable, shared) and their builders.
//! - [`buffer`]: buffers with a storage scope.
//! - [`stmt`]: statements and [`PrimFunc`].
//! - [`visit`]: the visitor and mutator every pass is written with.
//! - [`printer`]: the stable text form, and [`parser`] that reads it back.
//! - [`arith`]: bounds, modular sets and the simplifier.
//! - [`interp`]: the reference interpreter, the oracle of correctness tests.
//! - [`transform`]: passes on the way to code generation (vectorization).
//! - [`verify`]: the verifier of well-formed functions, run around every pass.

pub mod arith;
pub mod buffer;
pub mod dtype;
pub mod expr;
pub mod interp;
pub mod parser;
pub mod printer;
pub mod stmt;
pub mod transform;
pub mod verify;
pub mod visit;

pub use buffer::{Buffer, StorageScope};
pub use dtype::{DataType, TypeCode};
pub use expr::{BinOp, CmpOp, Expr, ExprNode, IntoExpr, Intrinsic, Range, Var};
pub use stmt::{ForKind, PrimFunc, Stmt, StmtNode, ThreadAxis};

/// The version of the serialized form of IR values; bumped on any incompatible change.
pub const SCHEMA_VERSION: u32 = 1;
