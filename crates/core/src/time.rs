//! Time as plain nanoseconds.
//!
//! The core never reads a clock: drivers pass `now` in. The simulator passes virtual time, the
//! runtime a monotonic clock; both are just `Nanos` here, so the same code serves both.

use serde::{Deserialize, Serialize};
use std::ops::{Add, AddAssign, Sub};

/// A point in time or a duration, in nanoseconds. The driver decides the epoch.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct Nanos(pub u64);

impl Nanos {
    /// Zero time.
    pub const ZERO: Nanos = Nanos(0);
    /// The far future: a deadline that never comes.
    pub const MAX: Nanos = Nanos(u64::MAX);

    /// From microseconds, saturating at [`Nanos::MAX`] (about 584 years).
    pub const fn from_us(us: u64) -> Nanos {
        Nanos(us.saturating_mul(1_000))
    }

    /// From milliseconds, saturating at [`Nanos::MAX`].
    pub const fn from_ms(ms: u64) -> Nanos {
        Nanos(ms.saturating_mul(1_000_000))
    }

    /// From fractional microseconds, rounded to the nearest nanosecond; negative or NaN gives zero.
    pub fn from_us_f64(us: f64) -> Nanos {
        if us.is_nan() || us <= 0.0 {
            Nanos::ZERO
        } else {
            // `as` saturates: +inf and values past u64::MAX become Nanos::MAX.
            Nanos((us * 1_000.0).round() as u64)
        }
    }

    /// As fractional microseconds.
    pub fn as_us_f64(self) -> f64 {
        self.0 as f64 / 1_000.0
    }

    /// `self - earlier`, or zero when `earlier` is later.
    pub const fn saturating_sub(self, earlier: Nanos) -> Nanos {
        Nanos(self.0.saturating_sub(earlier.0))
    }

    /// `self + d`, saturating at [`Nanos::MAX`].
    pub const fn saturating_add(self, d: Nanos) -> Nanos {
        Nanos(self.0.saturating_add(d.0))
    }
}

/// Saturating: a deadline past the end of time is the end of time, never a wrap to the past
/// (values come from clients and environment variables).
impl Add for Nanos {
    type Output = Nanos;
    fn add(self, rhs: Nanos) -> Nanos {
        self.saturating_add(rhs)
    }
}

impl AddAssign for Nanos {
    fn add_assign(&mut self, rhs: Nanos) {
        *self = self.saturating_add(rhs);
    }
}

/// Saturating at zero: an interval that would be negative is empty.
impl Sub for Nanos {
    type Output = Nanos;
    fn sub(self, rhs: Nanos) -> Nanos {
        self.saturating_sub(rhs)
    }
}

impl std::fmt::Display for Nanos {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:.3}us", self.as_us_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_round_trip() {
        assert_eq!(Nanos::from_us(3), Nanos(3_000));
        assert_eq!(Nanos::from_ms(2), Nanos(2_000_000));
        assert_eq!(Nanos::from_us_f64(1.5), Nanos(1_500));
        assert_eq!(Nanos::from_us_f64(-1.0), Nanos::ZERO);
        assert_eq!(Nanos::from_us_f64(f64::NAN), Nanos::ZERO);
        assert!((Nanos(2_500).as_us_f64() - 2.5).abs() < 1e-12);
        assert_eq!(Nanos(5).saturating_sub(Nanos(9)), Nanos::ZERO);
        assert_eq!(Nanos::MAX.saturating_add(Nanos(1)), Nanos::MAX);
    }

    #[test]
    fn huge_inputs_saturate_instead_of_wrapping() {
        assert_eq!(Nanos::from_us(u64::MAX), Nanos::MAX);
        assert_eq!(Nanos::from_ms(u64::MAX / 1000), Nanos::MAX);
        assert_eq!(Nanos::from_us_f64(f64::INFINITY), Nanos::MAX);
        assert_eq!(Nanos(u64::MAX - 1) + Nanos(5), Nanos::MAX);
        let mut t = Nanos::MAX;
        t += Nanos(1);
        assert_eq!(t, Nanos::MAX);
        assert_eq!(Nanos(3) - Nanos(7), Nanos::ZERO);
    }
}
