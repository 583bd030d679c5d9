//! What the filetest binaries share.

use std::path::{Path, PathBuf};

/// The `.tir` files of `tests/filetests/SUBDIR`, sorted.
pub fn tir_files(subdir: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/filetests")
        .join(subdir);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("the filetests directory")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "tir"))
        .collect();
    files.sort();
    files
}
