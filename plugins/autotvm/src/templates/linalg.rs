//! The CPU's templates of matrix products: `matmul.x86` (two levels of tiles, TVM's
//! dense_pack), and `dense_nopack.x86` / `batch_matmul.x86` (the reduction split into
//! vector-wide partial sums, TVM's dense_nopack).

use super::{op_err, Knobs, Template, TemplateEntry, TemplateError};
use crate::space::{ConfigSpace, SplitOptions, SplitPolicy};
use std::sync::Arc;
use tessera_ir::{DataType, StorageScope};
use tessera_te::catalog::largest_pow2_divisor;
use tessera_te::{ops, placeholder, Schedule, ScheduleError, Tensor};

/// `C[M, N] = A[M, K] · B[K, N]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Matmul {
    pub m: i64,
    pub n: i64,
    pub k: i64,
}

/// `out[M, N] = data[M, K] · weight[N, K]ᵀ` (TVM's dense).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dense {
    pub m: i64,
    pub n: i64,
    pub k: i64,
}

/// `out[B, M, N] = x[B, M, K] · y[B, N, K]ᵀ` (TVM's batch_matmul, NT).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchMatmul {
    pub b: i64,
    pub m: i64,
    pub n: i64,
    pub k: i64,
}

pub(super) const MATMUL: TemplateEntry = TemplateEntry {
    template: "matmul.x86",
    op: "matmul",
    target_kind: None,
    make: |spec, _| match spec.shape[..] {
        [m, n, k] => Some(Arc::new(Matmul { m, n, k })),
        _ => None,
    },
};

pub(super) const DENSE: TemplateEntry = TemplateEntry {
    template: "dense_nopack.x86",
    op: "dense",
    target_kind: None,
    make: |spec, _| match spec.shape[..] {
        [m, n, k] => Some(Arc::new(Dense { m, n, k })),
        _ => None,
    },
};

pub(super) const BATCH_MATMUL: TemplateEntry = TemplateEntry {
    template: "batch_matmul.x86",
    op: "batch_matmul",
    target_kind: None,
    make: |spec, _| match spec.shape[..] {
        [b, m, n, k] => Some(Arc::new(BatchMatmul { b, m, n, k })),
        _ => None,
    },
};

impl Template for Matmul {
    fn name(&self) -> &'static str {
        "matmul.x86"
    }

    fn define(&self, space: &mut ConfigSpace) -> Result<Vec<Tensor>, TemplateError> {
        let Matmul { m, n, k } = *self;
        let f32 = DataType::float32();
        let a = placeholder(&[m, k], f32, "A").map_err(op_err)?;
        let b = placeholder(&[k, n], f32, "B").map_err(op_err)?;
        let c = ops::matmul(&a, &b).map_err(op_err)?;
        // Two levels of tiles (TVM's dense_pack): a cache block of `ym·yi × xm·xi`
        // outputs accumulated in a local buffer over k-blocks of `ki`, and inside it
        // register tiles of `yi × xi`.
        space.define_split("tile_y", m, SplitOptions::factors(3).with_max_factor(32))?;
        let x = SplitOptions::factors(3)
            .with_policy(SplitPolicy::Power2)
            .with_max_factor(64);
        space.define_split("tile_x", n, x)?;
        space.define_split("tile_k", k, SplitOptions::factors(2).with_max_factor(512))?;
        space.define_reorder("reorder_inner", 2, None)?;
        Ok(vec![a, b, c])
    }

    fn apply(
        &self,
        s: &mut Schedule,
        out: &Tensor,
        knobs: &Knobs<'_>,
    ) -> Result<(), ScheduleError> {
        let (ty, tx, tk) = (
            knobs.get("tile_y"),
            knobs.get("tile_x"),
            knobs.get("tile_k"),
        );
        let order = knobs.get("reorder_inner");
        let cc = s.cache_write(out, StorageScope::Local)?;
        // the output: cache blocks, in parallel; each block copied out in vectors
        let ax = s.axis(out)?;
        let (yo, yr) = s.split(out, &ax[0], ty[1] * ty[2])?;
        let (xo, xr) = s.split(out, &ax[1], tx[1] * tx[2])?;
        s.reorder(out, &[yo.clone(), xo.clone(), yr, xr.clone()])?;
        let v = largest_pow2_divisor(tx[1] * tx[2], knobs.lanes());
        if v > 1 {
            let (_xro, xv) = s.split(out, &xr, v)?;
            s.vectorize(out, &xv)?;
        }
        let par = s.fuse(out, &yo, &xo)?;
        s.parallel(out, &par)?;
        // the block: k-blocks outside, register tiles inside
        s.compute_at(&cc, out, &par)?;
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
        let v = largest_pow2_divisor(tx[2], knobs.lanes());
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
        Ok(())
    }
}

