//! Finding, checking and loading plugins. A loaded plugin is never unloaded.

use crate::{seal, unseal, BuiltKernel, PluginRootRef, PLUGIN_SCHEMA_VERSION};
use abi_stable::library::{lib_header_from_raw_library, RawLibrary, RootModule};
use abi_stable::std_types::{RStr, RString};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tessera_backends::{Backend, CpuBackend};
use tessera_ir::PrimFunc;
use tessera_runtime::{CpuDevice, Device};
use tessera_target::{HardwareParams, Target, TargetError};

/// Why a file is not used as a plugin.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PluginError {
    #[error("{}: cannot read it: {reason}", path.display())]
    Unreadable { path: PathBuf, reason: String },
    #[error("{}: not a shared library (no ELF header)", path.display())]
    NotSharedLibrary { path: PathBuf },
    #[error("{}: truncated or corrupt shared library: {reason}", path.display())]
    Corrupt {
        path: PathBuf,
        #[source]
        reason: ElfError,
    },
    #[error("{}: the dynamic loader refused it: {reason}", path.display())]
    LoadFailed { path: PathBuf, reason: String },
    #[error("{}: a shared library, but not a Tessera plugin (no plugin root module): {reason}", path.display())]
    NotAPlugin { path: PathBuf, reason: String },
    #[error("{}: plugin interface layout mismatch (built against another tessera-plugin): {reason}", path.display())]
    Incompatible { path: PathBuf, reason: String },
    #[error("{}: plugin `{name}` {version} was built for schema version {found}, this tessera expects {expected}", path.display())]
    SchemaMismatch {
        path: PathBuf,
        name: String,
        version: String,
        found: u32,
        expected: u32,
    },
    #[error("plugin `{plugin}`: {message}")]
    Call { plugin: String, message: String },
    /// What a [`crate::Plugin`] method returned (read back from the boundary).
    #[error("plugin `{plugin}`: {source}")]
    Entry {
        plugin: String,
        source: crate::CallError,
    },
    #[error("no backend plugin for target kind `{kind}` is loaded (plugin kinds loaded: {loaded}); put its .so in `plugins/` beside the tessera binary or in a directory of TESSERA_PLUGIN_PATH")]
    NoBackend { kind: String, loaded: String },
    #[error("no search strategy `{name}` is loaded (strategies loaded: {loaded}); put the .so of the plugin that provides it in `plugins/` beside the tessera binary or in a directory of TESSERA_PLUGIN_PATH")]
    NoStrategy { name: String, loaded: String },
    #[error(transparent)]
    Backend(#[from] tessera_backends::BackendError),
}

/// How an ELF file falls short of what its headers promise ([`PluginError::Corrupt`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ElfError {
    #[error("not a little-endian 64-bit ELF file")]
    NotElf64LittleEndian,
    #[error("the ELF header is cut short")]
    HeaderCutShort,
    #[error("the section headers end at byte {end} but the file has {len}")]
    SectionHeadersPastEnd { end: u64, len: u64 },
    #[error("a program header lies beyond the address space")]
    ProgramHeaderOutOfRange,
    #[error("a program header is cut short")]
    ProgramHeaderCutShort,
    #[error("a loadable segment ends at byte {end} but the file has {len}")]
    SegmentPastEnd { end: u64, len: u64 },
}

/// Where a plugin came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Linked into the binary.
    BuiltIn,
    /// Loaded from a shared object.
    File(PathBuf),
}

/// A plugin whose root module passed every check.
#[derive(Clone)]
pub struct LoadedPlugin {
    pub(crate) root: PluginRootRef,
    pub name: String,
    pub version: String,
    pub origin: Origin,
    pub backends: Vec<String>,
    pub strategies: Vec<String>,
}

impl LoadedPlugin {
    /// What it provides: `backends: …; strategies: …`, or `nothing`.
    pub fn provides(&self) -> String {
        let mut parts = Vec::new();
        if !self.backends.is_empty() {
            parts.push(format!("backends: {}", self.backends.join(", ")));
        }
        if !self.strategies.is_empty() {
            parts.push(format!("strategies: {}", self.strategies.join(", ")));
        }
        if parts.is_empty() {
            "nothing".into()
        } else {
            parts.join("; ")
        }
    }
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::BuiltIn => f.write_str("built-in"),
            Origin::File(p) => write!(f, "{}", p.display()),
        }
    }
}

impl std::fmt::Debug for LoadedPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedPlugin")
            .field("name", &self.name)
            .field("version", &self.version)
            .field("origin", &self.origin)
            .field("backends", &self.backends)
            .field("strategies", &self.strategies)
            .finish()
    }
}

