//! The record log: one JSON object per line, appended as measurements arrive.
//!
//! A line holds the format version, the workload key, the target string, the task's
//! name, the schedule and the measurement:
//!
//! ```text
//! {"v":1,"workload_key":"[\"…\", [1, 64], [64, 64], [1, 64]]","target":"cpu","task":"fused_dense","schedule":{"kind":"config","template":"dense_nopack","index":17,"entity":{…}},"result":{"costs":[0.000123],"error_no":0,"all_cost":0.41,"timestamp":1700000000}}
//! ```
//!
//! Writing ([`RecordWriter`]) appends whole batches with one `write` and syncs them, so
//! a killed run loses at most the batch in flight and leaves at worst one torn last
//! line. Reading ([`load`]) never fails on a bad line: torn last lines, junk, records of
//! a newer format version are skipped and reported with their line numbers. On top:
//! [`pick_best`], [`best_by_workload`], [`distill`] / [`distill_file`] and
//! [`ApplyHistoryBest`] (the best record per workload when building a network).
//!
//! A log may also hold in-network checks (`crate::network_check`), lines of their own
//! kind that [`load`] returns apart from the records ([`LoadedLog::checks`]).

use crate::network_check::{overrules, NetworkCheck, Overruled};
use crate::types::{MeasureResult, ScheduleDesc};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// The format version written in every record (`"v"`). Readers skip records of a newer
/// version (with a reason) and read every older one.
pub const RECORD_VERSION: u64 = 1;

/// One measurement of one schedule of one task on one target: a line of the log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// The format version ([`RECORD_VERSION`] when written by this build).
    pub v: u64,
    /// The task's workload key (`ComputeDag::workload_key`).
    pub workload_key: String,
    /// The target string the candidate was built for, e.g. `cpu -num-cores=2`.
    pub target: String,
    /// A human name for the task, e.g. `fused_conv2d_bias_add_relu`.
    pub task: String,
    pub schedule: ScheduleDesc,
    pub result: MeasureResult,
}

impl Record {
    /// A record of the current format version.
    pub fn new(
        workload_key: impl Into<String>,
        target: impl Into<String>,
        task: impl Into<String>,
        schedule: ScheduleDesc,
        result: MeasureResult,
    ) -> Self {
        Record {
            v: RECORD_VERSION,
            workload_key: workload_key.into(),
            target: target.into(),
            task: task.into(),
            schedule,
            result,
        }
    }

    /// Whether the measurement succeeded with a usable (finite, non-empty) cost.
    pub fn is_usable(&self) -> bool {
        self.result.is_ok() && !self.result.costs.is_empty() && self.result.mean_cost().is_finite()
    }

    /// The record as one JSON line, without the newline. Fails on a value JSON cannot
    /// hold (a non-finite cost, which serde_json would write as `null`).
    pub fn to_json_line(&self) -> Result<String, EncodeError> {
        let r = &self.result;
        if let Some(c) = r.costs.iter().find(|c| !c.is_finite()) {
            return Err(EncodeError::NotFinite {
                field: "cost",
                value: *c,
            });
        }
        if !r.all_cost.is_finite() {
            return Err(EncodeError::NotFinite {
                field: "all_cost",
                value: r.all_cost,
            });
        }
        serde_json::to_string(self).map_err(|e| EncodeError::Json(e.to_string()))
    }

    /// Parses one line of a log (`line` is its 1-based number, for the error).
    pub fn from_json_line(line: usize, text: &str) -> Result<Record, RecordError> {
        let bad = |reason: String| RecordError::BadLine { line, reason };
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| bad(format!("not JSON: {e}")))?;
        let obj = match &value {
            serde_json::Value::Object(o) => o,
            other => {
                return Err(bad(format!(
                    "not a record: a JSON {}, not an object",
                    json_kind(other)
                )))
            }
        };
        let version = match obj.get("v") {
            None => return Err(bad("not a record: no format version `v`".into())),
            Some(v) => v.as_u64().ok_or_else(|| {
                bad(format!(
                    "not a record: format version `v` is {v}, not a positive integer"
                ))
            })?,
        };
        if version > RECORD_VERSION {
            return Err(RecordError::NewerVersion { line, version });
        }
        if version == 0 {
            return Err(bad("not a record: format version 0 does not exist".into()));
        }
        Record::deserialize(value).map_err(|e| bad(format!("not a record: {e}")))
    }
}

