//! The configuration space of a template (AutoTVM's `ConfigSpace`): knobs defined by
//! `define_split`, `define_reorder`, `define_annotate` and `define_knob`, each a list of
//! choices; a configuration is one choice per knob, numbered by a mixed-radix index
//! (the first knob is the least significant digit, as in TVM).

use serde::{Deserialize, Serialize};

/// How `define_split` enumerates the factors of an axis (TVM's policies).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SplitPolicy {
    /// Every factorization into exact divisors.
    Factors,
    /// Inner factors that are powers of two (the outermost part takes the rest, with a
    /// tail when it does not divide).
    Power2,
    /// The union of `Factors` and `Power2`.
    Verbose,
    /// An explicit list of factor lists.
    Candidate(Vec<Vec<i64>>),
}

/// Options of `define_split`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SplitOptions {
    pub policy: SplitPolicy,
    /// How many parts the axis is split into (≥ 1).
    pub num_outputs: usize,
    /// The largest allowed inner factor (every part but the outermost).
    pub max_factor: Option<i64>,
    /// Only factorizations whose product is exactly the extent (no tail).
    pub no_tail: bool,
}

impl SplitOptions {
    pub fn factors(num_outputs: usize) -> Self {
        SplitOptions {
            policy: SplitPolicy::Factors,
            num_outputs,
            max_factor: None,
            no_tail: false,
        }
    }
    pub fn with_max_factor(mut self, m: i64) -> Self {
        self.max_factor = Some(m);
        self
    }
    pub fn with_policy(mut self, p: SplitPolicy) -> Self {
        self.policy = p;
        self
    }
    pub fn with_no_tail(mut self) -> Self {
        self.no_tail = true;
        self
    }
}

/// The annotation of one axis in a `define_annotate` choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ann {
    None,
    Unroll,
    Vec,
}

/// The annotation policies of `define_annotate`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AnnotatePolicy {
    /// Unroll every axis or none.
    TryUnroll,
    /// Vectorize the last axis or not.
    TryVec,
    /// Both: {none, unroll all} × {vectorize the last, not}.
    TryUnrollVec,
}

/// One knob and its choices.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Knob {
    /// Factor lists, outermost first; their product is the extent, or covers it with a
    /// tail (the outermost factor is then the ceiling).
    Split {
        name: String,
        extent: i64,
        choices: Vec<Vec<i64>>,
    },
    /// Permutations of `n` axes.
    Reorder {
        name: String,
        choices: Vec<Vec<usize>>,
    },
    /// One annotation per axis.
    Annotate {
        name: String,
        choices: Vec<Vec<Ann>>,
    },
    /// Plain values.
    Other { name: String, choices: Vec<i64> },
}

impl Knob {
    pub fn name(&self) -> &str {
        match self {
            Knob::Split { name, .. }
            | Knob::Reorder { name, .. }
            | Knob::Annotate { name, .. }
            | Knob::Other { name, .. } => name,
        }
    }
    pub fn len(&self) -> usize {
        match self {
            Knob::Split { choices, .. } => choices.len(),
            Knob::Reorder { choices, .. } => choices.len(),
            Knob::Annotate { choices, .. } => choices.len(),
            Knob::Other { choices, .. } => choices.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// TVM's entity kind code: `sp`, `re`, `an`, `ot`.
    pub fn code(&self) -> &'static str {
        match self {
            Knob::Split { .. } => "sp",
            Knob::Reorder { .. } => "re",
            Knob::Annotate { .. } => "an",
            Knob::Other { .. } => "ot",
        }
    }
    /// The JSON value of choice `i` (as in TVM's config entity).
    pub fn value_json(&self, i: usize) -> serde_json::Value {
        match self {
            Knob::Split { choices, .. } => serde_json::json!(choices[i]),
            Knob::Reorder { choices, .. } => serde_json::json!(choices[i]),
            Knob::Annotate { choices, .. } => serde_json::json!(choices[i]),
            Knob::Other { choices, .. } => serde_json::json!(choices[i]),
        }
    }
    /// The numbers of choice `i`, for knob features.
    pub fn value_numbers(&self, i: usize) -> Vec<i64> {
        match self {
            Knob::Split { choices, .. } => choices[i].clone(),
            Knob::Reorder { choices, .. } => choices[i].iter().map(|&v| v as i64).collect(),
            Knob::Annotate { choices, .. } => choices[i].iter().map(|&a| a as i64).collect(),
            Knob::Other { choices, .. } => vec![choices[i]],
        }
    }
}

/// Errors of defining a space or reading a configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpaceError {
    #[error("knob `{knob}`: {reason}")]
    BadKnob { knob: String, reason: String },
    #[error("configuration index {index} is outside the space of {len}")]
    BadIndex { index: u64, len: u64 },
    #[error("configuration entity does not fit the space: {0}")]
    BadEntity(String),
}

