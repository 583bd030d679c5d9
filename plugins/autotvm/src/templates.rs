//! Schedule templates for the CPU with real knobs: each builds the operator's tensor
//! expression, defines its configuration space, and turns a configuration into a
//! schedule and a lowered function.

use crate::space::{AnnotatePolicy, Config, ConfigSpace, SpaceError, SplitOptions, SplitPolicy};
use tessera_ir::{DataType, PrimFunc, StorageScope};
use tessera_te::catalog::OpSpec;
use tessera_te::ops::Conv2dAttrs;
use tessera_te::{lower, ops, placeholder, ComputeDag, IterVar, Schedule, ScheduleError, Tensor};

/// Which template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TemplateKind {
    /// `C[M, N] = A[M, K] · B[K, N]`.
    Matmul { m: i64, n: i64, k: i64 },
    /// `out[M, N] = data[M, K] · weight[N, K]ᵀ` (TVM's dense).
    Dense { m: i64, n: i64, k: i64 },
    /// `out[B, M, N] = x[B, M, K] · y[B, N, K]ᵀ` (TVM's batch_matmul, NT).
    BatchMatmul { b: i64, m: i64, n: i64, k: i64 },
    /// NHWC data `[n, h, w, ci]`, HWIO kernel `[kh, kw, ci, co]`, one group.
    Conv2dNhwc {
        n: i64,
        h: i64,
        w: i64,
        ci: i64,
        co: i64,
        kh: i64,
        kw: i64,
        attrs: Conv2dAttrs,
    },
    /// NCHW data `[n, ci, h, w]`, OIHW kernel `[co, ci, kh, kw]`, one group.
    Conv2dNchw {
        n: i64,
        h: i64,
        w: i64,
        ci: i64,
        co: i64,
        kh: i64,
        kw: i64,
        attrs: Conv2dAttrs,
    },
    /// The blocked NCHW{ib}c form: data `[n, ci/ib, h, w, ib]`, kernel
    /// `[co/ob, ci/ib, kh, kw, ib, ob]`, output `[n, co/ob, oh, ow, ob]`.
    Conv2dNchwc {
        n: i64,
        h: i64,
        w: i64,
        ci: i64,
        co: i64,
        kh: i64,
        kw: i64,
        ib: i64,
        ob: i64,
        attrs: Conv2dAttrs,
    },
    /// VTA's packed int8 conv2d (`conv2d_packed.vta`, the catalog's `conv2d_packed`):
    /// data `[n, ci/16, h, w, 1, 16]`, kernel `[co/16, ci/16, kh, kw, 16, 16]` (sizes in
    /// channels). Its configuration is carried to the VTA backend as pragmas.
    Conv2dPackedVta {
        n: i64,
        h: i64,
        w: i64,
        ci: i64,
        co: i64,
        kh: i64,
        kw: i64,
        stride: i64,
        pad: i64,
    },
    /// Depthwise NHWC: data `[n, h, w, c]`, kernel `[kh, kw, c, 1]` (multiplier 1).
    DepthwiseNhwc {
        n: i64,
        h: i64,
        w: i64,
        c: i64,
        kh: i64,
        kw: i64,
        attrs: Conv2dAttrs,
    },
}