fn json_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "boolean",
        serde_json::Value::Number(_) => "number",
        serde_json::Value::String(_) => "string",
        serde_json::Value::Array(_) => "array",
        serde_json::Value::Object(_) => "object",
    }
}

fn newer_reason(version: u64) -> String {
    format!(
        "record format version {version} is newer than this build reads ({RECORD_VERSION}): \
         written by a newer Tessera"
    )
}

/// Why a record or a check cannot be written as a JSON line.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EncodeError {
    /// A number JSON cannot hold (serde_json would write `null`).
    #[error("{field} {value} is not a finite number")]
    NotFinite { field: &'static str, value: f64 },
    /// What serde_json refused.
    #[error("{0}")]
    Json(String),
}

/// What can go wrong with a record log.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// Opening, reading, writing, syncing or renaming a file failed.
    #[error("{}: cannot {action}", path.display())]
    Io {
        path: PathBuf,
        action: &'static str,
        #[source]
        source: io::Error,
    },
    /// A line that is not a record (`line` is 1-based).
    #[error("line {line}: {reason}")]
    BadLine { line: usize, reason: String },
    /// A record of a format version newer than [`RECORD_VERSION`].
    #[error("line {line}: {}", newer_reason(*version))]
    NewerVersion { line: usize, version: u64 },
    /// A record of a batch that cannot be written (nothing of the batch was written).
    #[error("record {index} of the batch cannot be written: {reason}")]
    Unwritable { index: usize, reason: EncodeError },
    /// A file none of whose lines is a record or a check (a binary file, another
    /// program's output): not a record log at all.
    #[error("{}: not a record log: none of its {lines} lines is a record (line {first_line}: {first_reason})", path.display())]
    NotALog {
        path: PathBuf,
        lines: usize,
        first_line: usize,
        first_reason: String,
    },
}

impl RecordError {
    fn io(path: &Path, action: &'static str, source: io::Error) -> Self {
        RecordError::Io {
            path: path.to_path_buf(),
            action,
            source,
        }
    }

