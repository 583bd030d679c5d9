//! The `opencl` targets' hardware parameters.
//!
//! - `opencl -device=mali`: TVM's Ansor parameters for Mali, fixed because the board is
//!   usually remote: 256 threads per block, 32768 bytes of shared memory, warp size 1, no
//!   virtual threads.
//! - `opencl`: the limits of the device the target names (`-platform=NAME`,
//!   `-device-index=N`: [`DeviceChoice`]; by default the first device's) (`CL_DEVICE_MAX_WORK_GROUP_SIZE`,
//!   `CL_DEVICE_LOCAL_MEM_SIZE`, compute units); the warp size from
//!   `TESSERA_OPENCL_WARP_SIZE` (TVM's `TVM_OPENCL_WARP_SIZE`), 1 by default. Without an
//!   OpenCL platform (compiling for a device elsewhere) TVM's `opencl` kind defaults
//!   stand in: 256 threads, 16384 bytes of shared memory.
//!
//! Options `-max-threads-per-block` and `-max-shared-memory-per-block` override either.

use crate::device::{select, DeviceChoice};
use crate::error::OpenClError;
use tessera_target::{HardwareParams, Target};

/// Whether `target` is the Mali variant.
pub fn is_mali(target: &Target) -> bool {
    target.option("device") == Some("mali")
}

/// The `-device` values the OpenCL backend knows (TVM's `opencl -device=…` names
/// others, which it has no parameters or rules for).
pub const KNOWN_DEVICES: &[&str] = &["mali"];

/// The hardware parameters of an `opencl` target.
pub fn hardware_params(t: &Target) -> Result<HardwareParams, OpenClError> {
    let target = t.to_string();
    if let Some(d) = t.option("device").filter(|d| !KNOWN_DEVICES.contains(d)) {
        return Err(OpenClError::Target {
            target,
            reason: format!(
                "unknown -device `{d}` (known: {}; without -device the first OpenCL \
                 device's own limits are used)",
                KNOWN_DEVICES.join(", ")
            ),
        });
    }
    let mut p = if is_mali(t) {
        HardwareParams {
            num_cores: 1,
            vector_unit_bytes: 16,
            cache_line_bytes: 64,
            max_shared_memory_per_block: 32768,
            max_local_memory_per_block: 2147483647,
            max_threads_per_block: 256,
            max_vthread_extent: 1,
            warp_size: 1,
        }
    } else {
        // (a device not found here — one behind an RPC tracker — takes the defaults; the
        // device's opening says what there is)
        queried(&DeviceChoice::of(t)?).unwrap_or(HardwareParams {
            num_cores: 1,
            vector_unit_bytes: 16,
            cache_line_bytes: 64,
            max_shared_memory_per_block: 16384,
            max_local_memory_per_block: 2147483647,
            max_threads_per_block: 256,
            max_vthread_extent: 1,
            warp_size: 1,
        })
    };
    let opt = |name: &str| -> Result<Option<usize>, OpenClError> {
        t.option(name)
            .map(|v| {
                v.parse::<usize>()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| OpenClError::Target {
                        target: target.clone(),
                        reason: format!("-{name}={v} is not a positive whole number"),
                    })
            })
            .transpose()
    };
    if let Some(n) = opt("max-threads-per-block")? {
        p.max_threads_per_block = n;
    }
    if let Some(n) = opt("max-shared-memory-per-block")? {
        p.max_shared_memory_per_block = n;
    }
    Ok(p)
}

/// The chosen OpenCL device's limits, if there is one.
fn queried(choice: &DeviceChoice) -> Option<HardwareParams> {
    let (dev, _) = select(choice).ok()?;
    let warp = std::env::var("TESSERA_OPENCL_WARP_SIZE")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(1)
        .max(1);
    Some(HardwareParams {
        num_cores: dev.max_compute_units().ok()? as usize,
        vector_unit_bytes: 16,
        cache_line_bytes: 64,
        max_shared_memory_per_block: dev.local_mem_size().ok()? as usize,
        max_local_memory_per_block: 2147483647,
        max_threads_per_block: dev.max_work_group_size().ok()?,
        max_vthread_extent: (warp / 4).max(1),
        warp_size: warp,
    })
}

#[cfg(test)]
mod tests {
    use crate::error::OpenClError;
    use tessera_target::{HardwareParams, Target, TargetError};

    /// Why a target string has no hardware parameters: it does not parse, or the plugin
    /// refuses it.
    #[derive(Debug, thiserror::Error)]
    enum Refused {
        #[error(transparent)]
        Parse(#[from] TargetError),
        #[error(transparent)]
        Params(#[from] OpenClError),
    }

    /// `hardware_params` of a target string (the plugin's entry point parses it first).
    fn hardware_params(s: &str) -> Result<HardwareParams, Refused> {
        let t = Target::parse_any(s)?;
        Ok(super::hardware_params(&t)?)
    }

    #[test]
    fn mali_has_tvms_parameters_and_takes_the_overrides() {
        let p = hardware_params("opencl -device=mali").unwrap();
        assert_eq!(
            (
                p.max_threads_per_block,
                p.max_shared_memory_per_block,
                p.warp_size,
                p.max_vthread_extent
            ),
            (256, 32768, 1, 1)
        );
        let p = hardware_params(
            "opencl -device=mali -max-threads-per-block=128 -max-shared-memory-per-block=8192",
        )
        .unwrap();
        assert_eq!(
            (p.max_threads_per_block, p.max_shared_memory_per_block),
            (128, 8192)
        );
    }

    #[test]
    fn a_bad_target_string_or_limit_is_an_error() {
        assert!(hardware_params("").is_err());
        assert!(hardware_params("opencl mali").is_err());
        let e = hardware_params("opencl -device=foo")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("unknown -device `foo`") && e.contains("mali"),
            "{e}"
        );
        let err = hardware_params("opencl -device=mali -max-threads-per-block=lots")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("max-threads-per-block") && err.contains("lots"),
            "{err}"
        );
        assert!(hardware_params("opencl -max-shared-memory-per-block=0").is_err());
    }
}
