//! Property: random valid sequences of schedule primitives on matmul and conv2d lower
//! to functions that compute what the unscheduled program computes.

mod common;

use proptest::prelude::*;
use tessera_te::testing::random_schedule;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn random_schedules_compute_the_same(seed in any::<u64>(), steps in 0usize..12) {
        let (s, outs, args, applied) = random_schedule(seed, steps);
        let n_inputs = args.len() - outs.len();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| common::assert_same_as_unscheduled(&s, &outs, &args, n_inputs)));
        prop_assert!(result.is_ok(), "steps applied: {:?}", applied);
    }
}
