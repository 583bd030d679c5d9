//! The cost models: learning, determinism, persistence and input errors.

use std::path::Path;
use tessera_costmodel::{
    load_model, CostModel, CostModelError, LossType, RandomModel, XgbModel, XgbParams,
};

/// A small deterministic generator (SplitMix64) for the synthetic data.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f32 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 40) as f32 / (1u32 << 24) as f32
    }
}

/// `n` rows of 6 features in [0, 1) and a throughput with a clear monotone structure in
/// the first three (the others are noise the model must ignore).
fn synthetic(n: usize, seed: u64) -> (Vec<Vec<f32>>, Vec<f32>) {
    let mut rng = Rng(seed);
    let xs: Vec<Vec<f32>> = (0..n)
        .map(|_| (0..6).map(|_| rng.next()).collect())
        .collect();
    let ys = xs
        .iter()
        .map(|x| 1e9 * (1.0 + 4.0 * x[0] + 2.0 * x[1] * x[1] + x[2]))
        .collect();
    (xs, ys)
}

/// Ranks (average ranks for ties), for Spearman's correlation.
fn ranks(v: &[f32]) -> Vec<f64> {
    let mut idx: Vec<usize> = (0..v.len()).collect();
    idx.sort_by(|&a, &b| v[a].total_cmp(&v[b]));
    let mut r = vec![0.0; v.len()];
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && v[idx[j + 1]] == v[idx[i]] {
            j += 1;
        }
        for &k in &idx[i..=j] {
            r[k] = (i + j) as f64 / 2.0;
        }
        i = j + 1;
    }
    r
}

fn spearman(a: &[f32], b: &[f32]) -> f64 {
    let (ra, rb) = (ranks(a), ranks(b));
    let n = ra.len() as f64;
    let (ma, mb) = (ra.iter().sum::<f64>() / n, rb.iter().sum::<f64>() / n);
    let cov: f64 = ra.iter().zip(&rb).map(|(x, y)| (x - ma) * (y - mb)).sum();
    let va: f64 = ra.iter().map(|x| (x - ma).powi(2)).sum();
    let vb: f64 = rb.iter().map(|y| (y - mb).powi(2)).sum();
    cov / (va * vb).sqrt()
}

/// Kendall's tau-a.
fn kendall(a: &[f32], b: &[f32]) -> f64 {
    let n = a.len();
    let mut s = 0i64;
    for i in 0..n {
        for j in i + 1..n {
            let x = (a[i] - a[j]).signum() * (b[i] - b[j]).signum();
            s += x as i64;
        }
    }
    s as f64 / (n * (n - 1) / 2) as f64
}

#[test]
fn xgboost_learns_a_monotone_function() {
    let (train_x, train_y) = synthetic(400, 1);
    let (test_x, test_y) = synthetic(200, 2);
    for loss in [LossType::Reg, LossType::Rank] {
        let mut m = XgbModel::new(loss);
        assert!(!m.is_trained());
        m.update(&train_x, &train_y).unwrap();
        assert!(m.is_trained());
        let p = m.predict(&test_x).unwrap();
        assert_eq!(p.len(), test_x.len());
        let (rho, tau) = (spearman(&p, &test_y), kendall(&p, &test_y));
        println!("{}: spearman {rho:.3} kendall {tau:.3}", m.name());
        assert!(rho > 0.8, "{}: spearman {rho}", m.name());
        assert!(tau > 0.6, "{}: kendall {tau}", m.name());
    }
    // Regression predicts the normalized throughput itself.
    let mut m = XgbModel::new(LossType::Reg);
    m.update(&train_x, &train_y).unwrap();
    let max = train_y.iter().copied().fold(0.0, f32::max);
    let p = m.predict(&test_x).unwrap();
    let err: f32 = p
        .iter()
        .zip(&test_y)
        .map(|(p, y)| (p - y / max).abs())
        .sum::<f32>()
        / p.len() as f32;
    assert!(err < 0.05, "mean absolute error {err}");
}

#[test]
fn rank_binary_separates_the_top_candidates() {
    let (train_x, train_y) = synthetic(400, 3);
    let (test_x, test_y) = synthetic(200, 4);
    let mut m = XgbModel::new(LossType::RankBinary);
    m.update(&train_x, &train_y).unwrap();
    let p = m.predict(&test_x).unwrap();
    // Area under the ROC curve for "within half of the best training throughput".
    let best = train_y.iter().copied().fold(0.0, f32::max);
    let top: Vec<bool> = test_y.iter().map(|y| y / best >= 0.5).collect();
    let (mut wins, mut pairs) = (0.0, 0.0);
    for i in 0..p.len() {
        for j in 0..p.len() {
            if top[i] && !top[j] {
                pairs += 1.0;
                wins += if p[i] > p[j] {
                    1.0
                } else if p[i] == p[j] {
                    0.5
                } else {
                    0.0
                };
            }
        }
    }
    assert!(pairs > 100.0, "both classes present");
    let auc = wins / pairs;
    println!("rank-binary AUC {auc:.3}");
    assert!(auc > 0.9, "AUC {auc}");
}

