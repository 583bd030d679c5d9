//! Unit tests of the reference interpreter.

use std::collections::HashMap;
use tessera_ir::interp::{eval_int, run, HostBuffer, InterpError, Scalar};
use tessera_ir::{Buffer, DataType, Expr, ForKind, PrimFunc, Stmt, StorageScope, ThreadAxis, Var};

fn f32s(n: usize, f: impl Fn(usize) -> f32) -> Vec<f64> {
    (0..n).map(|i| f(i) as f64).collect()
}

/// `C[i, j] = sum_k A[i, k] * B[k, j]` for A: [m, l], B: [l, n].
fn matmul(m: i64, n: i64, l: i64) -> PrimFunc {
    let a = Buffer::global("A", DataType::float32(), &[m, l]);
    let b = Buffer::global("B", DataType::float32(), &[l, n]);
    let c = Buffer::global("C", DataType::float32(), &[m, n]);
    let (i, j, k) = (Var::int("i"), Var::int("j"), Var::int("k"));
    let cij = || vec![i.to_expr(), j.to_expr()];
    let update = Stmt::store(
        &c,
        cij(),
        Expr::load(&c, cij())
            + Expr::load(&a, vec![i.to_expr(), k.to_expr()])
                * Expr::load(&b, vec![k.to_expr(), j.to_expr()]),
    );
    let body = Stmt::seq(vec![
        Stmt::store(&c, cij(), Expr::float(0.0)),
        Stmt::for_loop(k, Expr::int(0), Expr::int(l), ForKind::Serial, update),
    ]);
    let body = Stmt::for_loop(
        i,
        Expr::int(0),
        Expr::int(m),
        ForKind::Parallel,
        Stmt::for_loop(j, Expr::int(0), Expr::int(n), ForKind::Vectorized, body),
    );
    PrimFunc::new("matmul", vec![a, b, c], body)
}

#[test]
fn matmul_matches_plain_loops() {
    let (m, n, l) = (4usize, 3usize, 5usize);
    let av: Vec<f32> = (0..m * l).map(|x| (x as f32 * 0.37).sin()).collect();
    let bv: Vec<f32> = (0..l * n).map(|x| (x as f32 * 1.3).cos() - 0.25).collect();
    let mut args = [
        HostBuffer::from_f64(DataType::float32(), &[m, l], &f32s(m * l, |x| av[x])),
        HostBuffer::from_f64(DataType::float32(), &[l, n], &f32s(l * n, |x| bv[x])),
        HostBuffer::zeros(DataType::float32(), &[m, n]),
    ];
    run(&matmul(m as i64, n as i64, l as i64), &mut args).unwrap();
    let mut want = vec![0f32; m * n];
    for i in 0..m {
        for j in 0..n {
            let mut acc = 0f32;
            for k in 0..l {
                acc += av[i * l + k] * bv[k * n + j];
            }
            want[i * n + j] = acc;
        }
    }
    // Every operation rounds to float32, so the result is bit-exact.
    assert_eq!(args[2].to_f64(), f32s(m * n, |x| want[x]));
    // The inputs are untouched.
    assert_eq!(args[0].to_f64(), f32s(m * l, |x| av[x]));
}

