//! Quantization and packing of ResNet-18 for VTA: the region between the first max pool
//! and the global average pool computes on int8 at the global scale (every convolution
//! but the first, the residual adds, the batch norms on activations), the edges stay
//! float; the quantized network is measured against float32 on the same seeded inputs
//! (its packing into VTA's layout is tested in `plugins/vta/tests/pack.rs`).

use tessera_backends::Target;
use tessera_graph::quantize::{quantize, region, QConfig};
use tessera_graph::{build, passes, zoo, Graph};
use tessera_runtime::NDArray;

fn resnet18(size: i64) -> Graph {
    let opts = zoo::ZooOptions {
        image_size: Some(size),
        ..zoo::ZooOptions::default()
    };
    let mut g = zoo::network("resnet-18", &opts).unwrap();
    passes::optimize(&mut g, None).unwrap();
    g
}

/// SplitMix64-seeded inputs in [-1, 1).
fn input(size: usize, seed: u64) -> NDArray {
    let v: Vec<f32> = (0..3 * size * size)
        .map(|i| {
            let mut x = ((seed << 32) ^ i as u64).wrapping_add(0x9e37_79b9_7f4a_7c15);
            x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            ((x ^ (x >> 31)) >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect();
    NDArray::from_slice_f32(&[1, 3, size, size], &v).unwrap()
}

fn run(g: &Graph, x: &NDArray) -> Vec<f32> {
    let mut m = build(g, &Target::cpu()).unwrap();
    m.set_input("data", x).unwrap();
    m.run().unwrap();
    m.get_output(0).unwrap().as_slice::<f32>().unwrap().to_vec()
}

fn argmax(v: &[f32]) -> usize {
    (0..v.len()).max_by(|&a, &b| v[a].total_cmp(&v[b])).unwrap()
}

#[test]
fn resnet18_quantizes_between_the_max_pool_and_the_global_pool() {
    let g = resnet18(64);
    let r = region(&g, "max_pool2d", "global_avg_pool2d").unwrap();
    assert_eq!(g.node(r.start).op.name(), "max_pool2d");
    let q = quantize(&g, &QConfig::default()).unwrap();
    let counts = q.op_counts();
    let float_convs = g.op_counts()["conv2d"];
    // every convolution but the first is int8
    assert_eq!(counts.get("conv2d"), Some(&1), "{counts:?}");
    assert_eq!(
        counts.get("conv2d_int8"),
        Some(&(float_convs - 1)),
        "{counts:?}"
    );
    assert_eq!(counts.get("quantize"), Some(&1), "{counts:?}");
    assert_eq!(counts.get("dequantize"), Some(&1), "{counts:?}");
    let samples = 4;
    let mut agree = 0;
    let mut worst = 0f64;
    for seed in 0..samples {
        let x = input(64, seed);
        let (f, qv) = (run(&g, &x), run(&q, &x));
        if argmax(&f) == argmax(&qv) {
            agree += 1;
        }
        let num: f64 = f
            .iter()
            .zip(&qv)
            .map(|(a, b)| ((a - b) as f64).powi(2))
            .sum();
        let den: f64 = f.iter().map(|a| (*a as f64).powi(2)).sum();
        worst = worst.max((num / den).sqrt());
    }
    eprintln!("resnet-18 at 64×64, int8 against float32: top-1 agrees on {agree} of {samples} inputs, worst relative error {worst:.4}");
    assert!(worst < 0.5, "relative error {worst}");
}

#[test]
fn a_missing_boundary_or_a_bad_scale_is_an_error() {
    let g = resnet18(64);
    let err = region(&g, "avg_pool2d", "global_avg_pool2d")
        .unwrap_err()
        .to_string();
    assert!(err.contains("the network has no `avg_pool2d`"), "{err}");
    let err = region(&g, "global_avg_pool2d", "max_pool2d")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("no `max_pool2d` follows `global_avg_pool2d`"),
        "{err}"
    );
    let bad = QConfig {
        global_scale: 0.0,
        ..QConfig::default()
    };
    let err = quantize(&g, &bad).unwrap_err().to_string();
    assert!(
        err.contains("global_scale 0 is not a positive number"),
        "{err}"
    );
}
