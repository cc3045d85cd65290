//! `kiln`: the campaign controller.

mod transport;

fn main() {}
