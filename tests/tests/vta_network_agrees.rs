//! The quantized CPU path and the VTA path give identical results for the whole network:
//! ResNet-18 quantized to int8 and packed into VTA's layout by the pipeline
//! (`tessera_driver`, VTA's extension preparing the network), built once for the CPU
//! (every packed convolution by its default schedule on the CPU backend) and once for
//! `vta` (the packed convolutions as VTA modules with TVM's fallback configuration on
//! the simulator, the other layers on the board's CPU), computes the same output bits on
//! seeded inputs, and the simulator did the convolutions' work.

use tessera_autotvm::network::TemplatesExtension;
use tessera_backends::Target;
use tessera_driver::{NetworkSource, NetworkSpec, Toolchain};
use tessera_graph::{zoo, GraphModule};
use tessera_ir::DataType;
use tessera_runtime::NDArray;
use tessera_vta::network::VtaNetwork;

const SIZE: usize = 64;

/// The pipeline with VTA's plugin and extension, and the templates' extension (whose
/// hook gives packed convolutions their configuration, VTA's template registered).
fn toolchain() -> Toolchain {
    tessera_autotvm::templates::register_templates(tessera_vta::network::template::TEMPLATES);
    let registry = tessera_plugin::discover(&[tessera_vta::tessera_plugin_root()], &[]);
    Toolchain::new(
        registry,
        vec![Box::new(TemplatesExtension), Box::new(VtaNetwork)],
    )
}

/// ResNet-18 at 64×64 for `vta`: the pipeline builds it in NCHW, quantized and packed.
fn spec(tc: &Toolchain) -> NetworkSpec {
    let source = NetworkSource::Zoo {
        name: "resnet-18".into(),
        options: zoo::ZooOptions {
            image_size: Some(SIZE as i64),
            ..zoo::ZooOptions::default()
        },
    };
    NetworkSpec::new(source, tc.parse_target("vta").unwrap())
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
    let tc = toolchain();
    let spec = spec(&tc);
    // the packed network, built for the CPU: every packed convolution by its default
    // schedule on the CPU backend
    let packed = tc.optimized(&spec).unwrap();
    let mut cpu = tc
        .load(tc.compile_graph(&packed, &Target::cpu(), None).unwrap())
        .unwrap();
    // no records: every packed convolution takes TVM's fallback configuration on VTA
    let (mut vta, report) = tc.build(&spec, None).unwrap();
    assert_eq!(report.applied, 0);
    // one warning per packed-conv2d task, each built with the fallback on VTA
    let warnings = &report.warnings;
    let fallback = warnings
        .iter()
        .filter(|w| w.contains("VTA's fallback configuration"))
        .count();
    assert!(fallback >= 8, "{warnings:#?}");
    assert!(
        !warnings.iter().any(|w| w.contains("did not apply")),
        "{warnings:#?}"
    );

    let before = vta.device_counters().unwrap();
    for seed in 0..2 {
        let x = input(seed);
        let (a, b) = (run(&mut cpu, &x), run(&mut vta, &x));
        assert_eq!(a.len(), 1000);
        assert_eq!(a, b, "seed {seed}: the CPU's and VTA's outputs differ");
    }
    let ran = vta.device_counters().unwrap().since(&before);
    let gemm = ran
        .0
        .iter()
        .find(|(k, _)| k == "gemm_counter")
        .map_or(0, |(_, v)| *v);
    assert!(gemm > 0, "{ran:?}");
}

/// The layout a target needs is the pipeline's to enforce: VTA packs NCHW networks.
#[test]
fn vta_refuses_a_network_in_nhwc() {
    let tc = toolchain();
    let spec = spec(&tc).with_layout(tessera_graph::Layout::Nhwc);
    let err = tc.plan(&spec).unwrap_err().to_string();
    assert!(err.contains("NCHW only, not NHWC"), "{err}");
}
