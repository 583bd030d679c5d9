//! Algorithm choice for a CPU build's convolutions. A 3×3, stride-1 NHWC convolution
//! can be computed directly (its weights packed, [`passes::pack_conv_weights`]) or
//! with Winograd ([`crate::winograd`]); which is faster depends on the layer and on
//! how well each is tuned. A [`ConvPlan`] holds a network before that choice
//! (optimized, weights HWIO) and, for each convolution that has one, the workload key
//! of the fused group each algorithm makes of it. Then:
//!
//! - an untuned build takes the rule ([`ConvPlan::rule_graph`]: Winograd from
//!   [`crate::winograd::WINOGRAD_MIN_CHANNELS`] input channels, as measured on default
//!   schedules);
//! - tuning tunes the tasks of every option ([`ConvPlan::tasks`]); the options of one
//!   convolution share a [`Task::choice`] label, so that the task scheduler counts only
//!   the fastest of them in the network's latency;
//! - a build with a record log takes, for each convolution, the option whose task
//!   measured fastest ([`ConvChoice::pick`]), the rule where an option has no
//!   measurement — as AutoTVM's `select_implementation` takes, among an operator's
//!   implementations, the one with the best tuned record.

use crate::cpu_rewrites::{run_cpu_rewrites, Rewriting};
use crate::error::GraphError;
use crate::fuse::{fuse, group_compute};
use crate::ir::Graph;
use crate::tasks::{extract_tasks, Task};
use crate::winograd::{rule_takes_winograd, winograd_fits};
use petgraph::stable_graph::NodeIndex;
use std::collections::{HashMap, HashSet};
use std::fmt;
use tessera_backends::Target;

/// The fewest input channels for which a convolution gets a choice (below, the rule's
/// direct convolution is the only option: Winograd's transforms cost more than the
/// multiplications they save).
pub const CHOICE_MIN_CHANNELS: usize = 16;

/// How a convolution is computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConvAlgorithm {
    /// Directly, on packed weights.
    Direct,
    /// With Winograd F(`tile`×`tile`, 3×3).
    Winograd { tile: i64 },
}

impl fmt::Display for ConvAlgorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConvAlgorithm::Direct => write!(f, "direct"),
            ConvAlgorithm::Winograd { tile } => write!(f, "Winograd F({tile}x{tile}, 3x3)"),
        }
    }
}

/// One way to compute a convolution, and the workload key of the fused group (the
/// convolution with its epilogue) it gives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConvOption {
    pub algorithm: ConvAlgorithm,
    pub workload_key: String,
}

/// A convolution with more than one way to compute it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConvChoice {
    /// The convolution's node name.
    pub name: String,
    node: NodeIndex,
    /// What an untuned build takes.
    pub rule: ConvAlgorithm,
    /// Every option, the rule's first.
    pub options: Vec<ConvOption>,
}

impl ConvChoice {
    /// The `k`-th option's algorithm (the last one's where there are fewer).
    fn nth_option(&self, k: usize) -> ConvAlgorithm {
        self.options[k.min(self.options.len() - 1)].algorithm
    }

    /// The option whose task `cost` (seconds, by workload key) says is fastest, where
    /// it knows every option's; the rule otherwise. The flag says whether it was
    /// measured.
    pub fn pick(&self, cost: impl Fn(&str) -> Option<f64>) -> (ConvAlgorithm, bool) {
        let costs: Option<Vec<f64>> = self
            .options
            .iter()
            .map(|o| cost(&o.workload_key).filter(|c| c.is_finite()))
            .collect();
        let fastest = costs.and_then(|costs| {
            self.options
                .iter()
                .zip(costs)
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .map(|(o, _)| o.algorithm)
        });
        match fastest {
            Some(a) => (a, true),
            None => (self.rule, false),
        }
    }
}

/// A network with its convolutions' algorithms still to choose (see the module's
/// documentation).
#[derive(Clone, Debug)]
pub struct ConvPlan {
    base: Graph,
    /// Output channels per packed weight block; `None`: nothing is packed or chosen.
    block: Option<i64>,
    choices: Vec<ConvChoice>,
    /// The option networks ([`ConvPlan::option_graphs`]), built once with the plan.
    options: Vec<Graph>,
}

