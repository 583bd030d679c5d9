//! Schedule templates for the CPU with real knobs: each builds the operator's tensor
//! expression, defines its configuration space, and turns a configuration into a
//! schedule and a lowered function.

use crate::space::{AnnotatePolicy, Config, ConfigSpace, SpaceError, SplitOptions, SplitPolicy};
use tessera_ir::{DataType, PrimFunc, StorageScope};
use tessera_te::ops::Conv2dAttrs;
use tessera_te::{lower, ops, placeholder, ComputeDag, IterVar, Schedule, ScheduleError, Tensor};

/// Which template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TemplateKind {
    /// `C[M, N] = A[M, K] · B[K, N]`.
    Matmul { m: i64, n: i64, k: i64 },
    /// `out[M, N] = data[M, K] · weight[N, K]ᵀ` (TVM's dense).
    Dense { m: i64, n: i64, k: i64 },
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
}

/// A tuning task of a template: the operator, its space and its identity.
#[derive(Clone, Debug)]
pub struct TemplateTask {
    /// The template's name (`matmul.x86`, `dense.x86`, `conv2d_nhwc.x86`).
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
}

fn op_err(e: impl std::fmt::Display) -> TemplateError {
    TemplateError::Op(e.to_string())
}

impl TemplateTask {
    /// Builds the task of `kind`; `lanes`: float32 lanes of the target's vectors.
    pub fn new(kind: TemplateKind, lanes: i64) -> Result<TemplateTask, TemplateError> {
        let f32 = DataType::float32();
        let mut space = ConfigSpace::new();
        let (template, args) = match &kind {
            TemplateKind::Matmul { m, n, k } | TemplateKind::Dense { m, n, k } => {
                let dense = matches!(kind, TemplateKind::Dense { .. });
                let a = placeholder(&[*m, *k], f32, "A").map_err(op_err)?;
                let b_shape = if dense { [*n, *k] } else { [*k, *n] };
                let b = placeholder(&b_shape, f32, "B").map_err(op_err)?;
                let c = if dense {
                    ops::dense(&a, &b, None)
                } else {
                    ops::matmul(&a, &b)
                }
                .map_err(op_err)?;
                space.define_split("tile_y", *m, SplitOptions::factors(2).with_max_factor(16))?;
                space.define_split(
                    "tile_x",
                    *n,
                    SplitOptions::factors(2)
                        .with_policy(SplitPolicy::Power2)
                        .with_max_factor(64),
                )?;
                space.define_split("tile_k", *k, SplitOptions::factors(2).with_max_factor(256))?;
                space.define_reorder("reorder_outer", 2, None)?;
                let name = if dense { "dense.x86" } else { "matmul.x86" };
                (name, vec![a, b, c])
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
                if attrs.groups != 1 {
                    return Err(TemplateError::Op("conv2d_nhwc.x86 takes one group".into()));
                }
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
                ("conv2d_nhwc.x86", vec![d, kern, out])
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
    pub fn schedule(&self, config: &Config) -> Result<Schedule, String> {
        let out = self.args.last().expect("an output").clone();
        let mut s = Schedule::create(&[out.clone()]).map_err(|e| e.to_string())?;
        self.apply_to(&mut s, &out, config)
            .map_err(|e| e.to_string())?;
        Ok(s)
    }

    /// The lowered function of configuration `config` (named `name`): an error is the
    /// candidate's instantiation error.
    pub fn instantiate(&self, config: &Config, name: &str) -> Result<PrimFunc, String> {
        let s = self.schedule(config)?;
        lower(&s, &self.args, name).map_err(|e| e.to_string())
    }

    /// The unscheduled function: the reference of the correctness check.
    pub fn naive(&self, name: &str) -> Result<PrimFunc, String> {
        let out = self.args.last().expect("an output").clone();
        let s = Schedule::create(&[out]).map_err(|e| e.to_string())?;
        lower(&s, &self.args, name).map_err(|e| e.to_string())
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
            TemplateKind::Matmul { .. } | TemplateKind::Dense { .. } => {
                let (ty, tx, tk) = (
                    self.split_of(config, "tile_y"),
                    self.split_of(config, "tile_x"),
                    self.split_of(config, "tile_k"),
                );
                let order = self.split_of(config, "reorder_outer");
                let cc = s.cache_write(&out, StorageScope::Local)?;
                let ax = s.axis(&out)?;
                let (yo, yi) = s.split(&out, &ax[0], ty[1])?;
                let (xo, xi) = s.split(&out, &ax[1], tx[1])?;
                let outer = [yo.clone(), xo.clone()];
                let (o0, o1) = (
                    outer[order[0] as usize].clone(),
                    outer[order[1] as usize].clone(),
                );
                s.reorder(&out, &[o0.clone(), o1.clone(), yi, xi.clone()])?;
                if tx[1] > 1 {
                    s.vectorize(&out, &xi)?;
                }
                s.compute_at(&cc, &out, &o1)?;
                let cax = s.axis(&cc)?;
                let k = s.reduce_axis(&cc)?;
                let (ko, ki) = s.split(&cc, &k[0], tk[1])?;
                self.register_tile(s, &cc, &[ko, ki], &cax[0], &cax[1], tx[1])?;
                s.parallel(&out, &o0)?;
            }
            TemplateKind::Conv2dNhwc { .. } => {
                let (tco, tow, trc) = (
                    self.split_of(config, "tile_co"),
                    self.split_of(config, "tile_ow"),
                    self.split_of(config, "tile_rc"),
                );
                let order = self.split_of(config, "reorder_outer");
                let unroll_reduce = self.split_of(config, "ann_reduce")[0] != 0;
                let cc = s.cache_write(&out, StorageScope::Local)?;
                let ax = s.axis(&out)?;
                let (owo, owi) = s.split(&out, &ax[2], tow[1])?;
                let (coo, coi) = s.split(&out, &ax[3], tco[1])?;
                let outer = [ax[1].clone(), owo.clone(), coo.clone()];
                let o: Vec<IterVar> = order.iter().map(|&i| outer[i as usize].clone()).collect();
                s.reorder(
                    &out,
                    &[
                        ax[0].clone(),
                        o[0].clone(),
                        o[1].clone(),
                        o[2].clone(),
                        owi,
                        coi.clone(),
                    ],
                )?;
                if tco[1] > 1 {
                    s.vectorize(&out, &coi)?;
                }
                s.compute_at(&cc, &out, &o[2])?;
                let cax = s.axis(&cc)?;
                let r = s.reduce_axis(&cc)?; // ry, rx, rc
                let (rco, rci) = s.split(&cc, &r[2], trc[1])?;
                if unroll_reduce {
                    s.unroll(&cc, &r[1])?;
                }
                self.register_tile(
                    s,
                    &cc,
                    &[rco, r[0].clone(), r[1].clone(), rci],
                    &cax[2],
                    &cax[3],
                    tco[1],
                )?;
                let fused = s.fuse(&out, &ax[0], &o[0])?;
                s.parallel(&out, &fused)?;
            }
        }
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
        let v = largest_pow2_divisor(ncols, self.lanes);
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

/// The largest power of two dividing `n` that is at most `lanes`.
fn largest_pow2_divisor(n: i64, lanes: i64) -> i64 {
    let mut v = 1;
    while v * 2 <= lanes && n % (v * 2) == 0 {
        v *= 2;
    }
    v
}
