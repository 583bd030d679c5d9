//! Helpers shared by the graph crate's tests.

/// A deterministic pseudo-random value in [-1, 1) for index `i` and seed `s`.
#[allow(dead_code)]
pub fn rnd(s: u64, i: usize) -> f32 {
    let mut x =
        s.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (i as u64).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 31;
    x = x.wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 29;
    (x >> 40) as f32 / (1u64 << 23) as f32 - 1.0
}

/// `g` interpreted and built for the CPU, on `inputs`, against `want`.
#[allow(dead_code)]
pub fn agrees_interpreted_and_built(
    g: &tessera_graph::Graph,
    inputs: &[(&str, &tessera_runtime::NDArray)],
    want: &tessera_runtime::NDArray,
) {
    tessera_graph::reference::interpret(g, inputs)
        .unwrap()
        .remove(0)
        .allclose(want, 1e-5, 1e-6)
        .unwrap();
    let mut m = tessera_graph::build(g, &tessera_backends::Target::cpu()).unwrap();
    for (name, value) in inputs {
        m.set_input(name, value).unwrap();
    }
    m.run().unwrap();
    m.get_output(0).unwrap().allclose(want, 1e-4, 1e-5).unwrap();
}

/// Runs the Python generator `tests/onnx/<script>` into `<target tmp>/<folder>` and
/// returns the folder; a missing Python or package fails the test naming what to install.
/// Once per folder in a test binary: its tests wait for the first to have written it.
#[allow(dead_code)]
pub fn python_fixtures(script: &str, folder: &str) -> std::path::PathBuf {
    static MADE: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut made = MADE.lock().unwrap_or_else(|e| e.into_inner());
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(folder);
    if made.iter().any(|f| f == folder) {
        return out;
    }
    let out = run_python_fixtures(script, folder);
    made.push(folder.to_string());
    out
}

fn run_python_fixtures(script: &str, folder: &str) -> std::path::PathBuf {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(folder);
    let script = root.join("tests/onnx").join(script);
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let status = std::process::Command::new(&python)
        .arg(&script)
        .arg(&out)
        .status();
    match status {
        Ok(s) if s.success() => out,
        other => panic!(
            "{python} {} failed ({other:?}): the ONNX tests need Python with the packages of \
             tests/onnx/requirements.txt (`pip install -r tests/onnx/requirements.txt`)",
            script.display()
        ),
    }
}

/// The archive at `path` with `module.json` passed through `edit` (or dropped, with
/// `None`), and every other entry kept unless it is named `drop`.
#[allow(dead_code)]
pub fn rewrite(
    path: &std::path::Path,
    out: &std::path::Path,
    edit: impl Fn(serde_json::Value) -> Option<serde_json::Value>,
    drop: &str,
) {
    let mut archive = tar::Archive::new(std::fs::File::open(path).unwrap());
    let mut b = tar::Builder::new(std::fs::File::create(out).unwrap());
    for e in archive.entries().unwrap() {
        let mut e = e.unwrap();
        let name = e.path().unwrap().display().to_string();
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut e, &mut bytes).unwrap();
        if name == drop {
            continue;
        }
        if name == "module.json" {
            let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
            match edit(v) {
                Some(v) => bytes = serde_json::to_vec(&v).unwrap(),
                None => continue,
            }
        }
        let mut h = tar::Header::new_gnu();
        h.set_size(bytes.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        b.append_data(&mut h, &name, &bytes[..]).unwrap();
    }
    b.finish().unwrap();
}

#[allow(dead_code)]
/// The error reading or loading the module file `path` gives once its header is
/// edited by `edit` (written to `out`).
pub fn edited_err(
    path: &std::path::Path,
    out: &std::path::Path,
    edit: fn(&mut serde_json::Value),
) -> String {
    rewrite(
        path,
        out,
        |mut v| {
            edit(&mut v);
            Some(v)
        },
        "",
    );
    read_err(out)
}

pub fn read_err(path: &std::path::Path) -> String {
    match tessera_graph::CompiledNetwork::read(path) {
        Ok(n) => match n.load(std::sync::Arc::new(tessera_runtime::CpuDevice::new())) {
            Ok(_) => panic!("{} loaded", path.display()),
            Err(e) => e.to_string(),
        },
        Err(e) => e.to_string(),
    }
}
