//! `rfactor`: factor a reduction into partial reductions over one leaf reduce axis, made
//! a data-parallel axis of a new stage, and a final reduction over that axis.

use crate::error::ScheduleError;
use crate::lower::reduce_leaf_algebra;
use crate::schedule::Schedule;
use crate::tensor::{make_compute, ComputeBody, IterKind, IterVar, Reduce, ReduceOp, Tensor};
use std::collections::HashMap;
use tessera_ir::visit::substitute;
use tessera_ir::{Expr, Var};

pub(crate) fn rfactor(
    sch: &mut Schedule,
    t: &Tensor,
    axis: &IterVar,
    factor_axis: usize,
) -> Result<Tensor, ScheduleError> {
    let ti = sch.stage_index(t)?;
    let st = sch.stages[ti].clone();
    let err = |reason: &str| ScheduleError::BadRfactor {
        stage: st.name().to_string(),
        axis: axis.name().to_string(),
        reason: reason.to_string(),
    };
    let Some(ComputeBody::Reduce(red)) = st.op.body() else {
        return Err(err("the stage is not a reduction"));
    };
    // an init that is the combiner's identity over the type's values (a float maximum
    // from −∞) may start every partial result as well
    if red.init.as_ref().is_some_and(|i| !is_identity(red.op, i)) {
        return Err(err("a reduction with an explicit init cannot be factored (the init would be applied per partial result)"));
    }
    let init = red.init.clone();
    if !st.leaf_iter_vars.contains(axis) {
        return Err(ScheduleError::NotLeaf {
            stage: st.name().to_string(),
            axis: axis.name().to_string(),
        });
    }
    if !axis.is_reduce() {
        return Err(err("it is not a reduction axis"));
    }
    if factor_axis > st.op.ndim() {
        return Err(err(&format!(
            "factor_axis {factor_axis} is beyond the {} dimensions of the output",
            st.op.ndim()
        )));
    }
    if st
        .relations
        .iter()
        .any(|r| !crate::lower::relation_is_reduce(r))
        || !st.annotations.is_empty()
    {
        return Err(err(
            "rfactor must come before the stage's data-parallel loops are transformed or annotated",
        ));
    }

    // Express the root reduce variables through the leaf reduce variables.
    let (leaf_ext, root_vals, guards) = reduce_leaf_algebra(&st);
    let mut vmap: HashMap<Var, Expr> = HashMap::new();
    let mut rf_axis: Vec<IterVar> = Vec::new();
    for a in st.op.axis() {
        let n = a.copy_with_name(a.name());
        vmap.insert(a.var().clone(), n.expr());
        rf_axis.push(n);
    }
    let kept = IterVar::new(
        format!("{}.v", axis.name()),
        Some(leaf_ext[axis]),
        IterKind::DataPar,
    );
    rf_axis.insert(factor_axis, kept.clone());
    let mut leaf_map: HashMap<Var, Expr> = HashMap::new();
    let mut rf_reduce = Vec::new();
    for l in st.leaf_iter_vars.iter().filter(|l| l.is_reduce()) {
        if l == axis {
            leaf_map.insert(l.var().clone(), kept.expr());
        } else {
            let n = IterVar::new(l.name(), Some(leaf_ext[l]), IterKind::Reduce)
                .with_bound(outer_runtime_extent(&st, l, &leaf_ext));
            leaf_map.insert(l.var().clone(), n.expr());
            rf_reduce.push(n);
        }
    }
    for (rv, val) in &root_vals {
        vmap.insert(rv.clone(), substitute(val, &leaf_map));
    }
    let mut conds: Vec<Expr> = guards.iter().map(|g| substitute(g, &leaf_map)).collect();
    if let Some(c) = &red.condition {
        conds.push(substitute(c, &vmap));
    }
    let source = substitute(&red.source, &vmap);
    // a reduce axis with a runtime extent stops there in the partial sums too: the
    // source masked (a blend in vector form), not guarded (a scalar loop)
    let past: Vec<Expr> = red
        .axis
        .iter()
        .filter_map(|a| Some(substitute(root_vals.get(a.var())?, &leaf_map).lt(a.bound()?)))
        .collect();
    let source = crate::lower::mask(source, &past, red.op, st.op.dtype());
    let rf_body = if rf_reduce.is_empty() {
        // Every reduce leaf but the factored one is gone: the partial result is the
        // (guarded) source itself.
        let body = if conds.is_empty() {
            source
        } else {
            let identity = init
                .clone()
                .unwrap_or_else(|| red.op.identity(st.op.dtype()));
            Expr::select(Expr::all(conds), source, identity)
        };
        ComputeBody::Expr(body)
    } else {
        ComputeBody::Reduce(Reduce {
            op: red.op,
            source,
            axis: rf_reduce,
            init: init.clone(),
            condition: if conds.is_empty() {
                None
            } else {
                Some(Expr::all(conds))
            },
        })
    };
    let mut shape = st.op.shape().to_vec();
    shape.insert(factor_axis, leaf_ext[axis]);
    let rf = make_compute(
        &format!("{}.rf", st.name()),
        st.op.tag(),
        shape,
        rf_axis,
        rf_body,
        None,
        Default::default(),
    )?;

    let r = IterVar::new(
        format!("{}.v", axis.name()),
        Some(leaf_ext[axis]),
        IterKind::Reduce,
    );
    let mut idx: Vec<Expr> = st.op.axis().iter().map(|a| a.expr()).collect();
    idx.insert(factor_axis, r.expr());
    let new_body = ComputeBody::Reduce(Reduce {
        op: red.op,
        source: rf.at(&idx),
        axis: vec![r],
        init,
        condition: None,
    });
    sch.replace_with_rfactor(ti, rf.clone(), new_body)?;
    Ok(rf)
}

/// The runtime extent of reduce leaf `l` where it is the outer part of a split of a
/// root axis with one (`⌈n / inner⌉`): the partial sums' loop stops where the source
/// does (the values past it are masked).
fn outer_runtime_extent(
    st: &crate::schedule::Stage,
    l: &IterVar,
    leaf_ext: &HashMap<IterVar, i64>,
) -> Option<Expr> {
    st.relations.iter().find_map(|r| match r {
        crate::schedule::Relation::Split {
            parent,
            outer,
            inner,
            ..
        } if outer == l => {
            let n = parent.bound()?;
            let f = leaf_ext.get(inner).copied().unwrap_or(1).max(1);
            Some(Expr::floordiv(n.clone() + Expr::int(f - 1), Expr::int(f)))
        }
        _ => None,
    })
}

/// Whether `init` is an identity of `op` over every value of its type: 0 for a sum, 1
/// for a product, −∞ for a float maximum and +∞ for a float minimum.
fn is_identity(op: ReduceOp, init: &Expr) -> bool {
    let v = match init.node() {
        tessera_ir::ExprNode::FloatImm { value, .. } => *value,
        tessera_ir::ExprNode::IntImm { value, .. } => *value as f64,
        _ => return false,
    };
    match op {
        ReduceOp::Sum => v == 0.0,
        ReduceOp::Prod => v == 1.0,
        ReduceOp::Max => v == f64::NEG_INFINITY,
        ReduceOp::Min => v == f64::INFINITY,
    }
}
