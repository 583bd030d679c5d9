//! Compute DAG facts: workload keys, FLOP counts, order, and a few primitives whose
//! effect is easiest to see in the printed IR (pragma, compute_root, set_scope).

mod common;

use tessera_ir::{DataType, Expr, StorageScope};
use tessera_te::{compute, lower, ops, placeholder, ComputeDag, Schedule};

fn conv(names: (&str, &str), hw: i64) -> ComputeDag {
    let d = placeholder(&[1, hw, hw, 16], DataType::float32(), names.0).unwrap();
    let k = placeholder(&[3, 3, 16, 32], DataType::float32(), names.1).unwrap();
    let c = ops::conv2d_nhwc(&d, &k, (1, 1), (1, 1), (1, 1)).unwrap();
    ComputeDag::new(&[c]).unwrap()
}

#[test]
fn workload_key_is_equal_for_equal_dags_whatever_the_names() {
    let a = conv(("data", "weight"), 14);
    let b = conv(("x", "w"), 14);
    assert_eq!(a.workload_key(), b.workload_key());
    assert!(a.workload_key().starts_with("[\""));
    assert!(
        a.workload_key()
            .ends_with("[1, 14, 14, 16], [3, 3, 16, 32], [1, 14, 14, 32]]"),
        "{}",
        a.workload_key()
    );
    let c = conv(("data", "weight"), 28);
    assert_ne!(a.workload_key(), c.workload_key(), "different shapes");
    let x = placeholder(&[8, 8], DataType::float32(), "X").unwrap();
    let relu = compute(&[8, 8], "R", &[], |ix| {
        Expr::max(x.at(ix), Expr::float(0.0))
    })
    .unwrap();
    let sig = compute(&[8, 8], "R", &[], |ix| x.at(ix).sigmoid()).unwrap();
    let (kr, ks) = (
        ComputeDag::new(&[relu]).unwrap().workload_key(),
        ComputeDag::new(&[sig]).unwrap().workload_key(),
    );
    assert_ne!(kr, ks, "different computations");
}

#[test]
fn flops_and_order() {
    let x = placeholder(&[4, 10], DataType::float32(), "placeholder").unwrap();
    let y = ops::softmax(&x).unwrap();
    let dag = ComputeDag::new(&[y.clone()]).unwrap();
    let names: Vec<&str> = dag.ops.iter().map(|t| t.name()).collect();
    assert_eq!(
        names,
        [
            "placeholder",
            "T_softmax_maxelem",
            "T_softmax_exp",
            "T_softmax_expsum",
            "T_softmax_norm"
        ]
    );
    // max: 4*10*(1 combine); exp: 4*10*(1 sub); expsum: 4*10*1; norm: 4*10*1 div.
    assert_eq!(dag.flop_count(), 160.0);
    let exp = dag.ops[2].clone();
    let consumers: Vec<String> = dag
        .consumers(&exp)
        .iter()
        .map(|t| t.name().to_string())
        .collect();
    assert_eq!(consumers, ["T_softmax_expsum", "T_softmax_norm"]);
    assert_eq!(dag.inputs().len(), 1);
}

#[test]
fn softmax_schedules_lower_and_compute_the_same() {
    let x = placeholder(&[3, 7], DataType::float32(), "X").unwrap();
    let y = ops::softmax(&x).unwrap();
    let dag = ComputeDag::new(&[y.clone()]).unwrap();
    let exp = dag.ops[2].clone();
    let mut s = Schedule::create(&[y.clone()]).unwrap();
    s.compute_inline(&exp).unwrap();
    let ax = s.axis(&y).unwrap();
    s.pragma(&y, &ax[0], "auto_unroll_max_step", Expr::int(16))
        .unwrap();
    let args = [x, y.clone()];
    let f = lower(&s, &args, "softmax").unwrap();
    let text = f.to_string();
    assert!(
        text.contains("attr [pragma_auto_unroll_max_step] = 16"),
        "{text}"
    );
    assert!(!text.contains("T_softmax_exp["), "exp is inlined:\n{text}");
    assert!(
        text.contains("allocate T_softmax_maxelem: float32[3], global"),
        "{text}"
    );
    common::assert_same_as_unscheduled(&s, &[y], &args, 1);
}

#[test]
fn set_scope_and_compute_root() {
    let x = placeholder(&[6, 5], DataType::float32(), "X").unwrap();
    let a = compute(&[6, 5], "A", &[], |ix| x.at(ix) * 2.0).unwrap();
    let b = compute(&[6, 5], "B", &[], |ix| a.at(ix) + 1.0).unwrap();
    let mut s = Schedule::create(&[b.clone()]).unwrap();
    let bx = s.axis(&b).unwrap();
    s.compute_at(&a, &b, &bx[0]).unwrap();
    s.set_scope(&a, StorageScope::Local).unwrap();
    let args = [x, b.clone()];
    let text = lower(&s, &args, "f").unwrap().to_string();
    assert!(text.contains("allocate A: float32[1, 5], local"), "{text}");
    s.compute_root(&a).unwrap();
    let text = lower(&s, &args, "f").unwrap().to_string();
    assert!(text.contains("allocate A: float32[6, 5], local"), "{text}");
    common::assert_same_as_unscheduled(&s, &[b], &args, 1);
}

