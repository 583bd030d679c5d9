//! A DAG with runtime extents specialized at values of some of its sizes: the same
//! tensors over the same buffers, each size's reads replaced by its value, and every
//! axis whose runtime extent then is a number given that static extent (its tensor's
//! shape with it; storage stays at the largest sizes). Its schedules see the extents
//! they will run — a decode step's one token: a matrix–vector product, not the register
//! tiles of a prompt's rows, each computing rows past the one there is — and a network
//! runs it when the sizes have those values (`tessera_graph::dynamic`).

use super::RuntimeShapeError;
use crate::dag::ComputeDag;
use crate::tensor::{make_compute, Block, ComputeBody, IterVar, OpKind, Reduce, Tensor};
use std::collections::HashMap;
use tessera_ir::visit::{mutate_expr_children, ExprMutator};
use tessera_ir::{Buffer, Expr, ExprNode};

/// Loads of the extent tensor at the given indices replaced by their values.
struct Fix<'a> {
    extents: &'a Buffer,
    at: &'a HashMap<i64, i64>,
}

impl ExprMutator for Fix<'_> {
    fn mutate_expr(&mut self, e: &Expr) -> Expr {
        if let ExprNode::Load { buffer, indices } = e.node() {
            let k = indices.first().and_then(|i| i.as_int());
            if buffer == self.extents && indices.len() == 1 {
                if let Some(&v) = k.and_then(|k| self.at.get(&k)) {
                    return Expr::int_of(e.dtype(), v);
                }
            }
        }
        mutate_expr_children(self, e)
    }
}

/// `outputs` (a DAG whose sizes are read from `extents`) with size `k` at value `v` for
/// each `(k, v)` of `at`; `None` where no axis's extent becomes a number (nothing to
/// specialize).
pub fn specialize(
    outputs: &[Tensor],
    extents: &Tensor,
    at: &[(usize, i64)],
) -> Result<Option<Vec<Tensor>>, RuntimeShapeError> {
    let build = |tensor: &str| {
        let tensor = tensor.to_string();
        move |source| RuntimeShapeError::Build { tensor, source }
    };
    let dag = ComputeDag::new(outputs).map_err(build(""))?;
    let at: HashMap<i64, i64> = at.iter().map(|&(k, v)| (k as i64, v)).collect();
    let mut fix = Fix {
        extents: extents.buffer(),
        at: &at,
    };
    let mut fixed_any = false;
    let mut rebuilt: HashMap<Buffer, Tensor> = HashMap::new();
    for t in &dag.ops {
        let OpKind::Compute { axis, body } = t.kind() else {
            continue;
        };
        let mut fix_axis = |a: &IterVar| -> IterVar {
            // blocks keep their radix, their valid indices at the values
            let block = a.block().map(|b| Block {
                radix: b.radix,
                valid: tessera_ir::arith::simplify(&fix.mutate_expr(&b.valid)),
            });
            let Some(b) = a.bound() else {
                return a.with_block(block);
            };
            let b = tessera_ir::arith::simplify(&fix.mutate_expr(b));
            match b.as_int() {
                Some(n) => {
                    fixed_any = true;
                    IterVar::from_var(a.var().clone(), Some(n), a.kind()).with_block(block)
                }
                None => a.with_bound(Some(b)).with_block(block),
            }
        };
        let new_axis: Vec<IterVar> = axis.iter().map(&mut fix_axis).collect();
        let body = match body {
            ComputeBody::Expr(e) => ComputeBody::Expr(fix.mutate_expr(e)),
            ComputeBody::Reduce(r) => ComputeBody::Reduce(Reduce {
                axis: r.axis.iter().map(&mut fix_axis).collect(),
                source: fix.mutate_expr(&r.source),
                init: r.init.as_ref().map(|e| fix.mutate_expr(e)),
                condition: r.condition.as_ref().map(|e| fix.mutate_expr(e)),
                op: r.op,
            }),
        };
        let shape: Vec<i64> = new_axis
            .iter()
            .zip(t.shape())
            .map(|(a, &d)| a.extent().unwrap_or(d))
            .collect();
        let new = make_compute(
            t.name(),
            t.tag(),
            shape,
            new_axis,
            body,
            Some(t.buffer().clone()),
            t.attrs().clone(),
        )
        .map_err(build(t.name()))?;
        rebuilt.insert(t.buffer().clone(), new);
    }
    if !fixed_any {
        return Ok(None);
    }
    Ok(Some(super::with_rebuilt(outputs, &rebuilt)))
}
