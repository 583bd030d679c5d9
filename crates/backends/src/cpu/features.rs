//! Whether this machine can run what a CPU target compiles: the instruction-set
//! extensions that `-march=MCPU` lets the C compiler use, asked of the compiler itself
//! (its predefined macros), against those the host has. A target for another CPU
//! (`cpu -mcpu=skylake-avx512` on a machine without AVX-512) compiles fine, but its
//! kernels die with SIGILL when run: this is the check that says so first.

use super::find_compiler;
use crate::backend::BackendError;
use std::process::{Command, Stdio};
use tessera_target::Target;

/// The extensions tracked (as `host_cpu_features` names them) and the macro the C
/// compiler predefines when it may use each.
const MACROS: &[(&str, &str)] = &[
    ("sse4.2", "__SSE4_2__"),
    ("popcnt", "__POPCNT__"),
    ("avx", "__AVX__"),
    ("avx2", "__AVX2__"),
    ("fma", "__FMA__"),
    ("f16c", "__F16C__"),
    ("bmi1", "__BMI__"),
    ("bmi2", "__BMI2__"),
    ("avx512f", "__AVX512F__"),
    ("avx512bw", "__AVX512BW__"),
    ("avx512cd", "__AVX512CD__"),
    ("avx512dq", "__AVX512DQ__"),
    ("avx512vl", "__AVX512VL__"),
    ("avx512vnni", "__AVX512VNNI__"),
    ("avx512bf16", "__AVX512BF16__"),
    ("avx512fp16", "__AVX512FP16__"),
];

/// The tracked extensions that the C compiler may use with `-march=mcpu`, read from
/// the macros it predefines (`cc -march=MCPU -dM -E -x c /dev/null`); asked once per
/// compiler and `mcpu` in a process (a runner opens its device for every candidate).
pub fn march_features(mcpu: &str) -> Result<Vec<&'static str>, BackendError> {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    type Answers = HashMap<(String, String), Result<Vec<&'static str>, BackendError>>;
    static ASKED: OnceLock<Mutex<Answers>> = OnceLock::new();
    let compiler = find_compiler()?;
    let asked = ASKED.get_or_init(|| Mutex::new(HashMap::new()));
    let mut asked = asked.lock().unwrap_or_else(|e| e.into_inner());
    asked
        .entry((compiler.clone(), mcpu.to_string()))
        .or_insert_with(|| ask_compiler(&compiler, mcpu))
        .clone()
}

fn ask_compiler(compiler: &str, mcpu: &str) -> Result<Vec<&'static str>, BackendError> {
    let compiler = compiler.to_string();
    let mut words = compiler.split_whitespace();
    let program = words.next().ok_or_else(|| BackendError::CompilerNotFound {
        tried: "$CC (empty)".into(),
    })?;
    let output = Command::new(program)
        .args(words)
        .arg(format!("-march={mcpu}"))
        .args(["-dM", "-E", "-x", "c", "/dev/null"])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => BackendError::CompilerNotFound {
                tried: compiler.clone(),
            },
            _ => BackendError::UnknownMcpu {
                compiler: compiler.clone(),
                mcpu: mcpu.to_string(),
                message: e.to_string(),
            },
        })?;
    if !output.status.success() {
        let message = String::from_utf8_lossy(&output.stderr);
        let first = message
            .lines()
            .find(|l| l.contains("error"))
            .or_else(|| message.lines().next())
            .unwrap_or("it exited with an error")
            .trim()
            .to_string();
        return Err(BackendError::UnknownMcpu {
            compiler,
            mcpu: mcpu.to_string(),
            message: first,
        });
    }
    Ok(features_in(&String::from_utf8_lossy(&output.stdout)))
}

/// The tracked extensions whose macro `defines` (the compiler's `-dM` listing) defines.
fn features_in(defines: &str) -> Vec<&'static str> {
    let defined: std::collections::HashSet<&str> = defines
        .lines()
        .filter_map(|l| l.strip_prefix("#define "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    MACROS
        .iter()
        .filter(|(_, m)| defined.contains(m))
        .map(|(f, _)| *f)
        .collect()
}

/// Whether this machine can run the kernels compiled for the CPU target `target`: a
/// target without `-mcpu`, or with `-mcpu=native`, always can; another `-mcpu` must not
/// use an extension the host lacks ([`BackendError::HostLacksFeatures`] names them).
/// Off x86-64 no extensions are tracked, and every target passes.
pub fn check_host_runs(target: &Target) -> Result<(), BackendError> {
    let Some(mcpu) = target.option("mcpu").filter(|m| *m != "native") else {
        return Ok(());
    };
    if !cfg!(target_arch = "x86_64") {
        return Ok(());
    }
    let host = tessera_target::hardware::host_cpu_features();
    let missing: Vec<String> = march_features(mcpu)?
        .into_iter()
        .filter(|f| !host.contains(f))
        .map(str::to_string)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(BackendError::HostLacksFeatures {
        target: target.to_string(),
        mcpu: mcpu.to_string(),
        missing,
        host: host.iter().map(|s| s.to_string()).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_compilers_macros_name_the_extensions() {
        let defines =
            "#define __AVX2__ 1\n#define __AVX512F__ 1\n#define __FMA__ 1\n#define __x86_64 1\n";
        assert_eq!(features_in(defines), vec!["avx2", "fma", "avx512f"]);
        assert!(features_in("").is_empty());
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_host_runs_native_code_and_refuses_what_it_lacks() {
        let native: Target = "cpu -mcpu=native".parse().unwrap();
        check_host_runs(&native).unwrap();
        check_host_runs(&Target::cpu()).unwrap();
        // the compiler agrees with the host on what native means
        let host = tessera_target::hardware::host_cpu_features();
        let native_features = march_features("native").unwrap();
        for f in &native_features {
            assert!(
                host.contains(f),
                "-march=native uses {f}, which the host lacks"
            );
        }
        // a CPU with every tracked extension: refused with the missing ones named,
        // unless this host has them all
        let t: Target = "cpu -mcpu=sapphirerapids".parse().unwrap();
        let wanted = march_features("sapphirerapids").unwrap();
        assert!(wanted.contains(&"avx512f"), "{wanted:?}");
        let lacking: Vec<&str> = wanted
            .iter()
            .copied()
            .filter(|f| !host.contains(f))
            .collect();
        match check_host_runs(&t) {
            Ok(()) => assert!(lacking.is_empty()),
            Err(BackendError::HostLacksFeatures { missing, .. }) => assert_eq!(missing, lacking),
            Err(e) => panic!("{e}"),
        }
        // an -mcpu the compiler does not know
        let bad: Target = "cpu -mcpu=no-such-cpu".parse().unwrap();
        assert!(matches!(
            check_host_runs(&bad),
            Err(BackendError::UnknownMcpu { .. })
        ));
    }
}
