//! The pipeline's extension points (`NetworkExtension`, `RecordKind`, …), defined in
//! `tessera_search::extension` so that plugins implement them without depending on the
//! driver; re-exported here for the driver's callers.

pub use tessera_search::extension::*;
