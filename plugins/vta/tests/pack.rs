//! VTA's packing of a quantized ResNet-18 (`network::pack`, TVM's `graph_pack`): the
//! packed network computes the same bits as the quantized one, its convolutions take
//! packed data and weights, and blocks the network cannot take are an error.

use tessera_backends::Target;
use tessera_graph::quantize::{quantize, QConfig};
use tessera_graph::{build, passes, zoo, Graph};
use tessera_ir::DataType;
use tessera_runtime::NDArray;
use tessera_vta::network::pack::{pack, PackConfig};

/// The quantized ResNet-18 at 64×64 (NCHW, as VTA takes it).
fn quantized_resnet18() -> Graph {
    let opts = zoo::ZooOptions {
        image_size: Some(64),
        ..zoo::ZooOptions::default()
    };
    let mut g = zoo::network("resnet-18", &opts).unwrap();
    passes::optimize(&mut g, None).unwrap();
    quantize(&g, &QConfig::default()).unwrap()
}

/// The output bits of `g` on seeded inputs in [-1, 1).
fn output_bits(g: &Graph, seed: u64) -> Vec<u32> {
    let x = NDArray::random_uniform(DataType::float32(), &[1, 3, 64, 64], seed, -1.0, 1.0);
    let mut m = build(g, &Target::cpu()).unwrap();
    m.set_input("data", &x.unwrap()).unwrap();
    m.run().unwrap();
    let out = m.get_output(0).unwrap();
    out.as_slice::<f32>()
        .unwrap()
        .iter()
        .map(|v| v.to_bits())
        .collect()
}

/// Packing the quantized region into VTA's layout changes where the values sit, not
/// what they are: the packed network gives the same output bits; its convolutions take
/// packed data and weights.
#[test]
fn the_packed_network_computes_what_the_quantized_one_does() {
    let q = quantized_resnet18();
    let p = pack(&q, &PackConfig::default()).unwrap();
    let counts = p.op_counts();
    assert_eq!(counts.get("layout_transform"), Some(&2), "{counts:?}");
    assert_eq!(counts.get("conv2d_int8"), q.op_counts().get("conv2d_int8"));
    let packed_convs = p
        .topo_order()
        .into_iter()
        .filter(|&n| p.node(n).op.name() == "conv2d_int8")
        .all(|n| {
            let args = p.args(n);
            p.node(args[0]).ty.shape.len() == 6 && p.node(args[1]).ty.shape[4..] == [16, 16]
        });
    assert!(packed_convs, "{p}");
    for seed in 0..2 {
        assert_eq!(output_bits(&p, seed), output_bits(&q, seed), "seed {seed}");
    }
    let odd = PackConfig {
        bc: 48,
        ..PackConfig::default()
    };
    let err = pack(&q, &odd).unwrap_err().to_string();
    assert!(
        err.contains("not NCHW with a batch divisible by 1 and channels by 48"),
        "{err}"
    );
}
