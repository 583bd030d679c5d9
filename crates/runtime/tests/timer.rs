//! The time evaluator: TVM's defaults, growth of `number`, repeats, statistics, print.

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
            cache_flush: false,
            slow_cutoff: None,
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

/// The growth rule over a clock of known readings (`evaluate_with`): a repeat shorter
/// than `min_repeat_ms` runs the calls a grown `number` adds, its calls so far
/// counting, the grown `number` is kept for the later repeats, and each result is the
/// repeat's time per call over all its calls. (Over the
/// wall clock, whether a call measures under `min_repeat_ms` is the machine's
/// business.)
#[test]
fn min_repeat_ms_grows_number() {
    let ev = TimeEvaluator {
        repeat: 3,
        min_repeat_ms: 20.0,
        ..Default::default()
    };
    // every call takes 2^-10 s (0.977 ms)
    let per_call = 1.0 / 1024.0;
    let mut calls = Vec::new();
    let r = ev
        .evaluate_with(|n| {
            calls.push(n);
            Ok::<f64, ()>(n as f64 * per_call)
        })
        .unwrap();
    // the warm-up; 1 call (short of 20 ms), then next_number(1, 0.977, 20) = 21 calls
    // in all, so 20 more (20.5 ms together); the later repeats start at 21
    assert_eq!(calls, vec![1, 1, 20, 21, 21]);
    assert_eq!(r.number, 21);
    assert_eq!(r.results.len(), 3);
    assert!(
        r.results.iter().all(|&s| (s - per_call).abs() < 1e-15),
        "{r:?}"
    );

    // readings that fall short twice: the golden ratio grows `number` past the
    // estimate, and a later repeat that falls short grows it again
    let readings_ms = [5.0, 1.5, 17.0, 25.0, 7.0, 40.0, 30.0];
    let mut calls = Vec::new();
    let r = ev
        .evaluate_with(|n| {
            let ms = readings_ms[calls.len()];
            calls.push(n);
            Ok::<f64, ()>(ms * 1e-3)
        })
        .unwrap();
    // the warm-up (5 ms); 1 call (1.5 ms); next_number(1, 1.5, 20) = max(14.3, 1.6) = 14
    // in all: 13 more (17 ms), 18.5 ms together, still short: next_number(14, 18.5, 20)
    // = max(16.1, 22.65) = 22, so 8 more, which reach 20 ms (25 ms more: 43.5 ms over
    // 22 calls); the second repeat's 22 calls fall short (7 ms): next_number(22, 7, 20)
    // = max(63.9, 35.6) = 63, so 41 more (40 ms: 47 ms over 63 calls); the third
    // repeat runs 63 at once
    assert_eq!(calls, vec![1, 1, 13, 8, 22, 41, 63]);
    assert_eq!(r.number, 63);
    let expected = [43.5 / 22.0, 47.0 / 63.0, 30.0 / 63.0];
    assert_eq!(r.results.len(), 3);
    for (got, want) in r.results.iter().zip(expected) {
        assert!((got * 1e3 - want).abs() < 1e-12, "{r:?}");
    }

    // without min_repeat_ms, number stays
    let mut calls = Vec::new();
    let r = TimeEvaluator::new(4, 2, 0.0)
        .evaluate_with(|n| {
            calls.push(n);
            Ok::<f64, ()>(1e-9)
        })
        .unwrap();
    assert_eq!((calls, r.number), (vec![1, 4, 4], 4));
}

