//! Random valid schedules, for property tests here and in the crates that compile
//! lowered programs: a random small matmul or conv2d and random schedule primitives.
//! A primitive the schedule refuses is skipped, so what remains is a valid sequence.

use crate::{ops, placeholder, Attach, ComputeDag, IterVar, Schedule, Tensor};
use tessera_ir::{DataType, StorageScope, ThreadAxis};

/// A small deterministic generator (xorshift64), so a seed reproduces a schedule.
pub struct Rng(pub u64);
impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next_u64() % (hi - lo + 1) as u64) as i64
    }
}

/// A random problem (from `seed`) scheduled by up to `steps` random primitives:
/// `(schedule, outputs, args, names of the primitives applied)`.
pub fn random_schedule(
    seed: u64,
    steps: usize,
) -> (Schedule, Vec<Tensor>, Vec<Tensor>, Vec<&'static str>) {
    let mut rng = Rng(seed | 1);
    let (outs, args) = problem(&mut rng);
    let mut s = Schedule::create(&outs).expect("a fresh schedule of a valid DAG");
    let applied = (0..steps)
        .filter_map(|_| random_step(&mut s, &mut rng))
        .collect();
    (s, outs, args, applied)
}

/// A small random matmul or conv2d: `(outputs, args)`; the inputs come first in `args`.
pub fn problem(rng: &mut Rng) -> (Vec<Tensor>, Vec<Tensor>) {
    let f = DataType::float32();
    if rng.below(2) == 0 {
        let (m, n, k) = (rng.range(1, 10), rng.range(1, 10), rng.range(1, 10));
        let a = placeholder(&[m, k], f, "A").unwrap();
        let b = placeholder(&[k, n], f, "B").unwrap();
        let c = ops::matmul(&a, &b).unwrap();
        (vec![c.clone()], vec![a, b, c])
    } else {
        loop {
            let (n, h, w, ci, co) = (
                rng.range(1, 2),
                rng.range(3, 7),
                rng.range(3, 7),
                rng.range(1, 3),
                rng.range(1, 4),
            );
            let (kh, kw) = (rng.range(1, 3), rng.range(1, 3));
            let stride = (rng.range(1, 2), rng.range(1, 2));
            let pad = (rng.range(0, 1), rng.range(0, 1));
            let dil = (rng.range(1, 2), rng.range(1, 2));
            let d = placeholder(&[n, h, w, ci], f, "data").unwrap();
            let k = placeholder(&[kh, kw, ci, co], f, "kernel").unwrap();
            if let Ok(c) = ops::conv2d_nhwc(&d, &k, stride, pad, dil) {
                return (vec![c.clone()], vec![d, k, c]);
            }
        }
    }
}

/// The stages that are computed (not placeholders, not inlined).
pub fn computed_stages(s: &Schedule) -> Vec<Tensor> {
    s.stages
        .iter()
        .filter(|st| !st.is_placeholder() && st.attach != Attach::Inline)
        .map(|st| st.op.clone())
        .collect()
}

/// A random element of `v`.
pub fn pick<T: Clone>(rng: &mut Rng, v: &[T]) -> Option<T> {
    if v.is_empty() {
        None
    } else {
        Some(v[rng.below(v.len())].clone())
    }
}

/// Applies one random primitive; an invalid choice is refused by the schedule (and
/// must leave it unchanged), so the sequence that remains is a valid one.
pub fn random_step(s: &mut Schedule, rng: &mut Rng) -> Option<&'static str> {
    let stages = computed_stages(s);
    let t = pick(rng, &stages)?;
    let leaves: Vec<IterVar> = s.leaf_axes(&t).ok()?;
    let leaf = pick(rng, &leaves)?;
    let r = match rng.below(10) {
        0 => {
            let v = rng.range(1, 5);
            if rng.below(3) == 0 {
                s.split_nparts(&t, &leaf, v).map(|_| "split_nparts")
            } else {
                s.split(&t, &leaf, v).map(|_| "split")
            }
        }
        1 => {
            let mut order = leaves.clone();
            for i in (1..order.len()).rev() {
                order.swap(i, rng.below(i + 1));
            }
            order.truncate(rng.range(2, order.len().max(2) as i64) as usize);
            s.reorder(&t, &order).map(|_| "reorder")
        }
        2 => {
            let i = rng.below(leaves.len());
            match leaves.get(i + 1) {
                Some(next) => s.fuse(&t, &leaves[i], next).map(|_| "fuse"),
                None => return None,
            }
        }
        3 => s.unroll(&t, &leaf).map(|_| "unroll"),
        4 => s.vectorize(&t, &leaf).map(|_| "vectorize"),
        5 | 9 => {
            // Try each stage as the target: only the tensor's consumer is accepted.
            let mut r = Err(crate::ScheduleError::UnknownStage(String::new()));
            for target in &stages {
                let tleaf = pick(rng, &s.leaf_axes(target).ok()?)?;
                r = s.compute_at(&t, target, &tleaf).map(|_| "compute_at");
                if r.is_ok() {
                    break;
                }
            }
            r
        }
        6 => s
            .cache_write(&t, StorageScope::Local)
            .map(|_| "cache_write"),
        7 => s.compute_inline(&t).map(|_| "compute_inline"),
        _ => s.parallel(&t, &leaf).map(|_| "parallel"),
    };
    r.ok()
}

