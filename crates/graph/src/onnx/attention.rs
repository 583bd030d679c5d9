//! ONNX's `Attention` (opsets 23–25), the form newer exporters emit for scaled
//! dot-product attention, imported as the operators it is made of — the graph's
//! attention pass ([`crate::attention`]) fuses the chain again where it matches:
//!
//! - Q, K, V of rank 4 (`[batch, heads, sequence, head size]`) or 3 (`[batch, sequence,
//!   heads × head size]`, split by `q_num_heads` / `kv_num_heads`);
//! - a key/value cache (`past_key`, `past_value` concatenated in front, and returned as
//!   `present_key`, `present_value`);
//! - grouped-query heads (each K/V head repeated for its group of Q heads);
//! - `scale` (default `1/√head size`, applied as its square root to Q and K, as the
//!   reference does), `softcap` (`c · tanh(s / c)`), an additive or boolean mask (padded
//!   with "masked" to the keys' length), causal masking aligned to the bottom right (the
//!   cache's length, or per batch `nonpad_kv_seqlen - q_len`), a sliding window, and
//!   the keys beyond `nonpad_kv_seqlen` masked;
//! - rows with every key masked give zeros, not NaN;
//! - `qk_matmul_output` in its four modes.

use super::attrs::NodeCtx;
use super::{Importer, Outputs};
use crate::error::GraphError;
use crate::ir::{Binary, Op};
use petgraph::stable_graph::NodeIndex;
use tessera_ir::DataType;
use tessera_te::ops::BinaryFn;

/// `t` as `[batch, heads, sequence, head size]`: a rank-3 `[batch, sequence, heads ×
/// size]` tensor split into `heads` and transposed.
fn to_heads(
    imp: &mut Importer,
    c: &NodeCtx,
    t: NodeIndex,
    heads: Option<i64>,
    tag: &str,
) -> Result<NodeIndex, GraphError> {
    let s = imp.shape(t);
    match s.len() {
        4 => Ok(t),
        3 => {
            let h = heads.filter(|&h| h > 0 && s[2] % h == 0).ok_or_else(|| {
                c.bad(format!(
                    "a rank-3 {tag} of shape {s:?} needs a head count that divides {}",
                    s[2]
                ))
            })?;
            let r = imp.reshape(
                &c.sub(&format!("{tag}_split")),
                t,
                vec![s[0], s[1], h, s[2] / h],
            )?;
            imp.op(
                &c.sub(&format!("{tag}_heads")),
                Op::Transpose {
                    axes: vec![0, 2, 1, 3],
                },
                &[r],
            )
        }
        r => Err(c.bad(format!("{tag} has rank {r}; 3 or 4 are defined"))),
    }
}

/// `a [B, H, M, K] · b [B, H, K, N]` as one batched product.
fn matmul4(
    imp: &mut Importer,
    name: &str,
    a: NodeIndex,
    b: NodeIndex,
) -> Result<NodeIndex, GraphError> {
    let (sa, sb) = (imp.shape(a), imp.shape(b));
    let nb = sa[0] * sa[1];
    let a3 = imp.reshape(&format!("{name}_a"), a, vec![nb, sa[2], sa[3]])?;
    let b3 = imp.reshape(&format!("{name}_b"), b, vec![nb, sb[2], sb[3]])?;
    let y = imp.op(&format!("{name}_batched"), Op::MatMul, &[a3, b3])?;
    imp.reshape(name, y, vec![sa[0], sa[1], sa[2], sb[3]])
}

/// `0` where `allowed`, `-∞` elsewhere, in `dt`.
fn bias_of(
    imp: &mut Importer,
    c: &NodeCtx,
    allowed: NodeIndex,
    dt: DataType,
    tag: &str,
) -> Result<NodeIndex, GraphError> {
    let zero = imp.scalar(&c.sub(&format!("{tag}_zero")), dt, 0.0)?;
    let ninf = imp.scalar(&c.sub(&format!("{tag}_ninf")), dt, f64::NEG_INFINITY)?;
    imp.op(&c.sub(tag), Op::Where, &[allowed, zero, ninf])
}

