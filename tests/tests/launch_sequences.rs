//! A run's launches recorded once as a launch sequence and replayed (on a GPU a CUDA
//! graph): on every device at hand, a small ResNet-18 (32×32 images, 10 classes) run
//! from its sequence gives the same outputs as step by step, again on a second run
//! and after new inputs (the sequence reads the same buffers), and the per-step profile
//! on the device's clock has one non-negative time per step.
//!
//! The CPU always runs. OpenCL runs on PoCL (required under CI, which installs it);
//! CUDA runs where a GPU is present and is skipped with the reason printed otherwise.

use std::sync::Arc;
use tessera_driver::{NetworkSource, NetworkSpec, Toolchain};
use tessera_graph::zoo::ZooOptions;
use tessera_graph::{GraphModule, LaunchMode};
use tessera_runtime::{CpuDevice, Device, NDArray};
use tessera_tests::gpu::Gpu;

fn toolchain() -> Toolchain {
    let reg = tessera_plugin::discover(
        &[
            tessera_opencl::tessera_plugin_root(),
            tessera_cuda::tessera_plugin_root(),
        ],
        &[],
    );
    Toolchain::new(reg, Vec::new())
}

fn small_resnet(tc: &Toolchain, target: &str, device: Arc<dyn Device>) -> GraphModule {
    let source = NetworkSource::Zoo {
        name: "resnet-18".into(),
        options: ZooOptions {
            image_size: Some(32),
            num_classes: 10,
            ..ZooOptions::default()
        },
    };
    let spec = NetworkSpec::new(source, tc.parse_target(target).unwrap());
    let compiled = tc.compile(&spec, None).unwrap().network;
    compiled.load(device).unwrap()
}

fn output(m: &mut GraphModule) -> NDArray {
    m.run().unwrap();
    m.get_output(0).unwrap()
}

/// The checks of the module's header on `m`, whose device records sequences.
fn sequence_agrees(test: &str, mut m: GraphModule) {
    assert_eq!(*m.launch_mode(), LaunchMode::Sequence, "{test}");
    m.set_random_inputs().unwrap();
    let first = output(&mut m);
    let again = output(&mut m);
    assert_eq!(
        first.as_bytes(),
        again.as_bytes(),
        "{test}: a replay differs"
    );
    let profile = m.profile(2).unwrap();
    assert_eq!(profile.len(), m.summary().groups, "{test}");
    assert!(profile.iter().all(|(_, ms)| ms.is_finite() && *ms >= 0.0));

    // new inputs reach the recorded sequence: it reads the input's buffer
    let (name, ty) = m
        .inputs()
        .map(|(n, t)| (n.to_string(), t.clone()))
        .next()
        .unwrap();
    let shape: Vec<usize> = ty.shape.iter().map(|&d| d as usize).collect();
    let other = NDArray::random_uniform(ty.dtype, &shape, 7, -1.0, 1.0).unwrap();
    m.set_input(&name, &other).unwrap();
    let replayed = output(&mut m);
    assert_ne!(
        replayed.as_bytes(),
        first.as_bytes(),
        "{test}: input ignored"
    );

    m.launch_step_by_step().unwrap();
    assert!(matches!(m.launch_mode(), LaunchMode::StepByStep { .. }));
    let stepped = output(&mut m);
    assert_eq!(
        replayed.as_bytes(),
        stepped.as_bytes(),
        "{test}: the sequence and the steps disagree"
    );
}

#[test]
fn the_cpu_replays_its_sequence() {
    let tc = toolchain();
    let m = small_resnet(&tc, "llvm", Arc::new(CpuDevice::new()));
    sequence_agrees("cpu", m);
}

#[test]
fn opencl_replays_its_sequence() {
    let Some(gpu) = Gpu::opencl_or_skip("opencl_replays_its_sequence") else {
        return;
    };
    let tc = toolchain();
    let m = small_resnet(&tc, "opencl", gpu.device.clone());
    sequence_agrees("opencl", m);
}

#[test]
fn cuda_replays_its_graph() {
    let Some(gpu) = Gpu::cuda_or_skip("cuda_replays_its_graph") else {
        return;
    };
    let tc = toolchain();
    let m = small_resnet(&tc, "cuda", gpu.device.clone());
    sequence_agrees("cuda", m);
}
