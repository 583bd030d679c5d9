//! The built-in CPU backend: C source compiled by the system C compiler into a shared
//! object.

mod codegen;
mod features;
pub mod kernel_cache;

pub use codegen::{entry_symbol, generate_c, generate_c_for};
pub use features::{check_host_runs, march_features};

use crate::backend::{Backend, BackendError};
use std::path::{Path, PathBuf};
use std::process::Command;
use tessera_ir::PrimFunc;
use tessera_target::{Artifact, HardwareParams, ParamSpec, Target, TargetKind};

/// Compiles IR functions for the host CPU.
pub struct CpuBackend {
    target: Target,
    params: HardwareParams,
    extra_cflags: Vec<String>,
    timeout: Option<std::time::Duration>,
}

impl CpuBackend {
    pub fn new(target: Target) -> Self {
        let params = HardwareParams::for_target(&target);
        CpuBackend {
            target,
            params,
            extra_cflags: Vec::new(),
            timeout: None,
        }
    }

    /// Kills the C compiler after `timeout` (a build-timeout error): tuning must not
    /// wait forever on one candidate.
    pub fn with_build_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Adds flags to the C compiler's command line (after Tessera's own), e.g.
    /// `-fno-tree-vectorize` to measure code without the compiler's auto-vectorization.
    pub fn with_extra_cflags(mut self, flags: &[&str]) -> Self {
        self.extra_cflags
            .extend(flags.iter().map(|f| f.to_string()));
        self
    }

    /// The `-march` value: the target's `-mcpu`, else `native`.
    fn march(&self) -> &str {
        self.target.option("mcpu").unwrap_or("native")
    }
}

/// The C compiler to use: `$CC` when set, else the first of `cc`, `gcc`, `clang` on PATH.
pub fn find_compiler() -> Result<String, BackendError> {
    if let Ok(cc) = std::env::var("CC") {
        if !cc.trim().is_empty() {
            return Ok(cc);
        }
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for cand in ["cc", "gcc", "clang"] {
        if std::env::split_paths(&path).any(|d| d.join(cand).is_file()) {
            return Ok(cand.to_string());
        }
    }
    Err(BackendError::CompilerNotFound {
        tried: "$CC, cc, gcc, clang".into(),
    })
}

/// Flags that work around known wrong-code bugs of `compiler`, decided once per compiler
/// command from its `--version`.
///
/// GCC 12.2 (Debian 12's compiler) miscompiles, with `-O3` and AVX, a loop whose
/// conditional load (a zero-padding `cond ? data[i] : 0.0f`) is if-converted into a
/// masked load, in a function holding several such loops (a padded conv2d whose padding
/// stage is computed at an unrolled axis): the vectorized loop reads the wrong elements.
/// UBSan and ASan find nothing in the source, `-O2` or `-fno-tree-loop-if-convert` or
/// `-fno-tree-loop-im` give the right answer. Tessera's hot loops are vectorized
/// explicitly (vector types in the C), so turning GCC's loop if-conversion off costs
/// nothing measurable there (ResNet's 56×56 conv2d: 1.07 ms min either way). Applied to
/// GCC before 14, the first major version we have not seen it in; clang is unaffected.
///
/// GCC 12.2 with AVX512-FP16 (`-march=native` on Intel Sapphire Rapids and later)
/// emits a scalar half-precision store with zero-masking (`vmovsh %xmm0,
/// 14(%rsp){%k1}{z}`) for a `_Float16` select, which the assembler rightly refuses
/// ("unsupported masking for `vmovsh'"): every float16 kernel with a min or max failed
/// to build there (ONNX's `test_celu_float16`). `-mno-avx512fp16` computes `_Float16`
/// through F16C conversions instead, as on CPUs without the extension (AMD Zen 4).
/// Applied where the target's `-march` has AVX512-FP16 (asked of the compiler only when
/// it is such a GCC: one that answered `--version`), with GCC before 14.
/// `limit` bounds the `--version` call.
fn workaround_cflags(compiler: &str, mcpu: &str, limit: std::time::Duration) -> Vec<String> {
    let fp16 = || features::march_features(mcpu).is_ok_and(|f| f.contains(&"avx512fp16"));
    flags_for_version(&compiler_version(compiler, limit), fp16)
}

/// What `compiler --version` prints (empty when it fails or does not answer within
/// `limit`), asked once per compiler command and process.
fn compiler_version(compiler: &str, limit: std::time::Duration) -> String {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static CACHE: OnceLock<Mutex<HashMap<String, String>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    let mut cache = cache.lock().unwrap_or_else(|e| e.into_inner());
    cache
        .entry(compiler.to_string())
        .or_insert_with(|| {
            let mut words = compiler.split_whitespace();
            let Some(program) = words.next() else {
                return String::new();
            };
            // A compiler that does not answer within the limit gets no flags (its
            // build then times out on its own).
            Command::new(program)
                .args(words)
                .arg("--version")
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::null())
                .spawn()
                .ok()
                .and_then(|child| {
                    crate::process::wait_with_timeout(child, limit)
                        .ok()
                        .flatten()
                })
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default()
        })
        .clone()
}

