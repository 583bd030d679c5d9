//! Injective operators: pad, reshape, transpose, concatenate, flatten, strided slice,
//! layout transforms. Written as TVM's C++ TOPI writes them: the same stage names
//! (`T_reshape`, `T_transpose`, `T_concat`, `tensor`, `T_strided_slice`,
//! `T_layout_trans`), axes `ax0, ax1, …` and tag `injective`. Index arithmetic is
//! simplified with the output axes' ranges known.

use super::attr_err;
use super::elemwise::{compute_ax, normalize_axis, to_dtype};
use crate::error::TeError;
use crate::tensor::{compute_tagged, Tensor};
use tessera_ir::arith::Analyzer;
use tessera_ir::Expr;

/// TVM's tag of injective operators.
pub const TAG_INJECTIVE: &str = "injective";
/// The tag of the padding stages of [`pad_with`] (convolutions' `pad_temp`, `PaddedInput`).
pub const TAG_PAD: &str = "injective,pad";

fn shape_err(op: &str, shape: &[i64], reason: String) -> TeError {
    TeError::BadShape {
        op: op.to_string(),
        shape: shape.to_vec(),
        reason,
    }
}

/// Simplifies the index expressions `idx` knowing that each output axis `ix[k]` lies in
/// `[0, shape[k])`.
fn simplify_indices(ix: &[Expr], shape: &[i64], idx: Vec<Expr>) -> Vec<Expr> {
    let mut an = Analyzer::new();
    for (a, d) in ix.iter().zip(shape) {
        if let Some(v) = a.as_var() {
            an.bind_range(v, &Expr::int(0), &Expr::int(*d));
        }
    }
    idx.iter().map(|e| an.simplify(e)).collect()
}

// ----- pad -----

/// Zero padding of the dimensions of `x` by `before` / `after` elements (TVM's `pad`).
pub fn pad(x: &Tensor, before: &[i64], after: &[i64], name: &str) -> Result<Tensor, TeError> {
    pad_with(x, before, after, Expr::constant(x.dtype(), 0.0), name)
}

/// Padding of the dimensions of `x` by `before` / `after` elements filled with `value`
/// (converted to the tensor's type: a float constant out of an integer type's range
/// saturates, so `f64::NEG_INFINITY` gives the type's lowest value). Axes `i0, i1, …`,
/// tag `injective,pad`.
pub fn pad_with(
    x: &Tensor,
    before: &[i64],
    after: &[i64],
    value: impl Into<Expr>,
    name: &str,
) -> Result<Tensor, TeError> {
    let s = x.shape();
    for (attr, w) in [("pad_before", before), ("pad_after", after)] {
        if w.len() != s.len() {
            return Err(attr_err(
                "pad",
                attr,
                format!(
                    "{} pad widths for the {} dimensions of {:?}",
                    w.len(),
                    s.len(),
                    s
                ),
            ));
        }
        if w.iter().any(|p| *p < 0) {
            return Err(attr_err("pad", attr, format!("negative padding {w:?}")));
        }
    }
    if s.iter()
        .zip(before.iter().zip(after))
        .any(|(d, (b, a))| d.checked_add(*b).and_then(|v| v.checked_add(*a)).is_none())
    {
        return Err(attr_err("pad", "pad_after", "padded size overflows"));
    }
    let out: Vec<i64> = (0..s.len()).map(|d| s[d] + before[d] + after[d]).collect();
    let fill = to_dtype(x.dtype(), value.into());
    compute_tagged(&out, name, TAG_PAD, &[], |ix| {
        let mut conds = Vec::new();
        let mut idx = Vec::new();
        for d in 0..s.len() {
            if before[d] > 0 || after[d] > 0 {
                conds.push(ix[d].ge(before[d]));
                conds.push(ix[d].lt(before[d] + s[d]));
            }
            idx.push(if before[d] > 0 {
                &ix[d] - before[d]
            } else {
                ix[d].clone()
            });
        }
        if conds.is_empty() {
            x.at(&idx)
        } else {
            Expr::if_then_else(Expr::all(conds), x.at(&idx), fill.clone())
        }
    })
}