impl Template for Dense {
    fn name(&self) -> &'static str {
        "dense_nopack.x86"
    }

    fn define(&self, space: &mut ConfigSpace) -> Result<Vec<Tensor>, TemplateError> {
        let Dense { m, n, k } = *self;
        let f32 = DataType::float32();
        let a = placeholder(&[m, k], f32, "A").map_err(op_err)?;
        let b = placeholder(&[n, k], f32, "B").map_err(op_err)?;
        let c = ops::dense(&a, &b, None).map_err(op_err)?;
        define_nopack(space, m, n, k)?;
        Ok(vec![a, b, c])
    }

    fn apply(
        &self,
        s: &mut Schedule,
        out: &Tensor,
        knobs: &Knobs<'_>,
    ) -> Result<(), ScheduleError> {
        apply_nopack(s, out, knobs)
    }
}

impl Template for BatchMatmul {
    fn name(&self) -> &'static str {
        "batch_matmul.x86"
    }

    fn define(&self, space: &mut ConfigSpace) -> Result<Vec<Tensor>, TemplateError> {
        let BatchMatmul { b, m, n, k } = *self;
        let f32 = DataType::float32();
        let x = placeholder(&[b, m, k], f32, "x").map_err(op_err)?;
        let y = placeholder(&[b, n, k], f32, "y").map_err(op_err)?;
        let c = ops::batch_matmul(&x, &y).map_err(op_err)?;
        define_nopack(space, m, n, k)?;
        Ok(vec![x, y, c])
    }

    fn apply(
        &self,
        s: &mut Schedule,
        out: &Tensor,
        knobs: &Knobs<'_>,
    ) -> Result<(), ScheduleError> {
        apply_nopack(s, out, knobs)
    }
}

/// Both operands are contiguous along k: the knobs of rows, columns and the vector-wide
/// partial sums of the reduction.
fn define_nopack(space: &mut ConfigSpace, m: i64, n: i64, k: i64) -> Result<(), TemplateError> {
    space.define_split("tile_y", m, SplitOptions::factors(2).with_max_factor(8))?;
    space.define_split("tile_x", n, SplitOptions::factors(2).with_max_factor(16))?;
    let kk = SplitOptions::factors(2)
        .with_policy(SplitPolicy::Power2)
        .with_max_factor(64);
    space.define_split("tile_k", k, kk)?;
    Ok(())
}

/// The reduction split into vector-wide partial sums (rfactor), rows × columns of them
/// per parallel tile, the reduction outside.
fn apply_nopack(s: &mut Schedule, out: &Tensor, knobs: &Knobs<'_>) -> Result<(), ScheduleError> {
    let (ty, tx, tk) = (
        knobs.get("tile_y"),
        knobs.get("tile_x"),
        knobs.get("tile_k"),
    );
    let nd = out.ndim();
    let k = s.reduce_axis(out)?;
    let (_ko, ki) = s.split(out, &k[0], tk[1])?;
    let rf = s.rfactor(out, &ki, nd)?;
    let ax = s.axis(out)?;
    let (io, jo, _ii, _ji) = s.tile(out, &ax[nd - 2], &ax[nd - 1], ty[1], tx[1])?;
    let mut par = s.fuse(out, &io, &jo)?;
    for b in ax[..nd - 2].iter().rev() {
        par = s.fuse(out, b, &par)?;
    }
    s.compute_at(&rf, out, &par)?;
    let rax = s.axis(&rf)?;
    let mut order = s.reduce_axis(&rf)?;
    order.extend([rax[nd - 2].clone(), rax[nd - 1].clone(), rax[nd].clone()]);
    s.reorder(&rf, &order)?;
    s.unroll(&rf, &rax[nd - 2])?;
    s.unroll(&rf, &rax[nd - 1])?;
    if tk[1] > 1 {
        s.vectorize(&rf, &rax[nd])?;
    }
    s.parallel(out, &par)?;
    Ok(())
}
