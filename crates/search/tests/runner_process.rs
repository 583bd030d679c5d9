//! The reused runner process (`RunnerProcess`), driven through a stand-in runner: a shell
//! script that speaks the runner's protocol (one job path per input line, one marked
//! reply line each) and whose reply's cost is its process id, so that each result says
//! which process ran it. What a job does is in its name: `crash` kills the runner with
//! SIGSEGV, `hang` sleeps, `fail` replies a device failure, `chatter` prints around its
//! reply; any other job replies its pid.

use std::path::{Path, PathBuf};
use std::time::Duration;
use tessera_search::runner_process::{serve_jobs, RunnerProcess, REPLY_MARK};
use tessera_search::MeasureErrorNo;

const SCRIPT: &str = r#"#!/bin/sh
[ "$1" = runner ] || exit 9
while read -r job; do
  case "$job" in
    *crash*) echo "about to crash" >&2; kill -SEGV $$ ;;
    *hang*) sleep 30 ;;
    *fail*) printf '\001tessera-reply {"status":"failed","message":"launch failed"}\n' ;;
    *chatter*) printf 'a device library says hello\nand more '
               printf '\001tessera-reply {"status":"ok","costs":[%s]}\n' $$
               echo "after" ;;
    *) printf '\001tessera-reply {"status":"ok","costs":[%s]}\n' $$ ;;
  esac
done
"#;

/// The stand-in runner, written once per test process by a shell of its own: a file this
/// process had open for writing could be inherited, for the instant between fork and
/// exec, by a runner another test thread starts, and executing it would then fail with
/// "text file busy".
fn stand_in() -> PathBuf {
    static SCRIPT_PATH: std::sync::OnceLock<(tempfile::TempDir, PathBuf)> =
        std::sync::OnceLock::new();
    let (_, path) = SCRIPT_PATH.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("runner.sh");
        let mut sh = std::process::Command::new("sh")
            .arg("-c")
            .arg("cat > \"$1\" && chmod 755 \"$1\"")
            .arg("sh")
            .arg(&path)
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        sh.stdin
            .take()
            .unwrap()
            .write_all(SCRIPT.as_bytes())
            .unwrap();
        assert!(sh.wait().unwrap().success());
        (dir, path)
    });
    path.clone()
}

/// Runs the job named `name`: (its error kind, the pid that ran it if it succeeded).
fn run(p: &mut RunnerProcess, name: &str) -> (MeasureErrorNo, Option<u32>) {
    let r = p.run(Path::new(name), Duration::from_secs(5));
    let pid = r.costs.first().filter(|_| r.is_ok()).map(|&c| c as u32);
    (r.error_no, pid)
}

#[test]
fn one_process_runs_job_after_job() {
    let mut p = RunnerProcess::new(stand_in());
    assert_eq!(p.pid(), None, "nothing starts before the first job");
    let pids: Vec<u32> = (0..5)
        .map(|i| {
            let (kind, pid) = run(&mut p, &format!("job{i}"));
            assert_eq!(kind, MeasureErrorNo::NoError);
            pid.unwrap()
        })
        .collect();
    assert!(pids.iter().all(|&q| q == pids[0]), "{pids:?}");
    assert_eq!(p.pid(), Some(pids[0]));
}

#[test]
fn a_crash_is_its_jobs_error_and_the_next_job_gets_a_new_process() {
    let mut p = RunnerProcess::new(stand_in());
    let (_, first) = run(&mut p, "good");
    let r = p.run(Path::new("crash"), Duration::from_secs(5));
    assert_eq!(r.error_no, MeasureErrorNo::RuntimeDevice, "{r:?}");
    let msg = r.error_msg.unwrap();
    assert!(msg.contains("SIGSEGV"), "{msg}");
    assert!(msg.contains("about to crash"), "its standard error: {msg}");
    let (kind, next) = run(&mut p, "good");
    assert_eq!(kind, MeasureErrorNo::NoError);
    assert_ne!(next, first);
}

