//! The executor against the reference evaluator on small networks, before and after the
//! passes (batch-norm folding, constant folding, NCHW -> NHWC).

mod common;
use common::{agrees_interpreted_and_built, rnd};

use tessera_backends::Target;
use tessera_graph::passes::{self, constant_f32};
use tessera_graph::reference::interpret;
use tessera_graph::{build, extract_tasks, fuse, Binary, Graph, Layout, Op, TensorType, Unary};
use tessera_ir::DataType;
use tessera_runtime::NDArray;
use tessera_te::ops::{Conv2dAttrs, Pool2dAttrs, PoolType};

fn konst(
    g: &mut Graph,
    name: &str,
    shape: &[usize],
    seed: u64,
    scale: f32,
    offset: f32,
) -> petgraph::stable_graph::NodeIndex {
    g.constant(
        name,
        constant_f32(shape, |i| offset + scale * rnd(seed, i)).unwrap(),
    )
}

/// conv-bn-relu, maxpool, a residual block with a 1x1 projection, a depthwise conv with
/// ReLU6, a concat of two branches, global pooling, flatten, dense + bias, softmax.
fn small_net() -> Graph {
    let mut g = Graph::new("small");
    let x = g.input("data", TensorType::f32(&[1, 3, 16, 16]));
    let w0 = konst(&mut g, "w0", &[8, 3, 3, 3], 1, 0.4, 0.0);
    let c0 = g
        .op(
            "conv0",
            Op::Conv2d {
                attrs: Conv2dAttrs::new((1, 1), (1, 1), (1, 1)),
                layout: Layout::Nchw,
            },
            &[x, w0],
        )
        .unwrap();
    let bn: Vec<_> = (0..4)
        .map(|k| {
            konst(
                &mut g,
                &format!("bn{k}"),
                &[8],
                10 + k,
                0.2,
                if k == 3 { 1.0 } else { 0.0 },
            )
        })
        .collect();
    let b0 = g
        .op(
            "bn0",
            Op::BatchNorm {
                epsilon: 1e-5,
                axis: 1,
            },
            &[c0, bn[0], bn[1], bn[2], bn[3]],
        )
        .unwrap();
    let r0 = g.op("relu0", Op::Unary(Unary::Relu), &[b0]).unwrap();
    let p0 = g
        .op(
            "pool0",
            Op::Pool2d {
                kind: PoolType::Max,
                attrs: Pool2dAttrs::new((3, 3), (2, 2), (1, 1)),
            },
            &[r0],
        )
        .unwrap();
    // residual: conv3x3 + bias, plus a 1x1 projection of the input, relu
    let w1 = konst(&mut g, "w1", &[12, 8, 3, 3], 2, 0.2, 0.0);
    let c1 = g
        .op(
            "conv1",
            Op::Conv2d {
                attrs: Conv2dAttrs::new((1, 1), (1, 1), (1, 1)),
                layout: Layout::Nchw,
            },
            &[p0, w1],
        )
        .unwrap();
    let b1 = konst(&mut g, "b1", &[12], 3, 0.1, 0.0);
    let c1b = g.op("bias1", Op::BiasAdd { axis: 1 }, &[c1, b1]).unwrap();
    let wp = konst(&mut g, "wp", &[12, 8, 1, 1], 4, 0.3, 0.0);
    let proj = g
        .op(
            "proj",
            Op::Conv2d {
                attrs: Conv2dAttrs::new((1, 1), (0, 0), (1, 1)),
                layout: Layout::Nchw,
            },
            &[p0, wp],
        )
        .unwrap();
    let add = g.op("add", Op::Binary(Binary::Add), &[c1b, proj]).unwrap();
    let r1 = g.op("relu1", Op::Unary(Unary::Relu), &[add]).unwrap();
    // depthwise 3x3 with a [C,1,1] scale (broadcast multiply), relu6
    let wd = konst(&mut g, "wd", &[12, 1, 3, 3], 5, 0.3, 0.0);
    let dw = g
        .op(
            "dw",
            Op::Conv2d {
                attrs: Conv2dAttrs::new((1, 1), (1, 1), (1, 1)).with_groups(12),
                layout: Layout::Nchw,
            },
            &[r1, wd],
        )
        .unwrap();
    let sc = konst(&mut g, "sc", &[12, 1, 1], 6, 0.5, 1.0);
    let dws = g
        .op("dw_scale", Op::Binary(Binary::Mul), &[dw, sc])
        .unwrap();
    let r6 = g
        .op("relu6", Op::Clip { min: 0.0, max: 6.0 }, &[dws])
        .unwrap();
    // two branches concatenated
    let wa = konst(&mut g, "wa", &[4, 12, 1, 1], 7, 0.3, 0.0);
    let ba = g
        .op(
            "branch_a",
            Op::Conv2d {
                attrs: Conv2dAttrs::new((1, 1), (0, 0), (1, 1)),
                layout: Layout::Nchw,
            },
            &[r6, wa],
        )
        .unwrap();
    let bb = g
        .op(
            "branch_b",
            Op::Pool2d {
                kind: PoolType::Avg,
                attrs: Pool2dAttrs::new((3, 3), (1, 1), (1, 1)),
            },
            &[r6],
        )
        .unwrap();
    let cat = g.op("concat", Op::Concat { axis: 1 }, &[ba, bb]).unwrap();
    let gp = g
        .op(
            "gap",
            Op::GlobalPool2d {
                kind: PoolType::Avg,
                layout: Layout::Nchw,
            },
            &[cat],
        )
        .unwrap();
    let fl = g.op("flatten", Op::Flatten, &[gp]).unwrap();
    let wf = konst(&mut g, "wf", &[10, 16], 8, 0.5, 0.0);
    let fc = g.op("fc", Op::Dense, &[fl, wf]).unwrap();
    let bf = konst(&mut g, "bf", &[10], 9, 0.1, 0.0);
    let fcb = g.op("fc_bias", Op::BiasAdd { axis: 1 }, &[fc, bf]).unwrap();
    let sm = g.op("softmax", Op::Softmax { axis: 1 }, &[fcb]).unwrap();
    g.mark_output(sm);
    g
}

