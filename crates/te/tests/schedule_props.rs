//! Property: random valid sequences of schedule primitives on matmul and conv2d lower
//! to functions that compute what the unscheduled program computes.

mod common;

use proptest::prelude::*;
use tessera_te::testing::{problem, random_step, Rng};
use tessera_te::Schedule;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn random_schedules_compute_the_same(seed in any::<u64>(), steps in 0usize..12) {
        let mut rng = Rng(seed | 1);
        let (outs, args) = problem(&mut rng);
        let mut s = Schedule::create(&outs).unwrap();
        let mut applied = Vec::new();
        for _ in 0..steps {
            if let Some(name) = random_step(&mut s, &mut rng) {
                applied.push(name);
            }
        }
        let n_inputs = args.len() - outs.len();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| common::assert_same_as_unscheduled(&s, &outs, &args, n_inputs)));
        prop_assert!(result.is_ok(), "steps applied: {:?}", applied);
    }
}