impl TemplateKind {
    /// The template's name, as TVM's: the operator and the target key
    /// (`conv2d_nchw.x86`, `conv2d_packed.vta`).
    pub fn template(&self) -> &'static str {
        match self {
            TemplateKind::Matmul { .. } => "matmul.x86",
            TemplateKind::Dense { .. } => "dense_nopack.x86",
            TemplateKind::BatchMatmul { .. } => "batch_matmul.x86",
            TemplateKind::Conv2dNhwc { .. } => "conv2d_nhwc.x86",
            TemplateKind::Conv2dNchw { .. } => "conv2d_nchw.x86",
            TemplateKind::Conv2dNchwc { .. } => "conv2d_NCHWc.x86",
            TemplateKind::Conv2dPackedVta { .. } => "conv2d_packed.vta",
            TemplateKind::DepthwiseNhwc { .. } => "depthwise_conv2d_nhwc.x86",
        }
    }

    /// The template of a catalog operator, if one fits: `matmul`, `dense`,
    /// `batch_matmul`, `conv2d` (NHWC), `conv2d_nchw`, `conv2d_nchwc` and
    /// `depthwise_conv2d` (NHWC, multiplier 1). The spec's attributes carry over (`pad:
    /// None` is "same" padding, `kernel / 2`, as in the catalog); `conv2d_nchwc` takes
    /// the spec's `block`, else [`TemplateKind::nchwc_blocks`] for `lanes` — which
    /// differ from the catalog's default blocks (powers of two up to 16) on machines
    /// with fewer than 16 lanes: see `OpSpec::for_vector_lanes`.
    pub fn from_op(spec: &OpSpec, lanes: i64) -> Option<TemplateKind> {
        let name = spec.entry().ok()?.name;
        let a = &spec.attrs;
        let conv = |kh: i64, kw: i64| {
            Conv2dAttrs::new(
                (a.stride, a.stride),
                (a.pad.unwrap_or(kh / 2), a.pad.unwrap_or(kw / 2)),
                (a.dilation, a.dilation),
            )
        };
        Some(match (name, &spec.shape[..]) {
            ("matmul", &[m, n, k]) => TemplateKind::Matmul { m, n, k },
            ("dense", &[m, n, k]) => TemplateKind::Dense { m, n, k },
            ("batch_matmul", &[b, m, n, k]) => TemplateKind::BatchMatmul { b, m, n, k },
            ("conv2d", &[n, h, w, ci, co, kh, kw]) => TemplateKind::Conv2dNhwc {
                n,
                h,
                w,
                ci,
                co,
                kh,
                kw,
                attrs: conv(kh, kw),
            },
            ("conv2d_nchw", &[n, h, w, ci, co, kh, kw]) => TemplateKind::Conv2dNchw {
                n,
                h,
                w,
                ci,
                co,
                kh,
                kw,
                attrs: conv(kh, kw),
            },
            ("conv2d_nchwc", &[n, h, w, ci, co, kh, kw]) => {
                let (ib, ob) = a
                    .block
                    .unwrap_or_else(|| TemplateKind::nchwc_blocks(ci, co, lanes));
                TemplateKind::Conv2dNchwc {
                    n,
                    h,
                    w,
                    ci,
                    co,
                    kh,
                    kw,
                    ib,
                    ob,
                    attrs: conv(kh, kw),
                }
            }
            ("conv2d_packed", &[n, h, w, ci, co, kh, kw]) => TemplateKind::Conv2dPackedVta {
                n,
                h,
                w,
                ci,
                co,
                kh,
                kw,
                stride: a.stride,
                pad: a.pad.unwrap_or(kh / 2),
            },
            ("depthwise_conv2d", &[n, h, w, c, kh, kw]) => TemplateKind::DepthwiseNhwc {
                n,
                h,
                w,
                c,
                kh,
                kw,
                attrs: conv(kh, kw),
            },
            _ => return None,
        })
    }

    /// The NCHW{ib}c blocking of a conv2d for vectors of `lanes` float32: `ob` output
    /// channels per block (the largest power of two up to `lanes` dividing `co`), `ib`
    /// likewise for the input channels.
    pub fn nchwc_blocks(ci: i64, co: i64, lanes: i64) -> (i64, i64) {
        (
            tessera_te::catalog::largest_pow2_divisor(ci, lanes),
            tessera_te::catalog::largest_pow2_divisor(co, lanes),
        )
    }
}

/// A tuning task of a template: the operator, its space and its identity.
#[derive(Clone, Debug)]
pub struct TemplateTask {
    /// The template's name (`matmul.x86`, `dense_nopack.x86`, `batch_matmul.x86`,
    /// `conv2d_nhwc.x86`, `conv2d_nchw.x86`, `conv2d_NCHWc.x86`,
    /// `depthwise_conv2d_nhwc.x86`).
    pub template: String,
    pub kind: TemplateKind,
    /// The kernel's arguments (inputs, then the output).
    pub args: Vec<Tensor>,
    pub space: ConfigSpace,
    /// `template:` + the compute DAG's workload key.
    pub workload_key: String,
    pub flop: f64,
    /// float32 lanes of a vector register.
    pub lanes: i64,
}