fn input() -> NDArray {
    NDArray::from_slice_f32(
        &[1, 3, 16, 16],
        &(0..768).map(|i| rnd(99, i)).collect::<Vec<_>>(),
    )
    .unwrap()
}

/// `g` on `input()` gives `want`, both in the reference interpreter and built.
fn assert_computes(g: &Graph, want: &NDArray) {
    interpret(g, &[("data", &input())])
        .unwrap()
        .remove(0)
        .allclose(want, 1e-4, 1e-5)
        .unwrap();
    run_built(g).allclose(want, 1e-4, 1e-5).unwrap();
}

fn run_built(g: &Graph) -> NDArray {
    let mut m = build(g, &Target::cpu()).unwrap();
    m.set_input("data", &input()).unwrap();
    m.run().unwrap();
    m.get_output(0).unwrap()
}

#[test]
fn executor_matches_reference_before_and_after_passes() {
    let g = small_net();
    let want = interpret(&g, &[("data", &input())]).unwrap().remove(0);
    assert_eq!(want.shape(), &[1, 10]);
    let got = run_built(&g);
    got.allclose(&want, 1e-4, 1e-5).unwrap();

    let mut nchw = g.clone();
    passes::optimize(&mut nchw, None).unwrap();
    assert!(!nchw.op_counts().contains_key("batch_norm"), "{nchw}");
    run_built(&nchw).allclose(&want, 1e-4, 1e-5).unwrap();

    let mut nhwc = g.clone();
    passes::optimize(&mut nhwc, Some(Layout::Nhwc)).unwrap();
    let text = nhwc.to_string();
    // one transform in (the input) and none back before flatten: global pooling's
    // output goes back to NCHW only once, before the layout-unaware flatten
    assert_eq!(nhwc.op_counts().get("layout_transform"), Some(&2), "{text}");
    assert_computes(&nhwc, &want);
}

#[test]
fn packed_convolution_weights_compute_the_same() {
    let g = small_net();
    let want = interpret(&g, &[("data", &input())]).unwrap().remove(0);
    let mut nhwc = g.clone();
    passes::optimize(&mut nhwc, Some(Layout::Nhwc)).unwrap();
    let hwio: Vec<Vec<i64>> = conv_weight_shapes(&nhwc);
    // blocks of 4 output channels: a block of the first conv (3×3, 3 input channels)
    // holds 432 bytes, of the 3×3 8 → 12 one 1152, of the 1×1 ones less than 432
    let packed = passes::pack_conv_weights(&mut nhwc, 4, 432).unwrap();
    let shapes = conv_weight_shapes(&nhwc);
    assert_eq!(packed, 1, "{nhwc}");
    assert_eq!(
        shapes.iter().filter(|s| s.len() == 5).count(),
        packed,
        "{shapes:?}"
    );
    // the first conv's [3, 3, 3, 8] stays HWIO (its block is not above the bound)
    assert!(shapes.contains(&vec![3, 3, 3, 8]), "{shapes:?}");
    // each packed weight is one HWIO weight [KH, KW, I, O] as [O/4, KH, KW, I, 4]
    for after in shapes.iter().filter(|s| s.len() == 5) {
        let [ob, kh, kw, ci, 4] = after[..] else {
            panic!("{after:?}")
        };
        assert!(
            hwio.contains(&vec![kh, kw, ci, ob * 4]),
            "{after:?} {hwio:?}"
        );
    }
    assert_computes(&nhwc, &want);
    // a block width that divides no convolution's output channels packs none
    let mut again = g.clone();
    passes::optimize(&mut again, Some(Layout::Nhwc)).unwrap();
    assert_eq!(passes::pack_conv_weights(&mut again, 7, 0).unwrap(), 0);
}

