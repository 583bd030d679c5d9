//! `tessera-plugin`: the plugin interface of Tessera.
//!
//! A plugin is a `cdylib` that implements [`Plugin`] and calls [`export_plugin!`]. What
//! crosses the boundary is the stable-ABI root module [`PluginRoot`]: plain function
//! pointers over `abi_stable`'s `RString`/`RVec`/`RResult`, carrying serialized core
//! values (JSON of an [`Envelope`] with [`PLUGIN_SCHEMA_VERSION`]). Every use of
//! `abi_stable` is in this crate; a plugin's logic only sees [`Plugin`].
//!
//! The [`loader`] checks a file before trusting it (a shared object; exports a root
//! module; schema version matches; layouts match) and never unloads what it loaded.
//! Every entry point catches panics, so a panicking plugin becomes an error here.
//!
//! A backend plugin's device implements the runtime's `Device` on its side; the core
//! sees it as a [`PluginDevice`] (the same trait over the boundary's handles) and its
//! compiler as a [`PluginBackend`] (the backends' `Backend`). [`Registry::backend_for`]
//! and [`Registry::device_for`] give either for any target, the CPU's built-ins included.
//!
//! A strategy plugin creates a `tessera_policy::SearchPolicy` per task on its
//! side; the core sees it as a [`PluginPolicy`] behind a handle, driven round by round
//! (propose with a scoring callback into the core's cost model, observe, lower), each
//! call one sealed [`policy_call::PolicyCall`], and finds it by name with
//! [`Registry::strategy`].
//!
//! # Writing a plugin
//!
//! A hardware vendor adds a device without touching the core crates
//! (`tests/plugins/testdev` is a complete example, a device emulated on the host with a
//! `tessera_runtime::HostArena` of its own; `tests/plugins/tilewalk` a small strategy):
//!
//! 1. A crate with `crate-type = ["cdylib", "rlib"]`, a feature `static = []`, and the
//!    dependencies `tessera-plugin`, `tessera-ir` (the IR it receives), `tessera-target`
//!    (targets, hardware parameters, artifacts), `tessera-runtime` (the `Device` trait)
//!    and `abi_stable` (only because the export attribute names it).
//! 2. Implement [`Plugin`]; each method gets the parsed `Target` (its options are the
//!    plugin's to check) and fails with a [`CallError`]. A backend: `name`, `version`,
//!    `backends` (its target kinds, e.g. `mydev`, then targets like `cpu`),
//!    `hardware_params`, `codegen` (a `PrimFunc` to source), `build` (a [`BuiltKernel`]:
//!    the file's bytes, a GPU kernel's `LaunchDims`, the source) and `open_device`, its
//!    `tessera_runtime::Device` (alloc/free, the three copies, `load_module`,
//!    `get_function`, `launch`, `synchronize`, and `time` if it has its own timer). The
//!    device owns its memory and modules; the core holds only its handles and data
//!    crosses only in the copies. Keeping them in `tessera_runtime::Handles` and making
//!    errors with a `tessera_runtime::DeviceName` (as `testdev` does) makes an unknown
//!    handle, a foreign artifact or a bad launch read as on every device. A GPU backend
//!    writes no code generator: it implements `tessera_backends::cfamily::Dialect` and
//!    `KernelLanguage` (the hooks where its language differs from C) and calls
//!    `cfamily::device_source` (see `plugins/opencl`). A strategy implements
//!    `strategies` and `create_policy` instead (with `tessera-policy`), returning its
//!    `tessera_policy::SearchPolicy` for a task.
//! 3. End `lib.rs` with `tessera_plugin::export_plugin!(MyPlugin::new());`.
//! 4. `cargo build --release`; put the `.so` in `plugins/` beside the `tessera` binary or
//!    in a directory of `TESSERA_PLUGIN_PATH` ([`loader::plugin_dirs`]).
//! 5. `tessera plugins check lib….so` says whether it would load and why not; then every
//!    flow takes `--target mydev` (`op`, `run`, `tasks`, `tune`), each tuning candidate
//!    measured on the device in a runner process, so a kernel that hangs or crashes the
//!    device costs that candidate only.
//!
//! To link a plugin into the binary instead, make it an optional dependency of
//! `tessera-cli` with `features = ["static"]` and push its `tessera_plugin_root()` in
//! `crates/cli/src/plugins.rs`. With `static` the crate exports nothing (several plugins
//! share a binary), and since cargo unifies features within a build, a `.so` built
//! alongside such a binary is not a loadable plugin.

pub mod error;
pub mod loader;

