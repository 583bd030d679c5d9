//! Round trips of random programs: through serde_json (equal value, equal text), through
//! the printer (deterministic), and through an identity mutator (the very same nodes).

use proptest::prelude::*;
use std::collections::HashMap;
use std::sync::OnceLock;
use tessera_ir::visit::{substitute, substitute_stmt, ExprMutator, StmtMutator};
use tessera_ir::{
    BinOp, Buffer, CmpOp, DataType, Expr, ForKind, Intrinsic, PrimFunc, Stmt, StmtNode,
    StorageScope, ThreadAxis, Var,
};

// ----- fixed names -----

struct World {
    /// int32 index variables (also the loop and let variables).
    ivars: Vec<Var>,
    /// A float32 [16, 16], B int32 [16], C float32 [64]: the parameters.
    a: Buffer,
    b: Buffer,
    c: Buffer,
    /// One float32 buffer to allocate in each scope, plus an int8 one.
    scratch: Vec<Buffer>,
}

fn world() -> &'static World {
    static W: OnceLock<World> = OnceLock::new();
    W.get_or_init(|| World {
        ivars: ["i", "j", "k", "n"].iter().map(|n| Var::int(*n)).collect(),
        a: Buffer::global("A", DataType::float32(), &[16, 16]),
        b: Buffer::global("B", DataType::int32(), &[16]),
        c: Buffer::global("C", DataType::float32(), &[64]),
        scratch: vec![
            Buffer::new(
                "G",
                DataType::float32(),
                vec![Expr::int(8)],
                StorageScope::Global,
            ),
            Buffer::new(
                "S",
                DataType::float32(),
                vec![Expr::int(4), Expr::int(8)],
                StorageScope::Shared,
            ),
            Buffer::new(
                "L",
                DataType::float32(),
                vec![Expr::int(4)],
                StorageScope::Local,
            ),
            Buffer::new(
                "Q",
                DataType::int(8),
                vec![Expr::int(16)],
                StorageScope::Local,
            ),
        ],
    })
}

// ----- expressions -----

fn ivar() -> impl Strategy<Value = Expr> {
    (0usize..4).prop_map(|i| world().ivars[i].to_expr())
}

fn float_value() -> impl Strategy<Value = f64> {
    prop_oneof![
        4 => (-100i32..100).prop_map(|v| v as f64 / 4.0),
        2 => any::<f32>().prop_filter("finite", |v| v.is_finite()).prop_map(|v| v as f64),
        2 => any::<f64>().prop_filter("finite", |v| v.is_finite()),
        1 => prop::sample::select(vec![
            0.0,
            -0.0,
            1e-45,
            -3.4028234663852886e38,
            0.1,
            f64::MIN_POSITIVE,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ]),
    ]
}

fn int_expr() -> BoxedStrategy<Expr> {
    let leaf = prop_oneof![
        3 => ivar(),
        2 => (-20i64..20).prop_map(Expr::int),
        1 => any::<i64>().prop_map(|v| Expr::int_of(DataType::int64(), v)).prop_map(|e| Expr::cast(DataType::int32(), e)),
    ];
    leaf.prop_recursive(3, 16, 2, |inner| {
        let op = prop::sample::select(vec![
            BinOp::Add,
            BinOp::Sub,
            BinOp::Mul,
            BinOp::Div,
            BinOp::Mod,
            BinOp::FloorDiv,
            BinOp::FloorMod,
            BinOp::Min,
            BinOp::Max,
        ]);
        prop_oneof![
            4 => (op, inner.clone(), inner.clone()).prop_map(|(op, a, b)| Expr::binary(op, a, b)),
            1 => inner.clone().prop_map(|i| Expr::load(&world().b, vec![i])),
            1 => (cond_of(inner.clone()), inner.clone(), inner.clone()).prop_map(|(c, a, b)| Expr::select(c, a, b)),
        ]
    })
    .boxed()
}

fn cond_of(ints: BoxedStrategy<Expr>) -> BoxedStrategy<Expr> {
    let op = prop::sample::select(vec![
        CmpOp::Eq,
        CmpOp::Ne,
        CmpOp::Lt,
        CmpOp::Le,
        CmpOp::Gt,
        CmpOp::Ge,
    ]);
    let cmp = (op, ints.clone(), ints)
        .prop_map(|(op, a, b)| Expr::cmp(op, a, b))
        .boxed();
    prop_oneof![
        3 => cmp.clone(),
        1 => (cmp.clone(), cmp.clone()).prop_map(|(a, b)| Expr::and(a, b)),
        1 => (cmp.clone(), cmp.clone()).prop_map(|(a, b)| Expr::or(a, b)),
        1 => cmp.clone().prop_map(Expr::not),
        1 => any::<bool>().prop_map(Expr::bool),
    ]
    .boxed()
}

fn cond() -> BoxedStrategy<Expr> {
    cond_of(int_expr())
}

