//! Small statistics the benchmarks report.

/// The median of `v`, which it sorts in place (by [`f64::total_cmp`]).
///
/// For an odd length it is the middle value; for an even length, the mean
/// of the two middle values; for an empty slice, NaN.
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn odd_even_and_empty() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [7.5]), 7.5);
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&mut []).is_nan());
        let mut v = [5.0, -1.0, 0.0];
        median(&mut v);
        assert_eq!(v, [-1.0, 0.0, 5.0], "sorted in place");
    }
}
