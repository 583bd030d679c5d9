//! With the GPU at hand a module carries NVRTC's GPU code (CUBIN) beside its PTX, so
//! the measuring process loads it without the driver's PTX assembly. Checked here
//! without a GPU: NVRTC compiles for a real architecture, and the module file keeps
//! the code through its JSON.

use tessera_cuda::module::CudaModule;
use tessera_cuda::nvrtc;
use tessera_cuda::target::Arch;
use tessera_cuda::CudaError;

const SOURCE: &str = r#"extern "C" __global__ void twice(float* a) { a[threadIdx.x] *= 2.0f; }"#;

#[test]
fn a_real_architecture_gives_gpu_code_beside_the_ptx() {
    let arch = Arch::parse("sm_80").unwrap();
    let compiled = match nvrtc::compile_for(SOURCE, "twice", &arch, true) {
        Ok(c) => c,
        Err(e @ CudaError::NvrtcMissing { .. }) if std::env::var_os("CI").is_none() => {
            eprintln!("skipped: {e}");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    assert!(compiled.ptx.contains(".entry twice"), "{}", compiled.ptx);
    let cubin = compiled.cubin.expect("GPU code for sm_80");
    assert_eq!(&cubin[..4], b"\x7fELF", "a CUBIN is an ELF image");

    // a virtual architecture gives PTX alone
    let ptx_only = nvrtc::compile_for(SOURCE, "twice", &arch, false).unwrap();
    assert!(ptx_only.cubin.is_none());

    // the module file keeps the code, byte for byte; one without it reads as before
    let src = tessera_backends::cfamily::DeviceSource {
        source: SOURCE.into(),
        kernels: Vec::new(),
        workspaces: Vec::new(),
    };
    let m = CudaModule::new(src, arch.sm(), compiled.ptx).with_cubin(Some(cubin.clone()));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.json");
    std::fs::write(&path, m.to_bytes()).unwrap();
    let back = CudaModule::read(&path).unwrap();
    assert_eq!(back.cubin().unwrap().unwrap(), cubin);
    let plain = CudaModule {
        cubin: None,
        ..back
    };
    std::fs::write(&path, plain.to_bytes()).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains("cubin"), "{text}");
    assert!(CudaModule::read(&path).unwrap().cubin().is_none());
}
