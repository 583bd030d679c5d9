//! Compiled kernels kept on disk between runs, as ccache keeps objects: the shared
//! object of a C source built with a given compiler and flags is stored under a hash of
//! all of them, and the next build of the same source with the same compiler and flags
//! copies it instead of calling the compiler.
//!
//! Every `tessera run` of a network compiles its ~30 kernels again (2–5 s of `cc1` for
//! ResNet-18), and a tune builds the untuned and tuned networks more than once (the
//! in-network check, the closing comparison) and re-measures its best programs in fresh
//! processes. The key is the MD5 of the source, the compiler command, the compiler's
//! `--version`, every flag and, for `-march=native`, the host's extensions and CPU model
//! (a cache in a shared home must not hand one machine's AVX-512 kernel to another), so
//! a different compiler, target or flag is a different entry; only successful builds
//! are stored. Entries are written under a
//! temporary name and renamed (a reader never sees half a file), a hit refreshes the
//! entry's time, and the oldest entries go when there are more than [`MAX_ENTRIES`]
//! (about 100 MB at ~25 KB each). The cache is best-effort: any error reading or writing
//! it means compiling as if it were not there.
//!
//! Where: `$TESSERA_CACHE_DIR` (`off` or an empty value turns it off), else
//! `$XDG_CACHE_HOME/tessera/kernels`, else `$HOME/.cache/tessera/kernels`.

use md5::{Digest, Md5};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The most entries kept; past it, the oldest quarter goes.
pub const MAX_ENTRIES: usize = 4096;

/// Stores between two looks at the cache's size (one process writes many entries in a
/// tune; counting them after each one would list the directory thousands of times).
const TRIM_EVERY: u64 = 64;

/// The on-disk cache of compiled kernels.
#[derive(Clone, Debug)]
pub struct KernelCache {
    dir: PathBuf,
}

impl KernelCache {
    /// The user's cache (see the module's header), or `None` when it is turned off or
    /// there is no home directory to keep it in.
    pub fn user() -> Option<KernelCache> {
        user_cache_dir("TESSERA_CACHE_DIR", "kernels").map(KernelCache::at)
    }

