//! Visitors and mutators over expressions and statements.
//!
//! Every pass is written as one of these: override the node kinds the pass cares about
//! and call the `walk_*` / `mutate_*_children` function for the rest. Mutators keep the
//! unchanged parts of a tree shared: a node whose children come back unchanged (the same
//! pointers) is returned as is.

use crate::buffer::Buffer;
use crate::expr::{Expr, ExprNode, Var};
use crate::stmt::{Stmt, StmtNode};
use std::collections::{HashMap, HashSet};

/// A read-only walk over expressions.
pub trait ExprVisitor {
    fn visit_expr(&mut self, e: &Expr) {
        walk_expr(self, e)
    }
    /// Called for the buffer of every load and store.
    fn visit_buffer(&mut self, _b: &Buffer) {}
}

/// Visits the children of `e`.
pub fn walk_expr<V: ExprVisitor + ?Sized>(v: &mut V, e: &Expr) {
    match e.node() {
        ExprNode::Var(_) | ExprNode::IntImm { .. } | ExprNode::FloatImm { .. } => {}
        ExprNode::Binary { a, b, .. }
        | ExprNode::Cmp { a, b, .. }
        | ExprNode::And(a, b)
        | ExprNode::Or(a, b) => {
            v.visit_expr(a);
            v.visit_expr(b);
        }
        ExprNode::Not(a)
        | ExprNode::Cast { value: a, .. }
        | ExprNode::Broadcast { value: a, .. } => v.visit_expr(a),
        ExprNode::Select {
            cond,
            then_value,
            else_value,
        } => {
            v.visit_expr(cond);
            v.visit_expr(then_value);
            v.visit_expr(else_value);
        }
        ExprNode::Load { buffer, indices } => {
            v.visit_buffer(buffer);
            indices.iter().for_each(|i| v.visit_expr(i));
        }
        ExprNode::Ramp { base, stride, .. } => {
            v.visit_expr(base);
            v.visit_expr(stride);
        }
        ExprNode::Call { args, .. } => args.iter().for_each(|a| v.visit_expr(a)),
    }
}

/// A read-only walk over statements and the expressions in them.
pub trait StmtVisitor: ExprVisitor {
    fn visit_stmt(&mut self, s: &Stmt) {
        walk_stmt(self, s)
    }
}

/// Visits the children of `s`.
pub fn walk_stmt<V: StmtVisitor + ?Sized>(v: &mut V, s: &Stmt) {
    match s.node() {
        StmtNode::For {
            min, extent, body, ..
        } => {
            v.visit_expr(min);
            v.visit_expr(extent);
            v.visit_stmt(body);
        }
        StmtNode::Store {
            buffer,
            indices,
            value,
        } => {
            v.visit_buffer(buffer);
            indices.iter().for_each(|i| v.visit_expr(i));
            v.visit_expr(value);
        }
        StmtNode::Allocate { buffer, body } => {
            v.visit_buffer(buffer);
            v.visit_stmt(body);
        }
        StmtNode::IfThenElse {
            cond,
            then_case,
            else_case,
        } => {
            v.visit_expr(cond);
            v.visit_stmt(then_case);
            if let Some(e) = else_case {
                v.visit_stmt(e);
            }
        }
        StmtNode::Seq(stmts) => stmts.iter().for_each(|s| v.visit_stmt(s)),
        StmtNode::Attr { value, body, .. } | StmtNode::Let { value, body, .. } => {
            v.visit_expr(value);
            v.visit_stmt(body);
        }
        StmtNode::Evaluate(e) => v.visit_expr(e),
        StmtNode::StorageSync(_) => {}
    }
}

/// A rewrite of expressions.
pub trait ExprMutator {
    fn mutate_expr(&mut self, e: &Expr) -> Expr {
        mutate_expr_children(self, e)
    }
    /// Rewrites the buffer of every load and store (identity by default).
    fn mutate_buffer(&mut self, b: &Buffer) -> Buffer {
        b.clone()
    }
}

fn changed(old: &[Expr], new: &[Expr]) -> bool {
    old.iter().zip(new).any(|(a, b)| !a.same_as(b))
}

