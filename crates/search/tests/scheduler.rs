//! The task scheduler on synthetic tasks whose best latency falls with the trials spent
//! on them: the warm-up, where the gradient selection sends the budget, dead tasks,
//! early stopping, restoring from a log, determinism, and the printed table.

use tessera_search::scheduler::{
    RoundOutcome, RoundRunner, SchedTask, SchedulerOptions, StopReason, TaskScheduler,
    TaskSelection, NO_COST,
};

/// A task whose best latency after `t` trials is `floor + (start − floor)·e^(−t/tau)`;
/// `valid: false` never yields a schedule; `space` caps the trials it can propose.
#[derive(Clone)]
struct Synthetic {
    start: f64,
    floor: f64,
    tau: f64,
    valid: bool,
    space: usize,
}

struct Runner {
    tasks: Vec<Synthetic>,
    spent: Vec<usize>,
    order: Vec<usize>,
    /// The trials each round asked for, in order.
    sizes: Vec<usize>,
}

impl Runner {
    fn new(tasks: Vec<Synthetic>) -> Runner {
        let n = tasks.len();
        Runner {
            tasks,
            spent: vec![0; n],
            order: Vec::new(),
            sizes: Vec::new(),
        }
    }
}

impl RoundRunner for Runner {
    fn run_round(&mut self, task: usize, n: usize) -> RoundOutcome {
        self.order.push(task);
        self.sizes.push(n);
        let t = &self.tasks[task];
        let n = n.min(t.space - self.spent[task]);
        self.spent[task] += n;
        let s = self.spent[task] as f64;
        RoundOutcome {
            measured: n,
            best_cost: (t.valid && n > 0)
                .then(|| t.floor + (t.start - t.floor) * (-s / t.tau).exp()),
        }
    }
}

fn task(start_ms: f64, floor_ms: f64, tau: f64) -> Synthetic {
    Synthetic {
        start: start_ms * 1e-3,
        floor: floor_ms * 1e-3,
        tau,
        valid: true,
        space: usize::MAX / 2,
    }
}

fn sched(weights: &[f64], opts: SchedulerOptions) -> TaskScheduler {
    TaskScheduler::new(
        weights
            .iter()
            .map(|&w| SchedTask {
                weight: w,
                flop: 1e9,
                group: None,
                choice: None,
            })
            .collect(),
        opts,
    )
}

fn opts(selection: TaskSelection) -> SchedulerOptions {
    SchedulerOptions {
        selection,
        per_round: 16,
        ..SchedulerOptions::default()
    }
}

#[test]
fn every_task_warms_up_first_then_round_robin_takes_turns() {
    let mut s = sched(&[1.0, 1.0, 1.0], opts(TaskSelection::RoundRobin));
    let mut r = Runner::new(vec![task(5.0, 1.0, 50.0); 3]);
    let why = s.tune(16 * 9, &mut r, &mut |_, _| {});
    assert_eq!(why, StopReason::Budget);
    assert_eq!(r.order, vec![0, 1, 2, 0, 1, 2, 0, 1, 2]);
    assert_eq!(s.trials(), &[48, 48, 48]);
}

#[test]
fn the_gradient_spends_the_budget_where_the_objective_falls_most() {
    // task 0: heavy (weight 8) and far from its floor; task 1: light and already
    // near its floor; task 2: heavy but flat
    let tasks = vec![
        task(10.0, 1.0, 200.0),
        task(2.0, 1.9, 50.0),
        task(3.0, 2.9, 50.0),
    ];
    let weights = [8.0, 1.0, 8.0];
    let mut g = sched(&weights, opts(TaskSelection::Gradient));
    let mut rg = Runner::new(tasks.clone());
    g.tune(16 * 30, &mut rg, &mut |_, _| {});
    let t = g.trials();
    assert!(t[0] > t[1] + t[2], "trials {t:?}");
    let mut rr = sched(&weights, opts(TaskSelection::RoundRobin));
    let mut rrr = Runner::new(tasks);
    rr.tune(16 * 30, &mut rrr, &mut |_, _| {});
    let (lg, lr) = (
        g.estimated_latency().unwrap(),
        rr.estimated_latency().unwrap(),
    );
    assert!(lg < 0.9 * lr, "gradient {lg:.5} s vs round robin {lr:.5} s");
    for gr in g.gradients() {
        assert!(gr <= 0.0);
    }
}