#[test]
fn default_cpu_schedules_compute_the_same() {
    use tessera_te::schedules::{
        schedule_conv2d_nhwc, schedule_injective, schedule_matmul, CpuParams,
    };
    let p = CpuParams {
        vector_lanes: 4,
        num_cores: 2,
        vectorize: true,
        gpu_threads: 0,
    };
    // Divisible and non-divisible shapes.
    for (m, n, k) in [(16, 16, 8), (13, 7, 5), (8, 12, 3)] {
        let a = placeholder(&[m, k], DataType::float32(), "A").unwrap();
        let b = placeholder(&[k, n], DataType::float32(), "B").unwrap();
        let c = ops::matmul(&a, &b).unwrap();
        let mut s = Schedule::create(&[c.clone()]).unwrap();
        schedule_matmul(&mut s, &c, p).unwrap();
        common::assert_same_as_unscheduled(&s, &[c.clone()], &[a, b, c], 2);
    }
    for (hw, ci, co, pad) in [(6, 3, 8, 1), (5, 2, 3, 0)] {
        let d = placeholder(&[1, hw, hw, ci], DataType::float32(), "data").unwrap();
        let w = placeholder(&[3, 3, ci, co], DataType::float32(), "kernel").unwrap();
        let c = ops::conv2d_nhwc(&d, &w, (1, 1), (pad, pad), (1, 1)).unwrap();
        let mut s = Schedule::create(&[c.clone()]).unwrap();
        schedule_conv2d_nhwc(&mut s, &c, None, p).unwrap();
        common::assert_same_as_unscheduled(&s, &[c.clone()], &[d, w, c], 2);
    }
    for shape in [vec![7i64], vec![3, 8], vec![2, 3, 4, 5]] {
        let x = placeholder(&shape, DataType::float32(), "X").unwrap();
        let y = compute(&shape, "Y", &[], |ix| Expr::max(x.at(ix), Expr::float(0.0))).unwrap();
        let mut s = Schedule::create(&[y.clone()]).unwrap();
        schedule_injective(&mut s, &y, p).unwrap();
        common::assert_same_as_unscheduled(&s, &[y.clone()], &[x, y], 1);
    }
}

/// `d` with the default (empty) schedule, lowered and printed.
fn lowered(d: &ComputeDag) -> String {
    let s = Schedule::create(&d.outputs).unwrap();
    let mut args = d.inputs();
    args.extend(d.outputs.iter().cloned());
    lower(&s, &args, "f").unwrap().to_string()
}

/// A DAG read back from JSON (how a task reaches a strategy plugin) is the same DAG:
/// the same print, workload key and FLOPs, and it lowers to the same program.
#[test]
fn a_dag_read_back_from_json_is_the_same_dag() {
    let x = placeholder(&[4, 6], DataType::float32(), "X").unwrap();
    let y = ops::softmax(&x).unwrap();
    let conv_relu = {
        let c = conv(("data", "weight"), 14).outputs[0].clone();
        compute(c.shape(), "T_relu", &[], |ix| {
            Expr::max(c.at(ix), Expr::float(0.0))
        })
        .unwrap()
    };
    for dag in [
        ComputeDag::new(&[y]).unwrap(),
        ComputeDag::new(&[conv_relu]).unwrap(),
    ] {
        let text = serde_json::to_string(&dag).unwrap();
        let back: ComputeDag = serde_json::from_str(&text).unwrap();
        assert_eq!(back.to_string(), dag.to_string());
        assert_eq!(back.workload_key(), dag.workload_key());
        assert_eq!(back.flop_count(), dag.flop_count());
        assert_eq!(lowered(&back), lowered(&dag));
        // a schedule rewrite makes a compute of the read-back body: every tensor it
        // reads is found through its buffer (the loads are linked to the tensors'
        // buffers as they are read back, not only equal to them)
        let mut s = Schedule::create(&back.outputs).unwrap();
        s.cache_write(&back.outputs[0], StorageScope::Local)
            .expect("the read-back tensors are found");
    }
    let bad = serde_json::from_str::<ComputeDag>(r#"{"ops":[],"outputs":[0]}"#);
    assert!(bad.unwrap_err().to_string().contains("output 0"));
}

/// A DAG whose axes have runtime extents (issue 61) reads back with them, prints them,
/// keys them (a bounded axis is another workload than the same axis unbounded, and
/// than another axis bounded) and lowers to the same program.
#[test]
fn runtime_extents_read_back_and_key_their_dag() {
    let product = |bound_rows: bool, bound_terms: bool| {
        let n = placeholder(&[1], DataType::int32(), "n").unwrap();
        let a = placeholder(&[6, 5], DataType::float32(), "A").unwrap();
        let b = placeholder(&[5, 4], DataType::float32(), "B").unwrap();
        let k = match bound_terms {
            true => tessera_te::reduce_axis_bounded(5, n.at(&[Expr::int(0)]), "k"),
            false => tessera_te::reduce_axis(5, "k"),
        };
        let rows = bound_rows.then(|| n.at(&[Expr::int(0)]));
        let c = tessera_te::compute_bounded(&[6, 4], &[rows], "C", "", &["i", "j"], |ix| {
            tessera_te::sum(
                a.at(&[ix[0].clone(), k.expr()]) * b.at(&[k.expr(), ix[1].clone()]),
                std::slice::from_ref(&k),
            )
        })
        .unwrap();
        ComputeDag::new(&[c]).unwrap()
    };
    let dag = product(true, true);
    assert!(dag.to_string().contains("(i < n[0]) (k < n[0])"), "{dag}");
    let text = serde_json::to_string(&dag).unwrap();
    let back: ComputeDag = serde_json::from_str(&text).unwrap();
    assert_eq!(back.to_string(), dag.to_string());
    assert_eq!(back.workload_key(), dag.workload_key());
    assert_eq!(lowered(&back), lowered(&dag));
    assert!(
        lowered(&dag).contains("for (k, 0, n[0])"),
        "{}",
        lowered(&dag)
    );
    let keys: std::collections::HashSet<String> = [(true, true), (true, false), (false, true)]
        .into_iter()
        .map(|(r, t)| product(r, t).workload_key())
        .collect();
    assert_eq!(keys.len(), 3);
}