/// A template's configuration space.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ConfigSpace {
    pub knobs: Vec<Knob>,
}

/// One configuration: an index and the choice of each knob.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Config {
    pub index: u64,
    pub choices: Vec<usize>,
}

/// The ordered factorizations of `n` into `parts` exact divisors (outermost first).
fn factorizations(n: i64, parts: usize) -> Vec<Vec<i64>> {
    if parts == 1 {
        return vec![vec![n]];
    }
    let mut out = Vec::new();
    for d in 1..=n {
        if n % d == 0 {
            for mut rest in factorizations(n / d, parts - 1) {
                rest.insert(0, d);
                out.push(rest);
            }
        }
    }
    out
}

impl ConfigSpace {
    pub fn new() -> Self {
        ConfigSpace::default()
    }

    fn check_new(&self, name: &str) -> Result<(), SpaceError> {
        if self.knobs.iter().any(|k| k.name() == name) {
            return Err(SpaceError::BadKnob {
                knob: name.into(),
                reason: "defined twice".into(),
            });
        }
        Ok(())
    }

    /// `define_split`: the ways to split an axis of `extent` into `num_outputs` parts.
    pub fn define_split(
        &mut self,
        name: &str,
        extent: i64,
        opts: SplitOptions,
    ) -> Result<(), SpaceError> {
        self.check_new(name)?;
        let bad = |reason: String| SpaceError::BadKnob {
            knob: name.into(),
            reason,
        };
        if extent <= 0 || opts.num_outputs == 0 {
            return Err(bad(format!(
                "extent {extent} and num_outputs {} must be positive",
                opts.num_outputs
            )));
        }
        let fits = |c: &Vec<i64>| -> bool {
            let inner_ok = opts
                .max_factor
                .is_none_or(|m| c[1..].iter().all(|&f| f <= m));
            let exact = c.iter().product::<i64>() == extent;
            inner_ok && (exact || !opts.no_tail)
        };
        let power2 = || -> Vec<Vec<i64>> {
            // inner parts are powers of two, the outermost covers the rest (ceil)
            let mut out: Vec<Vec<i64>> = vec![vec![]];
            for _ in 1..opts.num_outputs {
                let mut next = Vec::new();
                for prefix in &out {
                    let used: i64 = prefix.iter().product();
                    let mut f = 1;
                    while f * used <= extent {
                        let mut p = prefix.clone();
                        p.push(f);
                        next.push(p);
                        f *= 2;
                    }
                }
                out = next;
            }
            out.into_iter()
                .map(|inner| {
                    let used: i64 = inner.iter().product();
                    let mut c = vec![(extent + used - 1) / used];
                    c.extend(inner);
                    c
                })
                .collect()
        };
        let mut choices: Vec<Vec<i64>> = match &opts.policy {
            SplitPolicy::Factors => factorizations(extent, opts.num_outputs),
            SplitPolicy::Power2 => power2(),
            SplitPolicy::Verbose => {
                let mut v = factorizations(extent, opts.num_outputs);
                for c in power2() {
                    if !v.contains(&c) {
                        v.push(c);
                    }
                }
                v
            }
            SplitPolicy::Candidate(list) => {
                for c in list {
                    if c.len() != opts.num_outputs || c.iter().any(|&f| f <= 0) {
                        return Err(bad(format!(
                            "candidate {c:?} must have {} positive factors",
                            opts.num_outputs
                        )));
                    }
                    let inner: i64 = c[1..].iter().product();
                    if c[0] * inner < extent {
                        return Err(bad(format!(
                            "candidate {c:?} does not cover the extent {extent}"
                        )));
                    }
                }
                list.clone()
            }
        };
        choices.retain(fits);
        if choices.is_empty() {
            return Err(bad("no factorization satisfies the options".into()));
        }
        self.knobs.push(Knob::Split {
            name: name.into(),
            extent,
            choices,
        });
        Ok(())
    }

