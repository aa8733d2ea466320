//! `cleave space`: the levels, the value files with their garbage, and the
//! scheduler's view: S_index, G_E/D, hidden garbage, the pressures, GC's
//! share of the threads and its rate limit.

use std::process::Command;

use cleave::{Db, Options, WriteOptions};

#[test]
fn space_prints_garbage_pressures_and_gc_share() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(
        dir.path(),
        Options {
            create_if_missing: true,
            min_value_size: 100,
            enable_gc: false,
            ..Options::default()
        },
    )
    .unwrap();
    let wo = WriteOptions::default();
    for round in 0..2u8 {
        for i in 0..200u32 {
            if round == 0 || i % 10 == 0 {
                db.put(&wo, &i.to_be_bytes(), &vec![round; 500]).unwrap();
            }
        }
        db.flush().unwrap();
    }
    db.compact_range(None, None).unwrap();
    let r = db.space_report().unwrap();
    db.close().unwrap();

    let out = Command::new(env!("CARGO_BIN_EXE_cleave"))
        .arg("--db")
        .arg(dir.path())
        .arg("space")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    // A tenth of the first round's values are garbage: G_E/D is 20 of
    // 200, below the default GC threshold, so the CLI's open (with GC on)
    // collects nothing before it reports.
    assert!((r.exposed_garbage_ratio - 0.1).abs() < 0.01, "{r:?}");
    assert!(
        text.contains(&format!(
            "exposed garbage / referenced (G_E/D): {:.3}",
            r.exposed_garbage_ratio
        )),
        "{text}"
    );
    assert!(text.contains("S_index: 1.000"), "{text}");
    assert!(text.contains("hidden garbage (estimate): 0.0 MB"), "{text}");
    // No file reaches the threshold: GC gets no thread, and no limit.
    assert!(
        text.contains("GC jobs allowed 0 (compaction and GC threads 1), rate limit none"),
        "{text}"
    );
    assert!(!text.contains("space budget"), "{text}");
}
