//! Random valid schedules, for property tests here and in the crates that compile
//! lowered programs: a random small matmul or conv2d and random schedule primitives.
//! A primitive the schedule refuses is skipped, so what remains is a valid sequence.

use crate::{ops, placeholder, Attach, IterVar, Schedule, Tensor};
use tessera_ir::{DataType, StorageScope};

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
