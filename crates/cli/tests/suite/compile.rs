//! `tessera compile` and `tessera run --module`: a network compiled into one file runs in
//! a fresh process without the C compiler and gives the output of `tessera run` on the
//! same network; a module for another target, or a file that is not one, is one line.

use crate::common::{command, ok, one_line_error, tessera, text};

#[test]
fn a_compiled_module_runs_without_the_compiler_and_matches_run() {
    let dir = tempfile::tempdir().unwrap();
    let module = dir.path().join("r18.tsm");
    let (a, b) = (dir.path().join("a.npy"), dir.path().join("b.npy"));
    let net = ["--network", "resnet-18", "--image-size", "32"];
    let m = module.to_str().unwrap();

    let out = tessera(&[&["compile"][..], &net, &["--out", m]].concat());
    assert!(out.status.success(), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("tessera run --module"));

    let out = tessera(&[&["run"][..], &net, &["--output", a.to_str().unwrap()]].concat());
    assert!(out.status.success(), "{}", text(&out));

    // a fresh process that could not call a compiler if it tried
    let empty = dir.path().join("no-tools");
    std::fs::create_dir(&empty).unwrap();
    let out = command(&["run", "--module", m, "--output", b.to_str().unwrap()])
        .env("PATH", &empty)
        .env("CC", empty.join("cc"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("loaded `resnet-18` for `cpu`"), "{stdout}");
    assert_eq!(
        std::fs::read(&a).unwrap(),
        std::fs::read(&b).unwrap(),
        "the module's output differs from `tessera run`'s"
    );

    // another target, a network as well as a module, not a module
    let err = one_line_error(&tessera(&[
        "run",
        "--module",
        m,
        "--target",
        "cpu -mcpu=skylake",
    ]));
    assert!(
        err.contains("was compiled for `cpu`, not `cpu -mcpu=skylake`"),
        "{err}"
    );
    let out = tessera(&["run", "--module", m, "--network", "resnet-18"]);
    assert!(!out.status.success());
    let bogus = dir.path().join("bogus.tsm");
    std::fs::write(&bogus, b"hello").unwrap();
    let err = one_line_error(&tessera(&["run", "--module", bogus.to_str().unwrap()]));
    assert!(err.contains("not a tessera module"), "{err}");
}

#[test]
fn a_network_too_large_for_the_machine_is_one_line() {
    // 100,000 images of 224×224×3: past 32-bit indices
    let err = one_line_error(&tessera(&[
        "run",
        "--network",
        "resnet-18",
        "--batch",
        "100000",
    ]));
    assert!(
        err.contains("is too large: kernels index with 32 bits"),
        "{err}"
    );
}

/// tests/onnx/export_seq.py's models: a BERT encoder with a padding mask and a GPT-2
/// decoder whose inputs' sequence is symbolic, with inputs and onnxruntime's outputs at
/// sizes 3, 17 and 48; the BERT encoder with a symbolic batch too, at (batch, length)
/// pairs.
fn seq_exports() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/onnx/exports")
}

