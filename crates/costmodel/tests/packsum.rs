//! The pack-sum model: its objective's gradient against a finite difference of the
//! loss, and a model that learns a program score that is a sum over stores.

use tessera_costmodel::packsum::pack_sum_gradient;
use tessera_costmodel::{PackSumParams, PackSumXgb, ProgramCostModel, RandomProgramModel};

/// Σ_p w_p/2 · (Σ_{i∈p} pred_i − y_p)²
fn loss(preds: &[f32], ptr: &[u32], labels: &[f32], weights: &[f32]) -> f64 {
    ptr.windows(2)
        .enumerate()
        .map(|(p, g)| {
            let (a, b) = (g[0] as usize, g[1] as usize);
            let sum: f64 = preds[a..b].iter().map(|&x| x as f64).sum();
            let d = sum - labels[a] as f64;
            weights[p] as f64 / 2.0 * d * d
        })
        .sum()
}

#[test]
fn the_pack_sum_gradient_is_the_derivative_of_the_weighted_squared_error() {
    // three programs of 2, 3 and 1 stores
    let ptr = [0u32, 2, 5, 6];
    let preds = [0.1f32, 0.3, -0.2, 0.05, 0.4, 0.7];
    let labels = [0.9f32, 0.9, 0.2, 0.2, 0.2, 1.0];
    let weights = [0.9f32, 0.2, 1.0];
    let (grad, hess) = pack_sum_gradient(&preds, &ptr, &labels, &weights);
    let h = 1e-3f32;
    for i in 0..preds.len() {
        let mut up = preds;
        up[i] += h;
        let mut down = preds;
        down[i] -= h;
        let fd = (loss(&up, &ptr, &labels, &weights) - loss(&down, &ptr, &labels, &weights))
            / (2.0 * h as f64);
        assert!(
            (fd - grad[i] as f64).abs() < 1e-3,
            "row {i}: finite difference {fd} vs gradient {}",
            grad[i]
        );
    }
    // hessian: the program's weight on every one of its rows
    assert_eq!(hess, vec![0.9, 0.9, 0.2, 0.2, 0.2, 1.0]);
}

/// Programs of 1–4 stores whose score is the sum of a per-store function: the model
/// must rank unseen programs by it.
#[test]
fn the_model_learns_a_sum_over_stores_and_beats_random_scores() {
    let mut seed = 7u64;
    let mut next = || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((seed >> 33) as f64 / (1u64 << 31) as f64) as f32
    };
    let store = |x: &[f32]| 2.0 * x[0] + if x[1] > 0.5 { 1.0 } else { 0.0 } - x[2] * x[3];
    let mut make = |n: usize| -> (Vec<Vec<Vec<f32>>>, Vec<f32>) {
        let mut progs = Vec::new();
        let mut ys = Vec::new();
        for k in 0..n {
            let stores = 1 + k % 4;
            let rows: Vec<Vec<f32>> = (0..stores)
                .map(|_| (0..6).map(|_| next()).collect())
                .collect();
            ys.push(rows.iter().map(|r| store(r)).sum::<f32>());
            progs.push(rows);
        }
        (progs, ys)
    };
    let (train_x, train_y) = make(600);
    let (test_x, test_y) = make(200);
    let max = train_y.iter().copied().fold(f32::MIN, f32::max);
    let min = train_y.iter().copied().fold(f32::MAX, f32::min);
    let norm: Vec<f32> = train_y.iter().map(|y| (y - min) / (max - min)).collect();
    let mut m = PackSumXgb::new(PackSumParams::default());
    assert!(!m.is_trained());
    m.update(&train_x, &norm).unwrap();
    let pred = m.predict(&test_x).unwrap();
    let random = RandomProgramModel::new(1).predict(&test_x).unwrap();
    // pairwise order agreement with the truth
    let agree = |p: &[f32]| {
        let mut ok = 0;
        let mut all = 0;
        for i in 0..p.len() {
            for j in i + 1..p.len() {
                all += 1;
                ok += ((p[i] > p[j]) == (test_y[i] > test_y[j])) as usize;
            }
        }
        ok as f64 / all as f64
    };
    let (learned, rnd) = (agree(&pred), agree(&random));
    eprintln!("pairwise agreement: pack-sum {learned:.3}, random {rnd:.3}");
    assert!(learned > 0.75, "pack-sum {learned:.3}");
    assert!(
        learned > rnd + 0.2,
        "pack-sum {learned:.3} vs random {rnd:.3}"
    );
    // a program with no store is never chosen
    let s = m.predict(&[vec![], test_x[0].clone()]).unwrap();
    assert_eq!(s[0], f32::NEG_INFINITY);
    assert!(s[1].is_finite());
}

#[test]
fn bad_training_data_is_a_typed_error() {
    let mut m = PackSumXgb::new(PackSumParams::default());
    assert!(m.update(&[vec![vec![1.0, 2.0]]], &[]).is_err());
    assert!(m.update(&[vec![vec![1.0, 2.0]]], &[f32::NAN]).is_err());
    assert!(m
        .update(&[vec![vec![1.0, 2.0], vec![1.0]]], &[0.5])
        .is_err());
    assert!(m.update(&[vec![]], &[0.5]).is_err());
    assert!(m.predict(&[vec![vec![1.0, 2.0]]]).is_err(), "untrained");
}