/// The host CPU's model name (`/proc/cpuinfo`, read once per process), or empty where
/// there is none.
fn cpu_model_name() -> &'static str {
    static NAME: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    NAME.get_or_init(|| {
        std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|t| {
                t.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_string())
            })
            .unwrap_or_default()
    })
}

/// The workaround flags for a compiler whose `--version` printed `version`, for a
/// `-march` with AVX512-FP16 or without (`fp16` says, asked only where it matters).
fn flags_for_version(version: &str, fp16: impl FnOnce() -> bool) -> Vec<String> {
    let first = version.lines().next().unwrap_or("");
    // GCC names itself after the command it was called by (`cc (Debian 12.2.0-14) …`),
    // so it is recognised by its copyright line.
    if version.contains("clang") || !version.contains("Free Software Foundation") {
        return Vec::new();
    }
    // "gcc (Debian 12.2.0-14) 12.2.0": the last word is the version.
    let major = first
        .split_whitespace()
        .last()
        .and_then(|v| v.split('.').next())
        .and_then(|m| m.parse::<u32>().ok());
    match major {
        Some(m) if m < 14 => {
            let mut flags = vec!["-fno-tree-loop-if-convert".to_string()];
            if fp16() {
                flags.push("-mno-avx512fp16".to_string());
            }
            flags
        }
        _ => Vec::new(),
    }
}

/// A short, stable hash of the source, so that each distinct kernel gets its own file
/// (a shared object loaded once stays cached by the dynamic loader under its path).
fn content_hash(s: &str) -> String {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in s.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    format!("{h:016x}")
}

