//! The built-in CPU backend: C source compiled by the system C compiler into a shared
//! object.

mod codegen;

pub use codegen::{entry_symbol, generate_c};

use crate::artifact::{Artifact, DeviceKind, ParamSpec};
use crate::backend::{Backend, BackendError};
use crate::hardware::HardwareParams;
use crate::target::Target;
use std::path::{Path, PathBuf};
use std::process::Command;
use tessera_ir::PrimFunc;

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

impl Backend for CpuBackend {
    fn target(&self) -> &Target {
        &self.target
    }

    fn device(&self) -> DeviceKind {
        DeviceKind::Cpu
    }

    fn hardware_params(&self) -> &HardwareParams {
        &self.params
    }

    fn codegen(&self, func: &PrimFunc) -> Result<String, BackendError> {
        generate_c(func, self.params.num_cores)
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
        let mut cmd = Command::new(program);
        cmd.args(words)
            .args([
                "-O3",
                &format!("-march={}", self.march()),
                "-std=gnu11",
                "-fPIC",
                "-shared",
                "-fopenmp",
            ])
            .args(&self.extra_cflags)
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
        let params = ParamSpec::of(func);
        Ok(Artifact {
            device: DeviceKind::Cpu,
            path,
            source_path,
            entry: entry_symbol(&func.name),
            params,
        })
    }
}