/// TVM's C++ `topi::pad` (used by its pooling): axes `ax0, …`, tag `elemwise`, and a
/// bound check only on the sides that are padded — so pooling DAGs print like TVM's.
/// [`pad_with`] is the Python `topi.nn.pad` that convolutions use.
pub(crate) fn pad_cpp(
    x: &Tensor,
    before: &[i64],
    after: &[i64],
    value: Expr,
    name: &str,
) -> Result<Tensor, TeError> {
    let s = x.shape();
    let out: Vec<i64> = (0..s.len()).map(|d| s[d] + before[d] + after[d]).collect();
    let names: Vec<String> = (0..s.len()).map(|d| format!("ax{d}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    compute_tagged(&out, name, "elemwise", &refs, |ix| {
        let mut sel = Vec::new();
        let mut idx = Vec::with_capacity(s.len());
        for d in 0..s.len() {
            if before[d] != 0 {
                sel.push(ix[d].ge(before[d]));
                idx.push(&ix[d] - before[d]);
            } else {
                idx.push(ix[d].clone());
            }
            if after[d] != 0 {
                sel.push(ix[d].lt(before[d] + s[d]));
            }
        }
        if sel.is_empty() {
            x.at(&idx)
        } else {
            Expr::if_then_else(Expr::all(sel), x.at(&idx), value)
        }
    })
}

// ----- reshape, flatten -----

/// The element count of `shape`, or `None` when it overflows.
fn numel(shape: &[i64]) -> Option<i64> {
    shape.iter().try_fold(1i64, |acc, d| acc.checked_mul(*d))
}

/// `x` with shape `newshape`, read in row-major order (TVM's `topi::reshape`, stage
/// `T_reshape`). One entry may be `-1`: it takes the size that keeps the element count.
pub fn reshape(x: &Tensor, newshape: &[i64]) -> Result<Tensor, TeError> {
    let op = "reshape";
    if let Some(d) = newshape.iter().find(|d| **d == 0 || **d < -1) {
        return Err(attr_err(
            op,
            "newshape",
            format!("{newshape:?}: size {d} (sizes are positive, or -1 once to infer)"),
        ));
    }
    let infer: Vec<usize> = (0..newshape.len()).filter(|i| newshape[*i] == -1).collect();
    if infer.len() > 1 {
        return Err(attr_err(
            op,
            "newshape",
            format!("{newshape:?}: at most one size may be -1"),
        ));
    }
    let total = numel(x.shape())
        .ok_or_else(|| shape_err(op, x.shape(), "the element count overflows".into()))?;
    let known = newshape
        .iter()
        .filter(|d| **d > 0)
        .try_fold(1i64, |acc, d| acc.checked_mul(*d));
    let mut out = newshape.to_vec();
    match (known, infer.first()) {
        (Some(k), Some(i)) if total % k == 0 => out[*i] = total / k,
        (Some(k), None) if k == total => {}
        _ => {
            return Err(shape_err(
                op,
                x.shape(),
                format!(
                    "cannot reshape {:?} ({total} elements) into {newshape:?}",
                    x.shape()
                ),
            ))
        }
    }
    let in_shape = x.shape().to_vec();
    compute_ax(&out, "T_reshape", TAG_INJECTIVE, |ix| {
        // RavelIndex over the output shape, UnravelIndex over the input's.
        let mut flat = ix.first().cloned().unwrap_or_else(|| Expr::int(0));
        for k in 1..ix.len() {
            flat = flat * out[k] + &ix[k];
        }
        let mut idx = Vec::with_capacity(in_shape.len());
        for &d in in_shape.iter().rev() {
            idx.push(Expr::floormod(flat.clone(), Expr::int(d)));
            flat = Expr::floordiv(flat, Expr::int(d));
        }
        idx.reverse();
        x.at(&simplify_indices(ix, &out, idx))
    })
}

/// Batch flatten: `[N, d1, d2, …]` → `[N, d1·d2·…]` (TVM's `topi::nn::flatten`, stage
/// `tensor`).
pub fn flatten(x: &Tensor) -> Result<Tensor, TeError> {
    let s = x.shape().to_vec();
    if s.is_empty() {
        return Err(shape_err(
            "flatten",
            &s,
            "needs at least one (batch) dimension".into(),
        ));
    }
    let rest = numel(&s[1..])
        .ok_or_else(|| shape_err("flatten", &s, "the element count overflows".into()))?;
    let out = [s[0], rest];
    compute_ax(&out, "tensor", TAG_INJECTIVE, |ix| {
        let mut j = ix[1].clone();
        let mut idx = Vec::with_capacity(s.len());
        for &d in s[1..].iter().rev() {
            idx.push(Expr::floormod(j.clone(), Expr::int(d)));
            j = Expr::floordiv(j, Expr::int(d));
        }
        idx.push(ix[0].clone());
        idx.reverse();
        x.at(&simplify_indices(ix, &out, idx))
    })
}

