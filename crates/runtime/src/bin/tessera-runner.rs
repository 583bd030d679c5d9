//! `tessera-runner JOB.json`: runs one built kernel as described by a
//! `tessera_runtime::runner::RunJob` and prints a `RunReply` as one JSON line. Started by
//! the tuner's measurement, one process per candidate, so that a crash or a hang is the
//! candidate's error and not the tuner's.

use std::process::ExitCode;
use tessera_runtime::runner::{execute, RunJob, RunReply};

fn main() -> ExitCode {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: tessera-runner JOB.json");
        return ExitCode::from(2);
    };
    let reply = match std::fs::read(&path)
        .map_err(|e| format!("{path}: {e}"))
        .and_then(|b| serde_json::from_slice::<RunJob>(&b).map_err(|e| format!("{path}: {e}")))
    {
        Ok(job) => execute(&job),
        Err(message) => RunReply::Failed { message },
    };
    match serde_json::to_string(&reply) {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("cannot encode the reply: {e}");
            ExitCode::from(3)
        }
    }
}
