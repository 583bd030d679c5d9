//! The `cuda` targets: the architecture to compile for and the hardware parameters the
//! search uses.
//!
//! - `cuda`: the first GPU's compute capability and limits, queried through the driver
//!   (SM count, shared memory per block, threads per block, warp size, registers per
//!   block). Without a driver or a GPU (compiling for a device elsewhere) the kernels
//!   are compiled for the oldest architecture the NVRTC at hand supports, from `sm_52`
//!   (`sm_75` with CUDA 13), whose PTX any later GPU's driver compiles, with TVM's
//!   defaults for the limits.
//! - `cuda -arch=sm_XX`: compiled for that architecture. The limits are the device's
//!   when this machine has a GPU of that architecture, TVM's defaults otherwise (1024
//!   threads and 48 KiB of static shared memory per block, warp 32, 64 Ki registers),
//!   with the SM count of a typical part of the architecture.
//!
//! `-max-threads-per-block` overrides the threads; TVM's `max_vthread_extent` is
//! warp / 4 and the local memory limit is unbounded, as in TVM's CUDA parameters.

use crate::device::{device_info, DeviceInfo};
use crate::error::CudaError;
use std::fmt;
use tessera_target::{HardwareParams, Target};

/// A GPU architecture, `sm_80` or `sm_90a`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Arch {
    pub major: u32,
    pub minor: u32,
    /// The architecture-specific suffix (`a` in `sm_90a`), or empty.
    pub suffix: String,
}

/// The architecture of a `cuda` target that names none and finds no GPU, where NVRTC
/// does not say which it supports ([`crate::nvrtc::oldest_arch`]).
pub const PORTABLE_ARCH: Arch = Arch {
    major: 5,
    minor: 2,
    suffix: String::new(),
};

impl Arch {
    /// Parses `sm_XY` (two or three digits, major then one minor digit) with an
    /// optional letter suffix.
    pub fn parse(s: &str) -> Option<Arch> {
        let rest = s.strip_prefix("sm_")?;
        let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
        let suffix = &rest[digits.len()..];
        if digits.len() < 2 || !suffix.chars().all(|c| c.is_ascii_lowercase()) {
            return None;
        }
        let (major, minor) = digits.split_at(digits.len() - 1);
        Some(Arch {
            major: major.parse().ok()?,
            minor: minor.parse().ok()?,
            suffix: suffix.to_string(),
        })
    }

    /// The virtual architecture NVRTC compiles to PTX for: `compute_80`.
    pub fn compute(&self) -> String {
        format!("compute_{}{}{}", self.major, self.minor, self.suffix)
    }

    /// The real architecture ptxas assembles for: `sm_80`.
    pub fn sm(&self) -> String {
        format!("sm_{}{}{}", self.major, self.minor, self.suffix)
    }

    /// The SM count of a typical part of this architecture (V100, T4, A100, RTX 3090,
    /// RTX 4090, H100), for compiling without the device; 1 for others.
    fn typical_sm_count(&self) -> usize {
        match (self.major, self.minor) {
            (7, 0) => 80,
            (7, 5) => 40,
            (8, 0) => 108,
            (8, 6) => 82,
            (8, 9) => 128,
            (9, 0) => 132,
            _ => 1,
        }
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.sm())
    }
}

/// A resolved `cuda` target.
#[derive(Clone, Debug)]
pub struct CudaTarget {
    pub arch: Arch,
    pub params: HardwareParams,
    /// The GPU whose limits these are, when they were queried.
    pub device: Option<DeviceInfo>,
}

fn bad(target: &str, reason: impl Into<String>) -> CudaError {
    CudaError::Target {
        target: target.to_string(),
        reason: reason.into(),
    }
}

/// TVM's CUDA parameters for compiling without the device.
fn default_params(arch: &Arch) -> HardwareParams {
    HardwareParams {
        num_cores: arch.typical_sm_count(),
        vector_unit_bytes: 16,
        cache_line_bytes: 64,
        max_shared_memory_per_block: 49152,
        max_local_memory_per_block: 2147483647,
        max_threads_per_block: 1024,
        max_vthread_extent: 8,
        warp_size: 32,
    }
}

