//! What the cost model remembers across runs (TenSet's finding: a model trained on many
//! tasks' measurements ranks a new task's candidates well before it has measured any).
//!
//! Per target, a cache folder holds one *dataset* per record log: the feature rows of
//! every program the log measured, with its normalized throughput (the task's best cost
//! over the program's cost; 0 for a failure), as the session trained on them. Each
//! tuning run writes its log's dataset at its end, replacing the last one (a temporary
//! file renamed into place: a killed run never leaves half a file). The dataset is
//! derived data: the log stays the record, and a run on a log rebuilds its dataset from
//! the whole log, so a run killed before its end loses nothing.
//!
//! A session then starts from the datasets of the target's *other* logs (or of the
//! logs named with `--model-from`), sampled down to [`PRIOR_CAP`] programs, and trains
//! on them beside its own programs at every retraining: the first round of a task no
//! log has seen is ranked, not random.
//!
//! The file: 8 bytes of magic (`TSRMEM01`), a little-endian `u32` length and that many
//! bytes of JSON header ([`Header`]: target, log, row width, each task's workload key
//! and program count), then per program a `u32` row count, an `f32` label and the rows
//! (`f32`s, little-endian). A file that does not end where its header says is refused.

use md5::{Digest, Md5};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The datasets of one target live in `<root>/<kind>-<hash of the target>/`.
const MAGIC: &[u8; 8] = b"TSRMEM01";
const EXTENSION: &str = "dataset";
/// The programs a session takes from earlier logs at most (a stride over them, so every
/// log and task keeps its share): each retraining trains on them again.
pub const PRIOR_CAP: usize = 3000;
/// The programs one dataset keeps at most (a stride over a longer log's).
pub const DATASET_CAP: usize = PRIOR_CAP;
/// The datasets one target keeps: past it, the oldest go (with 3,000 programs of ~3
/// rows each, ~6 MB a dataset, ~100 MB in all, as the kernel cache).
pub const MAX_DATASETS: usize = 16;

/// A failure to read or write the model's memory.
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    #[error("{path}: {action}: {source}")]
    Io {
        path: PathBuf,
        action: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not a dataset of this build ({source}); it is rebuilt by the next `tessera tune` on its log")]
    BadFile {
        path: PathBuf,
        #[source]
        source: DatasetError,
    },
    #[error("--model-from {}: no such record log", .0.display())]
    NoLog(PathBuf),
    #[error(
        "no dataset of {log} for target `{target}` in {dir}: run `tessera tune` once with \
         --log {log} (its tasks and target; a log whose budget is spent measures nothing) \
         to index it"
    )]
    NotIndexed {
        log: PathBuf,
        target: String,
        dir: PathBuf,
    },
}

/// Why a file is not a dataset this build reads (see the module's description of the
/// file).
#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    #[error("no dataset magic")]
    NoMagic,
    #[error("truncated at byte {0}")]
    Truncated(usize),
    #[error("bad header: {0}")]
    Header(#[source] serde_json::Error),
    #[error("label {label} at byte {at}")]
    Label { label: f32, at: usize },
    #[error("{0} bytes after the last program")]
    Trailing(usize),
    /// A dataset of another target.
    #[error("target `{found}`, not `{expected}`")]
    Target { found: String, expected: String },
}

impl MemoryError {
    fn io(path: &Path, action: &'static str, source: std::io::Error) -> Self {
        MemoryError::Io {
            path: path.to_path_buf(),
            action,
            source,
        }
    }
}

/// The measured programs of one task, as the model learns from them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TaskPrograms {
    pub workload_key: String,
    /// Each program's feature rows (`store_features`).
    pub programs: Vec<Vec<Vec<f32>>>,
    /// Each program's normalized throughput (0 for a failure).
    pub labels: Vec<f32>,
}

/// What one record log taught the model.
#[derive(Clone, Debug, PartialEq)]
pub struct Dataset {
    /// The log, as an absolute path.
    pub log: PathBuf,
    pub target: String,
    pub tasks: Vec<TaskPrograms>,
}

