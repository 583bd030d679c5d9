//! Models as PyTorch's default exporter writes them today (torch.export-based, opset 20,
//! weights in a side `.onnx.data` file), kept in tests/onnx/exports/ because CI has no
//! torch (tests/onnx/export_today.py made them): a 2-layer LSTM, a bidirectional LSTM, a
//! GRU, and `transformers` models built from configs — a BERT encoder with a padding mask
//! (GatherElements, GatherND, Where over bool masks), a GPT-2 decoder (tanh GELU with a
//! cube), a LLaMA decoder (grouped-query heads, rotary embeddings, RMS norm), a T5
//! encoder (relative position bias), Whisper's and wav2vec2's audio encoders, and a BERT
//! encoder quantized by onnxruntime's `quantize_dynamic`. Each is imported, built for the
//! CPU (as it is, and through the CPU plan `tessera run` uses: NHWC, attention fused,
//! weights packed) and run on its stored inputs, against onnxruntime's stored outputs.

use std::path::{Path, PathBuf};
use tessera_backends::Target;
use tessera_graph::conv_plan::ConvPlan;
use tessera_graph::onnx::{load, ImportOptions};
use tessera_graph::{build, passes, Layout};
use tessera_runtime::NDArray;

fn exports() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/onnx/exports")
}

/// Imports, optimizes, builds and runs one manifest entry — as it is, or (`cpu_plan`)
/// in NHWC through a CPU build's plan as `tessera run` builds it (attention fused,
/// weights packed) —; `Err` says what differs.
fn check(dir: &Path, m: &serde_json::Value, cpu_plan: bool) -> Result<(), String> {
    let s = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
    let mut g = load(&dir.join(s(&m["model"])), &ImportOptions::default())
        .map_err(|e| format!("import: {e}"))?;
    let layout = cpu_plan.then_some(Layout::Nhwc);
    passes::optimize(&mut g, layout).map_err(|e| format!("optimize: {e}"))?;
    if cpu_plan {
        let plan = ConvPlan::for_cpu(g, 16, true).map_err(|e| format!("plan: {e}"))?;
        g = plan.rule_graph().clone();
    }
    let mut module = build(&g, &Target::cpu()).map_err(|e| format!("build: {e}"))?;
    for i in m["inputs"].as_array().ok_or("no inputs")? {
        let v = NDArray::load_npy(dir.join(s(&i["file"]))).map_err(|e| e.to_string())?;
        module
            .set_input(&s(&i["name"]), &v)
            .map_err(|e| format!("input: {e}"))?;
    }
    module.run().map_err(|e| format!("run: {e}"))?;
    for (k, f) in m["outputs"]
        .as_array()
        .ok_or("no outputs")?
        .iter()
        .enumerate()
    {
        let want = NDArray::load_npy(dir.join(s(f))).map_err(|e| e.to_string())?;
        let got = module.get_output(k).map_err(|e| e.to_string())?;
        if got.shape() != want.shape() {
            return Err(format!(
                "output {k}: shape {:?}, expected {:?}",
                got.shape(),
                want.shape()
            ));
        }
        // layers accumulate: within 1e-4 of the output's range; a dynamically quantized
        // model within 2e-3 (each DynamicQuantizeLinear's scale comes from the data, so
        // a float difference of an ulp upstream can move a value by one quantization
        // step there: measured 5.8e-4 on bert_dynamic)
        let rel = if m["quantized"].is_string() {
            2e-3
        } else {
            1e-4
        };
        let atol = rel * want.max_abs().max(1.0);
        got.allclose(&want, 1e-4, atol)
            .map_err(|e| format!("output {k}: {e}"))?;
    }
    Ok(())
}

#[test]
fn pytorch_exports_of_todays_models_match_onnxruntime() {
    let dir = exports();
    let text = std::fs::read_to_string(dir.join("manifest.json")).expect("manifest.json");
    let manifest: Vec<serde_json::Value> = serde_json::from_str(&text).expect("a manifest");
    let names: Vec<&str> = manifest.iter().filter_map(|m| m["name"].as_str()).collect();
    for want in [
        "lstm",
        "lstm_bidir",
        "gru",
        "bert_mask",
        "bert_mask_b1",
        "gpt2",
        "llama",
        "t5enc",
        "whisper_enc",
        "wav2vec2",
        "bert_dynamic",
    ] {
        assert!(names.contains(&want), "{want} is missing from the manifest");
    }
    let failures: Vec<String> = manifest
        .iter()
        .flat_map(|m| [(m, false), (m, true)])
        .filter_map(|(m, plan)| {
            check(&dir, m, plan).err().map(|e| {
                let how = if plan { "the CPU plan" } else { "plain" };
                format!("{} ({how}): {e}", m["name"].as_str().unwrap_or("?"))
            })
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
