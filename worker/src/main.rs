//! `kiln-worker`: the measuring instrument.

fn main() {}
