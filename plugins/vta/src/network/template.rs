//! The `conv2d_packed.vta` template (TVM's `conv2d_packed.vta`), registered with the
//! template tuner ([`TEMPLATES`]): the catalog's `conv2d_packed` in VTA's blocks, TVM's
//! knobs (every divisor of each axis in blocks, one or two virtual threads each way),
//! and a configuration handed to the backend as a typed [`KernelAnnotation`]. Inside a
//! network, the fused group's epilogue must be what VTA's ALU computes
//! ([`group_epilogue`]); a build without a record takes TVM's fallback configuration,
//! since the default schedule runs on the board's CPU.

use crate::annotation::{epilogue_pragmas, KernelAnnotation, Pragma};
use crate::conv2d::{Epilogue, Knobs as VtaKnobs};
use petgraph::stable_graph::NodeIndex;
use std::sync::Arc;
use tessera_autotvm::space::{ConfigSpace, SplitOptions};
use tessera_autotvm::templates::{
    op_err, GroupFit, Knobs, Template, TemplateEntry, TemplateError, Untuned,
};
use tessera_graph::{Binary, Graph, GroupCompute, Op};
use tessera_ir::{DataType, Expr};
use tessera_te::catalog::{OpAttrs, OpSpec};
use tessera_te::{Schedule, ScheduleError, Tensor};

/// VTA's packed int8 conv2d: data `[n, ci/16, h, w, 1, 16]`, kernel
/// `[co/16, ci/16, kh, kw, 16, 16]` (sizes in channels).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conv2dPackedTemplate {
    pub n: i64,
    pub h: i64,
    pub w: i64,
    pub ci: i64,
    pub co: i64,
    pub kh: i64,
    pub kw: i64,
    pub stride: i64,
    pub pad: i64,
}

/// VTA's rows of the template table, for `tessera_autotvm::templates::register_templates`.
pub const TEMPLATES: &[TemplateEntry] = &[TemplateEntry {
    template: "conv2d_packed.vta",
    op: "conv2d_packed",
    target_kind: Some("vta"),
    make: |spec, _| match spec.shape[..] {
        [n, h, w, ci, co, kh, kw] => Some(Arc::new(Conv2dPackedTemplate {
            n,
            h,
            w,
            ci,
            co,
            kh,
            kw,
            stride: spec.attrs.stride,
            pad: spec.attrs.pad.unwrap_or(kh / 2),
        })),
        _ => None,
    },
}];

/// The catalog operator's own epilogue: `>> 8`, clipped to `[0, 127]`, no bias.
const CATALOG_EPILOGUE: Epilogue = Epilogue {
    bias: false,
    shift: 8,
    round: false,
    clip: (0, 127),
};