#[test]
fn argument_errors_are_typed() {
    let f = matmul(2, 2, 2);
    let good = || {
        vec![
            HostBuffer::zeros(DataType::float32(), &[2, 2]),
            HostBuffer::zeros(DataType::float32(), &[2, 2]),
            HostBuffer::zeros(DataType::float32(), &[2, 2]),
        ]
    };
    let mut args = good();
    assert!(run(&f, &mut args).is_ok());

    let mut two = good();
    two.pop();
    assert_eq!(
        run(&f, &mut two),
        Err(InterpError::ArgCount {
            func: "matmul".into(),
            expected: 3,
            got: 2
        })
    );

    let mut shape = good();
    shape[1] = HostBuffer::zeros(DataType::float32(), &[2, 3]);
    assert_eq!(
        run(&f, &mut shape),
        Err(InterpError::ArgMismatch {
            index: 1,
            name: "B".into(),
            expected_dtype: DataType::float32(),
            expected_shape: vec![2, 2],
            got_dtype: DataType::float32(),
            got_shape: vec![2, 3],
        })
    );

    let mut rank = good();
    rank[0] = HostBuffer::zeros(DataType::float32(), &[4]);
    assert!(matches!(
        run(&f, &mut rank),
        Err(InterpError::ArgMismatch { index: 0, .. })
    ));

    let mut dtype = good();
    dtype[2] = HostBuffer::zeros(DataType::float16(), &[2, 2]);
    assert!(matches!(
        run(&f, &mut dtype),
        Err(InterpError::ArgMismatch { index: 2, expected_dtype, got_dtype, .. })
            if expected_dtype == DataType::float32() && got_dtype == DataType::float16()
    ));

    // A buffer whose data does not fill its shape.
    let mut short = good();
    short[0].data.pop();
    assert!(matches!(
        run(&f, &mut short),
        Err(InterpError::ArgMismatch { index: 0, .. })
    ));

    // A parameter with a symbolic shape cannot be run.
    let n = Var::int("n");
    let p = Buffer::new(
        "P",
        DataType::float32(),
        vec![n.to_expr()],
        StorageScope::Global,
    );
    let g = PrimFunc::new("g", vec![p], Stmt::no_op());
    let mut args = [HostBuffer::zeros(DataType::float32(), &[3])];
    assert_eq!(
        run(&g, &mut args),
        Err(InterpError::SymbolicShape("P".into()))
    );
}

#[test]
fn out_of_bounds_accesses_are_errors() {
    let a = Buffer::global("A", DataType::float32(), &[4]);
    let i = Var::int("i");
    // One past the end.
    let f = PrimFunc::new(
        "f",
        vec![a.clone()],
        Stmt::for_loop(
            i.clone(),
            Expr::int(0),
            Expr::int(5),
            ForKind::Serial,
            Stmt::store(&a, vec![i.to_expr()], Expr::float(1.0)),
        ),
    );
    let mut args = [HostBuffer::zeros(DataType::float32(), &[4])];
    assert_eq!(
        run(&f, &mut args),
        Err(InterpError::OutOfBounds {
            buffer: "A".into(),
            indices: vec![4],
            shape: vec![4]
        })
    );
    // The stores before the bad one happened.
    assert_eq!(args[0].to_f64(), vec![1.0; 4]);

    // A negative index on a load.
    let b = Buffer::global("B", DataType::float32(), &[2, 2]);
    let f = PrimFunc::new(
        "f",
        vec![a.clone(), b.clone()],
        Stmt::store(
            &a,
            vec![Expr::int(0)],
            Expr::load(&b, vec![Expr::int(1), Expr::int(-1)]),
        ),
    );
    let mut args = [
        HostBuffer::zeros(DataType::float32(), &[4]),
        HostBuffer::zeros(DataType::float32(), &[2, 2]),
    ];
    assert_eq!(
        run(&f, &mut args),
        Err(InterpError::OutOfBounds {
            buffer: "B".into(),
            indices: vec![1, -1],
            shape: vec![2, 2]
        })
    );

    // Row-major flattening must not hide a bad inner index: B[0, 2] is in the flat range.
    let f = PrimFunc::new(
        "f",
        vec![a.clone(), b.clone()],
        Stmt::store(
            &a,
            vec![Expr::int(0)],
            Expr::load(&b, vec![Expr::int(0), Expr::int(2)]),
        ),
    );
    assert!(matches!(
        run(&f, &mut args),
        Err(InterpError::OutOfBounds { .. })
    ));

    // The wrong number of indices.
    let f = PrimFunc::new(
        "f",
        vec![a.clone(), b],
        Stmt::store(&a, vec![Expr::int(0), Expr::int(0)], Expr::float(0.0)),
    );
    assert!(matches!(
        run(&f, &mut args),
        Err(InterpError::OutOfBounds { .. })
    ));
}

