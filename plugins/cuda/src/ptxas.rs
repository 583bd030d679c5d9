//! `ptxas`, NVIDIA's PTX assembler, as a checker: NVRTC stops at PTX, which the driver
//! assembles when a module is loaded, so a kernel that needs more registers or shared
//! memory than the architecture has would otherwise fail only on the GPU. Assembling
//! with `ptxas -v` finds that on any machine and reports what each kernel uses.
//!
//! `ptxas` is looked for at `TESSERA_PTXAS`, on `PATH`, in a toolkit's `bin/`, and in
//! the `nvidia-cuda-nvcc-cu12` wheel.

use crate::error::CudaError;
use crate::locate;
use crate::target::Arch;
use std::path::PathBuf;
use std::process::Command;

/// What one kernel uses, as `ptxas -v` reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelResources {
    pub name: String,
    pub registers: u32,
    pub shared_bytes: u64,
    pub spill_stores: u64,
    pub spill_loads: u64,
}

/// The `ptxas` binary.
pub fn find() -> Result<PathBuf, CudaError> {
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).map(|d| d.join("ptxas")).collect())
        .unwrap_or_default();
    let candidates = locate::candidates(
        "TESSERA_PTXAS",
        on_path,
        "bin/ptxas",
        "cuda_nvcc",
        "bin/ptxas",
    );
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .ok_or_else(|| CudaError::PtxasMissing {
            searched: candidates
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        })
}

/// Assembles `ptx` for `arch` and returns each kernel's resources; the assembler's
/// messages are the error when it refuses.
pub fn assemble(ptx: &str, arch: &Arch) -> Result<Vec<KernelResources>, CudaError> {
    let bin = find()?;
    let dir = tempfile::tempdir().map_err(|e| CudaError::Ptxas(format!("temp dir: {e}")))?;
    let input = dir.path().join("kernel.ptx");
    std::fs::write(&input, ptx)
        .map_err(|e| CudaError::Ptxas(format!("{}: {e}", input.display())))?;
    let out = Command::new(&bin)
        .arg(format!("-arch={}", arch.sm()))
        .arg("-v")
        .arg(&input)
        .arg("-o")
        .arg(dir.path().join("kernel.cubin"))
        .output()
        .map_err(|e| CudaError::Ptxas(format!("{}: {e}", bin.display())))?;
    let text =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(CudaError::Ptxas(format!(
            "refused the PTX for {}:\n{text}",
            arch.sm()
        )));
    }
    Ok(parse_report(&text))
}

/// Reads `ptxas -v`'s report: per kernel, an "entry function" line, a "stack frame,
/// spill" line and a "Used N registers, M bytes smem" line.
pub fn parse_report(text: &str) -> Vec<KernelResources> {
    let mut v: Vec<KernelResources> = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.split("Compiling entry function '").nth(1) {
            let name = rest.split('\'').next().unwrap_or_default().to_string();
            v.push(KernelResources {
                name,
                registers: 0,
                shared_bytes: 0,
                spill_stores: 0,
                spill_loads: 0,
            });
            continue;
        }
        let Some(k) = v.last_mut() else { continue };
        let words: Vec<&str> = line
            .split([' ', ',', ':'])
            .filter(|w| !w.is_empty())
            .collect();
        // The number `back` words before word `i`.
        let n = |i: usize, back: usize| {
            i.checked_sub(back)
                .and_then(|j| words.get(j))
                .and_then(|x| x.parse::<u64>().ok())
        };
        for (i, w) in words.iter().enumerate() {
            let after_spill = i > 0 && words[i - 1] == "spill";
            match *w {
                "registers" => k.registers = n(i, 1).unwrap_or(0) as u32,
                "smem" => k.shared_bytes = n(i, 2).unwrap_or(0),
                "stores" if after_spill => k.spill_stores = n(i, 3).unwrap_or(0),
                "loads" if after_spill => k.spill_loads = n(i, 3).unwrap_or(0),
                _ => {}
            }
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_verbose_report_is_read() {
        let text = "ptxas info    : 0 bytes gmem\n\
            ptxas info    : Compiling entry function 'mm_kernel' for 'sm_80'\n\
            ptxas info    : Function properties for mm_kernel\n    \
            8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads\n\
            ptxas info    : Used 40 registers, 4096 bytes smem, 368 bytes cmem[0]\n\
            ptxas info    : Compiling entry function 'k2' for 'sm_80'\n\
            ptxas info    : Used 8 registers, 360 bytes cmem[0]\n";
        let r = parse_report(text);
        assert_eq!(r.len(), 2);
        assert_eq!(
            r[0],
            KernelResources {
                name: "mm_kernel".into(),
                registers: 40,
                shared_bytes: 4096,
                spill_stores: 4,
                spill_loads: 12,
            }
        );
        assert_eq!(
            (r[1].name.as_str(), r[1].registers, r[1].shared_bytes),
            ("k2", 8, 0)
        );
    }
}