/// A conv, then a grouped conv (2 groups of 4 channels) with ReLU, on `input()`.
fn grouped_net() -> Graph {
    let mut g = Graph::new("grouped");
    let x = g.input("data", TensorType::f32(&[1, 3, 16, 16]));
    let w0 = konst(&mut g, "w0", &[8, 3, 3, 3], 1, 0.4, 0.0);
    let conv = |attrs: Conv2dAttrs| Op::Conv2d {
        attrs,
        layout: Layout::Nchw,
    };
    let same = Conv2dAttrs::new((1, 1), (1, 1), (1, 1));
    let c0 = g.op("conv0", conv(same), &[x, w0]).unwrap();
    let wg = konst(&mut g, "wg", &[8, 4, 3, 3], 2, 0.3, 0.0);
    let cg = g
        .op("grouped", conv(same.with_groups(2)), &[c0, wg])
        .unwrap();
    let r = g.op("relu", Op::Unary(Unary::Relu), &[cg]).unwrap();
    g.mark_output(r);
    g
}

#[test]
fn grouped_convolution_weights_are_packed_and_compute_the_same() {
    let g = grouped_net();
    let want = interpret(&g, &[("data", &input())]).unwrap().remove(0);
    let mut nhwc = g.clone();
    passes::optimize(&mut nhwc, Some(Layout::Nhwc)).unwrap();
    assert_eq!(passes::pack_conv_weights(&mut nhwc, 4, 0).unwrap(), 2);
    let shapes = conv_weight_shapes(&nhwc);
    // the grouped weight [3, 3, 4, 8] (4 input channels per group) as [8/4, 3, 3, 4, 4]
    assert_eq!(shapes, vec![vec![2, 3, 3, 3, 4], vec![2, 3, 3, 4, 4]]);
    assert_computes(&nhwc, &want);
}

/// The weight shapes of `g`'s convolutions, in node order.
fn conv_weight_shapes(g: &Graph) -> Vec<Vec<i64>> {
    g.topo_order()
        .into_iter()
        .filter(|&n| matches!(g.node(n).op, Op::Conv2d { .. }))
        .map(|n| g.node(g.args(n)[1]).ty.shape.clone())
        .collect()
}

#[test]
fn fusion_groups_and_task_weights() {
    let mut g = small_net();
    passes::optimize(&mut g, Some(Layout::Nhwc)).unwrap();
    let groups = fuse(&g);
    let names: Vec<String> = groups
        .iter()
        .map(|gr| tessera_graph::fuse::group_name(&g, gr))
        .collect();
    insta::assert_snapshot!(names.join("\n"));
    let (tasks, weights) = extract_tasks(&g, &Target::cpu()).unwrap();
    assert_eq!(weights.iter().sum::<usize>(), groups.len());
    assert_eq!(tasks.len(), weights.len());
}

