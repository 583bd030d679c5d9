//! Statements.

use crate::buffer::{Buffer, StorageScope};
use crate::expr::{Expr, Var};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;

/// A GPU thread axis a loop can be bound to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ThreadAxis {
    BlockIdxX,
    BlockIdxY,
    BlockIdxZ,
    ThreadIdxX,
    ThreadIdxY,
    ThreadIdxZ,
    /// A virtual thread: a loop unrolled and interleaved by the code generator.
    VThread,
}

impl ThreadAxis {
    pub const ALL: [ThreadAxis; 7] = [
        ThreadAxis::BlockIdxX,
        ThreadAxis::BlockIdxY,
        ThreadAxis::BlockIdxZ,
        ThreadAxis::ThreadIdxX,
        ThreadAxis::ThreadIdxY,
        ThreadAxis::ThreadIdxZ,
        ThreadAxis::VThread,
    ];
    pub fn name(self) -> &'static str {
        match self {
            ThreadAxis::BlockIdxX => "blockIdx.x",
            ThreadAxis::BlockIdxY => "blockIdx.y",
            ThreadAxis::BlockIdxZ => "blockIdx.z",
            ThreadAxis::ThreadIdxX => "threadIdx.x",
            ThreadAxis::ThreadIdxY => "threadIdx.y",
            ThreadAxis::ThreadIdxZ => "threadIdx.z",
            ThreadAxis::VThread => "vthread",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.name() == s)
    }
    /// 0 for blocks, 1 for threads and virtual threads.
    pub fn rank(self) -> u8 {
        match self {
            ThreadAxis::BlockIdxX | ThreadAxis::BlockIdxY | ThreadAxis::BlockIdxZ => 0,
            _ => 1,
        }
    }
}

impl fmt::Display for ThreadAxis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How a loop runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ForKind {
    Serial,
    Parallel,
    Vectorized,
    Unrolled,
    /// Bound to a GPU thread axis: one iteration per thread.
    ThreadBinding(ThreadAxis),
}

/// A statement.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stmt(Arc<StmtNode>);

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum StmtNode {
    /// `for (var = min; var < min + extent; ++var) body`.
    For {
        var: Var,
        min: Expr,
        extent: Expr,
        kind: ForKind,
        body: Stmt,
    },
    /// `buffer[indices] = value` (a vector store when an index is a ramp).
    Store {
        buffer: Buffer,
        indices: Vec<Expr>,
        value: Expr,
    },
    /// Allocates `buffer` (its shape, type and scope) for the extent of `body`.
    Allocate {
        buffer: Buffer,
        body: Stmt,
    },
    IfThenElse {
        cond: Expr,
        then_case: Stmt,
        else_case: Option<Stmt>,
    },
    Seq(Vec<Stmt>),
    /// An annotation of `body`, e.g. the pragma `auto_unroll_max_step` with a value.
    Attr {
        key: String,
        value: Expr,
        body: Stmt,
    },
    /// Binds `var` to `value` within `body`.
    Let {
        var: Var,
        value: Expr,
        body: Stmt,
    },
    /// Evaluates an expression for its effect.
    Evaluate(Expr),
    /// A barrier that makes writes to memory of `scope` visible to all threads sharing it.
    StorageSync(StorageScope),
}

impl Stmt {
    pub fn new(node: StmtNode) -> Self {
        Stmt(Arc::new(node))
    }
    pub fn node(&self) -> &StmtNode {
        &self.0
    }
    pub fn same_as(&self, other: &Stmt) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
    pub fn for_loop(var: Var, min: Expr, extent: Expr, kind: ForKind, body: Stmt) -> Stmt {
        Stmt::new(StmtNode::For {
            var,
            min,
            extent,
            kind,
            body,
        })
    }
    pub fn store(buffer: &Buffer, indices: Vec<Expr>, value: Expr) -> Stmt {
        Stmt::new(StmtNode::Store {
            buffer: buffer.clone(),
            indices,
            value,
        })
    }
    pub fn allocate(buffer: Buffer, body: Stmt) -> Stmt {
        Stmt::new(StmtNode::Allocate { buffer, body })
    }
    pub fn if_then(cond: Expr, then_case: Stmt) -> Stmt {
        Stmt::new(StmtNode::IfThenElse {
            cond,
            then_case,
            else_case: None,
        })
    }
    pub fn if_then_else(cond: Expr, then_case: Stmt, else_case: Stmt) -> Stmt {
        Stmt::new(StmtNode::IfThenElse {
            cond,
            then_case,
            else_case: Some(else_case),
        })
    }
    /// A sequence; nested sequences are flattened and a single statement is returned as is.
    pub fn seq(stmts: Vec<Stmt>) -> Stmt {
        let mut flat = Vec::with_capacity(stmts.len());
        for s in stmts {
            match s.node() {
                StmtNode::Seq(inner) => flat.extend(inner.iter().cloned()),
                _ => flat.push(s),
            }
        }
        if flat.len() == 1 {
            flat.pop().unwrap()
        } else {
            Stmt::new(StmtNode::Seq(flat))
        }
    }
    pub fn attr(key: impl Into<String>, value: Expr, body: Stmt) -> Stmt {
        Stmt::new(StmtNode::Attr {
            key: key.into(),
            value,
            body,
        })
    }
    pub fn let_stmt(var: Var, value: Expr, body: Stmt) -> Stmt {
        Stmt::new(StmtNode::Let { var, value, body })
    }
    pub fn evaluate(e: Expr) -> Stmt {
        Stmt::new(StmtNode::Evaluate(e))
    }
    /// The empty statement.
    pub fn no_op() -> Stmt {
        Stmt::new(StmtNode::Seq(Vec::new()))
    }
    pub fn is_no_op(&self) -> bool {
        matches!(self.node(), StmtNode::Seq(v) if v.is_empty())
    }
    pub fn storage_sync(scope: StorageScope) -> Stmt {
        Stmt::new(StmtNode::StorageSync(scope))
    }
}

/// A function over buffers: the unit that a backend compiles and the interpreter runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PrimFunc {
    pub name: String,
    /// Parameters, in calling order.
    pub params: Vec<Buffer>,
    pub body: Stmt,
}

impl PrimFunc {
    pub fn new(name: impl Into<String>, params: Vec<Buffer>, body: Stmt) -> Self {
        PrimFunc {
            name: name.into(),
            params,
            body,
        }
    }
}