    /// `define_reorder`: the given permutations of `n` axes (`None`: all of them).
    pub fn define_reorder(
        &mut self,
        name: &str,
        n: usize,
        candidates: Option<Vec<Vec<usize>>>,
    ) -> Result<(), SpaceError> {
        self.check_new(name)?;
        let choices = match candidates {
            Some(c) => {
                for p in &c {
                    let mut s = p.clone();
                    s.sort();
                    if s != (0..n).collect::<Vec<_>>() {
                        return Err(SpaceError::BadKnob {
                            knob: name.into(),
                            reason: format!("{p:?} is not a permutation of 0..{n}"),
                        });
                    }
                }
                c
            }
            None => permutations(n),
        };
        self.knobs.push(Knob::Reorder {
            name: name.into(),
            choices,
        });
        Ok(())
    }

    /// `define_annotate` over `n` axes.
    pub fn define_annotate(
        &mut self,
        name: &str,
        n: usize,
        policy: AnnotatePolicy,
    ) -> Result<(), SpaceError> {
        self.check_new(name)?;
        let none = vec![Ann::None; n];
        let unroll = vec![Ann::Unroll; n];
        let mut vec_last = none.clone();
        if let Some(l) = vec_last.last_mut() {
            *l = Ann::Vec;
        }
        let mut unroll_vec = unroll.clone();
        if let Some(l) = unroll_vec.last_mut() {
            *l = Ann::Vec;
        }
        let choices = match policy {
            AnnotatePolicy::TryUnroll => vec![none, unroll],
            AnnotatePolicy::TryVec => vec![none, vec_last],
            AnnotatePolicy::TryUnrollVec => vec![none, unroll, vec_last, unroll_vec],
        };
        self.knobs.push(Knob::Annotate {
            name: name.into(),
            choices,
        });
        Ok(())
    }

    /// `define_knob`: a plain list of values.
    pub fn define_knob(&mut self, name: &str, values: &[i64]) -> Result<(), SpaceError> {
        self.check_new(name)?;
        if values.is_empty() {
            return Err(SpaceError::BadKnob {
                knob: name.into(),
                reason: "no values".into(),
            });
        }
        self.knobs.push(Knob::Other {
            name: name.into(),
            choices: values.to_vec(),
        });
        Ok(())
    }

