//! Child processes with a time limit: the C compiler here, the runner processes of
//! measurement (`tessera_search::runner_process`).

use std::io::Read;
use std::process::{Child, Command, Output};
use std::time::Duration;
use wait_timeout::ChildExt;

/// Makes the child that `cmd` spawns lead a process group of its own, so that a timeout
/// kills what it started too. A compiler driver (`gcc`) runs `cc1`, `as` and `ld` as its
/// children: killing the driver alone leaves them running, orphaned, for as long as they
/// take (a heavily unrolled kernel: minutes of a core that the next measurements share),
/// and their temporary files are never removed.
pub fn own_process_group(cmd: &mut Command) -> &mut Command {
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
    }
    cmd
}

/// Kills `child`, and every process of its group when it leads one (see
/// [`own_process_group`]).
fn kill(child: &mut Child) {
    #[cfg(unix)]
    {
        if let Ok(pid) = libc::pid_t::try_from(child.id()) {
            // SAFETY: plain system calls on a child we have not reaped yet, so its pid
            // (and the group it leads, if any) cannot have been reused.
            unsafe {
                if libc::getpgid(pid) == pid {
                    libc::killpg(pid, libc::SIGKILL);
                }
            }
        }
    }
    let _ = child.kill();
}

/// Waits for `child` up to `limit` (zero: not at all), then kills it (with its process
/// group, when it leads one) and reaps it: its exit status. For a child whose pipes
/// others read.
pub fn wait_or_kill(
    child: &mut Child,
    limit: Duration,
) -> std::io::Result<std::process::ExitStatus> {
    if let Some(status) = child.wait_timeout(limit)? {
        return Ok(status);
    }
    kill(child);
    child.wait()
}

/// Waits for `child` up to `limit` while reading its piped stdout and stderr (so a chatty
/// child cannot block on a full pipe); kills it (with its process group, when it leads
/// one) and returns `None` on timeout.
pub fn wait_with_timeout(mut child: Child, limit: Duration) -> std::io::Result<Option<Output>> {
    fn drain(pipe: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<Vec<u8>> {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut buf);
            }
            buf
        })
    }
    let out = drain(child.stdout.take());
    let err = drain(child.stderr.take());
    match child.wait_timeout(limit)? {
        Some(status) => Ok(Some(Output {
            status,
            stdout: out.join().unwrap_or_default(),
            stderr: err.join().unwrap_or_default(),
        })),
        None => {
            kill(&mut child);
            let _ = child.wait();
            let _ = out.join();
            let _ = err.join();
            Ok(None)
        }
    }
}
