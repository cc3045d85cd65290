//! `kiln`: the campaign controller's command line.

use std::process::ExitCode;

use clap::Parser;

use kiln_controller::cli::Cli;
use kiln_controller::{commands, error, logging};

fn main() -> ExitCode {
    let cli = Cli::parse();
    logging::init(cli.verbosity());
    error::exit(commands::run(cli))
}