#[test]
fn division_by_zero_is_an_error() {
    let x = Var::int("x");
    let b: HashMap<Var, i64> = [(x.clone(), 0)].into_iter().collect();
    for e in [
        Expr::floordiv(Expr::int(7), x.to_expr()),
        Expr::floormod(Expr::int(7), x.to_expr()),
        Expr::int(7) / x.to_expr(),
        Expr::int(7) % x.to_expr(),
    ] {
        assert_eq!(eval_int(&e, &b), None, "{e}");
    }
    let a = Buffer::global("A", DataType::int32(), &[1]);
    let f = PrimFunc::new(
        "f",
        vec![a.clone()],
        Stmt::let_stmt(
            x.clone(),
            Expr::int(0),
            Stmt::store(
                &a,
                vec![Expr::int(0)],
                Expr::floordiv(Expr::int(1), x.to_expr()),
            ),
        ),
    );
    let mut args = [HostBuffer::zeros(DataType::int32(), &[1])];
    assert_eq!(
        run(&f, &mut args),
        Err(InterpError::DivisionByZero("floordiv(1, x)".into()))
    );
    // Float division by zero is not an error: it gives an infinity.
    let g = Buffer::global("G", DataType::float32(), &[1]);
    let f = PrimFunc::new(
        "f",
        vec![g.clone()],
        Stmt::store(&g, vec![Expr::int(0)], Expr::float(1.0) / Expr::float(0.0)),
    );
    let mut args = [HostBuffer::zeros(DataType::float32(), &[1])];
    run(&f, &mut args).unwrap();
    assert_eq!(args[0].to_f64(), vec![f64::INFINITY]);
}

#[test]
fn integer_semantics() {
    let (x, y) = (Var::int("x"), Var::int("y"));
    let ev = |e: Expr, xv: i64, yv: i64| {
        eval_int(
            &e,
            &[(x.clone(), xv), (y.clone(), yv)].into_iter().collect(),
        )
    };
    let (xe, ye) = (x.to_expr(), y.to_expr());
    for (a, b) in [(7, 2), (-7, 2), (7, -2), (-7, -2), (6, 3), (-6, 3)] {
        assert_eq!(
            ev(Expr::floordiv(xe.clone(), ye.clone()), a, b),
            Some(a.div_euclid(b) - i64::from(b < 0 && a.rem_euclid(b) != 0))
        );
        assert_eq!(ev(xe.clone() / ye.clone(), a, b), Some(a / b));
        assert_eq!(ev(xe.clone() % ye.clone(), a, b), Some(a % b));
        let fm = ev(Expr::floormod(xe.clone(), ye.clone()), a, b).unwrap();
        let fd = ev(Expr::floordiv(xe.clone(), ye.clone()), a, b).unwrap();
        assert_eq!(fd * b + fm, a);
        assert!(fm == 0 || (fm < 0) == (b < 0), "floormod({a}, {b}) = {fm}");
    }
    // int32 arithmetic wraps.
    assert_eq!(
        ev(xe.clone() + 1, i32::MAX as i64, 0),
        Some(i32::MIN as i64)
    );
    assert_eq!(ev(xe.clone() * ye.clone(), 65536, 65536), Some(0));
    // Comparisons and logic give 0 or 1.
    assert_eq!(ev(xe.lt(ye.clone()), 1, 2), Some(1));
    assert_eq!(ev(Expr::not(xe.lt(ye.clone())), 1, 2), Some(0));
    assert_eq!(ev(Expr::and(xe.lt(ye.clone()), ye.gt(5)), 1, 2), Some(0));
    assert_eq!(ev(Expr::or(xe.lt(ye.clone()), ye.gt(5)), 1, 2), Some(1));
    assert_eq!(
        ev(Expr::select(xe.ge(0), xe.clone(), -xe.clone()), -9, 0),
        Some(9)
    );
    // An unbound variable gives nothing.
    assert_eq!(eval_int(&(xe + 1), &HashMap::new()), None);
}