// ----- transpose -----

/// `x` with its dimensions permuted: output dimension `i` is input dimension `axes[i]`
/// (negative counts from the end; empty `axes` reverses the dimensions). TVM's
/// `topi::transpose`, stage `T_transpose`.
pub fn transpose(x: &Tensor, axes: &[i64]) -> Result<Tensor, TeError> {
    let op = "transpose";
    let n = x.ndim();
    let perm: Vec<usize> = if axes.is_empty() {
        (0..n).rev().collect()
    } else {
        if axes.len() != n {
            return Err(attr_err(
                op,
                "axes",
                format!("{axes:?} has {} entries for {n} dimensions", axes.len()),
            ));
        }
        let p = axes
            .iter()
            .map(|a| normalize_axis(op, "axes", *a, n))
            .collect::<Result<Vec<_>, _>>()?;
        let mut seen = vec![false; n];
        for a in &p {
            if std::mem::replace(&mut seen[*a], true) {
                return Err(attr_err(
                    op,
                    "axes",
                    format!("{axes:?} is not a permutation: axis {a} repeats"),
                ));
            }
        }
        p
    };
    let out: Vec<i64> = perm.iter().map(|a| x.shape()[*a]).collect();
    compute_ax(&out, "T_transpose", TAG_INJECTIVE, |ix| {
        let mut idx = vec![Expr::int(0); n];
        for (i, a) in perm.iter().enumerate() {
            idx[*a] = ix[i].clone();
        }
        x.at(&idx)
    })
}

// ----- concatenate -----

/// The tensors joined along `axis` (negative counts from the end); every other
/// dimension must agree. TVM's `topi::concatenate`, stage `T_concat`: nested
/// `if_then_else` over the pieces, the last piece outermost.
pub fn concatenate(tensors: &[Tensor], axis: i64) -> Result<Tensor, TeError> {
    let op = "concatenate";
    let Some(first) = tensors.first() else {
        return Err(attr_err(op, "tensors", "needs at least one tensor"));
    };
    let n = first.ndim();
    let ax = normalize_axis(op, "axis", axis, n)?;
    let mut join = 0i64;
    for t in tensors {
        if t.dtype() != first.dtype() {
            return Err(attr_err(
                op,
                "dtype",
                format!(
                    "`{}` is {} but `{}` is {}",
                    t.name(),
                    t.dtype(),
                    first.name(),
                    first.dtype()
                ),
            ));
        }
        let same = t.ndim() == n && (0..n).all(|d| d == ax || t.shape()[d] == first.shape()[d]);
        if !same {
            return Err(shape_err(
                op,
                t.shape(),
                format!(
                    "cannot join {:?} and {:?} along axis {ax}: the other dimensions differ",
                    first.shape(),
                    t.shape()
                ),
            ));
        }
        join = join
            .checked_add(t.shape()[ax])
            .ok_or_else(|| shape_err(op, t.shape(), "the joined size overflows".into()))?;
    }
    let mut out = first.shape().to_vec();
    out[ax] = join;
    compute_ax(&out, "T_concat", TAG_INJECTIVE, |ix| {
        let mut ret = first.at(ix);
        let mut ind = ix[ax].clone();
        for k in 0..tensors.len() - 1 {
            ind = ind - tensors[k].shape()[ax];
            let mut idx = ix.to_vec();
            idx[ax] = ind.clone();
            ret = Expr::if_then_else(ind.ge(0), tensors[k + 1].at(&idx), ret);
        }
        ret
    })
}

// ----- strided slice -----

/// The NumPy slice `begin:end:stride` of a dimension of size `n`: the first index and
/// the number of elements (0 when it selects none).
pub fn slice_dim(n: i64, begin: Option<i64>, end: Option<i64>, stride: i64) -> (i64, i64) {
    let norm = |v: i64| if v < 0 { v + n } else { v };
    if stride > 0 {
        let b = begin.map_or(0, |b| norm(b).clamp(0, n));
        let e = end.map_or(n, |e| norm(e).clamp(0, n));
        let len = if e > b {
            (e - b + stride - 1) / stride
        } else {
            0
        };
        (b, len)
    } else {
        let b = begin.map_or(n - 1, |b| norm(b).clamp(-1, n - 1));
        let e = end.map_or(-1, |e| norm(e).clamp(-1, n - 1));
        let s = -(stride as i128);
        let len = if b > e {
            ((b as i128 - e as i128 + s - 1) / s) as i64
        } else {
            0
        };
        (b, len)
    }
}

