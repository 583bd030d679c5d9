//! One module for every size of a range (issue 61's first part): a network built at
//! the largest size and two smaller ones compiles once, then runs every size of the
//! range, each against the reference interpreter of the network built at that size; a
//! module file keeps the range; what would give a wrong answer at another size is
//! refused at compile time.

mod common;
use common::{edited_err, rewrite, rnd};

use tessera_backends::{CpuBackend, Target};
use tessera_graph::dynamic::{compile_dynamic, SizeRange};
use tessera_graph::passes::constant_f32;
use tessera_graph::reference::interpret;
use tessera_graph::{Binary, CompiledNetwork, Graph, Op, TensorType};
use tessera_runtime::{CpuDevice, NDArray};

const WIDTH: usize = 16;

fn konst(
    g: &mut Graph,
    name: &str,
    shape: &[usize],
    seed: u64,
    scale: f32,
) -> petgraph::stable_graph::NodeIndex {
    g.constant(name, constant_f32(shape, |i| scale * rnd(seed, i)).unwrap())
}

/// A decoder layer over `s` tokens of width 16 in two heads: layer norm, a projection,
/// heads, scores with a causal mask (a constant that follows the size), softmax, the
/// weighted values, heads merged, an output projection and the residual.
fn decoder(s: usize) -> Graph {
    layer(s, true)
}

/// The same layer without the mask (an encoder's): every key is read, so the softmax
/// and the weighted sum must stop at the size.
fn encoder(s: usize) -> Graph {
    layer(s, false)
}

fn layer(s: usize, causal: bool) -> Graph {
    let mut g = Graph::new(if causal { "decoder" } else { "encoder" });
    let x = g.input("tokens", TensorType::f32(&[s as i64, WIDTH as i64]));
    let gamma = konst(&mut g, "gamma", &[WIDTH], 1, 0.5);
    let beta = konst(&mut g, "beta", &[WIDTH], 2, 0.1);
    let ln = g
        .op(
            "ln",
            Op::LayerNorm {
                axes: vec![-1],
                epsilon: 1e-5,
            },
            &[x, gamma, beta],
        )
        .unwrap();
    let wq = konst(&mut g, "wq", &[WIDTH, WIDTH], 3, 0.3);
    let q = g.op("q", Op::Dense, &[ln, wq]).unwrap();
    let heads = g
        .op(
            "heads",
            Op::Reshape {
                shape: vec![s as i64, 2, 8],
            },
            &[q],
        )
        .unwrap();
    let qh = g
        .op(
            "qh",
            Op::Transpose {
                axes: vec![1, 0, 2],
            },
            &[heads],
        )
        .unwrap();
    let kt = g
        .op(
            "kt",
            Op::Transpose {
                axes: vec![1, 2, 0],
            },
            &[heads],
        )
        .unwrap();
    let mut scores = g.op("scores", Op::MatMul, &[qh, kt]).unwrap();
    if causal {
        let mask = g.constant(
            "causal",
            constant_f32(&[s, s], |i| if i % s > i / s { -1e9 } else { 0.0 }).unwrap(),
        );
        scores = g
            .op("masked", Op::Binary(Binary::Add), &[scores, mask])
            .unwrap();
    }
    let p = g.op("p", Op::Softmax { axis: -1 }, &[scores]).unwrap();
    let mixed = g.op("mixed", Op::MatMul, &[p, qh]).unwrap();
    let back = g
        .op(
            "back",
            Op::Transpose {
                axes: vec![1, 0, 2],
            },
            &[mixed],
        )
        .unwrap();
    let merged = g
        .op(
            "merged",
            Op::Reshape {
                shape: vec![s as i64, WIDTH as i64],
            },
            &[back],
        )
        .unwrap();
    let wo = konst(&mut g, "wo", &[WIDTH, WIDTH], 4, 0.3);
    let o = g.op("o", Op::Dense, &[merged, wo]).unwrap();
    let out = g.op("residual", Op::Binary(Binary::Add), &[o, x]).unwrap();
    g.set_outputs(vec![out]);
    g
}

fn tokens(s: usize, seed: u64) -> NDArray {
    constant_f32(&[s, WIDTH], |i| rnd(seed, i)).unwrap()
}

fn range(min: i64, max: i64) -> SizeRange {
    SizeRange::new("tokens", min, max)
}

