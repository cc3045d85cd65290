//! `kiln serve`: a live view of a campaign in the browser, until a signal
//! stops it (its plots' temporary folder removed first).

use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Result;

use crate::cli::ServeArgs;
use crate::error::{self, BadInput, Outcome};
use crate::logging;
use crate::serve::{self, Server};
use crate::store::OpenError;

pub(super) fn run(args: &ServeArgs, out: &mut dyn Write) -> Result<Outcome> {
    // A store not made yet is waited for; a folder of other things is a mistake.
    let store = &args.store;
    let other = store.is_file() || std::fs::read_dir(store).is_ok_and(|mut d| d.next().is_some());
    if !serve::has_store(store) && other {
        return Err(BadInput(OpenError::NotAStore(store.clone()).to_string()).into());
    }
    let server = Arc::new(Server::bind(store, SocketAddr::new(args.bind, args.port))?);
    writeln!(
        out,
        "serving a live view of {} on http://{}/ (Ctrl-C stops){}",
        store.display(),
        server.addr()?,
        match server.waiting() {
            true => "; no campaign has made it yet: the page waits for one",
            false => "",
        }
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
    // A signal is how a server ends: said as a note, no error, with the signal's status.
    logging::note(format_args!("{}: the live view stopped", signal.said()));
    Ok(Outcome::Stopped(signal))
}