/// An error text on one line (the dynamic loader's and abi_stable's span several).
fn one_line(s: impl std::fmt::Display) -> String {
    s.to_string()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// Refuses a root module of another schema version, naming the plugin and both versions.
fn check_schema(root: PluginRootRef, origin: &Origin) -> Result<(), PluginError> {
    let found = (root.schema_version())();
    if found != PLUGIN_SCHEMA_VERSION {
        let name = (root.name())().into_string();
        let version = (root.version())().into_string();
        let path = match origin {
            Origin::File(p) => p.clone(),
            Origin::BuiltIn => PathBuf::from("<built-in>"),
        };
        return Err(PluginError::SchemaMismatch {
            path,
            name,
            version,
            found,
            expected: PLUGIN_SCHEMA_VERSION,
        });
    }
    Ok(())
}

fn check(root: PluginRootRef, origin: Origin) -> Result<LoadedPlugin, PluginError> {
    check_schema(root, &origin)?;
    let name = (root.name())().into_string();
    let version = (root.version())().into_string();
    let backends = (root.backends())()
        .into_iter()
        .map(|s| s.into_string())
        .collect();
    let strategies = (root.strategies())()
        .into_iter()
        .map(|s| s.into_string())
        .collect();
    Ok(LoadedPlugin {
        root,
        name,
        version,
        origin,
        backends,
        strategies,
    })
}

/// Checks that an ELF64 file holds every segment and section its headers promise. The
/// dynamic loader maps a truncated file without complaint and faults (SIGBUS) only when
/// the missing part is touched, so this is checked before loading.
fn check_elf(bytes: &[u8]) -> Result<(), ElfError> {
    let u16_at = |o: usize| {
        bytes
            .get(o..o.checked_add(2)?)
            .map(|b| u16::from_le_bytes([b[0], b[1]]) as u64)
    };
    let u32_at = |o: usize| {
        bytes
            .get(o..o.checked_add(4)?)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as u64)
    };
    let u64_at = |o: usize| {
        bytes
            .get(o..o.checked_add(8)?)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
    };
    if bytes.get(4) != Some(&2) || bytes.get(5) != Some(&1) {
        return Err(ElfError::NotElf64LittleEndian);
    }
    let len = bytes.len() as u64;
    let (phoff, shoff) = (
        u64_at(0x20).ok_or(ElfError::HeaderCutShort)?,
        u64_at(0x28).ok_or(ElfError::HeaderCutShort)?,
    );
    let (phentsize, phnum) = (
        u16_at(0x36).ok_or(ElfError::HeaderCutShort)?,
        u16_at(0x38).ok_or(ElfError::HeaderCutShort)?,
    );
    let (shentsize, shnum) = (
        u16_at(0x3A).ok_or(ElfError::HeaderCutShort)?,
        u16_at(0x3C).ok_or(ElfError::HeaderCutShort)?,
    );
    if shoff.saturating_add(shentsize * shnum) > len {
        return Err(ElfError::SectionHeadersPastEnd {
            end: shoff.saturating_add(shentsize * shnum),
            len,
        });
    }
    for i in 0..phnum {
        let h = phentsize
            .checked_mul(i)
            .and_then(|o| o.checked_add(phoff))
            .and_then(|o| usize::try_from(o).ok())
            .ok_or(ElfError::ProgramHeaderOutOfRange)?;
        let p_type = u32_at(h).ok_or(ElfError::ProgramHeaderCutShort)?;
        let (off, filesz) = (
            u64_at(h.saturating_add(8)).ok_or(ElfError::HeaderCutShort)?,
            u64_at(h.saturating_add(0x20)).ok_or(ElfError::HeaderCutShort)?,
        );
        if p_type == 1 && off.saturating_add(filesz) > len {
            return Err(ElfError::SegmentPastEnd {
                end: off.saturating_add(filesz),
                len,
            });
        }
    }
    Ok(())
}