/// A transformer's MLP in small: dense → GELU as PyTorch exports it
/// (`x · ½(1 + erf(x/√2))`, a diamond on `x`) → dense → a squeeze-excitation-like
/// scale (`σ(dense(first row))` broadcast over the rows).
fn mlp_net() -> Graph {
    let mut g = Graph::new("mlp");
    let x = g.input("data", TensorType::f32(&[12, 16]));
    let w1 = konst(&mut g, "w1", &[32, 16], 3, 0.5, 0.0);
    let h = g.op("fc1", Op::Dense, &[x, w1]).unwrap();
    let sqrt2 = konst(&mut g, "sqrt2", &[1], 0, 0.0, std::f32::consts::SQRT_2);
    let (one, half) = (
        konst(&mut g, "one", &[1], 0, 0.0, 1.0),
        konst(&mut g, "half", &[1], 0, 0.0, 0.5),
    );
    let d = g.op("div", Op::Binary(Binary::Div), &[h, sqrt2]).unwrap();
    let e = g.op("erf", Op::Unary(Unary::Erf), &[d]).unwrap();
    let e1 = g.op("add1", Op::Binary(Binary::Add), &[e, one]).unwrap();
    let m = g.op("mul", Op::Binary(Binary::Mul), &[h, e1]).unwrap();
    let gelu = g.op("half", Op::Binary(Binary::Mul), &[m, half]).unwrap();
    let w2 = konst(&mut g, "w2", &[16, 32], 4, 0.3, 0.0);
    let y = g.op("fc2", Op::Dense, &[gelu, w2]).unwrap();
    let first = g
        .op(
            "first",
            Op::StridedSlice {
                begin: vec![0, 0],
                end: vec![1, 16],
                strides: vec![1, 1],
            },
            &[y],
        )
        .unwrap();
    let w3 = konst(&mut g, "w3", &[16, 16], 5, 0.3, 0.0);
    let one_row = g.op("row", Op::Dense, &[first, w3]).unwrap();
    let s = g.op("gate", Op::Unary(Unary::Sigmoid), &[one_row]).unwrap();
    let out = g.op("scale", Op::Binary(Binary::Mul), &[y, s]).unwrap();
    g.set_outputs(vec![out]);
    g
}

#[test]
fn packed_dense_weights_and_fused_diamonds_compute_the_same() {
    let g = mlp_net();
    let data = NDArray::from_slice_f32(&[12, 16], &(0..192).map(|i| rnd(7, i)).collect::<Vec<_>>())
        .unwrap();
    let want = interpret(&g, &[("data", &data)]).unwrap().remove(0);
    let run = |g: &Graph| {
        let mut m = build(g, &Target::cpu()).unwrap();
        m.set_input("data", &data).unwrap();
        m.run().unwrap();
        m.get_output(0).unwrap()
    };
    // the GELU diamond fuses into the first dense layer's group
    let names: Vec<String> = fuse(&g)
        .iter()
        .map(|gr| tessera_graph::fuse::group_name(&g, gr))
        .collect();
    assert!(
        names.contains(&"fused_dense_divide_erf_add_multiply_multiply".to_string()),
        "{names:?}"
    );
    // the gate (16 values) is computed once, not inlined into the 12 × 16 scaling
    let groups = fuse(&g);
    let gate = groups
        .iter()
        .find(|gr| tessera_graph::fuse::group_name(&g, gr).contains("sigmoid"))
        .unwrap();
    let gc = tessera_graph::group_compute(&g, gate).unwrap();
    assert!(
        gc.inlinable.iter().all(|t| t.shape() != [1, 16]),
        "{:?}",
        gc.inlinable
            .iter()
            .map(|t| t.shape().to_vec())
            .collect::<Vec<_>>()
    );
    run(&g).allclose(&want, 1e-4, 1e-5).unwrap();
    // blocks of 8 output features: [N, K] becomes [N/8, K, 8], the gate's one-row
    // layer's too
    let mut packed = g.clone();
    assert_eq!(passes::pack_dense_weights(&mut packed, 8).unwrap(), 3);
    let shapes: Vec<Vec<i64>> = packed
        .topo_order()
        .into_iter()
        .filter(|&n| matches!(packed.node(n).op, Op::Dense))
        .map(|n| packed.node(packed.args(n)[1]).ty.shape.clone())
        .collect();
    assert_eq!(shapes, vec![vec![4, 16, 8], vec![2, 32, 8], vec![2, 16, 8]]);
    run(&packed).allclose(&want, 1e-4, 1e-5).unwrap();
    // a block that divides no layer's features packs none
    assert_eq!(passes::pack_dense_weights(&mut g.clone(), 5).unwrap(), 0);
}

