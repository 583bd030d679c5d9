//! What the trees are fitted to: per-row gradients and hessians of a loss at the
//! current margins. Squared error and pairwise ranking are XGBoost's
//! `reg:squarederror` and `rank:pairwise`; the pack-sum loss of the auto-scheduler's
//! model lives with that model (`crate::packsum`).

use super::SplitMix;

/// The first and second derivative of the loss by one row's margin.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GradPair {
    pub grad: f32,
    pub hess: f32,
}

/// A loss to boost: fills `out[i]` for every row from `margins`. `rng` is the
/// training's seeded generator, for objectives that sample (pairs).
pub trait Objective {
    fn gradients(&mut self, margins: &[f32], out: &mut [GradPair], rng: &mut SplitMix);
}

/// `reg:squarederror`: `(margin − label)² / 2`.
pub struct SquaredError<'a> {
    pub labels: &'a [f32],
}

impl Objective for SquaredError<'_> {
    fn gradients(&mut self, margins: &[f32], out: &mut [GradPair], _: &mut SplitMix) {
        for ((o, &m), &y) in out.iter_mut().zip(margins).zip(self.labels) {
            *o = GradPair {
                grad: m - y,
                hess: 1.0,
            };
        }
    }
}

/// `rank:pairwise` over one group (all rows), as XGBoost before its LambdaMART rewrite:
/// each round, every row is paired with one row of a different label drawn at random,
/// and each pair adds the gradient of the logistic loss `log(1 + e^-(s_hi − s_lo))`
/// to both rows. Rows whose labels are all equal get no gradient.
pub struct PairwiseRank {
    labels: Vec<f32>,
    /// Row indices by descending label.
    order: Vec<usize>,
    /// For each position of `order`, the range of positions holding the same label.
    bucket: Vec<(usize, usize)>,
}

impl PairwiseRank {
    pub fn new(labels: &[f32]) -> Self {
        let mut order: Vec<usize> = (0..labels.len()).collect();
        order.sort_by(|&a, &b| labels[b].total_cmp(&labels[a]).then(a.cmp(&b)));
        let mut bucket = vec![(0, 0); order.len()];
        let mut start = 0;
        while start < order.len() {
            let mut end = start + 1;
            while end < order.len() && labels[order[end]] == labels[order[start]] {
                end += 1;
            }
            bucket[start..end].fill((start, end));
            start = end;
        }
        PairwiseRank {
            labels: labels.to_vec(),
            order,
            bucket,
        }
    }
}

impl Objective for PairwiseRank {
    fn gradients(&mut self, margins: &[f32], out: &mut [GradPair], rng: &mut SplitMix) {
        out.fill(GradPair::default());
        let n = self.order.len();
        for k in 0..n {
            let (b0, b1) = self.bucket[k];
            let others = n - (b1 - b0);
            if others == 0 {
                continue;
            }
            let pick = rng.below(others);
            let j = self.order[if pick < b0 { pick } else { pick + (b1 - b0) }];
            let i = self.order[k];
            let (hi, lo) = if self.labels[i] > self.labels[j] {
                (i, j)
            } else {
                (j, i)
            };
            let p = 1.0 / (1.0 + (-(margins[hi] - margins[lo])).exp());
            let g = p - 1.0;
            let h = (p * (1.0 - p)).max(1e-16);
            out[hi].grad += g;
            out[hi].hess += h;
            out[lo].grad -= g;
            out[lo].hess += h;
        }
    }
}