    /// The number of configurations (saturating at `u64::MAX`).
    pub fn len(&self) -> u64 {
        self.knobs
            .iter()
            .fold(1u64, |a, k| a.saturating_mul(k.len() as u64))
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The configuration with mixed-radix `index` (knob 0 the least significant digit).
    pub fn get(&self, index: u64) -> Result<Config, SpaceError> {
        let len = self.len();
        if index >= len {
            return Err(SpaceError::BadIndex { index, len });
        }
        let mut rest = index;
        let mut choices = Vec::with_capacity(self.knobs.len());
        for k in &self.knobs {
            let n = k.len() as u64;
            choices.push((rest % n) as usize);
            rest /= n;
        }
        Ok(Config { index, choices })
    }

    /// TVM's fallback configuration (`FallbackConfigEntity`), what a task without a
    /// record builds with: each split's inner factors 1 (the outermost takes the whole
    /// extent), every other knob its first choice.
    pub fn fallback(&self) -> Result<Config, SpaceError> {
        let choices: Vec<usize> = self
            .knobs
            .iter()
            .map(|k| match k {
                Knob::Split { choices, .. } => choices
                    .iter()
                    .position(|c| c.iter().skip(1).all(|&f| f == 1))
                    .unwrap_or(0),
                _ => 0,
            })
            .collect();
        let index = self.index_of(&choices)?;
        Ok(Config { index, choices })
    }

    /// The index of a choice vector.
    pub fn index_of(&self, choices: &[usize]) -> Result<u64, SpaceError> {
        if choices.len() != self.knobs.len() {
            return Err(SpaceError::BadEntity(format!(
                "{} choices for {} knobs",
                choices.len(),
                self.knobs.len()
            )));
        }
        let mut index = 0u64;
        for (k, &c) in self.knobs.iter().zip(choices).rev() {
            if c >= k.len() {
                return Err(SpaceError::BadEntity(format!(
                    "choice {c} of knob `{}` with {} choices",
                    k.name(),
                    k.len()
                )));
            }
            index = index * k.len() as u64 + c as u64;
        }
        Ok(index)
    }

    /// A neighbour of `index`: one knob changed to another of its choices (TVM's
    /// `random_walk`). The same index when no knob has two choices.
    pub fn random_walk(
        &self,
        index: u64,
        rng: &mut impl FnMut() -> u64,
    ) -> Result<u64, SpaceError> {
        let mut c = self.get(index)?.choices;
        let movable: Vec<usize> = (0..self.knobs.len())
            .filter(|&i| self.knobs[i].len() > 1)
            .collect();
        if movable.is_empty() {
            return Ok(index);
        }
        let k = movable[(rng() % movable.len() as u64) as usize];
        let n = self.knobs[k].len() as u64;
        let step = 1 + rng() % (n - 1);
        c[k] = ((c[k] as u64 + step) % n) as usize;
        self.index_of(&c)
    }

    /// TVM's config entity: `[[name, code, value], …]`.
    pub fn entity_json(&self, config: &Config) -> serde_json::Value {
        serde_json::Value::Array(
            self.knobs
                .iter()
                .zip(&config.choices)
                .map(|(k, &c)| serde_json::json!([k.name(), k.code(), k.value_json(c)]))
                .collect(),
        )
    }

    /// The configuration whose entity is `entity` (as [`entity_json`](Self::entity_json)
    /// writes it): how a record is applied again.
    pub fn from_entity(&self, entity: &serde_json::Value) -> Result<Config, SpaceError> {
        let items = entity
            .as_array()
            .ok_or_else(|| SpaceError::BadEntity("not a list".into()))?;
        if items.len() != self.knobs.len() {
            return Err(SpaceError::BadEntity(format!(
                "{} entries for {} knobs",
                items.len(),
                self.knobs.len()
            )));
        }
        let mut choices = Vec::with_capacity(items.len());
        for (k, item) in self.knobs.iter().zip(items) {
            if item.get(0).and_then(|v| v.as_str()) != Some(k.name()) {
                return Err(SpaceError::BadEntity(format!(
                    "expected knob `{}` at {item}",
                    k.name()
                )));
            }
            let value = item.get(2).cloned().unwrap_or(serde_json::Value::Null);
            let c = (0..k.len())
                .find(|&i| k.value_json(i) == value)
                .ok_or_else(|| {
                    SpaceError::BadEntity(format!("knob `{}` has no choice {value}", k.name()))
                })?;
            choices.push(c);
        }
        let index = self.index_of(&choices)?;
        Ok(Config { index, choices })
    }

    /// The flattened numbers of a configuration (the "knob" features).
    pub fn knob_numbers(&self, config: &Config) -> Vec<i64> {
        self.knobs
            .iter()
            .zip(&config.choices)
            .flat_map(|(k, &c)| k.value_numbers(c))
            .collect()
    }

    /// The knob with `name`.
    pub fn knob(&self, name: &str) -> Option<&Knob> {
        self.knobs.iter().find(|k| k.name() == name)
    }
}

/// All permutations of `0..n` in lexicographic order.
fn permutations(n: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return vec![vec![]];
    }
    let mut out = Vec::new();
    for first in 0..n {
        for rest in permutations(n - 1) {
            let mut p = vec![first];
            p.extend(rest.into_iter().map(|r| if r >= first { r + 1 } else { r }));
            out.push(p);
        }
    }
    out
}

impl std::fmt::Display for ConfigSpace {
    /// TVM's space print: one line per knob with its number of choices.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "ConfigSpace (len={}, knobs={})",
            self.len(),
            self.knobs.len()
        )?;
        for (i, k) in self.knobs.iter().enumerate() {
            let desc = match k {
                Knob::Split {
                    extent, choices, ..
                } => format!(
                    "Split(extent={extent}, parts={}) len={}",
                    choices.first().map_or(0, |c| c.len()),
                    choices.len()
                ),
                Knob::Reorder { choices, .. } => format!("Reorder len={}", choices.len()),
                Knob::Annotate { choices, .. } => format!("Annotate len={}", choices.len()),
                Knob::Other { choices, .. } => format!("Other {choices:?}"),
            };
            writeln!(f, "  {i:2} {}: {desc}", k.name())?;
        }
        Ok(())
    }
}
