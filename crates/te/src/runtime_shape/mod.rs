//! Runtime extents found by difference: a compute DAG built for the largest value of a
//! symbolic size and built again for smaller ones gives, axis by axis, which extents
//! follow the size (`a · size + b` at every build) and which do not. Values are stored
//! at the largest size ("padded"), so an axis whose extent is the size itself, or the
//! size and a constant (a token appended: a cache and the new token concatenated, their
//! offset the size read at run time as below), holds the valid indices first: it gets a
//! runtime extent (see [`IterVarNode::bound`](crate::tensor::IterVarNode::bound)) read
//! from an extent tensor. An axis of another form (`2 · size` where two heads of the
//! size were merged) holds its valid indices apart: a data-parallel one keeps its static
//! extent (what it computes past them is never read), a reduction over one is refused.
//!
//! The builds must be the same program but for the size: the same operations in the
//! same order, the same bodies. Where a body's constant differs, it is kept as the
//! largest build has it where it is a factor or divisor of an index (the strides of a
//! reshape's index arithmetic, which the largest build computes consistently for values
//! stored at the largest size); an integer constant that differs anywhere else (the
//! last token's index, a padding bound) becomes what it is as a function of the size,
//! `a · size + b` read from the extent tensor, where three builds or more show that
//! form; anything else (a float such as a mean's divisor, a form the builds do not
//! show) means the operation depends on the size in a way this cannot follow, and the
//! DAG is refused, naming the operation.
//!
//! `compare.rs` walks a body against another build's.

mod compare;

use crate::dag::ComputeDag;
use crate::tensor::{make_compute, ComputeBody, OpKind, Reduce, Tensor};
use compare::{Diff, Pairing, Replace, Walk};
use std::collections::BTreeMap;
use std::collections::HashMap;
use tessera_ir::visit::ExprMutator;
use tessera_ir::{Buffer, DataType, Expr};
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
    /// The size and a constant: a runtime extent.
    Size(Expr),
    /// Another affine form: valid indices not first.
    Otherwise,
}

impl Symbol {
    /// The constants of a body that differ between the builds (`diffs[k]`: against
    /// build `k + 1`), each replaced by what it is as a function of the size, by
    /// preorder position: `a · size + b` at every build (three builds at least, so
    /// that the form is checked, not only fitted).
    fn constants(
        &self,
        tensor: &str,
        sizes: &[i64],
        diffs: &[Vec<Diff>],
    ) -> Result<HashMap<usize, Expr>, RuntimeShapeError> {
        let mut at: BTreeMap<usize, (DataType, Vec<i64>)> = BTreeMap::new();
        for (k, list) in diffs.iter().enumerate() {
            for d in list {
                let e = at
                    .entry(d.id)
                    .or_insert_with(|| (d.dtype, vec![d.max; sizes.len()]));
                e.1[k + 1] = d.other;
            }
        }
        let mut out = HashMap::new();
        for (id, (dtype, values)) in at {
            // three builds at least: two points fit any line
            match affine(sizes, &values).filter(|&(a, _)| a != 0 && sizes.len() >= 3) {
                Some((a, b)) => out.insert(id, Expr::cast(dtype, self.runtime(a, b))),
                None => {
                    return Err(RuntimeShapeError::SizeDependent {
                        tensor: tensor.to_string(),
                        what: format!("a constant {values:?} at sizes {sizes:?}"),
                    })
                }
            };
        }
        Ok(out)
    }

    /// `a · size + b`, the size read from the extent tensor.
    fn runtime(&self, a: i64, b: i64) -> Expr {
        let n = self.extents.at(&[Expr::int(self.index)]);
        let e = if a == 1 { n } else { n * Expr::int(a) };
        if b == 0 {
            e
        } else {
            e + Expr::int(b)
        }
    }

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
        match affine(sizes, extents) {
            Some((1, b)) => Ok(Follows::Size(self.runtime(1, b))),
            Some((a, _)) if a > 0 => Ok(Follows::Otherwise),
            _ => Err(RuntimeShapeError::NotAffine {
                tensor: tensor.to_string(),
                sizes: sizes.to_vec(),
                extents: extents.to_vec(),
            }),
        }
    }
}

/// `(a, b)` with `values[k] = a · sizes[k] + b` at every build, where whole numbers do.
fn affine(sizes: &[i64], values: &[i64]) -> Option<(i64, i64)> {
    let (s0, v0, s1, v1) = (sizes[0], values[0], *sizes.get(1)?, *values.get(1)?);
    if s0 == s1 || (v0 - v1) % (s0 - s1) != 0 {
        return None;
    }
    let a = (v0 - v1) / (s0 - s1);
    let b = v0 - a * s0;
    sizes
        .iter()
        .zip(values)
        .all(|(&s, &v)| a * s + b == v)
        .then_some((a, b))
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
    let mut diffs: Vec<Vec<Diff>> = Vec::with_capacity(others.len());
    for (o, p) in others.iter().zip(pairings.iter()) {
        let Some(ob) = o.body() else {
            return Err(structure("a placeholder in one build only".into()));
        };
        let mut walk = Walk::default();
        p.same_body(m.name(), body, ob, &mut walk)?;
        diffs.push(walk.diffs);
    }
    let mut replace = Replace::new(symbol.constants(m.name(), sizes, &diffs)?);
    let body = match body {
        ComputeBody::Expr(e) => ComputeBody::Expr(replace.mutate_expr(e)),
        ComputeBody::Reduce(r) => ComputeBody::Reduce(Reduce {
            axis: new_reduce.to_vec(),
            source: replace.mutate_expr(&r.source),
            init: r.init.as_ref().map(|e| replace.mutate_expr(e)),
            condition: r.condition.as_ref().map(|e| replace.mutate_expr(e)),
            op: r.op,
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

/// The int32 extent tensor of `count` symbolic sizes (`[count]`), named `name`.
pub fn extent_tensor(count: i64, name: &str) -> Result<Tensor, crate::TeError> {
    crate::placeholder(&[count.max(1)], DataType::int32(), name)
}
