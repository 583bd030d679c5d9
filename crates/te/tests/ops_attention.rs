//! The attention operator: its value against a direct reference, its default schedule
//! against the unscheduled program, the blocks its schedule computes the scores in, and
//! its errors.

mod common;

use common::{assert_close, interpret, rand_vals};
use tessera_ir::DataType;
use tessera_te::ops;
use tessera_te::schedules::default_schedule;
use tessera_te::{placeholder, TeError, Tensor};

const F32: DataType = DataType::float32();

/// (leading axes, M, K, N, D, the bias's shape)
type Case = (&'static [i64], i64, i64, i64, i64, Option<&'static [i64]>);

fn ph(shape: &[i64], name: &str) -> Tensor {
    placeholder(shape, F32, name).unwrap()
}

/// The placeholders of a case: `q`, `kt`, `v` and the bias where it has one.
fn operands((lead, m, k, n, d, bias): Case) -> (Tensor, Tensor, Tensor, Option<Tensor>) {
    let shape = |tail: &[i64]| [lead, tail].concat();
    (
        ph(&shape(&[m, k]), "q"),
        ph(&shape(&[k, n]), "kt"),
        ph(&shape(&[n, d]), "v"),
        bias.map(|b| ph(b, "bias")),
    )
}

/// `softmax(q · kt · scale + bias) · v` for `batch` independent `[m, k]`, `[k, n]`, `[n,
/// d]` problems, the bias already broadcast to `[batch, m, n]`.
#[allow(clippy::too_many_arguments)]
fn attention_ref(
    q: &[f64],
    kt: &[f64],
    v: &[f64],
    bias: &[f64],
    scale: f64,
    [batch, m, k, n, d]: [usize; 5],
) -> Vec<f64> {
    let mut out = vec![0.0; batch * m * d];
    for b in 0..batch {
        for i in 0..m {
            let logits: Vec<f64> = (0..n)
                .map(|j| {
                    let s: f64 = (0..k)
                        .map(|c| q[(b * m + i) * k + c] * kt[(b * k + c) * n + j])
                        .sum();
                    s * scale + bias[(b * m + i) * n + j]
                })
                .collect();
            let top = logits.iter().cloned().fold(f64::MIN, f64::max);
            let e: Vec<f64> = logits.iter().map(|l| (l - top).exp()).collect();
            let total: f64 = e.iter().sum();
            for c in 0..d {
                let acc: f64 = (0..n).map(|j| e[j] * v[(b * n + j) * d + c]).sum();
                out[(b * m + i) * d + c] = acc / total;
            }
        }
    }
    out
}

/// The values of a bias of shape `shape` broadcast to `[lead.., m, n]` (flattened
/// leading axes), NumPy's rules.
fn broadcast(values: &[f64], shape: &[i64], to: &[i64]) -> Vec<f64> {
    let total: i64 = to.iter().product();
    let off = to.len() - shape.len();
    (0..total)
        .map(|flat| {
            let mut rem = flat;
            let mut src = 0i64;
            let mut stride = 1i64;
            for ax in (0..to.len()).rev() {
                let i = rem % to[ax];
                rem /= to[ax];
                if ax >= off {
                    let s = shape[ax - off];
                    src += if s == 1 { 0 } else { i } * stride;
                    stride *= s;
                }
            }
            values[src as usize]
        })
        .collect()
}

#[test]
fn attention_matches_the_reference() {
    // (the case, the scale)
    let cases: [(Case, f64); 5] = [
        ((&[2], 5, 4, 7, 3, None), 1.0),
        ((&[2], 5, 4, 7, 3, Some(&[7])), 0.5),
        ((&[2], 5, 4, 7, 3, Some(&[2, 5, 7])), 0.125),
        // ViT's form: [1, heads, tokens, ..], a key mask broadcast over heads and rows
        ((&[1, 3], 6, 8, 6, 4, Some(&[1, 1, 1, 6])), 0.35),
        // Swin's: a bias per head and position, shared by the windows
        ((&[2, 3], 4, 2, 4, 5, Some(&[3, 4, 4])), 1.0),
    ];
    for ((lead, m, k, n, d, bias_shape), scale) in cases {
        let shape = |tail: &[i64]| [lead, tail].concat();
        let (q, kt, v, bias) = operands((lead, m, k, n, d, bias_shape));
        let out = ops::attention(&q, &kt, &v, bias.as_ref(), scale).unwrap();
        assert_eq!(out.shape(), &shape(&[m, d])[..]);
        let numel = |t: &Tensor| t.shape().iter().product::<i64>() as usize;
        let (qv, kv, vv): (Vec<f64>, Vec<f64>, Vec<f64>) = (
            rand_vals(numel(&q), 1),
            // large scores, so that the maximum's subtraction matters
            rand_vals(numel(&kt), 2).iter().map(|x| x * 30.0).collect(),
            rand_vals(numel(&v), 3),
        );
        let mut inputs: Vec<(&Tensor, &[f64])> = vec![(&q, &qv), (&kt, &kv), (&v, &vv)];
        let bv = bias.as_ref().map(|b| rand_vals(numel(b), 4));
        if let (Some(b), Some(values)) = (&bias, &bv) {
            inputs.push((b, values));
        }
        let got = interpret(&out, &inputs);
        let batch = lead.iter().product::<i64>() as usize;
        let full = broadcast(
            bv.as_deref().unwrap_or(&[0.0]),
            bias_shape.unwrap_or(&[1]),
            &shape(&[m, n]),
        );
        let dims = [batch, m as usize, k as usize, n as usize, d as usize];
        let want = attention_ref(&qv, &kv, &vv, &full, scale, dims);
        assert_close(
            &format!("attention {lead:?} {m}x{k}x{n}x{d}"),
            &got,
            &want,
            1e-5,
        );
    }
}

