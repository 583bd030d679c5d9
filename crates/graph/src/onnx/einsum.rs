//! `Einsum` as the operators it stands for: with two operands, a batched matrix product
//! between transposes and reshapes (the form transformer exports use: `bhid,bhjd->bhij`,
//! `bij,bjk->bik`); with one, a sum over the dropped letters and a transpose.
//!
//! Each letter of an operand is a batch letter (in both operands and the output), a
//! contracted one (in both, not the output), a free one (one operand and the output) or
//! a summed one (one operand only, summed before the product). The product is then
//! `[batch, free A, contracted] × [batch, contracted, free B]`, reshaped to three axes,
//! and the result is reshaped and transposed to the output's letters. Repeated letters
//! in one operand (diagonals) and ellipses are refused, naming the equation.

use super::attrs::NodeCtx;
use super::{Importer, Outputs};
use crate::error::GraphError;
use crate::ir::Op;
use petgraph::stable_graph::NodeIndex;
use tessera_te::ops::ReduceKind;

/// A parsed equation: each operand's letters and the output's.
struct Equation {
    inputs: Vec<Vec<char>>,
    output: Vec<char>,
}

impl Equation {
    fn parse(c: &NodeCtx, text: &str) -> Result<Equation, GraphError> {
        let text: String = text.chars().filter(|ch| !ch.is_whitespace()).collect();
        if text.contains("...") {
            return Err(c.bad(format!("equation `{text}`: ellipses are not supported")));
        }
        let (lhs, rhs) = match text.split_once("->") {
            Some((l, r)) => (l.to_string(), Some(r.to_string())),
            None => (text.clone(), None),
        };
        let inputs: Vec<Vec<char>> = lhs.split(',').map(|t| t.chars().collect()).collect();
        let letters = |t: &[char]| t.iter().all(char::is_ascii_alphabetic);
        let output: Vec<char> = match rhs {
            Some(r) => r.chars().collect(),
            // implicit output: the letters used once, in alphabetical order
            None => {
                let mut once: Vec<char> = inputs
                    .iter()
                    .flatten()
                    .copied()
                    .filter(|ch| inputs.iter().flatten().filter(|x| *x == ch).count() == 1)
                    .collect();
                once.sort_unstable();
                once
            }
        };
        for t in inputs.iter().chain(std::iter::once(&output)) {
            if !letters(t) {
                return Err(c.bad(format!("equation `{text}`: a term is not letters")));
            }
            let mut sorted = t.clone();
            sorted.sort_unstable();
            if sorted.windows(2).any(|w| w[0] == w[1]) {
                return Err(c.bad(format!(
                    "equation `{text}`: a letter repeated within one term (a diagonal) is not supported"
                )));
            }
        }
        if let Some(ch) = output
            .iter()
            .find(|ch| !inputs.iter().any(|t| t.contains(ch)))
        {
            return Err(c.bad(format!(
                "equation `{text}`: output letter `{ch}` is in no operand"
            )));
        }
        Ok(Equation { inputs, output })
    }
}

/// `Einsum` of one or two operands.
pub(super) fn einsum(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let text = c
        .string("equation")
        .ok_or_else(|| c.bad("the equation attribute is required"))?;
    let eq = Equation::parse(c, &text)?;
    let operands = c.all_inputs();
    if operands.len() != eq.inputs.len() {
        return Err(c.bad(format!(
            "equation `{text}` has {} operands, the node {}",
            eq.inputs.len(),
            operands.len()
        )));
    }
    for (k, (&v, letters)) in operands.iter().zip(&eq.inputs).enumerate() {
        if imp.rank(v) != letters.len() {
            return Err(c.bad(format!(
                "equation `{text}`: operand {k} has rank {}, its term {} letters",
                imp.rank(v),
                letters.len()
            )));
        }
    }
    match operands.len() {
        1 => {
            let (v, letters) = sum_dropped(imp, c, operands[0], &eq.inputs[0], &[&eq.output])?;
            Ok(vec![transpose_to(imp, c, v, &letters, &eq.output, "")?])
        }
        2 => product(imp, c, &text, &eq, operands[0], operands[1]),
        n => Err(c.bad(format!(
            "equation `{text}`: {n} operands (one or two are supported)"
        ))),
    }
}