/// A recurrence unrolled into steps that all read one weight (as constant folding leaves
/// an LSTM's): packing rewires every step to one packed copy, not a copy per step.
#[test]
fn a_weight_every_step_reads_is_packed_once() {
    let mut g = Graph::new("recurrence");
    let x = g.input("x", TensorType::f32(&[1, 16]));
    let w = konst(&mut g, "w_hh", &[16, 16], 9, 0.3, 0.0);
    let mut h = x;
    for step in 0..4 {
        let d = g.op(&format!("step{step}"), Op::Dense, &[h, w]).unwrap();
        h = g
            .op(&format!("tanh{step}"), Op::Unary(Unary::Tanh), &[d])
            .unwrap();
    }
    g.set_outputs(vec![h]);
    let x =
        NDArray::from_slice_f32(&[1, 16], &(0..16).map(|i| rnd(3, i)).collect::<Vec<_>>()).unwrap();
    let want = interpret(&g, &[("x", &x)]).unwrap().remove(0);
    assert_eq!(passes::pack_dense_weights(&mut g, 8).unwrap(), 4);
    let weights: std::collections::HashSet<_> = g
        .topo_order()
        .into_iter()
        .filter(|&n| matches!(g.node(n).op, Op::Dense))
        .map(|n| g.args(n)[1])
        .collect();
    assert_eq!(weights.len(), 1, "{g}");
    let shapes: Vec<Vec<i64>> = weights
        .iter()
        .map(|&c| g.node(c).ty.shape.clone())
        .collect();
    assert_eq!(shapes, vec![vec![2, 16, 8]]);
    let mut m = build(&g, &Target::cpu()).unwrap();
    m.set_input("x", &x).unwrap();
    m.run().unwrap();
    m.get_output(0)
        .unwrap()
        .allclose(&want, 1e-5, 1e-5)
        .unwrap();
}

/// An LSTM cell in small: a dense product's four gates, three activations and
/// `c = f · c' + i · g`; then the same sum over two dense products.
fn cell_net() -> Graph {
    let mut g = Graph::new("cell");
    let x = g.input("x", TensorType::f32(&[2, 8]));
    let c0 = g.input("c0", TensorType::f32(&[2, 8]));
    let w = konst(&mut g, "w", &[24, 8], 11, 0.5, 0.0);
    let s = g.op("gates", Op::Dense, &[x, w]).unwrap();
    let gate = |g: &mut Graph, k: i64| {
        let op = Op::StridedSlice {
            begin: vec![0, 8 * k],
            end: vec![2, 8 * k + 8],
            strides: vec![1, 1],
        };
        g.op(&format!("slice{k}"), op, &[s]).unwrap()
    };
    let (si, sf, sg) = (gate(&mut g, 0), gate(&mut g, 1), gate(&mut g, 2));
    let i = g.op("i", Op::Unary(Unary::Sigmoid), &[si]).unwrap();
    let f = g.op("f", Op::Unary(Unary::Sigmoid), &[sf]).unwrap();
    let gg = g.op("g", Op::Unary(Unary::Tanh), &[sg]).unwrap();
    let fc = g.op("fc", Op::Binary(Binary::Mul), &[f, c0]).unwrap();
    let ig = g.op("ig", Op::Binary(Binary::Mul), &[i, gg]).unwrap();
    let c = g.op("c", Op::Binary(Binary::Add), &[fc, ig]).unwrap();
    // two products summed: each keeps its own group
    let w1 = konst(&mut g, "w1", &[8, 8], 12, 0.5, 0.0);
    let w2 = konst(&mut g, "w2", &[8, 8], 13, 0.5, 0.0);
    let d1 = g.op("d1", Op::Dense, &[c, w1]).unwrap();
    let d2 = g.op("d2", Op::Dense, &[x, w2]).unwrap();
    let r1 = g.op("r1", Op::Unary(Unary::Relu), &[d1]).unwrap();
    let out = g.op("sum", Op::Binary(Binary::Add), &[r1, d2]).unwrap();
    g.set_outputs(vec![out]);
    g
}

#[test]
fn branches_one_elementwise_operator_reads_merge_into_its_group() {
    let g = cell_net();
    let groups = fuse(&g);
    let members: Vec<Vec<&str>> = groups
        .iter()
        .map(|gr| gr.nodes.iter().map(|&n| g.node(n).name.as_str()).collect())
        .collect();
    // the cell is one kernel; of two dense products one takes the sum as its epilogue
    assert_eq!(
        members,
        [
            vec!["gates"],
            vec!["slice1", "f", "fc", "slice0", "i", "slice2", "g", "ig", "c"],
            vec!["d2"],
            vec!["d1", "r1", "sum"],
        ],
        "{members:?}"
    );
    let x =
        NDArray::from_slice_f32(&[2, 8], &(0..16).map(|i| rnd(14, i)).collect::<Vec<_>>()).unwrap();
    let c0 =
        NDArray::from_slice_f32(&[2, 8], &(0..16).map(|i| rnd(15, i)).collect::<Vec<_>>()).unwrap();
    let want = interpret(&g, &[("x", &x), ("c0", &c0)]).unwrap().remove(0);
    let mut m = build(&g, &Target::cpu()).unwrap();
    m.set_input("x", &x).unwrap();
    m.set_input("c0", &c0).unwrap();
    m.run().unwrap();
    m.get_output(0)
        .unwrap()
        .allclose(&want, 1e-4, 1e-5)
        .unwrap();
}

