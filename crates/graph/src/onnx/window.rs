//! The window functions of signal processing, `HannWindow`, `HammingWindow` and
//! `BlackmanWindow`: constants of a size known at import (periodic windows divide by
//! the size, symmetric ones by the size less one), in `output_datatype` (float32 by
//! default).

use super::attrs::NodeCtx;
use super::{tensor, Importer, Outputs};
use std::f64::consts::PI;
use tessera_runtime::NDArray;

/// The window of `c.op` at position `n` of `size`, `denominator` `size` or `size - 1`.
fn value(op: &str, n: f64, denominator: f64) -> f64 {
    let x = 2.0 * PI * n / denominator;
    match op {
        "HannWindow" => 0.5 - 0.5 * x.cos(),
        "HammingWindow" => {
            let alpha = 25.0 / 46.0;
            alpha - (1.0 - alpha) * x.cos()
        }
        _ => 0.42 - 0.5 * x.cos() + 0.08 * (2.0 * x).cos(),
    }
}

/// `HannWindow`, `HammingWindow`, `BlackmanWindow`.
pub(super) fn window(imp: &mut Importer, c: &NodeCtx) -> Outputs {
    let size = imp
        .const_ints(c, 0, "the size")?
        .and_then(|v| v.first().copied())
        .ok_or_else(|| c.bad("the size (input 0) is missing"))?;
    if !(0..=1 << 24).contains(&size) {
        return Err(c.bad(format!("a window of size {size}")));
    }
    let code = c.int("output_datatype", 1) as i32;
    let dtype = tensor::dtype_of(code)
        .ok_or_else(|| c.bad(format!("unsupported output_datatype {code}")))?;
    let periodic = c.int("periodic", 1) != 0;
    let denominator = if periodic { size } else { size - 1 } as f64;
    let values: Vec<f64> = (0..size)
        .map(|n| value(c.op, n as f64, denominator))
        .collect();
    let v = NDArray::from_f64(dtype, &[size as usize], &values)?;
    Ok(vec![imp.g.constant(&c.name, v)])
}