#[test]
fn xgboost_is_deterministic() {
    let (x, y) = synthetic(300, 5);
    for loss in LossType::ALL {
        let mut a = XgbModel::new(loss);
        let mut b = XgbModel::new(loss);
        a.update(&x, &y).unwrap();
        b.update(&x, &y).unwrap();
        assert_eq!(a.predict(&x).unwrap(), b.predict(&x).unwrap(), "{loss:?}");
        // Retraining on the same history gives the same model again.
        let before = a.predict(&x).unwrap();
        a.update(&x, &y).unwrap();
        assert_eq!(a.predict(&x).unwrap(), before, "{loss:?}");
    }
}

#[test]
fn xgboost_save_load_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let (x, y) = synthetic(200, 6);
    let params = XgbParams {
        num_rounds: 30,
        seed: 7,
        ..XgbParams::default()
    };
    for loss in LossType::ALL {
        let mut m = XgbModel::with_params(loss, params.clone());
        m.update(&x, &y).unwrap();
        let path = dir.path().join(format!("{}.json", loss.name()));
        m.save(&path).unwrap();
        assert!(XgbModel::model_file_for(&path).exists());

        let loaded = XgbModel::load(&path).unwrap();
        assert_eq!(loaded.loss(), loss);
        assert_eq!(loaded.params(), &params);
        assert_eq!(loaded.num_features(), Some(6));
        assert_eq!(loaded.predict(&x).unwrap(), m.predict(&x).unwrap());

        let dynamic = load_model(&path).unwrap();
        assert_eq!(dynamic.name(), m.name());
        assert_eq!(dynamic.predict(&x).unwrap(), m.predict(&x).unwrap());
    }

    // An untrained model saves its settings only and loads untrained.
    let path = dir.path().join("untrained.json");
    XgbModel::new(LossType::Rank).save(&path).unwrap();
    assert!(!XgbModel::model_file_for(&path).exists());
    let loaded = XgbModel::load(&path).unwrap();
    assert!(!loaded.is_trained());
}

#[test]
fn load_errors_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.json");
    match XgbModel::load(&missing) {
        Err(CostModelError::Io { path, .. }) => assert_eq!(path, missing),
        other => panic!("{other:?}"),
    }
    // A random model's settings are not a trees model.
    let random = dir.path().join("random.json");
    RandomModel::new(3).save(&random).unwrap();
    let e = XgbModel::load(&random).unwrap_err();
    assert!(matches!(e, CostModelError::BadFile { .. }), "{e}");
    assert!(e.to_string().contains("random.json"), "{e}");
    // Not JSON at all.
    let junk = dir.path().join("junk.json");
    std::fs::write(&junk, "not json").unwrap();
    assert!(matches!(
        load_model(&junk),
        Err(CostModelError::BadFile { .. })
    ));
    // The trees are gone.
    let (x, y) = synthetic(50, 8);
    let mut m = XgbModel::new(LossType::Reg);
    m.update(&x, &y).unwrap();
    let saved = dir.path().join("m.json");
    m.save(&saved).unwrap();
    let trees = XgbModel::model_file_for(&saved);
    std::fs::remove_file(&trees).unwrap();
    match XgbModel::load(&saved) {
        Err(CostModelError::Io { path, .. }) => assert_eq!(path, trees),
        other => panic!("{other:?}"),
    }
    // Trees that are not a saved forest, or whose nodes point nowhere.
    m.save(&saved).unwrap();
    std::fs::write(&trees, "[1, 2").unwrap();
    match XgbModel::load(&saved) {
        Err(e @ CostModelError::BadFile { .. }) => {
            assert!(e.to_string().contains("not a saved forest"), "{e}")
        }
        other => panic!("{other:?}"),
    }
    std::fs::write(
        &trees,
        r#"{"base_score":0,"num_features":6,"trees":[{"nodes":[{"feature":0,"threshold":0.5,"default_left":true,"left":1,"right":7},{"leaf":1}]}]}"#,
    )
    .unwrap();
    match XgbModel::load(&saved) {
        Err(e @ CostModelError::BadFile { .. }) => {
            assert!(e.to_string().contains("tree 0 is malformed"), "{e}")
        }
        other => panic!("{other:?}"),
    }
    // A settings file of the XGBoost-library days (version 1) says which version.
    std::fs::write(
        &saved,
        r#"{"kind":"xgboost","version":1,"loss":"reg","num_features":6}"#,
    )
    .unwrap();
    match XgbModel::load(&saved) {
        Err(e @ CostModelError::BadFile { .. }) => {
            assert!(e.to_string().contains("version"), "{e}")
        }
        other => panic!("{other:?}"),
    }
    // Saving into a folder that does not exist.
    let nowhere = dir.path().join("no/such/dir/m.json");
    assert!(matches!(m.save(&nowhere), Err(CostModelError::Io { .. })));
    assert!(matches!(
        RandomModel::new(1).save(&nowhere),
        Err(CostModelError::Io { .. })
    ));
    assert!(!Path::new(&nowhere).exists());
}

