//! The IR verifier (Cranelift's `verifier`): checks that a function is well formed, so
//! that a pass that breaks the IR is caught where it breaks it rather than as wrong
//! code or a C compiler's error later. The C-family pipeline runs it on what lowering
//! gives and after every pass in debug builds (every test), naming the pass.
//!
//! What it checks:
//!
//! - **scopes**: every variable read is bound by an enclosing loop or `let`, or appears
//!   in a parameter's shape (a symbolic size); no variable is bound again inside its
//!   own scope; every buffer read or written is a parameter or allocated around the
//!   access;
//! - **loops**: the loop variable, start and extent are scalar integers; a vectorized
//!   loop has a constant extent; no `blockIdx` loop is nested in a `threadIdx` loop;
//! - **accesses**: as many indices as the buffer has dimensions, each an integer (a
//!   store converts its value to the buffer's type, so any type may be stored);
//! - **types**: the operands of an arithmetic operator or a comparison have one type;
//!   a select's two values too; conditions (`if`, `select`) are booleans, of one lane
//!   for an `if`.

use crate::buffer::Buffer;
use crate::dtype::DataType;
use crate::expr::{Expr, ExprNode, Var};
use crate::stmt::{ForKind, PrimFunc, Stmt, StmtNode, ThreadAxis};
use crate::visit::{collect_vars, walk_expr, ExprVisitor};
use std::collections::HashSet;

/// A refusal of the verifier: the first rule a function breaks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    #[error("`{var}` is read outside the loop or let that binds it")]
    UndefinedVar { var: String },
    #[error("`{var}` is bound again inside its own scope")]
    Rebound { var: String },
    #[error("buffer `{buffer}` is accessed outside its allocation and is not a parameter")]
    UnknownBuffer { buffer: String },
    #[error("buffer `{buffer}` has {rank} dimensions, accessed with {indices} indices")]
    Rank {
        buffer: String,
        rank: usize,
        indices: usize,
    },
    #[error("index `{index}` of buffer `{buffer}` is {dtype}, not an integer")]
    IndexType {
        buffer: String,
        index: String,
        dtype: DataType,
    },
    #[error("loop `{var}`: its {what} is {dtype}, not a scalar integer")]
    LoopType {
        var: String,
        what: &'static str,
        dtype: DataType,
    },
    #[error("vectorized loop `{var}` has extent `{extent}`, not a constant")]
    VectorExtent { var: String, extent: String },
    #[error("loop `{var}` bound to {axis} inside a loop bound to {outer}")]
    BlockInThread {
        var: String,
        axis: ThreadAxis,
        outer: ThreadAxis,
    },
    #[error("`{expr}` has operands of {a} and {b}")]
    OperandTypes {
        expr: String,
        a: DataType,
        b: DataType,
    },
    #[error("condition `{cond}` is {dtype}, not a boolean{}", if *.scalar { " of one lane" } else { "" })]
    Condition {
        cond: String,
        dtype: DataType,
        scalar: bool,
    },
}

/// Checks `func`.
pub fn verify(func: &PrimFunc) -> Result<(), VerifyError> {
    verify_body(&func.params, &func.body)
}

/// Checks `body` as the body of a function over `params` (a kernel's parameters and
/// workspaces, or a function's).
pub fn verify_body(params: &[Buffer], body: &Stmt) -> Result<(), VerifyError> {
    let mut v = Verifier::default();
    for p in params {
        v.buffers.push(p.data().clone());
        for d in p.shape() {
            v.free.extend(collect_vars(d));
        }
    }
    v.stmt(body)
}

#[derive(Default)]
struct Verifier {
    /// Variables of the parameters' shapes: defined everywhere.
    free: HashSet<Var>,
    /// Variables bound by the enclosing loops and lets.
    bound: Vec<Var>,
    /// The data variables of the parameters and of the enclosing allocations.
    buffers: Vec<Var>,
    /// The thread axes of the enclosing bound loops.
    threads: Vec<ThreadAxis>,
}

impl Verifier {
    fn bind<T>(
        &mut self,
        var: &Var,
        inner: impl FnOnce(&mut Self) -> Result<T, VerifyError>,
    ) -> Result<T, VerifyError> {
        if self.bound.contains(var) || self.free.contains(var) {
            return Err(VerifyError::Rebound {
                var: var.name().to_string(),
            });
        }
        self.bound.push(var.clone());
        let r = inner(self);
        self.bound.pop();
        r
    }

    fn stmt(&mut self, s: &Stmt) -> Result<(), VerifyError> {
        match s.node() {
            StmtNode::For {
                var,
                min,
                extent,
                kind,
                body,
            } => self.for_loop(var, min, extent, *kind, body),
            StmtNode::Store {
                buffer,
                indices,
                value,
            } => {
                self.access(buffer, indices)?;
                indices.iter().try_for_each(|i| self.expr(i))?;
                self.expr(value)
            }
            StmtNode::Allocate { buffer, body } => {
                for d in buffer.shape() {
                    self.expr(d)?;
                }
                self.buffers.push(buffer.data().clone());
                let r = self.stmt(body);
                self.buffers.pop();
                r
            }
            StmtNode::IfThenElse {
                cond,
                then_case,
                else_case,
            } => {
                self.condition(cond, true)?;
                self.stmt(then_case)?;
                else_case.as_ref().map_or(Ok(()), |e| self.stmt(e))
            }
            StmtNode::Seq(v) => v.iter().try_for_each(|s| self.stmt(s)),
            StmtNode::Attr { value, body, .. } => {
                self.expr(value)?;
                self.stmt(body)
            }
            StmtNode::Let { var, value, body } => {
                self.expr(value)?;
                self.bind(var, |v| v.stmt(body))
            }
            StmtNode::Evaluate(e) => self.expr(e),
            StmtNode::StorageSync(_) => Ok(()),
        }
    }

