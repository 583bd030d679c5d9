//! The CPU's convolution templates: `conv2d_nhwc.x86` and `conv2d_nchw.x86` (one tiling
//! of both layouts, vectors along the channels or the pixels), `conv2d_NCHWc.x86` (the
//! blocked layout with TVM's knobs once the blocking is fixed) and
//! `depthwise_conv2d_nhwc.x86`. Each ends in the same register tile: the reduction
//! outermost, rows unrolled, columns as register-wide vectors.

use super::{conv_attrs, one_group, op_err, Knobs, Template, TemplateEntry, TemplateError};
use crate::space::{AnnotatePolicy, ConfigSpace, SplitOptions, SplitPolicy};
use std::sync::Arc;
use tessera_ir::{DataType, StorageScope};
use tessera_te::catalog::largest_pow2_divisor;
use tessera_te::ops::{self, Conv2dAttrs};
use tessera_te::{placeholder, IterVar, Schedule, ScheduleError, Tensor};

/// A one-group conv2d of data `[n, h, w, ci]` (NHWC) or `[n, ci, h, w]` (NCHW) with a
/// `kh × kw` kernel to `co` channels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConvShape {
    pub n: i64,
    pub h: i64,
    pub w: i64,
    pub ci: i64,
    pub co: i64,
    pub kh: i64,
    pub kw: i64,
    pub attrs: Conv2dAttrs,
}

/// NHWC data `[n, h, w, ci]`, HWIO kernel `[kh, kw, ci, co]`, one group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conv2dNhwc(pub ConvShape);

/// NCHW data `[n, ci, h, w]`, OIHW kernel `[co, ci, kh, kw]`, one group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conv2dNchw(pub ConvShape);

/// The blocked NCHW{ib}c form: data `[n, ci/ib, h, w, ib]`, kernel
/// `[co/ob, ci/ib, kh, kw, ib, ob]`, output `[n, co/ob, oh, ow, ob]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conv2dNchwc {
    pub shape: ConvShape,
    pub ib: i64,
    pub ob: i64,
}

/// Depthwise NHWC: data `[n, h, w, c]`, kernel `[kh, kw, c, 1]` (multiplier 1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DepthwiseNhwc {
    pub n: i64,
    pub h: i64,
    pub w: i64,
    pub c: i64,
    pub kh: i64,
    pub kw: i64,
    pub attrs: Conv2dAttrs,
}

/// The catalog's conv2d shape `[n, h, w, ci, co, kh, kw]` with its attributes.
fn conv_shape(spec: &tessera_te::catalog::OpSpec) -> Option<ConvShape> {
    match spec.shape[..] {
        [n, h, w, ci, co, kh, kw] => Some(ConvShape {
            n,
            h,
            w,
            ci,
            co,
            kh,
            kw,
            attrs: conv_attrs(spec, kh, kw),
        }),
        _ => None,
    }
}

pub(super) const CONV2D_NHWC: TemplateEntry = TemplateEntry {
    template: "conv2d_nhwc.x86",
    op: "conv2d",
    target_kind: None,
    make: |spec, _| Some(Arc::new(Conv2dNhwc(conv_shape(spec)?))),
};

pub(super) const CONV2D_NCHW: TemplateEntry = TemplateEntry {
    template: "conv2d_nchw.x86",
    op: "conv2d_nchw",
    target_kind: None,
    make: |spec, _| Some(Arc::new(Conv2dNchw(conv_shape(spec)?))),
};

/// The spec's `block`, else [`Conv2dNchwc::blocks`] for `lanes` — which differ from the
/// catalog's default blocks (powers of two up to 16) on machines with fewer than 16
/// lanes: see `OpSpec::for_vector_lanes`.
pub(super) const CONV2D_NCHWC: TemplateEntry = TemplateEntry {
    template: "conv2d_NCHWc.x86",
    op: "conv2d_nchwc",
    target_kind: None,
    make: |spec, lanes| {
        let shape = conv_shape(spec)?;
        let (ib, ob) = spec
            .attrs
            .block
            .unwrap_or_else(|| Conv2dNchwc::blocks(shape.ci, shape.co, lanes));
        Some(Arc::new(Conv2dNchwc { shape, ib, ob }))
    },
};

pub(super) const DEPTHWISE_NHWC: TemplateEntry = TemplateEntry {
    template: "depthwise_conv2d_nhwc.x86",
    op: "depthwise_conv2d",
    target_kind: None,
    make: |spec, _| match spec.shape[..] {
        [n, h, w, c, kh, kw] => Some(Arc::new(DepthwiseNhwc {
            n,
            h,
            w,
            c,
            kh,
            kw,
            attrs: conv_attrs(spec, kh, kw),
        })),
        _ => None,
    },
};

