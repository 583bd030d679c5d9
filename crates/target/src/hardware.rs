//! Hardware parameters that schedules and search rules depend on.

use crate::target::Target;
use serde::{Deserialize, Serialize};

/// The facts about a device that the search needs (TVM's `HardwareParams`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct HardwareParams {
    pub num_cores: usize,
    /// Width of the widest SIMD register, in bytes.
    pub vector_unit_bytes: usize,
    pub cache_line_bytes: usize,
    pub max_shared_memory_per_block: usize,
    pub max_local_memory_per_block: usize,
    pub max_threads_per_block: usize,
    pub max_vthread_extent: usize,
    pub warp_size: usize,
}

impl HardwareParams {
    /// How many float32 values the widest vector register holds (at least 1): the
    /// vector width the default schedules and templates split for.
    pub fn f32_lanes(&self) -> i64 {
        (self.vector_unit_bytes / 4).max(1) as i64
    }

    /// The host CPU: its core count and its widest vector unit.
    pub fn detect_host() -> HardwareParams {
        let num_cores = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        HardwareParams {
            num_cores,
            vector_unit_bytes: host_vector_bytes(),
            cache_line_bytes: 64,
            max_shared_memory_per_block: 0,
            max_local_memory_per_block: 0,
            max_threads_per_block: 0,
            max_vthread_extent: 0,
            warp_size: 0,
        }
    }

    /// The parameters of a target: detected for the CPU, the usual limits of the device
    /// family for the GPU kinds the core documents (TVM's defaults for compiling without
    /// the device), with the target's options applied on top. A plugin's backend reports
    /// its own; for a kind the core does not know, the host's stand in here.
    pub fn for_target(target: &Target) -> HardwareParams {
        let mut p = match target.kind.name() {
            "cuda" => HardwareParams {
                num_cores: 1,
                vector_unit_bytes: 16,
                cache_line_bytes: 64,
                max_shared_memory_per_block: 49152,
                max_local_memory_per_block: 2147483647,
                max_threads_per_block: 1024,
                max_vthread_extent: 8,
                warp_size: 32,
            },
            "opencl" => HardwareParams {
                num_cores: 1,
                vector_unit_bytes: 16,
                cache_line_bytes: 64,
                max_shared_memory_per_block: 32768,
                max_local_memory_per_block: 1024,
                max_threads_per_block: 256,
                max_vthread_extent: 4,
                warp_size: 1,
            },
            _ => Self::detect_host(),
        };
        if let Some(n) = target.num_cores() {
            p.num_cores = n;
        }
        if let Some(n) = target
            .option("max-threads-per-block")
            .and_then(|v| v.parse().ok())
        {
            p.max_threads_per_block = n;
        }
        p
    }
}

/// The instruction-set extensions of the host that generated code may use with
/// `-march=native` (x86-64: SSE4.2 to AVX-512), as the compiler names them.
#[cfg(target_arch = "x86_64")]
pub fn host_cpu_features() -> Vec<&'static str> {
    macro_rules! detected {
        ($($f:tt),*) => {{
            let mut v = Vec::new();
            $(if std::arch::is_x86_feature_detected!($f) { v.push($f); })*
            v
        }};
    }
    detected!(
        "sse4.2",
        "popcnt",
        "avx",
        "avx2",
        "fma",
        "f16c",
        "bmi1",
        "bmi2",
        "avx512f",
        "avx512bw",
        "avx512cd",
        "avx512dq",
        "avx512vl",
        "avx512vnni",
        "avx512bf16",
        "avx512fp16"
    )
}

/// The instruction-set extensions of the host (none are tracked off x86-64).
#[cfg(not(target_arch = "x86_64"))]
pub fn host_cpu_features() -> Vec<&'static str> {
    Vec::new()
}

#[cfg(target_arch = "x86_64")]
fn host_vector_bytes() -> usize {
    if std::arch::is_x86_feature_detected!("avx512f") {
        64
    } else if std::arch::is_x86_feature_detected!("avx2") {
        32
    } else {
        16
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn host_vector_bytes() -> usize {
    16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_override_detection() {
        let t: Target = "cpu -num-cores=7".parse().unwrap();
        let p = HardwareParams::for_target(&t);
        assert_eq!(p.num_cores, 7);
        assert!(p.vector_unit_bytes >= 16);
        let c = HardwareParams::for_target(&"cuda -max-threads-per-block=512".parse().unwrap());
        assert_eq!(
            (
                c.max_threads_per_block,
                c.warp_size,
                c.max_shared_memory_per_block
            ),
            (512, 32, 49152)
        );
    }
}
