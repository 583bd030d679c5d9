//! Template tuning end to end on small shapes: each tuner measures real candidates
//! (checked against the reference), and the best configuration found, written to a log,
//! distilled and applied, is the lowest-cost successful trial and computes the right
//! answer. No test compares timings (a loaded machine decides those): that tuned
//! kernels beat the default schedule is measured by the benchmarks (BENCHMARKS.md,
//! bench/).

use std::sync::Arc;
use std::time::Duration;
use tessera_autotvm::strategy::TemplatePolicy;
use tessera_autotvm::templates::conv::ConvShape;
use tessera_autotvm::templates::{Conv2dNhwc, Dense, Matmul, Template, TemplateTask};
use tessera_autotvm::tuners::{GaOptions, GaTuner, GridSearchTuner, RandomTuner, Tuner};
use tessera_backends::{Backend, CpuBackend, Target};
use tessera_runtime::runner::TimerConfig;
use tessera_search::measure::{Candidate, MeasureOptions, Measurer, Reference};
use tessera_search::policy::{Observation, SearchPolicy};
use tessera_search::{MeasureErrorNo, MeasureResult, ScheduleDesc};

/// Tests that measure kernels in one process must not measure at the same time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn measurer() -> Measurer {
    let opts = MeasureOptions {
        run_timeout: Duration::from_secs(10),
        timer: TimerConfig {
            number: 3,
            repeat: 3,
            min_repeat_ms: 20.0,
            cache_flush: false,
        },
        ..MeasureOptions::default()
    };
    Measurer::new(CpuBackend::new(Target::cpu()), opts).unwrap()
}

/// The 256³ matmul template task, a measurer and the task's reference outputs.
fn matmul_setup() -> (TemplateTask, Measurer, Reference) {
    let task = TemplateTask::of(
        Matmul {
            m: 256,
            n: 256,
            k: 256,
        },
        16,
    )
    .unwrap();
    let m = measurer();
    let naive = task.naive("reference").unwrap();
    let reference = Reference::compute(m.backend(), &naive, 1, 3).unwrap();
    (task, m, reference)
}

/// One measured configuration.
struct Trial {
    schedule: ScheduleDesc,
    result: MeasureResult,
    gflops: f64,
}

/// `n` configurations of `tuner` over `task`, proposed and observed through the core's
/// interface (`TemplatePolicy`, as a tuning session drives it) in batches of 8, each
/// measured and checked against `reference`. Returns the trials and the best GFLOPS.
fn run(
    task: &TemplateTask,
    tuner: Box<dyn Tuner + Send>,
    m: &mut Measurer,
    reference: &Reference,
    n: usize,
) -> (Vec<Trial>, f64) {
    let mut policy = TemplatePolicy::new(task.clone(), tuner);
    let mut log: Vec<Trial> = Vec::new();
    while log.len() < n {
        let batch = policy.propose(8.min(n - log.len()), None).unwrap();
        assert!(!batch.is_empty(), "the space ran out");
        let candidates: Vec<Candidate> = batch
            .iter()
            .map(|p| Candidate {
                func: p.program.clone().map_err(Into::into),
            })
            .collect();
        let results = m.measure(&candidates, 1, Some(reference));
        let observed: Vec<Observation> = batch
            .iter()
            .zip(&results)
            .map(|(p, r)| Observation {
                schedule: p.schedule.clone(),
                cost: r.is_ok().then(|| r.mean_cost()),
            })
            .collect();
        assert!(policy.observe(&observed).iter().all(Result::is_ok));
        for (p, r) in batch.into_iter().zip(results) {
            let gflops = if r.is_ok() {
                task.flop / r.mean_cost() / 1e9
            } else {
                0.0
            };
            log.push(Trial {
                schedule: p.schedule,
                result: r,
                gflops,
            });
        }
    }
    let best = log.iter().map(|t| t.gflops).fold(0.0, f64::max);
    (log, best)
}