fn float_expr() -> BoxedStrategy<Expr> {
    let leaf = prop_oneof![
        2 => float_value().prop_map(Expr::float),
        2 => (int_expr(), int_expr()).prop_map(|(i, j)| Expr::load(&world().a, vec![i, j])),
        1 => int_expr().prop_map(|i| Expr::cast(DataType::float32(), i)),
        1 => float_value().prop_map(|v| Expr::cast(DataType::float32(), Expr::float_of(DataType::float64(), v))),
        1 => float_value().prop_map(|v| Expr::cast(DataType::float32(), Expr::float_of(DataType::float16(), v))),
    ];
    leaf.prop_recursive(3, 16, 3, |inner| {
        let op = prop::sample::select(vec![BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::Div, BinOp::Min, BinOp::Max]);
        // every one-argument intrinsic (pow and if_then_else have their own arms)
        let unary = prop::sample::select(
            Intrinsic::ALL
                .into_iter()
                .filter(|i| i.arity() == 1)
                .collect::<Vec<_>>(),
        );
        prop_oneof![
            4 => (op, inner.clone(), inner.clone()).prop_map(|(op, a, b)| Expr::binary(op, a, b)),
            2 => (unary, inner.clone()).prop_map(|(op, a)| Expr::math(op, a)),
            1 => (inner.clone(), inner.clone()).prop_map(|(a, b)| a.pow(b)),
            1 => (cond(), inner.clone(), inner.clone()).prop_map(|(c, a, b)| Expr::if_then_else(c, a, b)),
            1 => (cond(), inner.clone(), inner.clone()).prop_map(|(c, a, b)| Expr::select(c, a, b)),
            1 => inner.clone().prop_map(|a| Expr::cast(DataType::float16(), a)).prop_map(|a| Expr::cast(DataType::float32(), a)),
        ]
    })
    .boxed()
}

/// A float32x4 value: a ramp load from C, a broadcast, or a lane-wise sum of them.
fn vector_expr() -> BoxedStrategy<Expr> {
    let ramp_load = (int_expr(), -2i64..3).prop_map(|(base, stride)| {
        Expr::load(&world().c, vec![Expr::ramp(base, Expr::int(stride), 4)])
    });
    let bcast = float_expr().prop_map(|v| Expr::broadcast(v, 4));
    prop_oneof![
        ramp_load.clone(),
        bcast.clone(),
        (ramp_load, bcast).prop_map(|(a, b)| a * b),
    ]
    .boxed()
}

fn any_expr() -> BoxedStrategy<Expr> {
    prop_oneof![int_expr(), float_expr(), cond(), vector_expr()].boxed()
}

// ----- statements -----

fn for_kind() -> impl Strategy<Value = ForKind> {
    prop_oneof![
        Just(ForKind::Serial),
        Just(ForKind::Parallel),
        Just(ForKind::Vectorized),
        Just(ForKind::Unrolled),
        prop::sample::select(ThreadAxis::ALL.to_vec()).prop_map(ForKind::ThreadBinding),
    ]
}

fn scope() -> impl Strategy<Value = StorageScope> {
    prop::sample::select(vec![
        StorageScope::Global,
        StorageScope::Shared,
        StorageScope::Local,
    ])
}

fn leaf_stmt() -> BoxedStrategy<Stmt> {
    let w = world();
    prop_oneof![
        3 => (int_expr(), int_expr(), float_expr()).prop_map(move |(i, j, v)| Stmt::store(&w.a, vec![i, j], v)),
        2 => (int_expr(), int_expr()).prop_map(move |(i, v)| Stmt::store(&w.b, vec![i], v)),
        1 => (int_expr(), vector_expr()).prop_map(move |(i, v)| Stmt::store(&w.c, vec![Expr::ramp(i, Expr::int(1), 4)], v)),
        1 => (0usize..4, int_expr(), float_expr()).prop_map(move |(k, i, v)| {
            let buf = &w.scratch[k];
            let idx = if buf.ndim() == 2 { vec![i.clone(), i] } else { vec![i] };
            let v = if buf.dtype().is_float() { v } else { Expr::cast(buf.dtype(), v) };
            Stmt::store(buf, idx, v)
        }),
        1 => any_expr().prop_map(Stmt::evaluate),
        1 => scope().prop_map(Stmt::storage_sync),
    ]
    .boxed()
}

fn stmt() -> BoxedStrategy<Stmt> {
    leaf_stmt()
        .prop_recursive(4, 24, 3, |inner| {
            let w = world();
            prop_oneof![
                3 => (0usize..4, int_expr(), int_expr(), for_kind(), inner.clone())
                    .prop_map(move |(v, min, ext, kind, body)| Stmt::for_loop(w.ivars[v].clone(), min, ext, kind, body)),
                2 => (0usize..4, inner.clone()).prop_map(move |(k, body)| Stmt::allocate(w.scratch[k].clone(), body)),
                2 => (cond(), inner.clone(), prop::option::of(inner.clone()))
                    .prop_map(|(c, t, e)| Stmt::new(StmtNode::IfThenElse { cond: c, then_case: t, else_case: e })),
                2 => prop::collection::vec(inner.clone(), 0..4).prop_map(Stmt::seq),
                1 => (prop::sample::select(vec!["pragma_auto_unroll_max_step", "pragma_unroll_explicit", "thread_extent", "a key with spaces"]), any_expr(), inner.clone())
                    .prop_map(|(k, v, body)| Stmt::attr(k, v, body)),
                1 => (0usize..4, int_expr(), inner.clone()).prop_map(move |(v, value, body)| Stmt::let_stmt(w.ivars[v].clone(), value, body)),
            ]
        })
        .boxed()
}