impl Conv2dNchwc {
    /// The NCHW{ib}c blocking of a conv2d for vectors of `lanes` float32: `ob` output
    /// channels per block (the largest power of two up to `lanes` dividing `co`), `ib`
    /// likewise for the input channels.
    pub fn blocks(ci: i64, co: i64, lanes: i64) -> (i64, i64) {
        (
            largest_pow2_divisor(ci, lanes),
            largest_pow2_divisor(co, lanes),
        )
    }
}

/// The knobs of both plain layouts: output channels and pixels tiled, the input
/// channels split, the outer loops' order, the reduction's unrolling. `cols` bounds the
/// vectors' tile (channels in NHWC, pixels in NCHW).
fn define_tiled(
    space: &mut ConfigSpace,
    co: SplitOptions,
    c: &ConvShape,
    ow: i64,
    ow_max: i64,
) -> Result<(), TemplateError> {
    space.define_split("tile_co", c.co, co)?;
    space.define_split(
        "tile_ow",
        ow,
        SplitOptions::factors(2).with_max_factor(ow_max),
    )?;
    space.define_split(
        "tile_rc",
        c.ci,
        SplitOptions::factors(2).with_max_factor(64),
    )?;
    space.define_reorder("reorder_outer", 3, None)?;
    space.define_annotate("ann_reduce", 1, AnnotatePolicy::TryUnroll)?;
    Ok(())
}

impl Template for Conv2dNhwc {
    fn name(&self) -> &'static str {
        "conv2d_nhwc.x86"
    }

    fn define(&self, space: &mut ConfigSpace) -> Result<Vec<Tensor>, TemplateError> {
        let c = &self.0;
        one_group(self.name(), &c.attrs)?;
        let f32 = DataType::float32();
        let d = placeholder(&[c.n, c.h, c.w, c.ci], f32, "data").map_err(op_err)?;
        let kern = placeholder(&[c.kh, c.kw, c.ci, c.co], f32, "kernel").map_err(op_err)?;
        let out = ops::conv2d_nhwc_with(&d, &kern, &c.attrs).map_err(op_err)?;
        let co = SplitOptions::factors(2)
            .with_policy(SplitPolicy::Power2)
            .with_max_factor(64);
        define_tiled(space, co, c, out.shape()[2], 16)?;
        Ok(vec![d, kern, out])
    }

    fn apply(
        &self,
        s: &mut Schedule,
        out: &Tensor,
        knobs: &Knobs<'_>,
    ) -> Result<(), ScheduleError> {
        // n, oh, ow, co; reduce ry, rx, rc; vectors of output channels
        let axes = ConvAxes {
            h: 1,
            w: 2,
            c: 3,
            ry: 0,
            rx: 1,
            rc: 2,
            vector_channels: true,
        };
        tile_conv(s, out, knobs, &axes)
    }
}

impl Template for Conv2dNchw {
    fn name(&self) -> &'static str {
        "conv2d_nchw.x86"
    }

    fn define(&self, space: &mut ConfigSpace) -> Result<Vec<Tensor>, TemplateError> {
        let c = &self.0;
        one_group(self.name(), &c.attrs)?;
        let f32 = DataType::float32();
        let d = placeholder(&[c.n, c.ci, c.h, c.w], f32, "data").map_err(op_err)?;
        let kern = placeholder(&[c.co, c.ci, c.kh, c.kw], f32, "kernel").map_err(op_err)?;
        let out = ops::conv2d_nchw(&d, &kern, &c.attrs).map_err(op_err)?;
        // rows of the register tile: output channels; columns (vectors): pixels
        let co = SplitOptions::factors(2).with_max_factor(8);
        define_tiled(space, co, c, out.shape()[3], 32)?;
        Ok(vec![d, kern, out])
    }

    fn apply(
        &self,
        s: &mut Schedule,
        out: &Tensor,
        knobs: &Knobs<'_>,
    ) -> Result<(), ScheduleError> {
        // n, co, oh, ow; reduce rc, ry, rx; vectors of output pixels
        let axes = ConvAxes {
            h: 2,
            w: 3,
            c: 1,
            ry: 1,
            rx: 2,
            rc: 0,
            vector_channels: false,
        };
        tile_conv(s, out, knobs, &axes)
    }
}