    /// For a line error: why the line was skipped (without its number).
    fn line_reason(&self) -> String {
        match self {
            RecordError::BadLine { reason, .. } => reason.clone(),
            RecordError::NewerVersion { version, .. } => newer_reason(*version),
            other => other.to_string(),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------------------

/// Appends records to a log, one batch at a time.
#[derive(Debug)]
pub struct RecordWriter {
    path: PathBuf,
    file: File,
    /// The file ended without a newline when opened (a torn last line): the next batch
    /// starts with one so its first record has a line of its own.
    needs_newline: bool,
}

impl RecordWriter {
    /// Opens `path` for appending, creating it and its parent folder if needed.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, RecordError> {
        let path = path.as_ref();
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            fs::create_dir_all(parent)
                .map_err(|e| RecordError::io(parent, "create the log's folder", e))?;
        }
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(path)
            .map_err(|e| RecordError::io(path, "open the record log for appending", e))?;
        let len = file
            .metadata()
            .map_err(|e| RecordError::io(path, "read the record log's size", e))?
            .len();
        let mut needs_newline = false;
        if len > 0 {
            let mut last = [0u8; 1];
            file.seek(SeekFrom::Start(len - 1))
                .and_then(|_| file.read_exact(&mut last))
                .map_err(|e| RecordError::io(path, "read the record log's last byte", e))?;
            needs_newline = last[0] != b'\n';
        }
        Ok(RecordWriter {
            path: path.to_path_buf(),
            file,
            needs_newline,
        })
    }

    /// The log's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends the records, one line each, with a single write, then flushes and syncs
    /// the file. A record that cannot be written fails the batch before anything is
    /// written. An empty batch writes nothing.
    pub fn append_batch(&mut self, records: &[Record]) -> Result<(), RecordError> {
        self.append_lines(&json_lines(records, Record::to_json_line)?)
    }

    /// Appends in-network checks as [`RecordWriter::append_batch`] appends records.
    pub fn append_checks(&mut self, checks: &[NetworkCheck]) -> Result<(), RecordError> {
        self.append_lines(&json_lines(checks, NetworkCheck::to_json_line)?)
    }

    /// Appends the lines with a single write, then flushes and syncs — nothing once the
    /// process is being interrupted ([`crate::measure::interrupted`]): what was measured
    /// while its folders were removed would be logged as the candidates' failures.
    fn append_lines(&mut self, lines: &[String]) -> Result<(), RecordError> {
        if lines.is_empty() || crate::measure::interrupted() {
            return Ok(());
        }
        let mut buf = String::new();
        if self.needs_newline {
            buf.push('\n');
        }
        for line in lines {
            buf.push_str(line);
            buf.push('\n');
        }
        let path = &self.path;
        self.file
            .write_all(buf.as_bytes())
            .map_err(|e| RecordError::io(path, "append to the record log", e))?;
        self.needs_newline = false;
        self.file
            .flush()
            .map_err(|e| RecordError::io(path, "flush the record log", e))?;
        self.file
            .sync_data()
            .map_err(|e| RecordError::io(path, "sync the record log", e))?;
        Ok(())
    }

    /// Appends one record (a batch of one).
    pub fn append(&mut self, record: &Record) -> Result<(), RecordError> {
        self.append_batch(std::slice::from_ref(record))
    }
}

/// Each item as a JSON line; the first that cannot be written fails them all.
fn json_lines<T>(
    items: &[T],
    line: impl Fn(&T) -> Result<String, EncodeError>,
) -> Result<Vec<String>, RecordError> {
    items
        .iter()
        .enumerate()
        .map(|(index, item)| line(item).map_err(|reason| RecordError::Unwritable { index, reason }))
        .collect()
}

// ---------------------------------------------------------------------------------------
// Reading
// ---------------------------------------------------------------------------------------

/// The records of a log and the lines that were skipped.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LoadedLog {
    /// The records, in file order.
    pub records: Vec<Record>,
    /// `lines[i]` is the (1-based) line number of `records[i]`.
    pub lines: Vec<usize>,
    /// Each skipped line: its 1-based number and why (for the caller to print as a
    /// warning).
    pub skipped: Vec<(usize, String)>,
    /// The in-network checks, in file order.
    pub checks: Vec<NetworkCheck>,
}

/// The warning lines of a log's skipped lines, `PATH:LINE: skipped: REASON` (what every
/// reader of a log reports).
pub fn skipped_warnings(path: &Path, skipped: &[(usize, String)]) -> Vec<String> {
    skipped
        .iter()
        .map(|(line, reason)| format!("{}:{line}: skipped: {reason}", path.display()))
        .collect()
}

/// Reads a log. Blank lines are ignored; a torn last line (no newline at the end and
/// not a record), junk lines and records of a newer version are skipped and reported
/// in [`LoadedLog::skipped`]; only a file that cannot be read is an error.
pub fn load(path: impl AsRef<Path>) -> Result<LoadedLog, RecordError> {
    let path = path.as_ref();
    let bytes = fs::read(path).map_err(|e| RecordError::io(path, "read the record log", e))?;
    let log = parse_log(&bytes);
    // No record, and lines that are not even JSON text: not a log (a binary file,
    // another program's output). A torn last line alone is a run killed while writing
    // its first record, and records of a newer format are a newer tessera's log: both
    // stay logs, their lines skipped with a warning.
    let not_text = |reason: &str| {
        !reason.starts_with("torn last line")
            && (reason.contains("not UTF-8") || reason.starts_with("not JSON"))
    };
    let first_bad = log
        .skipped
        .iter()
        .find(|(_, reason)| not_text(reason))
        .cloned();
    if let (true, Some((first_line, first_reason))) =
        (log.records.is_empty() && log.checks.is_empty(), first_bad)
    {
        return Err(RecordError::NotALog {
            path: path.to_path_buf(),
            lines: log.skipped.len(),
            first_line,
            first_reason,
        });
    }
    Ok(log)
}