#[test]
fn tasks_without_a_schedule_or_without_candidates_die_and_all_dead_ends_tuning() {
    let mut tasks = vec![task(5.0, 1.0, 50.0); 3];
    tasks[1].valid = false;
    tasks[2].space = 20;
    let mut s = sched(&[1.0; 3], opts(TaskSelection::Gradient));
    let mut r = Runner::new(tasks);
    let mut tables = Vec::new();
    s.tune(16 * 10, &mut r, &mut |s, next| {
        tables.push(s.table(0.0, next))
    });
    // task 1 died in its warm-up; task 2 after its space ran out (16 + 4, then 0)
    assert!(s.dead().contains(&1) && s.dead().contains(&2));
    assert_eq!(s.trials()[1], 16);
    assert_eq!(s.trials()[2], 20);
    assert!(!r.order[3..].contains(&1), "{:?}", r.order);
    assert_eq!(s.best_costs()[1], NO_COST);
    assert!(s.estimated_latency().is_none());
    assert!(tables
        .last()
        .unwrap()
        .contains("Estimated total latency: - ms"));

    let mut s = sched(&[1.0; 2], opts(TaskSelection::Gradient));
    let mut bad = vec![task(5.0, 1.0, 50.0); 2];
    bad[0].valid = false;
    bad[1].space = 16;
    let why = s.tune(10_000, &mut Runner::new(bad), &mut |_, _| {});
    assert_eq!(why, StopReason::AllDead);
}

#[test]
fn early_stopping_globally_and_per_task() {
    // flat tasks: nothing improves after the warm-up
    let flat = vec![task(2.0, 2.0, 10.0); 2];
    let mut s = sched(
        &[1.0; 2],
        SchedulerOptions {
            early_stopping: Some(64),
            ..opts(TaskSelection::Gradient)
        },
    );
    let why = s.tune(10_000, &mut Runner::new(flat.clone()), &mut |_, _| {});
    assert_eq!(why, StopReason::EarlyStopped);
    assert!(s.total_trials() <= 32 + 64, "{}", s.total_trials());

    let mut s = sched(
        &[1.0; 2],
        SchedulerOptions {
            early_stopping_per_task: Some(32),
            ..opts(TaskSelection::RoundRobin)
        },
    );
    let why = s.tune(10_000, &mut Runner::new(flat), &mut |_, _| {});
    assert_eq!(why, StopReason::AllDead);
    // the first round set the best; two more without improvement kill each task
    assert_eq!(s.trials(), &[48, 48]);
}

#[test]
fn a_restored_scheduler_skips_the_warm_up_of_tuned_tasks_and_keeps_their_bests() {
    let mut s = sched(&[1.0, 1.0], opts(TaskSelection::RoundRobin));
    s.restore(0, 40, Some(2e-3));
    s.restore(7, 40, Some(1e-3)); // no such task: ignored
    assert_eq!(s.trials(), &[40, 0]);
    assert_eq!(s.total_trials(), 40);
    assert_eq!(s.best_costs()[0], 2e-3);
    let mut r = Runner::new(vec![task(5.0, 1.0, 50.0); 2]);
    s.tune(40 + 32, &mut r, &mut |_, _| {});
    // task 1 warms up first; the restored budget counts towards the total; task 0,
    // then below an even share of the estimate, gets a smaller round, and task 1 the rest
    assert_eq!(r.order, vec![1, 0, 1]);
    assert_eq!(r.sizes[0], 16);
    assert!(r.sizes[1] < 16, "{:?}", r.sizes);
    assert_eq!(s.total_trials(), 72);
    // a worse round does not replace a restored best
    assert_eq!(s.best_costs()[0], 2e-3);
}

#[test]
fn equal_gradients_are_broken_by_the_seed_and_a_seed_repeats_its_choices() {
    let run = |seed| {
        let mut s = sched(
            &[1.0; 4],
            SchedulerOptions {
                seed,
                ..opts(TaskSelection::Gradient)
            },
        );
        // four identical flat tasks: every gradient is 0 after the warm-up
        let mut r = Runner::new(vec![task(1.0, 1.0, 10.0); 4]);
        s.tune(16 * 24, &mut r, &mut |_, _| {});
        r.order
    };
    assert_eq!(run(3), run(3));
    assert_ne!(run(3), run(4));
}

