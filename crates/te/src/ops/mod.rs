//! The operator library (the TOPI of Tessera): compute declarations written the way
//! TVM's TOPI writes them — the same stage names, axis names and index expressions — so
//! that their compute DAGs print as TVM prints them and their workload keys match
//! wherever the same subgraph appears.
//!
//! - [`conv`]: conv2d (NHWC, NCHW, groups, dilation, asymmetric padding), depthwise,
//!   transpose, and the packed (blocked) int8 conv2d.
//! - [`winograd`]: Winograd conv2d F(2×2,3×3) and F(4×4,3×3), TVM's form and the CPU's.
//! - [`conv3d`]: conv3d NCDHW/NDHWC (groups, dilation, asymmetric padding).
//! - [`dense`]: matmul, dense, batch_matmul.
//! - [`integer`]: int8 × int8 → int32 matrix products on words of four bytes (the CPU's
//!   `vpdpbusd`).
//! - [`attention`]: scaled dot-product attention as one operator.
//! - [`pool`]: max/avg pool2d and pool3d, global and adaptive pooling (2-D and 3-D).
//! - [`softmax`]: softmax, log_softmax, layer norm.
//! - [`elemwise`]: elementwise and broadcast operators.
//! - [`injective`]: pad, reshape, transpose, concatenate, flatten, strided slice,
//!   layout transforms.
//! - [`transform`]: broadcast_to, tile, take, reflect / edge padding.
//! - [`index`]: gather_elements, trilu, cumulative sums and products, one_hot,
//!   argmax / argmin.
//! - [`math`]: abs, sign, rounding, trigonometric and hyperbolic functions, NaN and
//!   infinity tests, parameterized activations, power, PReLU, comparisons, logic,
//!   bitwise operators, where.
//! - [`reduce`]: sum, mean, max, min, prod, L1, L2, sum of squares, log-sum-exp over
//!   any axes.
//! - [`norm`]: local response and instance normalization.
//! - [`image`]: resize2d (nearest, linear, cubic).
//! - [`grid`]: grid_sample (an image sampled at coordinates from a tensor).
//! - [`sort`]: topk (the `k` largest or smallest along an axis, and their positions).
//!
//! Invalid attributes are [`TeError::BadAttr`] errors naming the operator and the
//! attribute; shapes that do not fit are [`TeError::BadShape`].

pub mod attention;
pub mod conv;
pub mod conv3d;
pub mod dense;
pub mod elemwise;
pub mod grid;
pub mod image;
pub mod index;
pub mod injective;
pub mod integer;
pub mod math;
pub mod norm;
pub mod pool;
pub mod reduce;
pub mod softmax;
pub mod sort;
pub mod transform;
pub mod winograd;

pub use attention::*;
pub use conv::*;
pub use conv3d::*;
pub use dense::*;
pub use elemwise::*;
pub use grid::*;
pub use image::*;
pub use index::*;
pub use injective::*;
pub use integer::*;
pub use math::*;
pub use norm::*;
pub use pool::*;
pub use reduce::*;
pub use softmax::*;
pub use sort::*;
pub use transform::*;
pub use winograd::*;

use crate::error::TeError;

/// An invalid attribute of `op`.
pub(crate) fn attr_err(op: &str, attr: &str, reason: impl Into<String>) -> TeError {
    TeError::BadAttr {
        op: op.to_string(),
        attr: attr.to_string(),
        reason: reason.into(),
    }
}
