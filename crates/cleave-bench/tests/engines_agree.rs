//! The driver end to end, as a user runs it: every benchmark on every
//! engine built in, in one run. The engines must see the same operations,
//! so whatever the harness knows (live bytes, keys found) agrees across them.

use std::process::Command;

fn engines() -> &'static str {
    if cfg!(feature = "rocksdb") {
        "cleave,rocksdb,blobdb"
    } else {
        "cleave"
    }
}

#[test]
fn every_benchmark_runs_on_every_engine_with_the_same_operations() {
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("out.json");
    let benchmarks = [
        "filluniquerandom",
        "overwrite",
        "updaterandom",
        "readrandom",
        "seekrandom",
        "readrandomwriterandom",
        "flush",
        "waitforcompaction",
        "compact",
        // Its writer writes until the readers are done, so how much it
        // writes depends on timing; the next benchmark starts afresh.
        "readwhilewriting",
        "fillrandom",
        "fillseq",
        "ycsb_load",
        "ycsb_a",
        "ycsb_b",
        "ycsb_c",
        "ycsb_f",
        "ycsb_d",
        "ycsb_e",
        "multireadrandom",
    ];
    let output = Command::new(env!("CARGO_BIN_EXE_cleave-bench"))
        .args([
            &format!("--engine={}", engines()),
            &format!("--benchmarks={}", benchmarks.join(",")),
            &format!("--db={}", dir.path().join("db").display()),
            &format!("--json={}", json.display()),
            "--num=3000",
            "--reads=500",
            "--seek_nexts=5",
            "--ycsb_operation_count=1000",
            "--ycsb_field_count=4",
            "--ycsb_field_length=50",
            "--value_size_distribution=pareto-1k",
            "--key_distribution=zipfian",
            "--key_size=24",
            "--write_buffer_size=262144",
            "--compression_type=none",
            "--space_limit_ratio=3",
            "--histogram",
            "--seed=3",
        ])
        .output()
        .expect("cleave-bench runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "cleave-bench failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let records: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("valid json");
    let records = records.as_array().expect("array");
    let engine_names: Vec<&str> = engines().split(',').collect();
    assert_eq!(records.len(), engine_names.len() * benchmarks.len());
    for (engine_index, engine) in engine_names.iter().enumerate() {
        let run = &records[engine_index * benchmarks.len()..][..benchmarks.len()];
        for (record, benchmark) in run.iter().zip(benchmarks) {
            assert_eq!(record["engine"], *engine);
            assert_eq!(record["benchmark"], benchmark);
            assert!(
                record["ops"].as_u64().is_some_and(|ops| ops > 0),
                "{record}"
            );
            assert!(record["disk_bytes"].as_u64().is_some_and(|bytes| bytes > 0));
            assert!(record["live_bytes"].as_u64().is_some_and(|bytes| bytes > 0));
            assert!(record["throttled_s"].is_number());
            // cleave's own space breakdown; the other engines have none.
            for field in [
                "sstable_bytes",
                "value_file_bytes",
                "exposed_garbage_bytes",
                "s_index",
            ] {
                assert_eq!(
                    record.get(field).is_some(),
                    *engine == "cleave",
                    "{engine} {benchmark} {field}"
                );
            }
            // cleave's GC during the benchmark; the others' blob GC is
            // inside their compactions.
            assert_eq!(
                record.get("gc").is_some(),
                *engine == "cleave",
                "{engine} {benchmark} gc"
            );
            if *engine == "cleave" {
                assert!(record["s_index"].as_f64().is_some_and(|s| s >= 1.0));
                assert!(record["sstable_bytes"].as_u64().is_some_and(|b| b > 0));
                assert!(record["gc"]["jobs"].is_u64(), "{record}");
                assert!(record["gc"]["write_ms"].is_f64(), "{record}");
            } else {
                assert_eq!(record["engine_counters"]["gc_bytes_written"], 0);
            }
        }
        if *engine == "cleave" {
            // pareto-1k values straddle the 512-byte threshold, and the
            // load is many memtables: its flushes wrote value files.
            assert!(
                run[0]["engine_counters"]["value_file_bytes_written"]
                    .as_u64()
                    .is_some_and(|b| b > 0),
                "{}",
                run[0]
            );
            assert!(
                run[6]["value_file_bytes"].as_u64().is_some_and(|b| b > 0),
                "{}",
                run[6]
            );
        }
        // A fill after filluniquerandom wrote every key: all reads find one.
        assert_eq!(run[3]["found"], 500, "{engine} readrandom");
        assert_eq!(run[4]["found"], 500, "{engine} seekrandom");
        // YCSB C only reads records that exist.
        assert_eq!(run[15]["found"], 1000, "{engine} ycsb_c");
    }
    // Identical operations: the harness's view agrees across engines.
    for (index, benchmark) in benchmarks.iter().enumerate() {
        if *benchmark == "readwhilewriting" {
            continue;
        }
        let first = &records[index];
        for other in records
            .iter()
            .skip(index + benchmarks.len())
            .step_by(benchmarks.len())
        {
            for field in ["live_bytes", "live_keys", "user_bytes"] {
                assert_eq!(
                    first[field], other[field],
                    "{field} of {}",
                    first["benchmark"]
                );
            }
        }
    }
}

/// mergerandom and readrandommergerandom on every engine, with db_bench's
/// uint64add and with KDSep's field updates onto loaded records: the same
/// operations everywhere, and every read finds its key.
#[test]
fn merge_benchmarks_run_on_every_engine_with_the_same_operations() {
    for (operator, value_size) in [("uint64add", "8"), ("fieldupdate", "200")] {
        let dir = tempfile::tempdir().expect("tempdir");
        let json = dir.path().join("out.json");
        let benchmarks = ["filluniquerandom", "mergerandom", "readrandommergerandom"];
        let output = Command::new(env!("CARGO_BIN_EXE_cleave-bench"))
            .args([
                &format!("--engine={}", engines()),
                &format!("--benchmarks={}", benchmarks.join(",")),
                &format!("--db={}", dir.path().join("db").display()),
                &format!("--json={}", json.display()),
                &format!("--merge_operator={operator}"),
                &format!("--value_size={value_size}"),
                "--num=2000",
                "--reads=3000",
                "--histogram",
                "--merge_keys=1000",
                "--mergereadpercent=30",
                "--ycsb_field_count=4",
                "--ycsb_field_length=50",
                "--key_distribution=zipfian",
                "--write_buffer_size=65536",
                "--compression_type=none",
                "--seed=5",
            ])
            .output()
            .expect("cleave-bench runs");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{operator}: cleave-bench failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(stdout.contains("( updates:3000)"), "{stdout}");
        assert!(stdout.contains("merges:"), "{stdout}");
        assert!(stdout.contains("Microseconds per merge:"), "{stdout}");
        let records: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).expect("json"))
                .expect("valid json");
        let records = records.as_array().expect("array");
        assert_eq!(
            records.len(),
            engines().split(',').count() * benchmarks.len()
        );
        for run in records.chunks(benchmarks.len()) {
            assert_eq!(run[1]["ops"], 3000, "{operator}");
            // Every key was loaded, so every read finds one.
            assert_eq!(run[2]["found"], records[2]["found"], "{operator}");
            assert!(run[2]["found"].as_u64().is_some_and(|f| f > 0));
            // Reads and merges timed apart, as db_bench's per-type histograms.
            for field in [
                "read_avg_us",
                "read_p99_us",
                "update_avg_us",
                "update_p99_us",
            ] {
                assert!(run[2][field].as_f64().is_some_and(|us| us > 0.0), "{field}");
                assert!(run[1].get(field).is_none(), "{field}");
            }
            for field in ["live_bytes", "live_keys", "user_bytes"] {
                assert_eq!(run[2][field], records[2][field], "{operator} {field}");
            }
        }
    }
}

