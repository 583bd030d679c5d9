//! The task scheduler (TVM's `auto_scheduler.TaskScheduler`): splits a tuning budget
//! across the tasks of a network in rounds, giving the next round to the task whose
//! improvement is expected to reduce the objective — Σ weight × latency, the network's
//! estimated latency — the most.
//!
//! - Warm-up rounds where the network's time is: a task whose default schedule's latency
//!   was measured ([`TaskScheduler::set_baseline`]) is warmed up when the objective's
//!   expected gain of its first round — the gradient it would have after a warm-up that
//!   found nothing better than its default, `(1−α) · weight_i · (−baseline_i)` — beats
//!   every warmed-up task's gradient; so the task holding most of the estimated time goes
//!   first, a budget smaller than one round per task goes where it pays, and a task of
//!   negligible share waits until the large ones stall (beyond TVM, whose warm-up takes
//!   every task once, in order, before any gradient). Tasks without a baseline are warmed
//!   up first, in order (TVM's warm-up when no baseline is known). A task with no valid
//!   schedule after its warm-up, one whose search has nothing left to propose, or (with
//!   per-task early stopping) one that has not improved for that many trials, is dead
//!   and gets no more rounds.
//! - `Gradient` (TVM's default; α 0.2, β 2, backward window 3): for each live task,
//!   `∂f/∂g_i · (α·backward + (1−α)·forward)`, where `∂f/∂g_i` is the objective's
//!   derivative by the task's latency (a finite difference, δ 1e-4), `backward` the
//!   latency's slope over the last three rounds and `forward` the optimistic
//!   `min(g_i − g_i/t_i, β·C_i/V) − g_i` (t_i the task's rounds, C_i its FLOPs and V the
//!   best throughput among tasks of the same group). The most negative wins; when all
//!   are equal, a seeded random choice. `RoundRobin` takes the live tasks in turn.
//! - `Sequential` (AutoTVM's `tune_tasks` loop): each task in order, to its own budget —
//!   `min(per_task, its configuration space)` trials ([`TaskScheduler::set_space`]) —
//!   or until per-task early stopping, then the next; no warm-up reordering.
//! - Global early stopping: no improvement of the objective for that many trials.
//! - Options (tasks with a [`SchedTask::choice`]: one convolution computed directly or
//!   with Winograd): the objective counts the fastest option of each choice, so the
//!   others have no gradient; an option that cannot win even tuned is dead before its
//!   warm-up ([`TaskScheduler::prune_options`]).
//!
//! What a round does is the caller's ([`RoundRunner`]): propose, measure, record. The
//! scheduler only keeps counts and bests, so a resumed run starts from
//! [`TaskScheduler::restore`] with what the log holds.

use crate::rng::Rng;
use std::collections::BTreeSet;
use std::fmt::Write as _;

/// A failed or missing latency (seconds), as TVM uses it.
pub const NO_COST: f64 = 1e10;

/// How many times the best throughput of the default schedules a tuned option is
/// assumed to reach at most ([`TaskScheduler::prune_options`]). On an AVX2 EPYC the
/// tuned conv tasks of ResNet-18 measured 132–160 GFLOPS, 15–35 % faster than their
/// default schedules (BENCHMARKS.md, "ResNet-18 tuned again"): 1.5 leaves a margin.
pub const OPTION_SPEEDUP_BOUND: f64 = 1.5;

/// One task as the scheduler sees it.
#[derive(Clone, Debug)]
pub struct SchedTask {
    /// How many times the task occurs in the network.
    pub weight: f64,
    /// Floating-point operations of one run.
    pub flop: f64,
    /// Tasks of one group (e.g. the same operator family) share a throughput estimate
    /// in the forward gradient; `None`: no group.
    pub group: Option<String>,
    /// Tasks with the same choice compute the same part of the network in different
    /// ways (a convolution directly or with Winograd): the objective counts the fastest
    /// of them only, so that only it has a gradient. `None`: the task is no option.
    pub choice: Option<String>,
}

/// How the next task is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskSelection {
    Gradient,
    RoundRobin,
    /// One task after another, each to `per_task` trials at most.
    Sequential {
        per_task: usize,
    },
}

