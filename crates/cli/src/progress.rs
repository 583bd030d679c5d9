//! The progress of a command's phases that take more than a second (a tune's baselines
//! and re-measurement, the in-network check, the closing comparison, compiling a
//! network): on a terminal an indicatif bar with the time left; otherwise a plain
//! `NAME: DONE/TOTAL …, about T s left` line on stderr, at most one a second and the
//! last one always. The time left is the rate so far times the steps left.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// One phase: `total` steps, reported as they are done.
pub(crate) struct Phase {
    name: String,
    total: usize,
    start: Instant,
    last_line: Option<Instant>,
    bar: Option<indicatif::ProgressBar>,
}

/// `name: done/total in E s, about T s left` (no estimate before the first step).
pub(crate) fn phase_line(name: &str, done: usize, total: usize, elapsed: f64) -> String {
    let left = if done == 0 || done >= total {
        String::new()
    } else {
        let rate = elapsed / done as f64;
        format!(", about {:.0} s left", rate * (total - done) as f64)
    };
    format!("{name}: {done}/{total} in {elapsed:.0} s{left}")
}

impl Phase {
    pub(crate) fn new(name: impl Into<String>, total: usize) -> Phase {
        let name = name.into();
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = indicatif::ProgressBar::new(total as u64);
            let style = indicatif::ProgressStyle::with_template(
                "{msg} {bar:30} {pos}/{len}, {elapsed} elapsed, ETA {eta}",
            )
            .expect("a valid template");
            bar.set_style(style);
            bar.set_message(name.clone());
            bar
        });
        Phase {
            name,
            total,
            start: Instant::now(),
            last_line: None,
            bar,
        }
    }

    /// `done` of the steps are done (the phase ends at `total`).
    pub(crate) fn set(&mut self, done: usize) {
        let elapsed = self.start.elapsed().as_secs_f64();
        let end = done >= self.total;
        match &self.bar {
            Some(bar) => {
                bar.set_position(done as u64);
                if end {
                    bar.finish_and_clear();
                    eprintln!("{}", phase_line(&self.name, done, self.total, elapsed));
                }
            }
            None => {
                let due = self
                    .last_line
                    .is_none_or(|t| t.elapsed() >= Duration::from_secs(1));
                if end || (done > 0 && due) {
                    eprintln!("{}", phase_line(&self.name, done, self.total, elapsed));
                    self.last_line = Some(Instant::now());
                }
            }
        }
    }

    /// Runs `f` with the bar hidden, so that text printed meanwhile does not tear it.
    pub(crate) fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        match &self.bar {
            Some(bar) => bar.suspend(f),
            None => f(),
        }
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }
}
