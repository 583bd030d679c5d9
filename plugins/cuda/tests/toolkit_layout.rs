//! NVRTC is found in a toolkit's `lib64` under any version's name, without
//! `LD_LIBRARY_PATH`: a toolkit root (`CUDA_HOME`) whose `lib64` is the folder of
//! NVIDIA's NVRTC wheel, with Python out of reach so the wheel itself is not found.
//! One test in its own process, since NVRTC is loaded once per process.

use std::path::PathBuf;
use tessera_cuda::nvrtc;
use tessera_cuda::target::Arch;

/// The NVRTC wheel's library folder, asked of Python.
fn wheel_lib() -> Option<PathBuf> {
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import nvidia.cuda_nvrtc as m; print(list(m.__path__)[0])",
        ])
        .output()
        .ok()?;
    let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()).join("lib");
    (out.status.success() && dir.is_dir()).then_some(dir)
}

fn on_loader_path() -> bool {
    [
        "libnvrtc.so",
        "libnvrtc.so.13",
        "libnvrtc.so.12",
        "libnvrtc.so.11",
    ]
    .iter()
    // SAFETY: only opens NVRTC, a plain C library.
    .any(|n| unsafe { libloading::Library::new(n) }.is_ok())
}

#[test]
fn nvrtc_is_found_in_a_toolkits_lib64() {
    let Some(lib) = wheel_lib() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI installs nvidia-cuda-nvrtc-cu12"
        );
        eprintln!("skipped: no NVRTC wheel to lay out as a toolkit");
        return;
    };
    if on_loader_path() || std::env::var_os("TESSERA_NVRTC").is_some() {
        eprintln!("skipped: NVRTC is on the loader's path here, found before any toolkit");
        return;
    }
    let root = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(&lib, root.path().join("lib64")).unwrap();
    // Set before anything of this test process has read the environment.
    std::env::set_var("CUDA_HOME", root.path());
    std::env::set_var("PATH", "/nonexistent");
    let found = nvrtc::library_path().unwrap();
    assert!(
        found.starts_with(root.path().join("lib64")),
        "{}",
        found.display()
    );
    assert!(found
        .file_name()
        .unwrap()
        .to_string_lossy()
        .starts_with("libnvrtc.so."));
    let ptx = nvrtc::compile(
        "extern \"C\" __global__ void k(float* a) { a[threadIdx.x] = 1.0f; }",
        "k",
        &Arch::parse("sm_80").unwrap(),
    )
    .unwrap();
    assert!(ptx.contains(".entry k"), "{ptx}");
    assert!(nvrtc::version().unwrap().0 >= 11);
}
