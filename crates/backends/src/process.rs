//! Child processes with a time limit: the C compiler here, the kernel runner in
//! measurement.

use std::io::Read;
use std::process::{Child, Output};
use std::time::Duration;
use wait_timeout::ChildExt;

/// Waits for `child` up to `limit` while reading its piped stdout and stderr (so a chatty
/// child cannot block on a full pipe); kills it and returns `None` on timeout.
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
            let _ = child.kill();
            let _ = child.wait();
            let _ = out.join();
            let _ = err.join();
            Ok(None)
        }
    }
}
