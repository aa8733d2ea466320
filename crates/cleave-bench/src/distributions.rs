//! Which key a benchmark touches next: uniform, zipfian and latest choices
//! as YCSB makes them, and a seeded permutation for unique random inserts.
//!
//! The zipfian generator is Gray et al.'s ("Quickly Generating
//! Billion-Record Synthetic Databases", SIGMOD 1994) in the form YCSB's
//! `ZipfianGenerator` implements, so skew matches the papers' YCSB runs.

use rand::Rng;

/// YCSB's zipfian constant.
pub const DEFAULT_ZIPF_THETA: f64 = 0.99;

/// YCSB's `Utils.FNV_OFFSET_BASIS_64`, FNV's 64-bit offset basis.
const FNV_OFFSET_BASIS_64: u64 = 0xCBF2_9CE4_8422_2325;
/// YCSB's `Utils.FNV_PRIME_64`, FNV's 64-bit prime (1099511628211).
const FNV_PRIME_64: u64 = 0x0000_0100_0000_01B3;

/// Feistel rounds per permutation step. Luby and Rackoff show four rounds
/// of a pseudo-random function already give a pseudo-random permutation;
/// two more cost little and hide the structure of the weak round function.
const FEISTEL_ROUNDS: usize = 6;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum KeyDistribution {
    Uniform,
    Zipfian,
    Latest,
}

/// Gray et al.'s zipfian generator as YCSB implements it
/// (`ZipfianGenerator`): ranks `0..items`, rank 0 the most popular, with
/// P(rank k) = 1 / ((k + 1)^θ · ζ(n, θ)).
///
/// Ranks 0 and 1 are drawn exactly; higher ranks come from Gray's
/// closed-form approximation of the inverse CDF, which is what makes a draw
/// O(1) once ζ(n, θ) is known. The approximation over-weights the next few
/// ranks (rank 2 by ~18%, rank 10 by ~2% at θ = 0.99), so the hottest 1%
/// of 10,000 items take ~52.9% of draws instead of 51.8%; YCSB's runs, and
/// so the papers', have the same bias.
///
/// ζ costs O(n) once (~0.34 s for 16M items here); when the item count
/// grows it is extended incrementally, as YCSB does for inserts.
#[derive(Clone, Debug)]
pub struct Zipfian {
    /// The item count `zeta_n` covers; it only grows.
    items: u64,
    theta: f64,
    /// 1 / (1 - θ), the exponent of Gray's inverse CDF.
    alpha: f64,
    /// ζ(2, θ) = 1 + 0.5^θ: the mass of ranks 0 and 1.
    zeta_2: f64,
    /// ζ(items, θ) = Σ_{i=1..items} 1 / i^θ.
    zeta_n: f64,
    eta: f64,
}

impl Zipfian {
    /// A generator over `0..items` with skew `theta`. `theta` must be in
    /// (0, 1): Gray's formula divides by 1 - θ. An `items` of 0 is taken as
    /// 1, so a generator can exist before the first key does.
    pub fn new(items: u64, theta: f64) -> Self {
        assert!(
            theta > 0.0 && theta < 1.0,
            "zipfian theta must be in (0, 1), got {theta}"
        );
        let items = items.max(1);
        let zeta_2 = zeta_range(0, 2, theta);
        let zeta_n = zeta_range(0, items, theta);
        Self {
            items,
            theta,
            alpha: 1.0 / (1.0 - theta),
            zeta_2,
            zeta_n,
            eta: eta(items, theta, zeta_2, zeta_n),
        }
    }

    /// The item count ζ currently covers: the largest `items` seen so far.
    #[cfg(test)]
    pub fn items(&self) -> u64 {
        self.items
    }

