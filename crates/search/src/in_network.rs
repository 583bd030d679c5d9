//! Each kernel as it ran inside the network against the same schedule measured alone:
//! the per-step profile of a build (`GraphModule::profile`, on the device's clock where
//! it has one) joined with the log it was built from, step by step, through the
//! workload keys. A tune's estimated latency is the sum of the alone times; where a
//! kernel takes longer among the others (cold caches, lower clocks, a launch gap), its
//! ratio says which one and by how much.

use crate::record::{ApplyHistoryBest, LoadedLog};

/// One step of a run.
#[derive(Clone, Debug, PartialEq)]
pub struct StepTime {
    /// The step's position in the run.
    pub step: usize,
    /// The fused group's name.
    pub kernel: String,
    pub in_network_ms: f64,
    /// The log's time of the schedule the build took for it (its best record, or the
    /// schedule an in-network check chose instead); `None` where the log has no
    /// record of its workload.
    pub alone_ms: Option<f64>,
}

impl StepTime {
    /// In the network over alone.
    pub fn ratio(&self) -> Option<f64> {
        self.alone_ms
            .filter(|&a| a > 0.0)
            .map(|a| self.in_network_ms / a)
    }
}

/// `profile` (name and ms per step, in run order) with each step's alone time from
/// `log` (none without one), the steps' workload keys `keys` (in the same order) on
/// `target`.
pub fn against_log(
    profile: &[(String, f64)],
    keys: &[&str],
    target: &str,
    log: Option<&LoadedLog>,
) -> Vec<StepTime> {
    let history = log.map(ApplyHistoryBest::from_log);
    profile
        .iter()
        .zip(keys)
        .enumerate()
        .map(|(step, ((kernel, ms), key))| StepTime {
            step,
            kernel: kernel.clone(),
            in_network_ms: *ms,
            alone_ms: history
                .as_ref()
                .and_then(|h| h.query(key, target))
                .filter(|r| r.result.is_ok())
                .map(|r| r.result.mean_cost() * 1e3),
        })
        .collect()
}

/// The sums over the steps the log knows: (in the network, alone) in ms.
pub fn totals(steps: &[StepTime]) -> (f64, f64) {
    steps
        .iter()
        .filter_map(|s| s.alone_ms.map(|a| (s.in_network_ms, a)))
        .fold((0.0, 0.0), |(n, a), (sn, sa)| (n + sn, a + sa))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(inside: f64, alone: Option<f64>) -> StepTime {
        StepTime {
            step: 0,
            kernel: "k".into(),
            in_network_ms: inside,
            alone_ms: alone,
        }
    }

    #[test]
    fn sums_count_only_the_steps_the_log_knows() {
        let steps = [step(2.0, Some(1.0)), step(5.0, None), step(1.0, Some(1.0))];
        assert_eq!(totals(&steps), (3.0, 2.0));
        assert_eq!(steps[0].ratio(), Some(2.0));
        assert_eq!(steps[1].ratio(), None);
        assert_eq!(step(1.0, Some(0.0)).ratio(), None);
        let log = crate::record::parse_log(b"");
        assert!(against_log(&[], &[], "cpu", Some(&log)).is_empty());
        let unlogged = against_log(&[("k".into(), 1.0)], &["key"], "cpu", None);
        assert_eq!(unlogged, [step(1.0, None)]);
    }
}