#[test]
fn every_tuner_measures_correct_configurations_of_the_matmul_template() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (task, mut m, reference) = matmul_setup();
    let tuners: Vec<Box<dyn Tuner + Send>> = vec![
        Box::new(RandomTuner::new(1)),
        Box::new(GridSearchTuner::new()),
        Box::new(GaTuner::new(
            GaOptions {
                pop_size: 16,
                ..GaOptions::default()
            },
            1,
        )),
    ];
    for t in tuners {
        let name = t.name();
        let (log, best) = run(&task, t, &mut m, &reference, 24);
        let wrong = log
            .iter()
            .filter(|t| t.result.error_no == MeasureErrorNo::WrongAnswer)
            .count();
        assert_eq!(
            wrong, 0,
            "{}: a template configuration computed a wrong answer",
            name
        );
        let ok = log.iter().filter(|t| t.result.is_ok()).count();
        eprintln!("{}: {ok}/24 ok, best {best:.1} GFLOPS", name);
        assert!(ok >= 20, "{}: {ok} of 24 measured", name);
        assert!(best > 0.0, "{}: nothing measured", name);
    }
    // Whether 24 trials reach the default schedule's speed depends on the tuner, the
    // space (33k matmul configurations) and the machine's load: a benchmark's question
    // (the search-efficiency benchmark, BENCHMARKS.md), not this test's.
}

/// The model-based tuner's names parse, and driven over real measurements of the matmul
/// template it proposes configurations that build, run and compute the right answer.
/// Whether its picks improve once the model is fit is a claim about the search, not
/// about this machine's timings: it is asserted on a deterministic objective by
/// `the_annealing_plan_beats_random_proposals_on_a_synthetic_objective` below, and
/// measured on real kernels by the search-efficiency benchmark (BENCHMARKS.md, "Template
/// tuning: search efficiency of xgb, ga and random"; bench/search_efficiency.py).
#[test]
fn the_model_based_tuner_measures_correct_configurations_and_its_names_parse() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    use tessera_autotvm::xgb::{FeatureType, XgbOptions, XgbTuner};
    let o = XgbOptions::parse("xgb_rank_binary_curve").unwrap();
    assert_eq!(o.feature_type, FeatureType::Curve);
    assert_eq!(
        XgbOptions::parse("xgb").unwrap().feature_type,
        FeatureType::Itervar
    );
    assert_eq!(
        XgbOptions::parse("xgb_knob").unwrap().feature_type,
        FeatureType::Knob
    );
    assert!(XgbOptions::parse("xgb_bogus").is_none());
    assert!(XgbOptions::parse("ga").is_none());

    let (task, mut m, reference) = matmul_setup();
    let opts = XgbOptions {
        feature_type: FeatureType::Knob,
        plan_size: 16,
        ..XgbOptions::default()
    };
    let t = XgbTuner::new(&task, opts, 5);
    // 64 trials: the random warm-up and three fits of the model
    let (log, best) = run(&task, Box::new(t), &mut m, &reference, 64);
    assert_eq!(log.len(), 64);
    let wrong = log
        .iter()
        .filter(|t| t.result.error_no == MeasureErrorNo::WrongAnswer)
        .count();
    assert_eq!(wrong, 0, "a configuration computed a wrong answer");
    let ok = log.iter().filter(|t| t.result.is_ok()).count();
    eprintln!("xgb_knob: {ok}/64 ok, best {best:.1} GFLOPS");
    assert!(ok >= 56, "{ok} of 64 measured");
}

/// A made-up, deterministic "measurement": GFLOPS as a function of the configuration.
fn synthetic(space: &tessera_autotvm::space::ConfigSpace, i: u64) -> f64 {
    let c = space.get(i).unwrap();
    let n = space.knob_numbers(&c);
    n.iter()
        .enumerate()
        .map(|(k, &v)| ((v as f64 + 1.0).ln() * (k as f64 + 1.0)).sin().abs())
        .sum::<f64>()
        * 10.0
}

fn proposals(mut t: Box<dyn Tuner>, task: &TemplateTask, rounds: usize) -> Vec<u64> {
    use tessera_autotvm::tuners::Observation;
    let mut all = Vec::new();
    for _ in 0..rounds {
        let b = t.next_batch(&task.space, 8);
        let obs: Vec<Observation> = b
            .iter()
            .map(|&i| Observation {
                index: i,
                gflops: synthetic(&task.space, i),
            })
            .collect();
        t.update(&task.space, &obs);
        all.extend(b);
    }
    all
}

