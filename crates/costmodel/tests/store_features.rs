//! The auto-scheduler's per-store features: one row per store, every field named, and
//! the fields that should see a schedule's structure do.

use tessera_costmodel::{store_feature_names, store_features, STORE_FEATURE_LEN};
use tessera_ir::DataType;
use tessera_te::{lower, ops, placeholder, Schedule};

#[test]
fn a_matmul_has_one_row_per_store_and_its_schedule_shows() {
    assert_eq!(STORE_FEATURE_LEN, 164);
    let names = store_feature_names();
    assert_eq!(names.len(), STORE_FEATURE_LEN);
    let f32 = DataType::float32();
    let a = placeholder(&[64, 64], f32, "A").unwrap();
    let b = placeholder(&[64, 64], f32, "B").unwrap();
    let c = ops::matmul(&a, &b).unwrap();
    let args = [a, b, c.clone()];

    let plain = lower(&Schedule::create(&[c.clone()]).unwrap(), &args, "plain").unwrap();
    let rows = store_features(&plain);
    // the initialization and the accumulation
    assert_eq!(rows.len(), 2, "{plain}");
    assert!(rows.iter().all(|r| r.len() == STORE_FEATURE_LEN));
    let at = |n: &str| names.iter().position(|x| x == n).unwrap();
    let acc = &rows[1];
    // 64³ fused multiply-adds: log2(1 + 262144)
    assert!((acc[at("float_mad")] - (262145f32).log2()).abs() < 1e-3);
    assert_eq!(acc[at("num_loops")], 3.0);
    assert_eq!(acc[at("parallel_num")], 0.0);
    assert_eq!(acc[at("parallel_type.none")], 1.0);
    // the stored buffer is read and written, with reuse along k
    assert_eq!(
        acc[at("B0.acc_type.read_write")]
            + acc[at("B1.acc_type.read_write")]
            + acc[at("B2.acc_type.read_write")],
        1.0
    );

    let mut s = Schedule::create(&[c.clone()]).unwrap();
    let ax = s.axis(&c).unwrap();
    let (io, _jo, _ii, ji) = s.tile(&c, &ax[0], &ax[1], 8, 16).unwrap();
    s.vectorize(&c, &ji).unwrap();
    s.parallel(&c, &io).unwrap();
    let tiled = lower(&s, &args, "tiled").unwrap();
    let rows = store_features(&tiled);
    let acc = rows.last().unwrap();
    assert_eq!(acc[at("parallel_num")], 1.0);
    assert_eq!(acc[at("parallel_type.outer_spatial")], 1.0);
    assert_eq!(acc[at("vec_num")], 1.0);
    assert!((acc[at("vec_len")] - 17f32.log2()).abs() < 1e-4);
    // the vectorized j.inner has the reduction loop k inside it
    assert_eq!(acc[at("vec_type.middle_spatial")], 1.0, "{tiled}");
    insta::assert_snapshot!(names.join("\n"));
}
