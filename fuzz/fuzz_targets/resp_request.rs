#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    cleave_server::fuzzing::resp_request(data);
});