#[test]
fn one_module_runs_every_sequence_length_of_its_range() {
    let dir = tempfile::tempdir().unwrap();
    let exports = seq_exports();
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(exports.join("seq_manifest.json")).unwrap()).unwrap();
    for model in manifest.as_array().unwrap() {
        let name = model["name"].as_str().unwrap();
        let onnx = exports.join(model["model"].as_str().unwrap());
        let module = dir.path().join(format!("{name}.tsm"));
        let mut args: Vec<String> = vec![
            "compile".into(),
            "--onnx".into(),
            onnx.display().to_string(),
        ];
        // a batch and a length (the first input names them), or a length alone
        let batched = model["runs"][0].get("batch").is_some();
        for (k, input) in model["inputs"].as_array().unwrap().iter().enumerate() {
            let input = input.as_str().unwrap();
            args.push("--shape".into());
            args.push(match (batched, k) {
                (false, _) => format!("{input}=1,1..48"),
                (true, 0) => format!("{input}=b:1..4,s:1..48"),
                (true, _) => format!("{input}=b,s"),
            });
        }
        args.extend(["--out".into(), module.display().to_string()]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = tessera(&args);
        assert!(out.status.success(), "{name}: {}", text(&out));
        for run in model["runs"].as_array().unwrap() {
            let size = match run.get("batch") {
                Some(b) => format!("{b}x{}", run["size"]),
                None => run["size"].to_string(),
            };
            let got = dir.path().join(format!("{name}_{size}.npy"));
            let mut args: Vec<String> = vec![
                "run".into(),
                "--module".into(),
                module.display().to_string(),
            ];
            for (input, file) in run["inputs"].as_object().unwrap() {
                args.push("--input".into());
                args.push(format!(
                    "{input}={}",
                    exports.join(file.as_str().unwrap()).display()
                ));
            }
            args.extend(["--output".into(), got.display().to_string()]);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = tessera(&args);
            assert!(out.status.success(), "{name} at {size}: {}", text(&out));
            let said = match batched {
                false => "one module for input_ids[1] in 1..48",
                true => "one module for b in 1..4, s in 1..48",
            };
            assert!(
                String::from_utf8_lossy(&out.stdout).contains(said),
                "{}",
                text(&out)
            );
            let got = tessera_runtime::NDArray::load_npy(&got).unwrap();
            let want =
                tessera_runtime::NDArray::load_npy(exports.join(run["output"].as_str().unwrap()))
                    .unwrap();
            assert_eq!(got.shape(), want.shape(), "{name} at {size}");
            got.allclose(&want, 1e-4, 1e-5)
                .unwrap_or_else(|e| panic!("{name} at {size}: {e}"));
        }
    }
    // a size outside the range, and ranges of two sizes in one module, are one line
    let bert = exports.join("bert_seq/model.onnx");
    let module = dir.path().join("bert_seq.tsm");
    // the one-line error of the module run on token ids `ids`
    let ids_error = |ids: &[i64]| {
        let file = dir.path().join("ids.npy");
        tessera_runtime::NDArray::from_slice::<i64>(&[1, ids.len()], ids)
            .unwrap()
            .save_npy(&file)
            .unwrap();
        one_line_error(&tessera(&[
            "run",
            "--module",
            module.to_str().unwrap(),
            "--input",
            &format!("input_ids={}", file.display()),
        ]))
    };
    let err = ids_error(&[1; 49]);
    assert!(
        err.contains("49 is outside the module's range 1..48"),
        "{err}"
    );
    // a token id past the vocabulary, at a length of the range: refused as in a build
    // of one length, naming the input and the value
    let err = ids_error(&[1, 2, 500]);
    assert!(
        err.contains("input `input_ids`: holds the index 500"),
        "{err}"
    );
    let err = one_line_error(&tessera(&[
        "compile",
        "--onnx",
        bert.to_str().unwrap(),
        "--shape",
        "input_ids=1,seq:1..48",
        "--shape",
        "attention_mask=1,seq:1..32",
        "--out",
        module.to_str().unwrap(),
    ]));
    assert!(
        err.contains("seq is 1..48 where it is given before, not 1..32"),
        "{err}"
    );
}