/// Loads and checks one plugin file.
pub fn load_file(path: &Path) -> Result<LoadedPlugin, PluginError> {
    let bytes = std::fs::read(path).map_err(|e| PluginError::Unreadable {
        path: path.to_path_buf(),
        reason: one_line(e),
    })?;
    if !bytes.starts_with(b"\x7fELF") {
        return Err(PluginError::NotSharedLibrary {
            path: path.to_path_buf(),
        });
    }
    check_elf(&bytes).map_err(|reason| PluginError::Corrupt {
        path: path.to_path_buf(),
        reason,
    })?;
    let raw = RawLibrary::load_at(path).map_err(|e| PluginError::LoadFailed {
        path: path.to_path_buf(),
        reason: one_line(e),
    })?;
    // Never unloaded: thread-locals and dlclose do not mix.
    let raw: &'static RawLibrary = Box::leak(Box::new(raw));
    // SAFETY: the library stays loaded forever (leaked above).
    let header =
        unsafe { lib_header_from_raw_library(raw) }.map_err(|e| PluginError::NotAPlugin {
            path: path.to_path_buf(),
            reason: one_line(e),
        })?;
    // Every abi_stable library exports the same root-module symbol: before anything of
    // it is called, it must say it is a Tessera plugin root module and carry a layout
    // to check against.
    let consts = header.root_mod_consts();
    if consts.base_name().as_str() != <PluginRootRef as RootModule>::BASE_NAME {
        return Err(PluginError::NotAPlugin {
            path: path.to_path_buf(),
            reason: format!(
                "its root module is `{}`, not `{}`",
                consts.base_name(),
                <PluginRootRef as RootModule>::BASE_NAME
            ),
        });
    }
    if consts.layout().into_option().is_none() {
        return Err(PluginError::Incompatible {
            path: path.to_path_buf(),
            reason: "its root module carries no layout to check".into(),
        });
    }
    // The root module's first three fields (schema version, name, version) are the same
    // in every schema version: read them before the layout check, so that a plugin
    // built for another schema is refused by name, version and schema, not as an
    // opaque layout mismatch.
    // SAFETY: it is a `tessera_plugin` root module (checked above) and only its three
    // leading fields, the same in every version, are read before `ensure_layout` below
    // has checked the whole layout.
    let root = unsafe { header.unchecked_layout::<PluginRootRef>() }.map_err(|e| {
        PluginError::NotAPlugin {
            path: path.to_path_buf(),
            reason: one_line(e),
        }
    })?;
    let origin = Origin::File(path.to_path_buf());
    check_schema(root, &origin)?;
    header
        .ensure_layout::<PluginRootRef>()
        .map_err(|e| PluginError::Incompatible {
            path: path.to_path_buf(),
            reason: one_line(e),
        })?;
    check(root, origin)
}

/// Registers a statically linked plugin.
pub fn builtin(root: PluginRootRef) -> Result<LoadedPlugin, PluginError> {
    check(root, Origin::BuiltIn)
}

/// The directories searched for plugins: `plugins/` beside the running binary, then
/// every directory of `TESSERA_PLUGIN_PATH`.
pub fn plugin_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(|p| p.join("plugins")))
    {
        dirs.push(dir);
    }
    if let Some(p) = std::env::var_os("TESSERA_PLUGIN_PATH") {
        dirs.extend(std::env::split_paths(&p));
    }
    dirs
}

/// Every plugin found, and every file refused with its reason.
#[derive(Debug, Default)]
pub struct Registry {
    pub plugins: Vec<LoadedPlugin>,
    pub refused: Vec<PluginError>,
}

impl Registry {
    /// Parses a target string; the kinds of the loaded backend plugins are known too.
    pub fn parse_target(&self, s: &str) -> Result<Target, TargetError> {
        Target::parse_with(s, &self.backend_kinds())
    }

    /// The compiler for `target`: the built-in CPU backend, or a plugin's.
    pub fn backend_for(&self, target: &Target) -> Result<Box<dyn Backend>, PluginError> {
        if self.is_builtin_cpu(target) {
            return Ok(Box::new(CpuBackend::new(target.clone())));
        }
        let plugin = self.backend_plugin(target)?;
        Ok(Box::new(crate::PluginBackend::new(plugin, target)?))
    }

    /// The device of `target`: the host CPU, or a plugin's device (opened now).
    pub fn device_for(&self, target: &Target) -> Result<Arc<dyn Device>, PluginError> {
        if self.is_builtin_cpu(target) {
            // kernels for another CPU would die with SIGILL here: say so first
            tessera_backends::cpu::check_host_runs(target)?;
            return Ok(Arc::new(CpuDevice::new()));
        }
        let plugin = self.backend_plugin(target)?;
        Ok(Arc::new(crate::PluginChannel::open(plugin, target)?))
    }

    /// Whether `target` is served by the built-in CPU backend and device (no plugin
    /// claims the `cpu` kind).
    fn is_builtin_cpu(&self, target: &Target) -> bool {
        target.kind.is_cpu() && self.backend(target.kind.name()).is_none()
    }

    fn backend_plugin(&self, target: &Target) -> Result<&LoadedPlugin, PluginError> {
        self.backend(target.kind.name())
            .ok_or_else(|| PluginError::NoBackend {
                kind: target.kind.to_string(),
                loaded: if self.backend_kinds().is_empty() {
                    "none".into()
                } else {
                    self.backend_kinds().join(", ")
                },
            })
    }

