//! Instants as Ditto's `java.time.Instant` reads and writes them: subject
//! `expiry` and the `_created`/`_modified` housekeeping fields.
//!
//! `Instant.parse` takes `2030-01-01T00:00:00Z`, a fraction of up to nine
//! digits and, since Java 12, an offset (`+01:00`) that it folds into UTC;
//! `Instant.toString` always prints seconds, and a fraction in groups of
//! three digits only when it is not zero. Writing both by hand (about a
//! hundred lines) keeps a date crate out of the build for two fields.

use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

/// A point in time, UTC, to the nanosecond.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp {
    unix_seconds: i64,
    nanos: u32,
}

impl Timestamp {
    /// Now, at the precision Ditto stamps with: `Instant.now()` on the
    /// JVMs Ditto runs on reads the clock to the microsecond, so its
    /// `_created`, `_modified` and metadata never carry nine fraction
    /// digits.
    pub fn now() -> Self {
        match SystemTime::now().duration_since(UNIX_EPOCH) {
            Ok(since) => Timestamp {
                unix_seconds: i64::try_from(since.as_secs()).unwrap_or(i64::MAX),
                nanos: since.subsec_micros() * 1_000,
            },
            // A clock before 1970 is broken; the epoch is the least wrong
            // answer and expires nothing that a correct clock would keep.
            Err(_) => Timestamp::from_unix(0, 0),
        }
    }

    /// `nanos` beyond a second are clamped, so every value is valid.
    pub fn from_unix(unix_seconds: i64, nanos: u32) -> Self {
        Timestamp { unix_seconds, nanos: nanos.min(999_999_999) }
    }

    pub fn unix_seconds(&self) -> i64 {
        self.unix_seconds
    }

    /// `offset` later.
    pub fn plus(self, offset: std::time::Duration) -> Self {
        Self::from_nanos(self.nanos_since_epoch().saturating_add(offset.as_nanos() as i128))
    }

    /// `offset` earlier.
    pub fn minus(self, offset: std::time::Duration) -> Self {
        Self::from_nanos(self.nanos_since_epoch().saturating_sub(offset.as_nanos() as i128))
    }

    /// How long from `self` until `later`: zero when `later` is not after.
    pub fn until(self, later: Timestamp) -> std::time::Duration {
        let nanos = later.nanos_since_epoch() - self.nanos_since_epoch();
        std::time::Duration::from_nanos(u64::try_from(nanos).unwrap_or(if nanos > 0 {
            u64::MAX
        } else {
            0
        }))
    }

    fn nanos_since_epoch(self) -> i128 {
        i128::from(self.unix_seconds) * 1_000_000_000 + i128::from(self.nanos)
    }

    fn from_nanos(nanos: i128) -> Self {
        let seconds = nanos.div_euclid(1_000_000_000);
        let unix_seconds =
            i64::try_from(seconds).unwrap_or(if seconds > 0 { i64::MAX } else { i64::MIN });
        Timestamp { unix_seconds, nanos: nanos.rem_euclid(1_000_000_000) as u32 }
    }

    /// Parses what `Instant.parse` accepts (with a four-digit year); `None`
    /// otherwise.
    pub fn parse(text: &str) -> Option<Self> {
        let bytes = text.as_bytes();
        let number = |from: usize, len: usize| -> Option<i64> {
            let digits = bytes.get(from..from + len)?;
            digits.iter().try_fold(0i64, |acc, &b| {
                b.is_ascii_digit().then(|| acc * 10 + i64::from(b - b'0'))
            })
        };
        let literal =
            |at: usize, expected: &[u8]| bytes.get(at).is_some_and(|b| expected.contains(b));
        if !(literal(4, b"-")
            && literal(7, b"-")
            && literal(10, b"Tt")
            && literal(13, b":")
            && literal(16, b":"))
        {
            return None;
        }
        let (year, month, day) = (number(0, 4)?, number(5, 2)?, number(8, 2)?);
        let (hour, minute, second) = (number(11, 2)?, number(14, 2)?, number(17, 2)?);
        if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
            return None;
        }
        // Java lets 24:00:00 stand for the next midnight and reads a leap
        // second 60 as 59 plus one, which both come out as plain arithmetic.
        let end_of_day = hour == 24 && minute == 0 && second == 0;
        if !(hour < 24 || end_of_day) || minute > 59 || second > 60 {
            return None;
        }
        let mut at = 19;
        let mut nanos = 0u32;
        if literal(at, b".") {
            let digits = bytes[at + 1..].iter().take_while(|b| b.is_ascii_digit()).count();
            if !(1..=9).contains(&digits) {
                return None;
            }
            let fraction = u32::try_from(number(at + 1, digits)?).ok()?;
            nanos = fraction * 10u32.pow(9 - u32::try_from(digits).ok()?);
            at += 1 + digits;
        }
        let offset_seconds = parse_offset(&text[at..])?;
        let days = days_from_civil(year, month, day);
        let unix_seconds = days * 86_400 + hour * 3_600 + minute * 60 + second - offset_seconds;
        Some(Timestamp { unix_seconds, nanos })
    }

    /// Rounds up to the next multiple of `granularity_seconds` counted from
    /// midnight UTC, as Ditto does to a subject's `expiry` before storing it
    /// (`policies.subject-expiry-granularity`, one hour by default). An
    /// instant already on the grid stays. Granularities that do not divide
    /// a day are Ditto's month-based case, which Ferry does not offer.
    pub fn round_up(self, granularity_seconds: i64) -> Self {
        if granularity_seconds <= 0 {
            return self;
        }
        let on_grid = self.unix_seconds.rem_euclid(granularity_seconds) == 0 && self.nanos == 0;
        if on_grid {
            return self;
        }
        let floor = self.unix_seconds - self.unix_seconds.rem_euclid(granularity_seconds);
        Timestamp { unix_seconds: floor.saturating_add(granularity_seconds), nanos: 0 }
    }
}

