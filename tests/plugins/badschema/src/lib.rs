//! Test fixture: a root module whose schema version is not this tessera's.

use abi_stable::prefix_type::PrefixTypeTrait;
use tessera_plugin::{PluginRoot, PluginRootRef};

extern "C" fn schema_version() -> u32 {
    tessera_plugin::PLUGIN_SCHEMA_VERSION + 1
}

/// The fixture's root module: a well-formed one (built from a normal plugin) with the
/// schema version replaced.
#[abi_stable::export_root_module]
fn root() -> PluginRootRef {
    let good = tessera_plugin::export::root_module::<Fixture>();
    PluginRoot {
        schema_version,
        name: good.name(),
        version: good.version(),
        backends: good.backends(),
        strategies: good.strategies(),
        hardware_params: good.hardware_params(),
        codegen: good.codegen(),
        build: good.build(),
        run: good.run(),
        time: good.time(),
        search: good.search(),
    }
    .leak_into_prefix()
}

struct Fixture;
impl tessera_plugin::Plugin for Fixture {
    fn name(&self) -> String {
        "badschema".into()
    }
    fn version(&self) -> String {
        "0.0.1".into()
    }
}
impl tessera_plugin::export::Instance for Fixture {
    fn get() -> &'static dyn tessera_plugin::Plugin {
        &Fixture
    }
}