fn compiled(
    max: usize,
    net: fn(usize) -> Graph,
) -> Result<CompiledNetwork, tessera_graph::GraphError> {
    let builds: Vec<(Vec<i64>, Graph)> = [max, max - 1, max / 2]
        .into_iter()
        .map(|s| (vec![s as i64], net(s)))
        .collect();
    compile_dynamic(
        &builds,
        &[range(1, max as i64)],
        &CpuBackend::new(Target::cpu()),
    )
}

#[test]
fn one_module_runs_every_size_of_its_range() {
    runs_every_size(decoder);
    runs_every_size(encoder);
}

fn runs_every_size(layer: fn(usize) -> Graph) {
    let max = 13;
    let net = compiled(max, layer).unwrap();
    assert_eq!(net.size_ranges(), &[range(1, max as i64)]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("decoder.tsm");
    net.save(&path).unwrap();
    for (what, net) in [
        ("built", net),
        ("read back", CompiledNetwork::read(&path).unwrap()),
    ] {
        let mut m = net.load(std::sync::Arc::new(CpuDevice::new())).unwrap();
        // the largest size first, then smaller ones: nothing of a longer run may leak
        for s in [max, 1, 2, 7, 12, 5, max] {
            let x = tokens(s, 40 + s as u64);
            m.set_input("tokens", &x).unwrap();
            m.run().unwrap();
            let got = m.get_output(0).unwrap();
            assert_eq!(got.shape(), &[s, WIDTH], "{what}, size {s}");
            let want = interpret(&layer(s), &[("tokens", &x)]).unwrap().remove(0);
            got.allclose(&want, 1e-4, 1e-5)
                .unwrap_or_else(|e| panic!("{what}, size {s}: {e}"));
        }
    }
}

#[test]
fn a_module_file_whose_runtime_size_names_what_it_lacks_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("decoder.tsm");
    compiled(9, decoder).unwrap().save(&path).unwrap();
    let header: serde_json::Value = {
        let out = dir.path().join("copy.tsm");
        let seen = std::sync::Mutex::new(None);
        rewrite(
            &path,
            &out,
            |v| {
                *seen.lock().unwrap() = Some(v.clone());
                Some(v)
            },
            "",
        );
        seen.into_inner().unwrap().unwrap()
    };
    assert_eq!(header["version"], tessera_graph::MODULE_FORMAT_VERSION);
    assert_eq!(header["dynamic"]["ranges"][0]["max"], 9);
    type Edit = fn(&mut serde_json::Value);
    let edits: [(&str, Edit); 5] = [
        ("does not hold it", |v| {
            v["dynamic"]["sizes_storage"] = 999.into()
        }),
        ("is empty", |v| v["dynamic"]["ranges"][0]["min"] = 10.into()),
        ("input `tokens`", |v| {
            v["dynamic"]["inputs"][0][1][0]["dim"] = 1.into()
        }),
        ("input `tokens`", |v| {
            v["dynamic"]["inputs"][0][1][0]["sizes"] = serde_json::json!([0, 0])
        }),
        ("output dimensions", |v| {
            v["dynamic"]["outputs"] = serde_json::json!([])
        }),
    ];
    for (what, edit) in edits {
        let e = edited_err(&path, &dir.path().join("bad.tsm"), edit);
        assert!(
            e.contains("the runtime size") && e.contains(what),
            "{what}: {e}"
        );
    }
}

#[test]
fn inputs_outside_the_range_or_of_another_shape_are_refused() {
    let net = compiled(9, decoder).unwrap();
    let mut m = net.load(std::sync::Arc::new(CpuDevice::new())).unwrap();
    let e = m
        .set_input("tokens", &tokens(10, 1))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("tokens = 10 is outside the module's range 1..9"),
        "{e}"
    );
    let e = m
        .set_input("tokens", &constant_f32(&[4, 8], |_| 0.0).unwrap())
        .unwrap_err()
        .to_string();
    assert!(e.contains("dimension 1 is 16, not 8"), "{e}");
    // nothing given: no run
    let e = m.run().unwrap_err().to_string();
    assert!(e.contains("not set"), "{e}");
}

/// The mean of the tokens: its divisor follows the size.
fn mean_pool(s: usize) -> Graph {
    let mut g = Graph::new("pool");
    let x = g.input("tokens", TensorType::f32(&[s as i64, WIDTH as i64]));
    let m = g
        .op(
            "mean",
            Op::Reduce {
                kind: tessera_te::ops::ReduceKind::Mean,
                axes: vec![0],
                keepdims: false,
            },
            &[x],
        )
        .unwrap();
    g.set_outputs(vec![m]);
    g
}