    /// A rank in `0..items` (`items` of 0 is taken as 1).
    ///
    /// A larger `items` than before extends ζ by the new terms only (O(new
    /// items)). A smaller one keeps ζ as it is, as YCSB does when
    /// `allowitemcountdecrease` is off, and clamps the rank into range.
    pub fn sample<R: Rng + ?Sized>(&mut self, rng: &mut R, items: u64) -> u64 {
        let items = items.max(1);
        if items > self.items {
            self.zeta_n += zeta_range(self.items, items, self.theta);
            // YCSB recomputes eta from the item count it was constructed
            // with, a known slip; eta belongs to the count ζ covers.
            self.eta = eta(items, self.theta, self.zeta_2, self.zeta_n);
            self.items = items;
        }
        let u: f64 = rng.gen();
        let uz = u * self.zeta_n;
        let rank = if uz < 1.0 {
            0
        } else if uz < self.zeta_2 {
            1
        } else {
            let fraction = (self.eta * u - self.eta + 1.0).powf(self.alpha);
            // `as` saturates, and u < 1 keeps the fraction below 1 but for
            // rounding; the clamp below covers both.
            (items as f64 * fraction) as u64
        };
        rank.min(items - 1)
    }
}

/// Σ_{i=start+1..=end} 1 / i^θ: the terms of ζ(end, θ) beyond ζ(start, θ).
fn zeta_range(start: u64, end: u64, theta: f64) -> f64 {
    (start..end)
        .map(|i| 1.0 / ((i + 1) as f64).powf(theta))
        .sum()
}

/// Gray's η for `items` items: scales the continuous part of the inverse
/// CDF so the approximate mass of ranks ≥ 2 is 1 - ζ(2)/ζ(n). Meaningless
/// (NaN at 2) for `items` ≤ 2, where every draw is rank 0 or 1 and η is
/// never read.
fn eta(items: u64, theta: f64, zeta_2: f64, zeta_n: f64) -> f64 {
    (1.0 - (2.0 / items as f64).powf(1.0 - theta)) / (1.0 - zeta_2 / zeta_n)
}

/// YCSB's `ScrambledZipfianGenerator`: zipfian ranks spread over the key
/// space by hashing, so the hot keys are scattered rather than a hot range
/// at the start of the key space (which would sit in a few key tables).
///
/// Unlike YCSB, the ranks are drawn over `items` itself. YCSB draws them
/// over 10^10 items (with a precomputed ζ = 26.469) and folds the hash into
/// the key count, which makes the skew much weaker than zipf over the real
/// key count: the hottest 1% of 2M keys take ~42%
/// of requests rather than ~68%. BENCHMARKS.md compares against a workload
/// whose hottest 1% take ~63%, so we keep zipf over the real key count.
/// Ranks whose hashes collide modulo `items` share a key, as in YCSB.
#[derive(Clone, Debug)]
pub struct ScrambledZipfian {
    zipfian: Zipfian,
    items: u64,
}

impl ScrambledZipfian {
    /// Keys in `0..items` (`items` of 0 is taken as 1); see
    /// [`Zipfian::new`] for `theta`.
    pub fn new(items: u64, theta: f64) -> Self {
        let items = items.max(1);
        Self {
            zipfian: Zipfian::new(items, theta),
            items,
        }
    }

    /// A key in `0..items`, for the `items` given at construction.
    pub fn sample<R: Rng + ?Sized>(&mut self, rng: &mut R) -> u64 {
        let rank = self.zipfian.sample(rng, self.items);
        fnv1a_64(rank) % self.items
    }
}

/// YCSB's `SkewedLatestGenerator`: the most recently inserted keys are the
/// most popular, with zipfian skew by age.
#[derive(Clone, Debug)]
pub struct Latest {
    zipfian: Zipfian,
}

impl Latest {
    /// See [`Zipfian::new`] for `items` and `theta`.
    pub fn new(items: u64, theta: f64) -> Self {
        Self {
            zipfian: Zipfian::new(items, theta),
        }
    }

    /// A key in `0..items`, where `items` is the current key count and may
    /// have grown since the last call; key `items - 1` is the most popular.
    ///
    /// YCSB returns `last - rank` with `last` the newest key's number, so it
    /// never picks its first key; counting from `items - 1` fixes that.
    pub fn sample<R: Rng + ?Sized>(&mut self, rng: &mut R, items: u64) -> u64 {
        let items = items.max(1);
        let rank = self.zipfian.sample(rng, items);
        items - 1 - rank
    }
}