/// Why none of `records` applies to a build for `target` whose tasks have the workload
/// keys `task_keys`: the records are for another target kind, or for other workloads
/// (another network, image size, batch size or layout), with examples of both sides'
/// shapes. `None` when some record does apply.
pub fn why_nothing_applies(
    records: &[Record],
    task_keys: &[String],
    target: &str,
) -> Option<String> {
    if records.is_empty() {
        return Some("the log holds no records".into());
    }
    let kind = |t: &str| t.split_whitespace().next().unwrap_or("").to_string();
    let want = kind(target);
    let same_kind: Vec<&Record> = records.iter().filter(|r| kind(&r.target) == want).collect();
    let keys: std::collections::HashSet<&str> = task_keys.iter().map(String::as_str).collect();
    if same_kind
        .iter()
        .any(|r| keys.contains(r.workload_key.as_str()))
    {
        return None;
    }
    if same_kind.is_empty() {
        let mut targets: Vec<&str> = records.iter().map(|r| r.target.as_str()).collect();
        targets.sort_unstable();
        targets.dedup();
        return Some(format!(
            "its {} records were tuned for target `{}`, and this build is for `{target}`",
            records.len(),
            targets.join("`, `")
        ));
    }
    // Examples: the first argument's shape of a few workloads on each side.
    let first_shape = |key: &str| -> Option<String> {
        crate::workload_key::parts(key).and_then(|(_, shapes)| shapes.into_iter().next())
    };
    let examples = |keys: &mut dyn Iterator<Item = &str>| -> String {
        let mut shapes: Vec<String> = keys.filter_map(first_shape).collect();
        shapes.sort_unstable();
        shapes.dedup();
        let n = shapes.len();
        shapes.truncate(4);
        if n > 4 {
            shapes.push("…".into());
        }
        shapes.join(", ")
    };
    let mut log_keys: Vec<&str> = same_kind.iter().map(|r| r.workload_key.as_str()).collect();
    log_keys.sort_unstable();
    log_keys.dedup();
    Some(format!(
        "none of its {} workloads is among the {} of this build: the log was tuned for \
         another network, operator shape, image size, batch size or layout (first inputs \
         in the log: {}; here: {})",
        log_keys.len(),
        task_keys.len(),
        examples(&mut log_keys.iter().copied()),
        examples(&mut task_keys.iter().map(String::as_str)),
    ))
}

/// Parses the contents of a log (see [`load`]).
pub fn parse_log(bytes: &[u8]) -> LoadedLog {
    let mut log = LoadedLog::default();
    let ends_with_newline = bytes.last().is_none_or(|&b| b == b'\n');
    let mut pieces = bytes.split(|&b| b == b'\n').peekable();
    let mut number = 0;
    while let Some(raw) = pieces.next() {
        number += 1;
        let is_last = pieces.peek().is_none();
        let torn = is_last && !ends_with_newline;
        let text = match std::str::from_utf8(raw) {
            Ok(t) => t,
            Err(e) => {
                let reason = format!("not a record: not UTF-8 text ({e})");
                log.skipped.push((number, torn_reason(torn, reason)));
                continue;
            }
        };
        if text.trim().is_empty() {
            continue;
        }
        match Record::from_json_line(number, text) {
            Ok(r) => {
                log.records.push(r);
                log.lines.push(number);
            }
            Err(e) => match NetworkCheck::from_json_line(text) {
                Some(Ok(c)) => log.checks.push(c),
                Some(Err(reason)) => log
                    .skipped
                    .push((number, torn_reason(torn, reason.to_string()))),
                None => log
                    .skipped
                    .push((number, torn_reason(torn, e.line_reason()))),
            },
        }
    }
    log
}

fn torn_reason(torn: bool, reason: String) -> String {
    if torn {
        format!(
            "torn last line (no newline at the end: the writing run was probably killed); {reason}"
        )
    } else {
        reason
    }
}

// ---------------------------------------------------------------------------------------
// Picking the best
// ---------------------------------------------------------------------------------------

/// The median of a schedule's measurements: the upper one of an even count, a failed
/// measurement counting as infinitely slow. One measurement is its own median.
pub fn stable_cost(mut costs: Vec<f64>) -> f64 {
    if costs.is_empty() {
        return f64::INFINITY;
    }
    costs.sort_by(f64::total_cmp);
    costs[costs.len() / 2]
}

/// The best schedule among `records` (all of one workload key and target): the
/// lowest [`stable_cost`] over each distinct schedule's records, so that a schedule
/// re-measured in fresh processes (`tessera tune --remeasure-top`) is judged by all of
/// its measurements, not by its luckiest one. Returns the schedule's record whose cost
/// is that median; ties go to the schedule seen first. A schedule whose median is a
/// failure is never chosen.
pub fn best_of<'a>(records: impl IntoIterator<Item = &'a Record>) -> Option<&'a Record> {
    ranked_of(records).into_iter().next().map(|(_, r)| r)
}

