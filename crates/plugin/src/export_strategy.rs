//! The plugin side of the search-strategy entry points: a table of the policies this
//! library has created (handle → the plugin's `SearchPolicy`) and one `extern "C"`
//! function per `SearchPolicy` method, each taking and giving sealed JSON. A policy is
//! taken out of the table while it runs, so the table's lock is never held across the
//! core's scoring callback.

use crate::{guard, seal, unseal, EntryError, ScorerCallback};
use abi_stable::std_types::{RResult, RStr, RString};
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use tessera_ir::PrimFunc;
use tessera_policy::ScheduleDesc;
use tessera_policy::{Observation, Scorer, SearchPolicy};

type Table = Mutex<(u64, HashMap<u64, Box<dyn SearchPolicy>>)>;

fn table() -> &'static Table {
    static T: OnceLock<Table> = OnceLock::new();
    T.get_or_init(|| Mutex::new((0, HashMap::new())))
}

/// Keeps `policy` for the core's later calls: its handle.
pub(crate) fn register(policy: Box<dyn SearchPolicy>) -> u64 {
    let mut t = table().lock().unwrap_or_else(|e| e.into_inner());
    t.0 += 1;
    let id = t.0;
    t.1.insert(id, policy);
    id
}

fn take(id: u64) -> Result<Box<dyn SearchPolicy>, EntryError> {
    table()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .1
        .remove(&id)
        .ok_or(EntryError::NoPolicy(id))
}

fn put_back(id: u64, policy: Box<dyn SearchPolicy>) {
    table()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .1
        .insert(id, policy);
}

/// Calls `f` on policy `id` (taken out of the table meanwhile), sealing its answer. A
/// policy that panics is dropped: its state is not to be trusted.
fn with<T: serde::Serialize>(
    what: &str,
    id: u64,
    f: impl FnOnce(&mut dyn SearchPolicy) -> Result<T, EntryError>,
) -> RResult<RString, RString> {
    guard(what, || {
        let mut p = take(id)?;
        let r = f(p.as_mut());
        put_back(id, p);
        r.map(|v| RString::from(seal(&v)))
    })
}

pub(crate) extern "C" fn info(id: u64) -> RResult<RString, RString> {
    with("policy_info", id, |p| Ok(p.info()))
}

/// The core's scorer, called through the boundary: programs out, scores back (`None`
/// for `f32::NEG_INFINITY`, which JSON cannot carry).
struct Remote(ScorerCallback);

impl Scorer for Remote {
    fn score(&mut self, programs: &[PrimFunc]) -> Vec<f32> {
        let sealed = seal(&programs);
        // a failed call or an answer that does not unseal scores every program lowest
        let answer = (self.0.call)(self.0.ctx, RString::from(sealed))
            .into_result()
            .ok()
            .and_then(|s| unseal::<Vec<Option<f32>>>(s.as_str()).ok());
        match answer {
            Some(v) if v.len() == programs.len() => v
                .into_iter()
                .map(|s| s.unwrap_or(f32::NEG_INFINITY))
                .collect(),
            _ => vec![f32::NEG_INFINITY; programs.len()],
        }
    }
}

pub(crate) extern "C" fn propose(
    id: u64,
    n: u64,
    scorer: ScorerCallback,
    with_scorer: bool,
) -> RResult<RString, RString> {
    with("policy_propose", id, |p| {
        let mut remote = Remote(scorer);
        let scorer: Option<&mut dyn Scorer> = if with_scorer { Some(&mut remote) } else { None };
        let n = usize::try_from(n)?;
        Ok(p.propose(n, scorer)?)
    })
}

pub(crate) extern "C" fn observe(id: u64, measured: RStr<'_>) -> RResult<RString, RString> {
    with("policy_observe", id, |p| {
        let obs: Vec<Observation> = unseal(measured.as_str())?;
        Ok(p.observe(&obs))
    })
}

pub(crate) extern "C" fn lower(id: u64, candidates: RStr<'_>) -> RResult<RString, RString> {
    with("policy_lower", id, |p| {
        let descs: Vec<ScheduleDesc> = unseal(candidates.as_str())?;
        Ok(p.lower(&descs))
    })
}

pub(crate) extern "C" fn reference(id: u64) -> RResult<RString, RString> {
    with("policy_reference", id, |p| {
        p.reference().map_err(EntryError::Policy)
    })
}

pub(crate) extern "C" fn drop_policy(id: u64) -> RResult<(), RString> {
    guard("policy_drop", || take(id).map(drop))
}