/// `Z` or `appendOffsetId`'s `+HH:MM:ss`; the seconds of the offset are
/// optional.
fn parse_offset(text: &str) -> Option<i64> {
    if text.eq_ignore_ascii_case("z") {
        return Some(0);
    }
    let sign = match text.as_bytes().first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let parts: Vec<&str> = text[1..].split(':').collect();
    if !(2..=3).contains(&parts.len())
        || parts.iter().any(|p| p.len() != 2 || !p.bytes().all(|b| b.is_ascii_digit()))
    {
        return None;
    }
    let value: Vec<i64> = parts.iter().filter_map(|p| p.parse().ok()).collect();
    let (hours, minutes, seconds) = (value[0], value[1], value.get(2).copied().unwrap_or(0));
    if hours > 18 || minutes > 59 || seconds > 59 {
        return None;
    }
    Some(sign * (hours * 3_600 + minutes * 60 + seconds))
}

fn is_leap(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 (Howard Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The inverse of [`days_from_civil`]: the year, month and day of a day
/// number counted from 1970-01-01 (Howard Hinnant's algorithm).
pub(crate) fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (year, month, day) = civil_from_days(self.unix_seconds.div_euclid(86_400));
        let second_of_day = self.unix_seconds.rem_euclid(86_400);
        write!(
            f,
            "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}",
            second_of_day / 3_600,
            second_of_day % 3_600 / 60,
            second_of_day % 60
        )?;
        match self.nanos {
            0 => {}
            n if n % 1_000_000 == 0 => write!(f, ".{:03}", n / 1_000_000)?,
            n if n % 1_000 == 0 => write!(f, ".{:06}", n / 1_000)?,
            n => write!(f, ".{n:09}")?,
        }
        f.write_str("Z")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn now_has_at_most_microseconds() {
        let text = Timestamp::now().to_string();
        let fraction = text.split('.').nth(1).map_or(0, |f| f.trim_end_matches('Z').len());
        assert!(fraction <= 6, "{text}");
    }

    #[test]
    fn parses_and_prints_as_java_instant() {
        let cases = [
            ("2030-01-01T00:00:00Z", "2030-01-01T00:00:00Z"),
            ("2030-01-01T00:00:00.500Z", "2030-01-01T00:00:00.500Z"),
            ("2030-01-01T00:00:00.5Z", "2030-01-01T00:00:00.500Z"),
            ("2030-01-01T00:00:00.000001Z", "2030-01-01T00:00:00.000001Z"),
            ("2030-01-01T00:00:00.123456789Z", "2030-01-01T00:00:00.123456789Z"),
            ("2030-01-01T01:30:00+01:30", "2030-01-01T00:00:00Z"),
            ("2024-02-29T23:59:59Z", "2024-02-29T23:59:59Z"),
            ("1970-01-01T00:00:00Z", "1970-01-01T00:00:00Z"),
            ("2030-01-01t00:00:00z", "2030-01-01T00:00:00Z"),
        ];
        for (text, printed) in cases {
            let parsed = Timestamp::parse(text).unwrap_or_else(|| panic!("{text}"));
            assert_eq!(parsed.to_string(), printed, "{text}");
        }
        assert_eq!(Timestamp::parse("1970-01-01T00:00:00Z").unwrap().unix_seconds(), 0);
    }

    #[test]
    fn refuses_what_java_refuses() {
        for text in [
            "",
            "2030-01-01",
            "2030-01-01T00:00Z",
            "2030-01-01T00:00:00",
            "2023-02-29T00:00:00Z",
            "2030-13-01T00:00:00Z",
            "2030-01-01T25:00:00Z",
            "2030-01-01T00:00:00.Z",
            "2030-01-01T00:00:00.1234567891Z",
            "2030-01-01T00:00:00+1",
            "tomorrow",
        ] {
            assert_eq!(Timestamp::parse(text), None, "{text}");
        }
    }

    #[test]
    fn moves_by_durations_and_measures_between() {
        let at = Timestamp::from_unix(100, 500_000_000);
        let second = std::time::Duration::from_millis(1_500);
        assert_eq!(at.plus(second), Timestamp::from_unix(102, 0));
        assert_eq!(at.minus(second), Timestamp::from_unix(99, 0));
        assert_eq!(at.until(at.plus(second)), second);
        assert_eq!(at.plus(second).until(at), std::time::Duration::ZERO);
        assert_eq!(Timestamp::from_unix(0, 0).minus(second), Timestamp::from_unix(-2, 500_000_000));
    }

    #[test]
    fn rounds_up_to_the_granularity() {
        let at = |text| Timestamp::parse(text).unwrap();
        assert_eq!(at("2030-01-01T10:00:01Z").round_up(3_600), at("2030-01-01T11:00:00Z"));
        assert_eq!(at("2030-01-01T10:00:00Z").round_up(3_600), at("2030-01-01T10:00:00Z"));
        assert_eq!(at("2030-01-01T10:00:00.1Z").round_up(1), at("2030-01-01T10:00:01Z"));
        assert_eq!(at("2030-01-01T10:00:10Z").round_up(30), at("2030-01-01T10:00:30Z"));
    }
}