/// Every distinct schedule among `records` (all of one workload key and target) whose
/// median ([`stable_cost`]) is not a failure, fastest first (ties in the order the
/// schedules first appear), each as its median and the record whose cost it is.
pub fn ranked_of<'a>(records: impl IntoIterator<Item = &'a Record>) -> Vec<(f64, &'a Record)> {
    // records are read from JSON, so they serialize; a failure here only merges the
    // schedule with others that fail alike
    let by_schedule = group_in_order(records, |r| {
        serde_json::to_string(&r.schedule).unwrap_or_default()
    });
    let cost = |r: &Record| {
        if r.is_usable() {
            r.result.mean_cost()
        } else {
            f64::INFINITY
        }
    };
    let mut ranked: Vec<(f64, &'a Record)> = by_schedule
        .iter()
        .filter_map(|(_, group)| {
            let median = stable_cost(group.iter().map(|r| cost(r)).collect());
            let r = group.iter().find(|r| cost(r) == median)?;
            median.is_finite().then_some((median, *r))
        })
        .collect();
    // a stable sort: ties keep the order of first appearance
    ranked.sort_by(|a, b| a.0.total_cmp(&b.0));
    ranked
}

/// The best record for `workload_key` on `target` (the target strings compared
/// exactly): see [`best_of`]. Failures are never chosen.
pub fn pick_best<'a>(
    records: &'a [Record],
    workload_key: &str,
    target: &str,
) -> Option<&'a Record> {
    best_of(
        records
            .iter()
            .filter(|r| r.workload_key == workload_key && r.target == target),
    )
}

/// `records` grouped by `key`, the groups in the order their keys first appear and
/// each group in the records' order.
fn group_in_order<'a, K: Clone + Eq + std::hash::Hash>(
    records: impl IntoIterator<Item = &'a Record>,
    key: impl Fn(&'a Record) -> K,
) -> Vec<(K, Vec<&'a Record>)> {
    let mut groups: Vec<(K, Vec<&'a Record>)> = Vec::new();
    let mut index: HashMap<K, usize> = HashMap::new();
    for r in records {
        let k = key(r);
        let i = *index.entry(k.clone()).or_insert_with(|| {
            groups.push((k, Vec::new()));
            groups.len() - 1
        });
        groups[i].1.push(r);
    }
    groups
}

/// The records of each (workload key, target) pair, in the order the pairs first
/// appear.
pub(crate) fn by_pair<'a>(
    records: impl IntoIterator<Item = &'a Record>,
) -> Vec<((&'a str, &'a str), Vec<&'a Record>)> {
    group_in_order(records, |r| (r.workload_key.as_str(), r.target.as_str()))
}

/// The best record of every (workload key, target) pair (see [`best_of`]), of one
/// target or of all.
pub fn best_by_workload<'a>(
    records: &'a [Record],
    target: Option<&str>,
) -> BTreeMap<(String, String), &'a Record> {
    by_pair(records)
        .into_iter()
        .filter(|((_, t), _)| target.is_none_or(|want| *t == want))
        .filter_map(|((w, t), group)| best_of(group).map(|r| ((w.to_string(), t.to_string()), r)))
        .collect()
}

/// TVM's distill: the best record of each (workload key, target) (see
/// [`best_of`]), in the order in which the pairs first appear in `records`. Pairs
/// without a successful record are dropped.
pub fn distill(records: &[Record]) -> Vec<Record> {
    by_pair(records)
        .into_iter()
        .filter_map(|(_, group)| best_of(group).cloned())
        .collect()
}

/// What [`distill_file`] did.
#[derive(Clone, Debug, PartialEq)]
pub struct DistillSummary {
    /// Records read.
    pub total: usize,
    /// Records written (one per (workload key, target) with a successful record).
    pub kept: usize,
    /// Distinct workload keys among the kept records.
    pub workloads: usize,
    /// (Workload key, target) pairs of the input without any successful record.
    pub without_success: Vec<(String, String)>,
    /// The input's skipped lines (see [`LoadedLog::skipped`]).
    pub skipped: Vec<(usize, String)>,
}