#[test]
fn the_table_after_a_round() {
    let mut s = TaskScheduler::new(
        vec![
            SchedTask {
                weight: 2.0,
                flop: 2.0 * 1024.0 * 1024.0 * 1024.0,
                group: Some("matmul".into()),
                choice: None,
            },
            SchedTask {
                weight: 1.0,
                flop: 231_211_008.0,
                group: None,
                choice: None,
            },
            SchedTask {
                weight: 1.0,
                flop: 1e6,
                group: None,
                choice: None,
            },
        ],
        opts(TaskSelection::Gradient),
    );
    s.record_round(
        0,
        &RoundOutcome {
            measured: 16,
            best_cost: Some(0.0105),
        },
    );
    s.record_round(
        1,
        &RoundOutcome {
            measured: 16,
            best_cost: Some(0.00113),
        },
    );
    insta::assert_snapshot!(s.table(645.4, Some(2)));
}

#[test]
fn the_estimate_counts_each_tasks_default_schedule_until_it_is_tuned() {
    let tasks = || {
        vec![
            SchedTask {
                weight: 2.0,
                flop: 2e9,
                group: None,
                choice: None,
            },
            SchedTask {
                weight: 1.0,
                flop: 1e6,
                group: None,
                choice: None,
            },
        ]
    };
    // without baselines, no estimate until every task has a latency
    let mut plain = TaskScheduler::new(tasks(), opts(TaskSelection::RoundRobin));
    assert_eq!(plain.estimated_latency(), None);
    plain.record_round(
        0,
        &RoundOutcome {
            measured: 16,
            best_cost: Some(0.004),
        },
    );
    assert_eq!(plain.estimated_latency(), None);

    let mut s = TaskScheduler::new(tasks(), opts(TaskSelection::RoundRobin));
    s.set_baseline(0, 0.010);
    s.set_baseline(1, 0.002);
    // a number before the first round: 2 × 10 ms + 2 ms
    assert!((s.estimated_latency().unwrap() - 0.022).abs() < 1e-12);
    s.record_round(
        0,
        &RoundOutcome {
            measured: 16,
            best_cost: Some(0.004),
        },
    );
    // task 0 tuned (4 ms), task 1 still its default schedule (marked)
    assert!((s.estimated_latency().unwrap() - 0.010).abs() < 1e-12);
    let table = s.table(1.0, Some(1));
    assert!(
        table.contains("|    1 |       2.000* |          0.50* |      0 |"),
        "{table}"
    );
    assert!(table.contains("|    0 |        4.000 |"), "{table}");
    assert!(
        table.contains("Estimated total latency: 10.000 ms"),
        "{table}"
    );
    assert!(table.contains("* the default schedule"), "{table}");
    // a tuned latency slower than the default schedule does not raise the estimate:
    // the history best keeps the default schedule
    s.record_round(
        1,
        &RoundOutcome {
            measured: 16,
            best_cost: Some(0.003),
        },
    );
    assert!((s.estimated_latency().unwrap() - 0.010).abs() < 1e-12);
    assert_eq!(s.trials(), &[16, 16]);
    // nonsense baselines are ignored
    s.set_baseline(1, f64::NAN);
    assert!((s.estimated_latency().unwrap() - 0.011).abs() < 1e-12);
}

/// Tasks 0 and 1 are two options of one convolution (`conv`), task 2 no option; each
/// weighs 1 and computes `flop`s.
fn with_options(flop: [f64; 3]) -> TaskScheduler {
    let tasks = flop
        .iter()
        .enumerate()
        .map(|(i, &flop)| SchedTask {
            weight: 1.0,
            flop,
            group: None,
            choice: (i < 2).then(|| "conv".to_string()),
        })
        .collect();
    TaskScheduler::new(tasks, opts(TaskSelection::Gradient))
}

#[test]
fn the_objective_counts_the_fastest_option_of_a_choice() {
    let mut s = with_options([1e9; 3]);
    s.set_baseline(0, 0.004);
    s.set_baseline(2, 0.001);
    // one option without a number is no gap: the other stands for the choice
    assert!((s.estimated_latency().unwrap() - 0.005).abs() < 1e-12);
    s.set_baseline(1, 0.003);
    assert!((s.estimated_latency().unwrap() - 0.004).abs() < 1e-12);
    for (task, cost) in [(0, 0.002), (1, 0.0025), (2, 0.001)] {
        s.record_round(
            task,
            &RoundOutcome {
                measured: 16,
                best_cost: Some(cost),
            },
        );
    }
    // 2 ms (option 0) + 1 ms; option 1 counts for nothing and has no gradient
    assert!((s.estimated_latency().unwrap() - 0.003).abs() < 1e-12);
    let g = s.gradients();
    assert!(g[0] < 0.0 && g[2] < 0.0, "{g:?}");
    assert_eq!(g[1], 0.0, "{g:?}");
    // so after the warm-up the rounds go to task 0 and task 2 only
    let mut runner = Runner::new(vec![
        task(2.0, 1.0, 100.0),
        task(2.5, 2.4, 100.0),
        task(1.0, 0.5, 100.0),
    ]);
    let mut s = with_options([1e9; 3]);
    s.tune(16 * 12, &mut runner, &mut |_, _| {});
    assert_eq!(&runner.order[..3], &[0, 1, 2]);
    assert!(!runner.order[3..].contains(&1), "{:?}", runner.order);
}

