//! The trees themselves (`gbdt`): the split a tree picks is the best one an exhaustive
//! search finds, missing values follow the side they resemble, and the parameters do
//! what XGBoost's do.

use tessera_costmodel::gbdt::{
    BoostParams, Forest, GradPair, Matrix, Node, Objective, SplitMix, SquaredError,
};

fn params(max_depth: u32) -> BoostParams {
    BoostParams {
        max_depth,
        gamma: 0.0,
        min_child_weight: 1.0,
        subsample: 1.0,
        eta: 1.0,
        lambda: 1.0,
        alpha: 0.0,
        seed: 0,
    }
}

fn score(g: f64, h: f64, lambda: f64) -> f64 {
    g * g / (h + lambda)
}

/// Rows of `cols` values drawn from a few levels (so that ties occur) and labels.
fn data(rng: &mut SplitMix, rows: usize, cols: usize) -> (Vec<f32>, Vec<f32>) {
    let x = (0..rows * cols)
        .map(|_| rng.below(7) as f32 * 0.5 - 1.0)
        .collect();
    let y = (0..rows).map(|_| rng.unit() as f32 * 4.0).collect();
    (x, y)
}

#[test]
fn a_stump_splits_where_an_exhaustive_search_gains_most() {
    let mut rng = SplitMix::new(11);
    for case in 0..40 {
        let (rows, cols) = (5 + rng.below(30), 1 + rng.below(4));
        let (x, y) = data(&mut rng, rows, cols);
        let m = Matrix::new(&x, cols).unwrap();
        let p = params(1);
        // base 0: every gradient is -y, every hessian 1
        let forest = Forest::train(&p, m, 1, 0.0, &mut SquaredError { labels: &y }).unwrap();
        let g_all: f64 = y.iter().map(|&v| -v as f64).sum();
        let root = score(g_all, rows as f64, p.lambda);
        let mut best = 0.0f64;
        for c in 0..cols {
            for r in 0..rows {
                let t = m.row(r)[c];
                let (mut gl, mut hl) = (0.0, 0.0);
                for (i, &label) in y.iter().enumerate() {
                    if m.row(i)[c] < t {
                        gl -= label as f64;
                        hl += 1.0;
                    }
                }
                let (gr, hr) = (g_all - gl, rows as f64 - hl);
                if hl >= 1.0 && hr >= 1.0 {
                    best = best.max(score(gl, hl, p.lambda) + score(gr, hr, p.lambda) - root);
                }
            }
        }
        let tree = &forest.trees[0];
        match tree.nodes[0] {
            Node::Split {
                feature, threshold, ..
            } => {
                let (mut gl, mut hl) = (0.0, 0.0);
                for (i, &label) in y.iter().enumerate() {
                    if m.row(i)[feature as usize] < threshold {
                        gl -= label as f64;
                        hl += 1.0;
                    }
                }
                let gain =
                    score(gl, hl, p.lambda) + score(g_all - gl, rows as f64 - hl, p.lambda) - root;
                assert!(
                    (gain - best).abs() <= 1e-6 * best.max(1.0),
                    "case {case}: {gain} vs {best}"
                );
            }
            Node::Leaf { .. } => assert!(best <= 1e-6, "case {case}: no split, best gain {best}"),
        }
        // and the leaves predict the regularized mean of their rows
        for (i, &pred) in forest.predict(m).iter().enumerate() {
            assert!(pred.is_finite(), "case {case} row {i}");
        }
    }
}

#[test]
fn missing_values_follow_the_side_they_resemble() {
    // feature 0 separates low (< 0) from high labels; rows with NaN have high labels
    let mut x = Vec::new();
    let mut y = Vec::new();
    for i in 0..60 {
        let (v, label) = match i % 3 {
            0 => (-1.0 - i as f32 / 100.0, 0.0),
            1 => (1.0 + i as f32 / 100.0, 10.0),
            _ => (f32::NAN, 10.0),
        };
        x.push(v);
        y.push(label);
    }
    let forest = Forest::train(
        &params(2),
        Matrix::new(&x, 1).unwrap(),
        20,
        0.0,
        &mut SquaredError { labels: &y },
    )
    .unwrap();
    let p = forest.predict(Matrix::new(&[f32::NAN, -1.5, 1.5], 1).unwrap());
    assert!((p[0] - 10.0).abs() < 0.5, "{p:?}");
    assert!(p[1].abs() < 0.5, "{p:?}");
    assert!((p[2] - 10.0).abs() < 0.5, "{p:?}");
}

