//! What `cleave space` prints: the space report as a table.

use std::io::Write;

use anyhow::Result;
use cleave::Db;

pub fn space(db: &Db, out: &mut dyn Write) -> Result<()> {
    let r = db.space_report()?;
    let mb = |b: u64| b as f64 / (1 << 20) as f64;
    writeln!(out, "level  sstables(MB)  values(MB)")?;
    for (level, l) in r.levels.iter().enumerate() {
        writeln!(
            out,
            "L{level:<5} {:>12.1} {:>11.1}",
            mb(l.sstable_bytes),
            mb(l.value_bytes)
        )?;
    }
    let garbage = if r.value_file_bytes == 0 {
        0.0
    } else {
        100.0 * r.exposed_garbage_bytes as f64 / r.value_file_bytes as f64
    };
    writeln!(
        out,
        "value files: {} ({:.1} MB; referenced {:.1} MB, exposed garbage {:.1} MB = {garbage:.1}%)",
        r.value_files,
        mb(r.value_file_bytes),
        mb(r.referenced_value_bytes),
        mb(r.exposed_garbage_bytes)
    )?;
    if r.delta_files > 0 {
        writeln!(
            out,
            "delta store: {} buckets in {} files ({:.1} MB; buckets {:.1} MB, garbage {:.1} MB)",
            r.delta_buckets,
            r.delta_files,
            mb(r.delta_file_bytes),
            mb(r.delta_bucket_bytes),
            mb(r.delta_garbage_bytes)
        )?;
    }
    writeln!(
        out,
        "S_index: {:.3}; exposed garbage / referenced (G_E/D): {:.3}; hidden garbage (estimate): {:.1} MB",
        r.s_index,
        r.exposed_garbage_ratio,
        mb(r.hidden_garbage_bytes)
    )?;
    let rate = r
        .gc_rate_limit
        .map_or_else(|| "none".to_string(), |b| format!("{:.1} MB/s", mb(b)));
    writeln!(
        out,
        "pressure: index {:.3}, values {:.3}; GC jobs allowed {} (compaction and GC threads {}), rate limit {rate}",
        r.index_pressure, r.value_pressure, r.gc_max_jobs, r.pool_threads
    )?;
    if r.budget_bytes > 0 {
        writeln!(
            out,
            "space budget: {:.1} of {:.1} MB ({:.0}%)",
            mb(r.budget_usage_bytes),
            mb(r.budget_bytes),
            100.0 * r.budget_usage_bytes as f64 / r.budget_bytes as f64
        )?;
    }
    writeln!(
        out,
        "on disk: {:.1} MB (sstables {:.1}, value files {:.1}, delta files {:.1}, WAL {:.1}, manifest {:.1}, other {:.1})",
        mb(r.on_disk_bytes),
        mb(r.sstable_bytes),
        mb(r.value_file_bytes),
        mb(r.delta_file_bytes),
        mb(r.wal_bytes),
        mb(r.manifest_bytes),
        mb(r.other_bytes)
    )?;
    Ok(())
}
