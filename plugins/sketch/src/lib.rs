//! The sketch auto-scheduler plugin. Registered through the plugin interface so that the
//! search issue only fills in `search`; until then it says so when asked to search.

use tessera_plugin::{export_plugin, Plugin};

struct Sketch;

impl Plugin for Sketch {
    fn name(&self) -> String {
        "sketch".into()
    }
    fn version(&self) -> String {
        env!("CARGO_PKG_VERSION").into()
    }
    fn strategies(&self) -> Vec<String> {
        vec!["sketch".into()]
    }
    fn search(
        &self,
        strategy: &str,
        _task: &str,
        _budget: u32,
        _measure: &mut dyn FnMut(&str) -> Result<String, String>,
    ) -> Result<String, String> {
        Err(format!("search strategy `{strategy}` is not implemented yet (it comes with the auto-scheduler issue)"))
    }
}

export_plugin!(Sketch);
