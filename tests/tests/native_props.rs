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