#[test]
fn an_option_that_cannot_win_even_tuned_gets_no_round() {
    use tessera_search::scheduler::OPTION_SPEEDUP_BOUND;
    // option 0: 4 GFLOP, option 1: 1 GFLOP in 10 ms (the fastest default, 100 GFLOPS);
    // at 1.5 × 100 GFLOPS option 0 would still take 26.7 ms
    let mut s = with_options([4e9, 1e9, 1e8]);
    s.set_baseline(0, 0.050);
    s.set_baseline(1, 0.010);
    s.set_baseline(2, 0.002);
    let pruned = s.prune_options();
    assert_eq!(pruned.len(), 1, "{pruned:?}");
    let (pruned_task, bound, other) = pruned[0];
    assert_eq!(pruned_task, 0);
    assert!((bound - 4e9 / (1e11 * OPTION_SPEEDUP_BOUND)).abs() < 1e-12);
    assert!((other - 0.010).abs() < 1e-12);
    assert!(s.dead().contains(&0));
    let mut runner = Runner::new(vec![
        task(50.0, 1.0, 10.0),
        task(10.0, 9.0, 10.0),
        task(2.0, 1.0, 10.0),
    ]);
    s.tune(16 * 6, &mut runner, &mut |_, _| {});
    assert!(!runner.order.contains(&0), "{:?}", runner.order);
    // options within reach are both tuned
    let mut close = with_options([1.2e9, 1e9, 1e8]);
    close.set_baseline(0, 0.020);
    close.set_baseline(1, 0.010);
    close.set_baseline(2, 0.002);
    assert!(close.prune_options().is_empty());
}

/// A scheduler of tasks of weight `weights`, each task's default schedule measured at
/// `baselines_ms`.
fn with_baselines(
    weights: &[f64],
    baselines_ms: &[f64],
    selection: TaskSelection,
) -> TaskScheduler {
    let mut s = sched(weights, opts(selection));
    for (i, &b) in baselines_ms.iter().enumerate() {
        s.set_baseline(i, b * 1e-3);
    }
    s
}

#[test]
fn warm_ups_go_where_the_networks_time_is() {
    // shares of the estimate (weight × default): 1, 20, 10 and 0.1 ms
    let weights = [1.0, 1.0, 2.0, 1.0];
    let baselines = [1.0, 20.0, 5.0, 0.1];
    let mut s = with_baselines(&weights, &baselines, TaskSelection::Gradient);
    let mut r = Runner::new(baselines.iter().map(|&b| task(b, b / 2.0, 50.0)).collect());
    // a budget of three rounds, fewer than the tasks: the largest shares take them
    s.tune(16 * 3, &mut r, &mut |_, _| {});
    assert_eq!(r.order[0], 1, "{:?}", r.order);
    assert!(r.order.contains(&2), "{:?}", r.order);
    assert!(
        !r.order.contains(&0) && !r.order.contains(&3),
        "{:?}",
        r.order
    );
    // what the budget never reached: tasks 0 and 3, 1.1 ms of the estimate
    let (total, untuned) = s.untuned_part().unwrap();
    assert!((untuned - 1.1e-3).abs() < 1e-12, "{untuned}");
    assert!((total - s.estimated_latency().unwrap()).abs() < 1e-15);

    // round robin warms up by share too, then takes turns
    let mut s = with_baselines(&weights, &baselines, TaskSelection::RoundRobin);
    let mut r = Runner::new(vec![task(5.0, 1.0, 50.0); 4]);
    s.tune(16 * 6, &mut r, &mut |_, _| {});
    assert_eq!(r.order[..6], [1, 2, 0, 3, 0, 1]);
    // the small shares' rounds are a fraction of a round (as the estimate stands
    // then), at least a quarter: more rounds fit in the budget
    assert_eq!(r.sizes[..4], [16, 16, 5, 4]);
    assert_eq!(s.untuned_part().map(|p| p.1), Some(0.0));
}

