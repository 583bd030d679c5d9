//! Selections (issue 61: NonZero, NonMaxSuppression, Compress), whose count is a size the
//! module writes when it runs: built at counts below the bound, one module keeps as many
//! boxes as each input gives (none included), a build that has nowhere to write the
//! count is refused, and a module file whose counted size or host-step dimensions are
//! edited is refused naming them.

mod common;
use common::edited_err;

use std::path::{Path, PathBuf};
use tessera_backends::{CpuBackend, Target};
use tessera_graph::dynamic::{compile_dynamic, counted_builds};
use tessera_graph::onnx::{import, ImportOptions};
use tessera_graph::{build, passes, CompiledNetwork, Graph};
use tessera_runtime::{CpuDevice, NDArray};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/onnx/exports/detector")
}

fn imported(model: &Path, counts: &[(String, i64)]) -> Graph {
    let mut options = ImportOptions {
        keep_broadcasts: true,
        ..ImportOptions::default()
    };
    options.counts = counts.iter().cloned().collect();
    let bytes = std::fs::read(model).unwrap();
    let mut g = import(&bytes, model.parent().unwrap(), &options).unwrap();
    passes::optimize(&mut g, None).unwrap();
    g
}

/// `model` compiled for every count of its selections, as the driver builds it.
fn compiled(model: &Path) -> CompiledNetwork {
    let (builds, ranges) = counted_builds(imported(model, &[]), |counts| {
        let counts: Vec<(String, i64)> = counts.iter().map(|(k, v)| (k.clone(), *v)).collect();
        Ok::<_, ()>(imported(model, &counts))
    })
    .unwrap();
    compile_dynamic(&builds, &ranges, &CpuBackend::new(Target::cpu())).unwrap()
}

fn npy(name: &str) -> NDArray {
    NDArray::load_npy(fixtures().join(name)).unwrap()
}

#[test]
fn one_module_keeps_as_many_boxes_as_each_input_gives() {
    let net = compiled(&fixtures().join("nms0.onnx"));
    assert!(net.size_ranges().iter().all(|r| r.produced));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nms.tsm");
    net.save(&path).unwrap();
    let mut m = CompiledNetwork::read(&path)
        .unwrap()
        .load(std::sync::Arc::new(CpuDevice::new()))
        .unwrap();
    // one module, inputs that keep one box and none, in either order
    for i in [0, 1, 0] {
        m.set_input("boxes", &npy(&format!("nms0_boxes{i}.npy")))
            .unwrap();
        m.set_input("scores", &npy(&format!("nms0_scores{i}.npy")))
            .unwrap();
        m.run().unwrap();
        let got = m.get_output(0).unwrap();
        let want = NDArray::load_npz(fixtures().join(format!("nms0_out{i}.npz")))
            .unwrap()
            .remove(0)
            .1;
        assert_eq!(got.shape(), want.shape(), "input {i}");
        got.allclose(&want, 1e-5, 1e-6).unwrap();
    }
}

#[test]
fn a_build_with_nowhere_to_write_the_count_is_refused() {
    let g = imported(&fixtures().join("nms0.onnx"), &[]);
    let err = build(&g, &Target::cpu()).err().unwrap().to_string();
    assert!(
        err.contains("selects a number of values only the run tells"),
        "{err}"
    );
}

#[test]
fn a_module_file_whose_counts_are_edited_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("post.tsm");
    compiled(&fixtures().join("post.onnx")).save(&path).unwrap();
    type Edit = fn(&mut serde_json::Value);
    let edits: [(&str, Edit); 4] = [
        // a selection that counts a size the module lacks
        ("count is none the module has", |v| {
            for s in v["steps"].as_array_mut().unwrap() {
                if s["host"]["op"]["op"] == "select" {
                    s["host"]["op"]["size"] = 99.into();
                }
            }
        }),
        // a counted size no step counts (the TopK's k, no longer written)
        ("counted by 0 steps", |v| {
            for s in v["steps"].as_array_mut().unwrap() {
                if let Some(host) = s["host"].as_object_mut() {
                    host.remove("count");
                }
            }
        }),
        // a TopK's k written to a size that is none
        ("k is none the module has", |v| {
            for s in v["steps"].as_array_mut().unwrap() {
                if s["host"].get("count").is_some() {
                    s["host"]["count"] = 99.into();
                }
            }
        }),
        // dimensions a host step's values lack
        ("names dimensions its values lack", |v| {
            for s in v["steps"].as_array_mut().unwrap() {
                if let Some(dims) = s["host"].get_mut("dims") {
                    dims[0] = serde_json::json!([{ "dim": 7, "sizes": [0], "offset": 0 }]);
                }
            }
        }),
    ];
    for (what, edit) in edits {
        let e = edited_err(&path, &dir.path().join("bad.tsm"), edit);
        assert!(e.contains(what), "{what}: {e}");
    }
}
