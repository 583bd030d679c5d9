//! Tuners: which configurations to measure next. `random` and `gridsearch` ignore the
//! measurements; `ga` evolves a population (TVM's GATuner); `xgb` ranks candidates with
//! a learned cost model (see `xgb.rs`).

use crate::space::ConfigSpace;
use std::collections::HashSet;

pub use tessera_search::rng::Rng;

/// What a tuner learns from one measurement: the configuration and its score
/// (GFLOPS; 0 for a failure).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Observation {
    pub index: u64,
    pub gflops: f64,
}

/// A tuner proposes configurations and learns from their measurements.
pub trait Tuner {
    /// The tuner's name (`random`, `gridsearch`, `ga`, `xgb…`).
    fn name(&self) -> String;
    /// Up to `n` configurations not proposed before (fewer when the space runs out).
    fn next_batch(&mut self, space: &ConfigSpace, n: usize) -> Vec<u64>;
    /// The measurements of proposed configurations.
    fn update(&mut self, space: &ConfigSpace, observations: &[Observation]);
    /// Learns from measurements of earlier runs (transfer learning); default: none.
    fn load_history(&mut self, _space: &ConfigSpace, _observations: &[Observation]) {}
}

/// Uniformly random configurations, without repetition.
pub struct RandomTuner {
    rng: Rng,
    visited: HashSet<u64>,
}

impl RandomTuner {
    pub fn new(seed: u64) -> Self {
        RandomTuner {
            rng: Rng::new(seed),
            visited: HashSet::new(),
        }
    }
}

/// Draws an unvisited index: random tries, then a scan from a random start.
fn fresh_index(space: &ConfigSpace, visited: &HashSet<u64>, rng: &mut Rng) -> Option<u64> {
    let len = space.len();
    if visited.len() as u64 >= len {
        return None;
    }
    for _ in 0..64 {
        let i = rng.below(len);
        if !visited.contains(&i) {
            return Some(i);
        }
    }
    let start = rng.below(len);
    (0..len)
        .map(|k| (start + k) % len)
        .find(|i| !visited.contains(i))
}

/// Adds random configurations, neither visited nor already in `next`, until `next` has
/// `n` (or the space runs out).
fn top_up(
    space: &ConfigSpace,
    visited: &HashSet<u64>,
    next: &mut Vec<u64>,
    n: usize,
    rng: &mut Rng,
) {
    let mut taken = visited.clone();
    taken.extend(next.iter().copied());
    while next.len() < n {
        match fresh_index(space, &taken, rng) {
            Some(i) => {
                taken.insert(i);
                next.push(i);
            }
            None => break,
        }
    }
}

impl Tuner for RandomTuner {
    fn name(&self) -> String {
        "random".into()
    }
    fn next_batch(&mut self, space: &ConfigSpace, n: usize) -> Vec<u64> {
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            match fresh_index(space, &self.visited, &mut self.rng) {
                Some(i) => {
                    self.visited.insert(i);
                    out.push(i);
                }
                None => break,
            }
        }
        out
    }
    fn update(&mut self, _space: &ConfigSpace, _observations: &[Observation]) {}
    fn load_history(&mut self, _space: &ConfigSpace, observations: &[Observation]) {
        self.visited.extend(observations.iter().map(|o| o.index));
    }
}

/// Configurations in index order.
pub struct GridSearchTuner {
    next: u64,
}

impl GridSearchTuner {
    pub fn new() -> Self {
        GridSearchTuner { next: 0 }
    }
}

impl Default for GridSearchTuner {
    fn default() -> Self {
        Self::new()
    }
}

impl Tuner for GridSearchTuner {
    fn name(&self) -> String {
        "gridsearch".into()
    }
    fn next_batch(&mut self, space: &ConfigSpace, n: usize) -> Vec<u64> {
        let end = space.len().min(self.next + n as u64);
        let out: Vec<u64> = (self.next..end).collect();
        self.next = end;
        out
    }
    fn update(&mut self, _space: &ConfigSpace, _observations: &[Observation]) {}
}

/// Options of the genetic tuner (TVM's defaults: population 100, 3 elites, mutation
/// probability 0.1).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GaOptions {
    pub pop_size: usize,
    pub elite_num: usize,
    pub mutation_prob: f64,
}

