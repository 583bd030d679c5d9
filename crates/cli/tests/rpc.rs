//! `tessera rpc tracker` and `tessera rpc queue` through the binary: the tracker prints
//! where it listens, servers registered with it show in the queue with TVM's `key total
//! free pending` table, and a wrong token, a dead tracker and a missing token are one
//! clear error line each.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;
use tessera_rpc::TrackerClient;

const TOKEN: &str = "t0ken";

/// A tracker process, killed when dropped.
struct Tracker {
    child: Child,
    addr: String,
}

impl Drop for Tracker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_tracker() -> Tracker {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["rpc", "tracker", "--port", "0", "--token", TOKEN])
        .env_remove("TESSERA_RPC_TOKEN")
        .stdout(Stdio::piped())
        .spawn()
        .expect("starts the tracker");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("RPC tracker listening on ")
        .unwrap_or_else(|| panic!("{line}"))
        .to_string();
    Tracker { child, addr }
}

fn queue(addr: &str, token: Option<&str>) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tessera"));
    c.args(["rpc", "queue", "--tracker", addr, "--timeout", "2"])
        .env_remove("TESSERA_RPC_TOKEN");
    if let Some(t) = token {
        c.env("TESSERA_RPC_TOKEN", t);
    }
    c.output().unwrap()
}

fn one_line_error(out: &Output, what: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains(what), "`{what}` not in: {err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

#[test]
fn the_queue_shows_the_registered_servers_per_key() {
    let t = start_tracker();
    let mut c = TrackerClient::connect(&t.addr, TOKEN, Duration::from_secs(5)).unwrap();
    c.put("mali", "127.0.0.1:9091", "a", true).unwrap();
    c.put("mali", "127.0.0.1:9092", "b", true).unwrap();
    c.put("cpu", "127.0.0.1:9093", "c", true).unwrap();
    let held = c.request("mali", 0, Duration::from_secs(5)).unwrap();
    let out = queue(&t.addr, Some(TOKEN));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with(&format!("Tracker address {}", t.addr)),
        "{text}"
    );
    for s in [
        "127.0.0.1:9091\tserver:mali",
        "127.0.0.1:9093\tserver:cpu",
        "(busy)",
    ] {
        assert!(text.contains(s), "{s} not in:\n{text}");
    }
    let rows: Vec<String> = text
        .lines()
        .filter(|l| l.starts_with("mali ") || l.starts_with("cpu "))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(rows, vec!["cpu 1 1 0", "mali 2 1 0"], "{text}");
    c.release(&held).unwrap();
}

#[test]
fn a_wrong_token_a_dead_tracker_and_no_token_are_one_line_each() {
    let t = start_tracker();
    one_line_error(&queue(&t.addr, Some("nope")), "refused the token");
    one_line_error(&queue(&t.addr, None), "no RPC token");
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_addr = dead.local_addr().unwrap().to_string();
    drop(dead);
    one_line_error(
        &queue(&dead_addr, Some(TOKEN)),
        &format!("cannot reach the RPC tracker at {dead_addr}"),
    );
}