impl Dataset {
    pub fn num_programs(&self) -> usize {
        self.tasks.iter().map(|t| t.programs.len()).sum()
    }

    /// At most `cap` of its programs: every k-th, in order, so each task keeps its
    /// share.
    pub fn thinned(mut self, cap: usize) -> Dataset {
        let stride = stride(self.num_programs(), cap);
        if stride == 1 {
            return self;
        }
        let mut k = 0usize;
        for t in &mut self.tasks {
            let programs = std::mem::take(&mut t.programs);
            let labels = std::mem::take(&mut t.labels);
            for (p, y) in programs.into_iter().zip(labels) {
                if k.is_multiple_of(stride) {
                    t.programs.push(p);
                    t.labels.push(y);
                }
                k += 1;
            }
        }
        self.tasks.retain(|t| !t.programs.is_empty());
        self
    }
}

/// The JSON header of a dataset file.
#[derive(Serialize, Deserialize)]
struct Header {
    target: String,
    log: PathBuf,
    width: usize,
    tasks: Vec<(String, usize)>,
}

/// The datasets of one target in a cache folder.
#[derive(Clone, Debug)]
pub struct ModelMemory {
    dir: PathBuf,
    target: String,
}

/// Where a session's model starts.
#[derive(Clone, Debug)]
pub enum PriorSource {
    /// From nothing (`--fresh-model`).
    Fresh,
    /// From every other log of the target in the cache.
    OtherLogs,
    /// From these logs' datasets only (`--model-from`).
    Logs(Vec<PathBuf>),
}

/// A session's use of the memory: what it starts from, and (always) its own log's
/// dataset written at its end.
#[derive(Clone, Debug)]
pub struct MemoryUse {
    /// The cache root ([`ModelMemory::default_root`] or the user's folder); the
    /// session's target picks its folder inside.
    pub root: PathBuf,
    pub source: PriorSource,
}

impl MemoryUse {
    /// The memory a session uses: in `cache` (else [`ModelMemory::default_root`]; none
    /// without either), starting from nothing (`fresh`), from the logs `from` (each
    /// must exist), or else from every other log of the target.
    pub fn resolve(
        cache: Option<PathBuf>,
        fresh: bool,
        from: &[PathBuf],
    ) -> Result<Option<MemoryUse>, MemoryError> {
        let Some(root) = cache.or_else(ModelMemory::default_root) else {
            return Ok(None);
        };
        if let Some(log) = from.iter().find(|l| !l.exists()) {
            return Err(MemoryError::NoLog(log.clone()));
        }
        let source = match (fresh, from.is_empty()) {
            (true, _) => PriorSource::Fresh,
            (false, true) => PriorSource::OtherLogs,
            (false, false) => PriorSource::Logs(from.to_vec()),
        };
        Ok(Some(MemoryUse { root, source }))
    }
}

/// Programs from earlier logs, ready to train on.
#[derive(Clone, Debug, Default)]
pub struct Prior {
    pub programs: Vec<Vec<Vec<f32>>>,
    pub labels: Vec<f32>,
    /// Each log taken and how many of its programs.
    pub sources: Vec<(PathBuf, usize)>,
}

impl Prior {
    /// At most `cap` programs of `sets` with rows `width` wide: every k-th of them in
    /// the datasets' order, so the sample is the same for the same files.
    pub fn sample(sets: &[Dataset], width: usize, cap: usize) -> Prior {
        let usable = |p: &Vec<Vec<f32>>| !p.is_empty() && p.iter().all(|r| r.len() == width);
        let all = sets
            .iter()
            .flat_map(|s| &s.tasks)
            .flat_map(|t| &t.programs)
            .filter(|p| usable(p))
            .count();
        let stride = stride(all, cap);
        let mut prior = Prior::default();
        let mut k = 0usize;
        for set in sets {
            let mut taken = 0;
            for t in &set.tasks {
                for (p, &y) in t.programs.iter().zip(&t.labels) {
                    if !usable(p) {
                        continue;
                    }
                    if k.is_multiple_of(stride) {
                        prior.programs.push(p.clone());
                        prior.labels.push(y);
                        taken += 1;
                    }
                    k += 1;
                }
            }
            prior.sources.push((set.log.clone(), taken));
        }
        prior
    }

