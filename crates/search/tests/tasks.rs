//! `operator_tasks`: a network's anchor operators as catalog operator tasks (what
//! template strategies tune), one per distinct operator, weighted, each with its
//! operator's default program as the baseline.

use std::collections::HashSet;
use tessera_backends::{HardwareParams, Target};
use tessera_graph::zoo::{network, ZooOptions};
use tessera_graph::{fuse, op_spec_of, passes, Graph, Layout, Op, TensorType};
use tessera_ir::DataType;
use tessera_search::tasks::{operator_task, operator_tasks};

#[test]
fn a_networks_operator_tasks_are_its_distinct_anchor_operators() {
    let opts = ZooOptions {
        layout: Layout::Nhwc,
        image_size: Some(32),
        ..ZooOptions::default()
    };
    let mut g = network("mobilenet", &opts).unwrap();
    passes::optimize(&mut g, Some(Layout::Nhwc)).unwrap();
    let (target, hw) = (Target::cpu(), HardwareParams::detect_host());
    let tasks = operator_tasks(&g, &target, &hw).unwrap();
    let anchors: usize = fuse(&g)
        .iter()
        .map(|grp| {
            grp.nodes
                .iter()
                .filter(|&&n| op_spec_of(&g, n).is_some())
                .count()
        })
        .sum();
    assert_eq!(tasks.iter().map(|t| t.weight).sum::<usize>(), anchors);
    let keys: HashSet<&str> = tasks.iter().map(|t| t.task.workload_key.as_str()).collect();
    assert_eq!(keys.len(), tasks.len(), "a repeated operator");
    let names: HashSet<&str> = tasks
        .iter()
        .map(|t| t.task.op.as_ref().unwrap().name.as_str())
        .collect();
    let want: HashSet<&str> = ["conv2d", "depthwise_conv2d", "dense"].into();
    assert_eq!(names, want);
    for t in &tasks {
        let spec = t.task.op.as_ref().unwrap();
        let alone = operator_task(spec, &target, &hw).unwrap();
        assert_eq!(t.task.workload_key, alone.task.workload_key);
        assert_eq!(t.task.workload_key, t.task.dag.workload_key());
        assert!(
            t.task.name.starts_with(&format!("{} ", spec.name)),
            "{}",
            t.task.name
        );
        let (Some(Ok(a)), Some(Ok(b))) = (&t.default, &alone.default) else {
            panic!("{}: no default program", t.task.name);
        };
        assert_eq!(a.to_string(), b.to_string());
    }
}

#[test]
fn a_network_without_anchor_operators_has_no_operator_tasks() {
    let mut g = Graph::new("relu");
    let x = g.input("x", TensorType::new(&[4, 8], DataType::float32()));
    let y = g
        .op("r", Op::Unary(tessera_graph::Unary::Relu), &[x])
        .unwrap();
    g.mark_output(y);
    let tasks = operator_tasks(&g, &Target::cpu(), &HardwareParams::detect_host()).unwrap();
    assert!(tasks.is_empty());
}
