//! `operator_tasks`: a network's anchor operators as catalog operator tasks (what
//! template strategies tune), one per distinct operator, weighted, each with its
//! operator's default program as the baseline. `plan_tasks` and `pick_algorithms`: the
//! tasks of every option of a network's convolutions, and the options a log's
//! measurements pick.

use std::collections::HashSet;
use tessera_backends::{HardwareParams, Target};
use tessera_graph::zoo::{network, ZooOptions};
use tessera_graph::ConvAlgorithm;
use tessera_graph::{fuse, op_spec_of, passes, Graph, Layout, Op, TensorType};
use tessera_ir::DataType;
use tessera_search::tasks::{operator_task, operator_tasks, pick_algorithms, plan_tasks};

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

/// NHWC `[1, 8, 8, 32]` through two 3×3 convolutions 32 → 32 (the first with a ReLU):
/// both Winograd by the rule, each with the direct form as its other option.
fn two_convs() -> tessera_graph::ConvPlan {
    use tessera_graph::passes::constant_f32;
    use tessera_te::ops::Conv2dAttrs;
    let mut g = Graph::new("two_convs");
    let mut x = g.input("data", TensorType::f32(&[1, 8, 8, 32]));
    for i in 0..2 {
        let w = constant_f32(&[3, 3, 32, 32], |k| ((k * 7 + i) % 13) as f32 / 13.0 - 0.5);
        let w = g.constant(&format!("w{i}"), w.unwrap());
        let op = Op::Conv2d {
            attrs: Conv2dAttrs::new((1, 1), (1, 1), (1, 1)),
            layout: Layout::Nhwc,
        };
        x = g.op(&format!("conv{i}"), op, &[x, w]).unwrap();
        if i == 0 {
            x = g
                .op("relu", Op::Unary(tessera_graph::Unary::Relu), &[x])
                .unwrap();
        }
    }
    g.mark_output(x);
    tessera_graph::ConvPlan::for_cpu(g, 8, true).unwrap()
}

#[test]
fn a_plans_tasks_hold_every_option_with_its_default_program_and_label() {
    let plan = two_convs();
    let tasks = plan_tasks(&plan, &Target::cpu(), &HardwareParams::detect_host()).unwrap();
    let options: Vec<&str> = plan
        .choices()
        .iter()
        .flat_map(|c| c.options.iter().map(|o| o.workload_key.as_str()))
        .collect();
    assert_eq!(options.len(), 4);
    for key in &options {
        let t = tasks.iter().find(|t| t.task.workload_key == *key).unwrap();
        assert!(t.choice.is_some(), "{}", t.task.name);
        assert!(
            matches!(t.default, Some(Ok(_))),
            "{}: no default",
            t.task.name
        );
    }
    let labels: HashSet<&str> = tasks.iter().filter_map(|t| t.choice.as_deref()).collect();
    assert_eq!(labels, ["conv `conv0`", "conv `conv1`"].into());
}

#[test]
fn a_build_takes_the_option_measured_fastest_and_the_rule_for_the_unmeasured() {
    use tessera_search::record::{ApplyHistoryBest, Record};
    use tessera_search::{MeasureErrorNo, MeasureResult, ScheduleDesc};
    let plan = two_convs();
    let rec = |key: &str, cost: f64| {
        let result = MeasureResult {
            costs: vec![cost],
            error_no: MeasureErrorNo::NoError,
            error_msg: None,
            all_cost: 0.1,
            timestamp: 1_700_000_000,
            at_points: None,
        };
        Record::new(key, "cpu", "task", ScheduleDesc::Default, result)
    };
    let [c0, c1] = plan.choices() else {
        panic!("{:?}", plan.choices());
    };
    let wino = c0.rule;
    assert!(matches!(wino, ConvAlgorithm::Winograd { .. }));
    // conv0: its direct option measured faster; conv1: only its Winograd one measured
    let records = vec![
        rec(&c0.options[0].workload_key, 2e-4),
        rec(&c0.options[1].workload_key, 1e-4),
        rec(&c1.options[0].workload_key, 1e-4),
    ];
    let best = ApplyHistoryBest::new(&records);
    let (g, picked) = pick_algorithms(&plan, &best, "cpu -num-cores=2").unwrap();
    assert_eq!(picked, vec![(ConvAlgorithm::Direct, true), (wino, false)]);
    let ops: Vec<&str> = g
        .topo_order()
        .into_iter()
        .filter_map(|n| match g.node(n).op {
            Op::Conv2d { .. } => Some("direct"),
            Op::Conv2dWinograd { .. } => Some("winograd"),
            _ => None,
        })
        .collect();
    assert_eq!(ops, ["direct", "winograd"]);
    // no records: the rule everywhere
    let (_, picked) = pick_algorithms(&plan, &ApplyHistoryBest::new(&[]), "cpu").unwrap();
    assert_eq!(picked, vec![(wino, false), (wino, false)]);
}

#[test]
fn every_default_program_takes_its_tasks_arguments_in_the_dags_order() {
    // A residual add whose first operand is the residual (MobileNet-V2's form): the
    // group's own order puts the conv's data first, the DAG's the residual. A baseline
    // lowered in the group's order was fed the candidates' inputs in the wrong places
    // and failed its check (WRONG_ANSWER on MobileNet-V2's 7×7×160 blocks).
    use tessera_graph::passes::constant_f32;
    use tessera_te::ops::Conv2dAttrs;
    let mut g = Graph::new("residual_first");
    let x = g.input("x", TensorType::f32(&[1, 8, 8, 32]));
    let r = g.input("r", TensorType::f32(&[1, 8, 8, 16]));
    let w = constant_f32(&[1, 1, 32, 16], |k| (k % 7) as f32 / 7.0 - 0.5).unwrap();
    let w = g.constant("w", w);
    let op = Op::Conv2d {
        attrs: Conv2dAttrs::new((1, 1), (0, 0), (1, 1)),
        layout: Layout::Nhwc,
    };
    let y = g.op("conv", op, &[x, w]).unwrap();
    let z = g
        .op("add", Op::Binary(tessera_graph::Binary::Add), &[r, y])
        .unwrap();
    g.mark_output(z);
    let plan = tessera_graph::ConvPlan::for_cpu(g, 8, true).unwrap();
    let tasks = plan_tasks(&plan, &Target::cpu(), &HardwareParams::detect_host()).unwrap();
    assert_eq!(tasks.len(), 1);
    let t = &tasks[0];
    let Some(Ok(f)) = &t.default else {
        panic!("{}: no default program", t.task.name)
    };
    let want: Vec<Vec<i64>> = tessera_search::state::State::new(&t.task.dag)
        .args()
        .iter()
        .map(|a| a.shape().to_vec())
        .collect();
    assert_eq!(want[0], [1, 8, 8, 16], "the DAG takes the residual first");
    let got: Vec<Vec<i64>> = f
        .params
        .iter()
        .map(|b| b.shape().iter().map(|d| d.as_int().unwrap()).collect())
        .collect();
    assert_eq!(got, want, "{}", t.task.name);
}
