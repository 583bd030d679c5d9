//! Test fixture: a plugin built for an older schema — the root module of schema version
//! 1001 (plugins before devices behind handles: `run`/`time` over host bytes), whose
//! layout is not this tessera's. The loader must refuse it by name, version and both
//! schema versions, not as an opaque layout mismatch.

use abi_stable::std_types::{RResult, RSlice, RStr, RString, RVec};
use abi_stable::{
    declare_root_module_statics, library::RootModule, package_version_strings,
    prefix_type::PrefixTypeTrait, sabi_types::VersionStrings, StableAbi,
};

/// Schema 1's measure callback.
#[repr(C)]
#[derive(StableAbi, Clone, Copy)]
pub struct OldMeasure {
    pub ctx: usize,
    pub call: extern "C" fn(ctx: usize, candidates: RString) -> RResult<RString, RString>,
}

/// Schema 1's root module, field for field.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = OldRootRef)))]
#[sabi(missing_field(panic))]
pub struct OldRoot {
    pub schema_version: extern "C" fn() -> u32,
    pub name: extern "C" fn() -> RString,
    pub version: extern "C" fn() -> RString,
    pub backends: extern "C" fn() -> RVec<RString>,
    pub strategies: extern "C" fn() -> RVec<RString>,
    pub hardware_params: extern "C" fn(target: RStr<'_>) -> RResult<RString, RString>,
    pub codegen: extern "C" fn(target: RStr<'_>, func: RStr<'_>) -> RResult<RString, RString>,
    pub build: extern "C" fn(target: RStr<'_>, func: RStr<'_>) -> RResult<RVec<u8>, RString>,
    pub run: extern "C" fn(
        target: RStr<'_>,
        artifact: RSlice<'_, u8>,
        func: RStr<'_>,
        args: RVec<RVec<u8>>,
    ) -> RResult<RVec<RVec<u8>>, RString>,
    pub time: extern "C" fn(
        target: RStr<'_>,
        artifact: RSlice<'_, u8>,
        func: RStr<'_>,
        args: RVec<RVec<u8>>,
        config: RStr<'_>,
    ) -> RResult<RVec<f64>, RString>,
    #[sabi(last_prefix_field)]
    pub search: extern "C" fn(
        strategy: RStr<'_>,
        task: RStr<'_>,
        budget: u32,
        measure: OldMeasure,
    ) -> RResult<RString, RString>,
}

impl RootModule for OldRootRef {
    declare_root_module_statics! {OldRootRef}
    const BASE_NAME: &'static str = "tessera_plugin";
    const NAME: &'static str = "tessera_plugin";
    const VERSION_STRINGS: VersionStrings = package_version_strings!();
}

extern "C" fn schema_version() -> u32 {
    1001
}
extern "C" fn name() -> RString {
    "badschema".into()
}
extern "C" fn version() -> RString {
    "0.0.1".into()
}
extern "C" fn none() -> RVec<RString> {
    RVec::new()
}
fn refuse<T>() -> RResult<T, RString> {
    RResult::RErr("an old plugin".into())
}
extern "C" fn hardware_params(_: RStr<'_>) -> RResult<RString, RString> {
    refuse()
}
extern "C" fn codegen(_: RStr<'_>, _: RStr<'_>) -> RResult<RString, RString> {
    refuse()
}
extern "C" fn build(_: RStr<'_>, _: RStr<'_>) -> RResult<RVec<u8>, RString> {
    refuse()
}
extern "C" fn run(
    _: RStr<'_>,
    _: RSlice<'_, u8>,
    _: RStr<'_>,
    _: RVec<RVec<u8>>,
) -> RResult<RVec<RVec<u8>>, RString> {
    refuse()
}
extern "C" fn time(
    _: RStr<'_>,
    _: RSlice<'_, u8>,
    _: RStr<'_>,
    _: RVec<RVec<u8>>,
    _: RStr<'_>,
) -> RResult<RVec<f64>, RString> {
    refuse()
}
extern "C" fn search(_: RStr<'_>, _: RStr<'_>, _: u32, _: OldMeasure) -> RResult<RString, RString> {
    refuse()
}

#[abi_stable::export_root_module]
fn root() -> OldRootRef {
    OldRoot {
        schema_version,
        name,
        version,
        backends: none,
        strategies: none,
        hardware_params,
        codegen,
        build,
        run,
        time,
        search,
    }
    .leak_into_prefix()
}