impl TaskSelection {
    /// By name: `gradient`, `round-robin` (or `round_robin`), or `sequential` with
    /// `per_task` trials a task.
    pub fn named(name: &str, per_task: usize) -> Option<TaskSelection> {
        match name {
            "gradient" => Some(TaskSelection::Gradient),
            "round-robin" | "round_robin" => Some(TaskSelection::RoundRobin),
            "sequential" => Some(TaskSelection::Sequential { per_task }),
            _ => None,
        }
    }
}

/// Options (TVM's defaults).
#[derive(Clone, Debug)]
pub struct SchedulerOptions {
    pub selection: TaskSelection,
    /// Measurements per round.
    pub per_round: usize,
    pub alpha: f64,
    pub beta: f64,
    pub backward_window: usize,
    /// Stop when the objective has not improved for this many trials.
    pub early_stopping: Option<usize>,
    /// A task that has not improved for this many trials is dead.
    pub early_stopping_per_task: Option<usize>,
    /// Seeds the choice among equal gradients.
    pub seed: u64,
}

impl Default for SchedulerOptions {
    fn default() -> Self {
        SchedulerOptions {
            selection: TaskSelection::Gradient,
            per_round: 64,
            alpha: 0.2,
            beta: 2.0,
            backward_window: 3,
            early_stopping: None,
            early_stopping_per_task: None,
            seed: 0,
        }
    }
}

/// What one round of a task gave.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RoundOutcome {
    /// Candidates measured (0: the search had nothing left to propose).
    pub measured: usize,
    /// The lowest latency among the round's successful measurements (seconds).
    pub best_cost: Option<f64>,
}

/// Runs one round of a task: proposes and measures up to `n` candidates.
pub trait RoundRunner {
    fn run_round(&mut self, task: usize, n: usize) -> RoundOutcome;
}

/// Why tuning ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// The trial budget is spent.
    Budget,
    /// Every task is dead.
    AllDead,
    /// The objective did not improve for the global early-stopping window.
    EarlyStopped,
}

/// The scheduler's state: per-task bests and counts, and the objective.
#[derive(Clone, Debug)]
pub struct TaskScheduler {
    tasks: Vec<SchedTask>,
    opts: SchedulerOptions,
    best_costs: Vec<f64>,
    /// Each task's default-schedule latency, measured before tuning (seconds), where
    /// known: the estimate's stand-in until the task has a tuned latency.
    baselines: Vec<Option<f64>>,
    /// Rounds per task, trials per task, and the task's trial count at its last
    /// improvement.
    rounds: Vec<usize>,
    trials: Vec<usize>,
    best_at: Vec<usize>,
    /// The task's best latency after each of its rounds.
    history: Vec<Vec<f64>>,
    dead: BTreeSet<usize>,
    /// Trials so far, and the trial count when the objective last improved.
    ct: usize,
    best_ct: usize,
    best_score: f64,
    next_rr: usize,
    rng: Rng,
    /// Each task's configuration space size, where its strategy has one.
    spaces: Vec<Option<u64>>,
    /// The last round: its task and what it gave.
    last: Option<(usize, RoundOutcome)>,
}

impl TaskScheduler {
    pub fn new(tasks: Vec<SchedTask>, opts: SchedulerOptions) -> TaskScheduler {
        let n = tasks.len();
        TaskScheduler {
            tasks,
            rng: Rng::new(opts.seed),
            opts,
            best_costs: vec![NO_COST; n],
            baselines: vec![None; n],
            rounds: vec![0; n],
            trials: vec![0; n],
            best_at: vec![0; n],
            history: vec![Vec::new(); n],
            dead: BTreeSet::new(),
            ct: 0,
            best_ct: 0,
            best_score: f64::INFINITY,
            next_rr: 0,
            spaces: vec![None; n],
            last: None,
        }
    }

    /// Sets the size of `task`'s configuration space: a sequential session gives it at
    /// most that many trials.
    pub fn set_space(&mut self, task: usize, size: u64) {
        if let Some(s) = self.spaces.get_mut(task) {
            *s = Some(size);
        }
    }

    /// The trials `task` takes in a sequential session: `per_task`, or its space where
    /// that is smaller (TVM's `min(n_trial, len(task.config_space))`); `None` in the
    /// other modes.
    pub fn task_budget(&self, task: usize) -> Option<usize> {
        let TaskSelection::Sequential { per_task } = self.opts.selection else {
            return None;
        };
        let space = self.spaces.get(task).copied().flatten();
        Some(space.map_or(per_task, |s| {
            per_task.min(usize::try_from(s).unwrap_or(usize::MAX))
        }))
    }

