//! Algorithm choice for CPU convolutions (`ConvPlan`): which convolutions get a choice
//! and what the rule picks, that every combination of options computes the network,
//! that the options' tasks are labelled and their workload keys are those of the
//! groups a build compiles, and the pick by measured cost.

mod common;
use common::rnd;

use petgraph::stable_graph::NodeIndex;
use std::collections::{HashMap, HashSet};
use tessera_backends::Target;
use tessera_graph::conv_plan::CHOICE_MIN_CHANNELS;
use tessera_graph::passes::constant_f32;
use tessera_graph::reference::interpret;
use tessera_graph::winograd::WINOGRAD_MIN_CHANNELS;
use tessera_graph::{
    build, extract_tasks, fuse, Binary, ConvAlgorithm, ConvPlan, Graph, Layout, Op, TensorType,
    Unary,
};
use tessera_runtime::NDArray;
use tessera_te::ops::Conv2dAttrs;

fn random(shape: &[usize], seed: u64, scale: f32) -> NDArray {
    constant_f32(shape, |i| scale * rnd(seed, i)).unwrap()
}

fn conv(g: &mut Graph, name: &str, x: NodeIndex, w: NodeIndex, stride: i64) -> NodeIndex {
    let op = Op::Conv2d {
        attrs: Conv2dAttrs::new((stride, stride), (1, 1), (1, 1)),
        layout: Layout::Nhwc,
    };
    g.op(name, op, &[x, w]).unwrap()
}

/// NHWC `[1, 8, 8, 32]`: conv0 3×3 32 → 16 + bias + ReLU (Winograd by the rule), conv1
/// 3×3 16 → 16 with a residual add (direct by the rule, Winograd an option), conv2 3×3
/// 16 → 16 of the same shape and epilogue as conv1, conv3 3×3 stride 2 (no choice),
/// conv4 3×3 8 → 8 (too few channels for a choice).
fn net() -> Graph {
    let mut g = Graph::new("plan");
    let x = g.input("data", TensorType::f32(&[1, 8, 8, 32]));
    let w0 = g.constant("w0", random(&[3, 3, 32, 16], 1, 0.2));
    let b0 = g.constant("b0", random(&[16], 2, 0.5));
    let w1 = g.constant("w1", random(&[3, 3, 16, 16], 3, 0.2));
    let w2 = g.constant("w2", random(&[3, 3, 16, 16], 4, 0.2));
    let w3 = g.constant("w3", random(&[3, 3, 16, 8], 5, 0.2));
    let w4 = g.constant("w4", random(&[3, 3, 8, 8], 6, 0.2));
    let c0 = conv(&mut g, "conv0", x, w0, 1);
    let c0 = g.op("bias0", Op::BiasAdd { axis: 3 }, &[c0, b0]).unwrap();
    let r0 = g.op("relu0", Op::Unary(Unary::Relu), &[c0]).unwrap();
    let c1 = conv(&mut g, "conv1", r0, w1, 1);
    let s1 = g.op("add1", Op::Binary(Binary::Add), &[c1, r0]).unwrap();
    let c2 = conv(&mut g, "conv2", s1, w2, 1);
    let s2 = g.op("add2", Op::Binary(Binary::Add), &[c2, s1]).unwrap();
    let c3 = conv(&mut g, "conv3", s2, w3, 2);
    let c4 = conv(&mut g, "conv4", c3, w4, 1);
    g.set_outputs(vec![c4]);
    g
}

fn plan() -> ConvPlan {
    ConvPlan::for_cpu(net(), 8, true).unwrap()
}

fn algorithms(g: &Graph) -> Vec<(String, &'static str)> {
    g.topo_order()
        .into_iter()
        .filter_map(|n| match g.node(n).op {
            Op::Conv2dWinograd { .. } => Some((g.node(n).name.clone(), "winograd")),
            Op::Conv2d { .. } => Some((g.node(n).name.clone(), "direct")),
            _ => None,
        })
        .collect()
}

