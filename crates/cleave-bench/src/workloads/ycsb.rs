//! YCSB's core workloads A–F (Cooper et al., SoCC 2010, and the
//! `workloads/workload[a-f]` files of YCSB 0.17): their operation mixes and
//! request distributions. Records are `field_count x field_length` bytes
//! under one key; an engine without columns stores a record as one value,
//! so an update rewrites the whole record, as YCSB's RocksDB binding does.
//! KDSep's AM, BM and FM are A, B and F with their updates and
//! read-modify-writes as merges (`--merge_operator`, `fieldupdate` for one
//! field of the record).

use rand::Rng;

use crate::distributions::KeyDistribution;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    A,
    B,
    C,
    D,
    E,
    F,
    AM,
    BM,
    FM,
}

/// One YCSB operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Read,
    /// Overwrites an existing record.
    Update,
    /// Adds a record after the last one.
    Insert,
    /// Reads a run of records from a random start.
    Scan,
    /// Reads a record, then writes it back changed.
    ReadModifyWrite,
    /// Changes a record by a merge operand (AM, BM, FM).
    Merge,
}

impl Workload {
    #[cfg(test)]
    pub const ALL: [Workload; 9] = [
        Workload::A,
        Workload::B,
        Workload::C,
        Workload::D,
        Workload::E,
        Workload::F,
        Workload::AM,
        Workload::BM,
        Workload::FM,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Workload::A => "ycsb_a",
            Workload::B => "ycsb_b",
            Workload::C => "ycsb_c",
            Workload::D => "ycsb_d",
            Workload::E => "ycsb_e",
            Workload::F => "ycsb_f",
            Workload::AM => "ycsb_am",
            Workload::BM => "ycsb_bm",
            Workload::FM => "ycsb_fm",
        }
    }

    /// The operation mix in percent, as the workload files set
    /// readproportion, updateproportion, insertproportion, scanproportion
    /// and readmodifywriteproportion.
    fn mix(self) -> &'static [(Op, u32)] {
        match self {
            Workload::A => &[(Op::Read, 50), (Op::Update, 50)],
            Workload::B => &[(Op::Read, 95), (Op::Update, 5)],
            Workload::C => &[(Op::Read, 100)],
            Workload::D => &[(Op::Read, 95), (Op::Insert, 5)],
            Workload::E => &[(Op::Scan, 95), (Op::Insert, 5)],
            Workload::F => &[(Op::Read, 50), (Op::ReadModifyWrite, 50)],
            // KDSep Exp#3: A's and F's mix (50/50) and B's (95/5), each
            // update or read-modify-write a merge.
            Workload::AM | Workload::FM => &[(Op::Read, 50), (Op::Merge, 50)],
            Workload::BM => &[(Op::Read, 95), (Op::Merge, 5)],
        }
    }

    /// Whether the workload merges (and so needs a merge operator).
    pub fn merges(self) -> bool {
        self.mix().iter().any(|(op, _)| *op == Op::Merge)
    }

    /// requestdistribution: zipfian everywhere except D, which reads the
    /// newest records most.
    pub fn request_distribution(self) -> KeyDistribution {
        match self {
            Workload::D => KeyDistribution::Latest,
            _ => KeyDistribution::Zipfian,
        }
    }

    /// Whether the workload adds records (and so grows the key space).
    pub fn inserts(self) -> bool {
        self.mix().iter().any(|(op, _)| *op == Op::Insert)
    }

    pub fn choose_op<R: Rng + ?Sized>(self, rng: &mut R) -> Op {
        let mut roll = rng.gen_range(0..100u32);
        for &(op, percent) in self.mix() {
            if roll < percent {
                return op;
            }
            roll -= percent;
        }
        unreachable!("every mix sums to 100")
    }
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    use super::*;

    #[test]
    fn mixes_sum_to_one_hundred_and_match_the_workload_files() {
        for workload in Workload::ALL {
            let total: u32 = workload.mix().iter().map(|(_, percent)| percent).sum();
            assert_eq!(total, 100, "{}", workload.name());
        }
        assert!(Workload::D.inserts() && Workload::E.inserts() && !Workload::A.inserts());
        assert_eq!(Workload::D.request_distribution(), KeyDistribution::Latest);
        assert!(Workload::AM.merges() && Workload::FM.merges() && !Workload::F.merges());
    }

    #[test]
    fn chosen_operations_follow_the_mix() {
        let mut rng = StdRng::seed_from_u64(1);
        let samples = 100_000;
        let updates = (0..samples)
            .filter(|_| Workload::B.choose_op(&mut rng) == Op::Update)
            .count();
        // 5% of 100k: a binomial with sd ≈ 69.
        assert!((4_600..=5_400).contains(&updates), "{updates} updates");
        assert!((0..1000).all(|_| Workload::C.choose_op(&mut rng) == Op::Read));
        let scans = (0..samples)
            .filter(|_| Workload::E.choose_op(&mut rng) == Op::Scan)
            .count();
        assert!((94_000..=96_000).contains(&scans), "{scans} scans");
    }
}
