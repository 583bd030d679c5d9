//! `op_spec_of`: the catalog operator of a graph node computes what the node computes
//! (same DAG, so the same workload key), and nodes the catalog's attributes cannot
//! express are refused.

use petgraph::stable_graph::NodeIndex;
use tessera_graph::zoo::{network, ZooOptions};
use tessera_graph::{op_spec_of, passes, Graph, Layout, Op, TensorType};
use tessera_ir::DataType;
use tessera_te::catalog::OpAttrs;
use tessera_te::ops::Conv2dAttrs;
use tessera_te::{placeholder, ComputeDag};

fn input(g: &mut Graph, name: &str, shape: &[i64]) -> NodeIndex {
    g.input(name, TensorType::new(shape, DataType::float32()))
}

/// The workload key of what node `n` computes (its te expression on placeholders).
fn node_key(g: &Graph, n: NodeIndex) -> String {
    let node = g.node(n);
    let args = g.args(n);
    let shapes: Vec<&[i64]> = args.iter().map(|&a| &g.node(a).ty.shape[..]).collect();
    let ins: Vec<_> = args
        .iter()
        .enumerate()
        .map(|(slot, &a)| {
            let shape = node
                .op
                .input_view(slot, &shapes)
                .unwrap_or_else(|| shapes[slot].to_vec());
            placeholder(&shape, g.node(a).ty.dtype, &format!("p{slot}")).unwrap()
        })
        .collect();
    let out = node.op.compute(&ins).unwrap();
    ComputeDag::new(&[out]).unwrap().workload_key()
}

fn conv(
    g: &mut Graph,
    data: &[i64],
    weight: &[i64],
    attrs: Conv2dAttrs,
    layout: Layout,
) -> NodeIndex {
    let d = input(g, "data", data);
    let w = input(g, "weight", weight);
    g.op("conv", Op::Conv2d { attrs, layout }, &[d, w]).unwrap()
}

#[test]
fn each_kind_maps_to_its_catalog_operator_and_computes_the_same() {
    let pad1 = Conv2dAttrs::new((1, 1), (1, 1), (1, 1));
    let s2 = Conv2dAttrs::new((2, 2), (2, 2), (1, 1));
    let same_1x3 = Conv2dAttrs::new((1, 1), (0, 1), (1, 1));
    let dil = Conv2dAttrs::new((1, 1), (2, 2), (2, 2));
    let mut cases: Vec<(Graph, NodeIndex, &str, Vec<i64>, OpAttrs)> = Vec::new();
    let attrs = |stride, pad, dilation| OpAttrs {
        stride,
        pad,
        dilation,
        ..OpAttrs::default()
    };
    let mut g = Graph::new("t");
    let n = conv(&mut g, &[1, 9, 7, 6], &[3, 3, 6, 8], pad1, Layout::Nhwc);
    cases.push((
        g,
        n,
        "conv2d",
        vec![1, 9, 7, 6, 8, 3, 3],
        attrs(1, Some(1), 1),
    ));
    let mut g = Graph::new("t");
    let n = conv(&mut g, &[2, 4, 9, 11], &[6, 4, 5, 5], s2, Layout::Nchw);
    cases.push((
        g,
        n,
        "conv2d_nchw",
        vec![2, 9, 11, 4, 6, 5, 5],
        attrs(2, Some(2), 1),
    ));
    let mut g = Graph::new("t");
    let n = conv(&mut g, &[1, 8, 8, 4], &[1, 3, 4, 4], same_1x3, Layout::Nhwc);
    cases.push((g, n, "conv2d", vec![1, 8, 8, 4, 4, 1, 3], attrs(1, None, 1)));
    let mut g = Graph::new("t");
    let n = conv(&mut g, &[1, 10, 10, 4], &[3, 3, 4, 4], dil, Layout::Nhwc);
    cases.push((
        g,
        n,
        "conv2d",
        vec![1, 10, 10, 4, 4, 3, 3],
        attrs(1, Some(2), 2),
    ));
    let mut g = Graph::new("t");
    let dw = Conv2dAttrs::new((2, 2), (1, 1), (1, 1)).with_groups(24);
    let n = conv(&mut g, &[1, 10, 9, 24], &[3, 3, 1, 24], dw, Layout::Nhwc);
    cases.push((
        g,
        n,
        "depthwise_conv2d",
        vec![1, 10, 9, 24, 3, 3],
        attrs(2, Some(1), 1),
    ));
    let mut g = Graph::new("t");
    let (a, b) = (input(&mut g, "a", &[3, 40]), input(&mut g, "b", &[24, 40]));
    let n = g.op("dense", Op::Dense, &[a, b]).unwrap();
    cases.push((g, n, "dense", vec![3, 24, 40], OpAttrs::default()));
    let mut g = Graph::new("t");
    let (a, b) = (input(&mut g, "a", &[12, 9]), input(&mut g, "b", &[9, 20]));
    let n = g.op("mm", Op::MatMul, &[a, b]).unwrap();
    cases.push((g, n, "matmul", vec![12, 20, 9], OpAttrs::default()));
    for (g, n, name, shape, attrs) in cases {
        let spec = op_spec_of(&g, n).unwrap_or_else(|| panic!("{name} {shape:?}: no spec"));
        assert_eq!(spec.name, name);
        assert_eq!(spec.shape, shape, "{name}");
        assert_eq!(spec.attrs, attrs, "{name} {shape:?}");
        assert_eq!(
            spec.dag().unwrap().workload_key(),
            node_key(&g, n),
            "{name} {shape:?}: the spec computes something else than the node"
        );
    }
}

