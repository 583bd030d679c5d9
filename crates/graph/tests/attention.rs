//! Attention chains made one operator (`attention::fuse_attention`): the forms exports
//! write (ViT's key mask on a 4-D view, Swin's position bias and window mask, a computed
//! mask, one per batch, the scale before or after the biases), what is left alone, and the rewritten
//! network against the original in the interpreter and built for the CPU.

mod common;
use common::{agrees_interpreted_and_built, rnd};

use petgraph::stable_graph::NodeIndex;
use tessera_graph::attention::fuse_attention;
use tessera_graph::passes::constant_f32;
use tessera_graph::reference::interpret;
use tessera_graph::{Binary, Graph, Op, TensorType};
use tessera_runtime::NDArray;

fn values(shape: &[usize], seed: u64, scale: f32) -> NDArray {
    constant_f32(shape, |i| scale * rnd(seed, i)).unwrap()
}

/// The network's one attention node, and how many softmaxes and products are left.
fn counts(g: &Graph) -> (Vec<NodeIndex>, usize, usize) {
    let order = g.topo_order();
    let of = |f: fn(&Op) -> bool| order.iter().copied().filter(move |&n| f(&g.node(n).op));
    (
        of(|op| matches!(op, Op::Attention { .. })).collect(),
        of(|op| matches!(op, Op::Softmax { .. })).count(),
        of(|op| matches!(op, Op::MatMul)).count(),
    )
}

/// The chain up to the scores: `q [b, m, 8]` (scaled by `scale` when given) times the
/// transposed `k [b, n, 8]`.
fn scores(g: &mut Graph, b: i64, m: i64, n: i64, scale: Option<f32>) -> NodeIndex {
    let mut q = g.input("q", TensorType::f32(&[b, m, 8]));
    if let Some(s) = scale {
        let c = g.constant("scale", NDArray::from_slice_f32(&[1], &[s]).unwrap());
        q = g.op("q_scaled", Op::Binary(Binary::Mul), &[q, c]).unwrap();
    }
    let k = g.input("k", TensorType::f32(&[b, n, 8]));
    let axes = vec![0, 2, 1];
    let kt = g.op("kt", Op::Transpose { axes }, &[k]).unwrap();
    g.op("scores", Op::MatMul, &[q, kt]).unwrap()
}

/// The chain after the scores `x` (`[.., m, n]` in some view): softmax, back to
/// `[b, m, n]`, times `v [b, n, 4]`; the network's output.
fn finish(g: &mut Graph, x: NodeIndex, b: i64, m: i64, n: i64) {
    let p = g.op("probs", Op::Softmax { axis: -1 }, &[x]).unwrap();
    let shape = vec![b, m, n];
    let p = g.op("probs3", Op::Reshape { shape }, &[p]).unwrap();
    let v = g.input("v", TensorType::f32(&[b, n, 4]));
    let out = g.op("context", Op::MatMul, &[p, v]).unwrap();
    g.set_outputs(vec![out]);
}

fn reshape(g: &mut Graph, name: &str, x: NodeIndex, shape: &[i64]) -> NodeIndex {
    let shape = shape.to_vec();
    g.op(name, Op::Reshape { shape }, &[x]).unwrap()
}

/// The rewrite of `g` computes what `g` computes on random `q`, `k`, `v` (and `extra`
/// inputs); returns the rewritten network.
fn fused_computes_the_same(
    g: &Graph,
    b: usize,
    m: usize,
    n: usize,
    extra: &[(&str, &NDArray)],
) -> Graph {
    let (q, k, v) = (
        values(&[b, m, 8], 1, 1.0),
        // large scores: the row maximum matters
        values(&[b, n, 8], 2, 6.0),
        values(&[b, n, 4], 3, 1.0),
    );
    let mut inputs = vec![("q", &q), ("k", &k), ("v", &v)];
    inputs.extend_from_slice(extra);
    let want = interpret(g, &inputs).unwrap().remove(0);
    let mut fused = g.clone();
    assert_eq!(fuse_attention(&mut fused, 8).unwrap(), 1, "{fused}");
    agrees_interpreted_and_built(&fused, &inputs, &want);
    fused
}