    /// The trials of a whole sequential session (every task's budget), else `None`.
    pub fn sequential_budget(&self) -> Option<usize> {
        (0..self.tasks.len()).map(|i| self.task_budget(i)).sum()
    }

    /// Whether `task` has had its sequential budget.
    fn spent(&self, task: usize) -> bool {
        self.task_budget(task)
            .is_some_and(|b| self.trials[task] >= b)
    }

    /// The first task that is neither dead nor spent.
    fn next_in_order(&self) -> Option<usize> {
        (0..self.tasks.len()).find(|&i| !self.dead.contains(&i) && !self.spent(i))
    }

    /// The last round's task and outcome.
    pub fn last_round(&self) -> Option<&(usize, RoundOutcome)> {
        self.last.as_ref()
    }

    /// Rounds `task` has had.
    pub fn rounds_of(&self, task: usize) -> usize {
        self.rounds.get(task).copied().unwrap_or(0)
    }

    /// Restores a task's progress from a log: `trials` measured, best latency
    /// `best_cost`. Counts as the task's warm-up (and as whole rounds).
    pub fn restore(&mut self, task: usize, trials: usize, best_cost: Option<f64>) {
        if task >= self.tasks.len() || trials == 0 {
            return;
        }
        let per = self.opts.per_round.max(1);
        self.trials[task] += trials;
        self.ct += trials;
        self.rounds[task] += trials.div_ceil(per);
        if let Some(c) = best_cost {
            if c < self.best_costs[task] {
                self.best_costs[task] = c;
                self.best_at[task] = self.trials[task];
            }
        }
        let best = self.best_costs[task];
        let rounds = self.rounds[task];
        self.history[task].resize(rounds, best);
        let score = self.score(&self.best_costs);
        if score < self.best_score {
            self.best_score = score;
            self.best_ct = self.ct;
        }
    }

    pub fn best_costs(&self) -> &[f64] {
        &self.best_costs
    }
    pub fn trials(&self) -> &[usize] {
        &self.trials
    }
    pub fn total_trials(&self) -> usize {
        self.ct
    }
    pub fn dead(&self) -> &BTreeSet<usize> {
        &self.dead
    }

    /// Σ weight × latency.
    fn score(&self, costs: &[f64]) -> f64 {
        self.objective(|i| Some(costs[i])).unwrap_or(f64::INFINITY)
    }

    /// Σ weight × `latency(task)`, of each choice's tasks the fastest only; `None`
    /// while a task without a choice, or every task of a choice, has no latency.
    fn objective(&self, latency: impl Fn(usize) -> Option<f64>) -> Option<f64> {
        let mut total = 0.0;
        let mut fastest: std::collections::BTreeMap<&str, Option<f64>> = Default::default();
        for (i, t) in self.tasks.iter().enumerate() {
            let v = latency(i).map(|c| t.weight * c);
            match &t.choice {
                None => total += v?,
                Some(choice) => {
                    let best = fastest.entry(choice.as_str()).or_insert(None);
                    if let Some(v) = v {
                        *best = Some(best.map_or(v, |b: f64| b.min(v)));
                    }
                }
            }
        }
        fastest
            .into_values()
            .try_fold(total, |acc, v| v.map(|v| acc + v))
    }

    /// Sets task `task`'s baseline: the latency (seconds) of its default schedule, what
    /// an untuned build runs. It stands in for the task in the estimate until the task
    /// has a tuned latency; it is no trial and does not steer the rounds.
    pub fn set_baseline(&mut self, task: usize, seconds: f64) {
        if let Some(b) = self.baselines.get_mut(task) {
            *b = (seconds.is_finite() && seconds > 0.0 && seconds < NO_COST).then_some(seconds);
        }
    }