/// YCSB's `Utils.fnvhash64`: FNV-1a 64 over the eight bytes of `value`,
/// least significant first, then `Math.abs` of the result as a Java `long`.
///
/// YCSB's definition (core/src/main/java/site/ycsb/Utils.java):
/// ```text
/// long hashval = FNV_OFFSET_BASIS_64;
/// for (int i = 0; i < 8; i++) {
///   long octet = val & 0x00ff;
///   val = val >> 8;
///   hashval = hashval ^ octet;
///   hashval = hashval * FNV_PRIME_64;
/// }
/// return Math.abs(hashval);
/// ```
/// Java's arithmetic shift brings in sign bits, but only after all eight
/// bytes have been read, so it does not change the result. Java's
/// `Math.abs(Long.MIN_VALUE)` is `Long.MIN_VALUE`; `wrapping_abs` keeps that,
/// and read as unsigned it is 2^63, so the result stays in `0..=2^63` and
/// `% items` never goes negative as YCSB's can.
pub fn fnv1a_64(value: u64) -> u64 {
    let hash = value
        .to_le_bytes()
        .iter()
        .fold(FNV_OFFSET_BASIS_64, |hash, &byte| {
            (hash ^ u64::from(byte)).wrapping_mul(FNV_PRIME_64)
        });
    (hash as i64).wrapping_abs() as u64
}

/// Per-thread chooser of key indexes in `0..items` for one distribution.
#[derive(Clone, Debug)]
pub struct KeyChooser {
    inner: Chooser,
}

#[derive(Clone, Debug)]
enum Chooser {
    Uniform,
    Zipfian(ScrambledZipfian),
    Latest(Latest),
}

impl KeyChooser {
    /// `items` is the key count at the start; `theta` applies to zipfian
    /// and latest (see [`Zipfian::new`] for its range).
    pub fn new(distribution: KeyDistribution, items: u64, theta: f64) -> Self {
        let inner = match distribution {
            KeyDistribution::Uniform => Chooser::Uniform,
            KeyDistribution::Zipfian => Chooser::Zipfian(ScrambledZipfian::new(items, theta)),
            KeyDistribution::Latest => Chooser::Latest(Latest::new(items, theta)),
        };
        Self { inner }
    }

    /// A key in `0..items`, where `items` is the current key count (0 is
    /// taken as 1).
    ///
    /// Zipfian keeps the key space it was built with, as YCSB's chooser
    /// does: keys inserted since are never chosen, and if `items` is smaller
    /// than at construction the key is folded into range with `% items`,
    /// which keeps the hot set hot. Latest follows `items` as it grows.
    pub fn next<R: Rng + ?Sized>(&mut self, rng: &mut R, items: u64) -> u64 {
        let items = items.max(1);
        match &mut self.inner {
            Chooser::Uniform => rng.gen_range(0..items),
            Chooser::Zipfian(scrambled) => scrambled.sample(rng) % items,
            Chooser::Latest(latest) => latest.sample(rng, items),
        }
    }
}

/// A seeded pseudo-random permutation of `0..n`: every index exactly once,
/// in random order, without an O(n) table (which at 16M keys would be
/// 128 MiB per thread). Used for unique random inserts (filluniquerandom,
/// YCSB's hashed insert order).
///
/// A balanced Feistel network permutes the smallest power of four ≥ n
/// (Feistel halves must be equal, so the bit count is even), and cycle
/// walking re-applies it until the result falls below n: a permutation of
/// a superset restricted this way is a permutation of `0..n` (Black and
/// Rogaway, "Ciphers with Arbitrary Finite Domains", 2002). The domain is
/// under 4n, so a step takes fewer than four walks on average.
#[derive(Clone, Debug)]
pub struct Permutation {
    n: u64,
    half_bits: u32,
    half_mask: u64,
    round_keys: [u64; FEISTEL_ROUNDS],
}

