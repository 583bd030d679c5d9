//! The tracker on loopback, through its client: servers register under keys and show in
//! the summary; requests are matched to free servers, wait while all are busy, are
//! served by priority, and fail with the reason after their wait (no server of the key,
//! or all busy); a wrong token and a dead tracker are one clear error each.

use std::net::SocketAddr;
use std::sync::mpsc;
use std::time::{Duration, Instant};
use tessera_rpc::{text_summary, tracker, RpcError, TrackerClient};

const TOKEN: &str = "s3cret";
const T: Duration = Duration::from_secs(5);
/// How long a test waits for something that takes milliseconds on an idle machine and
/// may take seconds on a loaded one.
const LONG: Duration = Duration::from_secs(30);

/// A tracker on a free loopback port, served by a thread for the rest of the test.
fn start() -> String {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
        tracker::serve(addr, TOKEN.into(), |bound| tx.send(bound).unwrap()).unwrap();
    });
    rx.recv_timeout(T).unwrap().to_string()
}

fn client(addr: &str) -> TrackerClient {
    TrackerClient::connect(addr, TOKEN, T).unwrap()
}

#[test]
fn servers_register_and_requests_are_matched_released_and_refused_with_reasons() {
    let addr = start();
    let mut c = client(&addr);
    c.put("mali", "127.0.0.1:9091", "mali-a", true).unwrap();
    c.put("mali", "127.0.0.1:9092", "mali-b", true).unwrap();
    let lease = c.put("cpu", "127.0.0.1:9093", "cpu-a", true).unwrap();
    assert_eq!(lease, Duration::from_secs(6));
    let text = text_summary(&addr, &c.summary().unwrap());
    assert!(text.contains("127.0.0.1:9091\tserver:mali"), "{text}");
    assert!(text.contains("127.0.0.1:9093\tserver:cpu"), "{text}");
    let row = |key: &str| {
        text.lines()
            .find(|l| l.split_whitespace().next() == Some(key))
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
    };
    assert_eq!(row("mali").as_deref(), Some("mali 2 2 0"), "{text}");
    assert_eq!(row("cpu").as_deref(), Some("cpu 1 1 0"), "{text}");

    let a = c.request("mali", 0, T).unwrap();
    let b = c.request("mali", 0, T).unwrap();
    assert_ne!(a.server_id, b.server_id);
    let t0 = Instant::now();
    let busy = c
        .request("mali", 0, Duration::from_millis(300))
        .unwrap_err();
    assert!(t0.elapsed() >= Duration::from_millis(300));
    assert!(
        matches!(&busy, RpcError::NoServer { message, .. } if message.contains("all 2 servers of key `mali` stayed busy for 300 ms")),
        "{busy}"
    );
    c.release(&a).unwrap();
    assert_eq!(c.request("mali", 0, T).unwrap().server_id, a.server_id);
    let none = c.request("vta", 0, Duration::from_millis(200)).unwrap_err();
    assert!(
        none.to_string()
            .contains("no server of key `vta` is registered (waited 200 ms)"),
        "{none}"
    );
}

#[test]
fn a_waiting_request_is_served_when_a_server_frees_and_by_priority() {
    let addr = start();
    let mut c = client(&addr);
    c.put("cpu", "127.0.0.1:9001", "only", true).unwrap();
    let held = c.request("cpu", 0, T).unwrap();
    let (tx, rx) = mpsc::channel();
    for (priority, delay) in [(0, 0), (5, 150)] {
        let (addr, tx) = (addr.clone(), tx.clone());
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(delay));
            let mut c = client(&addr);
            let lease = c.request("cpu", priority, LONG).unwrap();
            tx.send(priority).unwrap();
            std::thread::sleep(Duration::from_millis(100));
            c.release(&lease).unwrap();
        });
    }
    // both wait while the server is held
    let deadline = Instant::now() + LONG;
    loop {
        let pending = c.summary().unwrap().queues[0].pending;
        if pending == 2 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{pending} requests pending after {LONG:?}, not 2"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    c.release(&held).unwrap();
    let order: Vec<i32> = (0..2).map(|_| rx.recv_timeout(LONG).unwrap()).collect();
    assert_eq!(
        order,
        vec![5, 0],
        "the later request of higher priority goes first"
    );
}

#[test]
fn a_wrong_token_and_a_dead_tracker_are_one_clear_error_each() {
    let addr = start();
    let mut wrong = TrackerClient::connect(&addr, "guess", T).unwrap();
    let e = wrong.summary().unwrap_err();
    assert!(matches!(e, RpcError::WrongToken { .. }), "{e}");
    assert!(e.to_string().contains("refused the token"), "{e}");
    // a port nobody listens on
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_addr = dead.local_addr().unwrap().to_string();
    drop(dead);
    let e = TrackerClient::connect(&dead_addr, TOKEN, Duration::from_secs(2))
        .err()
        .expect("nobody listens");
    let text = e.to_string();
    assert!(
        text.starts_with(&format!("cannot reach the RPC tracker at {dead_addr}")),
        "{text}"
    );
    assert!(!text.contains('\n'), "{text}");
    assert!(matches!(
        TrackerClient::connect(&addr, "", T).err(),
        Some(RpcError::NoToken)
    ));
}
