//! The core's `Device` on the simulator: a conv2d module loaded from its file runs on
//! buffers copied in and out and gives the reference's bytes; `time` reports the cycle
//! model's time at the clock with the launch's counters; a module for another
//! configuration, a wrong entry, a launch missing an argument and a copy past a buffer
//! are errors that say so.

mod common;
use common::{reference, tensors, B};
use std::sync::Arc;
use tessera_runtime::timer::TimeEvaluator;
use tessera_runtime::{BufferId, Device};
use tessera_target::{Artifact, TargetKind};
use tessera_vta::conv2d::{generate, Conv2dPacked, Epilogue, Knobs};
use tessera_vta::device::VtaDevice;
use tessera_vta::module::VtaModule;
use tessera_vta::VtaConfig;

const W: Conv2dPacked = Conv2dPacked {
    n: 1,
    ci: 2,
    h: 6,
    w: 6,
    co: 2,
    kh: 3,
    kw: 3,
    stride: (1, 1),
    pad: (1, 1),
    epilogue: Epilogue {
        bias: true,
        shift: 8,
        round: true,
        clip: (0, 127),
    },
};

const K: Knobs = Knobs {
    tile_b: 1,
    tile_h: 3,
    tile_w: 6,
    tile_ci: 1,
    tile_co: 1,
    oc_nthread: 2,
    h_nthread: 1,
};

fn artifact(dir: &std::path::Path, cfg: &VtaConfig, entry: &str) -> Artifact {
    let p = generate(cfg, &W, &K).unwrap();
    let path = dir.join(format!("{entry}.vta.json"));
    VtaModule::new(cfg, entry, &p).write(&path).unwrap();
    Artifact {
        device: TargetKind::new("vta"),
        path: path.clone(),
        source_path: path,
        entry: entry.into(),
        params: Vec::new(),
        launch: None,
    }
}

fn upload(dev: &Arc<VtaDevice>, bytes: &[u8]) -> BufferId {
    let b = dev.alloc(bytes.len()).unwrap();
    dev.copy_from_host(b, 0, bytes).unwrap();
    b
}

#[test]
fn a_conv2d_module_runs_and_times_on_the_simulator() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = VtaConfig::default();
    let dev = Arc::new(VtaDevice::new(cfg.clone()).unwrap());
    let m = dev
        .load_module(&artifact(dir.path(), &cfg, "conv"))
        .unwrap();
    let f = dev.get_function(m, "conv").unwrap();
    let t = tensors(&W, 11);
    let d = upload(&dev, &t.data.iter().map(|x| *x as u8).collect::<Vec<_>>());
    let k = upload(&dev, &t.kernel.iter().map(|x| *x as u8).collect::<Vec<_>>());
    let bias: Vec<u8> = t.bias.iter().flat_map(|x| x.to_le_bytes()).collect();
    let b = upload(&dev, &bias);
    let n_out = W.co * W.out_h() * W.out_w() * B;
    let o = dev.alloc(n_out).unwrap();
    dev.launch(f, &[d, k, b, o], None).unwrap();
    dev.synchronize().unwrap();
    let mut out = vec![0u8; n_out];
    dev.copy_to_host(o, 0, &mut out).unwrap();
    let want: Vec<u8> = reference(&W, &t).iter().map(|x| *x as u8).collect();
    assert_eq!(out, want);
    let (last, _) = dev.launch_counters();
    assert_eq!(last.out_store_nbytes, n_out as u64);
    assert!(last.cycles > 0);
    let ev = TimeEvaluator::new(2, 3, 0.0);
    let r = dev.time(f, &[d, k, b, o], None, &ev).unwrap();
    assert_eq!(r.number, 2);
    assert_eq!(r.results.len(), 3);
    let secs = last.cycles as f64 / 100e6;
    for s in &r.results {
        assert!((s - secs).abs() < 1e-12, "{s} against {secs}");
    }
    let (_, total) = dev.launch_counters();
    assert_eq!(
        total.cycles,
        last.cycles * 7,
        "one launch and 6 timed (the cycle model needs no warm-up)"
    );
    // the core's reading: the same totals by name, TVM's counters first
    let named = Device::counters(dev.as_ref()).unwrap();
    let get = |n: &str| named.0.iter().find(|(k, _)| k == n).map(|(_, v)| *v);
    assert_eq!(named.0[0].0, "inp_load_nbytes");
    assert_eq!(get("cycles"), Some(total.cycles));
    assert_eq!(get("gemm_counter"), Some(total.gemm_counter));
    assert_eq!(get("out_store_nbytes"), Some(total.out_store_nbytes));
}

#[test]
fn mismatches_are_errors_that_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let dev = Arc::new(VtaDevice::new(VtaConfig::default()).unwrap());
    let other = VtaConfig {
        log_acc_buff_size: 16,
        ..VtaConfig::default()
    };
    let err = dev
        .load_module(&artifact(dir.path(), &other, "conv"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("built for the VTA configuration 1x16_i8w8a32_15_15_18_16, this device is 1x16_i8w8a32_15_15_18_17"),
        "{err}"
    );
    let m = dev
        .load_module(&artifact(dir.path(), &VtaConfig::default(), "conv"))
        .unwrap();
    let err = dev.get_function(m, "dense").unwrap_err().to_string();
    assert!(err.contains("has `conv`, not `dense`"), "{err}");
    let f = dev.get_function(m, "conv").unwrap();
    let a = dev.alloc(64).unwrap();
    let err = dev.launch(f, &[a], None).unwrap_err().to_string();
    assert!(
        err.contains("the program takes 4 tensor arguments, 1 given"),
        "{err}"
    );
    let err = dev.copy_from_host(a, 60, &[0; 8]).unwrap_err().to_string();
    assert!(err.contains("overruns buffer"), "{err}");
    let mut cpu = artifact(dir.path(), &VtaConfig::default(), "conv");
    cpu.device = TargetKind::new("cpu");
    let err = dev.load_module(&cpu).unwrap_err().to_string();
    assert!(err.contains("which was built for `cpu`"), "{err}");
    std::fs::write(dir.path().join("x.json"), r#"{"format": "tessera-vta/0"}"#).unwrap();
    let mut old = artifact(dir.path(), &VtaConfig::default(), "conv");
    old.path = dir.path().join("x.json");
    let err = dev.load_module(&old).unwrap_err().to_string();
    assert!(
        err.contains("format `tessera-vta/0`, this build reads `tessera-vta/1`"),
        "{err}"
    );
}