#[test]
fn the_same_seed_and_measurements_give_the_same_proposals() {
    // CPU-heavy (the annealing): kept apart from the timing tests
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    use tessera_autotvm::xgb::{FeatureType, XgbOptions, XgbTuner};
    let task = TemplateTask::of(
        Matmul {
            m: 128,
            n: 128,
            k: 128,
        },
        16,
    )
    .unwrap();
    let xgb = |seed| -> Box<dyn Tuner> {
        let o = XgbOptions {
            feature_type: FeatureType::Knob,
            plan_size: 16,
            ..XgbOptions::default()
        };
        Box::new(XgbTuner::new(&task, o, seed))
    };
    let ga = |seed| -> Box<dyn Tuner> {
        Box::new(GaTuner::new(
            GaOptions {
                pop_size: 16,
                ..GaOptions::default()
            },
            seed,
        ))
    };
    let rnd = |seed| -> Box<dyn Tuner> { Box::new(RandomTuner::new(seed)) };
    for make in [&xgb as &dyn Fn(u64) -> Box<dyn Tuner>, &ga, &rnd] {
        let (a, b, c) = (
            proposals(make(7), &task, 5),
            proposals(make(7), &task, 5),
            proposals(make(8), &task, 5),
        );
        assert_eq!(a, b, "same seed, same measurements: same proposals");
        assert_ne!(a, c, "another seed explores differently");
        let mut uniq = a.clone();
        uniq.sort();
        uniq.dedup();
        assert_eq!(uniq.len(), a.len(), "no configuration proposed twice");
    }
}

/// On a made-up objective over the 33k-point matmul space, the annealing guided by the
/// model proposes far better points than random sampling once the model is fit (after
/// the 16-trial warm-up), with either model input: measured as the share of the way
/// from the space's mean to its maximum (random: about 0.03; guided: about 0.4).
#[test]
fn the_annealing_plan_beats_random_proposals_on_a_synthetic_objective() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    use tessera_autotvm::xgb::{FeatureType, XgbOptions, XgbTuner};
    let task = TemplateTask::of(
        Matmul {
            m: 1024,
            n: 1024,
            k: 1024,
        },
        16,
    )
    .unwrap();
    let mean =
        |ps: &[u64]| ps.iter().map(|&i| synthetic(&task.space, i)).sum::<f64>() / ps.len() as f64;
    // how far from the space's mean towards its maximum a set of proposals lies
    let all: Vec<u64> = (0..task.space.len()).collect();
    let (space_mean, top) = (
        mean(&all),
        all.iter()
            .map(|&i| synthetic(&task.space, i))
            .fold(0.0, f64::max),
    );
    let gain = |ps: &[u64]| (mean(ps) - space_mean) / (top - space_mean);
    let random = proposals(Box::new(RandomTuner::new(3)), &task, 8);
    let random_gain = gain(&random[16..]);
    for feature_type in [FeatureType::Knob, FeatureType::Itervar] {
        let o = XgbOptions {
            feature_type,
            ..XgbOptions::default()
        };
        let guided = proposals(Box::new(XgbTuner::new(&task, o, 3)), &task, 8);
        let guided_gain = gain(&guided[16..]);
        eprintln!("{feature_type:?}: guided {guided_gain:.2} vs random {random_gain:.2}");
        assert!(
            guided_gain > 0.25 && guided_gain > random_gain + 0.2,
            "{feature_type:?}: guided {guided_gain:.2} vs random {random_gain:.2}"
        );
    }
}

