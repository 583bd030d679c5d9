//! The time evaluator: TVM's defaults, growth of `number`, repeats, statistics, print.

use std::time::Duration;
use tessera_runtime::{next_number, Stats, TimeEvaluator, TimeResult};

#[test]
fn defaults_are_tvms() {
    let d = TimeEvaluator::default();
    assert_eq!(
        d,
        TimeEvaluator {
            number: 1,
            repeat: 1,
            min_repeat_ms: 0.0,
            cache_flush: false
        }
    );
    assert_eq!(TimeEvaluator::new(1, 1, 0.0), d);
    assert!(d.with_cache_flush(true).cache_flush);
}

#[test]
fn calls_warm_up_plus_number_times_repeat() {
    let mut calls = 0;
    let ev = TimeEvaluator::new(3, 4, 0.0);
    let r = ev
        .evaluate(|| {
            calls += 1;
            Ok::<(), ()>(())
        })
        .unwrap();
    assert_eq!(calls, 1 + 3 * 4);
    assert_eq!(r.results.len(), 4);
    assert_eq!(r.number, 3);
    assert!(r.results.iter().all(|&s| s >= 0.0));
}

#[test]
fn min_repeat_ms_grows_number() {
    let ev = TimeEvaluator {
        repeat: 3,
        min_repeat_ms: 20.0,
        ..Default::default()
    };
    let r = ev
        .evaluate(|| {
            std::thread::sleep(Duration::from_millis(1));
            Ok::<(), ()>(())
        })
        .unwrap();
    assert_eq!(r.results.len(), 3);
    assert!(r.number > 1, "{r:?}");
    // Each repeat lasted at least min_repeat_ms at the final number... roughly: the
    // per-call time is about 1 ms, and number calls took >= 20 ms.
    assert!(r.number as f64 * r.max_ms() >= 20.0, "{r:?}");
    assert!(r.min_ms() >= 1.0, "{r}");
}

#[test]
fn next_number_follows_tvm() {
    // max(min_repeat_ms / per_call + 1, number * 1.618), truncated.
    assert_eq!(next_number(1, 1.0, 20.0), 21);
    assert_eq!(next_number(10, 5.0, 20.0), 41);
    // The golden-ratio growth wins when the estimate is small.
    assert_eq!(next_number(100, 19.0, 20.0), 161);
    // Always grows while the repeat is too short.
    for number in [1usize, 2, 3, 10, 1000] {
        for duration in [1e-6, 0.01, 1.0, 19.99] {
            assert!(next_number(number, duration, 20.0) > number);
        }
    }
    // Saturates instead of overflowing.
    assert_eq!(next_number(1, 1e-300, 1e300), usize::MAX);
}

#[test]
fn errors_stop_the_evaluation() {
    let mut calls = 0;
    let r = TimeEvaluator::new(5, 5, 0.0).evaluate(|| {
        calls += 1;
        if calls == 4 {
            Err("boom")
        } else {
            Ok(())
        }
    });
    assert_eq!(r, Err("boom"));
    assert_eq!(calls, 4);
    // The warm-up call counts.
    let r = TimeEvaluator::default().evaluate(|| Err::<(), _>(7));
    assert_eq!(r, Err(7));
}

#[test]
fn zero_repeats_and_zero_number() {
    let mut calls = 0;
    let r = TimeEvaluator::new(0, 0, 0.0)
        .evaluate(|| {
            calls += 1;
            Ok::<(), ()>(())
        })
        .unwrap();
    assert_eq!(calls, 1);
    assert!(r.results.is_empty());
    assert!(r.mean_ms().is_nan());
    let mut calls = 0;
    let r = TimeEvaluator::new(0, 2, 0.0)
        .evaluate(|| {
            calls += 1;
            Ok::<(), ()>(())
        })
        .unwrap();
    assert_eq!((calls, r.number), (3, 1));
}

#[test]
fn cache_flush_runs() {
    let mut calls = 0;
    let ev = TimeEvaluator::new(1, 3, 0.0).with_cache_flush(true);
    let r = ev
        .evaluate(|| {
            calls += 1;
            Ok::<(), ()>(())
        })
        .unwrap();
    assert_eq!((calls, r.results.len()), (4, 3));
}

#[test]
fn stats_on_known_numbers() {
    // numpy: mean 2.5, median 2.5, std 1.118033988749895 (ddof=0).
    let s = Stats::of(&[4.0, 1.0, 3.0, 2.0]);
    assert_eq!(s.mean, 2.5);
    assert_eq!(s.median, 2.5);
    assert_eq!(s.max, 4.0);
    assert_eq!(s.min, 1.0);
    assert!((s.std - 1.118033988749895).abs() < 1e-15);
    let odd = Stats::of(&[5.0, 1.0, 3.0]);
    assert_eq!(odd.median, 3.0);
    assert!((odd.std - (8.0f64 / 3.0).sqrt()).abs() < 1e-15);
    let one = Stats::of(&[7.0]);
    assert_eq!((one.mean, one.median, one.std), (7.0, 7.0, 0.0));
    assert!(Stats::of(&[]).median.is_nan());
    // TimeResult reports milliseconds of its per-call seconds.
    let r = TimeResult {
        results: vec![0.004, 0.001, 0.003, 0.002],
        number: 10,
    };
    assert!((r.mean_ms() - 2.5).abs() < 1e-12);
    assert!((r.median_ms() - 2.5).abs() < 1e-12);
    assert!((r.max_ms() - 4.0).abs() < 1e-12);
    assert!((r.min_ms() - 1.0).abs() < 1e-12);
    assert!((r.std_ms() - 1.118033988749895).abs() < 1e-12);
}

#[test]
fn display_matches_tvms_summary() {
    // Python: f"{x:^12.4f}" per column, as in TVM's BenchmarkResult.__str__ (less its
    // trailing spaces).
    let r = TimeResult {
        results: vec![0.004, 0.001, 0.003, 0.002],
        number: 10,
    };
    let expected = "Execution time summary:\n \
mean (ms)   median (ms)    max (ms)     min (ms)     std (ms)  \n   \
2.5000       2.5000       4.0000       1.0000       1.1180   ";
    assert_eq!(r.to_string(), expected);
}

#[test]
fn a_comparison_claims_a_speed_up_only_when_every_round_agrees() {
    use tessera_runtime::timer::{Comparison, Verdict};
    // b faster in every round: claimed, with the median ratio
    let c = Comparison {
        a: vec![10.0, 12.0, 11.0],
        b: vec![5.0, 6.0, 5.0],
    };
    assert_eq!(c.verdict(), Verdict::BFaster(2.0));
    // a faster in every round
    let c = Comparison {
        a: vec![4.0, 4.0, 4.0],
        b: vec![8.0, 12.0, 6.0],
    };
    assert_eq!(c.verdict(), Verdict::AFaster(2.0));
    // one round disagrees (the 17.69 against 9.43 ms of a run whose std was 34 ms):
    // no claim, whatever the means say
    let c = Comparison {
        a: vec![17.7, 9.0, 9.1],
        b: vec![9.4, 9.2, 9.0],
    };
    assert_eq!(c.verdict(), Verdict::WithinNoise);
    // every round agrees, but by under 2 %
    let c = Comparison {
        a: vec![10.1, 10.1],
        b: vec![10.0, 10.0],
    };
    assert_eq!(c.verdict(), Verdict::WithinNoise);
    // nothing timed
    assert_eq!(Comparison::default().verdict(), Verdict::WithinNoise);
}