/// The additive bias of the masks (`None` when nothing is masked), broadcasting to
/// `[B, H, S, L]`.
struct Masks {
    bias: Option<NodeIndex>,
}

impl Masks {
    fn add(
        &mut self,
        imp: &mut Importer,
        c: &NodeCtx,
        b: NodeIndex,
        tag: &str,
    ) -> Result<(), GraphError> {
        self.bias = Some(match self.bias {
            None => b,
            Some(prev) => imp.binary(&c.sub(tag), Binary::Add, prev, b)?,
        });
        Ok(())
    }
}

/// The caller's mask as an additive bias over the `keys` keys: a boolean mask becomes
/// 0 / -∞, and a mask shorter than the keys is padded with "masked".
fn user_mask(
    imp: &mut Importer,
    c: &NodeCtx,
    mask: NodeIndex,
    keys: i64,
    dt: DataType,
) -> Result<NodeIndex, GraphError> {
    let ms = imp.shape(mask);
    let last = *ms.last().ok_or_else(|| c.bad("the mask is 0-D"))?;
    let boolean = imp.ty(mask).dtype.is_bool();
    let mut m = mask;
    if last < keys {
        let mut after = vec![0; ms.len()];
        *after.last_mut().expect("rank >= 1") = keys - last;
        let pad = Op::Pad {
            before: vec![0; ms.len()],
            after,
            value: if boolean { 0.0 } else { f64::NEG_INFINITY },
        };
        m = imp.op(&c.sub("mask_padded"), pad, &[m])?;
    } else if last > keys {
        return Err(c.bad(format!(
            "the mask covers {last} keys, more than the {keys} there are"
        )));
    }
    if boolean {
        return bias_of(imp, c, m, dt, "mask_bias");
    }
    Ok(m)
}

/// The position masks: `diff = i + offset - j` for query `i` and key `j` (`offset` the
/// cache's length, or per batch `nonpad - S`), allowed where `diff ≥ 0` when causal and
/// within the window's bounds; and the keys past `nonpad` masked.
fn position_masks(
    imp: &mut Importer,
    c: &NodeCtx,
    masks: &mut Masks,
    (s, l, past): (i64, i64, i64),
    dt: DataType,
) -> Result<(), GraphError> {
    let causal = c.int("is_causal", 0) != 0;
    let (left, right) = (
        c.int("left_window_size", -1),
        c.int("right_window_size", -1),
    );
    let nonpad = c.opt(6);
    let i64t = DataType::int64();
    let qi: Vec<i64> = (0..s).collect();
    let kj: Vec<i64> = (0..l).collect();
    let qi = imp.int_const(&c.sub("query_positions"), &[s as usize, 1], &qi)?;
    let kj = imp.int_const(&c.sub("key_positions"), &[1, l as usize], &kj)?;
    // per batch [B, 1, 1, 1] from nonpad_kv_seqlen
    let nonpad = match nonpad {
        Some(n) => {
            let n = imp.op(&c.sub("nonpad_i64"), Op::Cast { dtype: i64t }, &[n])?;
            let b = imp.shape(n).iter().product();
            Some(imp.reshape(&c.sub("nonpad_batch"), n, vec![b, 1, 1, 1])?)
        }
        None => None,
    };
    if causal || left >= 0 || right >= 0 {
        let offset = match nonpad {
            Some(n) if past == 0 => {
                let q = imp.scalar(&c.sub("q_len"), i64t, s as f64)?;
                imp.binary(&c.sub("offset"), Binary::Sub, n, q)?
            }
            _ => imp.scalar(&c.sub("offset"), i64t, past as f64)?,
        };
        let shifted = imp.binary(&c.sub("shifted_positions"), Binary::Add, qi, offset)?;
        let diff = imp.binary(&c.sub("diff"), Binary::Sub, shifted, kj)?;
        let mut rules: Vec<(BinaryFn, i64, &str)> = Vec::new();
        if causal {
            rules.push((BinaryFn::GreaterEqual, 0, "causal"));
        }
        if left >= 0 {
            rules.push((BinaryFn::LessEqual, left, "left_window"));
        }
        if right >= 0 {
            // -diff ≤ right, i.e. diff ≥ -right
            rules.push((BinaryFn::GreaterEqual, -right, "right_window"));
        }
        for (f, bound, tag) in rules {
            let k = imp.scalar(&c.sub(&format!("{tag}_bound")), i64t, bound as f64)?;
            let ok = imp.op(
                &c.sub(&format!("{tag}_allowed")),
                Op::BinaryFn(f),
                &[diff, k],
            )?;
            let b = bias_of(imp, c, ok, dt, &format!("{tag}_bias"))?;
            masks.add(imp, c, b, &format!("{tag}_sum"))?;
        }
    }
    if let Some(n) = nonpad {
        let ok = imp.op(
            &c.sub("nonpad_allowed"),
            Op::BinaryFn(BinaryFn::Less),
            &[kj, n],
        )?;
        let b = bias_of(imp, c, ok, dt, "nonpad_bias")?;
        masks.add(imp, c, b, "nonpad_sum")?;
    }
    Ok(())
}