impl Default for GaOptions {
    fn default() -> Self {
        GaOptions {
            pop_size: 100,
            elite_num: 3,
            mutation_prob: 0.1,
        }
    }
}

/// TVM's GATuner: a population of configurations (genes = one choice per knob); once a
/// generation is measured, the next keeps the elites and breeds the rest by
/// fitness-proportional selection, single-point crossover and per-gene mutation.
pub struct GaTuner {
    opts: GaOptions,
    rng: Rng,
    visited: HashSet<u64>,
    /// The generation being proposed, and what is left of it to hand out.
    pending: Vec<u64>,
    /// Best observations so far (the elites' pool).
    all: Vec<Observation>,
}

impl GaTuner {
    pub fn new(opts: GaOptions, seed: u64) -> Self {
        GaTuner {
            opts,
            rng: Rng::new(seed),
            visited: HashSet::new(),
            pending: Vec::new(),
            all: Vec::new(),
        }
    }

    fn breed(&mut self, space: &ConfigSpace) {
        let pop = self.opts.pop_size.max(2);
        let mut next: Vec<u64> = Vec::new();
        if self.all.is_empty() {
            top_up(space, &self.visited, &mut next, pop, &mut self.rng);
            self.pending = next;
            return;
        }
        let mut parents = self.all.clone();
        parents.sort_by(|a, b| b.gflops.total_cmp(&a.gflops).then(a.index.cmp(&b.index)));
        parents.truncate(pop);
        let total: f64 = parents.iter().map(|o| o.gflops.max(0.0)).sum();
        let pick = |rng: &mut Rng| -> u64 {
            if total <= 0.0 {
                return parents[rng.below(parents.len() as u64) as usize].index;
            }
            let mut x = rng.unit() * total;
            for p in &parents {
                x -= p.gflops.max(0.0);
                if x <= 0.0 {
                    return p.index;
                }
            }
            parents[parents.len() - 1].index
        };
        let genes = space.knobs.len();
        let mut tries = 0;
        while next.len() < pop && tries < pop * 20 {
            tries += 1;
            let (a, b) = (pick(&mut self.rng), pick(&mut self.rng));
            let (ga, gb) = match (space.get(a), space.get(b)) {
                (Ok(x), Ok(y)) => (x.choices, y.choices),
                _ => continue,
            };
            let point = if genes > 1 {
                self.rng.below(genes as u64) as usize
            } else {
                0
            };
            let mut child: Vec<usize> = ga[..point].iter().chain(&gb[point..]).copied().collect();
            for (g, knob) in child.iter_mut().zip(&space.knobs) {
                if self.rng.unit() < self.opts.mutation_prob {
                    *g = self.rng.below(knob.len() as u64) as usize;
                }
            }
            if let Ok(i) = space.index_of(&child) {
                if !self.visited.contains(&i) && !next.contains(&i) {
                    next.push(i);
                }
            }
        }
        // Top up with random configurations when breeding keeps hitting measured ones.
        top_up(space, &self.visited, &mut next, pop, &mut self.rng);
        self.pending = next;
    }
}

impl Tuner for GaTuner {
    fn name(&self) -> String {
        "ga".into()
    }
    fn next_batch(&mut self, space: &ConfigSpace, n: usize) -> Vec<u64> {
        let mut out = Vec::new();
        while out.len() < n {
            if self.pending.is_empty() {
                self.breed(space);
                if self.pending.is_empty() {
                    break;
                }
            }
            let i = self.pending.remove(0);
            if self.visited.insert(i) {
                out.push(i);
            }
        }
        out
    }
    fn update(&mut self, _space: &ConfigSpace, observations: &[Observation]) {
        self.all.extend_from_slice(observations);
        // Keep the elites of everything seen in the pool of parents.
        let elite = self.opts.elite_num.max(1);
        if self.all.len() > 4 * self.opts.pop_size.max(elite) {
            self.all
                .sort_by(|a, b| b.gflops.total_cmp(&a.gflops).then(a.index.cmp(&b.index)));
            self.all.truncate(2 * self.opts.pop_size.max(elite));
        }
    }
    fn load_history(&mut self, _space: &ConfigSpace, observations: &[Observation]) {
        self.visited.extend(observations.iter().map(|o| o.index));
        self.all.extend_from_slice(observations);
    }
}
