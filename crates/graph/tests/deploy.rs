//! Module files: a network compiled, saved, read back and run gives the outputs of the
//! network built directly, bit for bit; a module of another format version, for CPU
//! features the host lacks, or damaged, is refused with a message saying so.

mod common;
use common::{read_err, rewrite};
use std::path::Path;
use std::sync::Arc;
use tessera_backends::{CpuBackend, Target};
use tessera_graph::zoo::{self, ZooOptions};
use tessera_graph::{build, compile, CompiledNetwork, GraphError, Layout};
use tessera_runtime::{CpuDevice, NDArray};

fn small_resnet() -> tessera_graph::Graph {
    let opts = ZooOptions {
        layout: Layout::Nhwc,
        image_size: Some(32),
        num_classes: 10,
        ..ZooOptions::default()
    };
    let mut g = zoo::network("resnet-18", &opts).unwrap();
    tessera_graph::passes::optimize(&mut g, Some(Layout::Nhwc)).unwrap();
    g
}

fn run(m: &mut tessera_graph::GraphModule) -> NDArray {
    m.set_random_inputs().unwrap();
    m.run().unwrap();
    m.get_output(0).unwrap()
}

#[test]
fn a_saved_module_runs_as_the_direct_build_and_bad_ones_are_refused() {
    let g = small_resnet();
    let want = run(&mut build(&g, &Target::cpu()).unwrap());

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("resnet18.tsm");
    let backend = CpuBackend::new(Target::cpu());
    let compiled = compile(&g, &backend, None).unwrap();
    let summary = compiled.summary();
    compiled.save(&path).unwrap();
    assert!(!path.with_extension("partial").exists());

    let read = CompiledNetwork::read(&path).unwrap();
    assert_eq!(read.summary(), summary);
    assert_eq!(read.target(), &Target::cpu());
    assert_eq!(read.name(), g.name);
    let got = run(&mut read.load(Arc::new(CpuDevice::new())).unwrap());
    assert_eq!(
        got, want,
        "the module's output differs from the direct build's"
    );

    // another format version
    let other = dir.path().join("v99.tsm");
    rewrite(
        &path,
        &other,
        |mut v| {
            v["version"] = 99.into();
            Some(v)
        },
        "",
    );
    let e = read_err(&other);
    assert!(
        e.contains("module format version 99")
            && e.contains(&format!(
                "reads versions 1 to {}",
                tessera_graph::MODULE_FORMAT_VERSION
            )),
        "{e}"
    );

    // CPU features this host lacks
    rewrite(
        &path,
        &other,
        |mut v| {
            v["cpu_features"] = serde_json::json!(["avx2", "not-a-real-feature"]);
            Some(v)
        },
        "",
    );
    let e = read_err(&other);
    assert!(
        e.contains("CPU features this machine lacks: not-a-real-feature"),
        "{e}"
    );

    // a missing weight, a missing header, a foreign format
    rewrite(&path, &other, Some, "weights/0.bin");
    assert!(
        read_err(&other).contains("has no `weights/0.bin`"),
        "{}",
        read_err(&other)
    );
    rewrite(&path, &other, |_| None, "");
    assert!(read_err(&other).contains("no module.json"));
    rewrite(
        &path,
        &other,
        |mut v| {
            v["format"] = "something-else".into();
            Some(v)
        },
        "",
    );
    assert!(read_err(&other).contains("format is `something-else`"));
    // a step that names a storage the module lacks
    rewrite(
        &path,
        &other,
        |mut v| {
            v["steps"][0]["args"][0] = 100000.into();
            Some(v)
        },
        "",
    );
    assert!(read_err(&other).contains("names a kernel or storage it lacks"));

    // not an archive, and an archive cut short: errors, never panics
    std::fs::write(&other, b"not a module").unwrap();
    assert!(read_err(&other).contains("module"));
    let bytes = std::fs::read(&path).unwrap();
    for cut in [10, bytes.len() / 3, bytes.len() - 700] {
        std::fs::write(&other, &bytes[..cut]).unwrap();
        let e = read_err(&other);
        assert!(!e.is_empty());
    }
}

#[test]
fn reading_a_missing_file_names_it() {
    let e = CompiledNetwork::read(Path::new("/nonexistent/m.tsm")).unwrap_err();
    assert!(matches!(e, GraphError::Io { .. }), "{e}");
    assert!(e.to_string().contains("/nonexistent/m.tsm"));
}

