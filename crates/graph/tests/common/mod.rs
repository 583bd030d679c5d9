//! Helpers shared by the graph crate's tests.

/// A deterministic pseudo-random value in [-1, 1) for index `i` and seed `s`.
pub fn rnd(s: u64, i: usize) -> f32 {
    let mut x =
        s.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (i as u64).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 31;
    x = x.wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 29;
    (x >> 40) as f32 / (1u64 << 23) as f32 - 1.0
}

/// `g` interpreted and built for the CPU, on `inputs`, against `want`.
#[allow(dead_code)]
pub fn agrees_interpreted_and_built(
    g: &tessera_graph::Graph,
    inputs: &[(&str, &tessera_runtime::NDArray)],
    want: &tessera_runtime::NDArray,
) {
    tessera_graph::reference::interpret(g, inputs)
        .unwrap()
        .remove(0)
        .allclose(want, 1e-5, 1e-6)
        .unwrap();
    let mut m = tessera_graph::build(g, &tessera_backends::Target::cpu()).unwrap();
    for (name, value) in inputs {
        m.set_input(name, value).unwrap();
    }
    m.run().unwrap();
    m.get_output(0).unwrap().allclose(want, 1e-4, 1e-5).unwrap();
}
