//! Generates the gRPC code of `proto/tessera_rpc.proto` with protox, a protobuf
//! compiler in Rust, so the build needs no `protoc` binary.

fn main() {
    println!("cargo:rerun-if-changed=proto/tessera_rpc.proto");
    let fds = protox::compile(["proto/tessera_rpc.proto"], ["proto"])
        .unwrap_or_else(|e| panic!("proto/tessera_rpc.proto: {e}"));
    tonic_prost_build::configure()
        .compile_fds(fds)
        .unwrap_or_else(|e| panic!("generating the gRPC code: {e}"));
}
