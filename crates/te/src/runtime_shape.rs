//! Runtime extents found by difference: a compute DAG built for the largest value of a
//! symbolic size and built again for smaller ones gives, axis by axis, which extents
//! follow the size (`a · size + b` at every build) and which do not. Values are stored
//! at the largest size ("padded"), so an axis whose extent is the size itself holds
//! the valid indices first: it gets a runtime extent (see
//! [`IterVarNode::bound`](crate::tensor::IterVarNode::bound)) read from an extent
//! tensor. An axis of another form (`2 · size` where two heads of the size were merged,
//! `size + 1`) holds its valid indices apart: a data-parallel one keeps its static
//! extent (what it computes past them is never read), a reduction over one is refused.
//!
//! The two builds must be the same program but for the size: the same operations in
//! the same order, the same bodies. Where a body's constant differs, it is accepted
//! only as a factor or divisor of an index (the strides of a reshape's index
//! arithmetic), which the build at the largest size computes consistently for values
//! stored at the largest size; a constant that differs anywhere else (an additive
//! index, a comparison such as a padding bound, a value such as a mean's divisor) means
//! the operation's semantics depend on the size, and the DAG is refused, naming the
//! operation.

use crate::dag::ComputeDag;
use crate::tensor::{make_compute, ComputeBody, OpKind, Reduce, Tensor};
use std::collections::HashMap;
use tessera_ir::{BinOp, Buffer, DataType, Expr, ExprNode, Var};
use thiserror::Error;

/// Why a DAG cannot take runtime extents.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum RuntimeShapeError {
    #[error("the builds at two sizes differ in structure at `{tensor}`: {reason}")]
    Structure { tensor: String, reason: String },
    #[error("`{tensor}` depends on the size in more than its extents ({what}): it cannot run at a size it was not built for")]
    SizeDependent { tensor: String, what: String },
    #[error("`{tensor}`: extents {extents:?} at sizes {sizes:?} are not a whole multiple of the size plus a constant")]
    NotAffine {
        tensor: String,
        sizes: Vec<i64>,
        extents: Vec<i64>,
    },
    #[error("`{tensor}` reduces over an axis of {what} the size: the values past the size would be reduced with the others")]
    ReducesPadding { tensor: String, what: &'static str },
    #[error(
        "runtime extents need builds at two sizes at least, the largest first (got sizes {0:?})"
    )]
    Builds(Vec<i64>),
    #[error("`{tensor}`: {source}")]
    Build {
        tensor: String,
        source: crate::TeError,
    },
}

/// One symbolic size: where its runtime value is (element `index` of the int32 extent
/// tensor `extents`).
#[derive(Clone, Debug)]
pub struct Symbol {
    pub extents: Tensor,
    pub index: i64,
}

/// How an axis's extent follows the size over the builds.
enum Follows {
    /// The same at every size.
    Not,
    /// The size itself: a runtime extent.
    Size(Expr),
    /// Another affine form: valid indices not first.
    Otherwise,
}

impl Symbol {
    /// How an axis whose extents are `extents` at the builds' `sizes` (largest first)
    /// follows the size.
    fn follows(
        &self,
        tensor: &str,
        sizes: &[i64],
        extents: &[i64],
    ) -> Result<Follows, RuntimeShapeError> {
        if extents.iter().all(|&e| e == extents[0]) {
            return Ok(Follows::Not);
        }
        let not_affine = || RuntimeShapeError::NotAffine {
            tensor: tensor.to_string(),
            sizes: sizes.to_vec(),
            extents: extents.to_vec(),
        };
        let (s0, e0, s1, e1) = (sizes[0], extents[0], sizes[1], extents[1]);
        if s0 == s1 || (e0 - e1) % (s0 - s1) != 0 {
            return Err(not_affine());
        }
        let a = (e0 - e1) / (s0 - s1);
        let b = e0 - a * s0;
        if a <= 0 || sizes.iter().zip(extents).any(|(&s, &e)| a * s + b != e) {
            return Err(not_affine());
        }
        Ok(if (a, b) == (1, 0) {
            Follows::Size(self.extents.at(&[Expr::int(self.index)]))
        } else {
            Follows::Otherwise
        })
    }
}

