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
