//! 3-D convolution in NCDHW (kernel OIDHW) and NDHWC (kernel DHWIO), with strides,
//! asymmetric padding, dilation and groups: TVM's TOPI `conv3d_ncdhw` / `conv3d_ndhwc`,
//! written as its generic N-D `topi.nn.conv` writes them — the padded input `pad_temp`,
//! the output stage and tag `conv3d_ncdhw` / `conv3d_ndhwc` (`group_` before them with
//! groups), the reduce axes `rc` and `ry`, `rx`, `rz` for the kernel's depth, height
//! and width (TVM names the three spatial reduce axes in that order), ordered as the
//! data layout orders its axes (`rc, ry, rx, rz` for NCDHW, `ry, rx, rz, rc` for NDHWC),
//! and the output axes `nn, ff, yy, xx, zz` (batch, channels, depth, height, width).

use super::attr_err;
use super::conv::{conv_output_size, scaled, ConvGeometry};
use super::injective::pad;
use crate::error::TeError;
use crate::tensor::{compute_tagged, reduce_axis, sum, Tensor};
use tessera_ir::Expr;

/// The attributes of a 3-D convolution.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv3dAttrs {
    /// (depth, height, width) strides.
    pub stride: (i64, i64, i64),
    /// Zero padding: front, top, left, back, bottom, right (TVM's order).
    pub padding: [i64; 6],
    /// (depth, height, width) dilations.
    pub dilation: (i64, i64, i64),
    /// Channel groups (1 for a dense convolution).
    pub groups: i64,
}

impl Default for Conv3dAttrs {
    fn default() -> Self {
        Conv3dAttrs {
            stride: (1, 1, 1),
            padding: [0; 6],
            dilation: (1, 1, 1),
            groups: 1,
        }
    }
}

impl Conv3dAttrs {
    /// Stride, symmetric (depth, height, width) padding and dilation, one group.
    pub fn new(
        stride: (i64, i64, i64),
        padding: (i64, i64, i64),
        dilation: (i64, i64, i64),
    ) -> Self {
        let (d, h, w) = padding;
        Conv3dAttrs {
            stride,
            padding: [d, h, w, d, h, w],
            dilation,
            groups: 1,
        }
    }
    /// The six paddings: front, top, left, back, bottom, right.
    pub fn with_padding(mut self, padding: [i64; 6]) -> Self {
        self.padding = padding;
        self
    }
    pub fn with_groups(mut self, groups: i64) -> Self {
        self.groups = groups;
        self
    }

    fn strides(&self) -> [i64; 3] {
        [self.stride.0, self.stride.1, self.stride.2]
    }
    fn dilations(&self) -> [i64; 3] {
        [self.dilation.0, self.dilation.1, self.dilation.2]
    }

    /// Checks the attributes and returns the output (depth, height, width) for an input
    /// of `dims` and a kernel of `kernel` (both depth, height, width).
    fn output_dhw(&self, op: &str, dims: [i64; 3], kernel: [i64; 3]) -> Result<[i64; 3], TeError> {
        let out = conv_output_size(
            op,
            ConvGeometry {
                dims: &dims,
                kernel: &kernel,
                strides: &self.strides(),
                dilations: &self.dilations(),
                pad_before: &self.padding[..3],
                pad_after: &self.padding[3..],
            },
            (
                &format!("{:?}", self.stride),
                &format!("{:?}", self.dilation),
                &format!("{:?}", self.padding),
            ),
        )?;
        Ok([out[0], out[1], out[2]])
    }
}

/// The two data layouts of 3-D convolutions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    Ncdhw,
    Ndhwc,
}

impl Layout {
    /// A data shape or index from its `(n, c, d, h, w)` parts.
    fn order<T>(self, n: T, c: T, d: T, h: T, w: T) -> Vec<T> {
        match self {
            Layout::Ncdhw => vec![n, c, d, h, w],
            Layout::Ndhwc => vec![n, d, h, w, c],
        }
    }
}

