//! Where the valid indices of an axis lie when they do not come first: a batch and a
//! length merged into one axis (a product's rows `b · s`, stored at the largest sizes
//! as `B` blocks of `S` rows) holds its valid indices in the first `s` of each of the
//! first `b` blocks. The extents at the points say only that the axis is a product;
//! where its indices lie comes from what it reads: an element that reads a padding
//! element of its inputs (unconditionally) is padding itself, never read as valid, so a
//! stage need not compute it.
//!
//! Each load in a body (not under a select) of a tensor whose dimension is valid below
//! `n` (a placeholder's dimension that is a sum of sizes, an axis of a tensor computed
//! before with a runtime extent) at an index that is the axis `v` alone — `v`, `v / R`
//! or `v % R` once simplified over the body's other axes — tells one condition:
//! `v < n`, `v < n · R` (the blocks past `n`), or `v % R < n` (the first `n` of each
//! block of `R`). Their conjunction gives the axis's runtime extent (the valid blocks)
//! and its [`Block`], which lowering uses to run whole tiles of valid indices only.

use super::Symbols;
use crate::tensor::{Block, ComputeBody, IterVar};
use std::collections::HashMap;
use tessera_ir::arith::{Analyzer, IntBound};
use tessera_ir::{BinOp, Buffer, Expr, ExprNode, Intrinsic};

/// What is valid along one dimension of a tensor: the indices below `below` (where
/// given), and in blocks where `block` says so.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DimValid {
    pub below: Option<Expr>,
    pub block: Option<Block>,
}

impl DimValid {
    /// Whether it tells anything.
    pub fn is_known(&self) -> bool {
        self.below.is_some() || self.block.is_some()
    }
}

/// What is valid along each dimension of `t`, as its axes' runtime extents and blocks
/// say (a placeholder's: nothing).
pub fn valid_dims(t: &crate::Tensor) -> Vec<DimValid> {
    t.axis()
        .iter()
        .map(|a| DimValid {
            below: a.bound().cloned(),
            block: a.block().cloned(),
        })
        .collect()
}

/// Per tensor of a DAG (by its buffer): each data-parallel dimension's valid indices.
pub(super) type Validity = HashMap<Buffer, Vec<DimValid>>;

/// One condition a valid index of an axis meets.
#[derive(Clone, Debug)]
enum Atom {
    /// `v < n · div`.
    Below { div: i64, n: Expr },
    /// `v % radix < n`.
    InBlock { radix: i64, n: Expr },
}

/// A placeholder's dimensions at the builds' `points` (`extents[d][j]`: dimension `d`
/// at point `j`): a dimension that is a sum of sizes is valid below it.
pub(super) fn placeholder_dims(
    symbols: &Symbols,
    points: &[Vec<i64>],
    extents: &[Vec<i64>],
) -> Vec<DimValid> {
    extents
        .iter()
        .map(|e| {
            let below = match super::Affine::fit(points, e) {
                Some(f) if f.is_sum_of_sizes() => Some(symbols.runtime(&f)),
                _ => None,
            };
            DimValid { below, block: None }
        })
        .collect()
}

