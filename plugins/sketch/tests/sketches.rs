//! The sketches generated for the CPU, as TVM's sketch-generation tests count them, each
//! printed (step history and loop nest, unfilled tile sizes shown `?`) in a snapshot.

mod common;
use common::*;

use tessera_search::state::State;
use tessera_sketch::sketch::{generate_sketches, SketchTarget};
use tessera_te::ops::{conv2d_winograd_nhwc, matmul, softmax};
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
    let dag = conv2d_bias_relu(56, 64, 64);
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

fn gpu() -> SketchTarget {
    SketchTarget::cuda(132)
}

fn winograd_dag() -> ComputeDag {
    // F(4x4, 3x3) over a 28x28x128 input, 128 output channels, weight transformed ahead
    let data = f32p(&[1, 28, 28, 128], "data");
    let kernel_pack = f32p(&[6, 6, 128, 128], "kernel_pack");
    let out = conv2d_winograd_nhwc(&data, &kernel_pack, [1, 1, 1, 1], 4).unwrap();
    ComputeDag::new(&[out]).unwrap()
}

fn stage_names(s: &State) -> Vec<String> {
    let sch = s.replay().unwrap().schedule;
    sch.stages()
        .iter()
        .map(|st| st.name().to_string())
        .collect()
}

#[test]
fn winograd_cpu_has_three_sketches() {
    let sk = generate_sketches(&winograd_dag(), &cpu()).unwrap();
    // TVM's count: the batched GEMM tiled in place, or through a cache fused at level
    // 1 or 2; the transforms over constant matrices unrolled and tiled in two levels;
    // the matrices inlined
    assert_eq!(sk.len(), 3);
    for s in &sk {
        let sch = s.replay().unwrap().schedule;
        for st in sch.stages() {
            if st.name() == "A" || st.name() == "B" {
                assert_eq!(st.attach, tessera_te::Attach::Inline, "{}", st.name());
            }
        }
    }
    insta::assert_snapshot!(show(&sk));
}

#[test]
fn gpu_matmul_has_one_sketch_with_shared_caches() {
    let a = f32p(&[512, 512], "A");
    let b = f32p(&[512, 512], "B");
    let dag = ComputeDag::new(&[matmul(&a, &b).unwrap()]).unwrap();
    let sk = generate_sketches(&dag, &gpu()).unwrap();
    assert_eq!(sk.len(), 1);
    assert_eq!(
        stage_names(&sk[0]),
        ["A", "A.shared", "B", "B.shared", "C.local", "C"]
    );
    insta::assert_snapshot!(show(&sk));
}

#[test]
fn gpu_matmul_with_a_long_reduction_also_reduces_across_threads() {
    let a = f32p(&[8, 1024], "A");
    let b = f32p(&[1024, 8], "B");
    let dag = ComputeDag::new(&[matmul(&a, &b).unwrap()]).unwrap();
    let sk = generate_sketches(&dag, &gpu()).unwrap();
    // TVM's count: a cross-thread reduction sketch and the tiled one
    assert_eq!(sk.len(), 2);
    insta::assert_snapshot!(show(&sk));
}

#[test]
fn gpu_conv2d_nhwc_bias_relu_has_one_sketch() {
    let dag = conv2d_bias_relu(56, 64, 64);
    let sk = generate_sketches(&dag, &gpu()).unwrap();
    // padding and bias inlined, the padded data and the kernel cached in shared memory,
    // the conv computed in registers inside relu's thread tile
    assert_eq!(sk.len(), 1);
    insta::assert_snapshot!(show(&sk));
}

#[test]
fn gpu_softmax_has_four_sketches() {
    let x = f32p(&[2, 1024], "x");
    let dag = ComputeDag::new(&[softmax(&x).unwrap()]).unwrap();
    let sk = generate_sketches(&dag, &gpu()).unwrap();
    // (cross-thread reduction or not) for the sum × the same for the max
    assert_eq!(sk.len(), 4);
    insta::assert_snapshot!(show(&sk));
}

#[test]
fn gpu_winograd_has_one_sketch() {
    let sk = generate_sketches(&winograd_dag(), &gpu()).unwrap();
    assert_eq!(sk.len(), 1);
    insta::assert_snapshot!(show(&sk));
}

/// An elementwise output that reads two reductions (instance and layer normalization):
/// a sketch's rewrite of the variance's stage (rfactor) made a new tensor on its
/// buffer, and once that schedule was dropped the DAG's own tensor could no longer be
/// found by its buffer, so every later replay failed ("reads buffer
/// `T_instance_norm_var`, which belongs to no live tensor"). Both now get their sketches.
#[test]
fn normalizations_with_two_reductions_have_sketches() {
    use tessera_ir::DataType;
    use tessera_te::ops::{instance_norm, layer_norm};
    use tessera_te::placeholder;
    let f32 = DataType::float32();
    let x = placeholder(&[2, 3, 5, 6], f32, "x").unwrap();
    let g = placeholder(&[3], f32, "g").unwrap();
    let b = placeholder(&[3], f32, "b").unwrap();
    let inorm = ComputeDag::new(&[instance_norm(&x, &g, &b, 1e-5).unwrap()]).unwrap();
    let x2 = placeholder(&[2, 30], f32, "x").unwrap();
    let g2 = placeholder(&[30], f32, "g").unwrap();
    let lnorm = ComputeDag::new(&[layer_norm(&x2, &g2, None, &[1], 1e-5).unwrap()]).unwrap();
    for dag in [inorm, lnorm] {
        let sketches = generate_sketches(&dag, &cpu()).unwrap();
        assert!(sketches.len() > 1, "{}", show(&sketches));
        for s in &sketches {
            s.print().unwrap();
        }
    }
}