fn device_params(d: &DeviceInfo) -> HardwareParams {
    HardwareParams {
        num_cores: d.sm_count,
        vector_unit_bytes: 16,
        cache_line_bytes: 64,
        // Static `__shared__` arrays are limited to 48 KiB whatever the device offers
        // with opt-in dynamic shared memory, which this backend does not use.
        max_shared_memory_per_block: d.shared_memory_per_block.min(49152),
        max_local_memory_per_block: 2147483647,
        max_threads_per_block: d.max_threads_per_block,
        max_vthread_extent: (d.warp_size / 4).max(1),
        warp_size: d.warp_size,
    }
}

/// Resolves a `cuda` target: its architecture and parameters.
pub fn resolve(t: &Target) -> Result<CudaTarget, CudaError> {
    let target = &t.to_string();
    if t.kind.name() != "cuda" {
        return Err(bad(target, "not a `cuda` target"));
    }
    let named = match t.option("arch") {
        Some(a) => Some(Arch::parse(a).ok_or_else(|| {
            bad(
                target,
                format!("-arch={a}: expected sm_XY, e.g. sm_80 or sm_90"),
            )
        })?),
        None => None,
    };
    let device = device_info().ok();
    let (arch, mut params, device) = match (named, device) {
        (None, Some(d)) => (d.arch.clone(), device_params(&d), Some(d)),
        (Some(a), Some(d)) if a.major == d.arch.major && a.minor == d.arch.minor => {
            (a, device_params(&d), Some(d))
        }
        (Some(a), _) => (a.clone(), default_params(&a), None),
        (None, None) => {
            let a = crate::nvrtc::oldest_arch();
            let p = default_params(&a);
            (a, p, None)
        }
    };
    if let Some(v) = t.option("max-threads-per-block") {
        params.max_threads_per_block = v
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=1024).contains(n))
            .ok_or_else(|| {
            bad(
                target,
                format!("-max-threads-per-block={v}: expected 1..1024"),
            )
        })?;
    }
    Ok(CudaTarget {
        arch,
        params,
        device,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn architectures_parse() {
        let a = Arch::parse("sm_80").unwrap();
        assert_eq!((a.major, a.minor, a.compute()), (8, 0, "compute_80".into()));
        let a = Arch::parse("sm_90a").unwrap();
        assert_eq!(
            (a.sm(), a.compute()),
            ("sm_90a".into(), "compute_90a".into())
        );
        assert_eq!(Arch::parse("sm_120").unwrap().major, 12);
        for bad in ["sm_8", "compute_80", "sm_", "sm_80_", "80"] {
            assert!(Arch::parse(bad).is_none(), "{bad}");
        }
    }

    /// `resolve` of a target string.
    fn resolve(s: &str) -> Result<CudaTarget, CudaError> {
        super::resolve(&Target::parse_any(s).unwrap())
    }

    #[test]
    fn named_architecture_without_device_takes_tvm_defaults() {
        if device_info().is_ok() {
            return; // the defaults apply only without a GPU of that architecture
        }
        let t = resolve("cuda -arch=sm_90").unwrap();
        assert_eq!(t.arch.sm(), "sm_90");
        assert_eq!(t.params.max_threads_per_block, 1024);
        assert_eq!(t.params.max_shared_memory_per_block, 49152);
        assert_eq!((t.params.warp_size, t.params.max_vthread_extent), (32, 8));
        assert_eq!(t.params.num_cores, 132);
        let portable = resolve("cuda").unwrap().arch;
        assert_eq!(portable, crate::nvrtc::oldest_arch());
        assert!((portable.major, portable.minor) >= (5, 2), "{portable}");
    }

    #[test]
    fn bad_options_are_errors() {
        let e = resolve("cuda -arch=ampere").unwrap_err().to_string();
        assert!(e.contains("-arch=ampere") && e.contains("sm_XY"), "{e}");
        let e = resolve("cuda -max-threads-per-block=4096")
            .unwrap_err()
            .to_string();
        assert!(e.contains("1..1024"), "{e}");
        assert!(resolve("opencl").is_err());
    }
}
