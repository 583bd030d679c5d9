//! The verifier: a well-formed function passes; each rule it checks refuses one small
//! function that breaks only that rule, with the error naming what is wrong.

use tessera_ir::verify::{verify, VerifyError};
use tessera_ir::{Buffer, DataType, Expr, ForKind, PrimFunc, Stmt, StorageScope, ThreadAxis, Var};

fn f32t() -> DataType {
    DataType::float32()
}

fn loop_(v: &Var, extent: Expr, kind: ForKind, body: Stmt) -> Stmt {
    Stmt::for_loop(v.clone(), Expr::int(0), extent, kind, body)
}

fn serial(v: &Var, extent: i64, body: Stmt) -> Stmt {
    loop_(v, Expr::int(extent), ForKind::Serial, body)
}

fn func(params: &[&Buffer], body: Stmt) -> PrimFunc {
    PrimFunc::new("f", params.iter().map(|b| (*b).clone()).collect(), body)
}

/// The error of `f`, which must be refused.
fn refusal(f: &PrimFunc) -> VerifyError {
    match verify(f) {
        Err(e) => e,
        Ok(()) => panic!("accepted:\n{f}"),
    }
}

#[test]
fn a_well_formed_function_passes() {
    let a = Buffer::global("A", f32t(), &[4, 8]);
    let (i, j, t) = (Var::int("i"), Var::int("j"), Var::int("t"));
    let tmp = Buffer::new("tmp", f32t(), vec![Expr::int(8)], StorageScope::Local);
    let body = serial(
        &i,
        4,
        Stmt::allocate(
            tmp.clone(),
            Stmt::seq(vec![
                loop_(
                    &j,
                    Expr::int(8),
                    ForKind::Vectorized,
                    Stmt::store(&tmp, vec![j.to_expr()], Expr::float(0.0)),
                ),
                Stmt::let_stmt(
                    t.clone(),
                    i.to_expr() * Expr::int(2),
                    Stmt::if_then(
                        t.to_expr().lt(Expr::int(4)),
                        Stmt::store(
                            &a,
                            vec![i.to_expr(), t.to_expr()],
                            Expr::load(&tmp, vec![t.to_expr()]),
                        ),
                    ),
                ),
            ]),
        ),
    );
    // the same variable in two sibling loops is fine
    let again = serial(
        &j,
        8,
        Stmt::store(&a, vec![Expr::int(0), j.to_expr()], Expr::float(1.0)),
    );
    verify(&func(&[&a], Stmt::seq(vec![body, again]))).unwrap();
}

#[test]
fn a_symbolic_size_of_a_parameter_is_defined_everywhere() {
    let n = Var::int("n");
    let a = Buffer::new("A", f32t(), vec![n.to_expr()], StorageScope::Global);
    let i = Var::int("i");
    let body = loop_(
        &i,
        n.to_expr(),
        ForKind::Serial,
        Stmt::store(&a, vec![i.to_expr()], Expr::float(0.0)),
    );
    verify(&func(&[&a], body)).unwrap();
}

#[test]
fn scopes() {
    let a = Buffer::global("A", f32t(), &[8]);
    let i = Var::int("i");
    let free = Var::int("free");
    // a variable no loop binds
    let e = refusal(&func(
        &[&a],
        Stmt::store(&a, vec![free.to_expr()], Expr::float(1.0)),
    ));
    assert_eq!(e, VerifyError::UndefinedVar { var: "free".into() });
    // a loop variable read after its loop
    let after = Stmt::seq(vec![
        serial(&i, 8, Stmt::store(&a, vec![i.to_expr()], Expr::float(1.0))),
        Stmt::store(&a, vec![i.to_expr()], Expr::float(2.0)),
    ]);
    assert_eq!(
        refusal(&func(&[&a], after)),
        VerifyError::UndefinedVar { var: "i".into() }
    );
    // bound again inside its own loop
    let nested = serial(
        &i,
        8,
        serial(&i, 8, Stmt::store(&a, vec![i.to_expr()], Expr::float(1.0))),
    );
    assert_eq!(
        refusal(&func(&[&a], nested)),
        VerifyError::Rebound { var: "i".into() }
    );
    // a buffer neither a parameter nor allocated around the access
    let stranger = Buffer::global("stranger", f32t(), &[8]);
    let e = refusal(&func(
        &[&a],
        Stmt::store(&stranger, vec![Expr::int(0)], Expr::float(1.0)),
    ));
    assert_eq!(
        e,
        VerifyError::UnknownBuffer {
            buffer: "stranger".into()
        }
    );
    // an allocation read after it ends
    let tmp = Buffer::new("tmp", f32t(), vec![Expr::int(8)], StorageScope::Local);
    let out_of_scope = Stmt::seq(vec![
        Stmt::allocate(
            tmp.clone(),
            Stmt::store(&tmp, vec![Expr::int(0)], Expr::float(0.0)),
        ),
        Stmt::store(&a, vec![Expr::int(0)], Expr::load(&tmp, vec![Expr::int(0)])),
    ]);
    let e = refusal(&func(&[&a], out_of_scope));
    assert_eq!(
        e,
        VerifyError::UnknownBuffer {
            buffer: "tmp".into()
        }
    );
}

