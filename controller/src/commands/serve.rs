//! `kiln serve`: a live view of a campaign in the browser.

use std::io::Write;
use std::net::SocketAddr;

use anyhow::Result;

use crate::cli::ServeArgs;
use crate::error::Outcome;
use crate::serve::Server;

pub(super) fn run(args: &ServeArgs, out: &mut dyn Write) -> Result<Outcome> {
    let server = Server::bind(&args.store, SocketAddr::new(args.bind, args.port))?;
    writeln!(
        out,
        "serving a live view of {} on http://{}/ (Ctrl-C stops)",
        args.store.display(),
        server.addr()?
    )?;
    // Whoever started us reads the address now, not when we exit.
    out.flush()?;
    server.run()?;
    Ok(Outcome::Success)
}
