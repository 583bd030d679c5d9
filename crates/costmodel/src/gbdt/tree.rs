//! One regression tree, and growing it by XGBoost's exact greedy search (its
//! `ColMaker`): level by level, one pass per feature over the rows sorted by that
//! feature's value, each pass scoring every threshold of every open node at once.

use super::{BoostParams, GradPair, Matrix};
use serde::{Deserialize, Serialize};

/// A node: a leaf's value (eta already applied), or a split where rows with
/// `value < threshold` go left and missing values go to the default side.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Node {
    Leaf {
        leaf: f32,
    },
    Split {
        feature: u32,
        threshold: f32,
        default_left: bool,
        left: u32,
        right: u32,
    },
}

/// A tree; node 0 is the root.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tree {
    pub nodes: Vec<Node>,
}

impl Tree {
    /// The leaf value `row` ends in.
    pub fn predict(&self, row: &[f32]) -> f32 {
        let mut at = 0usize;
        loop {
            match &self.nodes[at] {
                Node::Leaf { leaf } => return *leaf,
                Node::Split {
                    feature,
                    threshold,
                    default_left,
                    left,
                    right,
                } => {
                    let v = row.get(*feature as usize).copied().unwrap_or(f32::NAN);
                    let go_left = if v.is_nan() {
                        *default_left
                    } else {
                        v < *threshold
                    };
                    at = if go_left { *left } else { *right } as usize;
                }
            }
        }
    }

    pub(super) fn leaf_value(&self, node: u32) -> f32 {
        match self.nodes[node as usize] {
            Node::Leaf { leaf } => leaf,
            Node::Split { .. } => unreachable!("rows end in leaves"),
        }
    }

    /// Whether every node is reachable once and every child index is in range (for
    /// loading a saved model).
    pub fn is_well_formed(&self, num_features: usize) -> bool {
        let mut seen = vec![false; self.nodes.len()];
        let mut stack = vec![0usize];
        while let Some(at) = stack.pop() {
            if at >= self.nodes.len() || std::mem::replace(&mut seen[at], true) {
                return false;
            }
            if let Node::Split {
                feature,
                left,
                right,
                ..
            } = self.nodes[at]
            {
                if feature as usize >= num_features {
                    return false;
                }
                stack.extend([left as usize, right as usize]);
            }
        }
        seen.iter().all(|&s| s)
    }
}

/// Every feature's present (non-NaN) values with their rows, ascending; features
/// with a single value (no threshold to find) are left out.
pub(super) struct SortedColumns {
    columns: Vec<(u32, Vec<(f32, u32)>)>,
}

impl SortedColumns {
    pub(super) fn new(x: Matrix<'_>) -> Self {
        let columns = (0..x.cols())
            .filter_map(|c| {
                let mut col: Vec<(f32, u32)> = (0..x.rows())
                    .map(|r| (x.get(r, c), r as u32))
                    .filter(|(v, _)| !v.is_nan())
                    .collect();
                col.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
                let varies = col.first().zip(col.last()).is_some_and(|(a, b)| a.0 < b.0);
                let has_missing = col.len() < x.rows() && !col.is_empty();
                (varies || has_missing).then_some((c as u32, col))
            })
            .collect();
        SortedColumns { columns }
    }
}

#[derive(Clone, Copy, Default)]
struct Sum {
    g: f64,
    h: f64,
}

impl Sum {
    fn add(&mut self, p: GradPair) {
        self.g += p.grad as f64;
        self.h += p.hess as f64;
    }
    fn minus(self, o: Sum) -> Sum {
        Sum {
            g: self.g - o.g,
            h: self.h - o.h,
        }
    }
    fn plus(self, o: Sum) -> Sum {
        Sum {
            g: self.g + o.g,
            h: self.h + o.h,
        }
    }
}

/// XGBoost's L1 soft threshold of a gradient sum.
fn soft_threshold(g: f64, alpha: f64) -> f64 {
    if g > alpha {
        g - alpha
    } else if g < -alpha {
        g + alpha
    } else {
        0.0
    }
}

fn gain(p: &BoostParams, s: Sum) -> f64 {
    if s.h < p.min_child_weight || s.h + p.lambda <= 0.0 {
        return 0.0;
    }
    let t = soft_threshold(s.g, p.alpha);
    t * t / (s.h + p.lambda)
}

fn weight(p: &BoostParams, s: Sum) -> f64 {
    if s.h < p.min_child_weight || s.h + p.lambda <= 0.0 {
        return 0.0;
    }
    -soft_threshold(s.g, p.alpha) / (s.h + p.lambda)
}

#[derive(Clone, Copy)]
struct Candidate {
    loss_chg: f64,
    feature: u32,
    threshold: f32,
    default_left: bool,
    left: Sum,
    right: Sum,
}