/// Template errors.
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    #[error("{0}")]
    Space(#[from] SpaceError),
    #[error("{0}")]
    Op(String),
    /// A configuration's schedule refused by the schedule primitives.
    #[error("{0}")]
    Schedule(#[from] tessera_te::ScheduleError),
    /// A scheduled program that does not lower.
    #[error("{0}")]
    Lower(#[from] tessera_te::LowerError),
}

fn op_err(e: impl std::fmt::Display) -> TemplateError {
    TemplateError::Op(e.to_string())
}

impl TemplateTask {
    /// Builds the task of `kind`; `lanes`: float32 lanes of the target's vectors.
    pub fn new(kind: TemplateKind, lanes: i64) -> Result<TemplateTask, TemplateError> {
        let f32 = DataType::float32();
        let mut space = ConfigSpace::new();
        let template = kind.template();
        let args = match &kind {
            TemplateKind::Matmul { m, n, k } => {
                let a = placeholder(&[*m, *k], f32, "A").map_err(op_err)?;
                let b = placeholder(&[*k, *n], f32, "B").map_err(op_err)?;
                let c = ops::matmul(&a, &b).map_err(op_err)?;
                // Two levels of tiles (TVM's dense_pack): a cache block of
                // `ym·yi × xm·xi` outputs accumulated in a local buffer over k-blocks of
                // `ki`, and inside it register tiles of `yi × xi`.
                space.define_split("tile_y", *m, SplitOptions::factors(3).with_max_factor(32))?;
                space.define_split(
                    "tile_x",
                    *n,
                    SplitOptions::factors(3)
                        .with_policy(SplitPolicy::Power2)
                        .with_max_factor(64),
                )?;
                space.define_split("tile_k", *k, SplitOptions::factors(2).with_max_factor(512))?;
                space.define_reorder("reorder_inner", 2, None)?;
                vec![a, b, c]
            }
            TemplateKind::Dense { m, n, k } | TemplateKind::BatchMatmul { m, n, k, .. } => {
                // Both operands are contiguous along k: the reduction is split into
                // vector-wide partial sums (rfactor), TVM's dense_nopack.
                let (a, b, c) = match &kind {
                    TemplateKind::BatchMatmul { b: batch, .. } => {
                        let x = placeholder(&[*batch, *m, *k], f32, "x").map_err(op_err)?;
                        let y = placeholder(&[*batch, *n, *k], f32, "y").map_err(op_err)?;
                        let c = ops::batch_matmul(&x, &y).map_err(op_err)?;
                        (x, y, c)
                    }
                    _ => {
                        let a = placeholder(&[*m, *k], f32, "A").map_err(op_err)?;
                        let b = placeholder(&[*n, *k], f32, "B").map_err(op_err)?;
                        let c = ops::dense(&a, &b, None).map_err(op_err)?;
                        (a, b, c)
                    }
                };
                space.define_split("tile_y", *m, SplitOptions::factors(2).with_max_factor(8))?;
                space.define_split("tile_x", *n, SplitOptions::factors(2).with_max_factor(16))?;
                space.define_split(
                    "tile_k",
                    *k,
                    SplitOptions::factors(2)
                        .with_policy(SplitPolicy::Power2)
                        .with_max_factor(64),
                )?;
                vec![a, b, c]
            }
            TemplateKind::Conv2dNhwc {
                n,
                h,
                w,
                ci,
                co,
                kh,
                kw,
                attrs,
            } => {
                one_group(template, attrs)?;
                let d = placeholder(&[*n, *h, *w, *ci], f32, "data").map_err(op_err)?;
                let kern = placeholder(&[*kh, *kw, *ci, *co], f32, "kernel").map_err(op_err)?;
                let out = ops::conv2d_nhwc_with(&d, &kern, attrs).map_err(op_err)?;
                let ow = out.shape()[2];
                space.define_split(
                    "tile_co",
                    *co,
                    SplitOptions::factors(2)
                        .with_policy(SplitPolicy::Power2)
                        .with_max_factor(64),
                )?;
                space.define_split("tile_ow", ow, SplitOptions::factors(2).with_max_factor(16))?;
                space.define_split("tile_rc", *ci, SplitOptions::factors(2).with_max_factor(64))?;
                space.define_reorder("reorder_outer", 3, None)?;
                space.define_annotate("ann_reduce", 1, AnnotatePolicy::TryUnroll)?;
                vec![d, kern, out]
            }
            TemplateKind::Conv2dNchw {
                n,
                h,
                w,
                ci,
                co,
                kh,
                kw,
                attrs,
            } => {
                one_group(template, attrs)?;
                let d = placeholder(&[*n, *ci, *h, *w], f32, "data").map_err(op_err)?;
                let kern = placeholder(&[*co, *ci, *kh, *kw], f32, "kernel").map_err(op_err)?;
                let out = ops::conv2d_nchw(&d, &kern, attrs).map_err(op_err)?;
                let ow = out.shape()[3];
                // rows of the register tile: output channels; columns (vectors): pixels
                space.define_split("tile_co", *co, SplitOptions::factors(2).with_max_factor(8))?;
                space.define_split("tile_ow", ow, SplitOptions::factors(2).with_max_factor(32))?;
                space.define_split("tile_rc", *ci, SplitOptions::factors(2).with_max_factor(64))?;
                space.define_reorder("reorder_outer", 3, None)?;
                space.define_annotate("ann_reduce", 1, AnnotatePolicy::TryUnroll)?;
                vec![d, kern, out]
            }
            TemplateKind::Conv2dNchwc {
                n,
                h,
                w,
                ci,
                co,
                kh,
                kw,
                ib,
                ob,
                attrs,
            } => {
                one_group(template, attrs)?;
                if *ib <= 0 || *ob <= 0 || ci % ib != 0 || co % ob != 0 {
                    return Err(TemplateError::Op(format!(
                        "{template}: blocks {ib}i/{ob}o must divide the channels {ci}/{co}"
                    )));
                }
                let d = placeholder(&[*n, ci / ib, *h, *w, *ib], f32, "data").map_err(op_err)?;
                let kern = placeholder(&[co / ob, ci / ib, *kh, *kw, *ib, *ob], f32, "kernel")
                    .map_err(op_err)?;
                let out = ops::conv2d_nchwc(&d, &kern, attrs).map_err(op_err)?;
                let ow = out.shape()[3];
                // TVM's knobs once the blocking is fixed: reg_n (output pixels per
                // register tile) and unroll_kw, plus where the input block is reduced.
                space.define_split("tile_ow", ow, SplitOptions::factors(2).with_max_factor(16))?;
                space.define_knob("unroll_kw", &[0, 1])?;
                space.define_knob("reduce_order", &[0, 1])?;
                vec![d, kern, out]
            }
            TemplateKind::Conv2dPackedVta {
                n,
                h,
                w,
                ci,
                co,
                kh,
                kw,
                stride,
                pad,
            } => {
                let attrs = tessera_te::catalog::OpAttrs {
                    stride: *stride,
                    pad: Some(*pad),
                    ..Default::default()
                };
                let spec = OpSpec::new("conv2d_packed", &[*n, *h, *w, *ci, *co, *kh, *kw], attrs)
                    .map_err(op_err)?;
                let (mut args, outs) = spec.tensors().map_err(op_err)?;
                let out = outs[0].clone();
                let (oh, ow) = (out.shape()[2], out.shape()[3]);
                // TVM's knobs: every divisor of each axis (in blocks), 1 or 2 threads
                for (name, extent) in [
                    ("tile_b", *n),
                    ("tile_h", oh),
                    ("tile_w", ow),
                    ("tile_ci", ci / 16),
                    ("tile_co", co / 16),
                ] {
                    space.define_split(name, extent, SplitOptions::factors(2).with_no_tail())?;
                }
                space.define_knob("oc_nthread", &[1, 2])?;
                space.define_knob("h_nthread", &[1, 2])?;
                args.push(out);
                args
            }
            TemplateKind::DepthwiseNhwc {
                n,
                h,
                w,
                c,
                kh,
                kw,
                attrs,
            } => {
                let d = placeholder(&[*n, *h, *w, *c], f32, "data").map_err(op_err)?;
                let kern = placeholder(&[*kh, *kw, *c, 1], f32, "kernel").map_err(op_err)?;
                let out = ops::depthwise_conv2d_nhwc(&d, &kern, attrs).map_err(op_err)?;
                let ow = out.shape()[2];
                space.define_split(
                    "tile_c",
                    *c,
                    SplitOptions::factors(2)
                        .with_policy(SplitPolicy::Power2)
                        .with_max_factor(64),
                )?;
                space.define_split("tile_ow", ow, SplitOptions::factors(2).with_max_factor(16))?;
                space.define_reorder("reorder_outer", 2, None)?;
                space.define_annotate("ann_reduce", 1, AnnotatePolicy::TryUnroll)?;
                vec![d, kern, out]
            }
        };
        let out = args.last().expect("an output").clone();
        let dag = ComputeDag::new(&[out]).map_err(op_err)?;
        Ok(TemplateTask {
            template: template.to_string(),
            workload_key: format!("{template}:{}", dag.workload_key()),
            flop: dag.flop_count(),
            kind,
            args,
            space,
            lanes: lanes.max(1),
        })
    }

    /// The schedule of configuration `config`.
    pub fn schedule(&self, config: &Config) -> Result<Schedule, TemplateError> {
        let out = self.args.last().expect("an output").clone();
        let mut s = Schedule::create(&[out.clone()])?;
        self.apply_to(&mut s, &out, config)?;
        if let TemplateKind::Conv2dPackedVta { .. } = self.kind {
            // the catalog operator's own epilogue: >> 8, clip to [0, 127], no bias
            let e = [
                ("bias", 0),
                ("shift", 8),
                ("round", 0),
                ("clip_lo", 0),
                ("clip_hi", 127),
            ];
            vta_pragmas(&mut s, &out, &e)?;
        }
        Ok(s)
    }

    /// The lowered function of configuration `config` (named `name`): an error is the
    /// candidate's instantiation error.
    pub fn instantiate(&self, config: &Config, name: &str) -> Result<PrimFunc, TemplateError> {
        let s = self.schedule(config)?;
        Ok(lower(&s, &self.args, name)?)
    }

    /// The unscheduled function: the reference of the correctness check.
    pub fn naive(&self, name: &str) -> Result<PrimFunc, TemplateError> {
        let out = self.args.last().expect("an output").clone();
        let s = Schedule::create(&[out])?;
        Ok(lower(&s, &self.args, name)?)
    }

    fn split_of(&self, config: &Config, knob: &str) -> Vec<i64> {
        let i = self
            .space
            .knobs
            .iter()
            .position(|k| k.name() == knob)
            .expect("a knob of this template");
        self.space.knobs[i].value_numbers(config.choices[i])
    }

    /// Schedules the stage `out` of `s` (this template's operator, possibly inside a
    /// fused function whose other stages are scheduled apart) with `config`.
    pub fn apply_to(
        &self,
        s: &mut Schedule,
        out: &Tensor,
        config: &Config,
    ) -> Result<(), ScheduleError> {
        let out = out.clone();
        match &self.kind {
            TemplateKind::Matmul { .. } => {
                let (ty, tx, tk) = (
                    self.split_of(config, "tile_y"),
                    self.split_of(config, "tile_x"),
                    self.split_of(config, "tile_k"),
                );
                let order = self.split_of(config, "reorder_inner");
                let cc = s.cache_write(&out, StorageScope::Local)?;
                // the output: cache blocks, in parallel; each block copied out in vectors
                let ax = s.axis(&out)?;
                let (yo, yr) = s.split(&out, &ax[0], ty[1] * ty[2])?;
                let (xo, xr) = s.split(&out, &ax[1], tx[1] * tx[2])?;
                s.reorder(&out, &[yo.clone(), xo.clone(), yr, xr.clone()])?;
                let v = tessera_te::catalog::largest_pow2_divisor(tx[1] * tx[2], self.lanes);
                if v > 1 {
                    let (_xro, xv) = s.split(&out, &xr, v)?;
                    s.vectorize(&out, &xv)?;
                }
                let par = s.fuse(&out, &yo, &xo)?;
                s.parallel(&out, &par)?;
                // the block: k-blocks outside, register tiles inside
                s.compute_at(&cc, &out, &par)?;
                let cax = s.axis(&cc)?;
                let k = s.reduce_axis(&cc)?;
                let (cym, cyi) = s.split(&cc, &cax[0], ty[2])?;
                let (cxm, cxi) = s.split(&cc, &cax[1], tx[2])?;
                let (ko, ki) = s.split(&cc, &k[0], tk[1])?;
                let mid = [cym, cxm];
                let (m0, m1) = (
                    mid[order[0] as usize].clone(),
                    mid[order[1] as usize].clone(),
                );
                let v = tessera_te::catalog::largest_pow2_divisor(tx[2], self.lanes);
                let (cxo, cxv) = s.split(&cc, &cxi, v)?;
                s.reorder(
                    &cc,
                    &[ko, m0, m1, ki, cyi.clone(), cxo.clone(), cxv.clone()],
                )?;
                s.unroll(&cc, &cyi)?;
                s.unroll(&cc, &cxo)?;
                if v > 1 {
                    s.vectorize(&cc, &cxv)?;
                }
            }
            TemplateKind::Dense { .. } | TemplateKind::BatchMatmul { .. } => {
                let (ty, tx, tk) = (
                    self.split_of(config, "tile_y"),
                    self.split_of(config, "tile_x"),
                    self.split_of(config, "tile_k"),
                );
                let nd = out.ndim();
                let k = s.reduce_axis(&out)?;
                let (_ko, ki) = s.split(&out, &k[0], tk[1])?;
                let rf = s.rfactor(&out, &ki, nd)?;
                let ax = s.axis(&out)?;
                let (io, jo, _ii, _ji) = s.tile(&out, &ax[nd - 2], &ax[nd - 1], ty[1], tx[1])?;
                let mut par = s.fuse(&out, &io, &jo)?;
                for b in ax[..nd - 2].iter().rev() {
                    par = s.fuse(&out, b, &par)?;
                }
                s.compute_at(&rf, &out, &par)?;
                // partial sums: rows × columns of vectors along k, the reduction outside
                let rax = s.axis(&rf)?;
                let mut order = s.reduce_axis(&rf)?;
                order.extend([rax[nd - 2].clone(), rax[nd - 1].clone(), rax[nd].clone()]);
                s.reorder(&rf, &order)?;
                s.unroll(&rf, &rax[nd - 2])?;
                s.unroll(&rf, &rax[nd - 1])?;
                if tk[1] > 1 {
                    s.vectorize(&rf, &rax[nd])?;
                }
                s.parallel(&out, &par)?;
            }
            TemplateKind::Conv2dNhwc { .. } => {
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
                self.tile_conv(s, &out, config, &axes)?;
            }
            TemplateKind::Conv2dNchw { .. } => {
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
                self.tile_conv(s, &out, config, &axes)?;
            }
            TemplateKind::Conv2dNchwc { ob, .. } => {
                let tow = self.split_of(config, "tile_ow");
                let unroll_kw = self.split_of(config, "unroll_kw")[0] != 0;
                let block_inner = self.split_of(config, "reduce_order")[0] != 0;
                let cc = s.cache_write(&out, StorageScope::Local)?;
                let ax = s.axis(&out)?; // n, oc_chunk, oh, ow, oc_block
                let (owo, owi) = s.split(&out, &ax[3], tow[1])?;
                s.reorder(
                    &out,
                    &[
                        ax[0].clone(),
                        ax[1].clone(),
                        ax[2].clone(),
                        owo.clone(),
                        owi,
                        ax[4].clone(),
                    ],
                )?;
                if *ob > 1 {
                    s.vectorize(&out, &ax[4])?;
                }
                s.compute_at(&cc, &out, &owo)?;
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
                self.register_tile(s, &cc, &reduce, &cax[3], &cax[4], *ob)?;
                let f = s.fuse(&out, &ax[0], &ax[1])?;
                let f = s.fuse(&out, &f, &ax[2])?;
                s.parallel(&out, &f)?;
            }
            TemplateKind::Conv2dPackedVta { stride, pad, .. } => {
                let mut p: Vec<(&str, i64)> = vec![
                    ("conv2d", 1),
                    ("stride_h", *stride),
                    ("stride_w", *stride),
                    ("pad_h", *pad),
                    ("pad_w", *pad),
                ];
                for knob in ["tile_b", "tile_h", "tile_w", "tile_ci", "tile_co"] {
                    p.push((knob, self.split_of(config, knob)[1]));
                }
                for knob in ["oc_nthread", "h_nthread"] {
                    p.push((knob, self.split_of(config, knob)[0]));
                }
                vta_pragmas(s, &out, &p)?;
            }
            TemplateKind::DepthwiseNhwc { .. } => {
                let (tc, tow) = (
                    self.split_of(config, "tile_c"),
                    self.split_of(config, "tile_ow"),
                );
                let order = self.split_of(config, "reorder_outer");
                let unroll_reduce = self.split_of(config, "ann_reduce")[0] != 0;
                let cc = s.cache_write(&out, StorageScope::Local)?;
                let ax = s.axis(&out)?; // b, i, j, c
                let (jo, ji) = s.split(&out, &ax[2], tow[1])?;
                let (co, ci) = s.split(&out, &ax[3], tc[1])?;
                let outer = [jo.clone(), co.clone()];
                let o: Vec<IterVar> = order.iter().map(|&i| outer[i as usize].clone()).collect();
                s.reorder(
                    &out,
                    &[
                        ax[0].clone(),
                        ax[1].clone(),
                        o[0].clone(),
                        o[1].clone(),
                        ji,
                        ci.clone(),
                    ],
                )?;
                if tc[1] > 1 {
                    s.vectorize(&out, &ci)?;
                }
                s.compute_at(&cc, &out, &o[1])?;
                let cax = s.axis(&cc)?;
                let r = s.reduce_axis(&cc)?; // di, dj
                if unroll_reduce {
                    s.unroll(&cc, &r[1])?;
                }
                self.register_tile(s, &cc, &r, &cax[2], &cax[3], tc[1])?;
                let fused = s.fuse(&out, &ax[0], &ax[1])?;
                s.parallel(&out, &fused)?;
            }
        }
        Ok(())
    }

    /// The conv2d templates of both layouts: pixels and output channels tiled, the three
    /// outer loops (rows, pixel tiles, channel tiles) in the configured order, a local
    /// accumulator tile at the innermost of them, vectors along the channels (NHWC) or
    /// the pixels (NCHW), the reduction over input channels split.
    fn tile_conv(
        &self,
        s: &mut Schedule,
        out: &Tensor,
        config: &Config,
        a: &ConvAxes,
    ) -> Result<(), ScheduleError> {
        let (tco, tow, trc) = (
            self.split_of(config, "tile_co"),
            self.split_of(config, "tile_ow"),
            self.split_of(config, "tile_rc"),
        );
        let order = self.split_of(config, "reorder_outer");
        let unroll_reduce = self.split_of(config, "ann_reduce")[0] != 0;
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
        self.register_tile(
            s,
            &cc,
            &[rco, r[a.ry].clone(), r[a.rx].clone(), rci],
            rows,
            cols,
            ncols,
        )?;
        let fused = s.fuse(out, &ax[0], &o[0])?;
        s.parallel(out, &fused)?;
        Ok(())
    }

    /// The accumulator tile: the reduction outermost, then rows (unrolled), then columns
    /// as register-wide vectors (unrolled over registers, vectorized within one).
    fn register_tile(
        &self,
        s: &mut Schedule,
        cc: &Tensor,
        reduce: &[IterVar],
        rows: &IterVar,
        cols: &IterVar,
        ncols: i64,
    ) -> Result<(), ScheduleError> {
        let v = tessera_te::catalog::largest_pow2_divisor(ncols, self.lanes);
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

/// Templates of one-group convolutions refuse grouped ones.
fn one_group(template: &str, attrs: &Conv2dAttrs) -> Result<(), TemplateError> {
    if attrs.groups != 1 {
        return Err(TemplateError::Op(format!("{template} takes one group")));
    }
    Ok(())
}

/// Writes `pragma_vta_<key>` = value on the first axis of `t` longer than one (lowering
/// drops a loop of extent one, and its pragmas with it): the VTA backend's protocol
/// (`tessera_vta::backend`), read back from the lowered function. A tensor of one
/// element keeps no pragma, and its kernel is the board CPU's.
pub fn vta_pragmas(
    s: &mut Schedule,
    t: &Tensor,
    pragmas: &[(&str, i64)],
) -> Result<(), ScheduleError> {
    let ax = s.axis(t)?;
    let Some(at) = ax.iter().find(|a| a.extent().is_some_and(|e| e > 1)) else {
        return Ok(());
    };
    for (key, value) in pragmas {
        s.pragma(t, at, &format!("vta_{key}"), tessera_ir::Expr::int(*value))?;
    }
    Ok(())
}
