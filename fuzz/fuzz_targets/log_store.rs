#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    cleave::fuzzing::log_store(data);
});
