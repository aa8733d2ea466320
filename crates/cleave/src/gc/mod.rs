//! Value-file garbage collection: the pure picker that chooses which
//! physical value files to collect (the job that collects them follows).

pub(crate) mod picker;
