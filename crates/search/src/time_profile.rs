//! Where a tuning session's time went: the search, the cost model, the log, building
//! and running the candidates, and inside each runner job its load, inputs, check and
//! timing (`tessera_runtime::runner::JobProfile`).
//!
//! A tuner is as fast as its slowest part, and which part that is depends on the
//! device: on a CPU the measurement policy and the C compiler, on a GPU the device
//! compiler and how the builds overlap the runs. The profile is printed at the end of
//! every `tessera tune`, so a slow session says why without another tool.

use serde::Serialize;
use std::fmt;
use tessera_runtime::runner::JobProfile;

/// Runner jobs and the sums of where their time went (`JobProfile`s).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct JobSums {
    pub jobs: usize,
    pub load: f64,
    pub inputs: f64,
    pub check: f64,
    pub timing: f64,
}

impl JobSums {
    /// Adds one job's profile.
    pub fn add(&mut self, p: &JobProfile) {
        self.jobs += 1;
        self.load += p.load;
        self.inputs += p.inputs;
        self.check += p.check;
        self.timing += p.timing;
    }

    fn total(&self) -> f64 {
        self.load + self.inputs + self.check + self.timing
    }

    fn since(&self, earlier: &JobSums) -> JobSums {
        JobSums {
            jobs: self.jobs.saturating_sub(earlier.jobs),
            load: self.load - earlier.load,
            inputs: self.inputs - earlier.inputs,
            check: self.check - earlier.check,
            timing: self.timing - earlier.timing,
        }
    }
}

/// The measurer's part: building and running candidates (seconds).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MeasureProfile {
    /// Candidates handed to the measurer (built or not).
    pub candidates: usize,
    /// The builders' working time, summed over candidates (more than the wall time when
    /// several build at once).
    pub build_work: f64,
    /// Wall time the runs waited for builds: all of the building when builds and runs
    /// take turns, only what the runs could not hide when they overlap.
    pub build_wait: f64,
    /// Wall time preparing candidates in parallel runners (`crate::prepare`), and
    /// those jobs.
    pub prepare: f64,
    pub prepared: JobSums,
    /// Wall time in the timing runner's jobs, from handing a job over to its reply, and
    /// those jobs (the ones that said where their time went).
    pub run: f64,
    pub timed: JobSums,
    /// Batches whose builds overlapped their runs (the device does not compute on the
    /// host's cores).
    pub overlapped_batches: usize,
    pub batches: usize,
}

impl MeasureProfile {
    /// What was added since `earlier` (a copy of this profile taken before).
    pub fn since(&self, earlier: &MeasureProfile) -> MeasureProfile {
        MeasureProfile {
            candidates: self.candidates.saturating_sub(earlier.candidates),
            build_work: self.build_work - earlier.build_work,
            build_wait: self.build_wait - earlier.build_wait,
            prepare: self.prepare - earlier.prepare,
            prepared: self.prepared.since(&earlier.prepared),
            run: self.run - earlier.run,
            timed: self.timed.since(&earlier.timed),
            overlapped_batches: self
                .overlapped_batches
                .saturating_sub(earlier.overlapped_batches),
            batches: self.batches.saturating_sub(earlier.batches),
        }
    }

    /// The timing runner's time its jobs' phases do not account for: handing the job
    /// over, reading it, starting a runner process, the reply.
    pub fn runner_overhead(&self) -> f64 {
        (self.run - self.timed.total()).max(0.0)
    }
}

/// A whole session's profile (seconds).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SessionProfile {
    /// Proposing candidates (the policies' search, the cost model's ranking included).
    pub search: f64,
    /// Extracting the cost model's features of measured programs.
    pub features: f64,
    /// Training the cost model.
    pub training: f64,
    /// Appending records to the log.
    pub logging: f64,
    pub measure: MeasureProfile,
    /// The rounds' wall time (baselines and re-measurement not included).
    pub total: f64,
    /// Trials measured in the rounds.
    pub trials: usize,
}

impl SessionProfile {
    /// Trials a minute over the rounds' wall time, when there was any.
    pub fn trials_per_minute(&self) -> Option<f64> {
        (self.total > 0.0 && self.trials > 0).then(|| self.trials as f64 * 60.0 / self.total)
    }
}

impl fmt::Display for SessionProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = &self.measure;
        write!(
            f,
            "where the time went: {:.1} s for {} trials",
            self.total, self.trials
        )?;
        if let Some(rate) = self.trials_per_minute() {
            write!(f, " ({rate:.0} a minute)")?;
        }
        writeln!(f)?;
        writeln!(
            f,
            "  search {:.1} s, features {:.1} s, cost model {:.1} s, log {:.1} s",
            self.search, self.features, self.training, self.logging
        )?;
        let overlap = if m.overlapped_batches > 0 {
            format!(
                ", overlapping the runs in {} of {} batches",
                m.overlapped_batches, m.batches
            )
        } else {
            String::new()
        };
        writeln!(
            f,
            "  building: waited {:.1} s ({:.1} s of builder time{overlap})",
            m.build_wait, m.build_work
        )?;
        if m.prepared.jobs > 0 {
            let p = &m.prepared;
            writeln!(
                f,
                "  preparing: {:.1} s, {} jobs in parallel runners (load {:.1}, inputs {:.1}, check {:.1} of their time)",
                m.prepare, p.jobs, p.load, p.inputs, p.check
            )?;
        }
        write!(f, "  running: {:.1} s", m.run)?;
        let t = &m.timed;
        if t.jobs > 0 {
            write!(
                f,
                " (load {:.1}, inputs {:.1}, check {:.1}, timing {:.1}, runner {:.1}; {:.0} ms a job)",
                t.load,
                t.inputs,
                t.check,
                t.timing,
                m.runner_overhead(),
                m.run * 1e3 / t.jobs as f64
            )?;
        }
        writeln!(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runner_overhead_is_what_its_phases_leave() {
        let mut m = MeasureProfile {
            run: 1.0,
            ..Default::default()
        };
        m.timed.add(&JobProfile {
            load: 0.1,
            inputs: 0.1,
            check: 0.2,
            timing: 0.5,
            on_host_cores: true,
        });
        assert!((m.runner_overhead() - 0.1).abs() < 1e-12);
        assert_eq!(m.timed.jobs, 1);
        assert_eq!(m.since(&m).timed, JobSums::default());
    }

    #[test]
    fn the_profile_says_the_rate_and_each_part() {
        let p = SessionProfile {
            search: 1.0,
            total: 30.0,
            trials: 64,
            measure: MeasureProfile {
                run: 6.4,
                timed: JobSums {
                    jobs: 64,
                    timing: 5.0,
                    ..Default::default()
                },
                build_wait: 4.0,
                build_work: 8.0,
                batches: 1,
                ..Default::default()
            },
            ..Default::default()
        };
        let text = p.to_string();
        assert!(text.contains("64 trials (128 a minute)"), "{text}");
        assert!(
            text.contains("waited 4.0 s (8.0 s of builder time)"),
            "{text}"
        );
        assert!(
            text.contains("timing 5.0, runner 1.4; 100 ms a job"),
            "{text}"
        );
        assert_eq!(SessionProfile::default().trials_per_minute(), None);
    }
}
