//! The base every [`Device`](crate::Device) implementation shares: [`Handles`], a table
//! of the objects a device gives out handles to (buffers, modules, functions), and
//! [`DeviceName`], the device's name with the constructors of its
//! [`DeviceError`]s. A device keeps one table per kind of object behind its own lock;
//! an unknown or freed handle is the same [`DeviceError::UnknownHandle`] on every
//! device. Handles are unique in the process (one counter for every table): a handle of
//! one kind passed where another is expected, or to another device, is never taken for
//! a live object.

use crate::device::DeviceError;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use tessera_target::{Artifact, TargetKind};

/// The last handle given out in this process.
static LAST_HANDLE: AtomicU64 = AtomicU64::new(0);

/// Objects of one kind behind handles: `insert` gives a fresh handle (never 0, never
/// reused, unique in the process), `get`/`remove` of a handle not given out or already
/// removed is [`DeviceError::UnknownHandle`] naming the device and `what` (e.g.
/// `buffer`).
#[derive(Debug)]
pub struct Handles<T> {
    what: &'static str,
    items: HashMap<u64, T>,
}

impl<T> Handles<T> {
    /// An empty table of `what`s (the word errors use).
    pub fn new(what: &'static str) -> Handles<T> {
        Handles {
            what,
            items: HashMap::new(),
        }
    }

    /// Keeps `item` under a fresh handle.
    pub fn insert(&mut self, item: T) -> u64 {
        let id = LAST_HANDLE.fetch_add(1, Ordering::Relaxed) + 1;
        self.items.insert(id, item);
        id
    }

    /// The item of `id`.
    pub fn get(&self, device: &DeviceName, id: u64) -> Result<&T, DeviceError> {
        self.items
            .get(&id)
            .ok_or_else(|| device.unknown(self.what, id))
    }

    /// The item of `id`, mutable.
    pub fn get_mut(&mut self, device: &DeviceName, id: u64) -> Result<&mut T, DeviceError> {
        let what = self.what;
        self.items
            .get_mut(&id)
            .ok_or_else(|| device.unknown(what, id))
    }

    /// Takes the item of `id` out of the table: its handle is not valid after.
    pub fn remove(&mut self, device: &DeviceName, id: u64) -> Result<T, DeviceError> {
        self.items
            .remove(&id)
            .ok_or_else(|| device.unknown(self.what, id))
    }

    /// The item of `id`, if the table holds it (for lookups that report their own
    /// error, e.g. [`crate::device::launch_args`]'s).
    pub fn find(&self, id: u64) -> Option<&T> {
        self.items.get(&id)
    }

    /// Puts back under its handle an item [`Handles::remove`] took out (to hold it and
    /// another item of the table at once).
    pub fn put_back(&mut self, id: u64, item: T) {
        self.items.insert(id, item);
    }

    /// Forgets every item (a device's drop, after releasing them).
    pub fn clear(&mut self) {
        self.items.clear();
    }

    /// How many items the table holds.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The items, in no particular order.
    pub fn values(&self) -> impl Iterator<Item = &T> {
        self.items.values()
    }
}

/// A device's name (`cpu`, `opencl:<device>`, `cuda:<gpu> (sm_90)`) and the errors that
/// carry it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceName(pub String);

impl DeviceName {
    pub fn new(name: impl Into<String>) -> DeviceName {
        DeviceName(name.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// A handle of `what` the device never gave out, or one already freed.
    pub fn unknown(&self, what: &'static str, id: u64) -> DeviceError {
        DeviceError::UnknownHandle {
            device: self.0.clone(),
            what,
            id,
        }
    }

    /// What the device itself reports (a driver's error, a build log).
    pub fn failed(&self, message: impl Into<String>) -> DeviceError {
        DeviceError::Failed {
            device: self.0.clone(),
            message: message.into(),
        }
    }

    /// A launch of `function` whose arguments or sizes do not fit it.
    pub fn bad_launch(&self, function: &str, reason: impl Into<String>) -> DeviceError {
        DeviceError::BadLaunch {
            device: self.0.clone(),
            function: function.to_string(),
            reason: reason.into(),
        }
    }

    /// `Ok` when `artifact` was built for `kind`, else [`DeviceError::WrongKind`]: what
    /// every device checks first in `load_module`.
    pub fn check_kind(&self, artifact: &Artifact, kind: &TargetKind) -> Result<(), DeviceError> {
        if &artifact.device == kind {
            return Ok(());
        }
        Err(DeviceError::WrongKind {
            device: self.0.clone(),
            entry: artifact.entry.clone(),
            artifact_kind: artifact.device.clone(),
        })
    }
}

impl std::fmt::Display for DeviceName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_target::ParamSpec;

    #[test]
    fn handles_are_fresh_and_unknown_once_removed() {
        let dev = DeviceName::new("d");
        let mut a: Handles<&str> = Handles::new("buffer");
        let mut b: Handles<&str> = Handles::new("module");
        let (x, y, z) = (a.insert("x"), a.insert("y"), b.insert("z"));
        // one counter for every table: a handle of one kind is never another's
        assert!(x != 0 && x < y && y < z, "{x} {y} {z}");
        assert_eq!(a.get(&dev, x).ok(), Some(&"x"));
        assert!(b.get(&dev, x).is_err());
        assert_eq!(a.remove(&dev, x).ok(), Some("x"));
        assert!(
            matches!(
                a.get(&dev, x),
                Err(DeviceError::UnknownHandle { ref device, what: "buffer", id }) if device == "d" && id == x
            ),
            "{:?}",
            a.get(&dev, x).err()
        );
        assert!(a.remove(&dev, x).is_err());
        a.put_back(x, "x again");
        assert_eq!(a.find(x), Some(&"x again"));
        assert_eq!(a.len(), 2);
    }

    #[test]
    fn an_artifact_of_another_kind_is_refused_by_name() {
        let dev = DeviceName::new("cpu");
        let art = |kind: TargetKind| Artifact {
            device: kind,
            path: "k.so".into(),
            source_path: "k.c".into(),
            entry: "k".into(),
            params: Vec::<ParamSpec>::new(),
            launch: None,
        };
        assert!(dev
            .check_kind(&art(TargetKind::CPU), &TargetKind::CPU)
            .is_ok());
        let e = dev
            .check_kind(&art(TargetKind::CUDA), &TargetKind::CPU)
            .unwrap_err();
        assert!(
            matches!(e, DeviceError::WrongKind { ref entry, .. } if entry == "k"),
            "{e}"
        );
    }
}