    fn for_loop(
        &mut self,
        var: &Var,
        min: &Expr,
        extent: &Expr,
        kind: ForKind,
        body: &Stmt,
    ) -> Result<(), VerifyError> {
        for (what, dtype) in [
            ("variable", var.dtype()),
            ("start", min.dtype()),
            ("extent", extent.dtype()),
        ] {
            if !dtype.is_integer() || !dtype.is_scalar() {
                return Err(VerifyError::LoopType {
                    var: var.name().to_string(),
                    what,
                    dtype,
                });
            }
        }
        self.expr(min)?;
        self.expr(extent)?;
        if kind == ForKind::Vectorized && extent.as_int().is_none() {
            return Err(VerifyError::VectorExtent {
                var: var.name().to_string(),
                extent: extent.to_string(),
            });
        }
        let axis = match kind {
            ForKind::ThreadBinding(axis) => Some(axis),
            _ => None,
        };
        if let Some(axis) = axis.filter(|a| a.rank() == 0) {
            if let Some(outer) = self.threads.iter().find(|t| t.rank() > 0) {
                return Err(VerifyError::BlockInThread {
                    var: var.name().to_string(),
                    axis,
                    outer: *outer,
                });
            }
        }
        self.threads.extend(axis);
        let r = self.bind(var, |v| v.stmt(body));
        if axis.is_some() {
            self.threads.pop();
        }
        r
    }

    /// The buffer of an access is in scope and its indices fit it (not their operands:
    /// the walk visits those).
    fn access(&self, buffer: &Buffer, indices: &[Expr]) -> Result<(), VerifyError> {
        if !self.buffers.contains(buffer.data()) {
            return Err(VerifyError::UnknownBuffer {
                buffer: buffer.name().to_string(),
            });
        }
        if indices.len() != buffer.ndim() {
            return Err(VerifyError::Rank {
                buffer: buffer.name().to_string(),
                rank: buffer.ndim(),
                indices: indices.len(),
            });
        }
        for i in indices {
            if !i.dtype().is_integer() {
                return Err(VerifyError::IndexType {
                    buffer: buffer.name().to_string(),
                    index: i.to_string(),
                    dtype: i.dtype(),
                });
            }
        }
        Ok(())
    }

    fn condition(&self, cond: &Expr, scalar: bool) -> Result<(), VerifyError> {
        self.expr(cond)?;
        Self::boolean(cond, scalar)
    }

    /// `cond` is a boolean (of one lane when `scalar`).
    fn boolean(cond: &Expr, scalar: bool) -> Result<(), VerifyError> {
        let dtype = cond.dtype();
        if !dtype.is_bool() || scalar && !dtype.is_scalar() {
            return Err(VerifyError::Condition {
                cond: cond.to_string(),
                dtype,
                scalar,
            });
        }
        Ok(())
    }

    fn same_type(e: &Expr, a: &Expr, b: &Expr) -> Result<(), VerifyError> {
        if a.dtype() != b.dtype() {
            return Err(VerifyError::OperandTypes {
                expr: e.to_string(),
                a: a.dtype(),
                b: b.dtype(),
            });
        }
        Ok(())
    }

    /// The checks of expression node `e` itself (its operands are visited apart).
    fn node(&self, e: &Expr) -> Result<(), VerifyError> {
        match e.node() {
            ExprNode::Var(v) if !self.bound.contains(v) && !self.free.contains(v) => {
                Err(VerifyError::UndefinedVar {
                    var: v.name().to_string(),
                })
            }
            ExprNode::Load { buffer, indices } => self.access(buffer, indices),
            ExprNode::Binary { a, b, .. } | ExprNode::Cmp { a, b, .. } => Self::same_type(e, a, b),
            ExprNode::Select {
                cond,
                then_value,
                else_value,
            } => {
                Self::boolean(cond, false)?;
                Self::same_type(e, then_value, else_value)
            }
            _ => Ok(()),
        }
    }

    /// Checks `e` and every expression in it.
    fn expr(&self, e: &Expr) -> Result<(), VerifyError> {
        let mut walk = ExprWalk {
            verifier: self,
            error: None,
        };
        walk.visit_expr(e);
        walk.error.map_or(Ok(()), Err)
    }
}

/// [`Verifier::node`] over every expression of a tree (the IR's visitor): the first
/// refusal is kept and nothing below is visited after it.
struct ExprWalk<'a> {
    verifier: &'a Verifier,
    error: Option<VerifyError>,
}

impl ExprVisitor for ExprWalk<'_> {
    fn visit_expr(&mut self, e: &Expr) {
        if self.error.is_some() {
            return;
        }
        match self.verifier.node(e) {
            Ok(()) => walk_expr(self, e),
            Err(err) => self.error = Some(err),
        }
    }
}
