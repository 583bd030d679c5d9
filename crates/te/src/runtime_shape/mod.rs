//! Runtime extents found by difference: a compute DAG built for the largest values of
//! its symbolic sizes (a sequence length, a cache's length, …) and built again at points
//! smaller in one size or more gives, axis by axis, which extents follow the sizes
//! (`offset + Σ aₖ · sizeₖ` at every point, [`Affine`]) and which do not. Values are
//! stored at the largest sizes ("padded"), so an axis whose extent is a sum of sizes
//! and a constant (a length; a cache and the new tokens concatenated, their offset the
//! cache's length read at run time as below) holds the valid indices first: it gets a
//! runtime extent (see [`IterVarNode::bound`](crate::tensor::IterVarNode::bound)) read
//! from an extent tensor. An axis of another form (`2 · size` where two heads of the
//! size were merged, `batch · length` where a batch and a length were, a product's
//! rows) holds its valid indices apart: a data-parallel one keeps its static extent,
//! narrowed to what its loads show valid (`blocks.rs`: the blocks of a batch, the first
//! rows of each block), which lowering runs in whole tiles of valid indices; what it
//! computes past them is never read. A reduction over one is refused.
//!
//! The builds must be the same program but for the sizes: the same operations in the
//! same order, the same bodies. Where a body's constant differs, it is kept as the
//! largest build has it where it is a factor or divisor of an index (the strides of a
//! reshape's index arithmetic, which the largest build computes consistently for values
//! stored at the largest sizes); an integer constant that differs anywhere else (the
//! last token's index, a padding bound, a cache's length) becomes what it is as a
//! function of the sizes, read from the extent tensor, where the points show that form
//! (three along each size it follows: two fit any line); anything else (a float such as a
//! mean's divisor, a form the points do not show) means the operation depends on the
//! sizes in a way this cannot follow, and the DAG is refused, naming the operation.
//!
//! `compare.rs` walks a body against another build's; `specialize.rs` fixes some sizes
//! at values (a decode step's one token) for a kernel that runs when they have them;
//! `blocks.rs` finds where an axis of another form holds its valid indices.

mod blocks;
mod compare;
mod specialize;

pub use blocks::{valid_dims, DimValid};
pub use specialize::specialize;

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
    #[error("`{tensor}`: extents {extents:?} at sizes {sizes:?} are not whole multiples of the sizes plus a constant")]
    NotAffine {
        tensor: String,
        sizes: Vec<Vec<i64>>,
        extents: Vec<i64>,
    },
    #[error("`{tensor}` reduces over an axis whose extents {extents:?} at sizes {sizes:?} are a product of sizes (two merged into one axis, as a batch and a length), which no kernel reduces yet: give all but one of them a fixed value")]
    ProductOfSizes {
        tensor: String,
        sizes: Vec<Vec<i64>>,
        extents: Vec<i64>,
    },
    #[error("`{tensor}` reduces over an axis of {what} the size: the values past the size would be reduced with the others")]
    ReducesPadding { tensor: String, what: &'static str },
    #[error(
        "runtime extents need builds at two points at least, the largest in every size first, each other one smaller in some size (got {0:?})"
    )]
    Builds(Vec<Vec<i64>>),
    #[error("`{tensor}`: {source}")]
    Build {
        tensor: String,
        source: crate::TeError,
    },
}

/// The symbolic sizes of a DAG: size `k`'s runtime value is element `k` of the int32
/// extent tensor `extents`. A placeholder may be shifted: its values at the largest
/// sizes plus a form of the sizes (every element the same: positions that start at a
/// cache's length), what its loads read at other sizes.
#[derive(Clone, Debug)]
pub struct Symbols {
    pub extents: Tensor,
    shifted: Vec<(Tensor, Affine)>,
    /// Placeholders whose dimensions' valid indices their producer told (a product's
    /// rows in blocks, which the shapes at the points cannot tell).
    known: Vec<(Tensor, Vec<DimValid>)>,
}

/// `offset + Σ slopes[k] · size_k`: how a value follows the sizes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Affine {
    pub slopes: Vec<i64>,
    pub offset: i64,
}

