//! The time evaluator, with TVM's conventions (`time_evaluator(number, repeat,
//! min_repeat_ms, f_preproc="cache_flush_cpu_non_first_arg")`).

use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

/// Size of the buffer written over to flush the CPU caches: larger than the last-level
/// cache of any CPU we measure on.
pub const CACHE_FLUSH_BYTES: usize = 64 << 20;

/// How many times in a row a repeat may measure exactly zero time before it is accepted
/// as is (TVM's `limit_zero_time_iterations`).
const LIMIT_ZERO_TIME_ITERATIONS: usize = 100;

/// How to time a function, like TVM's `time_evaluator`.
///
/// Each repeat runs the function `number` times and records the mean time per call. If a
/// repeat took less than `min_repeat_ms`, `number` grows (see [`next_number`]) and the
/// calls the grown `number` adds are run, until the repeat's calls together have taken
/// `min_repeat_ms`; the repeat's result is the mean over all its calls, and its number
/// of calls is kept for later repeats. (TVM runs a short repeat again from the start
/// with the grown `number`: the same mean per call, at up to twice the time; a tuner
/// spends most of its time here.) With `cache_flush` the CPU caches are flushed before
/// each repeat (not between the calls of a repeat).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimeEvaluator {
    /// Calls per repeat (0 counts as 1).
    pub number: usize,
    /// Number of repeats, i.e. of measurements.
    pub repeat: usize,
    /// The least time one repeat must take; 0 disables growing `number`.
    pub min_repeat_ms: f64,
    /// Flush the CPU caches before each repeat.
    pub cache_flush: bool,
    /// Seconds per call above which the first calls are the whole measurement: when
    /// the first repeat's first `number` calls average more than this, the evaluation
    /// ends there with their mean as its one result. A tuner sets it to a multiple of
    /// the best time known, since a candidate that much slower needs no more precision
    /// than its first calls give. `None`: every repeat runs to `min_repeat_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slow_cutoff: Option<f64>,
}

impl Default for TimeEvaluator {
    /// TVM's defaults: `number` 1, `repeat` 1, `min_repeat_ms` 0, no cache flush.
    fn default() -> Self {
        TimeEvaluator {
            number: 1,
            repeat: 1,
            min_repeat_ms: 0.0,
            cache_flush: false,
            slow_cutoff: None,
        }
    }
}

impl TimeEvaluator {
    pub fn new(number: usize, repeat: usize, min_repeat_ms: f64) -> Self {
        TimeEvaluator {
            number,
            repeat,
            min_repeat_ms,
            cache_flush: false,
            slow_cutoff: None,
        }
    }

    /// The same evaluator with [`slow_cutoff`](Self::slow_cutoff) set.
    pub fn with_slow_cutoff(mut self, seconds_per_call: Option<f64>) -> Self {
        self.slow_cutoff = seconds_per_call;
        self
    }

    /// The same evaluator with the cache flush on or off.
    pub fn with_cache_flush(mut self, cache_flush: bool) -> Self {
        self.cache_flush = cache_flush;
        self
    }

    /// Times `f`: one untimed warm-up call, then `repeat` timed repeats. The first error
    /// `f` returns stops the evaluation and is returned.
    pub fn evaluate<E>(&self, mut f: impl FnMut() -> Result<(), E>) -> Result<TimeResult, E> {
        self.evaluate_with(|number| {
            let start = Instant::now();
            for _ in 0..number {
                f()?;
            }
            Ok(start.elapsed().as_secs_f64())
        })
    }

    /// The same protocol over a device's own clock: `run(n)` makes `n` calls and returns
    /// the seconds they took as the device measured them (e.g. OpenCL profiling events,
    /// CUDA events); `run(1)` first is the untimed warm-up.
    pub fn evaluate_with<E>(
        &self,
        mut run: impl FnMut(usize) -> Result<f64, E>,
    ) -> Result<TimeResult, E> {
        let mut number = self.number.max(1);
        run(1)?;
        let mut results = Vec::with_capacity(self.repeat);
        for _ in 0..self.repeat {
            if self.cache_flush {
                flush_cpu_cache();
            }
            let (mut calls, mut seconds, mut zero_times) = (0usize, 0.0f64, 0usize);
            let mut more = number;
            loop {
                let s = run(more)?;
                if s <= 0.0 {
                    zero_times += 1;
                }
                calls += more;
                seconds += s.max(0.0);
                let per_call = seconds / calls as f64;
                if results.is_empty() && self.slow_cutoff.is_some_and(|cut| per_call > cut) {
                    return Ok(TimeResult {
                        results: vec![per_call],
                        number: calls,
                    });
                }
                let duration_ms = seconds * 1e3;
                if !(duration_ms < self.min_repeat_ms && zero_times < LIMIT_ZERO_TIME_ITERATIONS) {
                    break;
                }
                // the calls made so far count: only the rest of the grown number is run
                more = if duration_ms > 0.0 {
                    next_number(calls, duration_ms, self.min_repeat_ms).saturating_sub(calls)
                } else {
                    number
                }
                .max(1);
            }
            number = calls;
            results.push(seconds / calls as f64);
        }
        Ok(TimeResult { results, number })
    }
}