#[test]
fn if_then_else_evaluates_only_the_branch_taken() {
    // B[i] = i < 4 ? A[i] : 0 for i in [0, 6): a padded read of A[4].
    let a = Buffer::global("A", DataType::float32(), &[4]);
    let b = Buffer::global("B", DataType::float32(), &[6]);
    let i = Var::int("i");
    let guarded = Expr::if_then_else(
        i.to_expr().lt(4),
        Expr::load(&a, vec![i.to_expr()]),
        Expr::float(0.0),
    );
    let f = PrimFunc::new(
        "pad",
        vec![a.clone(), b.clone()],
        Stmt::for_loop(
            i.clone(),
            Expr::int(0),
            Expr::int(6),
            ForKind::Serial,
            Stmt::store(&b, vec![i.to_expr()], guarded),
        ),
    );
    let mut args = [
        HostBuffer::from_f64(DataType::float32(), &[4], &[1.0, 2.0, 3.0, 4.0]),
        HostBuffer::zeros(DataType::float32(), &[6]),
    ];
    run(&f, &mut args).unwrap();
    assert_eq!(args[1].to_f64(), vec![1.0, 2.0, 3.0, 4.0, 0.0, 0.0]);

    // A division by zero in the untaken branch is fine too.
    let x = Var::int("x");
    let e = Expr::if_then_else(
        x.to_expr().eq(0),
        Expr::int(-1),
        Expr::int(10) / x.to_expr(),
    );
    assert_eq!(
        eval_int(&e, &[(x.clone(), 0)].into_iter().collect()),
        Some(-1)
    );
    assert_eq!(
        eval_int(&e, &[(x.clone(), 3)].into_iter().collect()),
        Some(3)
    );

    // `select` evaluates both sides: the same program with it reads out of bounds.
    let selected = Expr::select(
        i.to_expr().lt(4),
        Expr::load(&a, vec![i.to_expr()]),
        Expr::float(0.0),
    );
    let f = PrimFunc::new(
        "pad",
        vec![a.clone(), b.clone()],
        Stmt::for_loop(
            i.clone(),
            Expr::int(0),
            Expr::int(6),
            ForKind::Serial,
            Stmt::store(&b, vec![i.to_expr()], selected),
        ),
    );
    assert!(matches!(
        run(&f, &mut args),
        Err(InterpError::OutOfBounds { .. })
    ));
}

#[test]
fn narrow_integer_stores_and_arithmetic_wrap() {
    let q = Buffer::global("Q", DataType::int(8), &[4]);
    let u = Buffer::global("U", DataType::uint(8), &[2]);
    let i8c = |v| Expr::int_of(DataType::int(8), v);
    let body = Stmt::seq(vec![
        Stmt::store(&q, vec![Expr::int(0)], Expr::int(200)),
        Stmt::store(&q, vec![Expr::int(1)], Expr::int(-129)),
        Stmt::store(&q, vec![Expr::int(2)], i8c(100) + i8c(100)),
        Stmt::store(
            &q,
            vec![Expr::int(3)],
            Expr::cast(DataType::int(8), Expr::float(-3.7)),
        ),
        Stmt::store(&u, vec![Expr::int(0)], Expr::int(-1)),
        Stmt::store(&u, vec![Expr::int(1)], Expr::int(256 + 7)),
    ]);
    let f = PrimFunc::new("wrap", vec![q, u], body);
    let mut args = [
        HostBuffer::zeros(DataType::int(8), &[4]),
        HostBuffer::zeros(DataType::uint(8), &[2]),
    ];
    run(&f, &mut args).unwrap();
    assert_eq!(
        args[0].data,
        vec![
            Scalar::I(-56),
            Scalar::I(127),
            Scalar::I(-56),
            Scalar::I(-3)
        ]
    );
    assert_eq!(args[1].data, vec![Scalar::I(255), Scalar::I(7)]);
}