#[test]
fn a_long_group_name_is_cut_and_keeps_a_hash_of_the_whole() {
    let g = cell_net();
    let groups = fuse(&g);
    let name = tessera_graph::fuse::group_name(&g, &groups[1]);
    assert_eq!(name.len(), 80 + 9, "{name}");
    assert!(
        name.starts_with("fused_strided_slice_sigmoid_multiply_strided_slice"),
        "{name}"
    );
    assert_ne!(name, tessera_graph::fuse::group_name(&g, &groups[0]));
    // stable: the same group gets the same name
    assert_eq!(name, tessera_graph::fuse::group_name(&g, &groups[1]));
}

#[test]
fn bad_input_is_a_typed_error() {
    let g = small_net();
    let mut m = build(&g, &Target::cpu()).unwrap();
    let wrong = NDArray::zeros(DataType::float32(), &[1, 3, 8, 8]).unwrap();
    let e = m.set_input("data", &wrong).unwrap_err().to_string();
    assert!(e.contains("expected float32[1, 3, 16, 16]"), "{e}");
    let e = m.set_input("nope", &wrong).unwrap_err().to_string();
    assert!(e.contains("no such input"), "{e}");
    let mut g2 = Graph::new("bad");
    let x = g2.input("x", TensorType::f32(&[1, 3, 8, 8]));
    let w = g2.constant(
        "w",
        NDArray::zeros(DataType::float32(), &[4, 5, 3, 3]).unwrap(),
    );
    let e = g2
        .op(
            "c",
            Op::Conv2d {
                attrs: Conv2dAttrs::new((1, 1), (1, 1), (1, 1)),
                layout: Layout::Nchw,
            },
            &[x, w],
        )
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("node `c` (conv2d):"), "{e}");
}

/// ASPP's branches on a 14×14 map: 3×3 convolutions of dilation 1, 8 (outer taps reading
/// the image over part of it) and 16 (only the centre tap reads it), concatenated.
fn aspp_net() -> Graph {
    let mut g = Graph::new("aspp");
    let x = g.input("data", TensorType::f32(&[1, 6, 14, 14]));
    let branches: Vec<_> = [1, 8, 16]
        .iter()
        .enumerate()
        .map(|(k, &d)| {
            let w = konst(
                &mut g,
                &format!("w{k}"),
                &[5, 6, 3, 3],
                40 + k as u64,
                0.3,
                0.0,
            );
            let conv = Op::Conv2d {
                attrs: Conv2dAttrs::new((1, 1), (d, d), (d, d)),
                layout: Layout::Nchw,
            };
            g.op(&format!("aspp{k}"), conv, &[x, w]).unwrap()
        })
        .collect();
    let cat = g.op("cat", Op::Concat { axis: 1 }, &branches).unwrap();
    let r = g.op("relu", Op::Unary(Unary::Relu), &[cat]).unwrap();
    g.set_outputs(vec![r]);
    g
}

#[test]
fn convolutions_reading_padding_are_split_into_their_live_taps() {
    let g = aspp_net();
    let data = NDArray::from_slice_f32(
        &[1, 6, 14, 14],
        &(0..6 * 14 * 14).map(|i| rnd(9, i)).collect::<Vec<_>>(),
    )
    .unwrap();
    let want = interpret(&g, &[("data", &data)]).unwrap().remove(0);
    for layout in [None, Some(Layout::Nhwc)] {
        let mut split = g.clone();
        passes::optimize(&mut split, layout).unwrap();
        // dilation 1 stays whole; dilation 16 is one 1×1 conv over the whole map;
        // dilation 8 is 3 × 3 regions (6 positions of taps 1..3, 2 of tap 1, 6 of taps
        // 0..2 along each axis)
        let convs: Vec<(Vec<i64>, Vec<i64>)> = split
            .topo_order()
            .into_iter()
            .filter(|&n| matches!(split.node(n).op, Op::Conv2d { .. }))
            .map(|n| {
                let w = split.node(split.args(n)[1]).ty.shape.clone();
                (w, split.node(n).ty.shape.clone())
            })
            .collect();
        assert_eq!(convs.len(), 1 + 9 + 1, "{layout:?} {convs:?}");
        let taps: usize = convs
            .iter()
            .map(|(w, o)| {
                let (k, px) = match layout {
                    None => (w[2] * w[3], o[2] * o[3]),
                    Some(_) => (w[0] * w[1], o[1] * o[2]),
                };
                (k * px) as usize
            })
            .sum();
        // live (pixel, tap) pairs: 14² · 9 for dilation 1, (6·2 + 2 + 6·2)² = 676 for
        // dilation 8, 14² for dilation 16
        assert_eq!(taps, 196 * 9 + 676 + 196, "{layout:?}");
        agrees_interpreted_and_built(&split, &[("data", &data)], &want);
    }
}