impl Template for Conv2dNchwc {
    fn name(&self) -> &'static str {
        "conv2d_NCHWc.x86"
    }

    fn define(&self, space: &mut ConfigSpace) -> Result<Vec<Tensor>, TemplateError> {
        let Conv2dNchwc { shape: c, ib, ob } = self;
        let (ib, ob) = (*ib, *ob);
        one_group(self.name(), &c.attrs)?;
        if ib <= 0 || ob <= 0 || c.ci % ib != 0 || c.co % ob != 0 {
            return Err(TemplateError::Op(format!(
                "{}: blocks {ib}i/{ob}o must divide the channels {}/{}",
                self.name(),
                c.ci,
                c.co
            )));
        }
        let f32 = DataType::float32();
        let d = placeholder(&[c.n, c.ci / ib, c.h, c.w, ib], f32, "data").map_err(op_err)?;
        let kshape = [c.co / ob, c.ci / ib, c.kh, c.kw, ib, ob];
        let kern = placeholder(&kshape, f32, "kernel").map_err(op_err)?;
        let out = ops::conv2d_nchwc(&d, &kern, &c.attrs).map_err(op_err)?;
        // TVM's knobs once the blocking is fixed: reg_n (output pixels per register
        // tile) and unroll_kw, plus where the input block is reduced.
        let ow = out.shape()[3];
        space.define_split("tile_ow", ow, SplitOptions::factors(2).with_max_factor(16))?;
        space.define_knob("unroll_kw", &[0, 1])?;
        space.define_knob("reduce_order", &[0, 1])?;
        Ok(vec![d, kern, out])
    }

    fn apply(
        &self,
        s: &mut Schedule,
        out: &Tensor,
        knobs: &Knobs<'_>,
    ) -> Result<(), ScheduleError> {
        let tow = knobs.get("tile_ow");
        let unroll_kw = knobs.get("unroll_kw")[0] != 0;
        let block_inner = knobs.get("reduce_order")[0] != 0;
        let cc = s.cache_write(out, StorageScope::Local)?;
        let ax = s.axis(out)?; // n, oc_chunk, oh, ow, oc_block
        let (owo, owi) = s.split(out, &ax[3], tow[1])?;
        let order = [&ax[0], &ax[1], &ax[2], &owo, &owi, &ax[4]].map(|a| a.clone());
        s.reorder(out, &order)?;
        if self.ob > 1 {
            s.vectorize(out, &ax[4])?;
        }
        s.compute_at(&cc, out, &owo)?;
        let cax = s.axis(&cc)?;
        let r = s.reduce_axis(&cc)?; // ic, kh, kw, ii
        if unroll_kw {
            s.unroll(&cc, &r[2])?;
        }
        let reduce = if block_inner {
            vec![r[0].clone(), r[1].clone(), r[2].clone(), r[3].clone()]
        } else {
            vec![r[1].clone(), r[2].clone(), r[0].clone(), r[3].clone()]
        };
        register_tile(s, &cc, &reduce, &cax[3], &cax[4], self.ob, knobs.lanes())?;
        let f = s.fuse(out, &ax[0], &ax[1])?;
        let f = s.fuse(out, &f, &ax[2])?;
        s.parallel(out, &f)?;
        Ok(())
    }

    fn mismatch_hint(&self, lanes: i64) -> Option<String> {
        let (ib, ob) = (self.ib, self.ob);
        Some(format!(
            " (the template blocks channels by {ib}/{ob} for {lanes} lanes: give the \
             operator `block` ({ib}, {ob}), see `OpSpec::for_vector_lanes`)"
        ))
    }
}

impl Template for DepthwiseNhwc {
    fn name(&self) -> &'static str {
        "depthwise_conv2d_nhwc.x86"
    }

    fn define(&self, space: &mut ConfigSpace) -> Result<Vec<Tensor>, TemplateError> {
        let f32 = DataType::float32();
        let d = placeholder(&[self.n, self.h, self.w, self.c], f32, "data").map_err(op_err)?;
        let kern = placeholder(&[self.kh, self.kw, self.c, 1], f32, "kernel").map_err(op_err)?;
        let out = ops::depthwise_conv2d_nhwc(&d, &kern, &self.attrs).map_err(op_err)?;
        let c = SplitOptions::factors(2)
            .with_policy(SplitPolicy::Power2)
            .with_max_factor(64);
        space.define_split("tile_c", self.c, c)?;
        let ow = out.shape()[2];
        space.define_split("tile_ow", ow, SplitOptions::factors(2).with_max_factor(16))?;
        space.define_reorder("reorder_outer", 2, None)?;
        space.define_annotate("ann_reduce", 1, AnnotatePolicy::TryUnroll)?;
        Ok(vec![d, kern, out])
    }

    fn apply(
        &self,
        s: &mut Schedule,
        out: &Tensor,
        knobs: &Knobs<'_>,
    ) -> Result<(), ScheduleError> {
        let (tc, tow) = (knobs.get("tile_c"), knobs.get("tile_ow"));
        let order = knobs.get("reorder_outer");
        let unroll_reduce = knobs.get("ann_reduce")[0] != 0;
        let cc = s.cache_write(out, StorageScope::Local)?;
        let ax = s.axis(out)?; // b, i, j, c
        let (jo, ji) = s.split(out, &ax[2], tow[1])?;
        let (co, ci) = s.split(out, &ax[3], tc[1])?;
        let outer = [jo, co];
        let o: Vec<IterVar> = order.iter().map(|&i| outer[i as usize].clone()).collect();
        let leaves = [&ax[0], &ax[1], &o[0], &o[1], &ji, &ci].map(|a| a.clone());
        s.reorder(out, &leaves)?;
        if tc[1] > 1 {
            s.vectorize(out, &ci)?;
        }
        s.compute_at(&cc, out, &o[1])?;
        let cax = s.axis(&cc)?;
        let r = s.reduce_axis(&cc)?; // di, dj
        if unroll_reduce {
            s.unroll(&cc, &r[1])?;
        }
        register_tile(s, &cc, &r, &cax[2], &cax[3], tc[1], knobs.lanes())?;
        let fused = s.fuse(out, &ax[0], &ax[1])?;
        s.parallel(out, &fused)?;
        Ok(())
    }
}

