//! Every invalid schedule request is a typed error naming the stage (and axis); none
//! panics, and a refused request leaves the schedule as it was.

mod common;

use tessera_ir::{DataType, Expr, StorageScope, ThreadAxis};
use tessera_te::{
    compute, lower, ops, placeholder, reduce_axis, sum, LowerError, Schedule, ScheduleError,
    TeError, Tensor,
};

fn matmul() -> (Tensor, Tensor, Tensor) {
    let a = placeholder(&[8, 8], DataType::float32(), "A").unwrap();
    let b = placeholder(&[8, 8], DataType::float32(), "B").unwrap();
    let c = ops::matmul(&a, &b).unwrap();
    (a, b, c)
}

/// A two-stage pipeline: `D = relu(C)` after a matmul `C`.
fn matmul_relu() -> (Tensor, Tensor, Tensor, Tensor) {
    let (a, b, c) = matmul();
    let d = compute(&[8, 8], "D", &[], |ix| {
        Expr::max(c.at(ix), Expr::float(0.0))
    })
    .unwrap();
    (a, b, c, d)
}

#[test]
fn split_by_zero_or_negative() {
    let (_, _, c) = matmul();
    let mut s = Schedule::create(&[c.clone()]).unwrap();
    let i = s.axis(&c).unwrap()[0].clone();
    let e = s.split(&c, &i, 0).unwrap_err();
    assert!(
        matches!(&e, ScheduleError::BadSplit { stage, axis, value: 0 } if stage == "C" && axis == "i"),
        "{e}"
    );
    assert!(matches!(
        s.split_nparts(&c, &i, -3),
        Err(ScheduleError::BadSplit { value: -3, .. })
    ));
    assert!(e.to_string().contains("stage `C`") && e.to_string().contains("`i`"));
    assert_eq!(
        s.leaf_axes(&c).unwrap().len(),
        3,
        "a refused split changes nothing"
    );
}

#[test]
fn axis_of_another_stage() {
    let (_, _, c, d) = matmul_relu();
    let mut s = Schedule::create(&[d.clone()]).unwrap();
    let di = s.axis(&d).unwrap()[0].clone();
    let ci = s.axis(&c).unwrap()[0].clone();
    let e = s.reorder(&c, &[ci.clone(), di.clone()]).unwrap_err();
    assert!(
        matches!(&e, ScheduleError::NotLeaf { stage, axis } if stage == "C" && axis == "i0"),
        "{e}"
    );
    assert!(matches!(
        s.split(&d, &ci, 2),
        Err(ScheduleError::NotLeaf { .. })
    ));
    assert!(matches!(
        s.parallel(&c, &di),
        Err(ScheduleError::NotLeaf { .. })
    ));
    let (o, _) = s.split(&c, &ci, 2).unwrap();
    assert!(
        matches!(s.split(&c, &ci, 2), Err(ScheduleError::NotLeaf { .. })),
        "a split axis is no longer a leaf"
    );
    assert!(matches!(
        s.reorder(&c, &[o.clone(), o]),
        Err(ScheduleError::BadReorder { .. })
    ));
}

#[test]
fn fuse_errors() {
    let (_, _, c) = matmul();
    let mut s = Schedule::create(&[c.clone()]).unwrap();
    let ax = s.axis(&c).unwrap();
    let k = s.reduce_axis(&c).unwrap()[0].clone();
    assert!(
        matches!(
            s.fuse(&c, &ax[1], &ax[0]),
            Err(ScheduleError::BadFuse { .. })
        ),
        "inner before outer"
    );
    let e = s.fuse(&c, &ax[1], &k).unwrap_err();
    assert!(e.to_string().contains("reduction"), "{e}");
}

#[test]
fn compute_at_into_a_non_consumer() {
    let (a, _, c, d) = matmul_relu();
    let mut s = Schedule::create(&[d.clone()]).unwrap();
    let ci = s.axis(&c).unwrap()[0].clone();
    let di = s.axis(&d).unwrap()[0].clone();
    // D does not consume itself; C does not consume D.
    let e = s.compute_at(&d, &c, &ci).unwrap_err();
    assert!(
        matches!(&e, ScheduleError::BadComputeAt { stage, target, .. } if stage == "D" && target == "C"),
        "{e}"
    );
    assert!(matches!(
        s.compute_at(&c, &c, &ci),
        Err(ScheduleError::BadComputeAt { .. })
    ));
    assert!(
        matches!(
            s.compute_at(&a, &c, &ci),
            Err(ScheduleError::BadComputeAt { .. })
        ),
        "placeholders are not computed"
    );
    assert!(
        matches!(
            s.compute_at(&c, &d, &ci),
            Err(ScheduleError::NotLeaf { .. })
        ),
        "axis must belong to the target"
    );
    s.compute_at(&c, &d, &di).unwrap();
    // splitting an attach point moves the stage computed there to the inner part (TVM's
    // attach map does the same)
    let (_, dii) = s.split(&d, &di, 2).unwrap();
    let cst = s.stages().iter().find(|st| st.op == c).unwrap();
    assert!(
        matches!(&cst.attach, tessera_te::Attach::At { axis, .. } if *axis == dii),
        "{:?}",
        cst.attach
    );
}

