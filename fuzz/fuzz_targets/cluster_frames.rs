#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    cleave_server::fuzzing::cluster_frames(data);
});
