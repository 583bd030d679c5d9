//! The CLI's integration tests, one binary: each module was a test file of its own, and
//! as one binary they are compiled and linked once and run side by side — a long flow
//! (the Mali RPC flow, the OpenCL seed flow) no longer holds a core idle while the short
//! tests of its file wait for it. Each module's header says what it covers.

mod common;

mod autosched;
mod cli;
mod compile;
mod cuda;
mod detect;
mod device;
mod first_hour;
mod network;
mod op_catalog;
mod opencl;
mod plugins;
mod records;
mod rpc;
mod strategy_plugins;
mod tune;
mod ux;
mod vta;
