//! A "workspace hack" (as `cargo hakari` generates them), written by hand: no code, only
//! dependencies with the features some selections of the workspace turn on and others
//! do not.
//!
//! `tests/build.sh` runs cargo four times over different selections of the workspace
//! (the strategy plugins as shared objects, a `tessera` without them, the workspace,
//! then `cargo test` with the dev-dependencies), and cargo resolves features per
//! invocation: `nix` turns on `libc/extra_traits` in one, a dev-dependency turns on
//! `getrandom/std` in another, and every crate above a dependency whose features changed
//! is compiled again. `tessera-ir`, which every crate depends on, depends on this crate,
//! so every selection turns the union on and compiles each crate once. When a new
//! dependency brings a new difference, add it to Cargo.toml (compare
//! `cargo tree -e features --prefix none` over the selections).
