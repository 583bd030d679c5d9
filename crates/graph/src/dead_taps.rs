//! Convolutions whose filter taps mostly read padding, split into the regions of the
//! output where the same taps read the image, each a convolution over only those taps.
//!
//! A dilated convolution on a small image reads zeros with most of its taps: DeepLab's
//! ASPP computes 3×3 convolutions of dilation 12, 24 and 36 on a 14×14 feature map,
//! where the outer taps of dilation 24 and 36 read only padding (the convolution is a
//! 1×1 one) and those of dilation 12 read the image for 2 of 14 rows and columns. Along
//! one spatial axis, the taps an output position reads inside the image are a
//! contiguous range, constant over bands of positions; the bands of the two axes cut
//! the output into rectangles, each computed by an unpadded convolution over a slice of
//! the input with the filter cropped to its taps, the rectangles concatenated back.
//! Only the taps that read the image are computed, the same sums in the same order.
//! (onnxruntime computes these convolutions in the time of their live taps too.)

use crate::error::GraphError;
use crate::ir::{Graph, Layout, Op};
use crate::passes::dead_code_elimination;
use petgraph::stable_graph::NodeIndex;
use tessera_te::ops::Conv2dAttrs;

/// The most rectangles a convolution is split into (3 bands per axis: before the
/// image's edge taps start, the middle, after).
const MAX_REGIONS: usize = 9;

/// Output positions `[o0, o1)` along one axis whose taps inside the image are
/// `[t0, t1)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Band {
    o0: i64,
    o1: i64,
    t0: i64,
    t1: i64,
}

/// One spatial axis of a convolution.
#[derive(Clone, Copy, Debug)]
struct Axis {
    input: i64,
    output: i64,
    taps: i64,
    stride: i64,
    dilation: i64,
    pad: i64,
}

impl Axis {
    /// The taps output position `o` reads inside the image, `[t0, t1)` (empty when it
    /// reads only padding).
    fn live(&self, o: i64) -> (i64, i64) {
        let first = o * self.stride - self.pad;
        let d = self.dilation.max(1);
        let t0 = ((-first).max(0) + d - 1) / d;
        let t1 = if self.input - first > 0 {
            ((self.input - 1 - first) / d + 1).min(self.taps)
        } else {
            0
        };
        (t0.min(self.taps), t1.max(t0.min(self.taps)))
    }

    fn bands(&self) -> Vec<Band> {
        let mut bands: Vec<Band> = Vec::new();
        for o in 0..self.output {
            let (t0, t1) = self.live(o);
            match bands.last_mut() {
                Some(b) if (b.t0, b.t1) == (t0, t1) => b.o1 = o + 1,
                _ => bands.push(Band {
                    o0: o,
                    o1: o + 1,
                    t0,
                    t1,
                }),
            }
        }
        bands
    }

    /// The input positions a band reads: `[first, end)`, inside the image.
    fn input_range(&self, b: &Band) -> (i64, i64) {
        let first = b.o0 * self.stride + b.t0 * self.dilation - self.pad;
        let last = (b.o1 - 1) * self.stride + (b.t1 - 1) * self.dilation - self.pad;
        (first, last + 1)
    }
}

/// Where a layout keeps the spatial axes of data and weight: (data H, weight KH); W
/// follows H in both.
fn spatial_axes(layout: Layout) -> (usize, usize) {
    match layout {
        Layout::Nchw => (2, 2),
        Layout::Nhwc => (1, 0),
    }
}

/// Splits every dilated 2-D convolution that has taps reading only padding, or that
/// reads padding with at least half of its (output position, tap) pairs, into the
/// regions of its live taps (see the module's header). Returns how many were split.
/// (An undilated convolution reads that much padding only on a map of a pixel or two,
/// a test network's, where the regions' kernels cost more than the taps they save.)
pub fn split_dead_taps(graph: &mut Graph) -> Result<usize, GraphError> {
    let mut split = 0;
    for n in graph.topo_order() {
        let Op::Conv2d { attrs, layout } = graph.node(n).op.clone() else {
            continue;
        };
        let Some((axes, bands)) = plan(graph, n, &attrs, layout) else {
            continue;
        };
        let out = emit(graph, n, &attrs, layout, &axes, &bands)?;
        graph.replace_uses(n, out);
        graph.remove(n);
        split += 1;
    }
    if split > 0 {
        dead_code_elimination(graph);
    }
    Ok(split)
}

/// The two axes of conv `n` and their bands, when splitting it pays.
fn plan(
    graph: &Graph,
    n: NodeIndex,
    attrs: &Conv2dAttrs,
    layout: Layout,
) -> Option<([Axis; 2], [Vec<Band>; 2])> {
    let args = graph.args(n);
    let data = &graph.node(args[0]).ty.shape;
    let weight = &graph.node(args[1]).ty.shape;
    let out = &graph.node(n).ty.shape;
    if data.len() != 4 || weight.len() != 4 || out.len() != 4 {
        return None;
    }
    if attrs.dilation == (1, 1) {
        return None;
    }
    let (dh, kh) = spatial_axes(layout);
    let axes = [0, 1].map(|i| Axis {
        input: data[dh + i],
        output: out[dh + i],
        taps: weight[kh + i],
        stride: [attrs.stride.0, attrs.stride.1][i],
        dilation: [attrs.dilation.0, attrs.dilation.1][i],
        pad: attrs.padding[i],
    });
    let bands = axes.map(|a| a.bands());
    if bands.iter().any(|bs| bs.iter().any(|b| b.t0 >= b.t1)) {
        return None; // an output region of bias only: left to the convolution
    }
    if bands[0].len() * bands[1].len() > MAX_REGIONS {
        return None;
    }
    let work = |i: usize| -> (i64, i64) {
        let live = bands[i].iter().map(|b| (b.o1 - b.o0) * (b.t1 - b.t0)).sum();
        (live, axes[i].output * axes[i].taps)
    };
    let ((lh, fh), (lw, fw)) = (work(0), work(1));
    let dead_tap_everywhere = axes
        .iter()
        .zip(&bands)
        .any(|(a, bs)| bs.len() == 1 && bs[0].t1 - bs[0].t0 < a.taps);
    (dead_tap_everywhere || 2 * lh * lw <= fh * fw).then_some((axes, bands))
}