impl Affine {
    /// The form with `values[j] = offset + Σ slopes[k] · points[j][k]` at every point,
    /// in whole numbers, where there is one: solved in least squares over the sizes the
    /// points vary (a size no point varies has slope 0), rounded, then checked exactly
    /// at every point.
    pub fn fit(points: &[Vec<i64>], values: &[i64]) -> Option<Affine> {
        let base = points.first()?;
        let varied: Vec<usize> = (0..base.len())
            .filter(|&k| points.iter().any(|p| p[k] != base[k]))
            .collect();
        if let Some(f) = Affine::fit_over(points, values, &varied) {
            return Some(f);
        }
        // sizes that move together at the points (a count whose bound follows another
        // count) leave the full system singular: a form of one size, then of two, that
        // holds at every point
        let singles = varied.iter().map(|&k| vec![k]);
        let pairs = varied
            .iter()
            .enumerate()
            .flat_map(|(i, &a)| varied[i + 1..].iter().map(move |&b| vec![a, b]));
        singles
            .chain(pairs)
            .find_map(|subset| Affine::fit_over(points, values, &subset))
    }

    /// [`Affine::fit`] over the sizes `varied` (the others' slopes 0).
    fn fit_over(points: &[Vec<i64>], values: &[i64], varied: &[usize]) -> Option<Affine> {
        let base = points.first()?;
        // unknowns: the varied sizes' slopes, then the offset
        let n = varied.len() + 1;
        let row = |p: &Vec<i64>| -> Vec<f64> {
            let mut r: Vec<f64> = varied.iter().map(|&k| p[k] as f64).collect();
            r.push(1.0);
            r
        };
        let mut m = vec![vec![0.0f64; n + 1]; n];
        for (p, &v) in points.iter().zip(values) {
            let r = row(p);
            for i in 0..n {
                for j in 0..n {
                    m[i][j] += r[i] * r[j];
                }
                m[i][n] += r[i] * v as f64;
            }
        }
        let x = solve(m)?;
        let mut slopes = vec![0; base.len()];
        for (i, &k) in varied.iter().enumerate() {
            slopes[k] = x[i].round() as i64;
        }
        let form = Affine {
            slopes,
            offset: x[n - 1].round() as i64,
        };
        points
            .iter()
            .zip(values)
            .all(|(p, &v)| form.at(p) == v)
            .then_some(form)
    }

    /// [`Affine::fit`] where the points check the form (each size it follows takes
    /// three values among them: two fit any line) and it follows one.
    pub fn fit_checked(points: &[Vec<i64>], values: &[i64]) -> Option<Affine> {
        let distinct = |k: usize| {
            let mut v: Vec<i64> = points.iter().map(|p| p[k]).collect();
            v.sort_unstable();
            v.dedup();
            v.len()
        };
        Affine::fit(points, values).filter(|f| {
            f.slopes.iter().any(|&a| a != 0)
                && (0..f.slopes.len()).all(|k| f.slopes[k] == 0 || distinct(k) >= 3)
        })
    }

    /// The value at `sizes`.
    pub fn at(&self, sizes: &[i64]) -> i64 {
        self.offset
            + self
                .slopes
                .iter()
                .zip(sizes)
                .map(|(a, s)| a * s)
                .sum::<i64>()
    }

    /// Whether the value is a sum of sizes and a constant (each slope 0 or 1, one at
    /// least 1): stored at the largest sizes, its valid indices come first.
    pub fn is_sum_of_sizes(&self) -> bool {
        self.slopes.iter().all(|&a| a == 0 || a == 1) && self.slopes.contains(&1)
    }

    /// A sum of sizes and a constant that `values` follow up to the largest of them,
    /// `at_most`, which they never pass (`min(at_most, form)`: the first 20 of a count);
    /// where no sum fits all of them, the points below `at_most` (two at least) fit one,
    /// and it is at least `at_most` at every other point.
    pub fn fit_at_most(points: &[Vec<i64>], values: &[i64]) -> Option<(Affine, i64)> {
        let at_most = *values.iter().max()?;
        let (below, top): (Vec<usize>, Vec<usize>) =
            (0..points.len()).partition(|&j| values[j] < at_most);
        if below.len() < 2 || top.is_empty() {
            return None;
        }
        let pts: Vec<Vec<i64>> = below.iter().map(|&j| points[j].clone()).collect();
        let vals: Vec<i64> = below.iter().map(|&j| values[j]).collect();
        let form = Affine::fit(&pts, &vals).filter(Affine::is_sum_of_sizes)?;
        top.iter()
            .all(|&j| form.at(&points[j]) >= at_most)
            .then_some((form, at_most))
    }
}

