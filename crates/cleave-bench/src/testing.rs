//! Helpers shared by the unit tests of the generators.

/// Fails unless `actual` is within `relative` (a fraction) of `expected`.
pub fn assert_close(actual: f64, expected: f64, relative: f64, what: &str) {
    let error = (actual - expected).abs() / expected.abs();
    assert!(
        error <= relative,
        "{what}: {actual} vs expected {expected} (off by {:.2}%)",
        error * 100.0
    );
}