#[test]
fn gamma_min_child_weight_and_depth_bound_the_trees() {
    let mut rng = SplitMix::new(5);
    let (x, y) = data(&mut rng, 200, 3);
    let m = Matrix::new(&x, 3).unwrap();
    let grow = |p: BoostParams| {
        Forest::train(&p, m, 1, 0.0, &mut SquaredError { labels: &y })
            .unwrap()
            .trees
            .remove(0)
    };
    let depth3 = grow(params(3));
    assert!(depth3.nodes.len() <= 15 && depth3.nodes.len() > 1);
    // no split gains 1e12: a single leaf
    let stump = grow(BoostParams {
        gamma: 1e12,
        ..params(3)
    });
    assert_eq!(stump.nodes.len(), 1);
    // each child must hold at least 250 rows (hessian 1 each) of 200: no split
    let heavy = grow(BoostParams {
        min_child_weight: 250.0,
        ..params(3)
    });
    assert_eq!(heavy.nodes.len(), 1);
    // eta scales every leaf
    let half = grow(BoostParams {
        eta: 0.5,
        ..params(3)
    });
    for (a, b) in depth3.nodes.iter().zip(&half.nodes) {
        if let (Node::Leaf { leaf: a }, Node::Leaf { leaf: b }) = (a, b) {
            assert!((a * 0.5 - b).abs() < 1e-5, "{a} {b}");
        }
    }
}

/// An objective that records the margins it is shown, to check what boosting feeds it.
struct Recording<'a> {
    labels: &'a [f32],
    seen: Vec<Vec<f32>>,
}

impl Objective for Recording<'_> {
    fn gradients(&mut self, margins: &[f32], out: &mut [GradPair], rng: &mut SplitMix) {
        self.seen.push(margins.to_vec());
        SquaredError {
            labels: self.labels,
        }
        .gradients(margins, out, rng)
    }
}

#[test]
fn each_round_sees_the_margins_of_the_trees_so_far_and_subsampling_is_seeded() {
    let mut rng = SplitMix::new(9);
    let (x, y) = data(&mut rng, 80, 2);
    let m = Matrix::new(&x, 2).unwrap();
    let p = BoostParams {
        subsample: 0.5,
        ..params(3)
    };
    let mut rec = Recording {
        labels: &y,
        seen: Vec::new(),
    };
    let forest = Forest::train(&p, m, 4, 0.25, &mut rec).unwrap();
    assert_eq!(rec.seen.len(), 4);
    assert!(rec.seen[0].iter().all(|&v| v == 0.25));
    // the margins given to round k are the prediction of the first k trees
    let partial = Forest {
        trees: forest.trees[..3].to_vec(),
        ..forest.clone()
    };
    assert_eq!(rec.seen[3], partial.predict(m));
    let again = Forest::train(&p, m, 4, 0.25, &mut SquaredError { labels: &y }).unwrap();
    assert_eq!(again, forest);
    let other = Forest::train(
        &BoostParams { seed: 1, ..p },
        m,
        4,
        0.25,
        &mut SquaredError { labels: &y },
    )
    .unwrap();
    assert_ne!(other, forest, "another seed draws other rows");
}

/// The split search of a large level runs on several threads; the trees are the same
/// as on one, ties included (the values come from seven levels, so many splits gain
/// the same), with missing values and row subsampling.
#[test]
fn the_trees_do_not_depend_on_the_number_of_threads() {
    let mut rng = SplitMix::new(5);
    let (rows, cols) = (2_000, 160);
    let (mut x, y) = data(&mut rng, rows, cols);
    for v in x.iter_mut().step_by(13) {
        *v = f32::NAN;
    }
    let m = Matrix::new(&x, cols).unwrap();
    let p = BoostParams {
        subsample: 0.8,
        eta: 0.3,
        ..params(6)
    };
    let train = |threads| {
        Forest::train_on(&p, m, 8, 0.5, &mut SquaredError { labels: &y }, threads).unwrap()
    };
    let one = train(1);
    assert!(
        one.trees.iter().any(|t| t.nodes.len() > 7),
        "the trees split"
    );
    for threads in [2, 3, 8] {
        assert_eq!(train(threads), one, "{threads} threads");
    }
}
