//! The plugin side of the search-strategy entry point: a table of the policies this
//! library has created (handle → the plugin's `SearchPolicy`) and the answer to each
//! sealed [`PolicyCall`] (`policy_call`). A policy is taken out of the table while it
//! runs, so the table's lock is never held across the core's scoring callback.

use crate::policy_call::{PolicyAnswer, PolicyCall};
use crate::{guard, seal, unseal, EntryError, Plugin, ScorerCallback};
use abi_stable::std_types::{RResult, RStr, RString};
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use tessera_ir::PrimFunc;
use tessera_policy::{Scorer, SearchPolicy};

type Table = Mutex<(u64, HashMap<u64, Box<dyn SearchPolicy>>)>;

fn table() -> &'static Table {
    static T: OnceLock<Table> = OnceLock::new();
    T.get_or_init(|| Mutex::new((0, HashMap::new())))
}

/// Keeps `policy` for the core's later calls: its handle.
fn register(policy: Box<dyn SearchPolicy>) -> u64 {
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

/// Runs `f` on policy `id` (taken out of the table meanwhile). A policy that panics is
/// dropped: its state is not to be trusted.
fn with<T>(
    id: u64,
    f: impl FnOnce(&mut dyn SearchPolicy) -> Result<T, EntryError>,
) -> Result<T, EntryError> {
    let mut p = take(id)?;
    let r = f(p.as_mut());
    put_back(id, p);
    r
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

/// Answers `call` on policy `id` of `plugin`'s: the entry point `policy_call`.
pub(crate) fn answer(
    plugin: &dyn Plugin,
    id: u64,
    call: RStr<'_>,
    scorer: ScorerCallback,
) -> RResult<RString, RString> {
    guard("policy_call", || {
        let call: PolicyCall = unseal(call.as_str())?;
        let answer = match call {
            PolicyCall::Create {
                strategy,
                task,
                options,
            } => PolicyAnswer::Created(register(
                plugin
                    .create_policy(&strategy, &task, &options)
                    .map_err(EntryError::Create)?,
            )),
            PolicyCall::Drop => {
                drop(take(id)?);
                PolicyAnswer::Dropped
            }
            PolicyCall::Info => PolicyAnswer::Info(with(id, |p| Ok(p.info()))?),
            PolicyCall::Propose { n, with_scorer } => {
                let n = usize::try_from(n)?;
                let mut remote = Remote(scorer);
                let scorer: Option<&mut dyn Scorer> =
                    if with_scorer { Some(&mut remote) } else { None };
                PolicyAnswer::Proposals(with(id, |p| Ok(p.propose(n, scorer)?))?)
            }
            PolicyCall::Observe { measured } => {
                PolicyAnswer::Observed(with(id, |p| Ok(p.observe(&measured)))?)
            }
            PolicyCall::Lower { candidates } => {
                PolicyAnswer::Lowered(with(id, |p| Ok(p.lower(&candidates)))?)
            }
            PolicyCall::Reference => PolicyAnswer::Reference(with(id, |p| Ok(p.reference()?))?),
        };
        Ok(RString::from(seal(&answer)))
    })
}