/// Whether `extents` are a constant times the product of two sizes or more the points
/// vary (`c · batch · seq` at every point).
fn is_product(points: &[Vec<i64>], extents: &[i64]) -> bool {
    let Some(base) = points.first() else {
        return false;
    };
    let varied: Vec<usize> = (0..base.len())
        .filter(|&k| points.iter().any(|p| p[k] != base[k]))
        .collect();
    let product = |p: &Vec<i64>| varied.iter().map(|&k| p[k]).product::<i64>();
    varied.len() >= 2
        && points.iter().all(|p| product(p) > 0)
        && extents[0] % product(base) == 0
        && points
            .iter()
            .zip(extents)
            .all(|(p, &e)| e == extents[0] / product(base) * product(p))
}

/// The solution of the square system `m` (each row its coefficients then its right-hand
/// side), by elimination with partial pivoting; `None` where it is singular.
fn solve(mut m: Vec<Vec<f64>>) -> Option<Vec<f64>> {
    let n = m.len();
    for c in 0..n {
        let p = (c..n).max_by(|&a, &b| m[a][c].abs().total_cmp(&m[b][c].abs()))?;
        if m[p][c].abs() < 1e-9 {
            return None;
        }
        m.swap(c, p);
        let pivot = m[c].clone();
        for (r, row) in m.iter_mut().enumerate() {
            if r != c {
                let f = row[c] / pivot[c];
                for (x, p) in row[c..].iter_mut().zip(&pivot[c..]) {
                    *x -= f * p;
                }
            }
        }
    }
    Some((0..n).map(|i| m[i][n] / m[i][i]).collect())
}

/// How an axis's extent follows the sizes over the builds.
enum Follows {
    /// The same at every point.
    Not,
    /// A sum of sizes and a constant: a runtime extent.
    Size(Expr),
    /// Another affine form: valid indices not first.
    Otherwise,
    /// A product of sizes: valid indices in blocks ([`blocks`]).
    Product,
}

impl Symbols {
    /// The sizes read from `extents`, no placeholder shifted.
    pub fn new(extents: Tensor) -> Symbols {
        Symbols {
            extents,
            shifted: Vec::new(),
            known: Vec::new(),
        }
    }

    /// The valid indices of `placeholder`'s dimensions are `dims` (its producer's, see
    /// [`valid_dims`]) where they tell anything, else what its shapes at the points say.
    pub fn knows(&mut self, placeholder: Tensor, dims: Vec<DimValid>) {
        self.known.push((placeholder, dims));
    }

    /// Loads of `placeholder` (an integer one) read its value plus `form` (zero at the
    /// largest sizes, as the values are).
    pub fn shift(&mut self, placeholder: Tensor, form: Affine) {
        self.shifted.push((placeholder, form));
    }

    /// The constants of a body that differ between the builds (`diffs[k]`: against
    /// build `k + 1`), each replaced by what it is as a function of the sizes, by
    /// preorder position: an affine form at every point, with three points at least along
    /// each size it follows (so that the form is checked, not only fitted).
    fn constants(
        &self,
        tensor: &str,
        points: &[Vec<i64>],
        diffs: &[Vec<Diff>],
    ) -> Result<HashMap<usize, Expr>, RuntimeShapeError> {
        let mut at: BTreeMap<usize, (DataType, Vec<i64>)> = BTreeMap::new();
        for (k, list) in diffs.iter().enumerate() {
            for d in list {
                let e = at
                    .entry(d.id)
                    .or_insert_with(|| (d.dtype, vec![d.max; points.len()]));
                e.1[k + 1] = d.other;
            }
        }
        let mut out = HashMap::new();
        for (id, (dtype, values)) in at {
            let form = Affine::fit_checked(points, &values);
            let capped = || {
                let (f, m) = Affine::fit_at_most(points, &values)?;
                // three values below the cap along each size the form follows
                let below: Vec<&Vec<i64>> = (0..points.len())
                    .filter(|&j| values[j] < m)
                    .map(|j| &points[j])
                    .collect();
                let distinct = |k: usize| {
                    let mut v: Vec<i64> = below.iter().map(|p| p[k]).collect();
                    v.sort_unstable();
                    v.dedup();
                    v.len()
                };
                (0..f.slopes.len())
                    .all(|k| f.slopes[k] == 0 || distinct(k) >= 3)
                    .then(|| Expr::min(self.runtime(&f), Expr::int(m)))
            };
            match form {
                Some(f) => out.insert(id, Expr::cast(dtype, self.runtime(&f))),
                None if capped().is_some() => {
                    out.insert(id, Expr::cast(dtype, capped().expect("fits")))
                }
                None => {
                    return Err(RuntimeShapeError::SizeDependent {
                        tensor: tensor.to_string(),
                        what: format!("a constant {values:?} at sizes {points:?}"),
                    })
                }
            };
        }
        Ok(out)
    }