pub use abi_stable;
use abi_stable::std_types::{RResult, RSlice, RSliceMut, RStr, RString, RVec};
use abi_stable::{
    declare_root_module_statics, library::RootModule, package_version_strings,
    sabi_types::VersionStrings, StableAbi,
};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use tessera_ir::PrimFunc;
use tessera_policy::{PolicyError, PolicyOptions, SearchPolicy, SearchTask};
use tessera_runtime::Device;
use tessera_target::{HardwareParams, LaunchDims, Target};

pub mod backend;
pub mod device;
mod export_device;
mod export_strategy;
pub mod policy_call;
pub mod strategy;

pub use backend::PluginBackend;
pub use device::{PluginChannel, PluginDevice};
pub use error::CallError;
pub use loader::{discover, load_file, plugin_dirs, LoadedPlugin, Origin, PluginError, Registry};
pub use strategy::{PluginPolicy, PluginStrategy};

/// The version of everything that crosses the boundary: the root module's functions and
/// the serialized core values. A plugin built against another version is refused.
///
/// History: 1000 + IR: run/time over host bytes; 2000 + IR: devices behind handles;
/// 3000 + IR: search policies behind handles, proposing round by round; 4000 + IR: a
/// device's counters; 5000 + IR: the `Plugin` methods' errors as sealed [`CallError`]s;
/// 6000 + IR: the device's methods as one `device_call` of a sealed runtime `DeviceCall`;
/// 7000 + IR: launch sequences and per-step timing among the `DeviceCall`s (the later
/// `Describe` and `RunsOnHostCores` have answers for a plugin that cannot give them);
/// 8000 + IR: a search policy's methods as one `policy_call` of a sealed `PolicyCall`.
pub const PLUGIN_SCHEMA_VERSION: u32 = 8000 + tessera_ir::SCHEMA_VERSION;

/// A serialized core value with the schema version it was written with.
#[derive(Serialize, Deserialize)]
pub struct Envelope<T> {
    pub schema: u32,
    pub value: T,
}

/// Serializes `value` for the boundary.
pub fn seal<T: Serialize>(value: &T) -> String {
    serde_json::to_string(&Envelope {
        schema: PLUGIN_SCHEMA_VERSION,
        value,
    })
    .unwrap_or_default()
}

/// Why a sealed value does not read back.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    /// Not the JSON of an envelope of the expected value.
    #[error("malformed value: {0}")]
    Malformed(String),
    /// Written by another schema version.
    #[error("value written with schema {found}, expected {expected}")]
    Schema { found: u32, expected: u32 },
}

/// Reads a value sealed on the other side of the boundary.
pub fn unseal<T: for<'de> Deserialize<'de>>(text: &str) -> Result<T, SealError> {
    let e: Envelope<T> =
        serde_json::from_str(text).map_err(|e| SealError::Malformed(e.to_string()))?;
    if e.schema != PLUGIN_SCHEMA_VERSION {
        return Err(SealError::Schema {
            found: e.schema,
            expected: PLUGIN_SCHEMA_VERSION,
        });
    }
    Ok(e.value)
}

/// What a plugin's build returns across the boundary.
#[repr(C)]
#[derive(StableAbi)]
pub struct BuildOutput {
    /// The bytes of the file the plugin's device loads.
    pub bytes: RVec<u8>,
    /// Sealed `LaunchDims` of a GPU kernel, or empty.
    pub launch: RString,
    /// The generated source (for reports), or empty.
    pub source: RString,
}

/// A kernel a plugin built: the bytes of the file its device loads, how a GPU kernel is
/// launched (the thread extents of the host/device split), and the generated source.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BuiltKernel {
    pub bytes: Vec<u8>,
    pub launch: Option<LaunchDims>,
    pub source: String,
}

/// The core's scorer as a plugin's policy calls it: `call(ctx, programs)` takes sealed
/// `Vec<PrimFunc>` and gives sealed `Vec<Option<f32>>` (`None`: cannot be scored).
#[repr(C)]
#[derive(StableAbi, Clone, Copy)]
pub struct ScorerCallback {
    pub ctx: usize,
    pub call: extern "C" fn(ctx: usize, programs: RString) -> RResult<RString, RString>,
}

