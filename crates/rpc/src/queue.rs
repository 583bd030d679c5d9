//! The tracker's state, without the network: per key the registered servers (free or
//! handed out) and the requests waiting for one, in TVM's order (higher priority first,
//! then arrival). A server that stops renewing its registration for a lease is dropped;
//! a hand-out the server reports unused for a lease is taken back, so a client that
//! died never leaves a server busy forever (TVM's `free 0` hang).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How long a registration lives without renewal.
pub const LEASE: Duration = Duration::from_secs(6);

#[derive(Clone, Debug)]
struct Server {
    key: String,
    addr: String,
    expires: Instant,
    /// The hand-out holding it, and when it began.
    session: Option<(u64, Instant)>,
    /// When it last became free (free servers are handed out oldest first).
    free_since: u64,
}

/// A waiting request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Ticket {
    /// `-priority` first, so that the smallest ticket is served first.
    neg_priority: i64,
    seq: u64,
}

/// A server handed to a client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Match {
    pub addr: String,
    pub server_id: String,
    pub session: u64,
}

/// One line of the summary's server list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerLine {
    pub key: String,
    pub addr: String,
    pub server_id: String,
    pub free: bool,
}

/// One line of the summary's queue table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueLine {
    pub key: String,
    pub total: u32,
    pub free: u32,
    pub pending: u32,
}

/// Servers and waiting requests.
#[derive(Default)]
pub struct Queues {
    servers: BTreeMap<String, Server>,
    waiting: BTreeMap<String, BTreeMap<Ticket, ()>>,
    seq: u64,
}