impl ConvPlan {
    /// A plan that builds `graph` as it is: no choice, no packing (a target other than
    /// the CPU, an NCHW network, template tuning's HWIO convolutions).
    pub fn fixed(graph: Graph) -> ConvPlan {
        ConvPlan {
            options: vec![graph.clone()],
            base: graph,
            block: None,
            choices: Vec::new(),
        }
    }

    /// A plan for a CPU build on vectors of `block` float32 lanes: NHWC convolutions'
    /// output channels padded to a multiple of `block`
    /// ([`crate::pad_channels::pad_conv_channels`]) and matrix products' columns too
    /// ([`crate::pad_channels::pad_matmul_columns`]), every NHWC convolution's weights
    /// packed by `block` output channels where that pays
    /// ([`crate::passes::PACK_WEIGHTS_ABOVE`]), every dense layer's by `block` output features
    /// ([`crate::passes::pack_dense_weights_mapped`]), and with `winograd` a choice between the direct and the
    /// Winograd form for each 3×3 stride-1 convolution of at least
    /// [`CHOICE_MIN_CHANNELS`] input channels. `base` is the optimized NHWC network.
    pub fn for_cpu(base: Graph, block: i64, winograd: bool) -> Result<ConvPlan, GraphError> {
        let mut plan = ConvPlan {
            base,
            block: Some(block),
            choices: Vec::new(),
            options: Vec::new(),
        };
        // without Winograd, no choices: the plan's one network is the base's, packed
        let fitting: Vec<(NodeIndex, usize, i64)> = match winograd {
            false => Vec::new(),
            true => plan
                .base
                .topo_order()
                .into_iter()
                .filter_map(|n| winograd_fits(&plan.base, n, block).map(|(ci, t)| (n, ci, t)))
                .collect(),
        };
        for (n, ci, tile) in fitting {
            if ci < CHOICE_MIN_CHANNELS {
                continue;
            }
            let wino = ConvAlgorithm::Winograd { tile };
            let rule = if rule_takes_winograd(ci) {
                wino
            } else {
                ConvAlgorithm::Direct
            };
            let other = if rule == wino {
                ConvAlgorithm::Direct
            } else {
                wino
            };
            plan.choices.push(ConvChoice {
                name: plan.base.node(n).name.clone(),
                node: n,
                rule,
                options: [rule, other]
                    .into_iter()
                    .map(|algorithm| ConvOption {
                        algorithm,
                        workload_key: String::new(),
                    })
                    .collect(),
            });
        }
        plan.build_options()?;
        Ok(plan)
    }

    /// The network before the choice.
    pub fn base(&self) -> &Graph {
        &self.base
    }

    /// The convolutions with a choice, in topological order.
    pub fn choices(&self) -> &[ConvChoice] {
        &self.choices
    }

    /// The network built with `pick`'s algorithm for each choice (one of its options),
    /// the other convolutions' weights packed.
    pub fn graph(
        &self,
        mut pick: impl FnMut(&ConvChoice) -> ConvAlgorithm,
    ) -> Result<Graph, GraphError> {
        Ok(self.prepare(|c| pick(c))?.0)
    }

    /// The network an untuned build runs: each choice's rule (every choice's first
    /// option, so the first option network).
    pub fn rule_graph(&self) -> &Graph {
        &self.options[0]
    }

    /// The tasks of every option: those of the rule's network, then the other options'
    /// groups (their tasks labelled with [`Task::choice`]), each with its weight.
    pub fn tasks(&self, target: &Target) -> Result<(Vec<Task>, Vec<usize>), GraphError> {
        let mut tasks: Vec<Task> = Vec::new();
        let mut weights: Vec<usize> = Vec::new();
        let mut seen: HashSet<String> = HashSet::new();
        for g in self.option_graphs() {
            let (ts, ws) = extract_tasks(g, target)?;
            for (t, w) in ts.into_iter().zip(ws) {
                if seen.insert(t.workload_key.clone()) {
                    tasks.push(t);
                    weights.push(w);
                }
            }
        }
        for t in &mut tasks {
            t.choice = self.choice_label(&t.workload_key);
        }
        Ok((tasks, weights))
    }