#[test]
fn a_hang_is_a_run_timeout_and_the_process_is_replaced() {
    let mut p = RunnerProcess::new(stand_in());
    let (_, first) = run(&mut p, "good");
    let hung = first.unwrap();
    let r = p.run(Path::new("hang"), Duration::from_millis(300));
    assert_eq!(r.error_no, MeasureErrorNo::RunTimeout, "{r:?}");
    assert_eq!(p.pid(), None);
    // the hung process is gone, not left sleeping
    assert!(
        !Path::new(&format!("/proc/{hung}")).exists(),
        "the hung runner {hung} still runs"
    );
    let (kind, next) = run(&mut p, "good");
    assert_eq!(kind, MeasureErrorNo::NoError);
    assert_ne!(next, first);
}

#[test]
fn a_device_failure_retires_the_process() {
    let mut p = RunnerProcess::new(stand_in());
    let (_, first) = run(&mut p, "good");
    let r = p.run(Path::new("fail"), Duration::from_secs(5));
    assert_eq!(r.error_no, MeasureErrorNo::RuntimeDevice);
    assert_eq!(r.error_msg.as_deref(), Some("launch failed"));
    assert_eq!(p.pid(), None, "a device that failed may be broken");
    let (_, next) = run(&mut p, "good");
    assert_ne!(next, first);
}

#[test]
fn a_restart_starts_the_next_job_in_a_new_process() {
    let mut p = RunnerProcess::new(stand_in());
    let (_, first) = run(&mut p, "good");
    p.restart();
    assert_eq!(p.pid(), None);
    let (kind, next) = run(&mut p, "good");
    assert_eq!(kind, MeasureErrorNo::NoError);
    assert_ne!(next, first);
}

/// A runner killed from outside between two jobs costs the next job nothing: it goes to
/// a new process.
#[test]
fn a_runner_killed_between_jobs_is_replaced_without_failing_the_next_job() {
    let mut p = RunnerProcess::new(stand_in());
    let (_, first) = run(&mut p, "good");
    let pid = p.pid().unwrap();
    assert_eq!(Some(pid), first);
    let killed = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    // wait until it is gone (a zombie: its pipes closed, not reaped yet)
    let gone = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| {
                s.rsplit_once(')')
                    .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
            })
            .unwrap_or(true)
    };
    for _ in 0..1000 {
        if gone() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(gone(), "runner {pid} still runs after SIGKILL");
    let (kind, next) = run(&mut p, "good");
    assert_eq!(kind, MeasureErrorNo::NoError);
    assert_ne!(next, first);
}

#[test]
fn a_process_is_replaced_after_its_share_of_jobs() {
    let mut p = RunnerProcess::new(stand_in()).with_jobs_per_process(2);
    let pids: Vec<Option<u32>> = (0..5).map(|i| run(&mut p, &format!("j{i}")).1).collect();
    assert_eq!(pids[0], pids[1]);
    assert_ne!(pids[1], pids[2]);
    assert_eq!(pids[2], pids[3]);
    assert_ne!(pids[3], pids[4]);
}

#[test]
fn what_a_device_library_prints_around_a_reply_is_ignored() {
    let mut p = RunnerProcess::new(stand_in());
    for _ in 0..3 {
        let (kind, pid) = run(&mut p, "chatter");
        assert_eq!(kind, MeasureErrorNo::NoError);
        assert!(pid.is_some());
    }
}

#[test]
fn a_runner_that_cannot_start_is_an_error_not_a_panic() {
    let mut p = RunnerProcess::new("/nonexistent/tessera");
    let r = p.run(Path::new("job"), Duration::from_secs(1));
    assert_eq!(r.error_no, MeasureErrorNo::Unknown);
    assert!(r.error_msg.unwrap().contains("/nonexistent/tessera"));
}

/// The runner's loop: a job file that cannot be read is that job's failure reply (and,
/// as a failure, ends the loop); every reply is one marked line.
#[test]
fn the_runner_loop_replies_one_marked_line_per_job() {
    let input = "/nonexistent/job.json\n/never/reached.json\n";
    let mut out = Vec::new();
    serve_jobs(input.as_bytes(), &mut out, |_| {
        Err("no device in this test".to_string())
    })
    .unwrap();
    let text = String::from_utf8(out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "{text}");
    assert!(lines[0].starts_with(REPLY_MARK), "{text}");
    assert!(lines[0].contains("\"status\":\"failed\""), "{text}");
    assert!(lines[0].contains("/nonexistent/job.json"), "{text}");
}
