//! Value sizes for the papers' workloads (see /work/shared/BENCHMARKS.md):
//! fixed, uniform, Scavenger+'s Mixed-8K and Pareto-1K, KDSep's UP2X.

use anyhow::{bail, Result};
use rand::Rng;

/// Mixed-8K's small half: uniform 100–512 B (Scavenger+ §IV-A).
const MIXED_SMALL_MIN_BYTES: usize = 100;
const MIXED_SMALL_MAX_BYTES: usize = 512;
/// Mixed-8K's large half: exactly 16 KiB.
const MIXED_LARGE_BYTES: usize = 16 << 10;

/// Pareto-1K: a generalized Pareto with location 0 (Scavenger+ §IV-A,
/// fitted to Facebook's RocksDB value-size traces), mean σ / (1 - ξ) ≈ 1 KiB.
const PARETO_SHAPE: f64 = 0.2615;
const PARETO_SCALE: f64 = 756.0;
/// The clamp the papers apply, so no value is empty or absurdly large.
const PARETO_MIN_BYTES: usize = 16;
const PARETO_MAX_BYTES: usize = 64 << 10;

/// UP2X's value sizes (KDSep Exp#2, after Cao et al., FAST '20): normal
/// with mean 46.8 B and standard deviation 11.6 B, clamped about 4σ either
/// side, which moves the mean by well under a byte.
const UP2X_VALUE_MEAN_BYTES: f64 = 46.8;
const UP2X_VALUE_SD_BYTES: f64 = 11.6;
const UP2X_VALUE_MIN_BYTES: usize = 1;
const UP2X_VALUE_MAX_BYTES: usize = 94;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ValueSizeDistribution {
    Fixed,
    #[value(name = "mixed-8k")]
    Mixed8k,
    #[value(name = "pareto-1k")]
    Pareto1k,
    Uniform,
    Up2x,
}

/// Draws value sizes in bytes from one distribution.
#[derive(Clone, Debug)]
pub struct ValueSizes {
    kind: Kind,
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Fixed(usize),
    Uniform { min: usize, max: usize },
    Mixed8k,
    Pareto1k,
    Up2x,
}

impl ValueSizes {
    /// `value_size` is used by `fixed` only, `min` and `max` by `uniform`
    /// only; the papers' workloads have their sizes built in.
    pub fn new(
        distribution: ValueSizeDistribution,
        value_size: usize,
        min: usize,
        max: usize,
    ) -> Result<Self> {
        let kind = match distribution {
            ValueSizeDistribution::Fixed => Kind::Fixed(value_size),
            ValueSizeDistribution::Uniform => {
                if min > max {
                    bail!("--value_size_min ({min}) is larger than --value_size_max ({max})");
                }
                Kind::Uniform { min, max }
            }
            ValueSizeDistribution::Mixed8k => Kind::Mixed8k,
            ValueSizeDistribution::Pareto1k => Kind::Pareto1k,
            ValueSizeDistribution::Up2x => Kind::Up2x,
        };
        Ok(Self { kind })
    }

    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> usize {
        match self.kind {
            Kind::Fixed(size) => size,
            Kind::Uniform { min, max } => rng.gen_range(min..=max),
            Kind::Mixed8k => {
                if rng.gen::<bool>() {
                    rng.gen_range(MIXED_SMALL_MIN_BYTES..=MIXED_SMALL_MAX_BYTES)
                } else {
                    MIXED_LARGE_BYTES
                }
            }
            Kind::Pareto1k => pareto_1k(rng.gen()),
            Kind::Up2x => {
                // gen() is in [0, 1); the transform wants (0, 1].
                let (u1, u2) = (1.0 - rng.gen::<f64>(), 1.0 - rng.gen::<f64>());
                let size = normal(u1, u2, UP2X_VALUE_MEAN_BYTES, UP2X_VALUE_SD_BYTES);
                (size.round() as usize).clamp(UP2X_VALUE_MIN_BYTES, UP2X_VALUE_MAX_BYTES)
            }
        }
    }

    /// The largest size `sample` can return, to size the value buffer.
    pub fn max(&self) -> usize {
        match self.kind {
            Kind::Fixed(size) => size,
            Kind::Uniform { max, .. } => max,
            Kind::Mixed8k => MIXED_LARGE_BYTES,
            Kind::Pareto1k => PARETO_MAX_BYTES,
            Kind::Up2x => UP2X_VALUE_MAX_BYTES,
        }
    }