#[test]
fn vits_masked_scores_become_one_operator_with_padded_keys() {
    // ViT: the scale on q, the scores on a 4-D view with a key mask, 20 keys
    let mut g = Graph::new("vit");
    let s = scores(&mut g, 2, 5, 20, Some(0.35));
    let s4 = reshape(&mut g, "scores4", s, &[1, 2, 5, 20]);
    let mask = g.constant("mask", values(&[20], 4, 2.0));
    let x = g
        .op("masked", Op::Binary(Binary::Add), &[s4, mask])
        .unwrap();
    finish(&mut g, x, 2, 5, 20);
    let fused = fused_computes_the_same(&g, 2, 5, 20, &[]);
    let (att, softmaxes, products) = counts(&fused);
    assert_eq!((att.len(), softmaxes, products), (1, 0, 0), "{fused}");
    let args = fused.args(att[0]);
    // keys padded to 24 columns, values to 24 rows, the mask to 24 with the lowest float
    assert_eq!(fused.node(args[1]).ty.shape, [2, 8, 24]);
    assert_eq!(fused.node(args[2]).ty.shape, [2, 24, 4]);
    let bias = fused.constant_value(args[3]).expect("a constant bias");
    assert_eq!(bias.shape(), [24]);
    let b = bias.as_slice::<f32>().unwrap();
    assert!(b[20..].iter().all(|&x| x == f32::MIN), "{b:?}");
    assert_eq!(fused.node(att[0]).ty.shape, [2, 5, 4]);
}

#[test]
fn swins_position_bias_and_window_mask_become_one_bias() {
    // Swin: 2 windows × 3 heads of 4 tokens; a bias per head and position, then a mask
    // per window on a 5-D view, then a scale on the biased scores
    let mut g = Graph::new("swin");
    let s = scores(&mut g, 6, 4, 4, None);
    let s4 = reshape(&mut g, "scores4", s, &[2, 3, 4, 4]);
    let pos = g.constant("position_bias", values(&[3, 4, 4], 5, 1.0));
    let x = g.op("biased", Op::Binary(Binary::Add), &[s4, pos]).unwrap();
    let x5 = reshape(&mut g, "scores5", x, &[1, 2, 3, 4, 4]);
    let win = g.constant("window_mask", values(&[2, 1, 4, 4], 6, 3.0));
    let x = g.op("masked", Op::Binary(Binary::Add), &[x5, win]).unwrap();
    let half = g.constant("two", NDArray::from_slice_f32(&[1], &[2.0]).unwrap());
    let x = g.op("halved", Op::Binary(Binary::Div), &[x, half]).unwrap();
    let x = reshape(&mut g, "scores_back", x, &[6, 4, 4]);
    finish(&mut g, x, 6, 4, 4);
    let fused = fused_computes_the_same(&g, 6, 4, 4, &[]);
    let (att, _, _) = counts(&fused);
    let Op::Attention { scale } = fused.node(att[0]).op else {
        panic!("an attention")
    };
    assert_eq!(scale, 0.5);
    // the two biases differ per window and head: one constant of the scores' shape
    let bias = fused
        .constant_value(fused.args(att[0])[3])
        .expect("a constant bias");
    assert_eq!(bias.shape(), [6, 4, 4]);
}