#[test]
fn float_stores_round_to_the_type() {
    let f32b = Buffer::global("F", DataType::float32(), &[3]);
    let f16b = Buffer::global("H", DataType::float16(), &[2]);
    let bb = Buffer::global("Bo", DataType::bool(), &[1]);
    let d = |v| Expr::float_of(DataType::float64(), v);
    let body = Stmt::seq(vec![
        Stmt::store(&f32b, vec![Expr::int(0)], d(0.1)),
        Stmt::store(&f32b, vec![Expr::int(1)], Expr::int(16_777_217)),
        // float32 arithmetic rounds every result: 1 + 1e-8 == 1.
        Stmt::store(
            &f32b,
            vec![Expr::int(2)],
            Expr::float(1.0) + Expr::float(1e-8),
        ),
        Stmt::store(&f16b, vec![Expr::int(0)], Expr::float(0.1)),
        Stmt::store(&f16b, vec![Expr::int(1)], Expr::float(70000.0)),
        Stmt::store(&bb, vec![Expr::int(0)], Expr::float(0.5)),
    ]);
    let f = PrimFunc::new("round", vec![f32b, f16b, bb], body);
    let mut args = [
        HostBuffer::zeros(DataType::float32(), &[3]),
        HostBuffer::zeros(DataType::float16(), &[2]),
        HostBuffer::zeros(DataType::bool(), &[1]),
    ];
    run(&f, &mut args).unwrap();
    assert_eq!(args[0].to_f64(), vec![0.1f32 as f64, 16_777_216.0, 1.0]);
    assert_eq!(
        args[1].to_f64(),
        vec![half::f16::from_f64(0.1).to_f64(), f64::INFINITY]
    );
    assert_eq!(args[2].data, vec![Scalar::I(1)]);
    // Host buffers made from f64 values round the same way.
    let h = HostBuffer::from_f64(DataType::float32(), &[1], &[0.1]);
    assert_eq!(h.to_f64(), vec![0.1f32 as f64]);
}

#[test]
fn vector_ramp_loads_and_stores() {
    // B[ramp(4*i, 1, 4)] = A[ramp(7 - 4*i, -1, 4)] * x4(2f) for i in [0, 2): a reversed copy.
    let a = Buffer::global("A", DataType::float32(), &[8]);
    let b = Buffer::global("B", DataType::float32(), &[8]);
    let s = Buffer::global("S", DataType::float32(), &[2, 8]);
    let i = Var::int("i");
    let src = Expr::load(
        &a,
        vec![Expr::ramp(Expr::int(7) - &i * 4, Expr::int(-1), 4)],
    );
    assert_eq!(src.dtype(), DataType::float32().with_lanes(4));
    let body = Stmt::seq(vec![
        Stmt::for_loop(
            i.clone(),
            Expr::int(0),
            Expr::int(2),
            ForKind::Vectorized,
            Stmt::store(
                &b,
                vec![Expr::ramp(&i * 4, Expr::int(1), 4)],
                src * Expr::broadcast(Expr::float(2.0), 4),
            ),
        ),
        // A strided vector store into the second row of S, and a broadcast store.
        Stmt::store(
            &s,
            vec![Expr::int(1), Expr::ramp(Expr::int(0), Expr::int(2), 4)],
            Expr::load(&a, vec![Expr::ramp(Expr::int(0), Expr::int(1), 4)]),
        ),
        Stmt::store(
            &s,
            vec![Expr::int(0), Expr::ramp(Expr::int(1), Expr::int(2), 4)],
            Expr::broadcast(Expr::float(-1.0), 4),
        ),
    ]);
    let f = PrimFunc::new("vec", vec![a.clone(), b.clone(), s.clone()], body);
    let av: Vec<f64> = (0..8).map(|x| x as f64).collect();
    let mut args = [
        HostBuffer::from_f64(DataType::float32(), &[8], &av),
        HostBuffer::zeros(DataType::float32(), &[8]),
        HostBuffer::zeros(DataType::float32(), &[2, 8]),
    ];
    run(&f, &mut args).unwrap();
    assert_eq!(
        args[1].to_f64(),
        vec![14.0, 12.0, 10.0, 8.0, 6.0, 4.0, 2.0, 0.0]
    );
    assert_eq!(
        args[2].to_f64(),
        vec![0.0, -1.0, 0.0, -1.0, 0.0, -1.0, 0.0, -1.0, 0.0, 0.0, 1.0, 0.0, 2.0, 0.0, 3.0, 0.0]
    );

    // A vector access that runs past the end in one lane is out of bounds.
    let f = PrimFunc::new(
        "vec",
        vec![a.clone(), b.clone()],
        Stmt::store(
            &b,
            vec![Expr::ramp(Expr::int(6), Expr::int(1), 4)],
            Expr::load(&a, vec![Expr::ramp(Expr::int(0), Expr::int(1), 4)]),
        ),
    );
    let mut args2 = [args[0].clone(), args[1].clone()];
    assert_eq!(
        run(&f, &mut args2),
        Err(InterpError::OutOfBounds {
            buffer: "B".into(),
            indices: vec![8],
            shape: vec![8]
        })
    );
    // Mismatched lanes are an error.
    let f = PrimFunc::new(
        "vec",
        vec![a.clone(), b.clone()],
        Stmt::store(
            &b,
            vec![Expr::ramp(Expr::int(0), Expr::int(1), 4)],
            Expr::load(&a, vec![Expr::ramp(Expr::int(0), Expr::int(1), 2)]),
        ),
    );
    assert_eq!(run(&f, &mut args2), Err(InterpError::Lanes("B".into())));
}