#[test]
fn the_plan_offers_a_choice_for_each_winograd_convolution_with_enough_channels() {
    const { assert!(CHOICE_MIN_CHANNELS <= 16 && 16 < WINOGRAD_MIN_CHANNELS) };
    let plan = plan();
    let wino = ConvAlgorithm::Winograd { tile: 4 };
    let got: Vec<(&str, ConvAlgorithm, Vec<ConvAlgorithm>)> = plan
        .choices()
        .iter()
        .map(|c| {
            let options = c.options.iter().map(|o| o.algorithm).collect();
            (c.name.as_str(), c.rule, options)
        })
        .collect();
    let direct = ConvAlgorithm::Direct;
    assert_eq!(
        got,
        vec![
            ("conv0", wino, vec![wino, direct]),
            ("conv1", direct, vec![direct, wino]),
            ("conv2", direct, vec![direct, wino]),
        ]
    );
    // conv1 and conv2 compute the same groups: the same keys, one label
    let [c0, c1, c2] = plan.choices() else {
        panic!()
    };
    assert_eq!(c1.options, c2.options);
    assert_ne!(c0.options, c1.options);
    for c in plan.choices() {
        assert_ne!(c.options[0].workload_key, c.options[1].workload_key);
    }
    // the rule's network: conv0 only with Winograd
    let rule = plan.rule_graph();
    let algs = algorithms(rule);
    assert_eq!(
        algs,
        [
            ("conv0", "winograd"),
            ("conv1", "direct"),
            ("conv2", "direct"),
            ("conv3", "direct"),
            ("conv4", "direct")
        ]
        .map(|(a, b)| (a.to_string(), b))
        .to_vec()
    );
    // without Winograd, or for a fixed plan, nothing to choose
    let plain = ConvPlan::for_cpu(net(), 8, false).unwrap();
    assert!(plain.choices().is_empty());
    assert!(algorithms(plain.rule_graph())
        .iter()
        .all(|(_, a)| *a == "direct"));
    let fixed = ConvPlan::fixed(net());
    assert!(fixed.choices().is_empty());
    assert_eq!(fixed.rule_graph().to_string(), net().to_string());
    // an algorithm that is not an option is refused
    let e = plan
        .graph(|_| ConvAlgorithm::Winograd { tile: 2 })
        .unwrap_err()
        .to_string();
    assert!(e.contains("not one of its options"), "{e}");
}

#[test]
fn every_combination_of_options_computes_the_network() {
    let plan = plan();
    let feed = random(&[1, 8, 8, 32], 9, 1.0);
    let want = interpret(&net(), &[("data", &feed)]).unwrap().remove(0);
    let atol = 1e-5 * want.max_abs();
    for mask in 0..(1usize << plan.choices().len()) {
        let mut k = 0;
        let g = plan
            .graph(|c| {
                let pick = c.options[(mask >> k) & 1].algorithm;
                k += 1;
                pick
            })
            .unwrap();
        let winograds = algorithms(&g)
            .iter()
            .filter(|(_, a)| *a == "winograd")
            .count();
        let from_mask = (0..3)
            .filter(|&i| (mask >> i) & 1 == usize::from(i != 0))
            .count();
        assert_eq!(winograds, from_mask, "mask {mask}: {g}");
        let got = interpret(&g, &[("data", &feed)]).unwrap().remove(0);
        got.allclose(&want, 1e-4, atol)
            .unwrap_or_else(|e| panic!("mask {mask}: {e}"));
    }
    // the all-direct and the all-Winograd networks compiled with the default schedules
    for algorithm in [ConvAlgorithm::Direct, ConvAlgorithm::Winograd { tile: 4 }] {
        let g = plan
            .graph(|c| {
                let wanted = c.options.iter().find(|o| o.algorithm == algorithm);
                wanted.map_or(c.rule, |o| o.algorithm)
            })
            .unwrap();
        let mut m = build(&g, &Target::cpu()).unwrap();
        m.set_input("data", &feed).unwrap();
        m.run().unwrap();
        let got = m.get_output(0).unwrap();
        got.allclose(&want, 1e-4, atol)
            .unwrap_or_else(|e| panic!("{algorithm}: {e}"));
    }
}