/// The two-operand case: a batched matrix product.
fn product(
    imp: &mut Importer,
    c: &NodeCtx,
    text: &str,
    eq: &Equation,
    a: NodeIndex,
    b: NodeIndex,
) -> Outputs {
    let (ta, tb, out) = (&eq.inputs[0], &eq.inputs[1], &eq.output);
    let (a, ta) = sum_dropped(imp, c, a, ta, &[tb, out])?;
    let (b, tb) = sum_dropped(imp, c, b, tb, &[&ta, out])?;
    let (sa, sb) = (imp.shape(a), imp.shape(b));
    let size = |ch: char| -> i64 {
        ta.iter()
            .position(|&x| x == ch)
            .map(|i| sa[i])
            .or_else(|| tb.iter().position(|&x| x == ch).map(|i| sb[i]))
            .unwrap_or(1)
    };
    for (i, ch) in ta.iter().enumerate() {
        if let Some(j) = tb.iter().position(|x| x == ch) {
            if sa[i] != sb[j] {
                return Err(c.bad(format!(
                    "equation `{text}`: letter `{ch}` is {} in operand 0 and {} in operand 1",
                    sa[i], sb[j]
                )));
            }
        }
    }
    let batch: Vec<char> = out
        .iter()
        .copied()
        .filter(|ch| ta.contains(ch) && tb.contains(ch))
        .collect();
    let contracted: Vec<char> = ta
        .iter()
        .copied()
        .filter(|ch| tb.contains(ch) && !out.contains(ch))
        .collect();
    let free_a: Vec<char> = ta.iter().copied().filter(|ch| !tb.contains(ch)).collect();
    let free_b: Vec<char> = tb.iter().copied().filter(|ch| !ta.contains(ch)).collect();
    let prod = |letters: &[char]| letters.iter().map(|&ch| size(ch)).product::<i64>();
    let (nb, m, k, n) = (
        prod(&batch),
        prod(&free_a),
        prod(&contracted),
        prod(&free_b),
    );
    let order_a: Vec<char> = [&batch[..], &free_a, &contracted].concat();
    let order_b: Vec<char> = [&batch[..], &contracted, &free_b].concat();
    let a = transpose_to(imp, c, a, &ta, &order_a, "a")?;
    let b = transpose_to(imp, c, b, &tb, &order_b, "b")?;
    let a = imp.reshape(&c.sub("a_3d"), a, vec![nb, m, k])?;
    let b = imp.reshape(&c.sub("b_3d"), b, vec![nb, k, n])?;
    let y = imp.op(&c.sub("batched"), Op::MatMul, &[a, b])?;
    let letters: Vec<char> = [&batch[..], &free_a, &free_b].concat();
    let dims: Vec<i64> = letters.iter().map(|&ch| size(ch)).collect();
    let y = imp.reshape(&c.sub("unflattened"), y, dims)?;
    Ok(vec![transpose_to(imp, c, y, &letters, out, "")?])
}

/// `v` (with letters `have`) summed over the letters no term of `keep` has: the value and
/// its remaining letters.
fn sum_dropped(
    imp: &mut Importer,
    c: &NodeCtx,
    v: NodeIndex,
    have: &[char],
    keep: &[&Vec<char>],
) -> Result<(NodeIndex, Vec<char>), GraphError> {
    let kept = |ch: &char| keep.iter().any(|t| t.contains(ch));
    let axes: Vec<i64> = (0..have.len() as i64)
        .filter(|&i| !kept(&have[i as usize]))
        .collect();
    if axes.is_empty() {
        return Ok((v, have.to_vec()));
    }
    let op = Op::Reduce {
        kind: ReduceKind::Sum,
        axes,
        keepdims: false,
    };
    let name = c.sub(&format!("sum_{}", have.iter().collect::<String>()));
    let summed = imp.op(&name, op, &[v])?;
    Ok((summed, have.iter().copied().filter(kept).collect()))
}

/// `v` (letters `have`) transposed to the order `want` (nothing when it is in it).
fn transpose_to(
    imp: &mut Importer,
    c: &NodeCtx,
    v: NodeIndex,
    have: &[char],
    want: &[char],
    tag: &str,
) -> Result<NodeIndex, GraphError> {
    if have == want {
        return Ok(v);
    }
    let axes: Vec<i64> = want
        .iter()
        .map(|ch| have.iter().position(|x| x == ch).unwrap_or(0) as i64)
        .collect();
    let name = if tag.is_empty() {
        c.name.to_string()
    } else {
        c.sub(&format!("{tag}_transposed"))
    };
    imp.op(&name, Op::Transpose { axes }, &[v])
}