#[test]
fn allocations_lets_and_branches() {
    // for t in threadIdx.x [0, 4): allocate L[2] local { L[0] = t; L[1] = L[0] * 3; if t % 2 == 0 { O[t] = L[1] } else { let u = t + 100 { O[t] = u } } }
    let o = Buffer::global("O", DataType::int32(), &[4]);
    let l = Buffer::new(
        "L",
        DataType::int32(),
        vec![Expr::int(2)],
        StorageScope::Local,
    );
    let (t, u) = (Var::int("t"), Var::int("u"));
    let body = Stmt::allocate(
        l.clone(),
        Stmt::seq(vec![
            Stmt::store(&l, vec![Expr::int(0)], t.to_expr()),
            Stmt::store(
                &l,
                vec![Expr::int(1)],
                Expr::load(&l, vec![Expr::int(0)]) * 3,
            ),
            Stmt::storage_sync(StorageScope::Local),
            Stmt::if_then_else(
                (&t % 2).eq(0),
                Stmt::store(&o, vec![t.to_expr()], Expr::load(&l, vec![Expr::int(1)])),
                Stmt::let_stmt(
                    u.clone(),
                    &t + 100,
                    Stmt::store(&o, vec![t.to_expr()], u.to_expr()),
                ),
            ),
        ]),
    );
    let f = PrimFunc::new(
        "f",
        vec![o.clone()],
        Stmt::attr(
            "thread_extent",
            Expr::int(4),
            Stmt::for_loop(
                t.clone(),
                Expr::int(0),
                Expr::int(4),
                ForKind::ThreadBinding(ThreadAxis::ThreadIdxX),
                body,
            ),
        ),
    );
    let mut args = [HostBuffer::zeros(DataType::int32(), &[4])];
    run(&f, &mut args).unwrap();
    assert_eq!(
        args[0].data,
        vec![Scalar::I(0), Scalar::I(101), Scalar::I(6), Scalar::I(103)]
    );

    // The allocated buffer does not outlive its statement.
    let after = Stmt::seq(vec![
        Stmt::allocate(l.clone(), Stmt::no_op()),
        Stmt::store(&l, vec![Expr::int(0)], Expr::int(1)),
    ]);
    let f = PrimFunc::new("f", vec![o.clone()], after);
    assert_eq!(
        run(&f, &mut args),
        Err(InterpError::UnknownBuffer("L".into()))
    );

    // Neither does a loop or let variable.
    let after = Stmt::seq(vec![
        Stmt::for_loop(
            t.clone(),
            Expr::int(0),
            Expr::int(1),
            ForKind::Serial,
            Stmt::no_op(),
        ),
        Stmt::store(&o, vec![t.to_expr()], Expr::int(1)),
    ]);
    let f = PrimFunc::new("f", vec![o.clone()], after);
    assert_eq!(run(&f, &mut args), Err(InterpError::UnboundVar("t".into())));

    // A loop that rebinds a variable gives the outer binding back.
    let inner = Stmt::for_loop(
        t.clone(),
        Expr::int(0),
        Expr::int(2),
        ForKind::Serial,
        Stmt::no_op(),
    );
    let f = PrimFunc::new(
        "f",
        vec![o.clone()],
        Stmt::let_stmt(
            t.clone(),
            Expr::int(3),
            Stmt::seq(vec![
                inner,
                Stmt::store(&o, vec![t.to_expr()], Expr::int(42)),
            ]),
        ),
    );
    let mut args = [HostBuffer::zeros(DataType::int32(), &[4])];
    run(&f, &mut args).unwrap();
    assert_eq!(args[0].data[3], Scalar::I(42));

    // A negative allocation size is an error.
    let bad = Buffer::new(
        "N",
        DataType::int32(),
        vec![Expr::int(-1)],
        StorageScope::Local,
    );
    let f = PrimFunc::new("f", vec![o], Stmt::allocate(bad, Stmt::no_op()));
    assert_eq!(
        run(&f, &mut args),
        Err(InterpError::BadAllocation("N".into()))
    );
}