/// An open node's search state during one feature's pass.
#[derive(Clone, Copy)]
struct Scan {
    present: Sum,
    last: f32,
    count: u32,
}

/// XGBoost's `kRtEps`: a split must gain more than this.
const MIN_LOSS_CHANGE: f64 = 1e-6;

/// One level's open nodes: what every feature's scan needs, shared by the scans.
struct Level<'p> {
    params: &'p BoostParams,
    /// Per open node: its sums and its parent gain.
    total: Vec<Sum>,
    root_gain: Vec<f64>,
}

impl Level<'_> {
    /// Scores splitting open node `s` with `present` (the present values below the
    /// threshold) on the left, missing values on either side, into `best[s]`: the
    /// first candidate with the largest loss change wins.
    #[allow(clippy::too_many_arguments)]
    fn consider(
        &self,
        best: &mut [Option<Candidate>],
        s: usize,
        feature: u32,
        threshold: f32,
        present: Sum,
        all_present: Sum,
    ) {
        let p = self.params;
        let total = self.total[s];
        let missing = total.minus(all_present);
        let has_missing = missing.h != 0.0 || missing.g != 0.0;
        for default_left in [false, true] {
            if default_left && !has_missing {
                break;
            }
            let left = if default_left {
                present.plus(missing)
            } else {
                present
            };
            let right = total.minus(left);
            if left.h < p.min_child_weight || right.h < p.min_child_weight {
                continue;
            }
            let loss_chg = gain(p, left) + gain(p, right) - self.root_gain[s];
            if loss_chg > MIN_LOSS_CHANGE && loss_chg >= p.gamma && better(&best[s], loss_chg) {
                best[s] = Some(Candidate {
                    loss_chg,
                    feature,
                    threshold,
                    default_left,
                    left,
                    right,
                });
            }
        }
    }

    /// Each open node's best split on one feature (its column sorted by value), as
    /// XGBoost's exact greedy search scans it.
    fn scan(
        &self,
        feature: u32,
        col: &[(f32, u32)],
        rows: &LevelRows<'_>,
    ) -> Vec<Option<Candidate>> {
        let open = self.total.len();
        let mut best = vec![None; open];
        let mut scans = vec![
            Scan {
                present: Sum::default(),
                last: f32::NAN,
                count: 0,
            };
            open
        ];
        // the present sums of each open node, for the missing side
        let all_present = if col.len() == rows.n {
            self.total.clone()
        } else {
            let mut sums = vec![Sum::default(); open];
            for &(_, r) in col {
                if let Some(s) = rows.slot_of(r) {
                    sums[s].add(rows.gpairs[r as usize]);
                }
            }
            sums
        };
        for &(v, r) in col {
            let Some(s) = rows.slot_of(r) else { continue };
            let sc = scans[s];
            if sc.count == 0 {
                // below every present value: all of them right, missing left
                self.consider(&mut best, s, feature, v, Sum::default(), all_present[s]);
            } else if v > sc.last {
                let mut t = (sc.last + v) * 0.5;
                if t <= sc.last {
                    t = v;
                }
                self.consider(&mut best, s, feature, t, sc.present, all_present[s]);
            }
            let sc = &mut scans[s];
            sc.present.add(rows.gpairs[r as usize]);
            sc.last = v;
            sc.count += 1;
        }
        // above every present value: all of them left, missing right
        for (s, sc) in scans.iter().enumerate() {
            if sc.count > 0 {
                let t = next_up(sc.last);
                self.consider(&mut best, s, feature, t, sc.present, all_present[s]);
            }
        }
        best
    }

    /// The best split of each open node over every feature: the features' scans run
    /// on `threads` threads, and their results are taken in feature order with the
    /// same rule as one scan (the first largest loss change), so the tree is the same
    /// for any number of threads.
    fn best_splits(
        &self,
        columns: &SortedColumns,
        rows: &LevelRows<'_>,
        threads: usize,
    ) -> Vec<Option<Candidate>> {
        let cols = &columns.columns;
        let per_feature: Vec<Vec<Option<Candidate>>> = if threads <= 1 || cols.len() < 2 {
            cols.iter()
                .map(|(f, col)| self.scan(*f, col, rows))
                .collect()
        } else {
            let chunk = cols.len().div_ceil(threads);
            std::thread::scope(|scope| {
                let handles: Vec<_> = cols
                    .chunks(chunk)
                    .map(|part| {
                        scope.spawn(move || {
                            part.iter()
                                .map(|(f, col)| self.scan(*f, col, rows))
                                .collect::<Vec<_>>()
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .flat_map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                    .collect()
            })
        };
        let mut best = vec![None; self.total.len()];
        for found in per_feature {
            for (s, c) in found.into_iter().enumerate() {
                if let Some(c) = c {
                    if better(&best[s], c.loss_chg) {
                        best[s] = Some(c);
                    }
                }
            }
        }
        best
    }
}

/// Whether a split with `loss_chg` replaces `best` (strictly larger: the first found
/// of equal ones stays).
fn better(best: &Option<Candidate>, loss_chg: f64) -> bool {
    best.is_none_or(|b| loss_chg > b.loss_chg)
}

/// Where the rows are during one level: each row's node, and each node's slot among
/// the level's open nodes.
struct LevelRows<'a> {
    n: usize,
    position: &'a [Option<u32>],
    slot: &'a [usize],
    gpairs: &'a [GradPair],
}

impl LevelRows<'_> {
    /// The open node slot row `r` is in, if it is in an open node.
    fn slot_of(&self, r: u32) -> Option<usize> {
        let nd = self.position[r as usize]?;
        let s = self.slot[nd as usize];
        (s != usize::MAX).then_some(s)
    }
}

/// The feature scans' threads for a level of `cells` (rows times features): one below
/// a quarter of a million, where starting threads costs more than it saves.
pub(super) fn threads_for(cells: usize, available: usize) -> usize {
    if cells < 250_000 {
        1
    } else {
        available.max(1)
    }
}

/// Grows one tree on the rows with `sampled[r]`. Returns it and, for each sampled
/// row, the leaf it ends in.
pub(super) fn grow(
    params: &BoostParams,
    x: Matrix<'_>,
    columns: &SortedColumns,
    gpairs: &[GradPair],
    sampled: &[bool],
    threads: usize,
) -> (Tree, Vec<Option<u32>>) {
    let n = x.rows();
    let mut position: Vec<Option<u32>> = (0..n).map(|r| sampled[r].then_some(0)).collect();
    let mut root = Sum::default();
    for r in (0..n).filter(|&r| sampled[r]) {
        root.add(gpairs[r]);
    }
    let mut nodes = vec![Node::Leaf { leaf: 0.0 }];
    let mut sums = vec![root];
    let mut open: Vec<u32> = vec![0];
    let leaf = |s: Sum| Node::Leaf {
        leaf: (weight(params, s) * params.eta) as f32,
    };
    for _depth in 0..params.max_depth {
        if open.is_empty() {
            break;
        }
        // slot of each open node in this level's vectors
        let mut slot = vec![usize::MAX; nodes.len()];
        for (s, &nd) in open.iter().enumerate() {
            slot[nd as usize] = s;
        }
        let level = Level {
            params,
            total: open.iter().map(|&nd| sums[nd as usize]).collect(),
            root_gain: open
                .iter()
                .map(|&nd| gain(params, sums[nd as usize]))
                .collect(),
        };
        let rows = LevelRows {
            n,
            position: &position,
            slot: &slot,
            gpairs,
        };
        let found = level.best_splits(columns, &rows, threads);
        let mut next = Vec::new();
        for (s, &nd) in open.iter().enumerate() {
            match found[s] {
                Some(c) => {
                    let left = nodes.len() as u32;
                    nodes.push(Node::Leaf { leaf: 0.0 });
                    nodes.push(Node::Leaf { leaf: 0.0 });
                    sums.push(c.left);
                    sums.push(c.right);
                    nodes[nd as usize] = Node::Split {
                        feature: c.feature,
                        threshold: c.threshold,
                        default_left: c.default_left,
                        left,
                        right: left + 1,
                    };
                    next.extend([left, left + 1]);
                }
                None => nodes[nd as usize] = leaf(sums[nd as usize]),
            }
        }
        for (r, pos) in position.iter_mut().enumerate() {
            let Some(nd) = *pos else { continue };
            if let Node::Split {
                feature,
                threshold,
                default_left,
                left,
                right,
            } = nodes[nd as usize]
            {
                let v = x.get(r, feature as usize);
                let go_left = if v.is_nan() {
                    default_left
                } else {
                    v < threshold
                };
                *pos = Some(if go_left { left } else { right });
            }
        }
        open = next;
    }
    for nd in open {
        nodes[nd as usize] = leaf(sums[nd as usize]);
    }
    (Tree { nodes }, position)
}

/// The smallest f32 above `v` (finite `v`), so that `v < next_up(v)`.
fn next_up(v: f32) -> f32 {
    if v == f32::MAX {
        return f32::INFINITY;
    }
    let bits = v.to_bits();
    let up = if v == 0.0 {
        1
    } else if v > 0.0 {
        bits + 1
    } else {
        bits - 1
    };
    f32::from_bits(up)
}