/// The `number` for the next try of a repeat that ran `number` calls in `duration_ms`,
/// short of `min_repeat_ms`: TVM's `max(min_repeat_ms / (duration_ms / number) + 1,
/// number * 1.618)`, truncated. This always exceeds `number` when
/// `0 < duration_ms < min_repeat_ms`.
pub fn next_number(number: usize, duration_ms: f64, min_repeat_ms: f64) -> usize {
    const GOLDEN_RATIO: f64 = 1.618;
    let per_call_ms = duration_ms / number as f64;
    let grown = (min_repeat_ms / per_call_ms + 1.0).max(number as f64 * GOLDEN_RATIO);
    // `as` saturates, and a NaN (not reachable from `evaluate`) becomes 0.
    (grown as usize).max(1)
}

/// Writes over a buffer larger than the last-level cache, so that the next measurement
/// starts with cold caches. The buffer is allocated on first use and kept.
pub fn flush_cpu_cache() {
    static BUFFER: OnceLock<Mutex<(Vec<u8>, u8)>> = OnceLock::new();
    let buffer = BUFFER.get_or_init(|| Mutex::new((vec![0; CACHE_FLUSH_BYTES], 0)));
    let mut guard = buffer.lock().unwrap_or_else(|e| e.into_inner());
    let (buf, counter) = &mut *guard;
    *counter = counter.wrapping_add(1);
    buf.fill(*counter);
    std::hint::black_box(&mut buf[..]);
}

/// The measurements of one evaluation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimeResult {
    /// Each repeat's mean time per call, in seconds.
    pub results: Vec<f64>,
    /// The number of calls per repeat at the end (grown by `min_repeat_ms`).
    pub number: usize,
}

impl TimeResult {
    /// Statistics of `results`, in milliseconds.
    pub fn stats_ms(&self) -> Stats {
        let ms: Vec<f64> = self.results.iter().map(|s| s * 1e3).collect();
        Stats::of(&ms)
    }
    pub fn mean_ms(&self) -> f64 {
        self.stats_ms().mean
    }
    pub fn median_ms(&self) -> f64 {
        self.stats_ms().median
    }
    pub fn max_ms(&self) -> f64 {
        self.stats_ms().max
    }
    pub fn min_ms(&self) -> f64 {
        self.stats_ms().min
    }
    /// Population standard deviation (NumPy's default `ddof=0`).
    pub fn std_ms(&self) -> f64 {
        self.stats_ms().std
    }
}

/// Summary statistics of a set of values (all NaN for no values).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stats {
    pub mean: f64,
    /// The middle value, or the mean of the two middle ones (like `numpy.median`).
    pub median: f64,
    pub max: f64,
    pub min: f64,
    /// Population standard deviation (`numpy.std` with `ddof=0`).
    pub std: f64,
}

impl Stats {
    pub fn of(values: &[f64]) -> Stats {
        if values.is_empty() {
            return Stats {
                mean: f64::NAN,
                median: f64::NAN,
                max: f64::NAN,
                min: f64::NAN,
                std: f64::NAN,
            };
        }
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n;
        let var = values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let k = sorted.len();
        let median = if k % 2 == 1 {
            sorted[k / 2]
        } else {
            (sorted[k / 2 - 1] + sorted[k / 2]) / 2.0
        };
        Stats {
            mean,
            median,
            max: sorted[k - 1],
            min: sorted[0],
            std: var.sqrt(),
        }
    }
}

/// One of the two sides of an alternating comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    A,
    B,
}

/// Times two programs in `rounds` alternating rounds: `time(Side::A)` then
/// `time(Side::B)` in even rounds, the other order in odd ones (so that neither side
/// always runs on the warmer or the quieter machine), and hands each round's two
/// results to `each(round, a, b)`. Stops at the first error.
pub fn alternate<T, E>(
    rounds: usize,
    mut time: impl FnMut(Side) -> Result<T, E>,
    mut each: impl FnMut(usize, T, T),
) -> Result<(), E> {
    for round in 0..rounds {
        let (a, b) = if round % 2 == 0 {
            let a = time(Side::A)?;
            (a, time(Side::B)?)
        } else {
            let b = time(Side::B)?;
            (time(Side::A)?, b)
        };
        each(round, a, b);
    }
    Ok(())
}

