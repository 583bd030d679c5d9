//! `tessera op` over the operator catalog: operators beyond the first five build,
//! check against the interpreter and time end to end; `--list` prints the catalog; an
//! unknown name or a bad attribute is one line on stderr.

use crate::common::{one_line_error, tessera};

const CHECKED: &[&str] = &[
    "--check",
    "interp",
    "--repeat",
    "1",
    "--min-repeat-ms",
    "1",
    "--json",
];

#[test]
fn catalog_operators_build_check_and_time() {
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "depthwise_conv2d",
            "1,9,9,4,3,3",
            &["--pad", "1", "--stride", "2"],
        ),
        ("depthwise_conv2d_nchw", "1,8,7,3,3,3", &[]),
        (
            "max_pool2d",
            "1,9,9,3,3,3",
            &["--stride", "2", "--pad", "1"],
        ),
        (
            "avg_pool2d",
            "2,8,8,3,2,2",
            &["--stride", "2", "--ceil-mode"],
        ),
        ("global_avg_pool2d", "1,7,7,8", &[]),
        ("batch_matmul", "2,5,7,3", &[]),
        ("conv2d_winograd", "1,8,8,4,8,3,3", &["--pad", "1"]),
        ("conv2d_nchw", "1,9,9,3,4,3,3", &["--pad", "1"]),
        ("conv2d_nchwc", "1,6,6,8,16,3,3", &["--block", "4,8"]),
        ("conv2d_transpose", "1,4,4,3,2,3,3", &["--stride", "2"]),
        ("conv3d", "1,4,4,4,2,3,3,3,3", &["--pad", "1"]),
        ("softmax", "3,7,9", &[]),
        ("layer_norm", "4,16", &[]),
        ("batch_norm", "1,5,5,8", &[]),
        ("gelu", "3,40", &[]),
        ("sqrt", "64", &[]),
        ("add", "3,17", &[]),
        ("pad", "3,5", &["--pad", "2"]),
    ];
    for (op, shape, extra) in cases {
        let mut args = vec!["op", op, "--shape", shape];
        args.extend_from_slice(extra);
        args.extend_from_slice(CHECKED);
        let out = tessera(&args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["op"], *op, "{v}");
        assert_eq!(v["correct"], true, "{args:?}: {v}");
        assert_eq!(v["checked_against"], "interpreter", "{args:?}");
        assert!(v["median_ms"].as_f64().unwrap() > 0.0, "{v}");
    }
}

#[test]
fn an_alias_names_the_catalog_operator() {
    let mut args = vec!["op", "conv2d_nhwc", "--shape", "1,6,6,3,4,3,3"];
    args.extend_from_slice(CHECKED);
    let out = tessera(&args);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (v["op"].as_str(), v["correct"].as_bool()),
        (Some("conv2d"), Some(true))
    );
}

#[test]
fn list_prints_the_catalog() {
    let out = tessera(&["op", "--list"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text, tessera_te::catalog::table());
    let help = String::from_utf8_lossy(&tessera(&["op", "--help"]).stdout).to_string();
    for e in tessera_te::catalog::entries() {
        assert!(
            help.contains(e.name) && help.contains(e.shape),
            "{}",
            e.name
        );
    }
}

#[test]
fn unknown_operators_and_bad_attributes_are_one_line() {
    let err = one_line_error(&tessera(&["op", "convolution", "--shape", "1,2,3"]));
    assert!(
        err.contains(
            "unknown operator `convolution` (known: matmul, dense, dense_packed, batch_matmul,"
        ) && err.contains("max_pool2d"),
        "{err}"
    );
    let err = one_line_error(&tessera(&[
        "op",
        "max_pool2d",
        "--shape",
        "1,8,8,3,2,2",
        "--stride",
        "0",
    ]));
    assert!(
        err.contains("operator `max_pool2d`: invalid attribute `stride`"),
        "{err}"
    );
    let err = one_line_error(&tessera(&[
        "op",
        "conv2d_winograd",
        "--shape",
        "1,8,8,3,4,5,5",
    ]));
    assert!(
        err.contains("cannot build operator `conv2d_winograd` --shape 1,8,8,3,4,5,5")
            && err.contains("Winograd F(m×m, 3×3) takes only 3x3"),
        "{err}"
    );
    let err = one_line_error(&tessera(&["op", "relu", "--shape", "4,-2"]));
    assert!(err.contains("every size must be positive, got -2"), "{err}");
    let err = one_line_error(&tessera(&[
        "op",
        "conv2d_nchwc",
        "--shape",
        "1,6,6,8,16,3,3",
        "--block",
        "4",
    ]));
    assert!(
        err.contains("--block takes IB,OB (2 numbers), got 1"),
        "{err}"
    );
}

#[test]
fn buffers_the_machine_cannot_hold_are_one_line_not_an_abort() {
    // A and B are small; C is 2e6 × 2e6 floats (16 TB)
    let out = tessera(&["op", "matmul", "--shape", "2000000,2000000,1"]);
    let err = one_line_error(&out);
    assert!(err.contains("cannot allocate"), "{err}");
    assert!(err.contains("[2000000, 2000000]"), "{err}");
}
