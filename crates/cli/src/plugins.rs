//! `tessera plugins`: what plugins there are and why a file would be refused.

use anyhow::{bail, Result};
use clap::Subcommand;
use std::path::PathBuf;
use tessera_driver::{NetworkExtension, Toolchain};
use tessera_plugin::{discover, load_file, plugin_dirs, PluginRootRef, Registry};

#[derive(Subcommand, Debug)]
pub enum PluginsCmd {
    /// List every plugin found (built in, in `plugins/` beside the binary, in each
    /// directory of TESSERA_PLUGIN_PATH), its version and what it provides, and every
    /// file refused with the reason.
    List,
    /// Check one file: load it as a plugin, or say why it would be refused.
    Check {
        /// The shared object to check.
        file: PathBuf,
    },
}

/// The plugins linked into this binary (cargo features `sketch`, `autotvm`, …): one push
/// per enabled feature; with none enabled the vector stays empty.
#[allow(unused_mut, clippy::vec_init_then_push)]
fn builtins() -> Vec<PluginRootRef> {
    let mut v = Vec::new();
    #[cfg(feature = "sketch")]
    v.push(tessera_sketch::tessera_plugin_root());
    #[cfg(feature = "autotvm")]
    v.push(tessera_autotvm::tessera_plugin_root());
    #[cfg(feature = "opencl")]
    v.push(tessera_opencl::tessera_plugin_root());
    #[cfg(feature = "cuda")]
    v.push(tessera_cuda::tessera_plugin_root());
    #[cfg(feature = "vta")]
    v.push(tessera_vta::tessera_plugin_root());
    v
}

/// The pipeline extensions linked into this binary, one per enabled feature
/// (`autotvm-extension`, `vta-extension`, which `autotvm` and `vta` turn on): the
/// template tuner's applier of configurations and its template tasks, VTA's network
/// preparation; and VTA's templates added to the template tuner's table
/// (`conv2d_packed.vta`) where both are linked. A template tuner loaded as a `.so`
/// tunes, but its configurations apply to builds only where its crate is linked here (a
/// Rust trait object does not cross the C ABI); step histories need no extension.
#[allow(unused_mut, clippy::vec_init_then_push)]
fn extensions() -> Vec<Box<dyn NetworkExtension>> {
    let mut v: Vec<Box<dyn NetworkExtension>> = Vec::new();
    #[cfg(feature = "autotvm-extension")]
    v.push(Box::new(tessera_autotvm::network::TemplatesExtension));
    #[cfg(feature = "vta-extension")]
    v.push(Box::new(tessera_vta::network::VtaNetwork));
    #[cfg(all(feature = "autotvm-extension", feature = "vta-extension"))]
    tessera_autotvm::templates::register_templates(tessera_vta::network::template::TEMPLATES);
    v
}

/// The pipeline of this process: every plugin available (discovered once) and the
/// linked extensions; the stages' warnings printed on stderr.
pub fn toolchain() -> &'static Toolchain {
    static TOOLCHAIN: std::sync::OnceLock<Toolchain> = std::sync::OnceLock::new();
    TOOLCHAIN.get_or_init(|| {
        Toolchain::new(discover(&builtins(), &plugin_dirs()), extensions())
            .on_warning(|w| eprintln!("warning: {w}"))
    })
}

/// Every plugin available to this process.
pub fn registry() -> &'static Registry {
    toolchain().registry()
}

pub fn run(cmd: PluginsCmd) -> Result<()> {
    match cmd {
        PluginsCmd::List => {
            let reg = registry();
            println!("{:<10} {:<8} {:<40} PROVIDES", "NAME", "VERSION", "FROM");
            for p in &reg.plugins {
                println!(
                    "{:<10} {:<8} {:<40} {}",
                    p.name,
                    p.version,
                    p.origin.to_string(),
                    p.provides()
                );
            }
            for e in &reg.refused {
                println!("refused: {e}");
            }
            Ok(())
        }
        PluginsCmd::Check { file } => match load_file(&file) {
            Ok(p) => {
                println!(
                    "ok: plugin `{}` {} provides {}",
                    p.name,
                    p.version,
                    p.provides()
                );
                Ok(())
            }
            Err(e) => bail!("{e}"),
        },
    }
}

/// `tessera runner`: the measurement jobs of a tuner (`Toolchain::serve_runner_jobs`).
pub fn serve_jobs() -> std::process::ExitCode {
    match toolchain().serve_runner_jobs() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("runner: {e}");
            std::process::ExitCode::from(3)
        }
    }
}