/// NumPy slicing `x[begin0:end0:stride0, …]` (TVM's `topi::strided_slice`, stage
/// `T_strided_slice`). `begin`, `end` and `strides` may be shorter than the rank: the
/// missing entries take the whole dimension (stride 1). Negative begins and ends count
/// from the end; out-of-range ones are clamped as NumPy clamps them (`i64::MIN` /
/// `i64::MAX` stand for an open end). Negative strides walk backwards; an empty result
/// is a shape error.
pub fn strided_slice(
    x: &Tensor,
    begin: &[i64],
    end: &[i64],
    strides: &[i64],
) -> Result<Tensor, TeError> {
    let op = "strided_slice";
    let n = x.ndim();
    for (attr, v) in [("begin", begin), ("end", end), ("strides", strides)] {
        if v.len() > n {
            return Err(attr_err(
                op,
                attr,
                format!("{v:?} has {} entries for {n} dimensions", v.len()),
            ));
        }
    }
    if let Some(k) = strides.iter().position(|s| *s == 0) {
        return Err(attr_err(
            op,
            "strides",
            format!("{strides:?}: the stride of dimension {k} is zero"),
        ));
    }
    let mut starts = Vec::with_capacity(n);
    let mut steps = Vec::with_capacity(n);
    let mut out = Vec::with_capacity(n);
    for d in 0..n {
        let stride = strides.get(d).copied().unwrap_or(1);
        let (b, len) = slice_dim(
            x.shape()[d],
            begin.get(d).copied(),
            end.get(d).copied(),
            stride,
        );
        if len <= 0 {
            return Err(shape_err(
                op,
                x.shape(),
                format!(
                    "slice begin {begin:?} end {end:?} strides {strides:?} selects nothing \
                     in dimension {d}"
                ),
            ));
        }
        starts.push(b);
        steps.push(stride);
        out.push(len);
    }
    compute_ax(&out, "T_strided_slice", TAG_INJECTIVE, |ix| {
        let idx: Vec<Expr> = (0..n).map(|d| &ix[d] * steps[d] + starts[d]).collect();
        x.at(&simplify_indices(ix, &out, idx))
    })
}

// ----- layout transform -----

/// A data layout such as `NCHW` or `NCHW16c`: primal axes (upper-case letters) and at
/// most one sub-axis (a factor and the lower-case letter) per primal axis.
#[derive(Debug)]
pub(crate) struct Layout {
    /// Per position: the primal axis letter (upper case) and the factor of a sub-axis.
    pub(crate) axes: Vec<(char, Option<i64>)>,
}

impl Layout {
    /// Parses a TVM layout string (`NCHW`, `NCHW16c`, …): primal axes are upper-case
    /// letters, a sub-axis is a factor and the lower-case letter of its primal axis.
    pub(crate) fn parse(op: &str, attr: &str, s: &str) -> Result<Layout, TeError> {
        let bad = |why: String| attr_err(op, attr, format!("layout `{s}`: {why}"));
        let mut axes: Vec<(char, Option<i64>)> = Vec::new();
        let mut digits = String::new();
        for c in s.chars() {
            if c.is_ascii_digit() {
                digits.push(c);
            } else if c.is_ascii_uppercase() {
                if !digits.is_empty() {
                    return Err(bad(format!(
                        "factor {digits} before the primal axis `{c}` (sub-axes are lower case)"
                    )));
                }
                axes.push((c, None));
            } else if c.is_ascii_lowercase() {
                let f: i64 = digits
                    .parse()
                    .map_err(|_| bad(format!("sub-axis `{c}` needs a factor, e.g. `16{c}`")))?;
                if f <= 0 {
                    return Err(bad(format!("sub-axis `{c}` has factor {f}")));
                }
                digits.clear();
                axes.push((c.to_ascii_uppercase(), Some(f)));
            } else {
                return Err(bad(format!("unexpected character `{c}`")));
            }
        }
        if !digits.is_empty() {
            return Err(bad(format!("trailing factor {digits} without a sub-axis")));
        }
        if axes.is_empty() {
            return Err(bad("no axes".into()));
        }
        for (i, (c, f)) in axes.iter().enumerate() {
            if axes[..i]
                .iter()
                .any(|(d, g)| d == c && g.is_some() == f.is_some())
            {
                return Err(bad(format!("axis `{}` appears twice", axis_label(*c, *f))));
            }
            if f.is_some() && !axes.iter().any(|(d, g)| d == c && g.is_none()) {
                return Err(bad(format!(
                    "sub-axis `{}` without its primal axis `{c}`",
                    axis_label(*c, *f)
                )));
            }
        }
        Ok(Layout { axes })
    }
    fn primal(&self) -> Vec<char> {
        let mut v: Vec<char> = self
            .axes
            .iter()
            .filter(|(_, f)| f.is_none())
            .map(|(c, _)| *c)
            .collect();
        v.sort();
        v
    }
    fn pos(&self, c: char, sub: bool) -> Option<usize> {
        self.axes
            .iter()
            .position(|(d, f)| *d == c && f.is_some() == sub)
    }
    fn factor(&self, c: char) -> Option<i64> {
        self.pos(c, true).and_then(|p| self.axes[p].1)
    }
}

