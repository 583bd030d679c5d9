//! Selections (issue 61: NonZero, NonMaxSuppression, Compress), whose count is a size the
//! module writes when it runs: built at counts below the bound, one module keeps as many
//! boxes as each input gives (none included), a build that has nowhere to write the
//! count is refused, a module file whose counted size or host-step dimensions are
//! edited is refused naming them, and tuned schedules apply to the groups that read no
//! size.

mod common;
use common::edited_err;

use std::path::{Path, PathBuf};
use tessera_backends::{CpuBackend, Target};
use tessera_graph::dynamic::{compile_dynamic, compile_dynamic_with, counted_builds};
use tessera_graph::executor::BuildContext;
use tessera_graph::fuse::GroupCompute;
use tessera_graph::onnx::{import, ImportOptions};
use tessera_graph::{build, passes, CompiledNetwork, Graph, ScheduleHook};
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

/// A hook that schedules every group it is asked for naively (one loop nest, nothing
/// inlined) and notes whether the group read the runtime sizes.
struct Naive {
    asked: std::sync::Mutex<Vec<bool>>,
}

impl ScheduleHook for Naive {
    fn schedule(
        &self,
        _graph: &Graph,
        group: &GroupCompute,
        _ctx: &BuildContext,
    ) -> Option<tessera_te::Schedule> {
        let reads_sizes = group.placeholders.iter().any(|p| p.name() == "sizes");
        self.asked.lock().unwrap().push(reads_sizes);
        tessera_te::Schedule::create(&[group.output.clone()]).ok()
    }
}

/// A module for counted sizes asks its hook (the history best) for every group: those
/// that read no size have a fixed build's workload, those that read them their own
/// (what a tune for the ranges measures); with a schedule of the hook's for each (loops
/// that run to the counts whatever the schedule), it runs right.
#[test]
fn a_hook_is_asked_for_every_group_and_the_module_runs_right_with_its_schedules() {
    let model = fixtures().join("post.onnx");
    let (builds, ranges) = counted_builds(imported(&model, &[]), |counts| {
        let counts: Vec<(String, i64)> = counts.iter().map(|(k, v)| (k.clone(), *v)).collect();
        Ok::<_, ()>(imported(&model, &counts))
    })
    .unwrap();
    let hook = Naive {
        asked: std::sync::Mutex::new(Vec::new()),
    };
    let net = compile_dynamic_with(
        &builds,
        &ranges,
        &CpuBackend::new(Target::cpu()),
        Some(&hook),
    )
    .unwrap();
    let asked = hook.asked.into_inner().unwrap();
    assert!(
        asked.contains(&false),
        "the convolutions are fixed groups: {asked:?}"
    );
    assert!(
        asked.contains(&true),
        "the gathers read the counts: {asked:?}"
    );
    let mut m = net.load(std::sync::Arc::new(CpuDevice::new())).unwrap();
    for i in [1, 3] {
        m.set_input("x", &npy(&format!("post_x{i}.npy"))).unwrap();
        m.run().unwrap();
        let want = NDArray::load_npz(fixtures().join(format!("post_out{i}.npz"))).unwrap();
        for (k, (_, w)) in want.iter().enumerate() {
            let got = m.get_output(k).unwrap();
            assert_eq!(got.shape(), w.shape(), "image {i}, output {k}");
            got.allclose(w, 1e-4, 1e-5).unwrap();
        }
    }
}
