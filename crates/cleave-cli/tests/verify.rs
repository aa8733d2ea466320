//! `cleave verify DIR` on a healthy database, on a damaged value file and
//! on a missing sstable: the report names what is wrong and the exit
//! status says whether anything is.

use std::path::{Path, PathBuf};
use std::process::Command;

use cleave::{Db, Options, WriteOptions};

fn verify(dir: &Path) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_cleave"))
        .arg("verify")
        .arg(dir)
        .output()
        .unwrap();
    (out.status.success(), String::from_utf8(out.stdout).unwrap())
}

/// Separated values, an overwrite compacted away (garbage) and GC.
fn build(dir: &Path) {
    let opts = Options {
        create_if_missing: true,
        min_value_size: 100,
        enable_gc: false,
        ..Options::default()
    };
    let db = Db::open(dir, opts).unwrap();
    let wo = WriteOptions::default();
    for round in 0..3u8 {
        for i in 0..200u32 {
            if round == 0 || i % 3 == 0 {
                db.put(&wo, &i.to_be_bytes(), &vec![round; 500]).unwrap();
            }
        }
        db.flush().unwrap();
    }
    db.compact_range(None, None).unwrap();
    assert!(db.gc_with_ratio(0.1).unwrap().jobs > 0);
    db.close().unwrap();
}

fn files(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .collect();
    out.sort();
    out
}

#[test]
fn a_healthy_database_verifies() {
    let tmp = tempfile::tempdir().unwrap();
    build(tmp.path());
    let (ok, report) = verify(tmp.path());
    assert!(ok, "{report}");
    assert!(report.contains("200 value handles resolved"), "{report}");
    assert!(report.ends_with("ok\n"), "{report}");
}

#[test]
fn a_damaged_record_fails_and_names_its_file() {
    let tmp = tempfile::tempdir().unwrap();
    build(tmp.path());
    let vf = files(tmp.path(), "vf").pop().unwrap();
    let mut bytes = std::fs::read(&vf).unwrap();
    bytes[100] ^= 0x40;
    std::fs::write(&vf, bytes).unwrap();
    let (ok, report) = verify(tmp.path());
    assert!(!ok, "{report}");
    let name = vf.file_name().unwrap().to_str().unwrap();
    assert!(report.contains("problem"), "{report}");
    assert!(report.contains(name), "{report}");
}

#[test]
fn a_missing_sstable_fails_and_names_it() {
    let tmp = tempfile::tempdir().unwrap();
    build(tmp.path());
    let sst = files(tmp.path(), "sst").pop().unwrap();
    std::fs::remove_file(&sst).unwrap();
    let (ok, report) = verify(tmp.path());
    assert!(!ok, "{report}");
    assert!(
        report.contains(sst.file_name().unwrap().to_str().unwrap()),
        "{report}"
    );
}

/// A database holding merges opens in the tool with the built-in operator
/// its manifest names, and not without it.
#[test]
fn a_database_with_merges_needs_its_operator() {
    let tmp = tempfile::tempdir().unwrap();
    let opts = Options {
        create_if_missing: true,
        merge_operator: Some(std::sync::Arc::new(cleave::U64Add)),
        ..Options::default()
    };
    let db = Db::open(tmp.path(), opts).unwrap();
    for n in [40u64, 2] {
        db.merge(&WriteOptions::default(), b"hits", &n.to_le_bytes())
            .unwrap();
    }
    db.close().unwrap();
    let get = |operator: Option<&str>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_cleave"));
        cmd.arg("--db").arg(tmp.path());
        if let Some(name) = operator {
            cmd.args(["--merge-operator", name]);
        }
        cmd.args(["get", "hits"]).output().unwrap()
    };
    let out = get(None);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("uint64add"), "{err}");
    let out = get(Some("uint64add"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.stdout.is_empty());
    let out = get(Some("no-such-operator"));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--merge-operator"));
    let (ok, report) = {
        let out = Command::new(env!("CARGO_BIN_EXE_cleave"))
            .args(["--merge-operator", "uint64add", "verify"])
            .arg(tmp.path())
            .output()
            .unwrap();
        (out.status.success(), String::from_utf8(out.stdout).unwrap())
    };
    assert!(ok, "{report}");
}
