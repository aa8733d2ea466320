//! The manifest: VersionEdits, immutable Versions and the VersionSet that
//! logs and installs them.

pub(crate) mod file_meta;

pub(crate) use file_meta::FileMeta;