/// Each of `t`'s `[B, kv, L, D]` heads repeated `group` times in a row.
fn repeat_heads(
    imp: &mut Importer,
    c: &NodeCtx,
    t: NodeIndex,
    group: i64,
    tag: &str,
) -> Result<NodeIndex, GraphError> {
    if group == 1 {
        return Ok(t);
    }
    let s = imp.shape(t);
    let r = imp.reshape(
        &c.sub(&format!("{tag}_group")),
        t,
        vec![s[0], s[1], 1, s[2], s[3]],
    )?;
    let shape = vec![s[0], s[1], group, s[2], s[3]];
    let b = imp.op(
        &c.sub(&format!("{tag}_repeat")),
        Op::BroadcastTo { shape },
        &[r],
    )?;
    imp.reshape(
        &c.sub(&format!("{tag}_grouped")),
        b,
        vec![s[0], s[1] * group, s[2], s[3]],
    )
}

/// `Attention`.
pub(super) fn attention(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let (q_in, k_in, v_in) = (c.input(0)?, c.input(1)?, c.input(2)?);
    let rank3 = imp.rank(q_in) == 3;
    let heads = |name: &str| c.has(name).then(|| c.int(name, 0));
    let q = to_heads(imp, c, q_in, heads("q_num_heads"), "q")?;
    let mut k = to_heads(imp, c, k_in, heads("kv_num_heads"), "k")?;
    let mut v = to_heads(imp, c, v_in, heads("kv_num_heads"), "v")?;
    let dt = imp.ty(q).dtype;
    let past = match (c.opt(4), c.opt(5)) {
        (Some(pk), Some(pv)) => {
            let past_len = imp.shape(pk)[2];
            k = imp.op(&c.sub("present_key"), Op::Concat { axis: 2 }, &[pk, k])?;
            v = imp.op(&c.sub("present_value"), Op::Concat { axis: 2 }, &[pv, v])?;
            past_len
        }
        (None, None) => 0,
        _ => return Err(c.bad("past_key and past_value come together")),
    };
    let (present_k, present_v) = (k, v);
    let (qs, ks) = (imp.shape(q), imp.shape(k));
    let (s, l) = (qs[2], ks[2]);
    if ks[1] == 0 || qs[1] % ks[1] != 0 {
        return Err(c.bad(format!(
            "{} query heads are not a multiple of {} key/value heads",
            qs[1], ks[1]
        )));
    }
    let group = qs[1] / ks[1];
    let k = repeat_heads(imp, c, k, group, "k")?;
    let v = repeat_heads(imp, c, v, group, "v")?;
    let scale = match c.has("scale") {
        true => c.float("scale", 1.0) as f64,
        false => 1.0 / (qs[3] as f64).sqrt(),
    };
    let root = imp.scalar(&c.sub("scale_root"), dt, scale.sqrt())?;
    let qk = imp.binary(&c.sub("q_scaled"), Binary::Mul, q, root)?;
    let kk = imp.binary(&c.sub("k_scaled"), Binary::Mul, k, root)?;
    let kt = imp.op(
        &c.sub("k_transposed"),
        Op::Transpose {
            axes: vec![0, 1, 3, 2],
        },
        &[kk],
    )?;
    let mut scores = matmul4(imp, &c.sub("scores"), qk, kt)?;
    let softcap = c.float("softcap", 0.0) as f64;
    if softcap > 0.0 {
        let cap = imp.scalar(&c.sub("softcap"), dt, softcap)?;
        let d = imp.binary(&c.sub("softcap_div"), Binary::Div, scores, cap)?;
        let t = imp.op(
            &c.sub("softcap_tanh"),
            Op::Unary(crate::ir::Unary::Tanh),
            &[d],
        )?;
        scores = imp.binary(&c.sub("softcapped"), Binary::Mul, t, cap)?;
    }
    let capped = scores;
    let mut masks = Masks { bias: None };
    if let Some(m) = c.opt(3) {
        let b = user_mask(imp, c, m, l, dt)?;
        masks.add(imp, c, b, "mask_sum")?;
    }
    position_masks(imp, c, &mut masks, (s, l, past), dt)?;
    let biased = match masks.bias {
        Some(b) => imp.binary(&c.sub("biased"), Binary::Add, scores, b)?,
        None => scores,
    };
    let mut probs = imp.op(&c.sub("softmax"), Op::Softmax { axis: -1 }, &[biased])?;
    if let Some(b) = masks.bias {
        // a row whose every key is masked attends to nothing: zeros, not NaN
        let full = tessera_te::ops::broadcast_shape("attention", &imp.shape(b), &[1, 1, s, l])
            .map_err(|e| c.bad(e.to_string()))?;
        let zeros = imp.filled(&c.sub("zero_bias"), dt, &full, 0.0)?;
        let b = imp.binary(&c.sub("bias_full"), Binary::Add, b, zeros)?;
        let row = imp.op(
            &c.sub("row_max"),
            Op::Reduce {
                kind: tessera_te::ops::ReduceKind::Max,
                axes: vec![-1],
                keepdims: true,
            },
            &[b],
        )?;
        let ninf = imp.scalar(&c.sub("row_ninf"), dt, f64::NEG_INFINITY)?;
        let dead = imp.op(
            &c.sub("row_dead"),
            Op::BinaryFn(BinaryFn::Equal),
            &[row, ninf],
        )?;
        let zero = imp.scalar(&c.sub("row_zero"), dt, 0.0)?;
        probs = imp.op(&c.sub("probs"), Op::Where, &[dead, zero, probs])?;
    }
    let y = matmul4(imp, &c.sub("context"), probs, v)?;
    let y = if rank3 {
        let t = imp.op(
            &c.sub("context_t"),
            Op::Transpose {
                axes: vec![0, 2, 1, 3],
            },
            &[y],
        )?;
        let ys = imp.shape(t);
        imp.reshape(&c.name, t, vec![ys[0], ys[1], ys[2] * ys[3]])?
    } else {
        y
    };
    let qk_out = match c.int("qk_matmul_output_mode", 0) {
        0 | 1 => capped,
        2 => biased,
        3 => probs,
        m => {
            return Err(c.bad(format!(
                "qk_matmul_output_mode {m} is not defined (0 to 3 are)"
            )))
        }
    };
    Ok(vec![y, present_k, present_v, qk_out])
}