#[test]
fn the_default_schedule_computes_the_same() {
    let p = common::AVX2_TWO_CORES;
    // narrow blocks: whole blocks of 8 rows; 17 rows (blocks of 6, the last one
    // guarded); 7 keys and 3 value columns (no whole vector); no leading axes.
    // Wide blocks (register tiles of 6 rows × 16 keys): 24 rows, two tiles a block;
    // 100 rows, the last block guarded; 30 rows, one tile a block, and keys no two
    // vectors divide
    let cases: [Case; 7] = [
        (&[1, 2], 16, 8, 16, 16, Some(&[16])),
        (&[3], 17, 16, 24, 8, Some(&[3, 17, 24])),
        (&[2], 5, 4, 7, 3, None),
        (&[], 9, 8, 8, 8, Some(&[9, 1])),
        (&[2], 24, 8, 32, 16, Some(&[32])),
        (&[1], 100, 4, 48, 8, Some(&[1, 100, 48])),
        (&[2], 30, 8, 40, 24, None),
    ];
    for case in cases {
        let (q, kt, v, bias) = operands(case);
        let out = ops::attention(&q, &kt, &v, bias.as_ref(), 0.25).unwrap();
        let s = default_schedule(&[out.clone()], p).unwrap();
        let mut args = vec![q, kt, v];
        args.extend(bias);
        let n_inputs = args.len();
        args.push(out.clone());
        common::assert_same_as_unscheduled(&s, &[out], &args, n_inputs);
    }
}

/// The default schedule computes every stage per block of query rows: the scores'
/// buffer holds one block (8 rows × 32 keys), not the heads' 4 × 64 × 32.
#[test]
fn the_default_schedule_keeps_a_block_of_scores() {
    let (q, kt, v) = (
        ph(&[4, 64, 16], "q"),
        ph(&[4, 16, 32], "kt"),
        ph(&[4, 32, 16], "v"),
    );
    let out = ops::attention(&q, &kt, &v, None, 0.25).unwrap();
    let s = default_schedule(&[out.clone()], common::AVX2_TWO_CORES).unwrap();
    let f = tessera_te::lower(&s, &[q, kt, v, out], "attention").unwrap();
    let text = f.to_string();
    let alloc = text
        .lines()
        .find(|l| l.contains("allocate T_attn_score"))
        .unwrap_or_else(|| panic!("no score buffer:\n{text}"));
    assert!(alloc.contains("float32[1, 8, 32]"), "{alloc}\n{text}");
    assert!(text.contains("parallel"), "no parallel block loop:\n{text}");
}

/// Rows that divide into the dense product's register tiles (6 on AVX2) take blocks
/// of two such tiles, the scores in tiles of 6 rows × 16 keys (Whisper's 1,500 rows).
/// 96 rows: blocks of 12; 100 (many, not a multiple): blocks of 12, the last guarded;
/// 30 (five tiles): blocks of one tile — in every case tiles of whole 6 rows.
#[test]
fn rows_of_whole_register_tiles_take_wide_blocks() {
    for (m, block) in [(96, 12), (100, 12), (30, 6)] {
        let (q, kt, v) = (
            ph(&[4, m, 16], "q"),
            ph(&[4, 16, 64], "kt"),
            ph(&[4, 64, 16], "v"),
        );
        let out = ops::attention(&q, &kt, &v, None, 0.25).unwrap();
        let s = default_schedule(&[out.clone()], common::AVX2_TWO_CORES).unwrap();
        let f = tessera_te::lower(&s, &[q, kt, v, out], "attention").unwrap();
        let text = f.to_string();
        let alloc = |name: &str| {
            text.lines()
                .find(|l| l.contains(&format!("allocate {name}")))
                .unwrap_or_else(|| panic!("{m} rows: no {name} buffer:\n{text}"))
                .to_string()
        };
        let scores = format!("float32[1, {block}, 64]");
        assert!(
            alloc("T_attn_score:").contains(&scores),
            "{m} rows:\n{text}"
        );
        // a register tile: 6 rows × 16 keys, and 6 rows × 16 value columns
        assert!(
            alloc("T_attn_score.local").contains("[1, 6, 16]"),
            "{m} rows:\n{text}"
        );
        assert!(
            alloc("T_attn_pv.local").contains("[1, 6, 16]"),
            "{m} rows:\n{text}"
        );
    }
}

#[test]
fn shapes_that_do_not_fit_are_typed_errors() {
    let q = ph(&[2, 5, 4], "q");
    let kt = ph(&[2, 4, 7], "kt");
    let v = ph(&[2, 7, 3], "v");
    let bad = |r: Result<Tensor, TeError>| match r {
        Err(TeError::BadShape { op, .. }) => assert_eq!(op, "attention"),
        other => panic!("expected a BadShape error, got {other:?}"),
    };
    bad(ops::attention(&q, &ph(&[2, 5, 7], "kt"), &v, None, 1.0));
    bad(ops::attention(&q, &kt, &ph(&[2, 6, 3], "v"), None, 1.0));
    bad(ops::attention(&q, &kt, &ph(&[3, 7, 3], "v"), None, 1.0));
    bad(ops::attention(&q, &kt, &v, Some(&ph(&[5, 6], "bias")), 1.0));
    bad(ops::attention(
        &q,
        &kt,
        &v,
        Some(&ph(&[3, 5, 7], "bias")),
        1.0,
    ));
    let int = placeholder(&[2, 5, 4], DataType::int32(), "q").unwrap();
    assert!(matches!(
        ops::attention(&int, &kt, &v, None, 1.0),
        Err(TeError::BadAttr { .. })
    ));
}