    /// `form` with each size read from the extent tensor.
    pub fn runtime(&self, form: &Affine) -> Expr {
        let mut e: Option<Expr> = None;
        for (k, &a) in form.slopes.iter().enumerate().filter(|(_, &a)| a != 0) {
            let n = self.extents.at(&[Expr::int(k as i64)]);
            let term = if a == 1 { n } else { n * Expr::int(a) };
            e = Some(match e {
                None => term,
                Some(sum) => sum + term,
            });
        }
        match (e, form.offset) {
            (Some(e), 0) => e,
            (Some(e), b) => e + Expr::int(b),
            (None, b) => Expr::int(b),
        }
    }

    /// How an axis whose extents are `extents` at the builds' `points` (the largest
    /// first) follows the sizes.
    fn follows(
        &self,
        tensor: &str,
        points: &[Vec<i64>],
        extents: &[i64],
    ) -> Result<Follows, RuntimeShapeError> {
        if extents.iter().all(|&e| e == extents[0]) {
            return Ok(Follows::Not);
        }
        match Affine::fit(points, extents) {
            Some(f) if f.is_sum_of_sizes() => Ok(Follows::Size(self.runtime(&f))),
            Some(f) if f.slopes.iter().all(|&a| a >= 0) => Ok(Follows::Otherwise),
            _ if Affine::fit_at_most(points, extents).is_some() => {
                let (f, at_most) = Affine::fit_at_most(points, extents).expect("fits");
                Ok(Follows::Size(Expr::min(
                    self.runtime(&f),
                    Expr::int(at_most),
                )))
            }
            _ if is_product(points, extents) => Ok(Follows::Product),
            _ => Err(RuntimeShapeError::NotAffine {
                tensor: tensor.to_string(),
                sizes: points.to_vec(),
                extents: extents.to_vec(),
            }),
        }
    }
}