#[test]
fn output_channels_are_padded_to_whole_vectors_and_sliced_back() {
    // conv (20 channels) + bias + ReLU, read by a second conv and the output
    let mut g = Graph::new("pad");
    let x = g.input("data", TensorType::f32(&[1, 5, 9, 9]));
    let w0 = konst(&mut g, "w0", &[20, 5, 3, 3], 51, 0.3, 0.0);
    let conv = |pad| Op::Conv2d {
        attrs: Conv2dAttrs::new((1, 1), (pad, pad), (1, 1)),
        layout: Layout::Nchw,
    };
    let c0 = g.op("c0", conv(1), &[x, w0]).unwrap();
    let b0 = konst(&mut g, "b0", &[20], 52, 0.5, -0.2);
    let a0 = g.op("a0", Op::BiasAdd { axis: 1 }, &[c0, b0]).unwrap();
    let r0 = g.op("r0", Op::Unary(Unary::Relu), &[a0]).unwrap();
    let w1 = konst(&mut g, "w1", &[8, 20, 1, 1], 53, 0.3, 0.0);
    let c1 = g.op("c1", conv(0), &[r0, w1]).unwrap();
    g.set_outputs(vec![c1]);
    let data = NDArray::from_slice_f32(
        &[1, 5, 9, 9],
        &(0..5 * 81).map(|i| rnd(11, i)).collect::<Vec<_>>(),
    )
    .unwrap();
    let want = interpret(&g, &[("data", &data)]).unwrap().remove(0);
    let mut nhwc = g.clone();
    passes::optimize(&mut nhwc, Some(Layout::Nhwc)).unwrap();
    let mut padded = nhwc.clone();
    let moved = tessera_graph::pad_channels::pad_conv_channels(&mut padded, 8).unwrap();
    // only the 20-channel conv (8 is a whole vector): its weight and bias padded to 24,
    // a slice back to 20 after the ReLU
    assert_eq!(moved.len(), 1);
    let conv = moved[0].1;
    assert_eq!(
        padded.node(padded.args(conv)[1]).ty.shape,
        vec![3, 3, 5, 24]
    );
    let chain: Vec<&str> = {
        let mut at = conv;
        let mut names = Vec::new();
        while let [u] = padded.users(at)[..] {
            names.push(padded.node(u).op.name());
            at = u;
            if names.len() == 4 {
                break;
            }
        }
        names
    };
    assert_eq!(chain, ["bias_add", "relu", "strided_slice", "conv2d"]);
    agrees_interpreted_and_built(&padded, &[("data", &data)], &want);
}

