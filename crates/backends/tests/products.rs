//! Matrix products' default schedules built by the CPU backend and run, against a
//! product computed here: the loop orders that only large operands choose, whose
//! results the interpreter would take minutes to check.

mod common;

use common::{build, bytes_of, values_of};
use tessera_ir::DataType;
use tessera_te::schedules::{default_schedule, CpuParams};
use tessera_te::{lower, ops, placeholder};

/// Deterministic values in [-1, 1).
fn values(n: usize, seed: u64) -> Vec<f32> {
    (0..n as u64)
        .map(|i| {
            let x = (i.wrapping_mul(2654435761).wrapping_add(seed * 40503)) % 2048;
            x as f32 / 1024.0 - 1.0
        })
        .collect()
}

/// A packed dense layer with more data than weights and weights past a core's L2 (1.5
/// MiB: 8,192 terms × 48 columns) runs its row tiles in chunks — the chunks outermost
/// and in parallel, then the column tiles, then a chunk's two row tiles (512 KiB of data
/// rows) — and computes the product: every element within 1e-3 of a double-precision
/// sum.
#[test]
fn a_dense_layer_with_large_weights_runs_its_rows_in_chunks_and_computes_the_product() {
    let (m, k, n, block) = (64usize, 8192usize, 48usize, 16usize);
    let p = CpuParams {
        vector_lanes: 16,
        num_cores: 2,
        vectorize: true,
        gpu_threads: 0,
    };
    let data = placeholder(&[m as i64, k as i64], DataType::float32(), "data").unwrap();
    let shape = [(n / block) as i64, k as i64, block as i64];
    let weight = placeholder(&shape, DataType::float32(), "weight").unwrap();
    let out = ops::dense(&data, &weight, None).unwrap();
    let s = default_schedule(&[out.clone()], p).unwrap();
    let func = lower(&s, &[data, weight, out], "chunked").unwrap();
    let text = func.to_string();
    let order: Vec<usize> = [
        "for (i.outer.outer, 0, 4) parallel",
        "for (j.outer, 0, 3)",
        "for (i.outer.inner, 0, 2)",
    ]
    .iter()
    .map(|l| text.find(l).unwrap_or_else(|| panic!("{l}: {text}")))
    .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{text}");

    let a = values(m * k, 1);
    // packed: weight[j / block, t, j % block] is column j's term t
    let w = values(n * k, 2);
    let mut args = vec![
        bytes_of(&a, f32::to_ne_bytes),
        bytes_of(&w, f32::to_ne_bytes),
        vec![0u8; 4 * m * n],
    ];
    build(&func, "native", &[]).run(&mut args);
    let got = values_of(&args[2], f32::from_ne_bytes);
    for i in 0..m {
        for j in 0..n {
            let want: f64 = (0..k)
                .map(|t| {
                    a[i * k + t] as f64 * w[(j / block) * k * block + t * block + j % block] as f64
                })
                .sum();
            let g = got[i * n + j] as f64;
            assert!(
                (g - want).abs() <= 1e-3 * (1.0 + want.abs()),
                "[{i}, {j}]: {g} against {want}"
            );
        }
    }
}
