//! The rewrites a CPU build in NHWC makes once its convolutions' algorithms are chosen
//! (`ConvPlan`'s networks: the rule's, each option's, a log's picks), as one named list
//! in the order they run — what stage 4 of the driver's stage list ("algorithm plan")
//! does to a network, each its own pass:
//!
//! 1. `winograd`: the convolutions picked for Winograd become `Conv2dWinograd` on their
//!    transformed weights ([`crate::winograd`]);
//! 2. `pad-conv-channels`: output channels padded to whole vectors
//!    ([`crate::pad_channels::pad_conv_channels`]);
//! 3. `fuse-attention`: the attention chains exports write become one `Attention`
//!    ([`crate::attention`]);
//! 4. `pad-matmul-columns`: a computed product's columns padded to whole vectors
//!    ([`crate::pad_channels::pad_matmul_columns`]);
//! 5. `pack-conv-weights`: constant convolution weights packed per vector block
//!    ([`crate::passes::pack_conv_weights`]);
//! 6. `pack-dense-weights`: constant dense weights packed per vector block
//!    ([`crate::passes::pack_dense_weights`]);
//! 7. `dead-code`: what no output reads, removed.
//!
//! A pass that replaces a node reports where it went ([`Rewriting::moved`]), so the
//! plan can find each chosen convolution's fused group afterwards.

use crate::attention::fuse_attention;
use crate::error::GraphError;
use crate::ir::Graph;
use crate::pad_channels::{pad_conv_channels, pad_matmul_columns};
use crate::passes::{
    dead_code_elimination, pack_conv_weights_mapped, pack_dense_weights_mapped, PACK_WEIGHTS_ABOVE,
};
use crate::winograd::rewrite_winograd;
use petgraph::stable_graph::NodeIndex;
use std::collections::HashMap;

/// What the passes share: the vector block (a register's float lanes), the
/// convolutions picked for Winograd, and where rewritten nodes went.
pub struct Rewriting {
    pub block: i64,
    /// Each convolution to compute with Winograd, and its tile.
    pub winograd: Vec<(NodeIndex, i64)>,
    /// Where each rewritten node of the original network is now.
    pub moved: HashMap<NodeIndex, NodeIndex>,
}

impl Rewriting {
    /// Records that `old` is now `new` (following an earlier move of the same node).
    fn follow(&mut self, old: NodeIndex, new: NodeIndex) {
        match self.moved.values_mut().find(|v| **v == old) {
            Some(v) => *v = new,
            None => {
                self.moved.insert(old, new);
            }
        }
    }

    /// [`Rewriting::follow`] for each of a pass's moves.
    fn follow_all(&mut self, pairs: Vec<(NodeIndex, NodeIndex)>) -> Result<(), GraphError> {
        for (old, new) in pairs {
            self.follow(old, new);
        }
        Ok(())
    }
}

/// One rewrite of the list.
pub struct CpuRewrite {
    pub name: &'static str,
    /// What it does, in a line.
    pub what: &'static str,
    run: fn(&mut Graph, &mut Rewriting) -> Result<(), GraphError>,
}

/// The rewrites, in the order they run.
pub const CPU_REWRITES: [CpuRewrite; 7] = [
    CpuRewrite {
        name: "winograd",
        what: "the convolutions picked for Winograd on their transformed weights",
        run: |g, r| {
            for (n, tile) in std::mem::take(&mut r.winograd) {
                let new = rewrite_winograd(g, n, tile, r.block)?;
                r.follow(n, new);
            }
            Ok(())
        },
    },
    CpuRewrite {
        name: "pad-conv-channels",
        what: "convolutions' output channels padded to whole vectors",
        run: |g, r| r.follow_all(pad_conv_channels(g, r.block)?),
    },
    CpuRewrite {
        name: "fuse-attention",
        what: "attention chains (scores, bias, softmax, product) as one operator",
        run: |g, r| fuse_attention(g, r.block).map(drop),
    },
    CpuRewrite {
        name: "pad-matmul-columns",
        what: "computed products' columns padded to whole vectors",
        run: |g, r| r.follow_all(pad_matmul_columns(g, r.block)?),
    },
    CpuRewrite {
        name: "pack-conv-weights",
        what: "constant convolution weights packed per vector block",
        run: |g, r| r.follow_all(pack_conv_weights_mapped(g, r.block, PACK_WEIGHTS_ABOVE)?),
    },
    CpuRewrite {
        name: "pack-dense-weights",
        what: "constant dense weights packed per vector block",
        run: |g, r| r.follow_all(pack_dense_weights_mapped(g, r.block)?),
    },
    CpuRewrite {
        name: "dead-code",
        what: "what no output reads, removed",
        run: |g, _| {
            dead_code_elimination(g);
            Ok(())
        },
    },
];

/// Runs every rewrite of [`CPU_REWRITES`] on `g`, in order; each failure names its pass.
pub fn run_cpu_rewrites(g: &mut Graph, r: &mut Rewriting) -> Result<(), GraphError> {
    for pass in &CPU_REWRITES {
        (pass.run)(g, r).map_err(|e| GraphError::Pass {
            pass: pass.name,
            source: Box::new(e),
        })?;
    }
    Ok(())
}