    /// Marks dead each option of a choice ([`SchedTask::choice`]) that cannot be its
    /// choice's fastest: at [`OPTION_SPEEDUP_BOUND`] × the best throughput any task's
    /// default schedule reached (FLOPs over baseline), it would still be slower than
    /// another option's default schedule, so its rounds would buy nothing. Call it once
    /// the baselines are set. Returns each such task with that bound and the other
    /// option's baseline (seconds).
    pub fn prune_options(&mut self) -> Vec<(usize, f64, f64)> {
        let peak = (0..self.tasks.len())
            .filter_map(|i| self.baselines[i].map(|b| self.tasks[i].flop / b))
            .fold(0.0, f64::max)
            * OPTION_SPEEDUP_BOUND;
        let mut pruned = Vec::new();
        if peak <= 0.0 {
            return pruned;
        }
        for (i, t) in self.tasks.iter().enumerate() {
            let Some(choice) = &t.choice else {
                continue;
            };
            let fastest_other = (0..self.tasks.len())
                .filter(|&j| j != i && self.tasks[j].choice.as_ref() == Some(choice))
                .filter_map(|j| self.baselines[j])
                .fold(f64::INFINITY, f64::min);
            let bound = t.flop / peak;
            if bound > fastest_other && !self.dead.contains(&i) {
                pruned.push((i, bound, fastest_other));
            }
        }
        self.dead.extend(pruned.iter().map(|p| p.0));
        pruned
    }

    /// The latency the estimate counts for `task`: its tuned best, else its baseline.
    /// The flag says whether it is the baseline.
    fn estimate_of(&self, task: usize) -> Option<(f64, bool)> {
        let best = self.best_costs[task];
        let tuned = best < NO_COST;
        match (tuned, self.baselines[task]) {
            (true, Some(b)) if b < best => Some((b, true)),
            (true, _) => Some((best, false)),
            (false, Some(b)) => Some((b, true)),
            (false, None) => None,
        }
    }

    /// The network's estimated latency (seconds): Σ weight × (each task's best, or its
    /// default schedule's latency where that is faster or the task has none yet), of
    /// each choice's tasks the fastest; `None` while a task (every task of a choice) has
    /// neither.
    pub fn estimated_latency(&self) -> Option<f64> {
        self.objective(|i| self.estimate_of(i).map(|(c, _)| c))
    }

    fn next_random(&mut self, n: usize) -> usize {
        self.rng.index(n)
    }

    /// The gradient of each task (0 for dead ones).
    pub fn gradients(&self) -> Vec<f64> {
        let o = &self.opts;
        // the objective's derivatives over tuned bests, else baselines: an untuned
        // task's 1e10 would drown the finite difference
        let costs: Vec<f64> = (0..self.tasks.len())
            .map(|j| match (self.best_costs[j], self.baselines[j]) {
                (c, Some(b)) if c >= NO_COST => b,
                (c, _) => c,
            })
            .collect();
        let base = self.score(&costs);
        (0..self.tasks.len())
            .map(|i| {
                if self.dead.contains(&i) || self.rounds[i] == 0 {
                    return 0.0;
                }
                let delta = 1e-4;
                let mut moved = costs.clone();
                moved[i] -= delta;
                let chain = (base - self.score(&moved)) / delta;
                let h = &self.history[i];
                let t = self.rounds[i];
                let w = o.backward_window;
                let backward = if t >= 1 && t - 1 < h.len() && t > w {
                    (h[t - 1] - h[t - 1 - w]) / w as f64
                } else {
                    0.0
                };
                let best = self.best_costs[i];
                let next1 = best - best / t as f64;
                let mut next2 = o.beta * 1e30;
                if let Some(g) = &self.tasks[i].group {
                    let members: Vec<usize> = (0..self.tasks.len())
                        .filter(|&j| self.tasks[j].group.as_ref() == Some(g))
                        .collect();
                    if members.len() > 1 {
                        let top = members
                            .iter()
                            .map(|&j| self.tasks[j].flop / self.best_costs[j])
                            .fold(0.0, f64::max);
                        if top > 0.0 {
                            next2 = o.beta * self.tasks[i].flop / top;
                        }
                    }
                }
                let forward = next1.min(next2) - best;
                chain * (o.alpha * backward + (1.0 - o.alpha) * forward)
            })
            .collect()
    }

    /// The gradient task `i` (not warmed up yet) would have after a warm-up that found
    /// nothing better than its default schedule: `(1−α) · weight_i · (−baseline_i)` (the
    /// forward term after one round, TVM's optimistic `g_i − g_i/1`, and the objective's
    /// derivative by a task's latency, its weight). An option of a choice stands for
    /// the choice's latency, the fastest option's estimate: what its tuning can win.
    /// 0 without a baseline.
    fn warmup_gradient(&self, i: usize) -> f64 {
        let Some(baseline) = self.baselines[i] else {
            return 0.0;
        };
        let t = &self.tasks[i];
        let at_stake = match &t.choice {
            None => baseline,
            Some(choice) => (0..self.tasks.len())
                .filter(|&j| self.tasks[j].choice.as_ref() == Some(choice))
                .filter_map(|j| self.estimate_of(j).map(|(c, _)| c))
                .fold(baseline, f64::min),
        };
        -(1.0 - self.opts.alpha) * t.weight * at_stake
    }

