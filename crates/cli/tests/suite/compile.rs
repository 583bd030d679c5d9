//! `tessera compile` and `tessera run --module`: a network compiled into one file runs in
//! a fresh process without the C compiler and gives the output of `tessera run` on the
//! same network; a module for another target, or a file that is not one, is one line.

use crate::common::{command, one_line_error, tessera, text};

#[test]
fn a_compiled_module_runs_without_the_compiler_and_matches_run() {
    let dir = tempfile::tempdir().unwrap();
    let module = dir.path().join("r18.tsm");
    let (a, b) = (dir.path().join("a.npy"), dir.path().join("b.npy"));
    let net = ["--network", "resnet-18", "--image-size", "32"];
    let m = module.to_str().unwrap();

    let out = tessera(&[&["compile"][..], &net, &["--out", m]].concat());
    assert!(out.status.success(), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("tessera run --module"));

    let out = tessera(&[&["run"][..], &net, &["--output", a.to_str().unwrap()]].concat());
    assert!(out.status.success(), "{}", text(&out));

    // a fresh process that could not call a compiler if it tried
    let empty = dir.path().join("no-tools");
    std::fs::create_dir(&empty).unwrap();
    let out = command(&["run", "--module", m, "--output", b.to_str().unwrap()])
        .env("PATH", &empty)
        .env("CC", empty.join("cc"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("loaded `resnet-18` for `cpu`"), "{stdout}");
    assert_eq!(
        std::fs::read(&a).unwrap(),
        std::fs::read(&b).unwrap(),
        "the module's output differs from `tessera run`'s"
    );

    // another target, a network as well as a module, not a module
    let err = one_line_error(&tessera(&[
        "run",
        "--module",
        m,
        "--target",
        "cpu -mcpu=skylake",
    ]));
    assert!(
        err.contains("was compiled for `cpu`, not `cpu -mcpu=skylake`"),
        "{err}"
    );
    let out = tessera(&["run", "--module", m, "--network", "resnet-18"]);
    assert!(!out.status.success());
    let bogus = dir.path().join("bogus.tsm");
    std::fs::write(&bogus, b"hello").unwrap();
    let err = one_line_error(&tessera(&["run", "--module", bogus.to_str().unwrap()]));
    assert!(err.contains("not a tessera module"), "{err}");
}

#[test]
fn a_network_too_large_for_the_machine_is_one_line() {
    // 100,000 images of 224×224×3: past 32-bit indices
    let err = one_line_error(&tessera(&[
        "run",
        "--network",
        "resnet-18",
        "--batch",
        "100000",
    ]));
    assert!(
        err.contains("is too large: kernels index with 32 bits"),
        "{err}"
    );
}
