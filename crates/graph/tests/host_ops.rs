//! Host steps: a CPU build runs `TopK` on the host (a partial sort) instead of as a
//! kernel. The network's outputs equal the reference interpreter's (which evaluates
//! TopK's tensor expression), ties in ONNX's order, along the last axis and a middle one,
//! largest and smallest; one step writes both the values and the positions; the step is
//! no tuning task, keeps the run out of a launch sequence saying why, and survives a
//! module file; bad input to the operator is an error, and NaNs order as PyTorch's.

mod common;
use common::rnd;

use std::sync::Arc;
use tessera_backends::{CpuBackend, Target};
use tessera_graph::host_ops::{HostOp, TopKPart};
use tessera_graph::reference::interpret;
use tessera_graph::{
    build, compile, extract_tasks, fuse, Binary, CompiledNetwork, Graph, LaunchMode, Op,
    TensorType, Unary,
};
use tessera_ir::DataType;
use tessera_runtime::{CpuDevice, NDArray};
use tessera_te::ops::TopKOutput;

/// `relu(x)` (ties: every negative becomes 0), its top `k` along `axis` as values and
/// positions, and the values plus one after them (a kernel reading the host step).
fn topk_net(shape: &[i64], axis: i64, k: i64, largest: bool) -> Graph {
    let mut g = Graph::new("topk");
    let x = g.input("data", TensorType::f32(shape));
    let r = g.op("relu", Op::Unary(Unary::Relu), &[x]).unwrap();
    let pick = |output| Op::TopK {
        axis,
        k,
        largest,
        output,
        on_host: false,
    };
    let values = g.op("values", pick(TopKOutput::Values), &[r]).unwrap();
    let positions = g.op("positions", pick(TopKOutput::Indices), &[r]).unwrap();
    let one = g.constant("one", NDArray::from_slice_f32(&[1], &[1.0]).unwrap());
    let after = g
        .op("after", Op::Binary(Binary::Add), &[values, one])
        .unwrap();
    g.set_outputs(vec![after, positions]);
    g
}

/// Values in steps of 1/8 (many equal ones) around zero.
fn data(shape: &[i64], seed: u64) -> NDArray {
    let n: i64 = shape.iter().product();
    let v: Vec<f32> = (0..n as usize)
        .map(|i| (rnd(seed, i) * 16.0).round() / 8.0)
        .collect();
    let shape: Vec<usize> = shape.iter().map(|&d| d as usize).collect();
    NDArray::from_slice_f32(&shape, &v).unwrap()
}

fn run_all(m: &mut tessera_graph::GraphModule, x: &NDArray) -> Vec<NDArray> {
    m.set_input("data", x).unwrap();
    m.run().unwrap();
    (0..2).map(|i| m.get_output(i).unwrap()).collect()
}

#[test]
fn topk_runs_on_the_host_as_the_reference_computes_it() {
    for (shape, axis, k, largest) in [
        (vec![3, 700], 1, 9, true),
        (vec![3, 700], -1, 700, false),
        (vec![4, 50, 3], 1, 7, false),
        (vec![2, 5, 6], 0, 2, true),
    ] {
        let g = topk_net(&shape, axis, k, largest);
        let x = data(&shape, 5 + k as u64);
        let want = interpret(&g, &[("data", &x)]).unwrap();
        let mut m = build(&g, &Target::cpu()).unwrap();
        let got = run_all(&mut m, &x);
        let case = format!("{shape:?} axis {axis} k {k} largest {largest}");
        assert_eq!(got[0], want[0], "{case}: values");
        assert_eq!(got[1], want[1], "{case}: positions");
        match m.launch_mode() {
            LaunchMode::StepByStep { why } => {
                assert!(why.contains("(topk) runs on the host"), "{case}: {why}")
            }
            other => panic!("{case}: {other:?}"),
        }
        // one host step writes both outputs; the profile names it among the kernels
        let steps = m.profile(1).unwrap();
        assert_eq!(steps.len(), fuse(&g).len() - 1, "{case}: {steps:?}");
        let keys = m.step_workload_keys();
        assert_eq!(keys.iter().filter(|k| k.is_empty()).count(), 1, "{case}");
    }
}

#[test]
fn a_host_step_is_no_task_and_survives_a_module_file() {
    let shape = [2, 300];
    let g = topk_net(&shape, 1, 5, true);
    let (tasks, weights) = extract_tasks(&g, &Target::cpu()).unwrap();
    assert!(tasks.iter().all(|t| !t.name.contains("topk")), "{tasks:?}");
    assert_eq!(weights.iter().sum::<usize>(), fuse(&g).len() - 2);

    let x = data(&shape, 3);
    let want = run_all(&mut build(&g, &Target::cpu()).unwrap(), &x);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("topk.tsm");
    compile(&g, &CpuBackend::new(Target::cpu()), None)
        .unwrap()
        .save(&path)
        .unwrap();
    let read = CompiledNetwork::read(&path).unwrap();
    let mut m = read.load(Arc::new(CpuDevice::new())).unwrap();
    assert_eq!(run_all(&mut m, &x), want);
}

#[test]
fn the_host_topk_checks_its_input_and_orders_nan_first() {
    let op = HostOp::TopK {
        axis: 0,
        k: 3,
        largest: true,
        parts: vec![TopKPart::Indices],
    };
    let out = [TensorType::new(&[3], DataType::int64())];
    let x = NDArray::from_slice_f32(&[5], &[1.0, f32::NAN, 3.0, f32::INFINITY, 3.0]).unwrap();
    let got = op.run(std::slice::from_ref(&x), &out).unwrap().remove(0);
    assert_eq!(got.as_slice::<i64>().unwrap(), &[1, 3, 2]);
    // a NaN after the first k, in a block tested against the heap's root at once
    let mut late: Vec<f32> = (0..200).map(|i| (i % 50) as f32).collect();
    late[150] = f32::NAN;
    let late = NDArray::from_slice_f32(&[200], &late).unwrap();
    let got = op.run(&[late], &out).unwrap().remove(0);
    assert_eq!(got.as_slice::<i64>().unwrap(), &[150, 49, 99]);

    let ints = NDArray::from_slice::<i64>(&[5], &[i64::MAX, -4, i64::MAX - 1, 7, -4]).unwrap();
    let smallest = HostOp::TopK {
        axis: 0,
        k: 3,
        largest: false,
        parts: vec![TopKPart::Values, TopKPart::Indices],
    };
    let both = [
        TensorType::new(&[3], DataType::int64()),
        TensorType::new(&[3], DataType::int64()),
    ];
    let got = smallest.run(&[ints], &both).unwrap();
    assert_eq!(got[0].as_slice::<i64>().unwrap(), &[-4, -4, 7]);
    assert_eq!(got[1].as_slice::<i64>().unwrap(), &[1, 4, 3]);

    let too_many = HostOp::TopK {
        axis: 0,
        k: 6,
        largest: true,
        parts: vec![TopKPart::Indices],
    };
    let e = too_many
        .run(&[x.clone()], &[TensorType::new(&[6], DataType::int64())])
        .unwrap_err()
        .to_string();
    assert!(e.contains("k = 6 on an axis of 5"), "{e}");
    let e = op
        .run(&[x.clone(), x.clone()], &out)
        .unwrap_err()
        .to_string();
    assert!(e.contains("takes one input"), "{e}");
    let e = op.run(&[x], &both).unwrap_err().to_string();
    assert!(e.contains("writes 1 outputs, the plan has 2"), "{e}");
}
