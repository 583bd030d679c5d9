//! Outputs whose size the data decides (issue 61): tests/onnx/export_detector.py's
//! detector, exported with PyTorch's default exporter (scores kept by `NonZero`, the best
//! `min(40, kept)` by a `TopK` whose k is computed, `NonMaxSuppression`, the first 15 of
//! the boxes it keeps, then gathers), compiled once into a module file and run on inputs
//! that keep different numbers of boxes, each run's boxes, scores and labels equal to
//! onnxruntime's; and a NonMaxSuppression that keeps no box.

use crate::common::{tessera, text};
use std::path::{Path, PathBuf};
use tessera_runtime::NDArray;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/onnx/exports/detector")
}

/// The outputs of `file` (an `.npz` tessera or the fixture script wrote), in order.
fn outputs(file: &Path) -> Vec<NDArray> {
    NDArray::load_npz(file)
        .unwrap()
        .into_iter()
        .map(|(_, a)| a)
        .collect()
}

fn same(got: &[NDArray], want: &[NDArray], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g.shape(), w.shape(), "{what}: output {k}");
        assert_eq!(g.dtype(), w.dtype(), "{what}: output {k}");
        g.allclose(w, 1e-4, 1e-5)
            .unwrap_or_else(|e| panic!("{what}: output {k}: {e}"));
    }
}

#[test]
fn one_detector_module_keeps_as_many_boxes_as_each_image_gives() {
    let dir = tempfile::tempdir().unwrap();
    let fx = fixtures();
    let module = dir.path().join("post.tsm");
    let m = module.to_str().unwrap();
    let out = tessera(&[
        "compile",
        "--onnx",
        fx.join("post.onnx").to_str().unwrap(),
        "--out",
        m,
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let mut counts = Vec::new();
    for i in 0..4 {
        let got = dir.path().join(format!("out{i}.npz"));
        let x = fx.join(format!("post_x{i}.npy"));
        let out = tessera(&[
            "run",
            "--module",
            m,
            "--input",
            &format!("x={}", x.display()),
            "--output",
            got.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", text(&out));
        assert!(
            text(&out).contains("outputs of the size each run counts"),
            "{}",
            text(&out)
        );
        let want = outputs(&fx.join(format!("post_out{i}.npz")));
        same(&outputs(&got), &want, &format!("image {i}"));
        counts.push(want[0].shape()[0]);
    }
    // the images keep different numbers of boxes: one module ran them all
    counts.sort_unstable();
    counts.dedup();
    assert!(counts.len() >= 3, "{counts:?}");
}

#[test]
fn a_suppression_that_keeps_no_box_gives_empty_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let fx = fixtures();
    for i in 0..2 {
        let got = dir.path().join(format!("nms{i}.npz"));
        let input = |name: &str| {
            format!(
                "{name}={}",
                fx.join(format!("nms0_{name}{i}.npy")).display()
            )
        };
        let out = tessera(&[
            "run",
            "--onnx",
            fx.join("nms0.onnx").to_str().unwrap(),
            "--input",
            &input("boxes"),
            "--input",
            &input("scores"),
            "--output",
            got.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", text(&out));
        let want = outputs(&fx.join(format!("nms0_out{i}.npz")));
        same(&outputs(&got), &want, &format!("scores {i}"));
    }
    // the second input's scores are all below the threshold
    let none = outputs(&fx.join("nms0_out1.npz"));
    assert_eq!(none[0].shape(), &[0, 4]);
}

/// A tune of a detector (issue 61): its kernels after a selection read the counts, so
/// they are tuned as a range module's, timed with the counts at their bounds; the
/// module built with the log keeps each image's boxes.
#[test]
fn a_detector_is_tuned_as_its_module_runs_and_its_tuned_module_keeps_the_boxes() {
    let dir = tempfile::tempdir().unwrap();
    let fx = fixtures();
    let model = fx.join("post.onnx");
    let log = dir.path().join("d.json");
    let out = tessera(&[
        "tune",
        "--onnx",
        model.to_str().unwrap(),
        "--trials",
        "6",
        "--number",
        "1",
        "--min-repeat-ms",
        "1",
        "--remeasure-top",
        "0",
        "--compare-rounds",
        "3",
        "--json",
        "--log",
        log.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let per_point = report["per_point"]
        .as_array()
        .expect("an estimate per point");
    assert_eq!(per_point.len(), 1, "{report}");
    assert!(text(&out).contains("the counts' bounds"), "{}", text(&out));
    let module = dir.path().join("tuned.tsm");
    let built = tessera(&[
        "compile",
        "--onnx",
        model.to_str().unwrap(),
        "--log",
        log.to_str().unwrap(),
        "--out",
        module.to_str().unwrap(),
    ]);
    assert!(built.status.success(), "{}", text(&built));
    for i in [0, 3] {
        let got = dir.path().join(format!("out{i}.npz"));
        let x = fx.join(format!("post_x{i}.npy"));
        let out = tessera(&[
            "run",
            "--module",
            module.to_str().unwrap(),
            "--input",
            &format!("x={}", x.display()),
            "--output",
            got.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", text(&out));
        let want = outputs(&fx.join(format!("post_out{i}.npz")));
        same(&outputs(&got), &want, &format!("image {i}"));
    }
}
