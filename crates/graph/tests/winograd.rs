//! Winograd convolutions in CPU builds: the weight transform, which convolutions the
//! pass rewrites, and the rewritten networks — interpreted, and built with the default
//! schedules — against the direct convolutions' reference.

mod common;
use common::rnd;

use petgraph::stable_graph::NodeIndex;
use tessera_backends::Target;
use tessera_graph::passes::constant_f32;
use tessera_graph::reference::interpret;
use tessera_graph::winograd::{winograd_convolutions, winograd_weight, WINOGRAD_MIN_CHANNELS};
use tessera_graph::{build, Binary, Graph, Layout, Op, TensorType, Unary};
use tessera_runtime::NDArray;
use tessera_te::ops::Conv2dAttrs;

fn random(shape: &[usize], seed: u64, scale: f32) -> NDArray {
    constant_f32(shape, |i| scale * rnd(seed, i)).unwrap()
}

fn conv(g: &mut Graph, name: &str, x: NodeIndex, w: NodeIndex, stride: i64, pad: i64) -> NodeIndex {
    let op = Op::Conv2d {
        attrs: Conv2dAttrs::new((stride, stride), (pad, pad), (1, 1)),
        layout: Layout::Nhwc,
    };
    g.op(name, op, &[x, w]).unwrap()
}

/// NHWC `[1, size, size, 32]`: a 3×3 conv 32 → 16 with a bias and ReLU (rewritten), a
/// 3×3 conv 16 → 16 (too few input channels: kept), their sum (the first conv's
/// epilogue is then a residual add), a 3×3 stride-2 conv 16 → 8 (kept).
fn net(size: usize) -> Graph {
    let mut g = Graph::new("winograd");
    let x = g.input("data", TensorType::f32(&[1, size as i64, size as i64, 32]));
    let w0 = g.constant("w0", random(&[3, 3, 32, 16], 1, 0.2));
    let b0 = g.constant("b0", random(&[16], 2, 0.5));
    let w1 = g.constant("w1", random(&[3, 3, 16, 16], 3, 0.2));
    let w2 = g.constant("w2", random(&[3, 3, 16, 8], 4, 0.2));
    let c0 = conv(&mut g, "conv0", x, w0, 1, 1);
    let c0 = g.op("bias0", Op::BiasAdd { axis: 3 }, &[c0, b0]).unwrap();
    let r0 = g.op("relu0", Op::Unary(Unary::Relu), &[c0]).unwrap();
    let c1 = conv(&mut g, "conv1", r0, w1, 1, 1);
    let s = g.op("add", Op::Binary(Binary::Add), &[c1, r0]).unwrap();
    let c2 = conv(&mut g, "conv2", s, w2, 2, 1);
    g.set_outputs(vec![c2]);
    g
}

fn input(size: usize) -> NDArray {
    random(&[1, size, size, 32], 9, 1.0)
}

/// `got` against `want` with an absolute tolerance of 1e-5 of `want`'s largest value
/// (Winograd's rounding scales with it).
fn assert_close(got: &NDArray, want: &NDArray) {
    let atol = 1e-5 * want.max_abs();
    got.allclose(want, 1e-4, atol).unwrap();
}

fn winograd_tiles(g: &Graph) -> Vec<i64> {
    g.topo_order()
        .into_iter()
        .filter_map(|n| match g.node(n).op {
            Op::Conv2dWinograd { tile, .. } => Some(tile),
            _ => None,
        })
        .collect()
}

#[test]
fn rewritten_networks_compute_the_direct_convolutions() {
    // 8×8: F(4×4, 3×3); 6×6 and 7×7: F(2×2, 3×3), 7×7 with a tile past the edge
    for (size, tile) in [(8, 4), (6, 2), (7, 2)] {
        let g = net(size);
        let feed = input(size);
        let want = interpret(&g, &[("data", &feed)]).unwrap().remove(0);
        let mut w = g.clone();
        assert_eq!(winograd_convolutions(&mut w, 8).unwrap(), 1, "{w}");
        assert_eq!(winograd_tiles(&w), vec![tile], "{w}");
        // the transformed weight replaced the HWIO one: [α, α, CO/8, CI, 8]
        let alpha = (tile + 2) as usize;
        let weights: Vec<Vec<usize>> = w
            .topo_order()
            .into_iter()
            .filter_map(|n| w.constant_value(n).map(|v| v.shape().to_vec()))
            .collect();
        assert!(
            weights.contains(&vec![alpha, alpha, 2, 32, 8]),
            "{weights:?}"
        );
        assert!(!weights.contains(&vec![3, 3, 32, 16]), "{weights:?}");
        let interpreted = interpret(&w, &[("data", &feed)]).unwrap().remove(0);
        assert_close(&interpreted, &want);
        let mut m = build(&w, &Target::cpu()).unwrap();
        m.set_input("data", &feed).unwrap();
        m.run().unwrap();
        assert_close(&m.get_output(0).unwrap(), &want);
    }
}

#[test]
fn only_eligible_convolutions_are_rewritten() {
    // a block that divides no output channel count rewrites nothing
    let mut g = net(8);
    assert_eq!(winograd_convolutions(&mut g, 32).unwrap(), 0);
    assert!(winograd_tiles(&g).is_empty());
    // nor does a network whose 3×3 convs all have too few input channels
    const { assert!(WINOGRAD_MIN_CHANNELS > 16) };
    let mut small = Graph::new("small");
    let x = small.input("data", TensorType::f32(&[1, 8, 8, 16]));
    let w = small.constant("w", random(&[3, 3, 16, 16], 1, 0.2));
    let c = conv(&mut small, "conv", x, w, 1, 1);
    small.set_outputs(vec![c]);
    assert_eq!(winograd_convolutions(&mut small, 8).unwrap(), 0);
}

#[test]
fn weight_transform_refuses_what_it_cannot_transform() {
    let w = random(&[3, 3, 4, 8], 1, 1.0);
    let e = winograd_weight(&w, 4, 3).unwrap_err().to_string();
    assert!(e.contains("block 3 does not divide 8"), "{e}");
    let e = winograd_weight(&w, 3, 8).unwrap_err().to_string();
    assert!(e.contains("tile size 3"), "{e}");
    let e = winograd_weight(&random(&[5, 5, 4, 8], 1, 1.0), 4, 8)
        .unwrap_err()
        .to_string();
    assert!(e.contains("3x3 HWIO"), "{e}");
    // F(2×2, 3×3) of a kernel that is 1 at its centre: G's middle column (0, ½, −½, 0)
    // times itself
    let mut centre = vec![0f32; 9];
    centre[4] = 1.0;
    let u = winograd_weight(
        &NDArray::from_slice_f32(&[3, 3, 1, 1], &centre).unwrap(),
        2,
        1,
    )
    .unwrap();
    let col = [0.0f32, 0.5, -0.5, 0.0];
    let want: Vec<f32> = (0..16).map(|k| col[k / 4] * col[k % 4]).collect();
    assert_eq!(u.shape(), &[4, 4, 1, 1, 1]);
    assert_eq!(u.as_slice::<f32>().unwrap(), &want[..]);
}
