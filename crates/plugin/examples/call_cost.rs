//! What one GPU launch costs to encode at the plugin boundary: the old ABI's sealed
//! launch dimensions against the sealed `DeviceCall` and `DeviceAnswer` of
//! `runtime::device_call`, in alternating rounds (BENCHMARKS.md, "What the shared call
//! description costs at the plugin boundary").
//!
//!     cargo run --release -p tessera-plugin --example call_cost

use std::time::Instant;
use tessera_plugin::{seal, unseal};
use tessera_runtime::device_call::{DeviceAnswer, DeviceCall};
use tessera_target::LaunchDims;

const ROUNDS: usize = 9;
const CALLS: usize = 100_000;

/// Microseconds per call of `f`, over `CALLS` calls.
fn per_call(mut f: impl FnMut()) -> f64 {
    let t = Instant::now();
    for _ in 0..CALLS {
        f();
    }
    t.elapsed().as_secs_f64() / CALLS as f64 * 1e6
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dims = LaunchDims {
        grid: [56, 2, 1],
        block: [64, 1, 1],
        dynamic_shared_bytes: 0,
    };
    let launch = DeviceCall::Launch {
        function: 12345,
        args: vec![1, 2, 3, 4, 5],
        dims: Some(dims),
    };
    // one of each first: an encoding that does not read back is an error, not a time
    unseal::<LaunchDims>(&seal(&dims))?;
    unseal::<DeviceCall>(&seal(&launch))?;
    unseal::<DeviceAnswer>(&seal(&DeviceAnswer::Done))?;
    let (mut old, mut new) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        old.push(per_call(|| {
            let d = unseal::<LaunchDims>(&seal(&dims));
            std::hint::black_box(d.ok());
        }));
        new.push(per_call(|| {
            let c = unseal::<DeviceCall>(&seal(&launch));
            let a = unseal::<DeviceAnswer>(&seal(&DeviceAnswer::Done));
            std::hint::black_box((c.ok(), a.ok()));
        }));
    }
    old.sort_by(f64::total_cmp);
    new.sort_by(f64::total_cmp);
    let mid = ROUNDS / 2;
    println!(
        "per launch: old (sealed dims) median {:.3} us, min {:.3}; new (sealed call and answer) median {:.3} us, min {:.3}",
        old[mid], old[0], new[mid], new[0]
    );
    Ok(())
}
