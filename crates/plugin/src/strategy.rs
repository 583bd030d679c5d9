//! The core's side of a plugin's search strategy: [`PluginStrategy`] is the core's
//! `StrategyFactory` for a strategy a plugin provides, and [`PluginPolicy`] the core's
//! `SearchPolicy` over a policy handle. Every call seals its arguments, goes through the
//! root module and unseals the answer; the scorer the session passes is called back
//! through a trampoline. A plugin's error becomes a `PolicyError` that names the plugin.

use crate::loader::LoadedPlugin;
use crate::{seal, unseal, ScorerCallback, SealError};
use abi_stable::std_types::{RResult, RStr, RString};
use tessera_ir::PrimFunc;
use tessera_policy::ScheduleDesc;
use tessera_policy::{
    Observation, PolicyError, PolicyInfo, PolicyOptions, Proposal, Scorer, SearchPolicy,
    SearchTask, StrategyFactory,
};

/// A strategy of a loaded plugin.
#[derive(Debug)]
pub struct PluginStrategy {
    plugin: LoadedPlugin,
    name: String,
}

impl PluginStrategy {
    pub(crate) fn new(plugin: LoadedPlugin, name: &str) -> Self {
        PluginStrategy {
            plugin,
            name: name.to_string(),
        }
    }
}

fn failed(plugin: &LoadedPlugin, message: impl std::fmt::Display) -> PolicyError {
    PolicyError::Failed(format!("plugin `{}`: {message}", plugin.name))
}

impl StrategyFactory for PluginStrategy {
    fn name(&self) -> &str {
        &self.name
    }

    fn create(
        &self,
        task: &SearchTask,
        options: &PolicyOptions,
    ) -> Result<Box<dyn SearchPolicy>, PolicyError> {
        let (t, o) = (seal(task), seal(options));
        let handle = (self.plugin.root.policy_create())(
            RStr::from_str(&self.name),
            RStr::from_str(&t),
            RStr::from_str(&o),
        )
        .into_result()
        .map_err(|e| {
            // the plugin's own typed error when it sent one, else its message
            unseal::<PolicyError>(e.as_str()).unwrap_or_else(|_| failed(&self.plugin, e))
        })?;
        let mut policy = PluginPolicy {
            plugin: self.plugin.clone(),
            handle,
            info: None,
        };
        let info = policy.call("policy_info", |r, h| (r.policy_info())(h))?;
        policy.info = Some(info);
        Ok(Box::new(policy))
    }
}

/// A policy living in a plugin, reached through its handle; dropped there when this is
/// dropped.
pub struct PluginPolicy {
    plugin: LoadedPlugin,
    handle: u64,
    info: Option<PolicyInfo>,
}

impl PluginPolicy {
    /// Calls an entry point with this policy's handle and unseals its answer.
    fn call<T: for<'de> serde::Deserialize<'de>>(
        &self,
        what: &str,
        f: impl FnOnce(&crate::PluginRootRef, u64) -> RResult<RString, RString>,
    ) -> Result<T, PolicyError> {
        let text = f(&self.plugin.root, self.handle)
            .into_result()
            .map_err(|e| failed(&self.plugin, format!("{what}: {e}")))?;
        unseal(text.as_str()).map_err(|e| failed(&self.plugin, format!("{what}: {e}")))
    }
}

impl Drop for PluginPolicy {
    fn drop(&mut self) {
        // nothing to do if it fails: the plugin has dropped it or never had it
        let _ = (self.plugin.root.policy_drop())(self.handle);
    }
}

/// The session's scorer, as the plugin calls it.
extern "C" fn score_trampoline(ctx: usize, programs: RString) -> RResult<RString, RString> {
    type Callback<'a> = &'a mut dyn Scorer;
    // SAFETY: `ctx` is the address of the `Callback` in `propose`, alive for the whole
    // `policy_propose` call that hands it out, and used on that call's thread only.
    let scorer = unsafe { &mut *(ctx as *mut Callback<'_>) };
    let run = || -> Result<String, SealError> {
        let funcs: Vec<PrimFunc> = unseal(programs.as_str())?;
        let scores: Vec<Option<f32>> = scorer
            .score(&funcs)
            .into_iter()
            .map(|s| s.is_finite().then_some(s))
            .collect();
        Ok(seal(&scores))
    };
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)) {
        Ok(Ok(s)) => RResult::ROk(s.into()),
        Ok(Err(e)) => RResult::RErr(e.to_string().into()),
        Err(_) => RResult::RErr("the scorer panicked".into()),
    }
}

impl SearchPolicy for PluginPolicy {
    fn info(&self) -> PolicyInfo {
        self.info.clone().unwrap_or_else(|| PolicyInfo {
            workload_key: String::new(),
            record_name: String::new(),
            uses_scorer: false,
        })
    }

    fn propose(
        &mut self,
        n: usize,
        scorer: Option<&mut dyn Scorer>,
    ) -> Result<Vec<Proposal>, PolicyError> {
        let with_scorer = scorer.is_some();
        let mut none = |_: &[PrimFunc]| Vec::new();
        let mut cb: &mut dyn Scorer = match scorer {
            Some(s) => s,
            None => &mut none,
        };
        let callback = ScorerCallback {
            ctx: &mut cb as *mut &mut dyn Scorer as usize,
            call: score_trampoline,
        };
        self.call("policy_propose", |r, h| {
            (r.policy_propose())(h, n as u64, callback, with_scorer)
        })
    }

    fn observe(&mut self, measured: &[Observation]) -> Vec<Result<(), PolicyError>> {
        let sealed = seal(&measured);
        self.call("policy_observe", |r, h| {
            (r.policy_observe())(h, RStr::from_str(&sealed))
        })
        .unwrap_or_else(|e| vec![Err(e); measured.len()])
    }

    fn lower(&self, candidates: &[ScheduleDesc]) -> Vec<Result<PrimFunc, PolicyError>> {
        let sealed = seal(&candidates);
        self.call("policy_lower", |r, h| {
            (r.policy_lower())(h, RStr::from_str(&sealed))
        })
        .unwrap_or_else(|e| vec![Err(e); candidates.len()])
    }

    fn reference(&self) -> Result<PrimFunc, PolicyError> {
        self.call("policy_reference", |r, h| (r.policy_reference())(h))
    }
}