    /// The distribution's mean in bytes, to turn a live-data target into a
    /// key count.
    pub fn mean(&self) -> f64 {
        match self.kind {
            Kind::Fixed(size) => size as f64,
            Kind::Uniform { min, max } => (min as f64 + max as f64) / 2.0,
            Kind::Mixed8k => {
                let small = (MIXED_SMALL_MIN_BYTES + MIXED_SMALL_MAX_BYTES) as f64 / 2.0;
                (small + MIXED_LARGE_BYTES as f64) / 2.0
            }
            Kind::Pareto1k => pareto_1k_mean(),
            Kind::Up2x => UP2X_VALUE_MEAN_BYTES,
        }
    }
}

/// A normal draw from two uniforms in (0, 1] (Box–Muller).
pub fn normal(u1: f64, u2: f64, mean: f64, sd: f64) -> f64 {
    mean + sd * (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// Pareto-1K's size for a uniform `u` in [0, 1), by inverting the CDF
/// F(x) = 1 - (1 + ξx/σ)^(-1/ξ), then clamping.
fn pareto_1k(u: f64) -> usize {
    // 1 - u is in (0, 1], so the power is finite.
    let size = PARETO_SCALE / PARETO_SHAPE * ((1.0 - u).powf(-PARETO_SHAPE) - 1.0);
    // `as` saturates on huge or NaN values; the clamp bounds the rest.
    (size.round() as usize).clamp(PARETO_MIN_BYTES, PARETO_MAX_BYTES)
}

/// The exact mean of Pareto-1K clamped to [a, b]: E[clamp(X, a, b)] is
/// a + ∫_a^b S(x) dx, and S integrates in closed form, since
/// d/dx (1 + ξx/σ)^(1 - 1/ξ) = -((1 - ξ)/σ) · S(x).
///
/// Sizes are rounded to whole bytes, which moves the mean by well under a
/// byte; the clamps move it more (+~5 B at 16 B, -~0.1 B at 64 KiB).
fn pareto_1k_mean() -> f64 {
    let (low, high) = (PARETO_MIN_BYTES as f64, PARETO_MAX_BYTES as f64);
    let antiderivative =
        |x: f64| (1.0 + PARETO_SHAPE * x / PARETO_SCALE).powf(1.0 - 1.0 / PARETO_SHAPE);
    low + PARETO_SCALE / (1.0 - PARETO_SHAPE) * (antiderivative(low) - antiderivative(high))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::assert_close;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    const DRAWS: usize = 400_000;

    fn sizes(distribution: ValueSizeDistribution, min: usize, max: usize) -> ValueSizes {
        match ValueSizes::new(distribution, 1000, min, max) {
            Ok(sizes) => sizes,
            Err(error) => panic!("{distribution:?}: {error}"),
        }
    }

    fn draw(sizes: &ValueSizes, seed: u64, count: usize) -> Vec<usize> {
        let mut rng = StdRng::seed_from_u64(seed);
        (0..count).map(|_| sizes.sample(&mut rng)).collect()
    }

    fn mean(samples: &[usize]) -> f64 {
        samples.iter().map(|&size| size as f64).sum::<f64>() / samples.len() as f64
    }

    #[test]
    fn fixed_is_constant() {
        let sizes = sizes(ValueSizeDistribution::Fixed, 0, 0);
        assert!(draw(&sizes, 1, 1000).iter().all(|&size| size == 1000));
        assert_eq!(sizes.max(), 1000);
        assert_eq!(sizes.mean(), 1000.0);
    }

    #[test]
    fn uniform_stays_in_bounds_with_the_midpoint_mean() {
        let sizes = sizes(ValueSizeDistribution::Uniform, 100, 900);
        let samples = draw(&sizes, 2, DRAWS);
        assert!(samples.iter().all(|&size| (100..=900).contains(&size)));
        assert!(samples.contains(&100) && samples.contains(&900));
        assert_eq!(sizes.max(), 900);
        assert_eq!(sizes.mean(), 500.0);
        assert_close(mean(&samples), sizes.mean(), 0.01, "uniform mean");
        let single = self::sizes(ValueSizeDistribution::Uniform, 7, 7);
        assert!(draw(&single, 3, 100).iter().all(|&size| size == 7));
    }

    #[test]
    fn up2x_is_normal_around_47_bytes() {
        let sizes = sizes(ValueSizeDistribution::Up2x, 0, 0);
        let samples = draw(&sizes, 5, DRAWS);
        assert!(samples
            .iter()
            .all(|size| (UP2X_VALUE_MIN_BYTES..=UP2X_VALUE_MAX_BYTES).contains(size)));
        assert_eq!(sizes.max(), UP2X_VALUE_MAX_BYTES);
        assert_close(mean(&samples), UP2X_VALUE_MEAN_BYTES, 0.01, "up2x mean");
        let m = mean(&samples);
        let variance = samples
            .iter()
            .map(|&size| (size as f64 - m).powi(2))
            .sum::<f64>()
            / DRAWS as f64;
        assert_close(variance.sqrt(), UP2X_VALUE_SD_BYTES, 0.02, "up2x sd");
    }

    #[test]
    fn uniform_rejects_min_above_max_naming_the_flags() {
        let error = match ValueSizes::new(ValueSizeDistribution::Uniform, 0, 10, 9) {
            Ok(sizes) => panic!("accepted min > max: {sizes:?}"),
            Err(error) => error.to_string(),
        };
        assert!(error.contains("--value_size_min"), "{error}");
        assert!(error.contains("--value_size_max"), "{error}");
    }

    #[test]
    fn mixed_8k_is_half_small_half_16_kib() {
        let sizes = sizes(ValueSizeDistribution::Mixed8k, 0, 0);
        assert_eq!(sizes.mean(), 8345.0);
        assert_eq!(sizes.max(), 16_384);
        let samples = draw(&sizes, 4, DRAWS);
        let small = samples.iter().filter(|&&size| size <= 512).count();
        let large = samples.iter().filter(|&&size| size == 16_384).count();
        assert_eq!(small + large, samples.len());
        assert!(samples
            .iter()
            .all(|&size| size == 16_384 || (100..=512).contains(&size)));
        assert_close(small as f64 / DRAWS as f64, 0.5, 0.01, "small share");
        assert_close(mean(&samples), 8345.0, 0.01, "mixed-8k mean");
    }

    #[test]
    fn pareto_1k_matches_its_mean_median_and_clamps() {
        let sizes = sizes(ValueSizeDistribution::Pareto1k, 0, 0);
        assert_eq!(sizes.max(), 65_536);
        assert_close(sizes.mean(), 1024.0, 0.03, "pareto-1k analytic mean");
        let mut samples = draw(&sizes, 5, DRAWS);
        assert!(samples.iter().all(|&size| (16..=65_536).contains(&size)));
        assert!(samples.contains(&16), "the low clamp is reached");
        assert_close(mean(&samples), sizes.mean(), 0.03, "pareto-1k sample mean");
        samples.sort_unstable();
        let median = samples[samples.len() / 2] as f64;
        let analytic_median = PARETO_SCALE / PARETO_SHAPE * (2f64.powf(PARETO_SHAPE) - 1.0);
        assert_close(median, analytic_median, 0.02, "pareto-1k median");
        // The inverse CDF at the extremes stays clamped.
        assert_eq!(pareto_1k(0.0), 16);
        assert_eq!(pareto_1k(1.0 - f64::EPSILON), 65_536);
    }

    /// Pareto-1K's survival function before clamping, P(X > x).
    fn pareto_survival(x: f64) -> f64 {
        (1.0 + PARETO_SHAPE * x / PARETO_SCALE).powf(-1.0 / PARETO_SHAPE)
    }

    #[test]
    fn pareto_1k_mean_agrees_with_quadrature() {
        // a + ∫_a^b S(x) dx by Simpson's rule, independent of the closed form.
        let (low, high) = (PARETO_MIN_BYTES as f64, PARETO_MAX_BYTES as f64);
        let steps = 1 << 20;
        let width = (high - low) / steps as f64;
        let mut sum = pareto_survival(low) + pareto_survival(high);
        for step in 1..steps {
            let weight = if step % 2 == 1 { 4.0 } else { 2.0 };
            sum += weight * pareto_survival(low + step as f64 * width);
        }
        let quadrature = low + sum * width / 3.0;
        assert!(
            (quadrature - pareto_1k_mean()).abs() < 1e-6,
            "{quadrature} vs {}",
            pareto_1k_mean()
        );
        // Without the clamps the mean is σ / (1 - ξ).
        assert_close(
            pareto_1k_mean(),
            PARETO_SCALE / (1.0 - PARETO_SHAPE),
            0.01,
            "clamped vs unclamped mean",
        );
    }

    #[test]
    fn sizes_are_deterministic_for_a_seed() {
        for distribution in [
            ValueSizeDistribution::Uniform,
            ValueSizeDistribution::Mixed8k,
            ValueSizeDistribution::Pareto1k,
        ] {
            let sizes = sizes(distribution, 10, 5000);
            assert_eq!(draw(&sizes, 6, 1000), draw(&sizes, 6, 1000));
            assert_ne!(draw(&sizes, 6, 1000), draw(&sizes, 7, 1000));
        }
    }
}
