//! Empty: it exists so that cargo resolves this crate's build-dependencies, whose
//! features the proc-macro side of every selection then shares.
fn main() {}
