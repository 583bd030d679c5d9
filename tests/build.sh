#!/usr/bin/env bash
# Builds everything the test suite runs (`cargo test` alone builds no cdylib):
#
# 1. target/debug/dynamic/: a `tessera` built without its statically linked strategy
#    plugins (but with the templates' and VTA's pipeline extensions: configuration
#    records applied to builds, VTA's network preparation),
#    with the sketch and autotvm plugins beside it as .so files (plugins/).
#    The strategy-plugin test checks that it writes the same log as the default binary.
#    The CUDA and VTA backends' .so files go to target/debug/dynamic/extra/ (found
#    through TESSERA_PLUGIN_PATH by crates/cli/tests/suite/cuda.rs and vta.rs). Each crate is built on its own so
#    that cargo does not unify the `static` feature the default binary turns on.
# 2. target/debug/bare/: `tessera` built with `--no-default-features` (no strategy, no
#    VTA, no GPU backend), which must still run networks with default schedules.
# 3. the workspace (the default `tessera`, the fixture plugins' .so files).
set -euo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-target}/debug"
cargo build -p tessera-sketch -p tessera-autotvm -p tessera-cuda -p tessera-vta --lib
cargo build -p tessera-cli --no-default-features
mkdir -p "$target/bare"
cp "$target/tessera" "$target/bare/tessera"
cargo build -p tessera-cli --no-default-features \
    --features autotvm-extension,vta-extension
mkdir -p "$target/dynamic/plugins" "$target/dynamic/extra"
cp "$target/tessera" "$target/dynamic/tessera"
cp "$target/libtessera_sketch.so" "$target/dynamic/plugins/sketch.so"
cp "$target/libtessera_autotvm.so" "$target/dynamic/plugins/autotvm.so"
cp "$target/libtessera_cuda.so" "$target/dynamic/extra/cuda.so"
cp "$target/libtessera_vta.so" "$target/dynamic/extra/vta.so"
cargo build --workspace