#[test]
fn loops_with_offsets_and_empty_loops() {
    let o = Buffer::global("O", DataType::int32(), &[8]);
    let i = Var::int("i");
    let body = Stmt::seq(vec![
        Stmt::for_loop(
            i.clone(),
            Expr::int(3),
            Expr::int(4),
            ForKind::Unrolled,
            Stmt::store(&o, vec![i.to_expr()], &i * 10),
        ),
        // Zero and negative extents run nothing (and evaluate no body).
        Stmt::for_loop(
            i.clone(),
            Expr::int(0),
            Expr::int(0),
            ForKind::Serial,
            Stmt::store(&o, vec![Expr::int(100)], Expr::int(1)),
        ),
        Stmt::for_loop(
            i.clone(),
            Expr::int(0),
            Expr::int(-3),
            ForKind::Serial,
            Stmt::store(&o, vec![Expr::int(100)], Expr::int(1)),
        ),
    ]);
    let f = PrimFunc::new("f", vec![o], body);
    let mut args = [HostBuffer::zeros(DataType::int32(), &[8])];
    run(&f, &mut args).unwrap();
    let got: Vec<i64> = args[0].data.iter().map(|s| s.as_i64()).collect();
    assert_eq!(got, vec![0, 0, 0, 30, 40, 50, 60, 0]);
}

#[test]
fn math_intrinsics() {
    let o = Buffer::global("O", DataType::float32(), &[6]);
    let x = Expr::float(0.5);
    let vals = [
        x.clone().exp(),
        x.clone().log(),
        x.clone().sqrt(),
        x.clone().tanh(),
        x.clone().sigmoid(),
        x.pow(3.0),
    ];
    let body = Stmt::seq(
        vals.iter()
            .enumerate()
            .map(|(k, v)| Stmt::store(&o, vec![Expr::int(k as i64)], v.clone()))
            .collect(),
    );
    let f = PrimFunc::new("f", vec![o], body);
    let mut args = [HostBuffer::zeros(DataType::float32(), &[6])];
    run(&f, &mut args).unwrap();
    let want = [
        0.5f64.exp(),
        0.5f64.ln(),
        0.5f64.sqrt(),
        0.5f64.tanh(),
        1.0 / (1.0 + (-0.5f64).exp()),
        0.125,
    ];
    let want: Vec<f64> = want.iter().map(|v| *v as f32 as f64).collect();
    assert_eq!(args[0].to_f64(), want);
}