fn axis_label(c: char, f: Option<i64>) -> String {
    match f {
        Some(f) => format!("{f}{}", c.to_ascii_lowercase()),
        None => c.to_string(),
    }
}

/// `x`, laid out as `src`, rearranged into layout `dst` (TVM's `topi::layout_transform`,
/// stage `T_layout_trans`). Layouts are primal axes (`N`, `C`, `H`, `W`, …) with at most
/// one sub-axis each (`NCHW16c`): NCHW↔NHWC, NCHW↔NCHW{n}c, NCHW{n}c↔NHWC,
/// NCHW{a}c→NCHW{b}c and any other permutation/split of the same primal axes. A split
/// in `dst` must divide its axis. Equal layouts return `x` itself, as TVM does.
pub fn layout_transform(x: &Tensor, src: &str, dst: &str) -> Result<Tensor, TeError> {
    let op = "layout_transform";
    let sl = Layout::parse(op, "src_layout", src)?;
    let dl = Layout::parse(op, "dst_layout", dst)?;
    let s = x.shape();
    if sl.axes.len() != s.len() {
        return Err(shape_err(
            op,
            s,
            format!(
                "layout `{src}` has {} axes but the tensor has {} dimensions",
                sl.axes.len(),
                s.len()
            ),
        ));
    }
    if sl.primal() != dl.primal() {
        return Err(attr_err(
            op,
            "dst_layout",
            format!("`{dst}` and `{src}` do not have the same primal axes"),
        ));
    }
    // The full extent of every primal axis.
    let mut full = std::collections::HashMap::new();
    for (c, f) in &sl.axes {
        if f.is_some() {
            continue;
        }
        let outer = s[sl.pos(*c, false).unwrap_or(0)];
        let ext = match sl.factor(*c) {
            Some(g) => {
                let inner = s[sl.pos(*c, true).unwrap_or(0)];
                if inner != g {
                    return Err(shape_err(
                        op,
                        s,
                        format!(
                            "sub-axis `{}` of `{src}` has size {inner}, not {g}",
                            axis_label(*c, Some(g))
                        ),
                    ));
                }
                outer
                    .checked_mul(g)
                    .ok_or_else(|| shape_err(op, s, "the axis extent overflows".into()))?
            }
            None => outer,
        };
        full.insert(*c, ext);
    }
    let mut out = Vec::with_capacity(dl.axes.len());
    for (c, f) in &dl.axes {
        let ext = full[c];
        out.push(match (f, dl.factor(*c)) {
            (Some(g), _) => *g,
            (None, Some(g)) => {
                if ext % g != 0 {
                    return Err(attr_err(
                        op,
                        "dst_layout",
                        format!(
                            "`{dst}` splits axis `{c}` of size {ext} by {g}, which does not divide it"
                        ),
                    ));
                }
                ext / g
            }
            (None, None) => ext,
        });
    }
    if src == dst {
        return Ok(x.clone());
    }
    compute_ax(&out, "T_layout_trans", TAG_INJECTIVE, |ix| {
        // The index of each primal axis over its full extent, from the output's axes.
        let full_index = |c: char| -> Expr {
            let outer = ix[dl.pos(c, false).unwrap_or(0)].clone();
            match (dl.factor(c), dl.pos(c, true)) {
                (Some(g), Some(p)) => outer * g + &ix[p],
                _ => outer,
            }
        };
        let idx: Vec<Expr> = sl
            .axes
            .iter()
            .map(|(c, f)| match (f, sl.factor(*c)) {
                (Some(g), _) => Expr::floormod(full_index(*c), Expr::int(*g)),
                (None, Some(g)) => Expr::floordiv(full_index(*c), Expr::int(g)),
                (None, None) => full_index(*c),
            })
            .collect();
        x.at(&simplify_indices(ix, &out, idx))
    })
}
