//! The quantized CPU path and the VTA path give identical results for the whole network:
//! ResNet-18 quantized to int8 and packed into VTA's layout, built once for the CPU
//! (every packed convolution by its default schedule on the CPU backend) and once for
//! `vta` (the packed convolutions as VTA modules with TVM's fallback configuration on
//! the simulator, the other layers on the board's CPU), computes the same output bits on
//! seeded inputs, and the simulator did the convolutions' work.

use std::sync::Arc;
use tessera_autotvm::network::TunedHook;
use tessera_backends::Target;
use tessera_graph::pack::{quantize_and_pack, PackConfig};
use tessera_graph::quantize::QConfig;
use tessera_graph::{build, build_on, passes, zoo, Graph, GraphModule};
use tessera_ir::DataType;
use tessera_runtime::NDArray;
use tessera_search::record::ApplyHistoryBest;

const SIZE: usize = 64;

fn packed_resnet18() -> Graph {
    let opts = zoo::ZooOptions {
        image_size: Some(SIZE as i64),
        layout: tessera_graph::Layout::Nchw,
        ..zoo::ZooOptions::default()
    };
    let mut g = zoo::network("resnet-18", &opts).unwrap();
    passes::optimize(&mut g, Some(tessera_graph::Layout::Nchw)).unwrap();
    quantize_and_pack(&g, &QConfig::default(), &PackConfig::default()).unwrap()
}

/// Seeded uniform values in [-1, 1).
fn input(seed: u64) -> NDArray {
    NDArray::random_uniform(DataType::float32(), &[1, 3, SIZE, SIZE], seed, -1.0, 1.0).unwrap()
}

fn run(m: &mut GraphModule, x: &NDArray) -> Vec<u32> {
    m.set_input("data", x).unwrap();
    m.run().unwrap();
    let out = m.get_output(0).unwrap();
    out.as_slice::<f32>()
        .unwrap()
        .iter()
        .map(|v| v.to_bits())
        .collect()
}

#[test]
fn the_packed_resnet18_computes_the_same_bits_on_the_cpu_and_on_vta() {
    let g = packed_resnet18();
    let mut cpu = build(&g, &Target::cpu()).unwrap();

    let registry = tessera_plugin::discover(&[tessera_vta::tessera_plugin_root()], &[]);
    let target = registry.parse_target("vta").unwrap();
    let backend = registry.backend_for(&target).unwrap();
    let device = registry.device_for(&target).unwrap();
    let lanes = backend.hardware_params().f32_lanes();
    // no records: every packed convolution takes TVM's fallback configuration on VTA
    let hook = TunedHook::new(ApplyHistoryBest::new(&[]), &target.to_string(), lanes);
    let mut vta = build_on(&g, backend.as_ref(), Arc::clone(&device), Some(&hook)).unwrap();
    // one warning per packed-conv2d task, each built with the fallback on VTA
    let warnings = hook.warnings();
    let fallback = warnings
        .iter()
        .filter(|w| w.contains("VTA's fallback configuration"))
        .count();
    assert!(fallback >= 8, "{warnings:#?}");
    assert!(
        !warnings.iter().any(|w| w.contains("did not apply")),
        "{warnings:#?}"
    );

    let before = device.counters().unwrap();
    for seed in 0..2 {
        let x = input(seed);
        let (a, b) = (run(&mut cpu, &x), run(&mut vta, &x));
        assert_eq!(a.len(), 1000);
        assert_eq!(a, b, "seed {seed}: the CPU's and VTA's outputs differ");
    }
    let ran = device.counters().unwrap().since(&before);
    let gemm = ran
        .0
        .iter()
        .find(|(k, _)| k == "gemm_counter")
        .map_or(0, |(_, v)| *v);
    assert!(gemm > 0, "{ran:?}");
}
