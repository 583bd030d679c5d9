//! Winograd convolutions for CPU builds: the 3×3, stride-1 NHWC convolutions with
//! constant weights become [`Op::Conv2dWinograd`], their weights transformed
//! (`G g Gᵀ`) and blocked by output channels once, at build time — as TVM's
//! `alter_op_layout` pre-transforms the weights of the Winograd convolutions it picks.
//!
//! Which layers, by the rule ([`rule_takes_winograd`]; a build with a record log takes
//! the form its measurements say is faster, [`crate::conv_plan`]): those with at least
//! [`WINOGRAD_MIN_CHANNELS`] input channels (below, the transforms cost more than the
//! multiplications they save), F(4×4, 3×3) where 4 divides the output's height and
//! width, F(2×2, 3×3) otherwise. Measured on an AVX2
//! EPYC (2 threads, default schedules, `tessera op`; BENCHMARKS.md, "Winograd
//! convolutions"): ResNet's 3×3 layers ran 1.6–2.9× faster than the direct
//! convolution with packed weights, SqueezeNet's 27×27 and 13×13 ones 1.9–2.7×, its
//! 55×55×16 one 0.76× (0.99× with F(4×4, 3×3)).

use crate::error::GraphError;
use crate::ir::{Graph, Op};
use crate::passes::{dead_code_elimination, nhwc_conv_with_constant_weight, replace_weight};
use petgraph::stable_graph::NodeIndex;
use tessera_ir::DataType;
use tessera_runtime::NDArray;
use tessera_te::catalog::winograd_tile_for;
use tessera_te::ops::winograd_matrices;

/// The fewest input channels for which a convolution is computed with Winograd.
pub const WINOGRAD_MIN_CHANNELS: usize = 32;

/// The Winograd weight of an HWIO 3×3 float32 weight `w`: `[α, α, CO/b, CI, b]`
/// (α = `tile` + 2), `U[ε, ν, o / b, i, o % b] = Σ G[ε, kh] · w[kh, kw, i, o] · G[ν, kw]`
/// (in f64, stored as f32).
pub fn winograd_weight(w: &NDArray, tile: i64, b: usize) -> Result<NDArray, GraphError> {
    let bad = |why: String| GraphError::Invalid(format!("winograd weight: {why}"));
    let &[3, 3, ci, co] = w.shape() else {
        return Err(bad(format!(
            "expected a 3x3 HWIO weight, got {:?}",
            w.shape()
        )));
    };
    if b == 0 || co % b != 0 {
        return Err(bad(format!(
            "block {b} does not divide {co} output channels"
        )));
    }
    let (_, _, g) = winograd_matrices(tile).ok_or_else(|| bad(format!("tile size {tile}")))?;
    let alpha = g.len();
    let src = w.as_slice::<f32>()?;
    let mut out = vec![0f32; alpha * alpha * co * ci];
    for i in 0..ci {
        for o in 0..co {
            let tap = |kh: usize, kw: usize| f64::from(src[((kh * 3 + kw) * ci + i) * co + o]);
            for (eps, ge) in g.iter().enumerate() {
                for (nu, gn) in g.iter().enumerate() {
                    let mut v = 0.0;
                    for (kh, a) in ge.iter().enumerate() {
                        for (kw, c) in gn.iter().enumerate() {
                            v += a * tap(kh, kw) * c;
                        }
                    }
                    let at = (((eps * alpha + nu) * (co / b) + o / b) * ci + i) * b + o % b;
                    out[at] = v as f32;
                }
            }
        }
    }
    Ok(NDArray::from_slice_f32(
        &[alpha, alpha, co / b, ci, b],
        &out,
    )?)
}

/// Whether the rule computes a convolution of `ci` input channels with Winograd: an
/// untuned build's choice, and a tuned build's where the log has not measured both
/// forms ([`crate::conv_plan`]).
pub fn rule_takes_winograd(ci: usize) -> bool {
    ci >= WINOGRAD_MIN_CHANNELS
}

/// Whether convolution `n` of `graph` can be computed with Winograd on weights blocked
/// by `block` output channels (NHWC, 3×3, stride and dilation 1, one group, a constant
/// float32 weight, output channels a multiple of `block`): its input channels and the
/// tile size the rule gives its output ([`winograd_tile_for`]).
pub fn winograd_fits(graph: &Graph, n: NodeIndex, block: i64) -> Option<(usize, i64)> {
    let b = usize::try_from(block).ok().filter(|&b| b >= 1)?;
    let (attrs, w) = nhwc_conv_with_constant_weight(graph, n)?;
    let &[3, 3, ci, co] = w.shape() else {
        return None;
    };
    let simple = attrs.groups == 1 && attrs.stride == (1, 1) && attrs.dilation == (1, 1);
    let out = &graph.node(n).ty.shape;
    (simple && w.dtype() == DataType::float32() && co % b == 0 && out.len() == 4)
        .then(|| (ci, winograd_tile_for(out[1], out[2])))
}

/// Rewrites convolution `n` (one [`winograd_fits`] accepts) into
/// [`Op::Conv2dWinograd`] with F(`tile`×`tile`, 3×3), its weight transformed and
/// blocked by `block`; returns the new node. The old weight stays until dead code
/// elimination.
pub fn rewrite_winograd(
    graph: &mut Graph,
    n: NodeIndex,
    tile: i64,
    block: i64,
) -> Result<NodeIndex, GraphError> {
    let bad = || GraphError::Invalid(format!("node {}: no Winograd form", graph.node(n).name));
    if winograd_fits(graph, n, block).is_none() {
        return Err(bad());
    }
    let (attrs, w) = nhwc_conv_with_constant_weight(graph, n).ok_or_else(bad)?;
    let value = winograd_weight(w, tile, block as usize)?;
    let op = Op::Conv2dWinograd {
        padding: attrs.padding,
        tile,
    };
    replace_weight(graph, n, op, &format!("winograd{tile}"), value)
}

/// Rewrites the NHWC convolutions of `graph` that Winograd computes faster by the rule
/// (see the module's documentation) into [`Op::Conv2dWinograd`] with their weights
/// transformed, blocked by `block` output channels (a divisor of theirs; none
/// otherwise). Returns how many it rewrote.
pub fn winograd_convolutions(graph: &mut Graph, block: i64) -> Result<usize, GraphError> {
    let mut rewritten = 0;
    for n in graph.topo_order() {
        match winograd_fits(graph, n, block) {
            Some((ci, tile)) if rule_takes_winograd(ci) => {
                rewrite_winograd(graph, n, tile, block)?;
                rewritten += 1;
            }
            _ => {}
        }
    }
    dead_code_elimination(graph);
    Ok(rewritten)
}