/// Emits the regions of conv `n` and their concatenation; returns the node that
/// replaces it.
fn emit(
    graph: &mut Graph,
    n: NodeIndex,
    attrs: &Conv2dAttrs,
    layout: Layout,
    axes: &[Axis; 2],
    [hb, wb]: &[Vec<Band>; 2],
) -> Result<NodeIndex, GraphError> {
    let args = graph.args(n);
    let name = graph.node(n).name.clone();
    let data_rank = graph.node(args[0]).ty.shape.len();
    let (dh, kh) = spatial_axes(layout);
    let mut rows = Vec::with_capacity(hb.len());
    for (i, bh) in hb.iter().enumerate() {
        let mut cols = Vec::with_capacity(wb.len());
        for (j, bw) in wb.iter().enumerate() {
            let region = format!("{name}_taps{i}{j}");
            let (ih, iw) = (axes[0].input_range(bh), axes[1].input_range(bw));
            let data = slice(
                graph,
                &format!("{region}_data"),
                args[0],
                data_rank,
                dh,
                [ih, iw],
            )?;
            let taps = [(bh.t0, bh.t1), (bw.t0, bw.t1)];
            let weight = slice(graph, &format!("{region}_weight"), args[1], 4, kh, taps)?;
            let one = |a: &Band, d: i64| if a.t1 - a.t0 == 1 { 1 } else { d };
            let sub = Conv2dAttrs {
                padding: [0; 4],
                dilation: (one(bh, attrs.dilation.0), one(bw, attrs.dilation.1)),
                ..*attrs
            };
            let conv = Op::Conv2d { attrs: sub, layout };
            cols.push(graph.op(&region, conv, &[data, weight])?);
        }
        rows.push(concat(graph, &format!("{name}_taps{i}"), cols, dh + 1)?);
    }
    concat(graph, &format!("{name}_taps"), rows, dh)
}

/// `x[.., a0..a1, b0..b1, ..]` over axes `axis` and `axis + 1` of a rank-`rank` tensor
/// (the node itself when the ranges are whole).
fn slice(
    graph: &mut Graph,
    name: &str,
    x: NodeIndex,
    rank: usize,
    axis: usize,
    ranges: [(i64, i64); 2],
) -> Result<NodeIndex, GraphError> {
    let shape = graph.node(x).ty.shape.clone();
    let mut begin = vec![0; rank];
    let mut end = shape.clone();
    for (k, (a, b)) in ranges.into_iter().enumerate() {
        begin[axis + k] = a;
        end[axis + k] = b;
    }
    if begin.iter().all(|&b| b == 0) && end == shape {
        return Ok(x);
    }
    let op = Op::StridedSlice {
        begin,
        end,
        strides: vec![1; rank],
    };
    graph.op(name, op, &[x])
}

/// `parts` concatenated along `axis` (the one part itself).
fn concat(
    graph: &mut Graph,
    name: &str,
    parts: Vec<NodeIndex>,
    axis: usize,
) -> Result<NodeIndex, GraphError> {
    if let [one] = parts[..] {
        return Ok(one);
    }
    graph.op(name, Op::Concat { axis: axis as i64 }, &parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn axis(input: i64, taps: i64, dilation: i64, pad: i64) -> Axis {
        let output = input + 2 * pad - (taps - 1) * dilation;
        Axis {
            input,
            output,
            taps,
            stride: 1,
            dilation,
            pad,
        }
    }

    #[test]
    fn aspp_bands_on_a_14_pixel_map() {
        // dilation 24: only the centre tap reads the image, everywhere
        assert_eq!(
            axis(14, 3, 24, 24).bands(),
            vec![Band {
                o0: 0,
                o1: 14,
                t0: 1,
                t1: 2
            }]
        );
        // dilation 12: the last tap for the first 2 rows, the first for the last 2
        let b = axis(14, 3, 12, 12).bands();
        assert_eq!(
            b,
            vec![
                Band {
                    o0: 0,
                    o1: 2,
                    t0: 1,
                    t1: 3
                },
                Band {
                    o0: 2,
                    o1: 12,
                    t0: 1,
                    t1: 2
                },
                Band {
                    o0: 12,
                    o1: 14,
                    t0: 0,
                    t1: 2
                },
            ]
        );
        let a = axis(14, 3, 12, 12);
        assert_eq!(a.input_range(&b[0]), (0, 14));
        assert_eq!(a.input_range(&b[1]), (2, 12));
        assert_eq!(a.input_range(&b[2]), (0, 14));
    }

    #[test]
    fn an_ordinary_padded_conv_keeps_its_three_bands() {
        let b = axis(56, 3, 1, 1).bands();
        assert_eq!(b.len(), 3);
        assert_eq!((b[1].t0, b[1].t1), (0, 3));
    }
}
