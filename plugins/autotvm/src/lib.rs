//! The AutoTVM template tuner: configuration spaces, CPU templates and tuners, offered
//! to the core as search strategies (`strategy`: one per tuner name, each a
//! `SearchPolicy` per task that the core's tuning session drives round by round) through
//! the plugin interface, and apply-history-best for networks (`network`).

pub mod network;
pub mod space;
pub mod strategy;
pub mod templates;
pub mod tuners;
pub mod xgb;

use tessera_plugin::{export_plugin, Plugin};
use tessera_search::policy::{
    PolicyError, PolicyOptions, SearchPolicy, SearchTask, StrategyFactory,
};

struct AutoTvm;

impl Plugin for AutoTvm {
    fn name(&self) -> String {
        "autotvm".into()
    }
    fn version(&self) -> String {
        env!("CARGO_PKG_VERSION").into()
    }
    fn strategies(&self) -> Vec<String> {
        strategy::tuner_names()
    }
    fn create_policy(
        &self,
        strategy: &str,
        task: &SearchTask,
        options: &PolicyOptions,
    ) -> Result<Box<dyn SearchPolicy>, PolicyError> {
        strategy::TemplateStrategy::new(strategy)?.create(task, options)
    }
}

export_plugin!(AutoTvm);
