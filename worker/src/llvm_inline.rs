//! Per-call-site inlining decisions with stock compilers, via LLVM inline replay.