    /// A cache in `dir` (created when the first entry is stored).
    pub fn at(dir: PathBuf) -> KernelCache {
        KernelCache { dir }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The key of a build: the hash of each part, in order, each one delimited.
    pub fn key(parts: &[&str]) -> String {
        let mut h = Md5::new();
        for p in parts {
            h.update((p.len() as u64).to_le_bytes());
            h.update(p.as_bytes());
        }
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }

    fn entry(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.so"))
    }

    /// Copies the entry of `key` to `dest` (through a temporary file beside it, renamed)
    /// and refreshes its time; false when there is none or it could not be copied.
    pub fn fetch(&self, key: &str, dest: &Path) -> bool {
        let entry = self.entry(key);
        if !entry.is_file() {
            return false;
        }
        let tmp = temp_beside(dest);
        let copied = std::fs::copy(&entry, &tmp).is_ok() && std::fs::rename(&tmp, dest).is_ok();
        if !copied {
            let _ = std::fs::remove_file(&tmp);
            return false;
        }
        if let Ok(f) = std::fs::File::options().append(true).open(&entry) {
            let _ = f.set_modified(std::time::SystemTime::now());
        }
        true
    }

    /// Stores `built` as the entry of `key` (a failure to is silent: the cache is an
    /// optimisation), then now and then drops the oldest entries past [`MAX_ENTRIES`].
    pub fn store(&self, key: &str, built: &Path) {
        if std::fs::create_dir_all(&self.dir).is_err() {
            return;
        }
        let entry = self.entry(key);
        let tmp = temp_beside(&entry);
        if std::fs::copy(built, &tmp).is_err() || std::fs::rename(&tmp, &entry).is_err() {
            let _ = std::fs::remove_file(&tmp);
            return;
        }
        static STORED: AtomicU64 = AtomicU64::new(0);
        if STORED
            .fetch_add(1, Ordering::Relaxed)
            .is_multiple_of(TRIM_EVERY)
        {
            self.trim(MAX_ENTRIES);
        }
    }

    /// Keeps the newest `max` entries when there are more: removes the oldest until
    /// three quarters of `max` are left (so that the next trims are far apart). Other
    /// files in the directory (another process's temporary ones) are left alone.
    pub fn trim(&self, max: usize) {
        let Ok(dir) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let mut entries: Vec<(std::time::SystemTime, PathBuf)> = dir
            .filter_map(Result::ok)
            .filter(|e| e.path().extension().is_some_and(|x| x == "so"))
            .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
            .collect();
        if entries.len() <= max {
            return;
        }
        entries.sort();
        let remove = entries.len() - max * 3 / 4;
        for (_, path) in entries.into_iter().take(remove) {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// A per-user cache folder (the compiled kernels', the cost model's memory): `$var`
/// (`off` or an empty value turns it off), else `$XDG_CACHE_HOME/tessera/<sub>`, else
/// `$HOME/.cache/tessera/<sub>`; `None` when turned off or there is no home.
pub fn user_cache_dir(var: &str, sub: &str) -> Option<PathBuf> {
    locate(
        std::env::var_os(var),
        std::env::var_os("XDG_CACHE_HOME"),
        std::env::var_os("HOME"),
        sub,
    )
}

/// The cache's directory given the values of `$var`, `$XDG_CACHE_HOME` and `$HOME`.
fn locate(
    tessera: Option<std::ffi::OsString>,
    xdg: Option<std::ffi::OsString>,
    home: Option<std::ffi::OsString>,
    sub: &str,
) -> Option<PathBuf> {
    if let Some(dir) = tessera {
        if dir.is_empty() || dir == "off" {
            return None;
        }
        return Some(PathBuf::from(dir));
    }
    let base = xdg
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            home.filter(|d| !d.is_empty())
                .map(|h| PathBuf::from(h).join(".cache"))
        })?;
    Some(base.join("tessera").join(sub))
}

/// A temporary name beside `path`, unique to this process and call.
fn temp_beside(path: &Path) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".tmp{}-{n}", std::process::id()));
    path.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::KernelCache;

    #[test]
    fn keys_differ_with_any_part_and_its_boundaries() {
        let k = KernelCache::key(&["int f;", "cc", "-O3"]);
        assert_eq!(k.len(), 32);
        assert_eq!(k, KernelCache::key(&["int f;", "cc", "-O3"]));
        assert_ne!(k, KernelCache::key(&["int f;", "cc", "-O2"]));
        assert_ne!(k, KernelCache::key(&["int f;", "gcc", "-O3"]));
        // moving a boundary is another key
        assert_ne!(
            KernelCache::key(&["ab", "c"]),
            KernelCache::key(&["a", "bc"])
        );
    }

    #[test]
    fn a_stored_entry_is_fetched_and_the_oldest_are_trimmed() {
        let dir = tempfile::tempdir().unwrap();
        let cache = KernelCache::at(dir.path().join("kernels"));
        let built = dir.path().join("built.so");
        std::fs::write(&built, b"ELF kernel").unwrap();
        let dest = dir.path().join("out.so");
        assert!(!cache.fetch("k0", &dest), "nothing stored yet");
        cache.store("k0", &built);
        assert!(cache.fetch("k0", &dest));
        assert_eq!(std::fs::read(&dest).unwrap(), b"ELF kernel");
        // no temporary file is left beside the destination or in the cache
        let names = |d: &std::path::Path| -> Vec<String> {
            let mut v: Vec<String> = std::fs::read_dir(d)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            v.sort();
            v
        };
        assert_eq!(names(cache.dir()), ["k0.so"]);
        assert_eq!(names(dir.path()), ["built.so", "kernels", "out.so"]);
        // eight entries of increasing age; a trim to 4 keeps the 3 newest
        let t0 = std::time::SystemTime::now() - std::time::Duration::from_secs(1000);
        for i in 1..8 {
            cache.store(&format!("k{i}"), &built);
        }
        for i in 0..8 {
            let f = std::fs::File::options()
                .append(true)
                .open(cache.dir().join(format!("k{i}.so")))
                .unwrap();
            f.set_modified(t0 + std::time::Duration::from_secs(i * 10))
                .unwrap();
        }
        cache.trim(4);
        assert_eq!(names(cache.dir()), ["k5.so", "k6.so", "k7.so"]);
    }

    #[test]
    fn found_where_the_environment_says_or_turned_off() {
        use super::locate;
        use std::path::PathBuf;
        let s = |v: &str| Some(std::ffi::OsString::from(v));
        assert_eq!(
            locate(s("/c"), s("/x"), s("/h"), "kernels"),
            Some(PathBuf::from("/c"))
        );
        assert_eq!(locate(s("off"), s("/x"), s("/h"), "kernels"), None);
        assert_eq!(locate(s(""), s("/x"), s("/h"), "kernels"), None);
        assert_eq!(
            locate(None, s("/x"), s("/h"), "kernels"),
            Some(PathBuf::from("/x/tessera/kernels"))
        );
        assert_eq!(
            locate(None, s(""), s("/h"), "kernels"),
            Some(PathBuf::from("/h/.cache/tessera/kernels"))
        );
        assert_eq!(locate(None, None, None, "kernels"), None);
        assert_eq!(
            locate(None, s("/x"), s("/h"), "models"),
            Some(PathBuf::from("/x/tessera/models"))
        );
    }
}
