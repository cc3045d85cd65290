//! `kiln serve`: a live view of a campaign in the browser, until a signal
//! stops it (its plots' temporary folder removed first).

use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Result;

use crate::cli::ServeArgs;
use crate::error::{self, Interrupted, Outcome};
use crate::serve::Server;

pub(super) fn run(args: &ServeArgs, out: &mut dyn Write) -> Result<Outcome> {
    let server = Arc::new(Server::bind(
        &args.store,
        SocketAddr::new(args.bind, args.port),
    )?);
    writeln!(
        out,
        "serving a live view of {} on http://{}/ (Ctrl-C stops)",
        args.store.display(),
        server.addr()?
    )?;
    // Whoever started us reads the address now, not when we exit.
    out.flush()?;
    let answering = Arc::clone(&server);
    std::thread::spawn(move || answering.run());
    let runtime = super::runtime()?;
    let signal = runtime.block_on(async {
        let signal = error::interruption().await;
        error::exit_on_second_signal();
        signal
    });
    // The runtime lives on meanwhile: a second signal ends us at once.
    server.close();
    Err(Interrupted(format!("{}: the live view stopped", signal.said()), signal).into())
}