/// KDSep's YCSB AM, BM and FM after a YCSB load: updates as field merges
/// on every engine, the same operations everywhere, every read a hit.
#[test]
fn ycsb_with_merges_runs_on_every_engine_with_the_same_operations() {
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("out.json");
    let benchmarks = ["ycsb_load", "ycsb_am", "ycsb_bm", "ycsb_fm"];
    let output = Command::new(env!("CARGO_BIN_EXE_cleave-bench"))
        .args([
            &format!("--engine={}", engines()),
            &format!("--benchmarks={}", benchmarks.join(",")),
            &format!("--db={}", dir.path().join("db").display()),
            &format!("--json={}", json.display()),
            "--merge_operator=fieldupdate",
            "--num=2000",
            "--ycsb_operation_count=2000",
            "--ycsb_field_count=4",
            "--ycsb_field_length=50",
            "--write_buffer_size=65536",
            "--compression_type=none",
            "--seed=7",
        ])
        .output()
        .expect("cleave-bench runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "cleave-bench failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let records: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("valid json");
    let records = records.as_array().expect("array");
    for run in records.chunks(benchmarks.len()) {
        for (index, record) in run.iter().enumerate().skip(1) {
            assert_eq!(record["ops"], 2000, "{record}");
            // Every record was loaded: each read finds one, whatever merged.
            assert_eq!(record["found"], records[index]["found"], "{record}");
            assert!(record["update_avg_us"].as_f64().is_some_and(|us| us > 0.0));
        }
    }
    assert!(stdout.contains("read-modify-writes 0, merges "), "{stdout}");
}