/// The root module every plugin exports.
///
/// Its first three fields (`schema_version`, `name`, `version`) keep their place and type
/// in every schema version, so that the loader can read them from a plugin of any
/// version and refuse an old one by name, before checking the rest of the layout.
///
/// A device is reached through opaque handles: `device_open` gives a device handle, and
/// buffers, modules and functions are handles the plugin gives out and owns. Arguments
/// of a launch are buffer handles: no data crosses the boundary except in the explicit
/// copies.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = PluginRootRef)))]
#[sabi(missing_field(panic))]
pub struct PluginRoot {
    pub schema_version: extern "C" fn() -> u32,
    pub name: extern "C" fn() -> RString,
    pub version: extern "C" fn() -> RString,
    /// The target kinds it provides backends for.
    pub backends: extern "C" fn() -> RVec<RString>,
    /// The search strategies / tuners it provides, by name.
    pub strategies: extern "C" fn() -> RVec<RString>,
    /// `HardwareParams` (sealed JSON) of a target string.
    pub hardware_params: extern "C" fn(target: RStr<'_>) -> RResult<RString, RString>,
    /// Source code of a sealed `PrimFunc`.
    pub codegen: extern "C" fn(target: RStr<'_>, func: RStr<'_>) -> RResult<RString, RString>,
    /// The loadable artifact of a sealed `PrimFunc`: the bytes of the file a device of
    /// the kind loads, its launch dimensions and its source.
    pub build: extern "C" fn(target: RStr<'_>, func: RStr<'_>) -> RResult<BuildOutput, RString>,
    /// Opens the device of a target string: a device handle.
    pub device_open: extern "C" fn(target: RStr<'_>) -> RResult<u64, RString>,
    /// Closes a device handle (the core's last reference to it is gone); the plugin's
    /// device is dropped once nothing of the plugin's own holds it.
    pub device_close: extern "C" fn(device: u64) -> RResult<(), RString>,
    /// One call of the `Device` interface on a device handle: a sealed runtime
    /// `DeviceCall` (`tessera_runtime::device_call`, the description RPC shares), its
    /// input (a copy's bytes) and its output (a copy to the host's destination, sized by
    /// the caller); a sealed `DeviceAnswer`. Buffers, modules and functions are handles
    /// the plugin gives out; an artifact's file is read at its path.
    pub device_call: extern "C" fn(
        device: u64,
        call: RStr<'_>,
        input: RSlice<'_, u8>,
        output: RSliceMut<'_, u8>,
    ) -> RResult<RString, RString>,
    /// One call of a search policy: a sealed [`policy_call::PolicyCall`] on policy
    /// handle `policy` (none for `Create`, which answers with the new handle), with the
    /// core's scorer for `Propose`; a sealed [`policy_call::PolicyAnswer`]. A refused
    /// `Create` crosses as the sealed `PolicyError`.
    #[sabi(last_prefix_field)]
    pub policy_call: extern "C" fn(
        policy: u64,
        call: RStr<'_>,
        scorer: ScorerCallback,
    ) -> RResult<RString, RString>,
}

impl RootModule for PluginRootRef {
    declare_root_module_statics! {PluginRootRef}
    const BASE_NAME: &'static str = "tessera_plugin";
    const NAME: &'static str = "tessera_plugin";
    const VERSION_STRINGS: VersionStrings = package_version_strings!();
}

/// What a plugin implements. Every method has a default that says it is not provided.
pub trait Plugin: Send + Sync + 'static {
    fn name(&self) -> String;
    fn version(&self) -> String;
    /// Target kinds this plugin compiles for (e.g. `cuda`, or a kind of its own).
    fn backends(&self) -> Vec<String> {
        Vec::new()
    }
    /// Search strategies / tuners, by name.
    fn strategies(&self) -> Vec<String> {
        Vec::new()
    }
    /// The hardware parameters of `target` (a target of one of [`Plugin::backends`],
    /// parsed by the core; its options are the plugin's to check).
    fn hardware_params(&self, target: &Target) -> Result<HardwareParams, CallError> {
        Err(CallError::not_provided(&self.name(), "backend", target))
    }
    fn codegen(&self, target: &Target, func: &PrimFunc) -> Result<String, CallError> {
        let _ = func;
        Err(CallError::not_provided(&self.name(), "backend", target))
    }
    fn build(&self, target: &Target, func: &PrimFunc) -> Result<BuiltKernel, CallError> {
        let _ = func;
        Err(CallError::not_provided(&self.name(), "backend", target))
    }
    /// Opens the device of `target`: the plugin implements the runtime's `Device` (it
    /// owns the device's memory and modules); the core reaches it through handles.
    fn open_device(&self, target: &Target) -> Result<Arc<dyn Device>, CallError> {
        Err(CallError::not_provided(&self.name(), "device", target))
    }
    /// Creates a policy of search strategy `strategy` (one of [`Plugin::strategies`])
    /// for `task`.
    fn create_policy(
        &self,
        strategy: &str,
        task: &SearchTask,
        options: &PolicyOptions,
    ) -> Result<Box<dyn SearchPolicy>, PolicyError> {
        let _ = (task, options);
        Err(PolicyError::UnknownStrategy {
            name: strategy.to_string(),
            known: self.strategies().join(", "),
        })
    }
}

thread_local! {
    /// Whether this thread is inside a plugin entry point (its panics become errors).
    static IN_ENTRY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Installs (once) a panic hook that stays silent for panics inside entry points (they
/// are reported as errors) and defers to the previous hook for every other panic.
fn install_quiet_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !IN_ENTRY.with(|e| e.get()) {
                previous(info)
            }
        }));
    });
}