/// A tune for a range (issue 61): the kernels whose loops run to the length are their
/// own tasks (their DAGs read the sizes), each candidate timed at the sample's points;
/// the log's records keep the points and each one's time, the report gives the estimate
/// per point, and the module compiled with the log applies them and still matches
/// onnxruntime at every length.
#[test]
fn a_tune_for_a_range_times_its_kernels_at_the_sample_and_its_module_applies_them() {
    let dir = tempfile::tempdir().unwrap();
    let exports = seq_exports().join("bert_seq");
    let bert = exports.join("model.onnx");
    let range = [
        "--onnx",
        bert.to_str().unwrap(),
        "--shape",
        "input_ids=1,1..48",
        "--shape",
        "attention_mask=1,1..48",
    ];
    // the tasks: those that read the sizes say so in their DAGs
    let listed = ok(tessera(&[&["tasks"][..], &range].concat()));
    assert!(listed.contains("sizes"), "{listed}");
    let log = dir.path().join("range.json");
    let tune = [
        &["tune"][..],
        &range,
        &[
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
            "--sample",
            "48",
            "--sample",
            "5",
            "--json",
            "--log",
            log.to_str().unwrap(),
        ],
    ]
    .concat();
    let out = tessera(&tune);
    // the in-network check runs the module at the sample's points
    let said = text_of(&out);
    assert!(said.contains("in-network check: "), "{said}");
    let report: serde_json::Value = serde_json::from_str(&ok(out)).unwrap();
    let per_point = report["per_point"]
        .as_array()
        .expect("an estimate per point");
    assert_eq!(per_point.len(), 2, "{report}");
    assert_eq!(per_point[0]["point"]["input_ids[1]"], 48, "{report}");
    assert_eq!(per_point[1]["point"]["input_ids[1]"], 5, "{report}");
    for p in per_point {
        assert!(p["untuned_ms"].as_f64().unwrap() > 0.0, "{report}");
        assert!(p["tuned_ms"].as_f64().unwrap() > 0.0, "{report}");
    }
    // the untuned and tuned modules compared at each point (where a group is tuned)
    match &report["network"] {
        serde_json::Value::Array(at) => {
            let points: Vec<&str> = at.iter().map(|c| c["point"].as_str().unwrap()).collect();
            assert_eq!(points, ["input_ids[1]=48", "input_ids[1]=5"], "{report}");
            assert!(
                at.iter().all(|c| c["applied"].as_u64() > Some(0)),
                "{report}"
            );
        }
        other => assert_eq!(other["applied"], 0, "{report}"),
    }
    // every measurement of a kernel that reads the sizes was timed at both points, and
    // its record keeps the range
    let text = std::fs::read_to_string(&log).unwrap();
    let records: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let at_points: Vec<&serde_json::Value> = records
        .iter()
        .filter_map(|r| r["result"].get("at_points"))
        .collect();
    assert!(!at_points.is_empty(), "{text}");
    for a in &at_points {
        assert_eq!(a["ranges"][0], "input_ids[1] in 1..48", "{a}");
        assert_eq!(a["points"][0][0], 48, "{a}");
        assert_eq!(a["points"][1][0], 5, "{a}");
        assert_eq!(a["means"].as_array().unwrap().len(), 2, "{a}");
    }
    // `tessera records show` gives a range record's time at each point
    let shown: serde_json::Value = serde_json::from_str(&ok(tessera(&[
        "records",
        "show",
        log.to_str().unwrap(),
        "--json",
    ])))
    .unwrap();
    let ranged: Vec<&serde_json::Value> = (shown.as_array().unwrap().iter())
        .filter(|r| !r["per_point"].is_null())
        .collect();
    assert!(!ranged.is_empty(), "{shown}");
    for r in ranged {
        assert_eq!(r["per_point"]["ranges"][0], "input_ids[1] in 1..48", "{r}");
        assert_eq!(r["per_point"]["points"].as_array().unwrap().len(), 2, "{r}");
    }
    // the module built with the log applies its records and matches at every length
    let module = dir.path().join("tuned.tsm");
    let built = tessera(
        &[
            &["compile"][..],
            &range,
            &[
                "--log",
                log.to_str().unwrap(),
                "--out",
                module.to_str().unwrap(),
            ],
        ]
        .concat(),
    );
    let said = text_of(&built);
    assert!(said.contains("applied the history best"), "{said}");
    for size in [3, 17, 48] {
        let got = dir.path().join(format!("out{size}.npy"));
        ok(tessera(&[
            "run",
            "--module",
            module.to_str().unwrap(),
            "--input",
            &format!(
                "input_ids={}",
                exports.join(format!("input_ids_{size}.npy")).display()
            ),
            "--input",
            &format!(
                "attention_mask={}",
                exports.join(format!("attention_mask_{size}.npy")).display()
            ),
            "--output",
            got.to_str().unwrap(),
        ]));
        let got = tessera_runtime::NDArray::load_npy(&got).unwrap();
        let want =
            tessera_runtime::NDArray::load_npy(exports.join(format!("output_{size}.npy"))).unwrap();
        got.allclose(&want, 1e-4, 1e-5)
            .unwrap_or_else(|e| panic!("at {size}: {e}"));
    }
    // a sample outside the range is one line
    let mut bad = tune.clone();
    let at = bad.iter().position(|a| *a == "5").unwrap();
    bad[at] = "50";
    assert!(one_line_error(&tessera(&bad)).contains("input_ids[1] = 50 is outside"));
}