/// The DAG of `builds[0]` (its outputs, built at the largest value of every size) with
/// runtime extents on every axis whose extent is a sum of sizes (see the module
/// header), from the same DAG built at the other points of `builds` (each `(sizes,
/// outputs)`; a point smaller in one size or more): new tensors over the same buffers,
/// producers first; placeholders are kept.
pub fn bound_by_difference(
    builds: &[(Vec<i64>, Vec<Tensor>)],
    symbols: &Symbols,
) -> Result<Vec<Tensor>, RuntimeShapeError> {
    let points: Vec<Vec<i64>> = builds.iter().map(|(s, _)| s.clone()).collect();
    let base = &points[..1.min(points.len())];
    let well_formed = builds.len() >= 2
        && points[1..].iter().all(|p| {
            p.len() == base[0].len() && p != &base[0] && p.iter().zip(&base[0]).all(|(a, b)| a <= b)
        });
    if !well_formed {
        return Err(RuntimeShapeError::Builds(points));
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
    let mut valid = blocks::Validity::new();
    for (i, m) in big.ops.iter().enumerate() {
        let others: Vec<&Tensor> = dags[1..].iter().map(|d| &d.ops[i]).collect();
        if m.is_placeholder() {
            let dims: Vec<Vec<i64>> = (0..m.ndim())
                .map(|d| {
                    let mut e = vec![m.shape()[d]];
                    e.extend(
                        others
                            .iter()
                            .map(|o| o.shape().get(d).copied().unwrap_or(0)),
                    );
                    e
                })
                .collect();
            let mut dims = blocks::placeholder_dims(symbols, &points, &dims);
            let told = symbols.known.iter().find(|(t, _)| t.buffer() == m.buffer());
            for (d, k) in dims.iter_mut().zip(told.map_or(&[][..], |(_, k)| &k[..])) {
                if k.is_known() {
                    *d = k.clone();
                }
            }
            valid.insert(m.buffer().clone(), dims);
        }
        let ctx = (&points[..], symbols, &valid);
        if let Some(t) = bound_one(m, &others, &mut pairings, ctx)? {
            valid.insert(m.buffer().clone(), valid_dims(&t));
            rebuilt.insert(m.buffer().clone(), t);
        }
    }
    Ok(with_rebuilt(&builds[0].1, &rebuilt))
}

/// `outputs`, each replaced by the tensor rebuilt over its buffer where there is one.
fn with_rebuilt(outputs: &[Tensor], rebuilt: &HashMap<Buffer, Tensor>) -> Vec<Tensor> {
    outputs
        .iter()
        .map(|t| {
            rebuilt
                .get(t.buffer())
                .cloned()
                .unwrap_or_else(|| t.clone())
        })
        .collect()
}

/// Tensor `m` of the largest build, with the same tensor `others` of the other builds:
/// rebuilt with its runtime extents (`None`: a placeholder, kept), given the builds'
/// points, the sizes and what is valid in the tensors before it.
fn bound_one(
    m: &Tensor,
    others: &[&Tensor],
    pairings: &mut [Pairing],
    (points, symbols, valid): (&[Vec<i64>], &Symbols, &blocks::Validity),
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
            if t[k].extent() == Some(1) {
                p.unit.insert(a.var().clone());
            }
        }
        let (bound, block) = match (symbols.follows(m.name(), points, &extents)?, a.is_reduce()) {
            (Follows::Not, _) => (None, None),
            (Follows::Size(n), _) => (Some(n), None),
            (Follows::Otherwise | Follows::Product, false) => {
                blocks::blocked_axis(a, extents[0], &mine, body, valid)
            }
            (Follows::Otherwise, true) => {
                return Err(RuntimeShapeError::ReducesPadding {
                    tensor: m.name().to_string(),
                    what: "another form than",
                })
            }
            (Follows::Product, true) => {
                return Err(RuntimeShapeError::ProductOfSizes {
                    tensor: m.name().to_string(),
                    sizes: points.to_vec(),
                    extents,
                })
            }
        };
        bounded.push(a.with_bound(bound).with_block(block));
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
    let shifted: HashMap<Buffer, Expr> = symbols
        .shifted
        .iter()
        .map(|(t, f)| {
            (
                t.buffer().clone(),
                Expr::cast(t.dtype(), symbols.runtime(f)),
            )
        })
        .collect();
    let mut replace = Replace::new(symbols.constants(m.name(), points, &diffs)?, &shifted);
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

#[cfg(test)]
mod tests {
    use super::Affine;

    /// A count and the first 20 of it, built at counts near the bound and at 3, 2, 1.
    #[test]
    fn a_capped_count_fits_below_its_cap_and_reaches_it_above() {
        let points: Vec<Vec<i64>> = [256, 240, 224, 3, 2, 1].iter().map(|&c| vec![c]).collect();
        let values = [20, 20, 20, 3, 2, 1];
        assert_eq!(Affine::fit(&points, &values), None);
        let (form, cap) = Affine::fit_at_most(&points, &values).unwrap();
        assert_eq!((form.slopes.clone(), form.offset, cap), (vec![1], 0, 20));
        // a value under the cap where the form is above it is no such form
        assert_eq!(Affine::fit_at_most(&points, &[20, 19, 20, 3, 2, 1]), None);
        // one point below the cap tells no line
        assert_eq!(Affine::fit_at_most(&points, &[20, 20, 20, 20, 20, 1]), None);
    }

    /// Two counts that move together at some points (the second's bound follows the
    /// first): the full system is singular, a form of one of them holds everywhere.
    #[test]
    fn sizes_that_move_together_fit_the_one_that_holds() {
        let points = vec![vec![100, 100], vec![99, 99], vec![98, 98], vec![3, 3]];
        assert_eq!(
            Affine::fit(&points, &[101, 100, 99, 4]),
            Some(Affine {
                slopes: vec![1, 0],
                offset: 1
            })
        );
        // and where no single size's form holds, none
        assert_eq!(Affine::fit(&points, &[100, 99, 98, 4]), None);
    }
}