fn conv3d(
    layout: Layout,
    data: &Tensor,
    kernel: &Tensor,
    a: &Conv3dAttrs,
) -> Result<Tensor, TeError> {
    let op = match (layout, a.groups == 1) {
        (Layout::Ncdhw, true) => "conv3d_ncdhw",
        (Layout::Ncdhw, false) => "group_conv3d_ncdhw",
        (Layout::Ndhwc, true) => "conv3d_ndhwc",
        (Layout::Ndhwc, false) => "group_conv3d_ndhwc",
    };
    super::conv::check_conv_inputs(op, data, kernel, 5)?;
    let (d, k) = (data.shape().to_vec(), kernel.shape().to_vec());
    // (n, c, [d, h, w]) of the data; (o, i, [kd, kh, kw]) of the kernel
    let (n, cin, dims) = match layout {
        Layout::Ncdhw => (d[0], d[1], [d[2], d[3], d[4]]),
        Layout::Ndhwc => (d[0], d[4], [d[1], d[2], d[3]]),
    };
    let (cout, kcin, kdims) = match layout {
        Layout::Ncdhw => (k[0], k[1], [k[2], k[3], k[4]]),
        Layout::Ndhwc => (k[4], k[3], [k[0], k[1], k[2]]),
    };
    if a.groups <= 0 {
        return Err(attr_err(
            op,
            "groups",
            format!("{} must be positive", a.groups),
        ));
    }
    if cin % a.groups != 0 || cout % a.groups != 0 {
        return Err(attr_err(
            op,
            "groups",
            format!(
                "input channels {cin} and output channels {cout} must both be divisible by \
                 groups {}",
                a.groups
            ),
        ));
    }
    if kcin != cin / a.groups {
        return Err(TeError::BadShape {
            op: op.to_string(),
            shape: vec![cin, cout],
            reason: format!(
                "the kernel has {kcin} input channels, expected {} (= {cin} / groups {})",
                cin / a.groups,
                a.groups
            ),
        });
    }
    let out = a.output_dhw(op, dims, kdims)?;
    let p = a.padding;
    let padded = pad(
        data,
        &layout.order(0, 0, p[0], p[1], p[2]),
        &layout.order(0, 0, p[3], p[4], p[5]),
        "pad_temp",
    )?;
    let rc = reduce_axis(kcin, "rc");
    let rs = [
        reduce_axis(kdims[0], "ry"),
        reduce_axis(kdims[1], "rx"),
        reduce_axis(kdims[2], "rz"),
    ];
    let raxes = match layout {
        Layout::Ncdhw => vec![rc.clone(), rs[0].clone(), rs[1].clone(), rs[2].clone()],
        Layout::Ndhwc => vec![rs[0].clone(), rs[1].clone(), rs[2].clone(), rc.clone()],
    };
    let (cin_g, cout_g) = (cin / a.groups, cout / a.groups);
    let (s, dl) = (a.strides(), a.dilations());
    let names = layout.order("nn", "ff", "yy", "xx", "zz");
    let shape = layout.order(n, cout, out[0], out[1], out[2]);
    compute_tagged(&shape, op, op, &names, |ix| {
        let (nn, ff, sp) = match layout {
            Layout::Ncdhw => (&ix[0], &ix[1], [&ix[2], &ix[3], &ix[4]]),
            Layout::Ndhwc => (&ix[0], &ix[4], [&ix[1], &ix[2], &ix[3]]),
        };
        let at: Vec<Expr> = (0..3)
            .map(|i| scaled(sp[i], s[i]) + scaled(&rs[i].expr(), dl[i]))
            .collect();
        let c = if a.groups == 1 {
            rc.expr()
        } else {
            Expr::floordiv(ff.clone(), Expr::int(cout_g)) * cin_g + rc.expr()
        };
        let [ry, rx, rz] = [rs[0].expr(), rs[1].expr(), rs[2].expr()];
        let kidx = match layout {
            Layout::Ncdhw => vec![ff.clone(), rc.expr(), ry, rx, rz],
            Layout::Ndhwc => vec![ry, rx, rz, rc.expr(), ff.clone()],
        };
        let [ad, ah, aw] = [at[0].clone(), at[1].clone(), at[2].clone()];
        sum(
            padded.at(&layout.order(nn.clone(), c, ad, ah, aw)) * kernel.at(&kidx),
            &raxes,
        )
    })
}

/// 3-D convolution, data NCDHW `[N, C, D, H, W]`, kernel OIDHW `[O, C / groups, KD, KH,
/// KW]` — TVM's `conv3d_ncdhw` (`group_conv3d_ncdhw` with groups).
///
/// Errors: non-5-D operands or mixed types, non-positive strides, dilations, kernel
/// sizes or groups, negative padding, channels not divisible by the groups, a kernel
/// whose input channels do not match, or a dilated kernel larger than the padded input
/// ([`TeError::BadAttr`] naming the attribute, or [`TeError::BadShape`]).
pub fn conv3d_ncdhw(data: &Tensor, kernel: &Tensor, a: &Conv3dAttrs) -> Result<Tensor, TeError> {
    conv3d(Layout::Ncdhw, data, kernel, a)
}

/// 3-D convolution, data NDHWC `[N, D, H, W, C]`, kernel DHWIO `[KD, KH, KW, C / groups,
/// O]` — TVM's `conv3d_ndhwc`. Errors as [`conv3d_ncdhw`].
pub fn conv3d_ndhwc(data: &Tensor, kernel: &Tensor, a: &Conv3dAttrs) -> Result<Tensor, TeError> {
    conv3d(Layout::Ndhwc, data, kernel, a)
}
