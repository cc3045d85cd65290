#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| kiln_fuzz_targets::objdump(data));