/// The last token: an index that follows the size (`size − 1`, read at run time).
fn last_token(s: usize) -> Graph {
    let mut g = Graph::new("last");
    let x = g.input("tokens", TensorType::f32(&[s as i64, WIDTH as i64]));
    let t = g
        .op(
            "last",
            Op::StridedSlice {
                begin: vec![s as i64 - 1, 0],
                end: vec![s as i64, WIDTH as i64],
                strides: vec![1, 1],
            },
            &[x],
        )
        .unwrap();
    g.set_outputs(vec![t]);
    g
}

/// A constant whose values follow the size, not only its shape.
fn scaled(s: usize) -> Graph {
    let mut g = Graph::new("scaled");
    let x = g.input("tokens", TensorType::f32(&[s as i64, WIDTH as i64]));
    let c = g.constant(
        "ramp",
        constant_f32(&[s, 1], |i| i as f32 / s as f32).unwrap(),
    );
    let y = g.op("y", Op::Binary(Binary::Mul), &[x, c]).unwrap();
    g.set_outputs(vec![y]);
    g
}

#[test]
fn an_index_that_follows_the_size_is_read_at_run_time() {
    let mut m = compiled(9, last_token)
        .unwrap()
        .load(std::sync::Arc::new(CpuDevice::new()))
        .unwrap();
    for s in [9, 1, 4, 8] {
        let x = tokens(s, 7 + s as u64);
        m.set_input("tokens", &x).unwrap();
        m.run().unwrap();
        let got = m.get_output(0).unwrap();
        let want = interpret(&last_token(s), &[("tokens", &x)])
            .unwrap()
            .remove(0);
        assert_eq!(got.shape(), &[1, WIDTH]);
        got.allclose(&want, 0.0, 0.0)
            .unwrap_or_else(|e| panic!("size {s}: {e}"));
    }
}

#[test]
fn what_would_be_wrong_at_another_size_is_refused() {
    for (net, what) in [
        (mean_pool as fn(usize) -> Graph, "depends on the size"),
        (scaled, "constant `ramp`"),
    ] {
        let e = compiled(9, net).unwrap_err().to_string();
        assert!(e.contains(what), "{e}");
        assert!(e.contains("a network for tokens in 1..9"), "{e}");
    }
}

#[test]
fn a_module_file_of_format_version_3_still_runs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("decoder.tsm");
    compiled(9, decoder).unwrap().save(&path).unwrap();
    // version 3 held one range and each dimension as a number
    let old = dir.path().join("v3.tsm");
    rewrite(
        &path,
        &old,
        |mut v| {
            let d = v["dynamic"].take();
            let dims = |l: &serde_json::Value| -> serde_json::Value {
                l.as_array()
                    .unwrap()
                    .iter()
                    .map(|f| f["dim"].clone())
                    .collect()
            };
            v["version"] = 3.into();
            v["dynamic"] = serde_json::json!({
                "range": d["ranges"][0],
                "sizes_storage": d["sizes_storage"],
                "inputs": d["inputs"].as_array().unwrap().iter()
                    .map(|i| serde_json::json!([i[0], dims(&i[1])])).collect::<Vec<_>>(),
                "outputs": d["outputs"].as_array().unwrap().iter()
                    .map(dims).collect::<Vec<_>>(),
            });
            Some(v)
        },
        "",
    );
    let mut m = CompiledNetwork::read(&old)
        .unwrap()
        .load(std::sync::Arc::new(CpuDevice::new()))
        .unwrap();
    let x = tokens(5, 3);
    m.set_input("tokens", &x).unwrap();
    m.run().unwrap();
    let want = interpret(&decoder(5), &[("tokens", &x)]).unwrap().remove(0);
    m.get_output(0)
        .unwrap()
        .allclose(&want, 1e-4, 1e-5)
        .unwrap();
}

