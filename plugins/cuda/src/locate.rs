//! Where the CUDA tools live when they are not on the loader's or the shell's path: the
//! toolkit's folders (`$CUDA_HOME`, `$CUDA_PATH`, `/usr/local/cuda`) and NVIDIA's PyPI
//! wheels (`nvidia-cuda-nvrtc-cu12` holds `nvidia/cuda_nvrtc/lib/libnvrtc.so.12`,
//! `nvidia-cuda-nvcc-cu12` holds `nvidia/cuda_nvcc/bin/ptxas`), which install into a
//! Python's site-packages rather than a system folder.
//!
//! A shared library is found by its stem in any version a folder holds
//! ([`versioned_libs`]): CUDA 12 ships `libnvrtc.so.12`, CUDA 13 `libnvrtc.so.13`, and a
//! search for one name misses the other.

use std::path::{Path, PathBuf};
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

/// The folders a toolkit keeps its libraries in, under `root`.
pub fn toolkit_lib_dirs(root: &Path) -> Vec<PathBuf> {
    [
        "lib64",
        "lib",
        "targets/x86_64-linux/lib",
        "targets/sbsa-linux/lib",
    ]
    .iter()
    .map(|d| root.join(d))
    .collect()
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

/// The version of a library file named `lib<stem>.so.<version>` (`libnvrtc.so.13.0.88`
/// → `[13, 0, 88]`); `None` for other names (the unversioned `libnvrtc.so`, another
/// library such as `libnvrtc-builtins.so.13`).
pub fn lib_version(file_name: &str, stem: &str) -> Option<Vec<u32>> {
    let rest = file_name.strip_prefix(&format!("lib{stem}.so."))?;
    rest.split('.').map(|p| p.parse().ok()).collect()
}

/// The files of `dir` that are versions of `lib<stem>.so`, newest first.
pub fn versioned_libs(dir: &Path, stem: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<(Vec<u32>, PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let v = lib_version(e.file_name().to_str()?, stem)?;
            let p = e.path();
            p.is_file().then_some((v, p))
        })
        .collect();
    found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    found.into_iter().map(|(_, p)| p).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_from_names() {
        assert_eq!(lib_version("libnvrtc.so.13", "nvrtc"), Some(vec![13]));
        assert_eq!(
            lib_version("libnvrtc.so.12.4.127", "nvrtc"),
            Some(vec![12, 4, 127])
        );
        for other in ["libnvrtc.so", "libnvrtc-builtins.so.13.0", "libnvrtc.so.x"] {
            assert_eq!(lib_version(other, "nvrtc"), None, "{other}");
        }
    }

    #[test]
    fn every_version_in_a_folder_is_found_newest_first() {
        let dir = tempfile::tempdir().unwrap();
        for f in [
            "libnvrtc.so",
            "libnvrtc.so.12",
            "libnvrtc.so.13",
            "libnvrtc.so.13.0.48",
            "libnvrtc-builtins.so.13.0",
            "libcudart.so.13",
        ] {
            std::fs::write(dir.path().join(f), b"").unwrap();
        }
        let names: Vec<String> = versioned_libs(dir.path(), "nvrtc")
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            ["libnvrtc.so.13.0.48", "libnvrtc.so.13", "libnvrtc.so.12"]
        );
        assert!(versioned_libs(&dir.path().join("absent"), "nvrtc").is_empty());
    }
}