fn prim_func() -> impl Strategy<Value = PrimFunc> {
    let w = world();
    (
        stmt(),
        prop::sample::select(vec!["main", "default_function_kernel", "f"]),
    )
        .prop_map(move |(body, name)| {
            PrimFunc::new(name, vec![w.a.clone(), w.b.clone(), w.c.clone()], body)
        })
}

// ----- the identity mutator -----

struct Identity;
impl ExprMutator for Identity {}
impl StmtMutator for Identity {}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// serde_json gives back an equal function that prints the same.
    #[test]
    fn serde_json_round_trip(f in prim_func()) {
        let json = serde_json::to_string(&f).unwrap();
        let back: PrimFunc = serde_json::from_str(&json).unwrap();
        prop_assert_eq!(&back, &f);
        prop_assert_eq!(back.to_string(), f.to_string());
        // And once more from the round-tripped value: the serialized form is stable too.
        prop_assert_eq!(serde_json::to_string(&back).unwrap(), json);
    }

    /// Printing is a function of the value: twice the same text, and the same for a clone.
    #[test]
    fn printing_is_deterministic(f in prim_func()) {
        let a = f.to_string();
        prop_assert_eq!(&a, &f.to_string());
        prop_assert_eq!(&a, &f.clone().to_string());
        prop_assert_eq!(f.body.to_string(), f.body.to_string());
        let head = format!("func {}(A: float32[16, 16], B: int32[16], C: float32[64]) {{\n", f.name);
        prop_assert!(a.starts_with(&head), "bad head: {}", a);
        prop_assert!(a.ends_with("}\n"), "bad tail: {}", a);
    }

    /// The identity mutator hands back the very same nodes.
    #[test]
    fn identity_mutator_preserves_sharing(f in prim_func(), e in any_expr()) {
        let s = Identity.mutate_stmt(&f.body);
        prop_assert!(s.same_as(&f.body), "identity mutator rebuilt\n{}", f.body);
        prop_assert!(Identity.mutate_expr(&e).same_as(&e));
        // Substituting a variable that does not occur changes nothing either.
        let fresh = Var::int("fresh");
        let map: HashMap<Var, Expr> = [(fresh, Expr::int(3))].into_iter().collect();
        prop_assert!(substitute_stmt(&f.body, &map).same_as(&f.body));
        prop_assert!(substitute(&e, &map).same_as(&e));
    }
}

#[test]
fn substitution_shares_untouched_subtrees() {
    let w = world();
    let (i, j) = (&w.ivars[0], &w.ivars[1]);
    let untouched = Stmt::store(&w.b, vec![j.to_expr()], Expr::int(1));
    let touched = Stmt::store(&w.b, vec![i.to_expr()], Expr::int(2));
    let s = Stmt::seq(vec![untouched.clone(), touched.clone()]);
    let map: HashMap<Var, Expr> = [(i.clone(), Expr::int(5))].into_iter().collect();
    let out = substitute_stmt(&s, &map);
    assert!(!out.same_as(&s));
    let StmtNode::Seq(items) = out.node() else {
        panic!("not a sequence: {out}")
    };
    assert!(items[0].same_as(&untouched));
    assert!(!items[1].same_as(&touched));
    assert_eq!(out.to_string(), "B[j] = 1\nB[5] = 2\n");
}

#[test]
fn non_finite_floats_round_trip() {
    for v in [f64::INFINITY, f64::NEG_INFINITY, -0.0, 1e-320] {
        let e = Expr::float(v);
        let back: Expr = serde_json::from_str(&serde_json::to_string(&e).unwrap()).unwrap();
        assert_eq!(back.as_float().map(f64::to_bits), Some(v.to_bits()));
    }
    let e = Expr::float(f64::NAN);
    let back: Expr = serde_json::from_str(&serde_json::to_string(&e).unwrap()).unwrap();
    assert!(back.as_float().unwrap().is_nan());
    assert_eq!(back.to_string(), "nanf");
}

#[test]
fn deserialized_variables_do_not_collide_with_new_ones() {
    let v = Var::int("v");
    let back: Var = serde_json::from_str(&serde_json::to_string(&v).unwrap()).unwrap();
    assert_eq!(back, v);
    let fresh = Var::int("v");
    assert_ne!(fresh, v);
    assert!(fresh.id() > back.id());
}
