//! `kiln rewards`: rewards assigned and written beside the store.

use std::io::Write;

use anyhow::Result;

use crate::cli::RewardsArgs;
use crate::error::Outcome;
use crate::rewards::{self, RewardOptions};
use crate::store::{layout, Store};

pub(super) fn run(args: &RewardsArgs, out: &mut dyn Write) -> Result<Outcome> {
    let store = Store::open_existing(&args.store)?;
    let dir = args
        .output
        .clone()
        .unwrap_or_else(|| layout::rewards_dir(&args.store));
    let options = RewardOptions {
        target: args.target,
        lambda: args.lambda,
    };
    let summary = rewards::run(&store, args.experiment.as_deref(), &options, &dir)?;
    write!(out, "{summary}")?;
    Ok(Outcome::Success)
}