/// One attention step of a decoder with a cache of `p` keys (`p = 0`: none) and `t` new
/// tokens: the keys are the cache and the new tokens' projection concatenated (the
/// `present` output, `[p + t, 16]`), the new tokens attend to all of them.
fn cache_step(p: usize, t: usize) -> Graph {
    let mut g = Graph::new("step");
    let x = g.input("tokens", TensorType::f32(&[t as i64, WIDTH as i64]));
    let wk = konst(&mut g, "wk", &[WIDTH, WIDTH], 5, 0.3);
    let k = g.op("k", Op::Dense, &[x, wk]).unwrap();
    let keys = if p == 0 {
        k
    } else {
        let past = g.input("past", TensorType::f32(&[p as i64, WIDTH as i64]));
        g.op("present", Op::Concat { axis: 0 }, &[past, k]).unwrap()
    };
    let kt = g
        .op("kt", Op::Transpose { axes: vec![1, 0] }, &[keys])
        .unwrap();
    let scores = g.op("scores", Op::MatMul, &[x, kt]).unwrap();
    let probs = g.op("probs", Op::Softmax { axis: -1 }, &[scores]).unwrap();
    let out = g.op("out", Op::MatMul, &[probs, keys]).unwrap();
    g.set_outputs(vec![out, keys]);
    g
}

#[test]
fn two_sizes_a_cache_and_new_tokens_run_every_pair_from_one_module() {
    let (pm, tm) = (12i64, 5i64);
    let points = [
        vec![pm, tm],
        vec![pm - 1, tm],
        vec![pm - 3, tm],
        vec![pm, tm - 1],
        vec![pm, tm - 2],
        vec![pm - 1, tm - 1],
    ];
    let builds: Vec<(Vec<i64>, Graph)> = points
        .iter()
        .map(|p| (p.clone(), cache_step(p[0] as usize, p[1] as usize)))
        .collect();
    let ranges = [SizeRange::new("past", 0, pm), SizeRange::new("seq", 1, tm)];
    let net = compile_dynamic(&builds, &ranges, &CpuBackend::new(Target::cpu())).unwrap();
    let mut m = net.load(std::sync::Arc::new(CpuDevice::new())).unwrap();
    // prefill on an empty cache, then steps of one token; then other pairs
    let mut pairs = vec![(0usize, 5usize)];
    pairs.extend((5..12).map(|p| (p, 1)));
    pairs.extend([(12, 5), (3, 2), (0, 1), (12, 1)]);
    for (p, t) in pairs {
        let x = tokens(t, 90 + (p * 7 + t) as u64);
        let past = constant_f32(&[p, WIDTH], |i| rnd(11 + p as u64, i)).unwrap();
        m.set_input("tokens", &x).unwrap();
        m.set_input("past", &past).unwrap();
        m.run().unwrap();
        let mut given = vec![("tokens", &x)];
        if p > 0 {
            given.push(("past", &past));
        }
        let want = interpret(&cache_step(p, t), &given).unwrap();
        for (k, w) in want.iter().enumerate() {
            let got = m.get_output(k).unwrap();
            assert_eq!(got.shape(), w.shape(), "past {p}, new {t}: output {k}");
            got.allclose(w, 1e-4, 1e-5)
                .unwrap_or_else(|e| panic!("past {p}, new {t}: output {k}: {e}"));
        }
    }
    // a step's keys fed back as the next step's cache, on the device
    let x = tokens(2, 5);
    m.set_input("tokens", &x).unwrap();
    m.set_input("past", &constant_f32(&[3, WIDTH], |i| rnd(8, i)).unwrap())
        .unwrap();
    m.run().unwrap();
    let keys = m.get_output(1).unwrap();
    m.set_input_from_output("past", 1).unwrap();
    // the outputs are still the run's, whatever is set since
    assert_eq!(m.get_output(1).unwrap().shape(), &[5, WIDTH]);
    let x = tokens(1, 6);
    m.set_input("tokens", &x).unwrap();
    m.run().unwrap();
    let want = interpret(&cache_step(5, 1), &[("tokens", &x), ("past", &keys)]).unwrap();
    m.get_output(0)
        .unwrap()
        .allclose(&want[0], 1e-4, 1e-5)
        .unwrap();
    // six keys are no tokens of a range up to five
    let e = m
        .set_input_from_output("tokens", 1)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("seq = 6 is outside the module's range 1..5"),
        "{e}"
    );
    // the two inputs must tell one pair: a past outside its range is refused
    let e = m
        .set_input("past", &constant_f32(&[13, WIDTH], |_| 0.0).unwrap())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("past = 13 is outside the module's range 0..12"),
        "{e}"
    );
}