impl Permutation {
    pub fn new(n: u64, seed: u64) -> Self {
        let bits = u64::BITS - n.saturating_sub(1).leading_zeros();
        // At least one bit per half keeps the shifts and masks meaningful
        // for n ≤ 2.
        let half_bits = bits.div_ceil(2).max(1);
        // bits ≤ 64, so half_bits ≤ 32 and the shift cannot overflow.
        let half_mask = (1u64 << half_bits) - 1;
        let mut state = seed;
        let round_keys = std::array::from_fn(|_| splitmix64(&mut state));
        Self {
            n,
            half_bits,
            half_mask,
            round_keys,
        }
    }

    /// The image of `index`, for `index < n`. Out-of-range indexes are
    /// reduced modulo n first, so the call never loops forever.
    pub fn get(&self, index: u64) -> u64 {
        if self.n <= 1 {
            return 0;
        }
        let mut value = index % self.n;
        // Terminates: the cycle through `value` returns to `value` < n.
        loop {
            value = self.feistel(value);
            if value < self.n {
                return value;
            }
        }
    }

    fn feistel(&self, value: u64) -> u64 {
        let mut left = value >> self.half_bits;
        let mut right = value & self.half_mask;
        for &key in &self.round_keys {
            let next_right = left ^ (mix64(right ^ key) & self.half_mask);
            left = right;
            right = next_right;
        }
        (left << self.half_bits) | right
    }
}

/// SplitMix64's step: turns one seed into a sequence of well-mixed keys.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    mix64(*state)
}

