//! The CPU backend's kernel cache through `Backend::build`: a second build of the same
//! function calls no compiler and gives the same shared object, which runs; another flag
//! is another entry; with the cache off every build compiles. A file of its own: it sets
//! `$CC` and `$TESSERA_CACHE_DIR` for the whole process.

use std::os::unix::fs::PermissionsExt;
use tessera_backends::{Backend, CpuBackend, Target};
use tessera_ir::DataType;
use tessera_te::{lower, ops, placeholder, Schedule};

/// How many times the logging compiler wrapper compiled (not counting `--version`, nor
/// the question of which extensions a `-march` has: `-dM -E`).
fn compiles(log: &std::path::Path) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| *l == "compile")
        .count()
}

#[test]
fn a_second_build_of_the_same_kernel_comes_from_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("cc.log");
    let cc = dir.path().join("logging-cc");
    let real = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    std::fs::write(
        &cc,
        format!(
            "#!/bin/sh\ncase \"$1\" in --version) exec {real} --version;; esac\ncase \" $* \" in *\" -dM \"*) exec {real} \"$@\";; esac\necho compile >> {}\nexec {real} \"$@\"\n",
            log.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&cc, std::fs::Permissions::from_mode(0o755)).unwrap();
    let cache = dir.path().join("cache");
    std::env::set_var("CC", &cc);
    std::env::set_var("TESSERA_CACHE_DIR", &cache);

    let a = placeholder(&[8, 8], DataType::float32(), "A").unwrap();
    let b = placeholder(&[8, 8], DataType::float32(), "B").unwrap();
    let c = ops::matmul(&a, &b).unwrap();
    let f = lower(&Schedule::create(&[c.clone()]).unwrap(), &[a, b, c], "mm").unwrap();
    let backend = CpuBackend::new(Target::cpu());

    let first = backend.build(&f, &dir.path().join("one")).unwrap();
    assert_eq!(compiles(&log), 1);
    let entries = || std::fs::read_dir(&cache).unwrap().count();
    assert_eq!(entries(), 1, "the built kernel is stored");

    // the same function elsewhere: copied from the cache, no compiler called
    let second = backend.build(&f, &dir.path().join("two")).unwrap();
    assert_eq!(compiles(&log), 1, "a cached kernel was compiled again");
    assert_ne!(first.path, second.path);
    assert_eq!(
        std::fs::read(&first.path).unwrap(),
        std::fs::read(&second.path).unwrap()
    );
    // and it loads and exports its entry like a compiled one
    let lib = unsafe { libloading::Library::new(&second.path) }.unwrap();
    let entry: Result<libloading::Symbol<'_, unsafe extern "C" fn()>, _> =
        unsafe { lib.get(second.entry.as_bytes()) };
    assert!(entry.is_ok(), "no `{}` in the cached kernel", second.entry);

    // another flag (another target) is another entry
    let other = CpuBackend::new("cpu -mcpu=x86-64".parse::<Target>().unwrap());
    other.build(&f, &dir.path().join("three")).unwrap();
    assert_eq!(compiles(&log), 2);
    assert_eq!(entries(), 2);

    // turned off: every build compiles, nothing is stored
    std::env::set_var("TESSERA_CACHE_DIR", "off");
    backend.build(&f, &dir.path().join("four")).unwrap();
    assert_eq!(compiles(&log), 3);
    assert_eq!(entries(), 2);
}