impl Queues {
    fn next(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// Registers or renews server `id`; `idle`: the server has no client.
    pub fn put(&mut self, key: &str, addr: &str, id: &str, idle: bool, now: Instant) {
        let seq = self.next();
        match self.servers.get_mut(id) {
            Some(s) if s.key == key && s.addr == addr => {
                s.expires = now + LEASE;
                if let Some((_, since)) = s.session {
                    if idle && now.duration_since(since) >= LEASE {
                        s.session = None;
                        s.free_since = seq;
                    }
                }
            }
            _ => {
                self.servers.insert(
                    id.to_string(),
                    Server {
                        key: key.to_string(),
                        addr: addr.to_string(),
                        expires: now + LEASE,
                        session: None,
                        free_since: seq,
                    },
                );
            }
        }
    }

    /// Drops the servers whose registration ended.
    pub fn expire(&mut self, now: Instant) {
        self.servers.retain(|_, s| s.expires > now);
    }

    /// Queues a request for `key`.
    pub fn enqueue(&mut self, key: &str, priority: i32) -> Ticket {
        let t = Ticket {
            neg_priority: -(priority as i64),
            seq: self.next(),
        };
        self.waiting
            .entry(key.to_string())
            .or_default()
            .insert(t, ());
        t
    }

    /// Withdraws a request (served or given up).
    pub fn cancel(&mut self, key: &str, t: Ticket) {
        if let Some(w) = self.waiting.get_mut(key) {
            w.remove(&t);
            if w.is_empty() {
                self.waiting.remove(key);
            }
        }
    }

    /// Serves request `t` if it is the first waiting for `key` and a server is free.
    pub fn try_match(&mut self, key: &str, t: Ticket, now: Instant) -> Option<Match> {
        self.expire(now);
        let first = self.waiting.get(key)?.keys().next().copied()?;
        if first != t {
            return None;
        }
        let id = self
            .servers
            .iter()
            .filter(|(_, s)| s.key == key && s.session.is_none())
            .min_by_key(|(_, s)| s.free_since)
            .map(|(id, _)| id.clone())?;
        let session = self.next();
        let s = self.servers.get_mut(&id)?;
        s.session = Some((session, now));
        let m = Match {
            addr: s.addr.clone(),
            server_id: id,
            session,
        };
        self.cancel(key, t);
        Some(m)
    }

    /// Gives a server back; false when `session` does not hold it.
    pub fn release(&mut self, id: &str, session: u64) -> bool {
        let seq = self.next();
        match self.servers.get_mut(id) {
            Some(s) if s.session.map(|(n, _)| n) == Some(session) => {
                s.session = None;
                s.free_since = seq;
                true
            }
            _ => false,
        }
    }

    /// How many servers of `key` are registered.
    pub fn count(&self, key: &str) -> usize {
        self.servers.values().filter(|s| s.key == key).count()
    }

    /// The server list and the queue table, by key.
    pub fn summary(&mut self, now: Instant) -> (Vec<ServerLine>, Vec<QueueLine>) {
        self.expire(now);
        let servers: Vec<ServerLine> = self
            .servers
            .iter()
            .map(|(id, s)| ServerLine {
                key: s.key.clone(),
                addr: s.addr.clone(),
                server_id: id.clone(),
                free: s.session.is_none(),
            })
            .collect();
        let mut queues: BTreeMap<String, QueueLine> = BTreeMap::new();
        let line = |key: &str| QueueLine {
            key: key.to_string(),
            total: 0,
            free: 0,
            pending: 0,
        };
        for s in &servers {
            let q = queues.entry(s.key.clone()).or_insert_with(|| line(&s.key));
            q.total += 1;
            q.free += s.free as u32;
        }
        for (key, w) in &self.waiting {
            queues
                .entry(key.clone())
                .or_insert_with(|| line(key))
                .pending += w.len() as u32;
        }
        (servers, queues.into_values().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_served_by_priority_then_arrival_and_servers_oldest_free_first() {
        let now = Instant::now();
        let mut q = Queues::default();
        q.put("mali", "h:1", "a", true, now);
        q.put("mali", "h:2", "b", true, now);
        let low = q.enqueue("mali", 0);
        let high = q.enqueue("mali", 5);
        assert_eq!(
            q.try_match("mali", low, now),
            None,
            "the higher priority goes first"
        );
        let m = q.try_match("mali", high, now).unwrap();
        assert_eq!((m.server_id.as_str(), m.addr.as_str()), ("a", "h:1"));
        let m2 = q.try_match("mali", low, now).unwrap();
        assert_eq!(m2.server_id, "b");
        let third = q.enqueue("mali", 0);
        assert_eq!(q.try_match("mali", third, now), None, "both busy");
        assert!(
            !q.release("a", m2.session),
            "a session releases only its server"
        );
        assert!(q.release("a", m.session));
        assert_eq!(q.try_match("mali", third, now).unwrap().server_id, "a");
    }

    #[test]
    fn silent_servers_expire_and_unused_hand_outs_come_back() {
        let t0 = Instant::now();
        let mut q = Queues::default();
        q.put("cpu", "h:1", "a", true, t0);
        let t = q.enqueue("cpu", 0);
        let m = q.try_match("cpu", t, t0).unwrap();
        // the client died before connecting: the server keeps saying it is idle
        q.put("cpu", "h:1", "a", true, t0 + LEASE / 2);
        assert_eq!(
            q.summary(t0 + LEASE / 2).1[0].free,
            0,
            "within a lease: still handed out"
        );
        q.put("cpu", "h:1", "a", true, t0 + LEASE);
        assert_eq!(
            q.summary(t0 + LEASE).1[0].free,
            1,
            "after a lease unused: free again"
        );
        assert!(!q.release("a", m.session));
        // no renewal for a lease: gone
        assert_eq!(q.count("cpu"), 1);
        q.expire(t0 + LEASE * 2 + Duration::from_millis(1));
        assert_eq!(q.count("cpu"), 0);
    }

    #[test]
    fn the_summary_counts_total_free_and_pending_per_key() {
        let now = Instant::now();
        let mut q = Queues::default();
        q.put("mali", "h:1", "a", true, now);
        q.put("mali", "h:2", "b", true, now);
        q.put("cpu", "h:3", "c", true, now);
        let t = q.enqueue("mali", 0);
        q.try_match("mali", t, now).unwrap();
        q.enqueue("vta", 0);
        let (servers, queues) = q.summary(now);
        assert_eq!(servers.len(), 3);
        let rows: Vec<(String, u32, u32, u32)> = queues
            .into_iter()
            .map(|l| (l.key, l.total, l.free, l.pending))
            .collect();
        assert_eq!(
            rows,
            vec![
                ("cpu".into(), 1, 1, 0),
                ("mali".into(), 2, 1, 0),
                ("vta".into(), 0, 0, 1)
            ]
        );
    }
}
