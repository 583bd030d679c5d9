//! The comparison of a body built at the largest size with the same body built at
//! another: the same expression but for the strides of its indices (kept as the largest
//! build has them: values are stored at the largest size) and for integer constants
//! that differ elsewhere, which are listed by their position (preorder) for the caller
//! to replace by what they are as a function of the size, or to refuse.

use super::RuntimeShapeError;
use crate::tensor::ComputeBody;
use std::collections::HashMap;
use tessera_ir::arith::simplify;
use tessera_ir::visit::{mutate_expr_children, substitute, ExprMutator};
use tessera_ir::{BinOp, Buffer, DataType, Expr, ExprNode, Var};

/// An integer constant at preorder position `id` of a body: `max` in the largest build,
/// `other` in another.
#[derive(Clone, Copy, Debug)]
pub(super) struct Diff {
    pub(super) id: usize,
    pub(super) max: i64,
    pub(super) other: i64,
    pub(super) dtype: DataType,
}

/// A walk over a body in preorder: the position reached, the constants that differ.
#[derive(Default)]
pub(super) struct Walk {
    count: usize,
    pub(super) diffs: Vec<Diff>,
}

impl Walk {
    fn next(&mut self) -> usize {
        self.count += 1;
        self.count - 1
    }
}

/// A body's expressions with the constants at preorder positions replaced, and each
/// load of a shifted buffer plus its shift.
pub(super) struct Replace<'a> {
    count: usize,
    pub(super) with: HashMap<usize, Expr>,
    shifted: &'a HashMap<Buffer, Expr>,
}

impl<'a> Replace<'a> {
    pub(super) fn new(with: HashMap<usize, Expr>, shifted: &'a HashMap<Buffer, Expr>) -> Self {
        Replace {
            count: 0,
            with,
            shifted,
        }
    }
}

impl ExprMutator for Replace<'_> {
    fn mutate_expr(&mut self, e: &Expr) -> Expr {
        let id = self.count;
        self.count += 1;
        if let Some(r) = self.with.get(&id) {
            return r.clone();
        }
        let m = mutate_expr_children(self, e);
        match e.node() {
            ExprNode::Load { buffer, .. } => match self.shifted.get(buffer) {
                Some(shift) => m + shift.clone(),
                None => m,
            },
            _ => m,
        }
    }
}

/// What corresponds between the two builds: the other build's variables and buffers
/// mapped to the largest build's, and the largest build's variables whose axis has one
/// element in the other (where that build may have written the variable as 0).
#[derive(Default)]
pub(super) struct Pairing {
    pub(super) vars: HashMap<Var, Var>,
    pub(super) buffers: HashMap<Buffer, Buffer>,
    pub(super) unit: std::collections::HashSet<Var>,
}

impl Pairing {
    /// Whether body `a` (largest build) is `b` (another build) but for the strides of
    /// its indices.
    pub(super) fn same_body(
        &self,
        tensor: &str,
        a: &ComputeBody,
        b: &ComputeBody,
        walk: &mut Walk,
    ) -> Result<(), RuntimeShapeError> {
        let differ = || RuntimeShapeError::Structure {
            tensor: tensor.to_string(),
            reason: "the bodies differ in kind".into(),
        };
        match (a, b) {
            (ComputeBody::Expr(x), ComputeBody::Expr(y)) => self.same(tensor, x, y, false, walk),
            (ComputeBody::Reduce(x), ComputeBody::Reduce(y)) => {
                if x.op != y.op {
                    return Err(differ());
                }
                self.same(tensor, &x.source, &y.source, false, walk)?;
                for (p, q) in [(&x.init, &y.init), (&x.condition, &y.condition)] {
                    match (p, q) {
                        (Some(p), Some(q)) => self.same(tensor, p, q, false, walk)?,
                        (None, None) => {}
                        _ => return Err(differ()),
                    }
                }
                Ok(())
            }
            _ => Err(differ()),
        }
    }