#[test]
fn nodes_the_catalog_cannot_express_are_refused() {
    let asym = Conv2dAttrs::new((1, 1), (1, 1), (1, 1)).with_padding(0, 0, 1, 1);
    let strides = Conv2dAttrs::new((1, 2), (1, 1), (1, 1));
    let pads = Conv2dAttrs::new((1, 1), (1, 0), (1, 1)); // 3x3 with (1, 0): neither
    let grouped = Conv2dAttrs::new((1, 1), (1, 1), (1, 1)).with_groups(2);
    let multiplier = Conv2dAttrs::new((1, 1), (1, 1), (1, 1)).with_groups(4);
    let nodes: Vec<(Graph, NodeIndex, &str)> = vec![
        {
            let mut g = Graph::new("t");
            let n = conv(&mut g, &[1, 8, 8, 4], &[3, 3, 4, 4], asym, Layout::Nhwc);
            (g, n, "asymmetric padding")
        },
        {
            let mut g = Graph::new("t");
            let n = conv(&mut g, &[1, 8, 8, 4], &[3, 3, 4, 4], strides, Layout::Nhwc);
            (g, n, "two strides")
        },
        {
            let mut g = Graph::new("t");
            let n = conv(&mut g, &[1, 4, 8, 8], &[4, 4, 3, 3], pads, Layout::Nchw);
            (g, n, "two paddings")
        },
        {
            let mut g = Graph::new("t");
            let n = conv(&mut g, &[1, 4, 8, 8], &[4, 2, 3, 3], grouped, Layout::Nchw);
            (g, n, "grouped")
        },
        {
            let mut g = Graph::new("t");
            let n = conv(
                &mut g,
                &[1, 8, 8, 4],
                &[3, 3, 1, 8],
                multiplier,
                Layout::Nhwc,
            );
            (g, n, "depthwise multiplier 2")
        },
        {
            let mut g = Graph::new("t");
            let d = input(&mut g, "data", &[1, 4, 8, 8]);
            let dw = Conv2dAttrs::new((1, 1), (1, 1), (1, 1)).with_groups(4);
            let w = input(&mut g, "w", &[4, 1, 3, 3]);
            let n = g
                .op(
                    "dw",
                    Op::Conv2d {
                        attrs: dw,
                        layout: Layout::Nchw,
                    },
                    &[d, w],
                )
                .unwrap();
            (g, n, "depthwise NCHW")
        },
        {
            let mut g = Graph::new("t");
            let (a, b) = (
                input(&mut g, "a", &[2, 3, 4]),
                input(&mut g, "b", &[2, 4, 5]),
            );
            let n = g.op("bmm", Op::MatMul, &[a, b]).unwrap();
            (g, n, "3-D matmul")
        },
    ];
    for (g, n, what) in nodes {
        assert_eq!(op_spec_of(&g, n), None, "{what}");
    }
}

#[test]
fn every_spec_of_a_zoo_network_computes_its_node() {
    let mut found = 0;
    for (name, layout) in [("mobilenet", Layout::Nhwc), ("resnet-18", Layout::Nchw)] {
        let opts = ZooOptions {
            layout,
            image_size: Some(32),
            ..ZooOptions::default()
        };
        let mut g = network(name, &opts).unwrap();
        passes::optimize(&mut g, Some(layout)).unwrap();
        for n in g.topo_order() {
            if let Some(spec) = op_spec_of(&g, n) {
                found += 1;
                assert_eq!(
                    spec.dag().unwrap().workload_key(),
                    node_key(&g, n),
                    "{spec:?}"
                );
            }
        }
    }
    assert!(found > 40, "{found} nodes");
}