/// A scheduled example program: its schedule, outputs and function arguments (inputs
/// first).
pub struct Example {
    pub schedule: Schedule,
    pub outputs: Vec<Tensor>,
    pub args: Vec<Tensor>,
    pub n_inputs: usize,
}

/// The foundation's matmul example: 64×64×64, tiled 8×8, reduction split by 4, reordered,
/// inner columns vectorized, inner reduction unrolled, outer rows parallel.
pub fn matmul_tiled() -> Result<Example, crate::ScheduleError> {
    let a = placeholder(&[64, 64], DataType::float32(), "A")?;
    let b = placeholder(&[64, 64], DataType::float32(), "B")?;
    let c = ops::matmul(&a, &b)?;
    let mut s = Schedule::create(&[c.clone()])?;
    let ax = s.axis(&c)?;
    let k = s.reduce_axis(&c)?;
    let (io, jo, ii, ji) = s.tile(&c, &ax[0], &ax[1], 8, 8)?;
    let (ko, ki) = s.split(&c, &k[0], 4)?;
    s.reorder(
        &c,
        &[
            io.clone(),
            jo.clone(),
            ko.clone(),
            ii.clone(),
            ki.clone(),
            ji.clone(),
        ],
    )?;
    s.vectorize(&c, &ji)?;
    s.unroll(&c, &ki)?;
    s.parallel(&c, &io)?;
    let args = vec![a, b, c.clone()];
    Ok(Example {
        schedule: s,
        outputs: vec![c],
        n_inputs: args.len() - 1,
        args,
    })
}

/// The foundation's conv2d example: NHWC 1×8×8×4 ⊛ 3×3×4×8, pad 1, a `local` cache_write
/// computed at the output's channel tile, vectorized, padding inlined.
pub fn conv2d_cache_write() -> Result<Example, crate::ScheduleError> {
    let data = placeholder(&[1, 8, 8, 4], DataType::float32(), "data")?;
    let kernel = placeholder(&[3, 3, 4, 8], DataType::float32(), "kernel")?;
    let conv = ops::conv2d_nhwc(&data, &kernel, (1, 1), (1, 1), (1, 1))?;
    let dag = ComputeDag::new(&[conv.clone()])?;
    let pad = dag
        .ops
        .iter()
        .find(|t| t.name() == "pad_temp")
        .ok_or_else(|| crate::ScheduleError::UnknownStage("pad_temp".into()))?
        .clone();
    let mut s = Schedule::create(&[conv.clone()])?;
    let local = s.cache_write(&conv, StorageScope::Local)?;
    let ax = s.axis(&conv)?;
    let (yo, xo, yi, xi) = s.tile(&conv, &ax[1], &ax[2], 4, 4)?;
    let (fo, fi) = s.split(&conv, &ax[3], 4)?;
    s.reorder(
        &conv,
        &[yo.clone(), xo.clone(), fo.clone(), yi, xi, fi.clone()],
    )?;
    s.vectorize(&conv, &fi)?;
    s.parallel(&conv, &yo)?;
    s.compute_at(&local, &conv, &fo)?;
    let lax = s.axis(&local)?;
    s.vectorize(&local, &lax[3])?;
    s.compute_inline(&pad)?;
    let args = vec![data, kernel, conv.clone()];
    Ok(Example {
        schedule: s,
        outputs: vec![conv],
        n_inputs: args.len() - 1,
        args,
    })
}

/// The foundation's GPU-style matmul: 32×32×32, block/thread binding, both operands
/// staged in shared memory at the reduction's outer loop and fetched by all threads.
pub fn gpu_matmul_shared() -> Result<Example, crate::ScheduleError> {
    let a = placeholder(&[32, 32], DataType::float32(), "A")?;
    let b = placeholder(&[32, 32], DataType::float32(), "B")?;
    let c = ops::matmul(&a, &b)?;
    let mut s = Schedule::create(&[c.clone()])?;
    let aa = s.cache_read(&a, StorageScope::Shared, &[c.clone()])?;
    let bb = s.cache_read(&b, StorageScope::Shared, &[c.clone()])?;
    let ax = s.axis(&c)?;
    let k = s.reduce_axis(&c)?;
    let (by, bx, ty, tx) = s.tile(&c, &ax[0], &ax[1], 8, 8)?;
    let (ko, ki) = s.split(&c, &k[0], 8)?;
    s.reorder(
        &c,
        &[
            by.clone(),
            bx.clone(),
            ty.clone(),
            tx.clone(),
            ko.clone(),
            ki,
        ],
    )?;
    s.bind(&c, &by, ThreadAxis::BlockIdxY)?;
    s.bind(&c, &bx, ThreadAxis::BlockIdxX)?;
    s.bind(&c, &ty, ThreadAxis::ThreadIdxY)?;
    s.bind(&c, &tx, ThreadAxis::ThreadIdxX)?;
    for cache in [&aa, &bb] {
        s.compute_at(cache, &c, &ko)?;
        let cax = s.axis(cache)?;
        let fused = s.fuse(cache, &cax[0], &cax[1])?;
        let (fo, fi) = s.split(cache, &fused, 8)?;
        s.bind(cache, &fo, ThreadAxis::ThreadIdxY)?;
        s.bind(cache, &fi, ThreadAxis::ThreadIdxX)?;
    }
    let args = vec![a, b, c.clone()];
    Ok(Example {
        schedule: s,
        outputs: vec![c],
        n_inputs: args.len() - 1,
        args,
    })
}