/// The whole template flow on dense (batch 1, a classifier's head) and on a conv2d
/// NHWC, with each tuner: tune a few dozen trials, write every measurement to a log,
/// distill it to one record, apply the history best, and check what is applied: the
/// configuration of the log's lowest-cost successful record, instantiated into a kernel
/// that computes the reference's answer. That the applied configurations run faster
/// than the default schedule is a claim about timings, which a loaded machine decides:
/// it is measured by the benchmarks (BENCHMARKS.md, "Template tuning" and "ONNX
/// ResNet-50 v2 tuned with `--tuner xgb`"; bench/search_efficiency.py), not asserted
/// here.
#[test]
fn each_tuner_tunes_dense_and_conv2d_and_the_history_best_applies() {
    use tessera_autotvm::xgb::{FeatureType, XgbOptions, XgbTuner};
    use tessera_search::record::{distill_file, ApplyHistoryBest, Record, RecordWriter};
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let kinds: [Arc<dyn Template>; 2] = [
        // ResNet-50's classifier
        Arc::new(Dense {
            m: 1,
            n: 1000,
            k: 2048,
        }),
        // a stem-like conv (7×7 kernel over 3 channels)
        Arc::new(Conv2dNhwc(ConvShape {
            n: 1,
            h: 28,
            w: 28,
            ci: 3,
            co: 32,
            kh: 7,
            kw: 7,
            attrs: tessera_te::ops::Conv2dAttrs::new((1, 1), (3, 3), (1, 1)),
        })),
    ];
    let lanes = {
        let hw = CpuBackend::new(Target::cpu()).hardware_params().clone();
        hw.f32_lanes()
    };
    let mut m = measurer();
    let dir = tempfile::tempdir().unwrap();
    for kind in kinds {
        let task = TemplateTask::new(kind, lanes).unwrap();
        let naive = task.naive("reference").unwrap();
        let reference = Reference::compute(m.backend(), &naive, 1, 3).unwrap();
        // trials per tuner: the model-based ones get enough rounds to use what they
        // observed (xgb's plan of 16, two of ga's generations of 12); each trial is a
        // compile, so the others get two rounds of 8
        let tuners: Vec<(&str, usize, Box<dyn Tuner + Send>)> = vec![
            (
                "xgb",
                32,
                Box::new(XgbTuner::new(
                    &task,
                    XgbOptions {
                        feature_type: FeatureType::Itervar,
                        plan_size: 16,
                        ..XgbOptions::default()
                    },
                    1,
                )),
            ),
            (
                "ga",
                24,
                Box::new(GaTuner::new(
                    GaOptions {
                        pop_size: 12,
                        ..GaOptions::default()
                    },
                    1,
                )),
            ),
            ("random", 16, Box::new(RandomTuner::new(1))),
            ("gridsearch", 16, Box::new(GridSearchTuner::new())),
        ];
        for (name, n, tuner) in tuners {
            let log = dir.path().join(format!("{}_{name}.jsonl", task.template));
            let mut writer = RecordWriter::open(&log).unwrap();
            let (trials, best) = run(&task, tuner, &mut m, &reference, n);
            let records: Vec<Record> = trials
                .iter()
                .map(|t| {
                    Record::new(
                        &task.workload_key,
                        "cpu",
                        &task.template,
                        t.schedule.clone(),
                        t.result.clone(),
                    )
                })
                .collect();
            writer.append_batch(&records).unwrap();
            drop(writer);
            let written = std::fs::read_to_string(&log).unwrap();
            assert_eq!(written.lines().count(), n, "{name}: one line per trial");

            let distilled = dir
                .path()
                .join(format!("{}_{name}.best.jsonl", task.template));
            distill_file(&log, &distilled).unwrap();
            let kept = std::fs::read_to_string(&distilled).unwrap();
            assert_eq!(kept.lines().count(), 1, "{name}: one best record\n{kept}");
            let (history, skipped) = ApplyHistoryBest::from_file(&distilled).unwrap();
            assert!(skipped.is_empty());
            let rec = history
                .query(&task.workload_key, "cpu")
                .unwrap_or_else(|| panic!("{name}: the history has the task"))
                .clone();
            let ScheduleDesc::Config { entity, .. } = &rec.schedule else {
                panic!("{name}: a template config, got {:?}", rec.schedule)
            };
            let config = task.space.from_entity(entity).unwrap();
            let applied = task.instantiate(&config, "applied").unwrap();

            // the applied record is the trial that measured lowest of those that
            // succeeded (found by its schedule, and its cost compared with a tolerance:
            // the costs went through JSON)
            let chosen = trials
                .iter()
                .find(|t| t.schedule == rec.schedule)
                .unwrap_or_else(|| panic!("{name}: the applied schedule is one of the trials"));
            assert!(chosen.result.is_ok(), "{name}: {:?}", chosen.result);
            let lowest = trials
                .iter()
                .filter(|t| t.result.is_ok())
                .map(|t| t.result.mean_cost())
                .fold(f64::INFINITY, f64::min);
            assert!(
                chosen.result.mean_cost() <= lowest * (1.0 + 1e-9),
                "{name}: the history best costs {} s, the lowest successful trial {lowest} s",
                chosen.result.mean_cost()
            );

            // the applied kernel computes the right answer
            let rs = m.measure(
                &[Candidate {
                    func: Ok(applied.clone()),
                }],
                1,
                Some(&reference),
            );
            assert_eq!(rs.len(), 1);
            assert!(
                rs[0].is_ok(),
                "{} {name}: the applied configuration: {:?}",
                task.template,
                rs[0]
            );
            eprintln!(
                "{} {name}: best {best:.1} GFLOPS in {n} trials",
                task.template
            );
        }
    }
}