/// Distills the log `input` into `output` (replaced atomically: written to
/// `output.tmp`, synced, then renamed). `output` may be `input`.
pub fn distill_file(
    input: impl AsRef<Path>,
    output: impl AsRef<Path>,
) -> Result<DistillSummary, RecordError> {
    let output = output.as_ref();
    let log = load(input)?;
    let kept = distill(&log.records);
    // a best record that its latest in-network check found slower than another
    // schedule (the default, another candidate) keeps that check run and the other
    // schedule's record, so the build still uses the other
    let decisive = overrules(&log.records, &kept, &log.checks);
    let instead: Vec<Record> = decisive.iter().map(|o| o.instead.clone()).collect();

    // Loaded records hold finite numbers; the errors are only for completeness.
    let records: Vec<Record> = kept.iter().chain(&instead).cloned().collect();
    let checks: Vec<NetworkCheck> = decisive.iter().flat_map(|o| o.run.clone()).collect();
    let mut lines = json_lines(&records, Record::to_json_line)?;
    lines.extend(json_lines(&checks, NetworkCheck::to_json_line)?);
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    write_atomically(output, text.as_bytes())?;

    let kept_keys: HashSet<(&str, &str)> = kept
        .iter()
        .map(|r| (r.workload_key.as_str(), r.target.as_str()))
        .collect();
    let mut without_success = Vec::new();
    let mut seen = HashSet::new();
    for r in &log.records {
        let key = (r.workload_key.as_str(), r.target.as_str());
        if !kept_keys.contains(&key) && seen.insert(key) {
            without_success.push((key.0.to_string(), key.1.to_string()));
        }
    }
    let workloads = kept
        .iter()
        .map(|r| r.workload_key.as_str())
        .collect::<HashSet<_>>()
        .len();
    Ok(DistillSummary {
        total: log.records.len(),
        kept: kept.len(),
        workloads,
        without_success,
        skipped: log.skipped,
    })
}