/// SplitMix64's finalizer (Stafford's variant 13): every input bit affects
/// every output bit, which the Feistel round function needs.
fn mix64(value: u64) -> u64 {
    let value = (value ^ (value >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    let value = (value ^ (value >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    value ^ (value >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::assert_close;
    use rand::rngs::StdRng;
    use rand::SeedableRng;
    use std::collections::HashSet;

    const THETA: f64 = DEFAULT_ZIPF_THETA;

    /// The exact zipf probability of `rank` among `items`.
    fn zipf_pmf(rank: u64, items: u64, theta: f64) -> f64 {
        1.0 / (((rank + 1) as f64).powf(theta) * zeta_range(0, items, theta))
    }

    fn histogram(samples: impl Iterator<Item = u64>, items: u64) -> Vec<u64> {
        let mut counts = vec![0u64; items as usize];
        for sample in samples {
            counts[sample as usize] += 1;
        }
        counts
    }

    fn draws(distribution: KeyDistribution, seed: u64, items: u64, count: usize) -> Vec<u64> {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut chooser = KeyChooser::new(distribution, items, THETA);
        (0..count).map(|_| chooser.next(&mut rng, items)).collect()
    }

    #[test]
    fn choosers_are_deterministic_for_a_seed() {
        for distribution in [
            KeyDistribution::Uniform,
            KeyDistribution::Zipfian,
            KeyDistribution::Latest,
        ] {
            let first = draws(distribution, 7, 100_000, 1000);
            assert_eq!(first, draws(distribution, 7, 100_000, 1000));
            assert_ne!(first, draws(distribution, 8, 100_000, 1000));
        }
    }

    #[test]
    fn uniform_has_the_mean_and_variance_of_a_uniform_integer() {
        let items = 1000u64;
        let samples = draws(KeyDistribution::Uniform, 1, items, 200_000);
        assert!(samples.iter().all(|&key| key < items));
        let len = samples.len() as f64;
        let mean = samples.iter().map(|&key| key as f64).sum::<f64>() / len;
        let variance = samples
            .iter()
            .map(|&key| (key as f64 - mean).powi(2))
            .sum::<f64>()
            / len;
        let n = items as f64;
        assert_close(mean, (n - 1.0) / 2.0, 0.01, "uniform mean");
        assert_close(variance, (n * n - 1.0) / 12.0, 0.02, "uniform variance");
    }

    #[test]
    fn zipfian_rank_zero_and_top_percent_match_the_pmf() {
        let items = 10_000u64;
        let draws_count = 200_000;
        let mut rng = StdRng::seed_from_u64(42);
        let mut zipfian = Zipfian::new(items, THETA);
        let counts = histogram(
            (0..draws_count).map(|_| zipfian.sample(&mut rng, items)),
            items,
        );
        let frequency = |count: u64| count as f64 / draws_count as f64;
        assert_close(
            frequency(counts[0]),
            zipf_pmf(0, items, THETA),
            0.03,
            "rank 0",
        );
        assert_close(
            frequency(counts[1]),
            zipf_pmf(1, items, THETA),
            0.05,
            "rank 1",
        );
        let top_percent = (items / 100) as usize;
        let expected: f64 = (0..top_percent as u64)
            .map(|rank| zipf_pmf(rank, items, THETA))
            .sum();
        let actual = frequency(counts[..top_percent].iter().sum());
        // Gray's approximation puts ~2.2% too much here (see `Zipfian`).
        assert_close(actual, expected, 0.04, "top 1% of ranks");
        assert!(actual > expected, "{actual} vs {expected}");
        // Popularity falls with rank.
        assert!(counts[0] > counts[1] && counts[1] > counts[2] && counts[2] > counts[10]);
    }

    #[test]
    fn zipfian_growth_extends_zeta_incrementally() {
        let mut rng = StdRng::seed_from_u64(3);
        let mut grown = Zipfian::new(10, THETA);
        assert_eq!(grown.items(), 10);
        for items in [11, 100, 5_000, 10_000] {
            let rank = grown.sample(&mut rng, items);
            assert!(rank < items);
            assert_eq!(grown.items(), items);
        }
        let fresh = Zipfian::new(10_000, THETA);
        assert_close(grown.zeta_n, fresh.zeta_n, 1e-12, "grown zeta");
        assert_close(grown.eta, fresh.eta, 1e-12, "grown eta");
        // It never shrinks, and a smaller count still yields ranks in range.
        for _ in 0..10_000 {
            assert!(grown.sample(&mut rng, 2) < 2);
            assert_eq!(grown.sample(&mut rng, 1), 0);
            assert_eq!(grown.sample(&mut rng, 0), 0);
        }
        assert_eq!(grown.items(), 10_000);
    }

    #[test]
    fn zipfian_over_one_or_two_items_stays_in_range() {
        let mut rng = StdRng::seed_from_u64(5);
        let mut one = Zipfian::new(0, THETA);
        assert_eq!(one.items(), 1);
        assert!((0..1000).all(|_| one.sample(&mut rng, 1) == 0));
        let mut two = Zipfian::new(2, THETA);
        let samples: Vec<u64> = (0..10_000).map(|_| two.sample(&mut rng, 2)).collect();
        assert!(samples.iter().all(|&rank| rank < 2));
        let zeros = samples.iter().filter(|&&rank| rank == 0).count() as f64;
        assert_close(zeros / 10_000.0, zipf_pmf(0, 2, THETA), 0.05, "rank 0 of 2");
    }

    #[test]
    #[should_panic(expected = "theta")]
    fn zipfian_rejects_theta_one() {
        Zipfian::new(10, 1.0);
    }

    #[test]
    fn zipfian_clone_keeps_zeta() {
        let zipfian = Zipfian::new(1 << 20, THETA);
        let clone = zipfian.clone();
        assert_eq!(clone.zeta_n.to_bits(), zipfian.zeta_n.to_bits());
        assert_eq!(clone.items(), 1 << 20);
    }

    #[test]
    fn scrambled_zipfian_scatters_hot_keys_but_keeps_zipf_frequencies() {
        let items = 10_000u64;
        let draws_count = 200_000;
        let mut rng = StdRng::seed_from_u64(11);
        let mut scrambled = ScrambledZipfian::new(items, THETA);
        let clone = scrambled.clone();
        let counts = histogram((0..draws_count).map(|_| scrambled.sample(&mut rng)), items);
        // In range is checked by the indexing in `counts`.
        let hottest = (0..items as usize)
            .max_by_key(|&key| counts[key])
            .unwrap_or(0) as u64;
        assert_eq!(hottest, fnv1a_64(0) % items);
        assert_ne!(hottest, 0);
        // Hot keys are not adjacent: the ten hottest span most of the space.
        let mut sorted: Vec<(u64, usize)> = counts
            .iter()
            .enumerate()
            .map(|(key, &count)| (count, key))
            .collect();
        sorted.sort_unstable_by(|a, b| b.cmp(a));
        let hot_keys: Vec<usize> = sorted[..10].iter().map(|&(_, key)| key).collect();
        let span = hot_keys.iter().max().unwrap_or(&0) - hot_keys.iter().min().unwrap_or(&0);
        assert!(span > items as usize / 2, "hot keys {hot_keys:?}");
        // Scrambling only moves ranks to other keys: the hottest keys are as
        // hot as the hottest ranks of the unscrambled generator.
        let mut zipfian = Zipfian::new(items, THETA);
        let ranks = histogram(
            (0..draws_count).map(|_| zipfian.sample(&mut rng, items)),
            items,
        );
        for (rank, &(count, _)) in sorted[..10].iter().enumerate() {
            assert_close(count as f64, ranks[rank] as f64, 0.1, "sorted frequency");
        }
        for (rank, &(count, _)) in sorted[..2].iter().enumerate() {
            let frequency = count as f64 / draws_count as f64;
            assert_close(frequency, zipf_pmf(rank as u64, items, THETA), 0.05, "pmf");
        }
        // The clone draws the same keys from the same seed.
        let mut clone = clone;
        let mut first = StdRng::seed_from_u64(1);
        let mut second = StdRng::seed_from_u64(1);
        let mut original = ScrambledZipfian::new(items, THETA);
        for _ in 0..100 {
            assert_eq!(clone.sample(&mut first), original.sample(&mut second));
        }
    }

    #[test]
    fn latest_prefers_the_newest_keys() {
        let items = 1000u64;
        let counts = histogram(
            draws(KeyDistribution::Latest, 9, items, 100_000).into_iter(),
            items,
        );
        let newest = items as usize - 1;
        assert!(counts[newest] > counts[newest - 1]);
        assert!(counts[newest - 1] > counts[newest - 2]);
        assert!(counts[newest - 2] > counts[newest - 10]);
        assert!(counts[newest - 10] > counts[0]);
        assert_close(
            counts[newest] as f64 / 100_000.0,
            zipf_pmf(0, items, THETA),
            0.05,
            "newest key",
        );
    }

    #[test]
    fn latest_follows_a_growing_key_count() {
        let mut rng = StdRng::seed_from_u64(13);
        let mut latest = Latest::new(1, THETA);
        let mut newest_hits = 0;
        for items in 1..=20_000u64 {
            let key = latest.sample(&mut rng, items);
            assert!(key < items, "{key} >= {items}");
            if key == items - 1 {
                newest_hits += 1;
            }
        }
        // The newest key is hit about as often as rank 0 of zipf: ~10%.
        assert!(newest_hits > 1500, "newest hit {newest_hits} times");
        assert_eq!(latest.zipfian.items(), 20_000);
        let mut chooser = KeyChooser::new(KeyDistribution::Latest, 0, THETA);
        assert_eq!(chooser.next(&mut rng, 0), 0);
        assert!((0..1000).all(|_| chooser.next(&mut rng, 50) < 50));
    }

    #[test]
    fn zipfian_chooser_folds_into_a_smaller_key_count() {
        let mut rng = StdRng::seed_from_u64(17);
        let mut chooser = KeyChooser::new(KeyDistribution::Zipfian, 10_000, THETA);
        assert!((0..10_000).all(|_| chooser.next(&mut rng, 100) < 100));
        assert!((0..10_000).all(|_| chooser.next(&mut rng, 1_000_000) < 10_000));
    }

    /// FNV-1a 64 over any bytes, written from the FNV specification
    /// independently of `fnv1a_64`.
    fn fnv1a_bytes(bytes: &[u8]) -> u64 {
        let mut hash: u64 = 14_695_981_039_346_656_037;
        for &byte in bytes {
            hash ^= byte as u64;
            hash = hash.wrapping_mul(1_099_511_628_211);
        }
        hash
    }

    /// Java's `Math.abs` on a `long`, read back as unsigned.
    fn java_abs(hash: u64) -> u64 {
        // |i64::MIN| = 2^63 has the same bits as Java's Long.MIN_VALUE.
        i128::from(hash as i64).unsigned_abs() as u64
    }

    #[test]
    fn fnv1a_64_matches_ycsb_fnvhash64() {
        // The FNV reference test vectors check the independent version.
        assert_eq!(fnv1a_bytes(b""), 0xCBF2_9CE4_8422_2325);
        assert_eq!(fnv1a_bytes(b"a"), 0xAF63_DC4C_8601_EC8C);
        assert_eq!(fnv1a_bytes(b"foobar"), 0x8594_4171_F739_67E8);
        // Raw hash 0xA8C7F832281A39C5 is negative as a Java long: negated.
        assert_eq!(fnv1a_64(0), 0x5738_07CD_D7E5_C63B);
        // Raw hash 0x2CDCDC0DFC5D1141 is positive: unchanged.
        assert_eq!(fnv1a_64(4), 0x2CDC_DC0D_FC5D_1141);
        let mut rng = StdRng::seed_from_u64(19);
        let values = [1, 2, 255, 256, u64::MAX, 1 << 63, 0x0102_0304_0506_0708];
        for value in values.into_iter().chain((0..1000).map(|_| rng.gen())) {
            let expected = java_abs(fnv1a_bytes(&value.to_le_bytes()));
            assert_eq!(fnv1a_64(value), expected, "value {value:#x}");
            assert!(fnv1a_64(value) <= 1 << 63);
        }
    }

    #[test]
    fn permutation_is_a_bijection() {
        for n in [1u64, 2, 3, 4, 5, 1000, 1 << 16, 12_345] {
            for seed in [0u64, 1, 0xDEAD_BEEF] {
                let permutation = Permutation::new(n, seed);
                let mut seen = vec![false; n as usize];
                for index in 0..n {
                    let image = permutation.get(index);
                    assert!(image < n, "n {n} seed {seed}: {index} -> {image}");
                    assert!(!seen[image as usize], "n {n} seed {seed}: {image} twice");
                    seen[image as usize] = true;
                }
            }
        }
    }

    #[test]
    fn permutation_depends_on_the_seed_and_shuffles() {
        let n = 12_345u64;
        let first: Vec<u64> = (0..n).map(|i| Permutation::new(n, 1).get(i)).collect();
        let second: Vec<u64> = (0..n).map(|i| Permutation::new(n, 2).get(i)).collect();
        assert_ne!(first, second);
        let fixed_points = first
            .iter()
            .enumerate()
            .filter(|&(index, &image)| index as u64 == image)
            .count();
        // A random permutation has one fixed point on average.
        assert!(fixed_points < 20, "{fixed_points} fixed points");
        // Neighbours land far apart: no long runs of consecutive images.
        let consecutive = first
            .windows(2)
            .filter(|pair| pair[1] == pair[0] + 1)
            .count();
        assert!(consecutive < 20, "{consecutive} consecutive pairs");
        // The same seed gives the same order.
        assert_eq!(
            first,
            (0..n)
                .map(|i| Permutation::new(n, 1).get(i))
                .collect::<Vec<_>>()
        );
        // Large n works without a table.
        let large = Permutation::new(u64::MAX, 3);
        let images: HashSet<u64> = (0..1000).map(|i| large.get(i)).collect();
        assert_eq!(images.len(), 1000);
    }

    #[test]
    fn permutation_two_elements_swaps_for_some_seed() {
        let orders: HashSet<(u64, u64)> = (0..16)
            .map(|seed| {
                let permutation = Permutation::new(2, seed);
                (permutation.get(0), permutation.get(1))
            })
            .collect();
        assert_eq!(orders.len(), 2);
    }
}
