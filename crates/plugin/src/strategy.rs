//! The core's side of a plugin's search strategy: [`PluginStrategy`] is the core's
//! `StrategyFactory` for a strategy a plugin provides, and [`PluginPolicy`] the core's
//! `SearchPolicy` over a policy handle. Every call is one sealed `PolicyCall` through the
//! root module's `policy_call`, its answer one sealed `PolicyAnswer`; the scorer the session passes is called back
//! through a trampoline. A plugin's error becomes a `PolicyError` that names the plugin.

use crate::loader::LoadedPlugin;
use crate::policy_call::{PolicyAnswer, PolicyCall};
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

/// Sends `call` on `handle` through `plugin`'s `policy_call` entry and unseals the
/// answer; a refusal comes back as the plugin's sealed `PolicyError` where it sent one.
fn send(
    plugin: &LoadedPlugin,
    handle: u64,
    call: &PolicyCall,
    scorer: ScorerCallback,
) -> Result<PolicyAnswer, PolicyError> {
    let what = call.name();
    let sealed = seal(call);
    let text = (plugin.root.policy_call())(handle, RStr::from_str(&sealed), scorer)
        .into_result()
        .map_err(|e| {
            unseal::<PolicyError>(e.as_str())
                .unwrap_or_else(|_| failed(plugin, format!("{what}: {e}")))
        })?;
    unseal(text.as_str()).map_err(|e| failed(plugin, format!("{what}: {e}")))
}

/// A scorer callback for the calls that score nothing.
fn no_scorer() -> ScorerCallback {
    extern "C" fn refuse(_: usize, _: RString) -> RResult<RString, RString> {
        RResult::RErr("no scorer in this call".into())
    }
    ScorerCallback {
        ctx: 0,
        call: refuse,
    }
}

/// The plugin answered `call` with another kind of answer.
fn unexpected(plugin: &LoadedPlugin, call: &str, answer: &PolicyAnswer) -> PolicyError {
    failed(plugin, format!("{call}: answered `{}`", answer.name()))
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
        let call = PolicyCall::Create {
            strategy: self.name.clone(),
            task: Box::new(task.clone()),
            options: options.clone(),
        };
        let handle = match send(&self.plugin, 0, &call, no_scorer())? {
            PolicyAnswer::Created(h) => h,
            other => return Err(unexpected(&self.plugin, "create", &other)),
        };
        let mut policy = PluginPolicy {
            plugin: self.plugin.clone(),
            handle,
            info: None,
        };
        match policy.call(&PolicyCall::Info, no_scorer())? {
            PolicyAnswer::Info(info) => policy.info = Some(info),
            other => return Err(unexpected(&self.plugin, "info", &other)),
        }
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
    /// Sends `call` on this policy's handle.
    fn call(&self, call: &PolicyCall, scorer: ScorerCallback) -> Result<PolicyAnswer, PolicyError> {
        send(&self.plugin, self.handle, call, scorer)
    }
}

impl Drop for PluginPolicy {
    fn drop(&mut self) {
        // nothing to do if it fails: the plugin has dropped it or never had it
        let _ = self.call(&PolicyCall::Drop, no_scorer());
    }
}
/// The session's scorer, as the plugin calls it.
extern "C" fn score_trampoline(ctx: usize, programs: RString) -> RResult<RString, RString> {
    type Callback<'a> = &'a mut dyn Scorer;
    // SAFETY: `ctx` is the address of the `Callback` in `propose`, alive for the whole
    // `policy_call` (Propose) that hands it out, and used on that call's thread only.
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
        let call = PolicyCall::Propose {
            n: n as u64,
            with_scorer,
        };
        match self.call(&call, callback)? {
            PolicyAnswer::Proposals(p) => Ok(p),
            other => Err(unexpected(&self.plugin, "propose", &other)),
        }
    }

    fn observe(&mut self, measured: &[Observation]) -> Vec<Result<(), PolicyError>> {
        let call = PolicyCall::Observe {
            measured: measured.to_vec(),
        };
        match self.call(&call, no_scorer()) {
            Ok(PolicyAnswer::Observed(v)) => v,
            Ok(other) => vec![Err(unexpected(&self.plugin, "observe", &other)); measured.len()],
            Err(e) => vec![Err(e); measured.len()],
        }
    }

    fn lower(&self, candidates: &[ScheduleDesc]) -> Vec<Result<PrimFunc, PolicyError>> {
        let call = PolicyCall::Lower {
            candidates: candidates.to_vec(),
        };
        match self.call(&call, no_scorer()) {
            Ok(PolicyAnswer::Lowered(v)) => v,
            Ok(other) => vec![Err(unexpected(&self.plugin, "lower", &other)); candidates.len()],
            Err(e) => vec![Err(e); candidates.len()],
        }
    }

    fn reference(&self) -> Result<PrimFunc, PolicyError> {
        match self.call(&PolicyCall::Reference, no_scorer())? {
            PolicyAnswer::Reference(f) => Ok(f),
            other => Err(unexpected(&self.plugin, "reference", &other)),
        }
    }
}