/// [`alternate`] over `sides` sides: each round times every side once, starting one
/// side further on than the round before (side `round % sides` first), and gives
/// `each` the round's results in side order.
pub fn rotate<T, E>(
    rounds: usize,
    sides: usize,
    mut time: impl FnMut(usize) -> Result<T, E>,
    mut each: impl FnMut(usize, Vec<T>),
) -> Result<(), E> {
    for round in 0..rounds {
        let mut got: Vec<Option<T>> = (0..sides).map(|_| None).collect();
        for k in 0..sides {
            let side = (round + k) % sides;
            got[side] = Some(time(side)?);
        }
        each(round, got.into_iter().flatten().collect());
    }
    Ok(())
}

/// The milliseconds `run` takes, once (for [`runs_within`]: call it after a warm-up run,
/// since a first run that compiles kernels or uploads weights would say too few runs).
pub fn time_once_ms<E>(run: impl FnOnce() -> Result<(), E>) -> Result<f64, E> {
    let start = Instant::now();
    run()?;
    Ok(start.elapsed().as_secs_f64() * 1e3)
}

/// How many whole runs of a program that took `one_run_ms` fit in `budget_ms`: at least
/// 1, at most `max_runs`. The rounds of a comparison take whole runs, and a network
/// that runs for half a second needs one run per round where a 10 ms one needs ten, or
/// the comparison would take minutes (the same idea as the time evaluator's
/// `min_repeat_ms`, from the other side).
pub fn runs_within(one_run_ms: f64, budget_ms: f64, max_runs: usize) -> usize {
    let max_runs = max_runs.max(1);
    if !one_run_ms.is_finite() || one_run_ms <= 0.0 || !budget_ms.is_finite() {
        return max_runs;
    }
    let fit = (budget_ms / one_run_ms).floor();
    if fit < 1.0 {
        1
    } else if fit >= max_runs as f64 {
        max_runs
    } else {
        fit as usize
    }
}

/// Two programs (`a`, `b`) timed in alternating rounds, each round giving one time per
/// side (seconds or milliseconds, the same unit on both). On a shared machine the
/// speed drifts between minutes, so a claim rests on the per-round ratios: `b` is
/// faster only if it was faster in every round, and slower only if slower in every
/// round; otherwise the difference is inside the noise of the run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Comparison {
    pub a: Vec<f64>,
    pub b: Vec<f64>,
}

/// What a [`Comparison`] can claim.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Verdict {
    /// `b` ran faster in every round: the median of `a / b` (over 1).
    BFaster(f64),
    /// `a` ran faster in every round: the median of `b / a` (over 1).
    AFaster(f64),
    /// The rounds disagree, or the sides are within 2 %: no claim.
    WithinNoise,
}

impl Comparison {
    /// Each round's `a / b`: how many times as fast `b` ran.
    pub fn speedups(&self) -> Vec<f64> {
        self.a
            .iter()
            .zip(&self.b)
            .filter(|(a, b)| a.is_finite() && b.is_finite() && **a > 0.0 && **b > 0.0)
            .map(|(a, b)| a / b)
            .collect()
    }

    pub fn verdict(&self) -> Verdict {
        let s = Stats::of(&self.speedups());
        if s.median.is_nan() {
            return Verdict::WithinNoise;
        }
        if s.min > 1.0 && s.median > 1.02 {
            Verdict::BFaster(s.median)
        } else if s.max < 1.0 && s.median < 1.0 / 1.02 {
            Verdict::AFaster(1.0 / s.median)
        } else {
            Verdict::WithinNoise
        }
    }
}

impl fmt::Display for TimeResult {
    /// TVM's `BenchmarkResult` print:
    ///
    /// ```text
    /// Execution time summary:
    ///  mean (ms)   median (ms)    max (ms)     min (ms)     std (ms)
    ///    1.2345       1.2300       1.3000       1.2000       0.0400
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.stats_ms();
        writeln!(f, "Execution time summary:")?;
        writeln!(
            f,
            "{:^12} {:^12} {:^12} {:^12} {:^12}",
            "mean (ms)", "median (ms)", "max (ms)", "min (ms)", "std (ms)"
        )?;
        write!(
            f,
            "{:^12.4} {:^12.4} {:^12.4} {:^12.4} {:^12.4}",
            s.mean, s.median, s.max, s.min, s.std
        )
    }
}