#[test]
fn annotation_errors() {
    let (_, _, c) = matmul();
    let mut s = Schedule::create(&[c.clone()]).unwrap();
    let ax = s.axis(&c).unwrap();
    let k = s.reduce_axis(&c).unwrap()[0].clone();
    let e = s.vectorize(&c, &k).unwrap_err();
    assert!(
        matches!(&e, ScheduleError::ReduceAxis { stage, axis, .. } if stage == "C" && axis == "k"),
        "{e}"
    );
    assert!(matches!(
        s.parallel(&c, &k),
        Err(ScheduleError::ReduceAxis { .. })
    ));
    s.unroll(&c, &k).unwrap();
    s.bind(&c, &ax[0], ThreadAxis::ThreadIdxX).unwrap();
    let e = s.bind(&c, &ax[1], ThreadAxis::ThreadIdxX).unwrap_err();
    assert!(
        matches!(&e, ScheduleError::ThreadBoundTwice { stage, axis, bound, .. } if stage == "C" && axis == "j" && bound == "i"),
        "{e}"
    );
    assert!(matches!(
        s.pragma(&c, &ax[0], "", Expr::int(1)),
        Err(ScheduleError::Invalid { .. })
    ));
}

#[test]
fn inline_errors() {
    let (a, _, c, d) = matmul_relu();
    let mut s = Schedule::create(&[d.clone()]).unwrap();
    assert!(
        matches!(s.compute_inline(&c), Err(ScheduleError::BadInline { .. })),
        "a reduction"
    );
    assert!(
        matches!(s.compute_inline(&d), Err(ScheduleError::BadInline { .. })),
        "an output"
    );
    assert!(
        matches!(s.compute_inline(&a), Err(ScheduleError::BadInline { .. })),
        "a placeholder"
    );
}

#[test]
fn cache_errors() {
    let (a, b, c, d) = matmul_relu();
    let mut s = Schedule::create(&[d.clone()]).unwrap();
    assert!(
        matches!(
            s.cache_read(&a, StorageScope::Shared, &[d.clone()]),
            Err(ScheduleError::BadCache { .. })
        ),
        "D does not read A"
    );
    assert!(matches!(
        s.cache_read(&a, StorageScope::Shared, &[]),
        Err(ScheduleError::BadCache { .. })
    ));
    let ci = s.axis(&c).unwrap()[0].clone();
    s.split(&c, &ci, 2).unwrap();
    let e = s.cache_write(&c, StorageScope::Local).unwrap_err();
    assert!(
        matches!(&e, ScheduleError::BadCache { stage, .. } if stage == "C"),
        "{e}"
    );
    assert!(matches!(
        s.cache_write(&b, StorageScope::Local),
        Err(ScheduleError::BadCache { .. })
    ));
}

#[test]
fn rfactor_errors() {
    let (_, _, c) = matmul();
    let mut s = Schedule::create(&[c.clone()]).unwrap();
    let i = s.axis(&c).unwrap()[0].clone();
    let e = s.rfactor(&c, &i, 0).unwrap_err();
    assert!(
        matches!(&e, ScheduleError::BadRfactor { stage, axis, .. } if stage == "C" && axis == "i"),
        "{e}"
    );
    let k = s.reduce_axis(&c).unwrap()[0].clone();
    assert!(
        matches!(s.rfactor(&c, &k, 5), Err(ScheduleError::BadRfactor { .. })),
        "factor_axis out of range"
    );
}

#[test]
fn storage_align_and_scope_errors() {
    let (_, _, c, d) = matmul_relu();
    let mut s = Schedule::create(&[d.clone()]).unwrap();
    let ci = s.axis(&c).unwrap()[0].clone();
    assert!(matches!(
        s.storage_align(&c, &ci, 0, 0),
        Err(ScheduleError::Invalid { .. })
    ));
    assert!(matches!(
        s.storage_align(&c, &ci, 4, 4),
        Err(ScheduleError::Invalid { .. })
    ));
    let k = s.reduce_axis(&c).unwrap()[0].clone();
    assert!(matches!(
        s.storage_align(&c, &k, 4, 1),
        Err(ScheduleError::Invalid { .. })
    ));
    assert!(
        matches!(
            s.set_scope(&d, StorageScope::Shared),
            Err(ScheduleError::Invalid { .. })
        ),
        "outputs stay global"
    );
}

