//! VTA's part of the pipeline (`tessera_search::extension::NetworkExtension`), linked where the
//! binary links VTA statically (cargo feature `network`; the shared-object plugin has
//! the device and backend only): a network for `vta` is built in NCHW, quantized to
//! int8 and packed into VTA's blocked layout between its first max pool and its global
//! pool ([`pack::quantize_and_pack`], TVM's `graph_pack`); its packed convolutions run
//! on VTA only with a template configuration (TVM's fallback one without a record), its
//! whole runs are timed by the kernels' device clocks, and the in-network check does
//! not apply (a default schedule runs on the board's CPU).

pub mod pack;
pub mod template;

use tessera_backends::Target;
use tessera_graph::{quantize::QConfig, Graph, Layout};
use tessera_search::extension::{NetworkExtension, PrepareError, TargetNeeds};

/// The extension; [`NetworkExtension::target_needs`] claims `vta` targets.
pub struct VtaNetwork;

impl NetworkExtension for VtaNetwork {
    fn name(&self) -> &str {
        "vta"
    }

    fn target_needs(&self, target: &Target) -> Option<TargetNeeds> {
        (target.kind.name() == "vta").then_some(TargetNeeds {
            layout: Some(Layout::Nchw),
            configurations_always: true,
            device_clock: Some("VTA's cycle model at the board's clock".into()),
            no_network_check: true,
        })
    }

    fn prepare(&self, _target: &Target, graph: Graph) -> Result<Graph, PrepareError> {
        pack::quantize_and_pack(&graph, &QConfig::default(), &pack::PackConfig::default()).map_err(
            |e| PrepareError {
                what: "int8, NCHW1n16c".into(),
                source: Box::new(e),
            },
        )
    }
}
