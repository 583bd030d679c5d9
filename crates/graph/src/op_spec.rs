//! Graph nodes as catalog operators: [`op_spec_of`] names the [`OpSpec`] a node
//! computes, for the anchor operators schedule templates take (conv2d NHWC / NCHW with
//! one group, depthwise conv2d NHWC with multiplier 1, 2-D dense, 2-D matmul), so that
//! a network's template tasks are catalog operators like `tessera tune --op`'s and one
//! mapping (spec → template) serves both.
//!
//! A node whose attributes [`OpAttrs`] cannot express (different strides, dilations or
//! paddings per axis, padding other than symmetric or "same"), or whose tensors are not
//! float32, is no catalog operator: `None`.

use crate::ir::{Graph, Layout, Op};
use petgraph::stable_graph::NodeIndex;
use tessera_ir::DataType;
use tessera_te::catalog::{OpAttrs, OpSpec};
use tessera_te::ops::Conv2dAttrs;

/// The catalog operator node `n` of `graph` computes, if it is one templates take.
pub fn op_spec_of(graph: &Graph, n: NodeIndex) -> Option<OpSpec> {
    let node = graph.node(n);
    let args = graph.args(n);
    if args.len() != 2 {
        return None;
    }
    let (x, y) = (&graph.node(args[0]).ty, &graph.node(args[1]).ty);
    if let Op::Conv2dInt8 { stride, padding } = &node.op {
        return packed_conv2d(x, y, *stride, *padding);
    }
    let f32 = DataType::float32();
    if x.dtype != f32 || y.dtype != f32 || node.ty.dtype != f32 {
        return None;
    }
    let (d, w) = (&x.shape[..], &y.shape[..]);
    let (name, shape, attrs) = match &node.op {
        Op::Conv2d { attrs, layout } if d.len() == 4 && w.len() == 4 => {
            conv2d(attrs, *layout, d, w, node.op.is_depthwise(d, w))?
        }
        Op::Dense if d.len() == 2 && w.len() == 2 => {
            ("dense", vec![d[0], w[0], d[1]], OpAttrs::default())
        }
        Op::MatMul if d.len() == 2 && w.len() == 2 => {
            ("matmul", vec![d[0], w[1], d[1]], OpAttrs::default())
        }
        _ => return None,
    };
    OpSpec::new(name, &shape, attrs).ok()
}

/// A conv2d node's catalog name, sizes (`N,H,W,C_IN,C_OUT,KH,KW`; depthwise
/// `N,H,W,C,KH,KW`) and attributes.
fn conv2d(
    a: &Conv2dAttrs,
    layout: Layout,
    d: &[i64],
    w: &[i64],
    depthwise: bool,
) -> Option<(&'static str, Vec<i64>, OpAttrs)> {
    match layout {
        Layout::Nhwc if a.groups == 1 => {
            // data NHWC, weight HWIO
            let attrs = op_attrs(a, w[0], w[1])?;
            Some((
                "conv2d",
                vec![d[0], d[1], d[2], d[3], w[3], w[0], w[1]],
                attrs,
            ))
        }
        Layout::Nchw if a.groups == 1 => {
            // data NCHW, weight OIHW
            let attrs = op_attrs(a, w[2], w[3])?;
            Some((
                "conv2d_nchw",
                vec![d[0], d[2], d[3], d[1], w[0], w[2], w[3]],
                attrs,
            ))
        }
        // depthwise NHWC with multiplier 1: weight HWIO [KH, KW, 1, C]
        Layout::Nhwc if depthwise && w[3] == d[3] => {
            let attrs = op_attrs(a, w[0], w[1])?;
            Some((
                "depthwise_conv2d",
                vec![d[0], d[1], d[2], d[3], w[0], w[1]],
                attrs,
            ))
        }
        _ => None,
    }
}

/// `a` as catalog attributes for a `kh`×`kw` kernel: one stride, one dilation, and
/// padding the same on all sides (`Some(p)`) or "same" (`None`: `kh / 2` rows,
/// `kw / 2` columns on both sides); `None` when they cannot say it.
fn op_attrs(a: &Conv2dAttrs, kh: i64, kw: i64) -> Option<OpAttrs> {
    let [top, left, bottom, right] = a.padding;
    if a.stride.0 != a.stride.1 || a.dilation.0 != a.dilation.1 || top != bottom || left != right {
        return None;
    }
    let pad = if top == left {
        Some(top)
    } else if (top, left) == (kh / 2, kw / 2) {
        None
    } else {
        return None;
    };
    Some(OpAttrs {
        stride: a.stride.0,
        pad,
        dilation: a.dilation.0,
        ..OpAttrs::default()
    })
}

/// An int8 conv2d in VTA's packed layout (data `[N, CI/16, H, W, 1, 16]`, weight
/// `[CO/16, CI/16, KH, KW, 16, 16]`) as the catalog's `conv2d_packed` (sizes in channels).
fn packed_conv2d(
    x: &crate::ir::TensorType,
    y: &crate::ir::TensorType,
    stride: (i64, i64),
    padding: (i64, i64),
) -> Option<OpSpec> {
    let (d, w) = (&x.shape[..], &y.shape[..]);
    let blocked = d.len() == 6 && w.len() == 6 && d[4] == 1 && d[5] == 16 && w[4..] == [16, 16];
    if !blocked || stride.0 != stride.1 || padding.0 != padding.1 {
        return None;
    }
    let attrs = OpAttrs {
        stride: stride.0,
        pad: Some(padding.0),
        ..OpAttrs::default()
    };
    let shape = [d[0], d[2], d[3], d[1] * 16, w[0] * 16, w[2], w[3]];
    OpSpec::new("conv2d_packed", &shape, attrs).ok()
}