#[test]
fn matrix_products_get_whole_vectors_of_columns() {
    // attention scores: q · kᵀ with 20 keys, then softmax
    let mut g = Graph::new("scores");
    let q = g.input("q", TensorType::f32(&[2, 5, 8]));
    let k = g.input("k", TensorType::f32(&[2, 20, 8]));
    let kt = g
        .op(
            "kt",
            Op::Transpose {
                axes: vec![0, 2, 1],
            },
            &[k],
        )
        .unwrap();
    let s = g.op("scores", Op::MatMul, &[q, kt]).unwrap();
    let p = g.op("probs", Op::Softmax { axis: 2 }, &[s]).unwrap();
    g.set_outputs(vec![p]);
    let qv = NDArray::from_slice_f32(&[2, 5, 8], &(0..80).map(|i| rnd(21, i)).collect::<Vec<_>>())
        .unwrap();
    let kv = NDArray::from_slice_f32(
        &[2, 20, 8],
        &(0..320).map(|i| rnd(22, i)).collect::<Vec<_>>(),
    )
    .unwrap();
    let inputs = [("q", &qv), ("k", &kv)];
    let want = interpret(&g, &inputs).unwrap().remove(0);
    let mut padded = g.clone();
    let moved = tessera_graph::pad_channels::pad_matmul_columns(&mut padded, 8).unwrap();
    assert_eq!(moved.len(), 1);
    let mm = moved[0].1;
    assert_eq!(padded.node(padded.args(mm)[1]).ty.shape, vec![2, 8, 24]);
    assert_eq!(padded.node(mm).ty.shape, vec![2, 5, 24]);
    // the softmax, the product's one reader, runs on the 24 columns, masked, and the
    // slice back to 20 comes after it
    let [masked] = padded.users(mm)[..] else {
        panic!("one reader")
    };
    assert!(matches!(padded.node(masked).op, Op::Binary(Binary::Add)));
    let [softmax] = padded.users(masked)[..] else {
        panic!("one reader")
    };
    assert!(matches!(padded.node(softmax).op, Op::Softmax { .. }));
    assert_eq!(padded.node(softmax).ty.shape, vec![2, 5, 24]);
    let out = padded.outputs()[0];
    assert!(matches!(padded.node(out).op, Op::StridedSlice { .. }));
    assert_eq!(padded.node(out).ty.shape, vec![2, 5, 20]);
    // a product with whole vectors of columns, or fewer than two, is left alone
    assert!(
        tessera_graph::pad_channels::pad_matmul_columns(&mut padded, 8)
            .unwrap()
            .is_empty()
    );
    agrees_interpreted_and_built(&padded, &inputs, &want);
    // through a reshape that keeps the columns (ViT's scores gain a batch axis first)
    let mut g2 = g.clone();
    let p2 = g2
        .op(
            "scores4",
            Op::Reshape {
                shape: vec![1, 2, 5, 20],
            },
            &[s],
        )
        .unwrap();
    let sm2 = g2.op("probs4", Op::Softmax { axis: -1 }, &[p2]).unwrap();
    g2.set_outputs(vec![sm2]);
    g2.remove(p);
    let want = interpret(&g2, &inputs).unwrap().remove(0);
    let moved = tessera_graph::pad_channels::pad_matmul_columns(&mut g2, 8).unwrap();
    assert_eq!(moved.len(), 1);
    let softmaxes: Vec<_> = g2
        .topo_order()
        .into_iter()
        .filter(|&n| matches!(g2.node(n).op, Op::Softmax { .. }))
        .collect();
    assert_eq!(softmaxes.len(), 1);
    assert_eq!(g2.node(softmaxes[0]).ty.shape, vec![1, 2, 5, 24]);
    agrees_interpreted_and_built(&g2, &inputs, &want);
}

/// A reshape of a value with two readers is a group of its own: a view that runs no
/// kernel and shares its source's storage, which must outlive both. Here the source's
/// other reader (a softmax) finishes long before the view's (a dense after a second
/// softmax of the same size, whose output would take the source's storage if it were
/// released when the first softmax had read it).
#[test]
fn a_reshape_of_a_shared_value_runs_no_kernel_and_keeps_its_storage() {
    let mut g = Graph::new("view");
    let x = g.input("data", TensorType::f32(&[1, 6, 16]));
    let a = g.op("relu", Op::Unary(Unary::Relu), &[x]).unwrap();
    let b = g
        .op("flat", Op::Reshape { shape: vec![6, 16] }, &[a])
        .unwrap();
    let e = g.op("sm1", Op::Softmax { axis: 2 }, &[a]).unwrap();
    let f = g.op("sm2", Op::Softmax { axis: 2 }, &[e]).unwrap();
    let w = konst(&mut g, "w", &[16, 16], 2, 0.4, 0.0);
    let d = g.op("fc", Op::Dense, &[b, w]).unwrap();
    let f2 = g
        .op("flat2", Op::Reshape { shape: vec![6, 16] }, &[f])
        .unwrap();
    let out = g.op("sum", Op::Binary(Binary::Add), &[d, f2]).unwrap();
    g.set_outputs(vec![out]);

    let groups = fuse(&g);
    let views: Vec<_> = groups.iter().filter_map(|x| x.view_of(&g)).collect();
    assert_eq!(
        views,
        vec![a],
        "the reshape of relu's output is the one view"
    );
    let data =
        NDArray::from_slice_f32(&[1, 6, 16], &(0..96).map(|i| rnd(8, i)).collect::<Vec<_>>())
            .unwrap();
    let want = interpret(&g, &[("data", &data)]).unwrap().remove(0);
    let mut m = build(&g, &Target::cpu()).unwrap();
    m.set_input("data", &data).unwrap();
    m.run().unwrap();
    m.get_output(0)
        .unwrap()
        .allclose(&want, 1e-5, 1e-6)
        .unwrap();
    let steps = m.profile(1).unwrap();
    assert_eq!(steps.len(), groups.len() - 1, "{steps:?}");
    assert!(
        steps.iter().all(|(name, _)| name != "fused_reshape"),
        "{steps:?}"
    );
}