/// Token ids past the end of an embedding table are refused before the run, naming the
/// input, the value and the table — built directly and from a module file alike — where
/// the gather kernel alone would clamp them into a plausible wrong answer. Negative ids
/// count from the end, as ONNX's Gather defines them.
#[test]
fn an_index_input_out_of_range_is_refused_naming_it() {
    use tessera_graph::ir::{Graph, Op, TensorType};
    use tessera_ir::DataType;
    let mut g = Graph::new("embed");
    let ids = g.input("input_ids", TensorType::new(&[1, 4], DataType::int64()));
    let table: Vec<f32> = (0..10 * 3).map(|i| i as f32).collect();
    let wte = g.constant("wte", NDArray::from_slice_f32(&[10, 3], &table).unwrap());
    let e = g
        .op("embedding", Op::Take { axis: 0 }, &[wte, ids])
        .unwrap();
    g.set_outputs(vec![e]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("embed.tsm");
    compile(&g, &CpuBackend::new(Target::cpu()), None)
        .unwrap()
        .save(&path)
        .unwrap();
    let modules = [
        build(&g, &Target::cpu()).unwrap(),
        CompiledNetwork::read(&path)
            .unwrap()
            .load(Arc::new(CpuDevice::new()))
            .unwrap(),
    ];
    for mut m in modules {
        let ok = NDArray::from_slice::<i64>(&[1, 4], &[0, 9, -1, -10]).unwrap();
        m.set_input("input_ids", &ok).unwrap();
        m.run().unwrap();
        let out = m.get_output(0).unwrap().to_f64_vec();
        assert_eq!(&out[3..6], &[27.0, 28.0, 29.0]);
        assert_eq!(&out[6..9], &[27.0, 28.0, 29.0]);
        for bad in [10, -11] {
            let v = NDArray::from_slice::<i64>(&[1, 4], &[1, 2, bad, 3]).unwrap();
            let e = m.set_input("input_ids", &v).unwrap_err().to_string();
            assert!(
                e.contains("input_ids")
                    && e.contains(&format!("index {bad}"))
                    && e.contains("[-10, 10)")
                    && e.contains("`wte`"),
                "{e}"
            );
        }
    }
}

/// Index tuples from a network input (`GatherND`'s, `ScatterND`'s) are checked per
/// component, each against the dimension it indexes, and a `ScatterElements` index
/// against its axis: the kernels clamp them, onnxruntime refuses them.
#[test]
fn index_tuples_and_scatter_indices_out_of_range_are_refused_per_component() {
    use tessera_graph::ir::{Graph, Op, TensorType};
    use tessera_ir::DataType;
    use tessera_te::ops::ScatterReduction;
    let mut g = Graph::new("tuples");
    let table: Vec<f32> = (0..12).map(|i| i as f32).collect();
    let data = g.constant("table", NDArray::from_slice_f32(&[3, 4], &table).unwrap());
    let at = g.input("at", TensorType::new(&[2, 2], DataType::int64()));
    let picked = g
        .op("pick", Op::GatherNd { batch_dims: 0 }, &[data, at])
        .unwrap();
    let cols = g.input("cols", TensorType::new(&[1, 2], DataType::int64()));
    let ones = g.constant(
        "ones",
        NDArray::from_slice_f32(&[1, 2], &[1.0, 1.0]).unwrap(),
    );
    let op = Op::ScatterElements {
        axis: 1,
        reduction: ScatterReduction::Add,
    };
    let added = g.op("add_at", op, &[data, cols, ones]).unwrap();
    g.set_outputs(vec![picked, added]);
    let mut m = build(&g, &Target::cpu()).unwrap();
    let tuples = |v: &[i64]| NDArray::from_slice::<i64>(&[2, 2], v).unwrap();
    m.set_input("at", &tuples(&[2, 3, -3, -4])).unwrap();
    m.set_input(
        "cols",
        &NDArray::from_slice::<i64>(&[1, 2], &[0, -1]).unwrap(),
    )
    .unwrap();
    m.run().unwrap();
    assert_eq!(m.get_output(0).unwrap().to_f64_vec(), [11.0, 0.0]);
    assert_eq!(
        &m.get_output(1).unwrap().to_f64_vec()[..4],
        &[1.0, 1.0, 2.0, 4.0]
    );
    // row 3 of 3 rows; column 4 of 4 (a row index of 3 passes as a column)
    for (bad, at, range) in [
        ([3, 0, 0, 0], "position 0, component 0", "[-3, 3)"),
        ([0, 3, 1, 4], "position 3, component 1", "[-4, 4)"),
    ] {
        let e = m.set_input("at", &tuples(&bad)).unwrap_err().to_string();
        assert!(e.starts_with("input `at`:"), "{e}");
        assert!(
            e.contains(at) && e.contains(range) && e.contains("`table`"),
            "{e}"
        );
    }
    let e = m
        .set_input(
            "cols",
            &NDArray::from_slice::<i64>(&[1, 2], &[1, 4]).unwrap(),
        )
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("index 4") && e.contains("[-4, 4)") && e.contains("add_at"),
        "{e}"
    );
}