    pub fn len(&self) -> usize {
        self.programs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.programs.is_empty()
    }
}

impl ModelMemory {
    /// The user's memory: `$TESSERA_MODEL_CACHE` (`off` or empty turns it off), else
    /// `$XDG_CACHE_HOME/tessera/models`, else `$HOME/.cache/tessera/models` (beside the
    /// compiled kernels' cache); `None` when turned off or there is no home.
    pub fn default_root() -> Option<PathBuf> {
        tessera_backends::cpu::kernel_cache::user_cache_dir("TESSERA_MODEL_CACHE", "models")
    }

    /// The memory of `target` (its full text: `cpu`, `cuda -arch=sm_90`, …) under `root`.
    pub fn new(root: &Path, target: &str) -> ModelMemory {
        let kind: String = target
            .split_whitespace()
            .next()
            .unwrap_or("target")
            .chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .collect();
        let dir = root.join(format!("{kind}-{}", &hex_md5(target)[..12]));
        ModelMemory {
            dir,
            target: target.to_string(),
        }
    }

    /// The folder of this target's datasets.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the dataset of `log` is kept.
    pub fn dataset_path(&self, log: &Path) -> PathBuf {
        let log = absolute(log);
        self.dir.join(format!(
            "{}.{EXTENSION}",
            &hex_md5(&log.to_string_lossy())[..16]
        ))
    }

    /// Writes (replaces) the dataset of `set.log`, atomically.
    pub fn store(&self, set: &Dataset) -> Result<PathBuf, MemoryError> {
        std::fs::create_dir_all(&self.dir)
            .map_err(|e| MemoryError::io(&self.dir, "create the folder", e))?;
        let path = self.dataset_path(&set.log);
        let bytes = encode(set);
        let mut tmp = tempfile::NamedTempFile::new_in(&self.dir)
            .map_err(|e| MemoryError::io(&self.dir, "create a temporary file", e))?;
        tmp.write_all(&bytes)
            .and_then(|_| tmp.as_file().sync_all())
            .map_err(|e| MemoryError::io(tmp.path(), "write", e))?;
        tmp.persist(&path)
            .map_err(|e| MemoryError::io(&path, "rename into place", e.error))?;
        self.trim(MAX_DATASETS, &path);
        Ok(path)
    }

    /// Removes the oldest datasets (by modification time) past `max`, never `keep`
    /// (best-effort: a file that cannot be removed stays).
    fn trim(&self, max: usize, keep: &Path) {
        let mut files: Vec<(std::time::SystemTime, PathBuf)> = self
            .dataset_files()
            .into_iter()
            .filter(|p| p != keep)
            .filter_map(|p| Some((std::fs::metadata(&p).ok()?.modified().ok()?, p)))
            .collect();
        if files.len() < max {
            return;
        }
        files.sort();
        let remove = files.len() + 1 - max;
        for (_, p) in files.into_iter().take(remove) {
            let _ = std::fs::remove_file(p);
        }
    }

    /// The dataset files of the target, by name.
    fn dataset_files(&self) -> Vec<PathBuf> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut paths: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == EXTENSION))
            .collect();
        paths.sort();
        paths
    }

    /// The dataset of `log`.
    pub fn read(&self, log: &Path) -> Result<Dataset, MemoryError> {
        let path = self.dataset_path(log);
        if !path.exists() {
            return Err(MemoryError::NotIndexed {
                log: log.to_path_buf(),
                target: self.target.clone(),
                dir: self.dir.clone(),
            });
        }
        self.read_file(&path)
    }

    /// Every dataset of the target but `except`'s, in file-name order, and the files
    /// that could not be read.
    pub fn read_all(&self, except: Option<&Path>) -> (Vec<Dataset>, Vec<MemoryError>) {
        let skip = except.map(|l| self.dataset_path(l));
        let paths = self
            .dataset_files()
            .into_iter()
            .filter(|p| Some(p) != skip.as_ref());
        let mut sets = Vec::new();
        let mut errors = Vec::new();
        for p in paths {
            match self.read_file(&p) {
                Ok(s) => sets.push(s),
                Err(e) => errors.push(e),
            }
        }
        (sets, errors)
    }

    fn read_file(&self, path: &Path) -> Result<Dataset, MemoryError> {
        let bytes = std::fs::read(path).map_err(|e| MemoryError::io(path, "read", e))?;
        let set = decode(&bytes).map_err(|source| MemoryError::BadFile {
            path: path.to_path_buf(),
            source,
        })?;
        if set.target != self.target {
            return Err(MemoryError::BadFile {
                path: path.to_path_buf(),
                source: DatasetError::Target {
                    found: set.target,
                    expected: self.target.clone(),
                },
            });
        }
        Ok(set)
    }
}

