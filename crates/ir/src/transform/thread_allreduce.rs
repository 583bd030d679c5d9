//! The allreduce across the threads of a block (TVM's `LowerThreadAllreduce`, its
//! shared-memory path): `extent` partial results in the shared buffer `red` (thread `t`
//! wrote `red[t]`) are combined into `red[0]` by a tree — first the part beyond the
//! largest power of two folded in, then halving strides — each level one thread loop
//! followed by a barrier. Serial thread loops (the interpreter) compute the same, since
//! a level only reads what the previous one wrote.
//!
//! The tree is wrapped in an `Attr` with key `thread_allreduce.<op>` and the extent as
//! value, so that a dialect can replace it ([`AllreduceInfo::of`]): CUDA's warp
//! shuffles, for one.

use crate::buffer::{Buffer, StorageScope};
use crate::expr::{BinOp, Expr, Var};
use crate::stmt::{ForKind, Stmt, StmtNode, ThreadAxis};

/// The key prefix of the annotation around an allreduce tree.
pub const ALLREDUCE_ATTR: &str = "thread_allreduce";

/// An allreduce as a dialect sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct AllreduceInfo {
    /// The shared buffer of partial results; the result ends in element 0.
    pub buffer: Buffer,
    /// How two partial results combine: `Add`, `Mul`, `Max` or `Min`.
    pub op: BinOp,
    /// The thread axis the partial results are spread over.
    pub axis: ThreadAxis,
    /// The number of partial results (threads).
    pub extent: i64,
}

fn op_name(op: BinOp) -> &'static str {
    match op {
        BinOp::Mul => "mul",
        BinOp::Max => "max",
        BinOp::Min => "min",
        _ => "add",
    }
}

impl AllreduceInfo {
    /// The allreduce an `Attr` statement announces, if it is one.
    pub fn of(s: &Stmt) -> Option<AllreduceInfo> {
        let StmtNode::Attr { key, value, body } = s.node() else {
            return None;
        };
        let op = match key.strip_prefix(ALLREDUCE_ATTR)?.strip_prefix('.')? {
            "add" => BinOp::Add,
            "mul" => BinOp::Mul,
            "max" => BinOp::Max,
            "min" => BinOp::Min,
            _ => return None,
        };
        let extent = value.as_int()?;
        let (buffer, axis) = first_store_in_thread_loop(body)?;
        Some(AllreduceInfo {
            buffer,
            op,
            axis,
            extent,
        })
    }
}

fn first_store_in_thread_loop(s: &Stmt) -> Option<(Buffer, ThreadAxis)> {
    match s.node() {
        StmtNode::Seq(v) => v.iter().find_map(first_store_in_thread_loop),
        StmtNode::For {
            kind: ForKind::ThreadBinding(axis),
            body,
            ..
        } => {
            let mut b = body;
            loop {
                match b.node() {
                    StmtNode::IfThenElse { then_case, .. } => b = then_case,
                    StmtNode::Store { buffer, .. } => return Some((buffer.clone(), *axis)),
                    _ => return None,
                }
            }
        }
        _ => None,
    }
}

/// The tree that combines `red[0..extent]` into `red[0]` with `op`, its threads bound to
/// `axis`; `red` must be `shared`.
pub fn thread_allreduce(red: &Buffer, op: BinOp, axis: ThreadAxis, extent: i64) -> Stmt {
    debug_assert_eq!(red.scope(), StorageScope::Shared);
    let mut levels = Vec::new();
    let combine = |a: Expr, b: Expr| match op {
        BinOp::Max => Expr::max(a, b),
        BinOp::Min => Expr::min(a, b),
        _ => Expr::binary(op, a, b),
    };
    let level = |stride: i64, active: i64| {
        let t = Var::int(format!("{}.t{stride}", red.name()));
        let te = t.to_expr();
        let upd = Stmt::store(
            red,
            vec![te.clone()],
            combine(
                Expr::load(red, vec![te.clone()]),
                Expr::load(red, vec![te.clone() + stride]),
            ),
        );
        Stmt::seq(vec![
            Stmt::for_loop(
                t,
                Expr::int(0),
                Expr::int(extent),
                ForKind::ThreadBinding(axis),
                Stmt::if_then(te.lt(active), upd),
            ),
            Stmt::storage_sync(StorageScope::Shared),
        ])
    };
    let mut p = 1i64;
    while p * 2 <= extent {
        p *= 2;
    }
    if extent > p {
        levels.push(level(p, extent - p));
    }
    let mut s = p / 2;
    while s >= 1 {
        levels.push(level(s, s));
        s /= 2;
    }
    Stmt::attr(
        format!("{ALLREDUCE_ATTR}.{}", op_name(op)),
        Expr::int(extent),
        Stmt::seq(levels),
    )
}