    /// The plugin providing a backend for target kind `kind`.
    pub fn backend(&self, kind: &str) -> Option<&LoadedPlugin> {
        self.plugins
            .iter()
            .find(|p| p.backends.iter().any(|b| b == kind))
    }
    /// The search strategy `name`, from the plugin that provides it.
    pub fn strategy(&self, name: &str) -> Result<crate::PluginStrategy, PluginError> {
        self.plugins
            .iter()
            .find(|p| p.strategies.iter().any(|s| s == name))
            .map(|p| crate::PluginStrategy::new(p.clone(), name))
            .ok_or_else(|| PluginError::NoStrategy {
                name: name.to_string(),
                loaded: {
                    let all = self.strategy_names();
                    if all.is_empty() {
                        "none".into()
                    } else {
                        all.join(", ")
                    }
                },
            })
    }
    /// Every search strategy some plugin provides.
    pub fn strategy_names(&self) -> Vec<String> {
        self.plugins
            .iter()
            .flat_map(|p| p.strategies.iter().cloned())
            .collect()
    }
    /// Every target kind some plugin provides.
    pub fn backend_kinds(&self) -> Vec<String> {
        self.plugins
            .iter()
            .flat_map(|p| p.backends.iter().cloned())
            .collect()
    }
}

/// Loads the built-in plugins and every `.so` in `dirs`; a refused file is recorded and
/// the others still load. A later plugin with the name of an earlier one is refused.
pub fn discover(builtins: &[PluginRootRef], dirs: &[PathBuf]) -> Registry {
    let mut reg = Registry::default();
    let add = |r: Result<LoadedPlugin, PluginError>, reg: &mut Registry| match r {
        Ok(p) if reg.plugins.iter().any(|q| q.name == p.name) => {
            let path = match &p.origin {
                Origin::File(f) => f.clone(),
                Origin::BuiltIn => PathBuf::from("<built-in>"),
            };
            reg.refused.push(PluginError::Call {
                plugin: p.name.clone(),
                message: format!(
                    "{} is a second plugin of this name; the first one wins",
                    path.display()
                ),
            });
        }
        Ok(p) => reg.plugins.push(p),
        Err(e) => reg.refused.push(e),
    };
    for b in builtins {
        add(builtin(*b), &mut reg);
    }
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        let mut files: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "so"))
            .collect();
        files.sort();
        for f in files {
            add(load_file(&f), &mut reg);
        }
    }
    reg
}

impl LoadedPlugin {
    pub(crate) fn call_err(&self, message: impl std::fmt::Display) -> PluginError {
        PluginError::Call {
            plugin: self.name.clone(),
            message: message.to_string(),
        }
    }

    /// The error an entry point returned: its sealed [`crate::CallError`], or (from a
    /// plugin that sends plain text) the text.
    pub(crate) fn entry_err(&self, raw: RString) -> PluginError {
        match unseal::<crate::CallError>(raw.as_str()) {
            Ok(source) => PluginError::Entry {
                plugin: self.name.clone(),
                source,
            },
            Err(_) => self.call_err(raw.into_string()),
        }
    }

    pub fn hardware_params(&self, target: &Target) -> Result<HardwareParams, PluginError> {
        let t = target.to_string();
        let r = (self.root.hardware_params())(RStr::from_str(&t))
            .into_result()
            .map_err(|e| self.entry_err(e))?;
        unseal(r.as_str()).map_err(|e| self.call_err(e))
    }

    pub fn codegen(&self, target: &Target, func: &PrimFunc) -> Result<String, PluginError> {
        let (t, f) = (target.to_string(), seal(func));
        (self.root.codegen())(RStr::from_str(&t), RStr::from_str(&f))
            .into_result()
            .map(|s| s.into_string())
            .map_err(|e| self.entry_err(e))
    }

    pub fn build(&self, target: &Target, func: &PrimFunc) -> Result<BuiltKernel, PluginError> {
        let (t, f) = (target.to_string(), seal(func));
        let out = (self.root.build())(RStr::from_str(&t), RStr::from_str(&f))
            .into_result()
            .map_err(|e| self.entry_err(e))?;
        let launch = if out.launch.is_empty() {
            None
        } else {
            Some(unseal(out.launch.as_str()).map_err(|e| self.call_err(e))?)
        };
        Ok(BuiltKernel {
            bytes: out.bytes.into_vec(),
            launch,
            source: out.source.into_string(),
        })
    }
}
