//! `kiln`: the campaign controller's command line.

use std::process::ExitCode;

use clap::Parser;

use kiln_controller::cli::Cli;
use kiln_controller::{commands, error, logging};

fn main() -> ExitCode {
    logging::init();
    error::exit(commands::run(Cli::parse()))
}
