//! `kiln`: the campaign controller.

fn main() {}