#[test]
fn accesses() {
    let a = Buffer::global("A", f32t(), &[4, 8]);
    let e = refusal(&func(
        &[&a],
        Stmt::store(&a, vec![Expr::int(0)], Expr::float(1.0)),
    ));
    assert_eq!(
        e,
        VerifyError::Rank {
            buffer: "A".into(),
            rank: 2,
            indices: 1
        }
    );
    let e = refusal(&func(
        &[&a],
        Stmt::store(&a, vec![Expr::int(0), Expr::float(1.0)], Expr::float(1.0)),
    ));
    assert!(
        matches!(&e, VerifyError::IndexType { buffer, dtype, .. } if buffer == "A" && *dtype == f32t()),
        "{e}"
    );
}

#[test]
fn loops() {
    let a = Buffer::global("A", f32t(), &[8]);
    let (i, n) = (Var::int("i"), Var::int("n"));
    let store = |v: &Var| Stmt::store(&a, vec![v.to_expr()], Expr::float(1.0));
    // a float extent
    let e = refusal(&func(
        &[&a],
        loop_(&i, Expr::float(8.0), ForKind::Serial, store(&i)),
    ));
    assert!(
        matches!(&e, VerifyError::LoopType { var, what: "extent", .. } if var == "i"),
        "{e}"
    );
    // a vectorized loop of a computed extent
    let body = Stmt::let_stmt(
        n.clone(),
        Expr::int(8),
        loop_(&i, n.to_expr(), ForKind::Vectorized, store(&i)),
    );
    let e = refusal(&func(&[&a], body));
    assert!(
        matches!(&e, VerifyError::VectorExtent { var, .. } if var == "i"),
        "{e}"
    );
    // a block loop inside a thread loop
    let (t, b) = (Var::int("t"), Var::int("b"));
    let body = loop_(
        &t,
        Expr::int(8),
        ForKind::ThreadBinding(ThreadAxis::ThreadIdxX),
        loop_(
            &b,
            Expr::int(1),
            ForKind::ThreadBinding(ThreadAxis::BlockIdxX),
            store(&t),
        ),
    );
    let e = refusal(&func(&[&a], body));
    assert_eq!(
        e,
        VerifyError::BlockInThread {
            var: "b".into(),
            axis: ThreadAxis::BlockIdxX,
            outer: ThreadAxis::ThreadIdxX
        }
    );
    assert!(
        e.to_string()
            .contains("blockIdx.x inside a loop bound to threadIdx.x"),
        "{e}"
    );
}

#[test]
fn types() {
    let a = Buffer::global("A", f32t(), &[8]);
    let ramp = |lanes: u16| Expr::ramp(Expr::int(0), Expr::int(1), lanes);
    // operands of two lane counts
    let mixed = Expr::load(&a, vec![ramp(8)]) + Expr::load(&a, vec![ramp(4)]);
    let e = refusal(&func(&[&a], Stmt::store(&a, vec![ramp(8)], mixed)));
    assert!(
        matches!(&e, VerifyError::OperandTypes { a, b, .. } if a.lanes == 8 && b.lanes == 4),
        "{e}"
    );
    // an `if` on a float, and on a vector of booleans
    let load0 = Expr::load(&a, vec![Expr::int(0)]);
    let e = refusal(&func(
        &[&a],
        Stmt::if_then(
            load0.clone(),
            Stmt::store(&a, vec![Expr::int(0)], Expr::float(0.0)),
        ),
    ));
    assert!(
        matches!(&e, VerifyError::Condition { scalar: true, .. }),
        "{e}"
    );
    let lanes = Expr::load(&a, vec![ramp(8)]).gt(Expr::broadcast(Expr::float(0.0), 8));
    let e = refusal(&func(
        &[&a],
        Stmt::if_then(lanes, Stmt::store(&a, vec![Expr::int(0)], Expr::float(0.0))),
    ));
    assert!(e.to_string().contains("not a boolean of one lane"), "{e}");
}
