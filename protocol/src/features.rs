//! What is known about a decision point besides its name: the features a
//! policy decides from, recorded at discovery.
//!
//! A policy must decide for call sites it has never seen, so each site carries
//! what the compiler knew about it (the inliner's cost and threshold, the sizes
//! of caller and callee, loop depth, constant arguments) and what a profile of
//! the stock build says (costs of caller and callee, calls through the site).
//! A feature that cannot be had for a compiler or a benchmark is `None` (null
//! in every export), never 0.

use serde::{Deserialize, Serialize};

/// The features of one decision point. Every field is `None` where it could
/// not be had; knob benchmarks have none of them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "kebab-case")]
pub struct SiteFeatures {
    /// Elements in the site's call-site chain: 1 for a call written in its
    /// caller, 2 for a call that reached it through one inlining, and so on.
    pub chain_length: Option<u32>,
    /// The inliner's cost estimate for the site (stock build's remarks).
    pub inline_cost: Option<i64>,
    /// The inliner's threshold for the site: it inlines when the cost is below.
    pub inline_threshold: Option<i64>,
    /// IR instructions of the caller before inlining.
    pub caller_instructions: Option<u64>,
    /// Basic blocks of the caller before inlining.
    pub caller_blocks: Option<u64>,
    /// IR instructions of the callee before inlining.
    pub callee_instructions: Option<u64>,
    /// Basic blocks of the callee before inlining.
    pub callee_blocks: Option<u64>,
    /// Loops around the call in its caller (0: not in a loop).
    pub loop_depth: Option<u32>,
    /// Direct call sites of the callee in the whole program.
    pub callee_call_sites: Option<u32>,
    /// Whether the callee calls itself, directly.
    pub callee_recursive: Option<bool>,
    /// Whether the callee has external linkage (other units may call it, so inlining every
    /// call of its own unit does not delete it).
    pub callee_external: Option<bool>,
    /// Arguments of the call that are constants.
    pub constant_arguments: Option<u32>,
    /// Instructions executed in the caller itself (callgrind Ir, stock build).
    pub caller_self_cost: Option<u64>,
    /// Instructions executed in the caller and everything it called.
    pub caller_inclusive_cost: Option<u64>,
    /// Times the caller was entered (calls of it from anywhere) in the stock build's profile:
    /// with `site_calls`, the call's block frequency, how often it runs per entry of its caller.
    pub caller_calls: Option<u64>,
    /// Instructions executed in the callee itself.
    pub callee_self_cost: Option<u64>,
    /// Instructions executed in the callee and everything it called.
    pub callee_inclusive_cost: Option<u64>,
    /// Times the call ran in the stock build's profile (callgrind: calls of
    /// the callee from the site's source line, in whatever function holds a
    /// copy of the call; a site inlined in the stock build has no call of its
    /// own, so its count is `None`).
    pub site_calls: Option<u64>,
    /// Times the call ran in a build that inlines nothing (callgrind), where every call is a
    /// call of its own: the count `site_calls` cannot give a call the stock build inlined. For
    /// a call reached through inlining (`chain_length` above 1), its innermost call's count
    /// times the share of each inlined function's entries that came through the chain's calls.
    pub uninlined_calls: Option<u64>,
    /// Machine instructions of the caller in the stock build's optimised code (padding left
    /// out; `None` where the stock build kept no copy of it, inlined everywhere).
    pub caller_code_instructions: Option<u64>,
    /// Of those, instructions on several elements of a vector register (vectorised code).
    pub caller_code_vector: Option<u64>,
    /// Calls left in the caller's optimised code.
    pub caller_code_calls: Option<u64>,
    /// Loops in the caller's optimised code (addresses a later branch of it goes back to).
    pub caller_code_loops: Option<u64>,
    /// Whether the stock build's optimised code keeps a copy of the callee of its own (false:
    /// inlined everywhere, or removed).
    pub callee_code_kept: Option<bool>,
    /// Machine instructions of the callee's own copy in the stock build.
    pub callee_code_instructions: Option<u64>,
    /// Of those, vector instructions.
    pub callee_code_vector: Option<u64>,
    /// Calls left in the callee's own copy.
    pub callee_code_calls: Option<u64>,
    /// Loops in the callee's own copy.
    pub callee_code_loops: Option<u64>,
    /// Machine instructions of the caller in the build that inlines every call it can (the
    /// discovery build): the caller with its inlines, beside `caller_code_instructions`.
    pub caller_inlined_code_instructions: Option<u64>,
    /// Of those, vector instructions.
    pub caller_inlined_code_vector: Option<u64>,
    /// Calls left in the caller when everything is inlined.
    pub caller_inlined_code_calls: Option<u64>,
    /// Loops in the caller when everything is inlined.
    pub caller_inlined_code_loops: Option<u64>,
}