/// The text of a run that must succeed, both streams.
fn text_of(out: &std::process::Output) -> String {
    assert!(out.status.success(), "tessera failed:\n{}", text(out));
    text(out)
}

/// tests/onnx/export_kv.py's fixture: a tiny GPT-2 with its past keys and values as
/// inputs and presents as outputs, a prompt, and onnxruntime's logits and tokens for the
/// prompt prefilled on an empty cache and 3 greedy decode steps.
#[test]
fn a_decoder_with_its_cache_prefills_and_decodes_from_one_module() {
    let dir = tempfile::tempdir().unwrap();
    let kv = seq_exports().join("gpt2_kv");
    let module = dir.path().join("gpt2_kv.tsm");
    let mut args: Vec<String> = [
        "compile",
        "--onnx",
        kv.join("model.onnx").to_str().unwrap(),
        "--shape",
        "input_ids=1,seq:1..8",
        "--shape",
        "position_ids=1,seq",
        "--shape",
        "attention_mask=1,past+seq",
        "--out",
        module.to_str().unwrap(),
    ]
    .map(String::from)
    .to_vec();
    for layer in 0..2 {
        for part in ["key", "value"] {
            args.push("--shape".into());
            args.push(format!("past_key_values.{layer}.{part}=1,2,past:0..16,16"));
        }
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = tessera(&args);
    assert!(out.status.success(), "{}", text(&out));
    let logits = dir.path().join("logits.npz");
    let prompt = kv.join("prompt.npy");
    let generate = |prompt: &str| {
        tessera(&[
            "generate",
            "--module",
            module.to_str().unwrap(),
            "--prompt",
            prompt,
            "--steps",
            "3",
            "--logits",
            logits.to_str().unwrap(),
            "--json",
        ])
    };
    let out = generate(prompt.to_str().unwrap());
    assert!(out.status.success(), "{}", text(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let want_tokens: serde_json::Value =
        serde_json::from_slice(&std::fs::read(kv.join("tokens.json")).unwrap()).unwrap();
    assert_eq!(report["tokens"], want_tokens, "{}", text(&out));
    assert_eq!(report["step_ms"].as_array().unwrap().len(), 3);
    // every step's logits: the prompt's 8 positions, then one per decoded token
    let got = tessera_runtime::NDArray::load_npz(&logits).unwrap();
    let want = tessera_runtime::NDArray::load_npz(kv.join("expected.npz")).unwrap();
    assert_eq!(got.len(), 4);
    for ((name, g), (wname, w)) in got.iter().zip(&want) {
        assert_eq!(name, wname);
        assert_eq!(g.shape(), w.shape(), "{name}");
        g.allclose(w, 1e-4, 1e-5)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    // a prompt longer than the new tokens' range, more steps than the cache holds: one
    // line each, naming the size, before anything runs
    let err = one_line_error(&generate("1,2,3,4,5,6,7,8,9"));
    assert!(
        err.contains("need new tokens in 1..9; the module runs seq in 1..8"),
        "{err}"
    );
    let err = one_line_error(&tessera(&[
        "generate",
        "--module",
        module.to_str().unwrap(),
        "--prompt",
        "1,2,3",
        "--steps",
        "20",
    ]));
    assert!(
        err.contains("need a cache's length in 0..22; the module runs past in 0..16"),
        "{err}"
    );
    // token ids that are floats: refused, not truncated
    let floats = dir.path().join("floats.npy");
    tessera_runtime::NDArray::from_slice_f32(&[1, 2], &[1.5, 2.0])
        .unwrap()
        .save_npy(&floats)
        .unwrap();
    let err = one_line_error(&generate(floats.to_str().unwrap()));
    assert!(err.contains("token ids are integers, not float32"), "{err}");
}