fn io_err(path: &Path, e: std::io::Error) -> BackendError {
    BackendError::Io {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}

/// A directory removed (with what is in it) when dropped.
struct ScratchDir(PathBuf);

impl ScratchDir {
    fn new(parent: &Path, stem: &str) -> Result<ScratchDir, BackendError> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = parent.join(format!("{stem}.cc-tmp{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| io_err(&dir, e))?;
        Ok(ScratchDir(dir))
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Backend for CpuBackend {
    fn set_build_timeout(&mut self, timeout: std::time::Duration) {
        self.timeout = Some(timeout);
    }
    fn target(&self) -> &Target {
        &self.target
    }

    fn hardware_params(&self) -> &HardwareParams {
        &self.params
    }

    fn codegen(&self, func: &PrimFunc) -> Result<String, BackendError> {
        generate_c_for(
            func,
            self.params.num_cores,
            Some(self.params.vector_unit_bytes),
        )
    }

    fn build(&self, func: &PrimFunc, out_dir: &Path) -> Result<Artifact, BackendError> {
        let source = self.codegen(func)?;
        std::fs::create_dir_all(out_dir).map_err(|e| io_err(out_dir, e))?;
        let stem = format!(
            "{}_{}",
            func.name
                .replace(|c: char| !c.is_ascii_alphanumeric() && c != '_', "_"),
            content_hash(&source)
        );
        let source_path = out_dir.join(format!("{stem}.c"));
        let path: PathBuf = out_dir.join(format!("{stem}.so"));
        std::fs::write(&source_path, &source).map_err(|e| io_err(&source_path, e))?;
        let compiler = find_compiler()?;
        let mut words = compiler.split_whitespace();
        let program = words.next().ok_or_else(|| BackendError::CompilerNotFound {
            tried: "$CC (empty)".into(),
        })?;
        let tmp_path = out_dir.join(format!("{stem}.so.tmp{}", std::process::id()));
        // The compiler's own temporary files (`cc1`'s assembly, `as`'s object) go to a
        // directory of this build's, removed whatever happens: a killed compiler
        // leaves them behind otherwise.
        let scratch = ScratchDir::new(out_dir, &stem)?;
        let version_limit = self
            .timeout
            .unwrap_or(std::time::Duration::from_secs(5))
            .min(std::time::Duration::from_secs(5));
        let mut flags: Vec<String> = [
            "-O3",
            &format!("-march={}", self.march()),
            "-std=gnu11",
            "-fPIC",
            "-shared",
            "-fopenmp",
        ]
        .map(String::from)
        .to_vec();
        flags.extend(workaround_cflags(&compiler, self.march(), version_limit));
        flags.extend(self.extra_cflags.iter().cloned());
        let cache = kernel_cache::KernelCache::user();
        let key = cache.as_ref().map(|_| {
            let version = compiler_version(&compiler, version_limit);
            // `-march=native` means this host: its extensions (and its model, which
            // `-mtune=native` tunes for) are part of what was built; read from the CPU,
            // not asked of the compiler (one more compiler call per process, and a
            // compiler that hangs would hang here outside the build's timeout)
            let host = if self.march() == "native" {
                let features = tessera_target::hardware::host_cpu_features().join(",");
                format!("{features};{}", cpu_model_name())
            } else {
                String::new()
            };
            let mut parts = vec![
                source.as_str(),
                compiler.as_str(),
                version.as_str(),
                host.as_str(),
            ];
            parts.extend(flags.iter().map(String::as_str));
            kernel_cache::KernelCache::key(&parts)
        });
        if let (Some(cache), Some(key)) = (&cache, &key) {
            if cache.fetch(key, &path) {
                return Ok(self.artifact(func, path, source_path));
            }
        }
        let mut cmd = Command::new(program);
        crate::process::own_process_group(&mut cmd);
        cmd.env("TMPDIR", &scratch.0)
            .args(words)
            .args(&flags)
            .arg("-o")
            .arg(&tmp_path)
            .arg(&source_path)
            .arg("-lm");
        let spawn_err = |e: std::io::Error| match e.kind() {
            std::io::ErrorKind::NotFound => BackendError::CompilerNotFound {
                tried: compiler.clone(),
            },
            _ => BackendError::CompileFailed {
                compiler: compiler.clone(),
                source_path: source_path.clone(),
                message: e.to_string(),
            },
        };
        let output = match self.timeout {
            None => cmd.output().map_err(spawn_err)?,
            Some(limit) => {
                let child = cmd
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .map_err(spawn_err)?;
                match crate::process::wait_with_timeout(child, limit) {
                    Ok(Some(out)) => out,
                    Ok(None) => {
                        let _ = std::fs::remove_file(&tmp_path);
                        return Err(BackendError::CompileTimeout {
                            compiler,
                            source_path,
                            seconds: limit.as_secs_f64(),
                        });
                    }
                    Err(e) => return Err(spawn_err(e)),
                }
            }
        };
        if !output.status.success() {
            let _ = std::fs::remove_file(&tmp_path);
            let mut message = String::from_utf8_lossy(&output.stderr).trim().to_string();
            if message.is_empty() {
                message = format!("exited with {}", output.status);
            }
            return Err(BackendError::CompileFailed {
                compiler,
                source_path,
                message,
            });
        }
        // Publish atomically: a reader never sees a half-written shared object.
        std::fs::rename(&tmp_path, &path).map_err(|e| io_err(&path, e))?;
        if let (Some(cache), Some(key)) = (&cache, &key) {
            cache.store(key, &path);
        }
        Ok(self.artifact(func, path, source_path))
    }
}

impl CpuBackend {
    /// The artifact of `func` built at `path` from `source_path`.
    fn artifact(&self, func: &PrimFunc, path: PathBuf, source_path: PathBuf) -> Artifact {
        Artifact {
            device: TargetKind::CPU,
            path,
            source_path,
            entry: entry_symbol(&func.name),
            params: ParamSpec::of(func),
            launch: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::flags_for_version;

    #[test]
    fn gcc_before_14_gets_the_if_conversion_workaround() {
        let debian = "gcc (Debian 12.2.0-14+deb12u1) 12.2.0\nCopyright (C) 2022 Free Software Foundation, Inc.";
        assert_eq!(
            flags_for_version(debian, || false),
            vec!["-fno-tree-loop-if-convert"]
        );
        let as_cc = "cc (Debian 12.2.0-14+deb12u1) 12.2.0\nCopyright (C) 2022 Free Software Foundation, Inc.";
        assert_eq!(
            flags_for_version(as_cc, || false),
            vec!["-fno-tree-loop-if-convert"]
        );
        let gcc14 = "gcc (GCC) 14.1.1 20240522\nCopyright (C) 2024 Free Software Foundation, Inc.";
        assert!(flags_for_version(gcc14, || true).is_empty());
        assert!(flags_for_version(
            "Debian clang version 14.0.6\nTarget: x86_64-pc-linux-gnu",
            || true
        )
        .is_empty());
        assert!(flags_for_version("", || true).is_empty());
    }

    #[test]
    fn gcc_before_14_computes_half_precision_without_avx512_fp16() {
        let debian = "gcc (Debian 12.2.0-14+deb12u1) 12.2.0\nCopyright (C) 2022 Free Software Foundation, Inc.";
        assert_eq!(
            flags_for_version(debian, || true),
            vec!["-fno-tree-loop-if-convert", "-mno-avx512fp16"]
        );
    }
}