/// The runtime extent and blocks of data-parallel axis `v` (static extent `extent`) of
/// a body over `axes` (every axis of it, data-parallel and reduce), from what it reads
/// (see the module header); `(None, None)` where its loads tell nothing.
pub(super) fn blocked_axis(
    v: &IterVar,
    extent: i64,
    axes: &[IterVar],
    body: &ComputeBody,
    valid: &Validity,
) -> (Option<Expr>, Option<Block>) {
    let mut an = Analyzer::new();
    for a in axes {
        an.bind_bound(a.var(), IntBound::new(0, a.extent().unwrap_or(1) - 1));
    }
    let mut atoms = Vec::new();
    // what is evaluated for every element: a reduction's terms only where no condition
    // chooses them
    let evaluated: Vec<&Expr> = match body {
        ComputeBody::Expr(e) => vec![e],
        ComputeBody::Reduce(r) if r.condition.is_none() => vec![&r.source],
        ComputeBody::Reduce(_) => Vec::new(),
    };
    for e in evaluated {
        unconditional_loads(e, &mut |buffer, indices| {
            let Some(dims) = valid.get(buffer) else {
                return;
            };
            for (idx, dim) in indices.iter().zip(dims) {
                let idx = an.simplify(idx);
                atoms.extend(atoms_of(&idx, v, dim));
            }
        });
    }
    let mut bound: Option<Expr> = None;
    let mut block: Option<Block> = None;
    for atom in atoms {
        match atom {
            Atom::Below { div, n } => {
                let cut = if div == 1 { n } else { n * Expr::int(div) };
                bound = Some(match bound {
                    None => cut,
                    Some(b) if b == cut => b,
                    Some(b) => Expr::min(b, cut),
                });
            }
            Atom::InBlock { radix, n } if radix > 1 && extent % radix == 0 => {
                block = Some(match block {
                    None => Block { radix, valid: n },
                    Some(b) if b.radix == radix && b.valid != n => Block {
                        radix,
                        valid: Expr::min(b.valid, n),
                    },
                    Some(b) => b,
                });
            }
            Atom::InBlock { .. } => {}
        }
    }
    (bound, block)
}

/// The conditions a valid `v` meets where index `idx` (simplified) of a dimension valid
/// as `dim` says: `idx` is `v`, `v / R` or `v % R`.
fn atoms_of(idx: &Expr, v: &IterVar, dim: &DimValid) -> Vec<Atom> {
    let is_v = |e: &Expr| matches!(e.node(), ExprNode::Var(x) if x == v.var());
    let (div, modulo) = match idx.node() {
        _ if is_v(idx) => (1, None),
        ExprNode::Binary { op, a, b } if is_v(a) => match (op, b.as_int()) {
            (BinOp::FloorDiv | BinOp::Div, Some(r)) if r > 0 => (r, None),
            (BinOp::FloorMod | BinOp::Mod, Some(r)) if r > 0 => (1, Some(r)),
            _ => return Vec::new(),
        },
        _ => return Vec::new(),
    };
    let mut out = Vec::new();
    match (&dim.below, modulo) {
        (Some(n), None) => out.push(Atom::Below { div, n: n.clone() }),
        (Some(n), Some(radix)) => out.push(Atom::InBlock {
            radix,
            n: n.clone(),
        }),
        (None, _) => {}
    }
    // an axis in blocks read at `v` itself: the same blocks
    if let (Some(b), 1, None) = (&dim.block, div, modulo) {
        out.push(Atom::InBlock {
            radix: b.radix,
            n: b.valid.clone(),
        });
    }
    out
}

/// Calls `f` with the buffer and indices of every load of `e` that is evaluated
/// wherever `e` is (not in a branch of a select, nor in an index).
fn unconditional_loads(e: &Expr, f: &mut dyn FnMut(&Buffer, &[Expr])) {
    match e.node() {
        ExprNode::Load { buffer, indices } => f(buffer, indices),
        ExprNode::Select { cond, .. } => unconditional_loads(cond, f),
        ExprNode::Call {
            op: Intrinsic::IfThenElse,
            args,
            ..
        } => {
            if let Some(c) = args.first() {
                unconditional_loads(c, f)
            }
        }
        ExprNode::Binary { a, b, .. } | ExprNode::Cmp { a, b, .. } => {
            unconditional_loads(a, f);
            unconditional_loads(b, f);
        }
        // (the second operand of `&&` and `||` may not be evaluated)
        ExprNode::And(a, _) | ExprNode::Or(a, _) => unconditional_loads(a, f),
        ExprNode::Not(a) | ExprNode::Cast { value: a, .. } => unconditional_loads(a, f),
        ExprNode::Call { args, .. } => {
            for a in args {
                unconditional_loads(a, f)
            }
        }
        _ => {}
    }
}