/// Rebuilds `e` from its mutated children; returns `e` itself when none changed.
pub fn mutate_expr_children<M: ExprMutator + ?Sized>(m: &mut M, e: &Expr) -> Expr {
    let mut kids = |v: &[&Expr]| -> (Vec<Expr>, bool) {
        let new: Vec<Expr> = v.iter().map(|c| m.mutate_expr(c)).collect();
        let ch = v.iter().zip(&new).any(|(a, b)| !a.same_as(b));
        (new, ch)
    };
    let node = match e.node() {
        ExprNode::Var(_) | ExprNode::IntImm { .. } | ExprNode::FloatImm { .. } => return e.clone(),
        ExprNode::Binary { op, a, b } => {
            let (n, ch) = kids(&[a, b]);
            if !ch {
                return e.clone();
            }
            let [a, b]: [Expr; 2] = n.try_into().unwrap();
            ExprNode::Binary { op: *op, a, b }
        }
        ExprNode::Cmp { op, a, b } => {
            let (n, ch) = kids(&[a, b]);
            if !ch {
                return e.clone();
            }
            let [a, b]: [Expr; 2] = n.try_into().unwrap();
            ExprNode::Cmp { op: *op, a, b }
        }
        ExprNode::And(a, b) | ExprNode::Or(a, b) => {
            let (n, ch) = kids(&[a, b]);
            if !ch {
                return e.clone();
            }
            let [na, nb]: [Expr; 2] = n.try_into().unwrap();
            if matches!(e.node(), ExprNode::And(..)) {
                ExprNode::And(na, nb)
            } else {
                ExprNode::Or(na, nb)
            }
        }
        ExprNode::Not(a) => {
            let n = m.mutate_expr(a);
            if n.same_as(a) {
                return e.clone();
            }
            ExprNode::Not(n)
        }
        ExprNode::Select {
            cond,
            then_value,
            else_value,
        } => {
            let (n, ch) = kids(&[cond, then_value, else_value]);
            if !ch {
                return e.clone();
            }
            let [cond, then_value, else_value]: [Expr; 3] = n.try_into().unwrap();
            ExprNode::Select {
                cond,
                then_value,
                else_value,
            }
        }
        ExprNode::Cast { dtype, value } => {
            let n = m.mutate_expr(value);
            if n.same_as(value) {
                return e.clone();
            }
            ExprNode::Cast {
                dtype: *dtype,
                value: n,
            }
        }
        ExprNode::Load { buffer, indices } => {
            let nb = m.mutate_buffer(buffer);
            let ni: Vec<Expr> = indices.iter().map(|i| m.mutate_expr(i)).collect();
            if nb.same_as(buffer) && !changed(indices, &ni) {
                return e.clone();
            }
            ExprNode::Load {
                buffer: nb,
                indices: ni,
            }
        }
        ExprNode::Ramp {
            base,
            stride,
            lanes,
        } => {
            let (n, ch) = kids(&[base, stride]);
            if !ch {
                return e.clone();
            }
            let [base, stride]: [Expr; 2] = n.try_into().unwrap();
            ExprNode::Ramp {
                base,
                stride,
                lanes: *lanes,
            }
        }
        ExprNode::Broadcast { value, lanes } => {
            let n = m.mutate_expr(value);
            if n.same_as(value) {
                return e.clone();
            }
            ExprNode::Broadcast {
                value: n,
                lanes: *lanes,
            }
        }
        ExprNode::Call { dtype, op, args } => {
            let n: Vec<Expr> = args.iter().map(|a| m.mutate_expr(a)).collect();
            if !changed(args, &n) {
                return e.clone();
            }
            ExprNode::Call {
                dtype: *dtype,
                op: *op,
                args: n,
            }
        }
    };
    Expr::new(node)
}

/// A rewrite of statements and the expressions in them.
pub trait StmtMutator: ExprMutator {
    fn mutate_stmt(&mut self, s: &Stmt) -> Stmt {
        mutate_stmt_children(self, s)
    }
}

