//! Where the CUDA tools live when they are not on the loader's or the shell's path: the
//! toolkit's folders (`$CUDA_HOME`, `$CUDA_PATH`, `/usr/local/cuda`) and NVIDIA's PyPI
//! wheels (`nvidia-cuda-nvrtc-cu12` holds `nvidia/cuda_nvrtc/lib/libnvrtc.so.12`,
//! `nvidia-cuda-nvcc-cu12` holds `nvidia/cuda_nvcc/bin/ptxas`), which install into a
//! Python's site-packages rather than a system folder.

use std::path::PathBuf;
use std::process::Command;

/// The toolkit roots to look in, in order.
pub fn toolkit_roots() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = ["CUDA_HOME", "CUDA_PATH"]
        .iter()
        .filter_map(|k| std::env::var_os(k).map(PathBuf::from))
        .collect();
    v.push(PathBuf::from("/usr/local/cuda"));
    v
}

/// The folder of the `nvidia.<package>` Python package of `python3`, when it is
/// installed (asked of Python, since site-packages moves with the interpreter).
pub fn wheel_dir(package: &str) -> Option<PathBuf> {
    let script = format!("import nvidia.{package} as m; print(list(m.__path__)[0])");
    let out = Command::new("python3")
        .args(["-c", &script])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let p = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    p.is_dir().then_some(p)
}

/// The places a file is looked for: the path in the environment variable `env` first,
/// then `also` (e.g. the shell's path), then `rel_toolkit` under each toolkit root,
/// then `rel_wheel` in the wheel `package`.
pub fn candidates(
    env: &str,
    also: Vec<PathBuf>,
    rel_toolkit: &str,
    package: &str,
    rel_wheel: &str,
) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::env::var_os(env)
        .map(PathBuf::from)
        .into_iter()
        .collect();
    v.extend(also);
    v.extend(toolkit_roots().into_iter().map(|r| r.join(rel_toolkit)));
    if let Some(w) = wheel_dir(package) {
        v.push(w.join(rel_wheel));
    }
    v
}
