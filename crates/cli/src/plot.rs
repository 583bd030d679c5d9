//! `tessera records plot`: a record log's tuning curve drawn as an SVG by the driver
//! (`Toolchain::plot_log`), with the network's tasks where it is given.

use crate::network::NetworkArgs;
use anyhow::Result;
use std::path::Path;

pub fn plot(file: &Path, out: &Path, net: &NetworkArgs) -> Result<()> {
    let log = crate::records::load_warn(file)?;
    let spec = net.given().then(|| net.spec()).transpose()?;
    let drawn = crate::plugins::toolchain().plot_log(&log, file, spec.as_ref(), out)?;
    say_part!("{drawn}");
    Ok(())
}