impl Template for Conv2dPackedTemplate {
    fn name(&self) -> &'static str {
        "conv2d_packed.vta"
    }

    fn define(&self, space: &mut ConfigSpace) -> Result<Vec<Tensor>, TemplateError> {
        let attrs = OpAttrs {
            stride: self.stride,
            pad: Some(self.pad),
            ..Default::default()
        };
        let shape = [self.n, self.h, self.w, self.ci, self.co, self.kh, self.kw];
        let spec = OpSpec::new("conv2d_packed", &shape, attrs).map_err(op_err)?;
        let (mut args, outs) = spec.tensors().map_err(op_err)?;
        let out = outs[0].clone();
        let (oh, ow) = (out.shape()[2], out.shape()[3]);
        // TVM's knobs: every divisor of each axis (in blocks), 1 or 2 threads
        for (name, extent) in [
            ("tile_b", self.n),
            ("tile_h", oh),
            ("tile_w", ow),
            ("tile_ci", self.ci / 16),
            ("tile_co", self.co / 16),
        ] {
            space.define_split(name, extent, SplitOptions::factors(2).with_no_tail())?;
        }
        space.define_knob("oc_nthread", &[1, 2])?;
        space.define_knob("h_nthread", &[1, 2])?;
        args.push(out);
        Ok(args)
    }

    fn apply(
        &self,
        s: &mut Schedule,
        out: &Tensor,
        knobs: &Knobs<'_>,
    ) -> Result<(), ScheduleError> {
        let inner = |k: &str| knobs.get(k)[1] as usize;
        let first = |k: &str| knobs.get(k)[0] as usize;
        let (stride, pad) = (self.stride as usize, self.pad as usize);
        let annotation = KernelAnnotation {
            stride: (stride, stride),
            pad: (pad, pad),
            knobs: VtaKnobs {
                tile_b: inner("tile_b"),
                tile_h: inner("tile_h"),
                tile_w: inner("tile_w"),
                tile_ci: inner("tile_ci"),
                tile_co: inner("tile_co"),
                oc_nthread: first("oc_nthread"),
                h_nthread: first("h_nthread"),
            },
        };
        annotate(s, out, &annotation.pragmas())
    }

    fn finish_alone(&self, s: &mut Schedule, out: &Tensor) -> Result<(), TemplateError> {
        Ok(annotate(s, out, &epilogue_pragmas(&CATALOG_EPILOGUE))?)
    }

    fn fit_group(
        &self,
        s: &mut Schedule,
        out: &Tensor,
        fit: &GroupFit<'_>,
    ) -> Result<(), TemplateError> {
        let e = group_epilogue(fit.graph, fit.node, fit.group).ok_or_else(|| {
            TemplateError::Group(
                "the group does more than VTA's epilogue (bias, shift, clip, cast): it runs \
                 on the board's CPU"
                    .into(),
            )
        })?;
        Ok(annotate(s, out, &epilogue_pragmas(&e))?)
    }

    fn untuned(&self) -> Untuned {
        Untuned::FallbackConfig {
            what:
                "VTA's fallback configuration (every tile 1, one thread), which can be far slower",
        }
    }
}

/// Writes the pragmas on the first axis of `t` longer than one (lowering drops a loop
/// of extent one, and its pragmas with it). A tensor of one element keeps none, and its
/// kernel is the board CPU's.
fn annotate(s: &mut Schedule, t: &Tensor, pragmas: &[Pragma]) -> Result<(), ScheduleError> {
    let ax = s.axis(t)?;
    let Some(at) = ax.iter().find(|a| a.extent().is_some_and(|e| e > 1)) else {
        return Ok(());
    };
    for (key, value) in pragmas {
        s.pragma(t, at, key, Expr::int(*value))?;
    }
    Ok(())
}

/// The epilogue of a packed conv2d's fused group as VTA computes it — an optional bias
/// (`add` of an int32 constant per channel), a right shift (rounding or not), a clip
/// and the cast to int8, and nothing else in the group (`None` otherwise: a fused
/// residual add, say, which VTA's kernel does not compute).
pub fn group_epilogue(graph: &Graph, conv: NodeIndex, gc: &GroupCompute) -> Option<Epilogue> {
    let next = |n: NodeIndex| -> Option<NodeIndex> {
        match graph.users(n)[..] {
            [u] => Some(u),
            _ => None,
        }
    };
    let mut cur = next(conv)?;
    let mut bias = false;
    if let Op::Binary(Binary::Add) = graph.node(cur).op {
        let other = graph.args(cur).into_iter().find(|&a| a != conv)?;
        let b = graph.constant_value(other)?;
        if b.dtype() != DataType::int32() || b.shape().len() != 6 {
            return None;
        }
        bias = true;
        cur = next(cur)?;
    }
    let Op::RightShift { bits, round } = graph.node(cur).op else {
        return None;
    };
    cur = next(cur)?;
    let Op::Clip { min, max } = graph.node(cur).op else {
        return None;
    };
    cur = next(cur).unwrap_or(cur);
    if !matches!(graph.node(cur).op, Op::Cast { dtype } if dtype == DataType::int(8)) {
        return None;
    }
    // the group is exactly these: data, weight and the bias are its only inputs
    if gc.params.len() != 2 + bias as usize {
        return None;
    }
    let int8 = |v: f64| ((-128.0..=127.0).contains(&v) && v.fract() == 0.0).then_some(v as i16);
    Some(Epilogue {
        bias,
        shift: u32::try_from(bits).ok()?,
        round,
        clip: (int8(min)?, int8(max)?),
    })
}