/// The DAG of `builds[0]` (its outputs, built at the largest size) with runtime extents
/// on every axis whose extent is the size (see the module header), from the same DAG
/// built at the other sizes of `builds` (each `(size, outputs)`, the largest first): new
/// tensors over the same buffers, producers first; placeholders are kept.
pub fn bound_by_difference(
    builds: &[(i64, Vec<Tensor>)],
    symbol: &Symbol,
) -> Result<Vec<Tensor>, RuntimeShapeError> {
    let sizes: Vec<i64> = builds.iter().map(|(s, _)| *s).collect();
    if builds.len() < 2 || sizes[1..].iter().any(|&s| s >= sizes[0]) {
        return Err(RuntimeShapeError::Builds(sizes));
    }
    let dags = builds
        .iter()
        .map(|(_, outs)| {
            ComputeDag::new(outs).map_err(|source| RuntimeShapeError::Build {
                tensor: outs.first().map_or("", |t| t.name()).to_string(),
                source,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let big = &dags[0];
    let mut pairings: Vec<Pairing> = Vec::new();
    for other in &dags[1..] {
        if other.ops.len() != big.ops.len() {
            return Err(RuntimeShapeError::Structure {
                tensor: big.outputs[0].name().to_string(),
                reason: format!("{} operations against {}", big.ops.len(), other.ops.len()),
            });
        }
        let mut p = Pairing::default();
        for (m, o) in big.ops.iter().zip(&other.ops) {
            p.buffers.insert(o.buffer().clone(), m.buffer().clone());
        }
        pairings.push(p);
    }
    let mut rebuilt: HashMap<Buffer, Tensor> = HashMap::new();
    for (i, m) in big.ops.iter().enumerate() {
        let others: Vec<&Tensor> = dags[1..].iter().map(|d| &d.ops[i]).collect();
        if let Some(t) = bound_one(m, &others, &mut pairings, &sizes, symbol)? {
            rebuilt.insert(m.buffer().clone(), t);
        }
    }
    Ok(builds[0]
        .1
        .iter()
        .map(|t| {
            rebuilt
                .get(t.buffer())
                .cloned()
                .unwrap_or_else(|| t.clone())
        })
        .collect())
}

/// Tensor `m` of the largest build, with the same tensor `others` of the other builds:
/// rebuilt with its runtime extents (`None`: a placeholder, kept).
fn bound_one(
    m: &Tensor,
    others: &[&Tensor],
    pairings: &mut [Pairing],
    sizes: &[i64],
    symbol: &Symbol,
) -> Result<Option<Tensor>, RuntimeShapeError> {
    let structure = |reason: String| RuntimeShapeError::Structure {
        tensor: m.name().to_string(),
        reason,
    };
    for o in others {
        if m.name() != o.name() || m.tag() != o.tag() || m.ndim() != o.ndim() {
            return Err(structure(format!(
                "`{}` stands where `{}` does",
                o.name(),
                m.name()
            )));
        }
        if m.is_placeholder() != o.is_placeholder() {
            return Err(structure("a placeholder in one build only".into()));
        }
    }
    let OpKind::Compute { axis, body } = m.kind() else {
        return Ok(None);
    };
    // the axes (data-parallel, then reduce) of every build, and each one's form
    let axes_of = |t: &Tensor| -> Vec<crate::IterVar> {
        t.axis().iter().chain(t.reduce_axis()).cloned().collect()
    };
    let mine = axes_of(m);
    let theirs: Vec<Vec<crate::IterVar>> = others.iter().map(|o| axes_of(o)).collect();
    if theirs.iter().any(|t| t.len() != mine.len()) {
        return Err(structure("the reductions differ".into()));
    }
    let mut bounded = Vec::with_capacity(mine.len());
    for (k, a) in mine.iter().enumerate() {
        let mut extents = vec![a.extent().unwrap_or(1)];
        for (t, p) in theirs.iter().zip(pairings.iter_mut()) {
            extents.push(t[k].extent().unwrap_or(1));
            p.vars.insert(t[k].var().clone(), a.var().clone());
        }
        let bound = match (symbol.follows(m.name(), sizes, &extents)?, a.is_reduce()) {
            (Follows::Not, _) | (Follows::Otherwise, false) => None,
            (Follows::Size(n), _) => Some(n),
            (Follows::Otherwise, true) => {
                return Err(RuntimeShapeError::ReducesPadding {
                    tensor: m.name().to_string(),
                    what: "another form than",
                })
            }
        };
        bounded.push(a.with_bound(bound));
    }
    let (new_axis, new_reduce) = bounded.split_at(axis.len());
    for (o, p) in others.iter().zip(pairings.iter()) {
        let Some(ob) = o.body() else {
            return Err(structure("a placeholder in one build only".into()));
        };
        p.same_body(m.name(), body, ob)?;
    }
    let body = match body {
        ComputeBody::Expr(e) => ComputeBody::Expr(e.clone()),
        ComputeBody::Reduce(r) => ComputeBody::Reduce(Reduce {
            axis: new_reduce.to_vec(),
            ..r.clone()
        }),
    };
    make_compute(
        m.name(),
        m.tag(),
        m.shape().to_vec(),
        new_axis.to_vec(),
        body,
        Some(m.buffer().clone()),
        m.attrs().clone(),
    )
    .map(Some)
    .map_err(|source| RuntimeShapeError::Build {
        tensor: m.name().to_string(),
        source,
    })
}

/// What corresponds between the two builds: the other build's variables and buffers
/// mapped to the largest build's.
#[derive(Default)]
struct Pairing {
    vars: HashMap<Var, Var>,
    buffers: HashMap<Buffer, Buffer>,
}

impl Pairing {
    /// Whether body `a` (largest build) is `b` (another build) but for the strides of
    /// its indices.
    fn same_body(
        &self,
        tensor: &str,
        a: &ComputeBody,
        b: &ComputeBody,
    ) -> Result<(), RuntimeShapeError> {
        let differ = || RuntimeShapeError::Structure {
            tensor: tensor.to_string(),
            reason: "the bodies differ in kind".into(),
        };
        match (a, b) {
            (ComputeBody::Expr(x), ComputeBody::Expr(y)) => self.same(tensor, x, y, false),
            (ComputeBody::Reduce(x), ComputeBody::Reduce(y)) => {
                if x.op != y.op {
                    return Err(differ());
                }
                self.same(tensor, &x.source, &y.source, false)?;
                for (p, q) in [(&x.init, &y.init), (&x.condition, &y.condition)] {
                    match (p, q) {
                        (Some(p), Some(q)) => self.same(tensor, p, q, false)?,
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
    /// factor or divisor of an index (`in_index`: inside a load's indices).
    fn same(
        &self,
        tensor: &str,
        a: &Expr,
        b: &Expr,
        in_index: bool,
    ) -> Result<(), RuntimeShapeError> {
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
                if x == y && dx == dy {
                    Ok(())
                } else {
                    Err(differ("a constant"))
                }
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
                if !left_free {
                    self.same(tensor, x1, y1, in_index)?;
                }
                if !right_free {
                    self.same(tensor, x2, y2, in_index)?;
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
                    self.same(tensor, p, q, true)?;
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
                    self.same(tensor, p, q, in_index)?;
                }
                Ok(())
            }
        }
    }
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

/// The int32 extent tensor of `count` symbolic sizes (`[count]`), named `name`.
pub fn extent_tensor(count: i64, name: &str) -> Result<Tensor, crate::TeError> {
    crate::placeholder(&[count.max(1)], DataType::int32(), name)
}