    /// The live task not warmed up yet whose default schedule holds the largest share of
    /// the estimate (weight × baseline).
    fn largest_unwarmed(&self) -> Option<usize> {
        let share = |i: usize| self.tasks[i].weight * self.baselines[i].unwrap_or(0.0);
        (0..self.tasks.len())
            .filter(|&i| self.rounds[i] == 0 && !self.dead.contains(&i))
            .max_by(|&a, &b| share(a).total_cmp(&share(b)).then(b.cmp(&a)))
    }

    /// The estimated latency (seconds) and the part of it in tasks never measured, which
    /// keep their default schedules: Σ weight × baseline over them (of a choice, its
    /// fastest option by the estimate, when that option was never measured). `None`
    /// while the estimate is unknown.
    pub fn untuned_part(&self) -> Option<(f64, f64)> {
        let total = self.estimated_latency()?;
        let mut fastest: std::collections::BTreeMap<&str, (f64, usize)> = Default::default();
        let mut untuned = 0.0;
        for (i, t) in self.tasks.iter().enumerate() {
            let Some((c, _)) = self.estimate_of(i) else {
                continue;
            };
            let v = t.weight * c;
            match &t.choice {
                None if self.trials[i] == 0 => untuned += v,
                None => {}
                Some(choice) => {
                    let e = fastest.entry(choice.as_str()).or_insert((v, i));
                    if v < e.0 {
                        *e = (v, i);
                    }
                }
            }
        }
        for (v, i) in fastest.into_values() {
            if self.trials[i] == 0 {
                untuned += v;
            }
        }
        Some((total, untuned))
    }

    /// The task the next round goes to (`None` when every task is dead).
    pub fn pick_next(&mut self) -> Option<usize> {
        let n = self.tasks.len();
        if self.dead.len() >= n {
            return None;
        }
        if let TaskSelection::Sequential { .. } = self.opts.selection {
            // in order, each to its budget: no warm-up first
            return self.next_in_order();
        }
        // tasks of unknown weight in the estimate first, in order (TVM's warm-up)
        let unknown = |i: usize| self.rounds[i] == 0 && self.baselines[i].is_none();
        if let Some(i) = (0..n).find(|&i| unknown(i) && !self.dead.contains(&i)) {
            return Some(i);
        }
        match self.opts.selection {
            TaskSelection::Sequential { .. } => self.next_in_order(),
            TaskSelection::RoundRobin => {
                // the others' warm-ups by their share of the estimate, largest first
                if let Some(i) = self.largest_unwarmed() {
                    return Some(i);
                }
                for k in 0..n {
                    let i = (self.next_rr + k) % n;
                    if !self.dead.contains(&i) {
                        self.next_rr = (i + 1) % n;
                        return Some(i);
                    }
                }
                None
            }
            TaskSelection::Gradient => {
                let mut g = self.gradients();
                for (i, v) in g.iter_mut().enumerate() {
                    if self.rounds[i] == 0 {
                        *v = self.warmup_gradient(i);
                    }
                }
                let live: Vec<usize> = (0..n).filter(|i| !self.dead.contains(i)).collect();
                let (lo, hi) = live
                    .iter()
                    .fold((f64::INFINITY, f64::NEG_INFINITY), |acc, &i| {
                        (acc.0.min(g[i]), acc.1.max(g[i]))
                    });
                if lo == hi {
                    let k = self.next_random(live.len());
                    return Some(live[k]);
                }
                live.into_iter()
                    .min_by(|&a, &b| g[a].total_cmp(&g[b]).then(a.cmp(&b)))
            }
        }
    }