/// Rebuilds `s` from its mutated children; returns `s` itself when none changed.
pub fn mutate_stmt_children<M: StmtMutator + ?Sized>(m: &mut M, s: &Stmt) -> Stmt {
    let node = match s.node() {
        StmtNode::For {
            var,
            min,
            extent,
            kind,
            body,
        } => {
            let (nm, ne, nb) = (
                m.mutate_expr(min),
                m.mutate_expr(extent),
                m.mutate_stmt(body),
            );
            if nm.same_as(min) && ne.same_as(extent) && nb.same_as(body) {
                return s.clone();
            }
            StmtNode::For {
                var: var.clone(),
                min: nm,
                extent: ne,
                kind: *kind,
                body: nb,
            }
        }
        StmtNode::Store {
            buffer,
            indices,
            value,
        } => {
            let nb = m.mutate_buffer(buffer);
            let ni: Vec<Expr> = indices.iter().map(|i| m.mutate_expr(i)).collect();
            let nv = m.mutate_expr(value);
            if nb.same_as(buffer) && !changed(indices, &ni) && nv.same_as(value) {
                return s.clone();
            }
            StmtNode::Store {
                buffer: nb,
                indices: ni,
                value: nv,
            }
        }
        StmtNode::Allocate { buffer, body } => {
            let nbuf = m.mutate_buffer(buffer);
            let nb = m.mutate_stmt(body);
            if nbuf.same_as(buffer) && nb.same_as(body) {
                return s.clone();
            }
            StmtNode::Allocate {
                buffer: nbuf,
                body: nb,
            }
        }
        StmtNode::IfThenElse {
            cond,
            then_case,
            else_case,
        } => {
            let nc = m.mutate_expr(cond);
            let nt = m.mutate_stmt(then_case);
            let ne = else_case.as_ref().map(|e| m.mutate_stmt(e));
            let same_else = match (else_case, &ne) {
                (Some(a), Some(b)) => a.same_as(b),
                _ => true,
            };
            if nc.same_as(cond) && nt.same_as(then_case) && same_else {
                return s.clone();
            }
            StmtNode::IfThenElse {
                cond: nc,
                then_case: nt,
                else_case: ne,
            }
        }
        StmtNode::Seq(stmts) => {
            let n: Vec<Stmt> = stmts.iter().map(|x| m.mutate_stmt(x)).collect();
            if stmts.iter().zip(&n).all(|(a, b)| a.same_as(b)) {
                return s.clone();
            }
            return Stmt::seq(n.into_iter().filter(|x| !x.is_no_op()).collect());
        }
        StmtNode::Attr { key, value, body } => {
            let (nv, nb) = (m.mutate_expr(value), m.mutate_stmt(body));
            if nv.same_as(value) && nb.same_as(body) {
                return s.clone();
            }
            StmtNode::Attr {
                key: key.clone(),
                value: nv,
                body: nb,
            }
        }
        StmtNode::Let { var, value, body } => {
            let (nv, nb) = (m.mutate_expr(value), m.mutate_stmt(body));
            if nv.same_as(value) && nb.same_as(body) {
                return s.clone();
            }
            StmtNode::Let {
                var: var.clone(),
                value: nv,
                body: nb,
            }
        }
        StmtNode::Evaluate(e) => {
            let n = m.mutate_expr(e);
            if n.same_as(e) {
                return s.clone();
            }
            StmtNode::Evaluate(n)
        }
        StmtNode::StorageSync(_) => return s.clone(),
    };
    Stmt::new(node)
}

/// Calls `f` on every sub-expression of `e`, children before parents.
pub fn post_order_visit(e: &Expr, f: &mut dyn FnMut(&Expr)) {
    struct P<'a>(&'a mut dyn FnMut(&Expr));
    impl ExprVisitor for P<'_> {
        fn visit_expr(&mut self, e: &Expr) {
            walk_expr(self, e);
            (self.0)(e);
        }
    }
    P(f).visit_expr(e)
}

/// Replaces variables by expressions.
pub struct Substitute<'a> {
    pub map: &'a HashMap<Var, Expr>,
}

impl ExprMutator for Substitute<'_> {
    fn mutate_expr(&mut self, e: &Expr) -> Expr {
        if let ExprNode::Var(v) = e.node() {
            return self.map.get(v).cloned().unwrap_or_else(|| e.clone());
        }
        mutate_expr_children(self, e)
    }
}
impl StmtMutator for Substitute<'_> {}

/// `e` with every variable of `map` replaced by its expression.
pub fn substitute(e: &Expr, map: &HashMap<Var, Expr>) -> Expr {
    if map.is_empty() {
        return e.clone();
    }
    Substitute { map }.mutate_expr(e)
}

/// `s` with every variable of `map` replaced by its expression.
pub fn substitute_stmt(s: &Stmt, map: &HashMap<Var, Expr>) -> Stmt {
    if map.is_empty() {
        return s.clone();
    }
    Substitute { map }.mutate_stmt(s)
}

/// The variables that occur in `e`.
pub fn collect_vars(e: &Expr) -> HashSet<Var> {
    let mut out = HashSet::new();
    post_order_visit(e, &mut |x| {
        if let ExprNode::Var(v) = x.node() {
            out.insert(v.clone());
        }
    });
    out
}

/// Whether `e` mentions any variable for which `pred` holds.
pub fn uses_var(e: &Expr, pred: &dyn Fn(&Var) -> bool) -> bool {
    let mut found = false;
    post_order_visit(e, &mut |x| {
        if let ExprNode::Var(v) = x.node() {
            found |= pred(v);
        }
    });
    found
}