#[test]
fn the_plans_tasks_are_every_options_groups_labelled_by_convolution() {
    let plan = plan();
    let target = Target::cpu();
    let (tasks, weights) = plan.tasks(&target).unwrap();
    let keys: HashSet<&str> = tasks.iter().map(|t| t.workload_key.as_str()).collect();
    assert_eq!(keys.len(), tasks.len(), "a task twice");
    // the rule network's tasks come first, with its weights
    let (rule_tasks, rule_weights) = extract_tasks(plan.rule_graph(), &target).unwrap();
    for (i, t) in rule_tasks.iter().enumerate() {
        assert_eq!(tasks[i].workload_key, t.workload_key);
        assert_eq!(weights[i], rule_weights[i]);
    }
    // every option's key is a task, labelled with its choice's first convolution;
    // the other tasks have no label
    let mut labels: HashMap<&str, &str> = HashMap::new();
    for c in plan.choices() {
        for o in &c.options {
            let t = tasks
                .iter()
                .find(|t| t.workload_key == o.workload_key)
                .unwrap();
            labels.insert(&o.workload_key, t.choice.as_deref().unwrap());
        }
    }
    assert_eq!(labels.len(), 4, "{labels:?}");
    let first = plan.choices()[1].options[0].workload_key.as_str();
    assert_eq!(labels[first], "conv `conv1`");
    for t in &tasks {
        assert_eq!(
            t.choice.is_some(),
            labels.contains_key(t.workload_key.as_str())
        );
    }
    // the options' keys are those of the groups the chosen networks compile
    for g in plan.option_graphs() {
        let compiled: HashSet<String> = fuse(g)
            .iter()
            .map(|grp| {
                tessera_graph::group_compute(g, grp)
                    .unwrap()
                    .dag()
                    .unwrap()
                    .workload_key()
            })
            .collect();
        let covered = labels.keys().filter(|k| compiled.contains(**k)).count();
        assert_eq!(
            covered, 2,
            "each option network holds one option of each pair"
        );
    }
    // conv1 and conv2 (one task each way) weigh 2
    let w = |key: &str| weights[tasks.iter().position(|t| t.workload_key == key).unwrap()];
    for o in &plan.choices()[1].options {
        assert_eq!(w(&o.workload_key), 2);
    }
}

#[test]
fn a_choice_takes_the_fastest_measured_option_else_its_rule() {
    let plan = plan();
    let c = &plan.choices()[0];
    let (wino, direct) = (&c.options[0].workload_key, &c.options[1].workload_key);
    let costs = |pairs: Vec<(&String, f64)>| {
        let m: HashMap<String, f64> = pairs.into_iter().map(|(k, v)| (k.clone(), v)).collect();
        move |k: &str| m.get(k).copied()
    };
    assert_eq!(
        c.pick(costs(vec![(wino, 2e-3), (direct, 1e-3)])),
        (ConvAlgorithm::Direct, true)
    );
    assert_eq!(
        c.pick(costs(vec![(wino, 1e-3), (direct, 2e-3)])),
        (c.options[0].algorithm, true)
    );
    // one option unmeasured, or a failure's infinite cost: the rule
    assert_eq!(c.pick(costs(vec![(direct, 1e-6)])), (c.rule, false));
    assert_eq!(
        c.pick(costs(vec![(wino, f64::INFINITY), (direct, 1e-3)])),
        (c.rule, false)
    );
}

#[test]
fn the_cpu_rewrites_are_one_named_list_in_the_order_they_run() {
    let names: Vec<&str> = tessera_graph::cpu_rewrites::CPU_REWRITES
        .iter()
        .map(|r| r.name)
        .collect();
    assert_eq!(
        names,
        [
            "winograd",
            "pad-conv-channels",
            "fuse-attention",
            "pad-matmul-columns",
            "pack-conv-weights",
            "pack-dense-weights",
            "dead-code"
        ]
    );
    assert!(tessera_graph::cpu_rewrites::CPU_REWRITES
        .iter()
        .all(|r| !r.what.is_empty()));
}
