//! TopK by both of its forms (selection for a small k on a longer axis, rank otherwise)
//! against a plain sort, in ONNX's order (lower position first among equals), over rows
//! with ties and infinities, largest and smallest, on the last and a middle axis.

mod common;

use tessera_ir::DataType;
use tessera_te::ops::{self, TopKOutput, SELECT_MAX_K};
use tessera_te::placeholder;

/// The first `k` (value, position) pairs of `row` in ONNX's order.
fn sorted(row: &[f64], k: usize, largest: bool) -> Vec<(f64, usize)> {
    let mut v: Vec<(f64, usize)> = row.iter().copied().zip(0..).collect();
    v.sort_by(|a, b| {
        let by_value = if largest {
            b.0.total_cmp(&a.0)
        } else {
            a.0.total_cmp(&b.0)
        };
        by_value.then(a.1.cmp(&b.1))
    });
    v.truncate(k);
    v
}

/// Rows of `n` values from a few levels (many ties) with some infinities.
fn rows(count: usize, n: usize, seed: u64) -> Vec<f64> {
    common::rand_vals(count * n, seed)
        .into_iter()
        .enumerate()
        .map(|(i, r)| match i % 13 {
            5 => f64::NEG_INFINITY,
            9 => f64::INFINITY,
            // + 0.0: no -0.0, which a sort by `total_cmp` would put before 0.0
            _ => (r * 4.0).round() + 0.0,
        })
        .collect()
}

#[test]
fn both_forms_agree_with_a_sort() {
    let (count, n) = (3usize, 150usize);
    let x = placeholder(&[count as i64, n as i64], DataType::float32(), "x").unwrap();
    let vals = rows(count, n, 7);
    // a row entirely -∞ after its first element, where "nothing left" must not leak
    let mut vals = vals;
    for v in &mut vals[n + 1..2 * n] {
        *v = f64::NEG_INFINITY;
    }
    for k in [1, 3, 19, SELECT_MAX_K as usize, 100, n] {
        for largest in [true, false] {
            let values = ops::topk(&x, -1, k as i64, largest, TopKOutput::Values).unwrap();
            let positions = ops::topk(&x, 1, k as i64, largest, TopKOutput::Indices).unwrap();
            let got_v = common::interpret(&values, &[(&x, &vals)]);
            let got_i = common::interpret(&positions, &[(&x, &vals)]);
            for r in 0..count {
                let want = sorted(&vals[r * n..(r + 1) * n], k, largest);
                for (j, (v, i)) in want.iter().enumerate() {
                    let at = r * k + j;
                    assert_eq!(got_i[at], *i as f64, "k {k} largest {largest} row {r} #{j}");
                    assert_eq!(got_v[at], *v, "k {k} largest {largest} row {r} #{j}");
                }
            }
        }
    }
}

#[test]
fn a_middle_axis_and_integers_select_too() {
    let x = placeholder(&[2, 30, 3], DataType::int32(), "x").unwrap();
    let vals: Vec<f64> = common::rand_vals(2 * 30 * 3, 3)
        .into_iter()
        .map(|r| (r * 5.0).round() + 0.0)
        .collect();
    let k = 4;
    let positions = ops::topk(&x, 1, k, true, TopKOutput::Indices).unwrap();
    let got = common::interpret(&positions, &[(&x, &vals)]);
    for b in 0..2 {
        for c in 0..3 {
            let row: Vec<f64> = (0..30).map(|p| vals[(b * 30 + p) * 3 + c]).collect();
            let want = sorted(&row, k as usize, true);
            for (j, (_, i)) in want.iter().enumerate() {
                assert_eq!(
                    got[(b * k as usize + j) * 3 + c],
                    *i as f64,
                    "({b}, #{j}, {c})"
                );
            }
        }
    }
}
