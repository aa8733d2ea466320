//! A small ext4 file system of a test's own, through a loop device: the
//! real full disk of `tests/full_disk.rs` here and in cleave-server.
#![allow(dead_code, reason = "each test file uses a part of the helpers")]

use std::path::PathBuf;
use std::process::Command;

/// The file system each test makes.
pub const DISK_BYTES: u64 = 64 << 20;

/// A loop-mounted ext4 image, unmounted and removed when dropped.
pub struct Mounted {
    mount: PathBuf,
    _tmp: tempfile::TempDir,
}

impl Mounted {
    /// `None` (said on stderr) where this machine cannot mount.
    pub fn ext4(test: &str) -> Option<Mounted> {
        let tmp = tempfile::tempdir().ok()?;
        let image = tmp.path().join("disk.img");
        let mount = tmp.path().join("mnt");
        std::fs::create_dir(&mount).ok()?;
        std::fs::File::create(&image)
            .ok()?
            .set_len(DISK_BYTES)
            .ok()?;
        let made = run("mkfs.ext4", &["-q", "-F", &image.to_string_lossy()])
            && run(
                "mount",
                &[
                    "-o",
                    "loop",
                    &image.to_string_lossy(),
                    &mount.to_string_lossy(),
                ],
            );
        if !made {
            eprintln!(
                "{test}: skipped, this machine cannot mount an ext4 image (root and a loop \
                 device are needed); cleave's tests/no_space.rs covers it on FaultFs"
            );
            return None;
        }
        Some(Mounted { mount, _tmp: tmp })
    }

    /// The database directory, on the file system.
    pub fn db(&self) -> PathBuf {
        self.mount.join("db")
    }

    /// Writes a ballast file of `bytes`.
    pub fn ballast(&self, bytes: usize) {
        std::fs::write(self.mount.join("ballast"), vec![7u8; bytes]).unwrap();
    }

    pub fn free_ballast(&self) {
        std::fs::remove_file(self.mount.join("ballast")).unwrap();
    }

    pub fn remount(&self, how: &str) {
        assert!(run(
            "mount",
            &[
                "-o",
                &format!("remount,{how}"),
                &self.mount.to_string_lossy()
            ]
        ));
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        run("umount", &["-l", &self.mount.to_string_lossy()]);
    }
}

fn run(cmd: &str, args: &[&str]) -> bool {
    Command::new(cmd)
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success())
}