    /// One network per option index: the `k`-th takes each choice's `k`-th option (its
    /// rule first); together they compute every option's groups.
    pub fn option_graphs(&self) -> &[Graph] {
        &self.options
    }

    /// How many option networks there are: the most options of a choice (1 without
    /// choices: the rule's network).
    fn option_count(&self) -> usize {
        self.choices
            .iter()
            .map(|c| c.options.len())
            .max()
            .unwrap_or(1)
    }

    /// The label shared by the tasks of one convolution's options (the first such
    /// convolution's name), for the task whose workload key is `key`.
    pub fn choice_label(&self, key: &str) -> Option<String> {
        self.choices
            .iter()
            .find(|c| c.options.iter().any(|o| o.workload_key == key))
            .map(|c| format!("conv `{}`", c.name))
    }

    /// The network with `pick`'s algorithms after the CPU rewrites
    /// ([`crate::cpu_rewrites`]), and where each chosen convolution's node went
    /// (rewritten nodes get new indices).
    fn prepare(
        &self,
        mut pick: impl FnMut(&ConvChoice) -> ConvAlgorithm,
    ) -> Result<(Graph, HashMap<NodeIndex, NodeIndex>), GraphError> {
        let mut g = self.base.clone();
        let Some(block) = self.block else {
            return Ok((g, HashMap::new()));
        };
        let mut winograd = Vec::new();
        for c in &self.choices {
            let algorithm = pick(c);
            if !c.options.iter().any(|o| o.algorithm == algorithm) {
                return Err(GraphError::Invalid(format!(
                    "convolution `{}`: {algorithm} is not one of its options",
                    c.name
                )));
            }
            if let ConvAlgorithm::Winograd { tile } = algorithm {
                winograd.push((c.node, tile));
            }
        }
        let mut r = Rewriting {
            block,
            winograd,
            moved: HashMap::new(),
        };
        run_cpu_rewrites(&mut g, &mut r)?;
        Ok((g, r.moved))
    }

    /// Builds the option networks, and fills in each option's workload key: that of
    /// the fused group holding the convolution in the network built with the option.
    fn build_options(&mut self) -> Result<(), GraphError> {
        for k in 0..self.option_count() {
            let (g, moved) = self.prepare(|c| c.nth_option(k))?;
            self.fill_workload_keys(k, &g, &moved)?;
            self.options.push(g);
        }
        Ok(())
    }

    /// Option `k`'s workload keys, from its network `g` (`moved`: where the choices'
    /// convolution nodes went).
    fn fill_workload_keys(
        &mut self,
        k: usize,
        g: &Graph,
        moved: &HashMap<NodeIndex, NodeIndex>,
    ) -> Result<(), GraphError> {
        if self.choices.is_empty() {
            return Ok(());
        }
        let mut key_of: HashMap<NodeIndex, String> = HashMap::new();
        for group in fuse(g) {
            let wanted: Vec<NodeIndex> = self
                .choices
                .iter()
                .map(|c| moved.get(&c.node).copied().unwrap_or(c.node))
                .filter(|m| group.nodes.contains(m))
                .collect();
            if wanted.is_empty() {
                continue;
            }
            let key = group_compute(g, &group)?.dag()?.workload_key();
            for m in wanted {
                key_of.insert(m, key.clone());
            }
        }
        for c in &mut self.choices {
            let Some(o) = c.options.get_mut(k) else {
                continue;
            };
            let m = moved.get(&c.node).copied().unwrap_or(c.node);
            o.workload_key = key_of.get(&m).cloned().ok_or_else(|| {
                GraphError::Invalid(format!("convolution `{}` is in no fused group", c.name))
            })?;
        }
        Ok(())
    }
}