#[test]
fn invalid_tensor_expressions() {
    assert!(matches!(
        placeholder(&[4, 0], DataType::float32(), "X"),
        Err(TeError::BadShape { .. })
    ));
    let x = placeholder(&[4], DataType::float32(), "X").unwrap();
    let r = compute(&[4], "Y", &["a", "b"], |ix| x.at(ix));
    assert!(matches!(r, Err(TeError::BadShape { .. })));
    let k = reduce_axis(4, "k");
    let r = compute(&[1], "S", &[], |_| sum(x.at(&[k.expr()]), &[]));
    assert!(matches!(r, Err(TeError::BadReduce { .. })));
    let a = placeholder(&[3, 4], DataType::float32(), "A").unwrap();
    assert!(ops::matmul(&a, &a).is_err());
    let w = placeholder(&[5, 5, 4, 2], DataType::float32(), "W").unwrap();
    let d = placeholder(&[1, 3, 3, 4], DataType::float32(), "D").unwrap();
    assert!(
        ops::conv2d_nhwc(&d, &w, (1, 1), (0, 0), (1, 1)).is_err(),
        "kernel larger than the input"
    );
    assert!(
        ops::conv2d_nhwc(&d, &w, (0, 1), (2, 2), (1, 1)).is_err(),
        "zero stride"
    );
    assert!(tessera_te::ComputeDag::new(&[]).is_err());
}

#[test]
fn lowering_errors() {
    let (a, b, c, d) = matmul_relu();
    let s = Schedule::create(&[d.clone()]).unwrap();
    assert!(
        matches!(lower(&s, &[a.clone(), d.clone()], "f"), Err(LowerError::MissingArg(n)) if n == "B")
    );
    assert!(
        matches!(lower(&s, &[a.clone(), b.clone(), c.clone(), d.clone()], "f"), Err(LowerError::BadArg(n)) if n == "C")
    );
    assert!(lower(&s, &[a, b, d], "f").is_ok());
}

#[test]
fn rfactor_computes_the_same() {
    let x = placeholder(&[4, 30], DataType::float32(), "X").unwrap();
    let k = reduce_axis(30, "k");
    let y = compute(&[4], "Y", &[], |ix| {
        sum(x.at(&[ix[0].clone(), k.expr()]), &[k.clone()])
    })
    .unwrap();
    let mut s = Schedule::create(&[y.clone()]).unwrap();
    let (_ko, ki) = s.split(&y, &k, 8).unwrap();
    let rf = s.rfactor(&y, &ki, 0).unwrap();
    assert_eq!(rf.shape(), &[8, 4]);
    let yi = s.axis(&y).unwrap()[0].clone();
    s.parallel(&y, &yi).unwrap();
    let args = [x, y.clone()];
    let f = lower(&s, &args, "rowsum").unwrap();
    let text = f.to_string();
    assert!(text.contains("Y.rf"), "{text}");
    common::assert_same_as_unscheduled(&s, &[y], &args, 1);
}

#[test]
fn storage_align_pads_the_allocation() {
    let (a, b, c) = matmul();
    let mut s = Schedule::create(&[c.clone()]).unwrap();
    let aa = s
        .cache_read(&a, StorageScope::Shared, &[c.clone()])
        .unwrap();
    let ax = s.axis(&aa).unwrap();
    s.storage_align(&aa, &ax[0], 16, 1).unwrap();
    let args = [a, b, c.clone()];
    let f = lower(&s, &args, "f").unwrap();
    assert!(
        f.to_string()
            .contains("allocate A.shared: float32[8, 17], shared"),
        "{f}"
    );
    common::assert_same_as_unscheduled(&s, &[c], &args, 2);
}

#[test]
fn a_cross_thread_reduction_lowers_to_a_shared_memory_allreduce() {
    let (a, b, c) = matmul();
    let mut s = Schedule::create(&[c.clone()]).unwrap();
    let k = s.reduce_axis(&c).unwrap()[0].clone();
    // threadIdx.x is the one thread axis a reduction loop may take
    assert!(matches!(
        s.bind(&c, &k, ThreadAxis::BlockIdxX),
        Err(ScheduleError::ReduceAxis { .. })
    ));
    let (_ko, ki) = s.split(&c, &k, 4).unwrap();
    s.bind(&c, &ki, ThreadAxis::ThreadIdxX).unwrap();
    let args = [a, b, c.clone()];
    let f = tessera_te::lower(&s, &args, "f").unwrap();
    let text = f.to_string();
    assert!(
        text.contains("allocate C.red: float32[4], shared"),
        "{text}"
    );
    assert!(text.contains("attr [thread_allreduce.add] = 4"), "{text}");
    // run serially (the interpreter), the tree computes what the plain loop does
    common::assert_same_as_unscheduled(&s, &[c], &args, 2);
}
