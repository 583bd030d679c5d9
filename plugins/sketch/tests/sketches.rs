//! The sketches generated for the CPU, as TVM's sketch-generation tests count them, each
//! printed (step history and loop nest, unfilled tile sizes shown `?`) in a snapshot.

mod common;
use common::*;

use tessera_search::state::State;
use tessera_sketch::sketch::{generate_sketches, SketchTarget};
use tessera_te::ops::{bias_add, conv2d_nhwc, matmul, relu, softmax};
use tessera_te::ComputeDag;

fn show(sketches: &[State]) -> String {
    let mut out = String::new();
    for (k, s) in sketches.iter().enumerate() {
        out.push_str(&format!("===== sketch {k} =====\n"));
        for step in s.steps() {
            out.push_str(&format!("{}\n", step.to_json()));
        }
        out.push_str("-----\n");
        out.push_str(&s.print().unwrap());
    }
    out
}

fn cpu() -> SketchTarget {
    SketchTarget::cpu(2)
}

#[test]
fn matmul_has_three_sketches() {
    let a = f32p(&[512, 512], "A");
    let b = f32p(&[512, 512], "B");
    let dag = ComputeDag::new(&[matmul(&a, &b).unwrap()]).unwrap();
    let sk = generate_sketches(&dag, &cpu()).unwrap();
    // tiled in place; cache write + the copy fused at level 1; at level 2
    assert_eq!(sk.len(), 3);
    assert!(sk.iter().all(|s| !s.is_complete()));
    insta::assert_snapshot!(show(&sk));
}

#[test]
fn conv2d_nhwc_bias_relu_has_three_sketches() {
    let data = f32p(&[1, 56, 56, 64], "data");
    let kernel = f32p(&[3, 3, 64, 64], "kernel");
    let bias = f32p(&[64], "bias");
    let conv = conv2d_nhwc(&data, &kernel, (1, 1), (1, 1), (1, 1)).unwrap();
    let out = relu(&bias_add(&conv, &bias, 3).unwrap()).unwrap();
    let dag = ComputeDag::new(&[out]).unwrap();
    let sk = generate_sketches(&dag, &cpu()).unwrap();
    // relu fused at level 1, at level 2; tiled without fusion. bias_add always inlined;
    // the padding stays a stage (its place is tuned when sketches are annotated)
    assert_eq!(sk.len(), 3);
    insta::assert_snapshot!(show(&sk));
}

#[test]
fn softmax_has_nine_sketches() {
    let x = f32p(&[1, 1024], "x");
    let dag = ComputeDag::new(&[softmax(&x).unwrap()]).unwrap();
    let sk = generate_sketches(&dag, &cpu()).unwrap();
    // (2 rfactor + 1 plain) for the sum × the same for the max
    assert_eq!(sk.len(), 9);
    insta::assert_snapshot!(show(&sk));
}

#[test]
fn a_bad_structure_is_an_error() {
    let a = f32p(&[8, 8], "A");
    let dag = ComputeDag::new(&[matmul(&a, &a).unwrap()]).unwrap();
    let mut t = cpu();
    t.structure = "SXR".into();
    assert!(generate_sketches(&dag, &t).is_err());
}