/// Where a conv2d template's axes are: output axes (`h`, `w`, `c`; batch first) and
/// reduce axes (`ry`, `rx`, `rc`), and whether vectors run along the channels.
struct ConvAxes {
    h: usize,
    w: usize,
    c: usize,
    ry: usize,
    rx: usize,
    rc: usize,
    vector_channels: bool,
}

/// The conv2d templates of both layouts: pixels and output channels tiled, the three
/// outer loops (rows, pixel tiles, channel tiles) in the configured order, a local
/// accumulator tile at the innermost of them, vectors along the channels (NHWC) or
/// the pixels (NCHW), the reduction over input channels split.
fn tile_conv(
    s: &mut Schedule,
    out: &Tensor,
    knobs: &Knobs<'_>,
    a: &ConvAxes,
) -> Result<(), ScheduleError> {
    let (tco, tow, trc) = (
        knobs.get("tile_co"),
        knobs.get("tile_ow"),
        knobs.get("tile_rc"),
    );
    let order = knobs.get("reorder_outer");
    let unroll_reduce = knobs.get("ann_reduce")[0] != 0;
    let cc = s.cache_write(out, StorageScope::Local)?;
    let ax = s.axis(out)?;
    let (owo, owi) = s.split(out, &ax[a.w], tow[1])?;
    let (coo, coi) = s.split(out, &ax[a.c], tco[1])?;
    let outer = [ax[a.h].clone(), owo, coo];
    let o: Vec<IterVar> = order.iter().map(|&i| outer[i as usize].clone()).collect();
    let (inner, ncols) = if a.vector_channels {
        ([owi, coi], tco[1])
    } else {
        ([coi, owi], tow[1])
    };
    let mut leaves = vec![ax[0].clone()];
    leaves.extend(o.iter().cloned());
    leaves.extend(inner.iter().cloned());
    s.reorder(out, &leaves)?;
    if ncols > 1 {
        s.vectorize(out, &inner[1])?;
    }
    s.compute_at(&cc, out, &o[2])?;
    let cax = s.axis(&cc)?;
    let r = s.reduce_axis(&cc)?;
    let (rco, rci) = s.split(&cc, &r[a.rc], trc[1])?;
    if unroll_reduce {
        s.unroll(&cc, &r[a.rx])?;
    }
    let (rows, cols) = if a.vector_channels {
        (&cax[a.w], &cax[a.c])
    } else {
        (&cax[a.c], &cax[a.w])
    };
    let reduce = [rco, r[a.ry].clone(), r[a.rx].clone(), rci];
    register_tile(s, &cc, &reduce, rows, cols, ncols, knobs.lanes())?;
    let fused = s.fuse(out, &ax[0], &o[0])?;
    s.parallel(out, &fused)?;
    Ok(())
}

/// The accumulator tile: the reduction outermost, then rows (unrolled), then columns
/// as register-wide vectors (unrolled over registers, vectorized within one).
fn register_tile(
    s: &mut Schedule,
    cc: &Tensor,
    reduce: &[IterVar],
    rows: &IterVar,
    cols: &IterVar,
    ncols: i64,
    lanes: i64,
) -> Result<(), ScheduleError> {
    let v = largest_pow2_divisor(ncols, lanes);
    let (co, ci) = s.split(cc, cols, v)?;
    let mut order = reduce.to_vec();
    order.extend([rows.clone(), co.clone(), ci.clone()]);
    s.reorder(cc, &order)?;
    s.unroll(cc, rows)?;
    s.unroll(cc, &co)?;
    if v > 1 {
        s.vectorize(cc, &ci)?;
    }
    Ok(())
}