#[test]
fn a_task_of_small_share_waits_until_the_large_one_stalls() {
    // task 0 holds 10 ms and does not improve; task 1 holds 1.5 ms. Task 0's gradient,
    // 0.8 × 10 ms / t after t flat rounds, beats task 1's warm-up value (0.8 × 1.5 ms)
    // for t ≤ 6: task 1's warm-up is the eighth round
    let mut s = with_baselines(&[1.0, 1.0], &[10.0, 1.5], TaskSelection::Gradient);
    let mut r = Runner::new(vec![task(10.0, 10.0, 50.0), task(1.5, 1.0, 50.0)]);
    s.tune(16 * 8, &mut r, &mut |_, _| {});
    assert_eq!(r.order[..8], [0, 0, 0, 0, 0, 0, 0, 1]);
    // its round: 16 × 1.5 / 5.75 (an even share of the 11.5 ms), rounded up
    assert_eq!(r.sizes[7], 5);
}

#[test]
fn tasks_without_a_baseline_warm_up_first_in_order() {
    // task 1 has no measured default: its weight in the estimate is unknown
    let mut s = sched(&[1.0, 1.0, 1.0], opts(TaskSelection::Gradient));
    s.set_baseline(0, 1e-3);
    s.set_baseline(2, 9e-3);
    let mut r = Runner::new(vec![task(5.0, 1.0, 50.0); 3]);
    s.tune(16 * 3, &mut r, &mut |_, _| {});
    assert_eq!(&r.order[..2], &[1, 2]);
}

#[test]
fn a_round_is_sized_by_the_tasks_share_of_the_estimate() {
    // shares 1, 20, 10 and 0.1 ms of 31.1: an even share is 7.775 ms
    let s = with_baselines(
        &[1.0, 1.0, 2.0, 1.0],
        &[1.0, 20.0, 5.0, 0.1],
        TaskSelection::Gradient,
    );
    let sizes: Vec<usize> = (0..4).map(|i| s.round_size(i)).collect();
    // above an even share: a whole round; below: its fraction, at least a quarter
    assert_eq!(sizes, [4, 16, 16, 4]);
    let s = with_baselines(&[1.0, 1.0], &[3.0, 1.0], TaskSelection::Gradient);
    // 16 × 1 / 2 = 8
    assert_eq!((s.round_size(0), s.round_size(1)), (16, 8));
    // without a latency for every task, the estimate is unknown: whole rounds
    let mut s = sched(&[1.0, 1.0], opts(TaskSelection::Gradient));
    s.set_baseline(0, 1e-3);
    assert_eq!((s.round_size(0), s.round_size(1)), (16, 16));
}

#[test]
fn a_sequential_session_tunes_each_task_to_its_budget_in_order() {
    // AutoTVM's loop: task 0 to 40 trials, task 1 to its space of 20, task 2 until it
    // stops improving (per-task early stopping), in that order, rounds cut to the budget
    let mut o = opts(TaskSelection::Sequential { per_task: 40 });
    o.early_stopping_per_task = Some(16);
    let mut s = sched(&[1.0, 8.0, 1.0], o);
    s.set_space(1, 20);
    assert_eq!(s.task_budget(1), Some(20));
    assert_eq!(s.sequential_budget(), Some(100));
    let flat = task(5.0, 5.0, 50.0);
    let mut r = Runner::new(vec![task(5.0, 1.0, 50.0), task(5.0, 1.0, 50.0), flat]);
    let mut lines = Vec::new();
    let why = s.tune(100, &mut r, &mut |s, _| {
        let flops = [1e9; 3];
        lines.push(tessera_search::session_report::sequential_line(s, &flops, 1.0).unwrap());
    });
    assert_eq!(why, StopReason::AllDead);
    assert_eq!(r.order, vec![0, 0, 0, 1, 1, 2, 2]);
    assert_eq!(r.sizes, vec![16, 16, 8, 16, 4, 16, 16]);
    assert_eq!(s.trials(), &[40, 20, 32]);
    assert!(
        lines[6].ends_with("(32/40) | 1.00 s Done.\n"),
        "{}",
        lines[6]
    );
    assert!(
        lines[2].starts_with("[Task  1/ 3]  Current/Best: "),
        "{}",
        lines[2]
    );
    assert!(
        lines[2].contains("| Progress: (40/40) | 1.00 s Done."),
        "{}",
        lines[2]
    );
    assert!(
        lines[3].contains("Progress: (16/20) | 1.00 s\n"),
        "{}",
        lines[3]
    );
    // the other modes have no per-task budget and no such line
    let g = sched(&[1.0], opts(TaskSelection::Gradient));
    assert_eq!(g.task_budget(0), None);
    assert!(tessera_search::session_report::sequential_line(&g, &[1e9], 1.0).is_none());
}