/// The step of a stride that keeps at most `cap` of `n` items (every k-th, from the first).
fn stride(n: usize, cap: usize) -> usize {
    n.div_ceil(cap.max(1)).max(1)
}

/// `path` made absolute (and canonical where it exists), so one log has one key.
pub fn absolute(path: &Path) -> PathBuf {
    path.canonicalize()
        .or_else(|_| std::path::absolute(path))
        .unwrap_or_else(|_| path.to_path_buf())
}

fn hex_md5(text: &str) -> String {
    Md5::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn encode(set: &Dataset) -> Vec<u8> {
    let width = set
        .tasks
        .iter()
        .flat_map(|t| t.programs.iter().flatten())
        .map(Vec::len)
        .next()
        .unwrap_or(0);
    let header = Header {
        target: set.target.clone(),
        log: set.log.clone(),
        width,
        tasks: set
            .tasks
            .iter()
            .map(|t| (t.workload_key.clone(), t.programs.len()))
            .collect(),
    };
    let json = serde_json::to_vec(&header).expect("a header serializes");
    let mut out = Vec::with_capacity(json.len() + 16);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(json.len() as u32).to_le_bytes());
    out.extend_from_slice(&json);
    for t in &set.tasks {
        for (p, y) in t.programs.iter().zip(&t.labels) {
            // a row of another width (never written by one build) is left out
            let rows: Vec<&Vec<f32>> = p.iter().filter(|r| r.len() == width).collect();
            out.extend_from_slice(&(rows.len() as u32).to_le_bytes());
            out.extend_from_slice(&y.to_le_bytes());
            for r in rows {
                for v in r {
                    out.extend_from_slice(&v.to_le_bytes());
                }
            }
        }
    }
    out
}