#[test]
fn bad_inputs_are_errors_not_panics() {
    let ragged = vec![vec![1.0, 2.0], vec![1.0], vec![3.0, 4.0]];
    let mut models: Vec<Box<dyn CostModel>> = vec![
        Box::new(XgbModel::new(LossType::Reg)),
        Box::new(XgbModel::new(LossType::Rank)),
        Box::new(RandomModel::new(0)),
    ];
    for m in &mut models {
        match m.update(&ragged, &[1.0, 2.0, 3.0]) {
            Err(CostModelError::RaggedFeatures {
                row: 1,
                len: 1,
                expected: 2,
            }) => {}
            other => panic!("{}: {other:?}", m.name()),
        }
        assert!(matches!(
            m.predict(&ragged),
            Err(CostModelError::RaggedFeatures { row: 1, .. })
        ));
        assert!(matches!(
            m.update(&[vec![1.0], vec![2.0]], &[1.0]),
            Err(CostModelError::LabelCount {
                features: 2,
                labels: 1
            })
        ));
        assert!(matches!(m.update(&[], &[]), Err(CostModelError::NoData)));
        assert!(matches!(
            m.update(&[vec![], vec![]], &[1.0, 2.0]),
            Err(CostModelError::EmptyFeatures)
        ));
        for bad in [-1.0, f32::NAN, f32::INFINITY] {
            assert!(matches!(
                m.update(&[vec![1.0], vec![2.0]], &[1.0, bad]),
                Err(CostModelError::BadLabel { index: 1, .. })
            ));
        }
        assert_eq!(m.predict(&[]).unwrap(), Vec::<f32>::new());
    }

    // XGBoost: untrained, then trained on width 2 and asked about width 3.
    let mut m = XgbModel::new(LossType::Reg);
    assert!(matches!(
        m.predict(&[vec![1.0, 2.0]]),
        Err(CostModelError::NotTrained { .. })
    ));
    m.update(&[vec![1.0, 2.0], vec![3.0, 4.0]], &[1.0, 0.0])
        .unwrap();
    match m.predict(&[vec![1.0, 2.0, 3.0]]) {
        Err(CostModelError::FeatureWidth {
            expected: 2,
            got: 3,
        }) => {}
        other => panic!("{other:?}"),
    }
    // A parameter XGBoost refuses is refused, naming it (eta is XGBoost's learning_rate).
    for (params, name) in [
        (
            XgbParams {
                eta: -1.0,
                ..XgbParams::default()
            },
            "eta (learning_rate)",
        ),
        (
            XgbParams {
                max_depth: 0,
                ..XgbParams::default()
            },
            "max_depth",
        ),
        (
            XgbParams {
                subsample: 1.5,
                ..XgbParams::default()
            },
            "subsample",
        ),
        (
            XgbParams {
                lambda: f64::NAN,
                ..XgbParams::default()
            },
            "lambda",
        ),
    ] {
        let mut bad = XgbModel::with_params(LossType::Reg, params);
        match bad.update(&[vec![1.0], vec![2.0]], &[1.0, 2.0]) {
            Err(e @ CostModelError::BadParameter { name: n, .. }) => {
                assert_eq!(n, name);
                assert!(e.to_string().contains(name), "{e}");
            }
            other => panic!("{other:?}"),
        }
    }
    // All-failed histories (every label 0) still train.
    let mut m = XgbModel::new(LossType::Rank);
    m.update(&[vec![1.0], vec![2.0]], &[0.0, 0.0]).unwrap();
    assert_eq!(m.predict(&[vec![1.5]]).unwrap().len(), 1);
}

#[test]
fn random_model_is_deterministic_by_seed() {
    let rows: Vec<Vec<f32>> = (0..100).map(|i| vec![i as f32]).collect();
    let (a, b, c) = (
        RandomModel::new(42),
        RandomModel::new(42),
        RandomModel::new(43),
    );
    let (a1, a2) = (a.predict(&rows).unwrap(), a.predict(&rows).unwrap());
    let (b1, b2) = (b.predict(&rows).unwrap(), b.predict(&rows).unwrap());
    assert_eq!(a1, b1);
    assert_eq!(a2, b2);
    assert_ne!(a1, a2, "each call draws new scores");
    assert_ne!(a1, c.predict(&rows).unwrap());
    assert!(a1.iter().all(|v| (0.0..1.0).contains(v)));
    // Roughly uniform.
    let mean = a1.iter().sum::<f32>() / a1.len() as f32;
    assert!((mean - 0.5).abs() < 0.1, "mean {mean}");

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("random.json");
    a.save(&path).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("\"seed\": 42"), "{text}");
    let loaded = RandomModel::load(&path).unwrap();
    assert_eq!(loaded.seed(), 42);
    assert_eq!(loaded.predict(&rows).unwrap(), a1);
    let dynamic = load_model(&path).unwrap();
    assert_eq!(dynamic.name(), "random");
    assert_eq!(dynamic.predict(&rows).unwrap(), a1);
}
