//! A network's tuning tasks as `tessera tasks` lists them: the auto-scheduler's tasks
//! (one compute DAG per distinct fused group of every convolution algorithm option,
//! with weights) or the template tasks with their configuration spaces — data for any
//! face, and TVM's text for the terminal.

use crate::{DriverError, NetworkSpec, TemplateTaskInfo, Toolchain};
use std::fmt;
use tessera_graph::{print_tasks, Task};

/// What `tessera tasks` lists.
pub enum TaskListing {
    /// The auto-scheduler's tasks of the plan.
    Groups {
        network: String,
        target: String,
        tasks: Vec<Task>,
        weights: Vec<usize>,
        /// Fused groups of the network as the rule builds it that run a kernel.
        groups: usize,
        /// Convolutions computed directly or with Winograd, each option a task.
        choices: usize,
    },
    /// The template tasks and their spaces.
    Templates {
        network: String,
        target: String,
        tasks: Vec<TemplateTaskInfo>,
    },
}

impl Toolchain {
    /// The tasks of `spec`: the auto-scheduler's, or with `templates` the template
    /// tasks (`tessera tune --templates` tunes those).
    pub fn task_listing(
        &self,
        spec: &NetworkSpec,
        templates: bool,
    ) -> Result<TaskListing, DriverError> {
        let target = spec.target.to_string();
        if let Some(rs) = &spec.runtime_size {
            if templates {
                return Err(DriverError::Request(format!(
                    "{rs}: the template tasks of a network with runtime sizes are not listed: \
                     the auto-scheduler's are (without --templates)"
                )));
            }
            // the kernels of the module for the ranges: those whose loops run to the
            // sizes read the sizes' vector (`sizes`)
            let net = self.prepare_range(spec, rs, None)?;
            let params = tessera_graph::executor::BuildContext {
                target: spec.target.clone(),
                hardware: self.hardware(&spec.target)?,
            }
            .cpu_params();
            let tasks = tessera_graph::tasks::range_tasks(&net, &spec.target, params)?;
            return Ok(TaskListing::Groups {
                network: net.graph.name.clone(),
                groups: tasks.iter().map(|t| t.weight).sum(),
                choices: 0,
                target,
                weights: tasks.iter().map(|t| t.weight).collect(),
                tasks: tasks.into_iter().map(|t| t.task).collect(),
            });
        }
        if templates {
            let plan = self.plan_for_templates(spec)?;
            return Ok(TaskListing::Templates {
                network: plan.base().name.clone(),
                tasks: self.template_tasks(plan.base(), &spec.target)?,
                target,
            });
        }
        let plan = self.plan(spec)?;
        let (tasks, weights) = plan.tasks(&spec.target)?;
        Ok(TaskListing::Groups {
            network: plan.base().name.clone(),
            groups: tessera_graph::kernel_groups(plan.rule_graph(), &spec.target).len(),
            choices: plan.choices().len(),
            target,
            tasks,
            weights,
        })
    }
}

impl TaskListing {
    /// The table alone: index, weight, FLOPs, workload key, name (the auto-scheduler's
    /// tasks; the templates list in full).
    pub fn summary(&self) -> String {
        let TaskListing::Groups { tasks, weights, .. } = self else {
            return self.to_string();
        };
        let mut s = format!(
            "{:>4}  {:>6}  {:>14}  {:<34}  name\n",
            "ID", "weight", "FLOPs", "workload key"
        );
        for (i, (t, w)) in tasks.iter().zip(weights).enumerate() {
            let option = t.choice.as_ref().map(|c| format!("  (one option of {c})"));
            s.push_str(&format!(
                "{i:>4}  {w:>6}  {:>14.0}  {:<34}  {}{}\n",
                t.flop_count(),
                t.workload_key,
                t.name,
                option.unwrap_or_default()
            ));
        }
        s + &self.footer()
    }

    fn footer(&self) -> String {
        match self {
            TaskListing::Templates {
                network,
                target,
                tasks,
            } => format!(
                "{} template tasks of network `{network}` for target `{target}`\n",
                tasks.len()
            ),
            TaskListing::Groups {
                network,
                target,
                tasks,
                groups,
                choices,
                ..
            } => {
                let mut s = format!(
                    "{} tasks from {groups} fused groups of network `{network}` for target `{target}`\n",
                    tasks.len()
                );
                if *choices > 0 {
                    s.push_str(&format!(
                        "{} of them are options of {choices} convolutions that can be computed \
                         directly or with Winograd: tuning tunes each option, a build with the log \
                         takes the faster\n",
                        tasks.iter().filter(|t| t.choice.is_some()).count()
                    ));
                }
                s
            }
        }
    }
}

impl fmt::Display for TaskListing {
    /// Every task with its compute DAG, as TVM prints them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TaskListing::Templates { tasks, .. } => {
                for (i, t) in tasks.iter().enumerate() {
                    writeln!(
                        f,
                        "========== Template task {i}  (workload key: {}) ==========",
                        t.workload_key
                    )?;
                    writeln!(
                        f,
                        "# {}  weight: {}  FLOPs: {:.0}",
                        t.template, t.weight, t.flop
                    )?;
                    writeln!(f, "{}", t.space)?;
                }
            }
            TaskListing::Groups { tasks, weights, .. } => {
                write!(f, "{}", print_tasks(tasks, weights))?
            }
        }
        write!(f, "{}", self.footer())
    }
}