/// Writes `path` via `path.tmp` + sync + rename, creating the parent folder.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), RecordError> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs::create_dir_all(parent).map_err(|e| RecordError::io(parent, "create the folder", e))?;
    }
    let mut tmp_name = path.as_os_str().to_owned();
    tmp_name.push(".tmp");
    let tmp = PathBuf::from(tmp_name);
    let result = (|| {
        let mut f = File::create(&tmp).map_err(|e| RecordError::io(&tmp, "create", e))?;
        f.write_all(bytes)
            .and_then(|_| f.sync_all())
            .map_err(|e| RecordError::io(&tmp, "write", e))?;
        fs::rename(&tmp, path).map_err(|e| RecordError::io(path, "replace (rename into place)", e))
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

// ---------------------------------------------------------------------------------------
// Apply history best
// ---------------------------------------------------------------------------------------

/// A task that was looked up without a record.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Miss {
    pub workload_key: String,
    pub target: String,
    pub task: String,
}

/// The best record of every (workload key, target), for building a network with tuned
/// schedules; remembers the tasks that had none so each is warned about once.
#[derive(Clone, Debug, Default)]
pub struct ApplyHistoryBest {
    best: HashMap<(String, String), Record>,
    /// The best template configuration of each, default schedules aside.
    best_config: HashMap<(String, String), Record>,
    /// The pairs whose best was overruled by an in-network check (see
    /// [`ApplyHistoryBest::from_log`]).
    overruled: Vec<Overruled>,
    misses: Vec<Miss>,
    warned: HashSet<Miss>,
}

impl ApplyHistoryBest {
    /// From records (failures are ignored; ties go to the earliest).
    pub fn new(records: &[Record]) -> Self {
        let best = best_by_workload(records, None)
            .into_iter()
            .map(|(k, r)| (k, r.clone()))
            .collect();
        let configs: Vec<Record> = records
            .iter()
            .filter(|r| matches!(r.schedule, ScheduleDesc::Config { .. }))
            .cloned()
            .collect();
        let best_config = best_by_workload(&configs, None)
            .into_iter()
            .map(|(k, r)| (k, r.clone()))
            .collect();
        ApplyHistoryBest {
            best,
            best_config,
            overruled: Vec::new(),
            misses: Vec::new(),
            warned: HashSet::new(),
        }
    }

    /// From a loaded log: the records' best ([`ApplyHistoryBest::new`]), except where
    /// the latest in-network check of a workload timed its best schedule and found
    /// another faster inside the network — the default schedule or another of the
    /// candidates it timed: there, that schedule's record (see `crate::network_check`).
    pub fn from_log(log: &LoadedLog) -> Self {
        let mut h = ApplyHistoryBest::new(&log.records);
        let best: Vec<Record> = h.best.values().cloned().collect();
        for o in overrules(&log.records, &best, &log.checks) {
            let pair = (o.check.workload_key.clone(), o.check.target.clone());
            h.best.insert(pair, o.instead.clone());
            h.overruled.push(o);
        }
        h.overruled.sort_by(|a, b| {
            (&a.check.workload_key, &a.check.target).cmp(&(&b.check.workload_key, &b.check.target))
        });
        h
    }

    /// The best records an in-network check overruled, by workload key.
    pub fn overruled(&self) -> &[Overruled] {
        &self.overruled
    }

    /// From a log file ([`ApplyHistoryBest::from_log`]); also returns the log's skipped
    /// lines (for the caller to warn).
    pub fn from_file(path: impl AsRef<Path>) -> Result<(Self, Vec<(usize, String)>), RecordError> {
        let log = load(path)?;
        Ok((ApplyHistoryBest::from_log(&log), log.skipped))
    }

    /// The best record of `workload_key` on `target`, if any. Without a record on this
    /// exact target, the fastest record on a target of the same kind (its first word:
    /// records tuned on `cpu` apply to `cpu -num-cores=2`, as TVM matches by target
    /// keys, not by every option).
    pub fn query(&self, workload_key: &str, target: &str) -> Option<&Record> {
        if let Some(r) = self
            .best
            .get(&(workload_key.to_string(), target.to_string()))
        {
            return Some(r);
        }
        let kind = |t: &str| t.split_whitespace().next().unwrap_or("").to_string();
        let want = kind(target);
        self.best
            .iter()
            .filter(|((w, t), _)| w == workload_key && kind(t) == want)
            .map(|(_, r)| r)
            .min_by(|a, b| {
                a.result
                    .mean_cost()
                    .total_cmp(&b.result.mean_cost())
                    .then_with(|| a.target.cmp(&b.target))
            })
    }

    /// The best template configuration of `workload_key` on exactly `target`, even
    /// where the default schedule measured faster: for a device whose default schedule
    /// runs on another processor than the configurations (VTA's board CPU against VTA),
    /// so that the two times do not compare.
    pub fn query_config(&self, workload_key: &str, target: &str) -> Option<&Record> {
        self.best_config
            .get(&(workload_key.to_string(), target.to_string()))
    }

    /// How many (workload key, target) pairs have a record.
    pub fn len(&self) -> usize {
        self.best.len()
    }

    pub fn is_empty(&self) -> bool {
        self.best.is_empty()
    }

    /// For a task without a record on `target`: remembers the miss and returns the
    /// warning to print, the first time only (`None` afterwards, and `None` when the
    /// task has a record).
    pub fn warn_missing(
        &mut self,
        workload_key: &str,
        target: &str,
        task_name: &str,
    ) -> Option<String> {
        self.warn_missing_using(workload_key, target, task_name, "its default schedule")
    }

    /// [`warn_missing`](Self::warn_missing) for a task that builds with `instead` (say, a
    /// template's fallback configuration) rather than its default schedule.
    pub fn warn_missing_using(
        &mut self,
        workload_key: &str,
        target: &str,
        task_name: &str,
        instead: &str,
    ) -> Option<String> {
        if self.query(workload_key, target).is_some() {
            return None;
        }
        let miss = Miss {
            workload_key: workload_key.to_string(),
            target: target.to_string(),
            task: task_name.to_string(),
        };
        if !self.warned.insert(miss.clone()) {
            return None;
        }
        self.misses.push(miss);
        Some(format!(
            "no tuning record for task `{task_name}` (workload {workload_key}) on target \
             `{target}`: using {instead}"
        ))
    }

    /// Every task warned about by [`ApplyHistoryBest::warn_missing`], in order.
    pub fn misses(&self) -> &[Miss] {
        &self.misses
    }
}