/// A panic caught inside an entry point: its message (`unknown panic` for a payload
/// that is not text).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Panic(String);

/// Runs `f` as an entry point: a panic inside becomes an error naming the entry point.
fn catch<T>(f: impl FnOnce() -> T) -> Result<T, Panic> {
    install_quiet_hook();
    let was = IN_ENTRY.with(|e| e.replace(true));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    IN_ENTRY.with(|e| e.set(was));
    r.map_err(|p| {
        Panic(
            p.downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into()),
        )
    })
}

/// Why an entry point that [`guard`] runs failed. It crosses the boundary as text
/// ([`EntryError::into_boundary`]).
#[derive(Debug, thiserror::Error)]
pub(crate) enum EntryError {
    /// A value from the core that does not unseal.
    #[error(transparent)]
    Seal(#[from] SealError),
    /// A device handle this library does not hold.
    #[error("no device with handle {0}")]
    NoDevice(u64),
    /// A policy handle this library does not hold (dropped, or taken by a call now
    /// running).
    #[error("no search policy with handle {0} (dropped, or in use)")]
    NoPolicy(u64),
    /// A count this platform's `usize` cannot hold.
    #[error(transparent)]
    Count(#[from] std::num::TryFromIntError),
    /// What a policy's method returned.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// The plugin's refusal to create a policy: it crosses the boundary sealed, for the
    /// core to read the typed `PolicyError` back.
    #[error(transparent)]
    Create(PolicyError),
}

impl EntryError {
    /// The text that crosses the boundary: the message, or the sealed refusal of
    /// [`EntryError::Create`].
    fn into_boundary(self) -> RString {
        match self {
            EntryError::Create(e) => seal(&e).into(),
            other => other.to_string().into(),
        }
    }
}

/// Runs `f`, turning a panic into an error that names the plugin entry point.
pub(crate) fn guard<T>(
    what: &str,
    f: impl FnOnce() -> Result<T, EntryError>,
) -> RResult<T, RString> {
    match catch(f) {
        Ok(Ok(v)) => RResult::ROk(v),
        Ok(Err(e)) => RResult::RErr(e.into_boundary()),
        Err(panic) => RResult::RErr(format!("panicked in {what}: {panic}").into()),
    }
}

/// Runs a [`Plugin`] method as entry point `what`: its [`CallError`] (or the panic, as
/// [`CallError::Panicked`]) crosses the boundary sealed, for the core to read back typed.
pub(crate) fn guard_call<T>(
    what: &str,
    f: impl FnOnce() -> Result<T, CallError>,
) -> RResult<T, RString> {
    let e = match catch(f) {
        Ok(Ok(v)) => return RResult::ROk(v),
        Ok(Err(e)) => e,
        Err(Panic(message)) => CallError::Panicked {
            entry: what.to_string(),
            message,
        },
    };
    RResult::RErr(seal(&e).into())
}

/// The target string `s` the core passed, parsed (any kind: the plugin's own are not
/// documented by the core).
fn parse_target(s: RStr<'_>) -> Result<Target, CallError> {
    Target::parse_any(s.as_str()).map_err(|e| CallError::BadTarget {
        target: s.as_str().to_string(),
        reason: e.to_string(),
    })
}

/// Calls `f`, falling back to `default` if it panics (for the infallible entries).
pub(crate) fn guard_infallible<T>(f: impl FnOnce() -> T, default: T) -> T {
    catch(f).unwrap_or(default)
}

/// Support for [`export_plugin!`]: the root module of a `Plugin` instance, with entry
/// points generic over the instance so that several plugins can live in one binary.
pub mod export {
    use super::*;

    /// Gives access to one plugin's instance (implemented by [`export_plugin!`]).
    pub trait Instance: 'static {
        fn get() -> &'static dyn Plugin;
    }

    extern "C" fn schema_version() -> u32 {
        PLUGIN_SCHEMA_VERSION
    }
    extern "C" fn name<I: Instance>() -> RString {
        guard_infallible(|| I::get().name(), "<panicked>".into()).into()
    }
    extern "C" fn version<I: Instance>() -> RString {
        guard_infallible(|| I::get().version(), "<panicked>".into()).into()
    }
    extern "C" fn backends<I: Instance>() -> RVec<RString> {
        guard_infallible(|| I::get().backends(), Vec::new())
            .into_iter()
            .map(RString::from)
            .collect()
    }
    extern "C" fn strategies<I: Instance>() -> RVec<RString> {
        guard_infallible(|| I::get().strategies(), Vec::new())
            .into_iter()
            .map(RString::from)
            .collect()
    }
    extern "C" fn hardware_params<I: Instance>(target: RStr<'_>) -> RResult<RString, RString> {
        guard_call("hardware_params", || {
            I::get()
                .hardware_params(&parse_target(target)?)
                .map(|h| RString::from(seal(&h)))
        })
    }
    extern "C" fn codegen<I: Instance>(
        target: RStr<'_>,
        func: RStr<'_>,
    ) -> RResult<RString, RString> {
        guard_call("codegen", || {
            let f: PrimFunc = unseal(func.as_str()).map_err(|e| CallError::failed("codegen", e))?;
            I::get()
                .codegen(&parse_target(target)?, &f)
                .map(RString::from)
        })
    }
    extern "C" fn build<I: Instance>(
        target: RStr<'_>,
        func: RStr<'_>,
    ) -> RResult<BuildOutput, RString> {
        guard_call("build", || {
            let f: PrimFunc = unseal(func.as_str()).map_err(|e| CallError::failed("build", e))?;
            I::get()
                .build(&parse_target(target)?, &f)
                .map(|k| BuildOutput {
                    bytes: RVec::from(k.bytes),
                    launch: k.launch.as_ref().map(seal).unwrap_or_default().into(),
                    source: k.source.into(),
                })
        })
    }
    extern "C" fn device_open<I: Instance>(target: RStr<'_>) -> RResult<u64, RString> {
        guard_call("device_open", || {
            I::get()
                .open_device(&parse_target(target)?)
                .map(crate::export_device::register)
        })
    }

    extern "C" fn policy_call<I: Instance>(
        policy: u64,
        call: RStr<'_>,
        scorer: ScorerCallback,
    ) -> RResult<RString, RString> {
        crate::export_strategy::answer(I::get(), policy, call, scorer)
    }

    /// The root module of the plugin behind `I`.
    pub fn root_module<I: Instance>() -> PluginRootRef {
        use abi_stable::prefix_type::PrefixTypeTrait;
        PluginRoot {
            schema_version,
            name: name::<I>,
            version: version::<I>,
            backends: backends::<I>,
            strategies: strategies::<I>,
            hardware_params: hardware_params::<I>,
            codegen: codegen::<I>,
            build: build::<I>,
            device_open: device_open::<I>,
            device_close: crate::export_device::close,
            device_call: crate::export_device::call,
            policy_call: policy_call::<I>,
        }
        .leak_into_prefix()
    }
}

/// Exports a plugin: `export_plugin!(MyPlugin::new());` at the root of a `cdylib` crate
/// (which also lists `abi_stable = "0.11"` among its dependencies: the export attribute
/// refers to it by name). With the crate's feature `static` on (as the `tessera` binary
/// enables it when linking the plugin in), only `tessera_plugin_root()` is defined and
/// nothing is exported, so several plugins link into one binary.
#[macro_export]
macro_rules! export_plugin {
    ($ctor:expr) => {
        #[doc(hidden)]
        pub struct TesseraPluginInstance;

        impl $crate::export::Instance for TesseraPluginInstance {
            fn get() -> &'static dyn $crate::Plugin {
                static I: ::std::sync::OnceLock<::std::boxed::Box<dyn $crate::Plugin>> =
                    ::std::sync::OnceLock::new();
                I.get_or_init(|| ::std::boxed::Box::new($ctor)).as_ref()
            }
        }

        /// This crate's plugin root module (for static linking into `tessera`).
        pub fn tessera_plugin_root() -> $crate::PluginRootRef {
            static R: ::std::sync::OnceLock<$crate::PluginRootRef> = ::std::sync::OnceLock::new();
            *R.get_or_init($crate::export::root_module::<TesseraPluginInstance>)
        }

        #[cfg(not(feature = "static"))]
        #[::abi_stable::export_root_module]
        fn tessera_export_root_module() -> $crate::PluginRootRef {
            tessera_plugin_root()
        }
    };
}
