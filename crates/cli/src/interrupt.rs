//! Ctrl-C (SIGINT, and SIGTERM): the measurement folders this process made are
//! removed, a tune says where its measurements are and how to resume, and the process
//! exits with 130 as a shell expects. The record log needs nothing more: it is appended
//! a whole batch of lines at a time, a torn last line is skipped when read, and from the
//! moment the folders' removal begins nothing is appended (the batch under way fails for
//! want of them, which is not its candidates' failure: `search::measure::interrupted`).

use std::sync::Mutex;

/// What to say when interrupted (set by the command under way).
static HINT: Mutex<Option<String>> = Mutex::new(None);

/// Installs the handler (once, at start-up). A failure to install leaves the default
/// behaviour (the process dies at once), with a warning under `-v`.
pub(crate) fn install() {
    let result = ctrlc::set_handler(|| {
        tessera_driver::runner::remove_scratch_dirs();
        let hint = HINT.lock().ok().and_then(|h| h.clone());
        match hint {
            Some(h) => eprintln!("\ninterrupted: {h}"),
            None => eprintln!("\ninterrupted"),
        }
        std::process::exit(130);
    });
    if let Err(e) = result {
        tracing::warn!("no interrupt handler: {e}");
    }
}

/// Sets what an interrupt prints from now on.
pub(crate) fn set_hint(hint: impl Into<String>) {
    if let Ok(mut h) = HINT.lock() {
        *h = Some(hint.into());
    }
}