#[test]
fn a_computed_mask_is_padded_with_the_lowest_float() {
    // BERT: a mask computed from an input, broadcast over heads and rows
    let mut g = Graph::new("bert");
    let s = scores(&mut g, 2, 5, 20, Some(0.125));
    let m = g.input("mask", TensorType::f32(&[1, 1, 20]));
    let x = g.op("masked", Op::Binary(Binary::Add), &[s, m]).unwrap();
    finish(&mut g, x, 2, 5, 20);
    let mask = values(&[1, 1, 20], 7, 4.0);
    let fused = fused_computes_the_same(&g, 2, 5, 20, &[("mask", &mask)]);
    let (att, _, _) = counts(&fused);
    let bias = fused.args(att[0])[3];
    assert!(
        matches!(fused.node(bias).op, Op::Pad { value, .. } if value == f32::MIN as f64),
        "{fused}"
    );
    assert_eq!(fused.node(bias).ty.shape, [1, 1, 24]);
}

#[test]
fn a_mask_per_batch_is_added_in_the_view_of_batch_and_heads() {
    // BERT at a batch of 2: its padding mask `[2, 1, 1, 20]` varies along the batch, so
    // it is no bias of the `[6, 5, 20]` scores; the attention is computed in the
    // `[2, 3, 5, 20]` view it was added in, the keys padded to 24 and the mask with
    // the lowest float, and its output read back as `[6, 5, 4]`
    let mut g = Graph::new("bert_batch");
    let s = scores(&mut g, 6, 5, 20, Some(0.125));
    let s4 = reshape(&mut g, "scores4", s, &[2, 3, 5, 20]);
    let m = g.input("mask", TensorType::f32(&[2, 1, 1, 20]));
    let x = g.op("masked", Op::Binary(Binary::Add), &[s4, m]).unwrap();
    finish(&mut g, x, 6, 5, 20);
    let mask = values(&[2, 1, 1, 20], 8, 4.0);
    let fused = fused_computes_the_same(&g, 6, 5, 20, &[("mask", &mask)]);
    let (att, softmaxes, products) = counts(&fused);
    assert_eq!((att.len(), softmaxes, products), (1, 0, 0), "{fused}");
    let args = fused.args(att[0]);
    assert_eq!(fused.node(args[0]).ty.shape, [2, 3, 5, 8]);
    assert_eq!(fused.node(args[1]).ty.shape, [2, 3, 8, 24]);
    assert_eq!(fused.node(args[2]).ty.shape, [2, 3, 24, 4]);
    assert!(
        matches!(fused.node(args[3]).op, Op::Pad { value, .. } if value == f32::MIN as f64),
        "{fused}"
    );
    assert_eq!(fused.node(args[3]).ty.shape, [2, 1, 1, 24]);
    assert_eq!(fused.node(att[0]).ty.shape, [2, 3, 5, 4]);
}

#[test]
fn chains_that_are_not_attention_are_left_alone() {
    // the probabilities also a network output
    let mut g = Graph::new("probs_out");
    let s = scores(&mut g, 2, 5, 20, None);
    finish(&mut g, s, 2, 5, 20);
    let probs = g
        .topo_order()
        .into_iter()
        .find(|&n| g.node(n).name == "probs")
        .unwrap();
    let out = g.outputs()[0];
    g.set_outputs(vec![out, probs]);
    assert_eq!(fuse_attention(&mut g, 8).unwrap(), 0);
    // a softmax over the rows, not the keys
    let mut g = Graph::new("rows");
    let s = scores(&mut g, 2, 5, 5, None);
    let p = g.op("probs", Op::Softmax { axis: 1 }, &[s]).unwrap();
    let v = g.input("v", TensorType::f32(&[2, 5, 4]));
    let out = g.op("context", Op::MatMul, &[p, v]).unwrap();
    g.set_outputs(vec![out]);
    assert_eq!(fuse_attention(&mut g, 8).unwrap(), 0);
    // scores multiplied by a tensor, not a scalar
    let mut g = Graph::new("gated");
    let s = scores(&mut g, 2, 5, 20, None);
    let gate = g.constant("gate", values(&[20], 8, 1.0));
    let x = g.op("gated", Op::Binary(Binary::Mul), &[s, gate]).unwrap();
    finish(&mut g, x, 2, 5, 20);
    assert_eq!(fuse_attention(&mut g, 8).unwrap(), 0);
}