/// A slow cutoff ends the evaluation after the first calls when they are slower than
/// it per call, with their mean as the one result; faster ones run to `min_repeat_ms`
/// as before.
#[test]
fn a_slow_candidate_is_timed_by_its_first_calls() {
    let ev = TimeEvaluator {
        number: 3,
        repeat: 2,
        min_repeat_ms: 50.0,
        ..Default::default()
    }
    .with_slow_cutoff(Some(4e-3));
    let run = |per_call: f64| {
        let mut calls = Vec::new();
        let r = ev
            .evaluate_with(|n| {
                calls.push(n);
                Ok::<f64, ()>(n as f64 * per_call)
            })
            .unwrap();
        (calls, r)
    };
    // 5 ms a call: the warm-up, then 3 calls (15 ms, short of 50) are enough
    let (calls, r) = run(5e-3);
    assert_eq!(calls, vec![1, 3]);
    assert_eq!(r.results.len(), 1);
    assert!((r.results[0] - 5e-3).abs() < 1e-15, "{r:?}");
    assert_eq!(r.number, 3);
    // 2 ms a call is under the cutoff: both repeats reach 50 ms
    let (calls, r) = run(2e-3);
    assert_eq!(calls, vec![1, 3, 23, 26]);
    assert_eq!(r.results.len(), 2);
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

#[test]
fn alternating_rounds_swap_the_order_and_stop_at_an_error() {
    use tessera_runtime::timer::{alternate, Side};
    let mut order = Vec::new();
    let mut rounds = Vec::new();
    alternate::<_, ()>(
        3,
        |side| {
            order.push(side);
            Ok(if side == Side::A { 1 } else { 2 })
        },
        |round, a, b| rounds.push((round, a, b)),
    )
    .unwrap();
    use Side::{A, B};
    assert_eq!(order, [A, B, B, A, A, B]);
    // each round's results come back as (a, b) whatever the order they ran in
    assert_eq!(rounds, [(0, 1, 2), (1, 1, 2), (2, 1, 2)]);
    let mut calls = 0;
    let r = alternate(
        4,
        |side| {
            calls += 1;
            if side == Side::B {
                Err("b failed")
            } else {
                Ok(())
            }
        },
        |_, _, _| panic!("no round completes"),
    );
    assert_eq!(r, Err("b failed"));
    assert_eq!(calls, 2);
}

#[test]
fn runs_per_round_fit_the_budget_within_their_bounds() {
    use tessera_runtime::timer::runs_within;
    // a 10 ms network: 10 runs in 1 s, capped at the most asked for
    assert_eq!(runs_within(10.0, 1000.0, 10), 10);
    assert_eq!(runs_within(10.0, 1000.0, 4), 4);
    // a 300 ms one: 3; a 650 ms one (ResNet-18 on PoCL): one run, never none
    assert_eq!(runs_within(300.0, 1000.0, 10), 3);
    assert_eq!(runs_within(650.0, 1000.0, 10), 1);
    assert_eq!(runs_within(5000.0, 1000.0, 10), 1);
    // an unusable first time keeps the most
    for t in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        assert_eq!(runs_within(t, 1000.0, 10), 10, "{t}");
    }
    assert_eq!(runs_within(1.0, 1000.0, 0), 1);
}

#[test]
fn one_timed_run_passes_its_error_on() {
    use tessera_runtime::timer::time_once_ms;
    let ms = time_once_ms::<()>(|| {
        std::thread::sleep(std::time::Duration::from_millis(2));
        Ok(())
    })
    .unwrap();
    // a lower bound only: a loaded machine may take longer, never less
    assert!(ms >= 2.0, "{ms}");
    assert_eq!(time_once_ms(|| Err::<(), _>("failed")), Err("failed"));
}

#[test]
fn rotated_rounds_start_one_side_further_on_and_keep_side_order() {
    use tessera_runtime::timer::rotate;
    let mut order = Vec::new();
    let mut rounds = Vec::new();
    rotate::<usize, ()>(
        4,
        3,
        |side| {
            order.push(side);
            Ok(side * 10)
        },
        |round, got| rounds.push((round, got)),
    )
    .unwrap();
    assert_eq!(order, [0, 1, 2, 1, 2, 0, 2, 0, 1, 0, 1, 2]);
    for (i, (round, got)) in rounds.iter().enumerate() {
        assert_eq!((*round, got.as_slice()), (i, &[0, 10, 20][..]));
    }
    // a failing side stops the rounds with its error
    let mut calls = 0;
    let r = rotate(
        2,
        3,
        |side| {
            calls += 1;
            if side == 1 {
                Err("side 1 failed")
            } else {
                Ok(())
            }
        },
        |_, _| panic!("no round completes"),
    );
    assert_eq!((r, calls), (Err("side 1 failed"), 2));
}