/// Reads little-endian words off a byte slice; running out is an error.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], DatasetError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let end = end.ok_or(DatasetError::Truncated(self.at))?;
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u32(&mut self) -> Result<u32, DatasetError> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    fn f32(&mut self) -> Result<f32, DatasetError> {
        Ok(f32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
}

fn decode(bytes: &[u8]) -> Result<Dataset, DatasetError> {
    let mut r = Reader { bytes, at: 0 };
    if r.take(MAGIC.len()).ok() != Some(&MAGIC[..]) {
        return Err(DatasetError::NoMagic);
    }
    let len = r.u32()? as usize;
    let header: Header = serde_json::from_slice(r.take(len)?).map_err(DatasetError::Header)?;
    let width = header.width;
    let mut tasks = Vec::with_capacity(header.tasks.len());
    for (workload_key, n) in header.tasks {
        let mut t = TaskPrograms {
            workload_key,
            ..TaskPrograms::default()
        };
        for _ in 0..n {
            let rows = r.u32()? as usize;
            let y = r.f32()?;
            if !y.is_finite() || y < 0.0 {
                return Err(DatasetError::Label {
                    label: y,
                    at: r.at - 4,
                });
            }
            let mut p = Vec::with_capacity(rows);
            for _ in 0..rows {
                let row = (0..width)
                    .map(|_| r.f32())
                    .collect::<Result<Vec<f32>, _>>()?;
                p.push(row);
            }
            t.programs.push(p);
            t.labels.push(y);
        }
        tasks.push(t);
    }
    if r.at != bytes.len() {
        return Err(DatasetError::Trailing(bytes.len() - r.at));
    }
    Ok(Dataset {
        log: header.log,
        target: header.target,
        tasks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(log: &Path) -> Dataset {
        Dataset {
            log: log.to_path_buf(),
            target: "cpu".into(),
            tasks: vec![
                TaskPrograms {
                    workload_key: "a".into(),
                    programs: vec![vec![vec![1.0, 2.0], vec![3.0, 4.0]], vec![vec![5.0, 6.0]]],
                    labels: vec![1.0, 0.5],
                },
                TaskPrograms {
                    workload_key: "b".into(),
                    programs: vec![vec![]],
                    labels: vec![0.0],
                },
            ],
        }
    }

    #[test]
    fn a_dataset_reads_back_as_written() {
        let dir = tempfile::tempdir().unwrap();
        let m = ModelMemory::new(dir.path(), "cpu");
        let log = dir.path().join("a.log");
        let s = set(&log);
        m.store(&s).unwrap();
        assert_eq!(m.read(&log).unwrap(), s);
        // another target's memory does not see it
        let other = ModelMemory::new(dir.path(), "cuda");
        assert!(matches!(
            other.read(&log),
            Err(MemoryError::NotIndexed { .. })
        ));
    }

    #[test]
    fn a_truncated_or_foreign_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let m = ModelMemory::new(dir.path(), "cpu");
        let log = dir.path().join("a.log");
        let path = m.store(&set(&log)).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        for cut in [3, 12, bytes.len() - 1] {
            std::fs::write(&path, &bytes[..cut]).unwrap();
            let e = m.read(&log).unwrap_err();
            assert!(matches!(e, MemoryError::BadFile { .. }), "{e}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        std::fs::write(&path, &longer).unwrap();
        assert!(m.read(&log).is_err());
        // the other logs are read; the bad one is reported
        let log2 = dir.path().join("b.log");
        m.store(&set(&log2)).unwrap();
        let (sets, errors) = m.read_all(None);
        assert_eq!((sets.len(), errors.len()), (1, 1));
        let (sets, errors) = m.read_all(Some(&log));
        assert_eq!((sets.len(), errors.len()), (1, 0));
    }

    #[test]
    fn a_dataset_keeps_a_stride_of_its_programs_and_the_oldest_go() {
        let s = set(Path::new("/a.log"));
        assert_eq!(s.clone().thinned(10), s);
        let thin = s.clone().thinned(2);
        // programs 0 and 2 of 3: the first of task a, the one of task b
        assert_eq!(thin.num_programs(), 2);
        assert_eq!(thin.tasks[0].labels, vec![1.0]);
        assert_eq!(thin.tasks[1].workload_key, "b");
        let dir = tempfile::tempdir().unwrap();
        let m = ModelMemory::new(dir.path(), "cpu");
        for i in 0..MAX_DATASETS + 3 {
            let log = dir.path().join(format!("{i}.log"));
            let path = m.store(&set(&log)).unwrap();
            // distinct, increasing times whatever the file system's resolution
            let t = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(i as u64);
            std::fs::File::options()
                .append(true)
                .open(&path)
                .unwrap()
                .set_modified(t)
                .unwrap();
        }
        assert_eq!(m.dataset_files().len(), MAX_DATASETS);
        assert!(m.read(&dir.path().join("0.log")).is_err());
        let last = dir.path().join(format!("{}.log", MAX_DATASETS + 2));
        assert!(m.read(&last).is_ok());
    }

    #[test]
    fn the_prior_is_a_fixed_stride_over_every_log() {
        let a = set(Path::new("/a.log"));
        let b = set(Path::new("/b.log"));
        let all = Prior::sample(&[a.clone(), b.clone()], 2, 100);
        // the program without rows is left out
        assert_eq!(all.len(), 4);
        let half = Prior::sample(&[a, b], 2, 3);
        assert_eq!(half.len(), 2);
        assert_eq!(half.sources.len(), 2);
        assert_eq!(half.labels, vec![1.0, 1.0]);
    }
}
