//! The printed form of a function with every statement kind (and most expression kinds).

use tessera_ir::{Buffer, DataType, Expr, ForKind, PrimFunc, Stmt, StorageScope, ThreadAxis, Var};

fn every_statement_kind() -> PrimFunc {
    let a = Buffer::global("A", DataType::float32(), &[64, 32]);
    let idx = Buffer::global("Idx", DataType::int64(), &[8]);
    let out = Buffer::global("Out", DataType::float16(), &[64]);
    let shared = Buffer::new(
        "A_shared",
        DataType::float32(),
        vec![Expr::int(8), Expr::int(32)],
        StorageScope::Shared,
    );
    let local = Buffer::new(
        "acc_local",
        DataType::float32(),
        vec![Expr::int(4)],
        StorageScope::Local,
    );
    let scratch = Buffer::new(
        "scratch",
        DataType::int32(),
        vec![Expr::int(2)],
        StorageScope::Global,
    );

    let bx = Var::int("blockIdx.x");
    let tx = Var::int("threadIdx.x");
    let vt = Var::int("vthread.s");
    let (k, ax, v, u) = (Var::int("k"), Var::int("ax1"), Var::int("v"), Var::int("u"));
    let row = &bx * 8 + &tx;

    // Cooperative fetch into shared memory.
    let fetch = Stmt::for_loop(
        ax.clone(),
        Expr::int(0),
        Expr::int(32),
        ForKind::Unrolled,
        Stmt::store(
            &shared,
            vec![tx.to_expr(), ax.to_expr()],
            Expr::if_then_else(
                row.lt(64),
                Expr::load(&a, vec![row.clone(), ax.to_expr()]),
                Expr::float(0.0),
            ),
        ),
    );
    // A vectorized reduction step over acc_local.
    let accumulate = Stmt::for_loop(
        v.clone(),
        Expr::int(0),
        Expr::int(4),
        ForKind::Vectorized,
        Stmt::store(
            &local,
            vec![v.to_expr()],
            Expr::max(
                Expr::load(&local, vec![v.to_expr()]),
                Expr::load(&shared, vec![tx.to_expr(), &k * 4 + &v]) * Expr::float(0.5),
            ),
        ),
    );
    let vector_store = Stmt::store(
        &local,
        vec![Expr::ramp(Expr::int(0), Expr::int(1), 4)],
        Expr::broadcast(Expr::float(-3.4028234663852886e38), 4),
    );
    let reduce = Stmt::for_loop(
        k.clone(),
        Expr::int(0),
        Expr::int(8),
        ForKind::Serial,
        accumulate,
    );
    let write_back = Stmt::if_then_else(
        Expr::and(row.lt(64), Expr::not(Expr::bool(false))),
        Stmt::store(
            &out,
            vec![row.clone()],
            Expr::cast(
                DataType::float16(),
                Expr::math(
                    tessera_ir::Intrinsic::Fabs,
                    Expr::load(&local, vec![Expr::int(0)]),
                )
                .exp(),
            ),
        ),
        Stmt::evaluate(Expr::int(0)),
    );
    let index_math = Stmt::let_stmt(
        u.clone(),
        Expr::cast(
            DataType::int32(),
            Expr::load(&idx, vec![Expr::floormod(tx.to_expr(), Expr::int(8))]),
        ),
        Stmt::allocate(
            scratch.clone(),
            Stmt::seq(vec![
                Stmt::store(
                    &scratch,
                    vec![Expr::int(0)],
                    Expr::floordiv(u.to_expr(), Expr::int(2)) - (&u % 3) * (&u / -4),
                ),
                Stmt::store(
                    &scratch,
                    vec![Expr::int(1)],
                    Expr::select(
                        Expr::or(u.to_expr().ge(0), u.to_expr().ne(-1)),
                        Expr::min(u.to_expr(), Expr::int(7)),
                        Expr::cast(DataType::int32(), Expr::int_of(DataType::int64(), -5)),
                    ),
                ),
                Stmt::if_then(
                    u.to_expr().eq(3),
                    Stmt::evaluate(Expr::float_of(DataType::float64(), 0.1).pow(2.0)),
                ),
            ]),
        ),
    );
    let body = Stmt::seq(vec![
        Stmt::allocate(
            shared.clone(),
            Stmt::allocate(
                local.clone(),
                Stmt::seq(vec![
                    vector_store,
                    fetch,
                    Stmt::storage_sync(StorageScope::Shared),
                    reduce,
                    write_back,
                ]),
            ),
        ),
        index_math,
    ]);
    let body = Stmt::for_loop(
        vt,
        Expr::int(0),
        Expr::int(2),
        ForKind::ThreadBinding(ThreadAxis::VThread),
        body,
    );
    let body = Stmt::for_loop(
        tx,
        Expr::int(0),
        Expr::int(8),
        ForKind::ThreadBinding(ThreadAxis::ThreadIdxX),
        body,
    );
    let body = Stmt::for_loop(
        bx,
        Expr::int(0),
        Expr::int(8),
        ForKind::ThreadBinding(ThreadAxis::BlockIdxX),
        body,
    );
    let body = Stmt::attr("pragma_auto_unroll_max_step", Expr::int(16), body);
    let i = Var::int("i");
    let tail = Stmt::for_loop(
        i.clone(),
        Expr::int(0),
        Expr::int(64),
        ForKind::Parallel,
        Stmt::store(
            &out,
            vec![i.to_expr()],
            Expr::float_of(DataType::float16(), 1.5),
        ),
    );
    PrimFunc::new(
        "default_function_kernel",
        vec![a, idx, out],
        Stmt::seq(vec![body, tail]),
    )
}

#[test]
fn every_statement_kind_prints() {
    insta::assert_snapshot!(every_statement_kind().to_string());
}

/// The printed form reads back (`tessera_ir::parser`) into a function that prints the
/// same; two distinct variables of one name print apart (`i`, `i_1`), so that the text
/// names each once.
#[test]
fn the_printed_form_reads_back() {
    let text = every_statement_kind().to_string();
    let back: PrimFunc = text.parse().unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(back.to_string(), text);

    let a = Buffer::global("A", DataType::float32(), &[4]);
    let (i, other_i) = (Var::int("i"), Var::int("i"));
    let store = |v: &Var| Stmt::store(&a, vec![v.to_expr()], Expr::float(0.0));
    let loop_of = |v: &Var| {
        Stmt::for_loop(
            v.clone(),
            Expr::int(0),
            Expr::int(4),
            ForKind::Serial,
            store(v),
        )
    };
    let f = PrimFunc::new(
        "f",
        vec![a.clone()],
        Stmt::seq(vec![loop_of(&i), loop_of(&other_i)]),
    );
    let text = f.to_string();
    assert!(
        text.contains("for (i, 0, 4)") && text.contains("for (i_1, 0, 4)"),
        "{text}"
    );
    assert_eq!(text.parse::<PrimFunc>().unwrap().to_string(), text);
}