    /// Whether `a` (largest build) is `b` (other build) but for constants that are a
    /// factor or divisor of an index (`in_index`: inside a load's indices), kept, and
    /// other integer constants, listed in `walk`; or, where the other build has axes of
    /// one element, whether `a` with their variables 0 simplifies to what `b` does
    /// (that build simplified the index itself).
    fn same(
        &self,
        tensor: &str,
        a: &Expr,
        b: &Expr,
        in_index: bool,
        walk: &mut Walk,
    ) -> Result<(), RuntimeShapeError> {
        let (count, diffs) = (walk.count, walk.diffs.len());
        let err = match self.same_nodes(tensor, a, b, in_index, walk) {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        if self.unit.is_empty() || !self.same_at_units(a, b) {
            return Err(err);
        }
        // the whole of `a` taken as it is: its positions passed over
        walk.count = count + preorder_size(a);
        walk.diffs.truncate(diffs);
        Ok(())
    }

    /// Whether `a` with the unit axes' variables 0 and `b` with its variables the
    /// largest build's simplify to one expression.
    fn same_at_units(&self, a: &Expr, b: &Expr) -> bool {
        let zeros: HashMap<Var, Expr> = self
            .unit
            .iter()
            .map(|v| (v.clone(), Expr::int_of(v.dtype(), 0)))
            .collect();
        let renamed: HashMap<Var, Expr> = self
            .vars
            .iter()
            .map(|(small, big)| (small.clone(), Expr::from(big.clone())))
            .collect();
        let (sa, sb) = (
            simplify(&substitute(a, &zeros)),
            simplify(&substitute(b, &renamed)),
        );
        sa == sb
    }

    /// [`Pairing::same`] node by node.
    fn same_nodes(
        &self,
        tensor: &str,
        a: &Expr,
        b: &Expr,
        in_index: bool,
        walk: &mut Walk,
    ) -> Result<(), RuntimeShapeError> {
        let id = walk.next();
        let differ = |what: &str| RuntimeShapeError::SizeDependent {
            tensor: tensor.to_string(),
            what: format!("{what}: `{a}` where the smaller build has `{b}`"),
        };
        match (a.node(), b.node()) {
            (ExprNode::Var(x), ExprNode::Var(y)) => {
                if self.vars.get(y) == Some(x) || x == y {
                    Ok(())
                } else {
                    Err(differ("a variable"))
                }
            }
            // an axis of one element, whose variable the other build simplified to 0
            (ExprNode::Var(x), ExprNode::IntImm { value: 0, .. }) if self.unit.contains(x) => {
                Ok(())
            }
            (
                ExprNode::IntImm {
                    value: x,
                    dtype: dx,
                },
                ExprNode::IntImm {
                    value: y,
                    dtype: dy,
                },
            ) => {
                if dx != dy {
                    return Err(differ("a constant's type"));
                }
                if x != y {
                    walk.diffs.push(Diff {
                        id,
                        max: *x,
                        other: *y,
                        dtype: *dx,
                    });
                }
                Ok(())
            }
            (ExprNode::FloatImm { value: x, .. }, ExprNode::FloatImm { value: y, .. }) => {
                if x.to_bits() == y.to_bits() {
                    Ok(())
                } else {
                    Err(differ("a constant"))
                }
            }
            (
                ExprNode::Binary { op, a: x1, b: x2 },
                ExprNode::Binary {
                    op: op2,
                    a: y1,
                    b: y2,
                },
            ) => {
                if op != op2 {
                    return Err(differ("an operation"));
                }
                // an index's factor (either operand of a product) or divisor may follow
                // the size: a stride of the layout at the largest size
                let scaling = in_index
                    && matches!(
                        op,
                        BinOp::Mul | BinOp::Div | BinOp::Mod | BinOp::FloorDiv | BinOp::FloorMod
                    );
                let left_free = scaling && *op == BinOp::Mul && is_int(x1) && is_int(y1);
                let right_free = scaling && is_int(x2) && is_int(y2);
                if left_free {
                    walk.next();
                } else {
                    self.same(tensor, x1, y1, in_index, walk)?;
                }
                if right_free {
                    walk.next();
                } else {
                    self.same(tensor, x2, y2, in_index, walk)?;
                }
                Ok(())
            }
            (
                ExprNode::Load {
                    buffer: x,
                    indices: xi,
                },
                ExprNode::Load {
                    buffer: y,
                    indices: yi,
                },
            ) => {
                let paired = self.buffers.get(y).map_or(x == y, |m| m == x);
                if !paired || xi.len() != yi.len() {
                    return Err(differ("a load"));
                }
                for (p, q) in xi.iter().zip(yi) {
                    self.same(tensor, p, q, true, walk)?;
                }
                Ok(())
            }
            _ => {
                let (xs, ys) = (children(a), children(b));
                if std::mem::discriminant(a.node()) != std::mem::discriminant(b.node())
                    || xs.len() != ys.len()
                    || !same_head(a, b)
                {
                    return Err(differ("an expression"));
                }
                for (p, q) in xs.iter().zip(&ys) {
                    self.same(tensor, p, q, in_index, walk)?;
                }
                Ok(())
            }
        }
    }
}

/// The number of nodes of `e` a preorder walk visits (as [`Replace`] counts them).
fn preorder_size(e: &Expr) -> usize {
    1 + children(e).iter().map(preorder_size).sum::<usize>()
}

fn is_int(e: &Expr) -> bool {
    matches!(e.node(), ExprNode::IntImm { .. })
}

/// Whether two nodes of one kind agree in what is not a child (a comparison's
/// operator, a cast's type, a call's function, a vector's lanes).
fn same_head(a: &Expr, b: &Expr) -> bool {
    match (a.node(), b.node()) {
        (ExprNode::Cmp { op: x, .. }, ExprNode::Cmp { op: y, .. }) => x == y,
        (ExprNode::Cast { dtype: x, .. }, ExprNode::Cast { dtype: y, .. }) => x == y,
        (
            ExprNode::Call {
                op: x, dtype: dx, ..
            },
            ExprNode::Call {
                op: y, dtype: dy, ..
            },
        ) => x == y && dx == dy,
        (ExprNode::Ramp { lanes: x, .. }, ExprNode::Ramp { lanes: y, .. })
        | (ExprNode::Broadcast { lanes: x, .. }, ExprNode::Broadcast { lanes: y, .. }) => x == y,
        _ => true,
    }
}

fn children(e: &Expr) -> Vec<Expr> {
    match e.node() {
        ExprNode::Var(_) | ExprNode::IntImm { .. } | ExprNode::FloatImm { .. } => vec![],
        ExprNode::Binary { a, b, .. } | ExprNode::Cmp { a, b, .. } => vec![a.clone(), b.clone()],
        ExprNode::And(a, b) | ExprNode::Or(a, b) => vec![a.clone(), b.clone()],
        ExprNode::Not(a) => vec![a.clone()],
        ExprNode::Select {
            cond,
            then_value,
            else_value,
        } => vec![cond.clone(), then_value.clone(), else_value.clone()],
        ExprNode::Cast { value, .. } => vec![value.clone()],
        ExprNode::Load { indices, .. } => indices.clone(),
        ExprNode::Ramp { base, stride, .. } => vec![base.clone(), stride.clone()],
        ExprNode::Broadcast { value, .. } => vec![value.clone()],
        ExprNode::Call { args, .. } => args.clone(),
    }
}
