//! Tessera's networks: the graph IR, the model zoo, the ONNX frontend, graph passes,
//! operator fusion, task extraction, network build and the graph executor.
//!
//! ```text
//! zoo / onnx  ->  Graph  ->  passes (fold constants, fold batch norm, DCE, NCHW->NHWC;
//!                                    for the CPU: a ConvPlan — Winograd or direct
//!                                    3×3 convs — then the named list of CPU rewrites,
//!                                    cpu_rewrites::CPU_REWRITES: channel padding,
//!                                    attention as one operator, packed weights, …;
//!                                    int8 quantization, which a target's own
//!                                    preparation uses: VTA's packing is its plugin's)
//!             ->  fuse   ->  extract_tasks (one compute DAG per distinct group)
//!                        ->  compile -> CompiledNetwork (save / read: a module file)
//!                                    -> load -> GraphModule (set_input / run / get_output)
//! ```

pub mod attention;
pub mod conv_plan;
pub mod counted;
pub mod cpu_rewrites;
pub mod dead_taps;
pub mod deploy;
pub mod dynamic;
pub mod error;
pub mod executor;
pub mod fixed_inputs;
pub mod fuse;
pub mod host_ops;
pub mod index_bounds;
pub mod ir;
pub mod onnx;
pub mod op;
pub mod op_spec;
pub mod pad_channels;
pub mod passes;
pub mod quantize;
pub mod reference;
mod run_sizes;
pub mod selection;
pub mod tasks;
pub mod unit_reshapes;
pub mod winograd;
pub mod zoo;

pub use conv_plan::{ConvAlgorithm, ConvChoice, ConvPlan};
pub use deploy::{compile, CompiledNetwork, MODULE_FORMAT_VERSION};
pub use error::GraphError;
pub use executor::{
    build, build_on, build_with, random_input, BuildContext, BuildSummary, GraphModule, LaunchMode,
    ScheduleHook,
};
pub use fuse::{fuse, group_compute, Group, GroupCompute};
pub use ir::{Binary, Graph, Layout, Layout3d, Node, Op, Pattern, TensorType, Unary};
pub use op_spec::op_spec_of;
pub use tasks::{default_programs, extract_tasks, kernel_groups, print_tasks, Task};
/// How an int8 product sums its bytes ([`Op::DenseU8I8`], [`Op::Conv2dU8I8`]).
pub use tessera_te::ops::Int8Sums;
