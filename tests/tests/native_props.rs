//! The foundation's schedule property, compiled: random valid schedules of random small
//! matmul and conv2d problems, built by the CPU backend and run natively, compute what
//! the interpreter computes for the unscheduled program.

use proptest::prelude::*;
use tessera_te::testing::random_schedule;
use tessera_tests::check_native_against_interpreter;

proptest! {
    // Each case runs the C compiler: a small number of cases keeps CI fast.
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn random_schedules_compiled_compute_the_same(seed in any::<u64>(), steps in 0usize..12) {
        let (s, outs, args, applied) = random_schedule(seed, steps);
        let dir = tempfile::tempdir().unwrap();
        let n_inputs = args.len() - outs.len();
        let r = check_native_against_interpreter(&s, &outs, &args, n_inputs, dir.path());
        prop_assert!(r.is_ok(), "steps {:?}: {}", applied, r.unwrap_err());
    }
}

/// A case the property found in CI: GCC 12.2 with `-O3 -mavx2` miscompiled the padded
/// conv2d whose padding is computed at an unrolled output-channel axis (the backend now
/// turns GCC's loop if-conversion off; see `workaround_cflags`).
#[test]
fn padding_computed_at_an_unrolled_axis_compiles_correctly() {
    let (s, outs, args, applied) = random_schedule(16457332272428084488, 2);
    assert_eq!(applied, ["unroll", "compute_at"]);
    let dir = tempfile::tempdir().unwrap();
    let n_inputs = args.len() - outs.len();
    let r = check_native_against_interpreter(&s, &outs, &args, n_inputs, dir.path());
    assert!(r.is_ok(), "{}", r.unwrap_err());
}
