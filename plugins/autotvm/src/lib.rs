//! The AutoTVM template tuner: configuration spaces, CPU templates, tuners and the tuning
//! loop (used by `tessera tune --templates` as a library), registered through the plugin
//! interface as well. Its plugin `search` entry is not wired to the tuners yet: it says
//! so when asked.

pub mod network;
pub mod space;
pub mod strategy;
pub mod templates;
pub mod tune;
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