    /// Records the outcome of a round of `task`.
    pub fn record_round(&mut self, task: usize, out: &RoundOutcome) {
        let warmup = self.rounds[task] == 0;
        self.trials[task] += out.measured;
        self.ct += out.measured;
        if let Some(c) = out.best_cost {
            if c < self.best_costs[task] {
                self.best_costs[task] = c;
                self.best_at[task] = self.trials[task];
            }
        }
        self.rounds[task] += 1;
        self.history[task].push(self.best_costs[task]);
        let stale = self.trials[task] - self.best_at[task];
        if out.measured == 0
            || (warmup && self.best_costs[task] >= NO_COST)
            || self
                .opts
                .early_stopping_per_task
                .is_some_and(|e| stale >= e)
            || self.spent(task)
        {
            self.dead.insert(task);
        }
        self.last = Some((task, out.clone()));
        let score = self.score(&self.best_costs);
        if score < self.best_score {
            self.best_score = score;
            self.best_ct = self.ct;
        }
    }

    /// Tunes until `budget` trials in all (restored ones included) are spent, every
    /// task is dead, or the global early stop; `report` gets the table after each round.
    pub fn tune(
        &mut self,
        budget: usize,
        runner: &mut dyn RoundRunner,
        report: &mut dyn FnMut(&TaskScheduler, Option<usize>),
    ) -> StopReason {
        loop {
            if self.ct >= budget {
                return StopReason::Budget;
            }
            if let Some(e) = self.opts.early_stopping {
                let warmed = (0..self.tasks.len())
                    .all(|i| self.rounds[i] > 0 || self.baselines[i].is_some());
                if self.ct - self.best_ct >= e && warmed {
                    return StopReason::EarlyStopped;
                }
            }
            let Some(task) = self.pick_next() else {
                return StopReason::AllDead;
            };
            let n = self.round_size(task).min(budget - self.ct);
            let out = runner.run_round(task, n);
            self.record_round(task, &out);
            let next = self.peek_next();
            report(self, next);
        }
    }

    /// The trials of `task`'s next round: `per_round`, except for a task whose part of
    /// the estimate (weight × latency) is below an even share (the estimate over the
    /// tasks that have a latency): that fraction of a round, at least a quarter of one.
    /// A task of small share then costs a quarter of what a large one does, so the same
    /// budget reaches more of the network.
    pub fn round_size(&self, task: usize) -> usize {
        let per = self.opts.per_round.max(1);
        if let Some(b) = self.task_budget(task) {
            return per.min(b.saturating_sub(self.trials[task])).max(1);
        }
        let (Some(total), Some((c, _))) = (self.estimated_latency(), self.estimate_of(task)) else {
            return per;
        };
        let known = (0..self.tasks.len())
            .filter(|&i| self.estimate_of(i).is_some())
            .count();
        let even = total / known.max(1) as f64;
        let part = self.tasks[task].weight * c;
        if even.is_nan() || even <= 0.0 || part >= even {
            return per;
        }
        let n = (per as f64 * part / even).ceil() as usize;
        n.clamp((per / 4).max(1), per)
    }

    /// The task the next round would go to, without consuming the random choice.
    fn peek_next(&self) -> Option<usize> {
        self.clone().pick_next()
    }

    /// TVM's table: one row per task, then the estimated total latency, the trials,
    /// the time used and the next task.
    pub fn table(&self, used_seconds: f64, next: Option<usize>) -> String {
        let rule = "-".repeat(49);
        let mut s = String::new();
        let _ = writeln!(s, "|  ID  | Latency (ms) | Speed (GFLOPS) | Trials |");
        let _ = writeln!(s, "{rule}");
        let mut marked = false;
        for (i, t) in self.tasks.iter().enumerate() {
            let (lat, speed) = match self.estimate_of(i) {
                Some((c, baseline)) => {
                    marked |= baseline;
                    let mark = if baseline { "*" } else { "" };
                    (
                        format!("{:.3}{mark}", c * 1e3),
                        format!("{:.2}{mark}", t.flop / c / 1e9),
                    )
                }
                None => ("-".to_string(), "-".to_string()),
            };
            let _ = writeln!(
                s,
                "| {i:4} | {lat:>12} | {speed:>14} | {:6} |",
                self.trials[i]
            );
        }
        let _ = writeln!(s, "{rule}");
        let total = self
            .estimated_latency()
            .map_or("-".to_string(), |l| format!("{:.3}", l * 1e3));
        let next = next.map_or("-".to_string(), |n| n.to_string());
        if marked {
            let _ = writeln!(
                s,
                "* the default schedule (not tuned yet, or faster than every tuned one)"
            );
        }
        let _ = writeln!(
            s,
            "Estimated total latency: {total} ms\tTrials: {}\tUsed time : {used_seconds:.0} s\tNext ID: {next}\t",
            self.ct
        );
        s
    }
}
