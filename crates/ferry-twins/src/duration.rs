//! Ditto's `DittoDuration`: a non-negative whole amount and a unit
//! (`ms`, `s`, `m`, `h`, or none for seconds), written back as it was
//! given (`5` stays `5`, `300s` stays `300s`). Headers (`timeout`) and
//! policy subjects' announcements (`beforeExpiry`) use it.

use std::fmt;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Milliseconds,
    Seconds,
    /// A bare number: seconds, written back without a suffix.
    ImplicitSeconds,
    Minutes,
    Hours,
}

impl Unit {
    fn suffix(self) -> &'static str {
        match self {
            Unit::Milliseconds => "ms",
            Unit::Seconds => "s",
            Unit::ImplicitSeconds => "",
            Unit::Minutes => "m",
            Unit::Hours => "h",
        }
    }

    fn length(self) -> Duration {
        match self {
            Unit::Milliseconds => Duration::from_millis(1),
            Unit::Seconds | Unit::ImplicitSeconds => Duration::from_secs(1),
            Unit::Minutes => Duration::from_secs(60),
            Unit::Hours => Duration::from_secs(3600),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DittoDuration {
    pub amount: u64,
    pub unit: Unit,
}

impl DittoDuration {
    /// `DittoDuration.parseDuration`: digits (a leading `+` allowed, as
    /// Java's `Long.parseLong` allows it) and an optional unit; `None` for
    /// anything else, a negative amount included.
    pub fn parse(text: &str) -> Option<DittoDuration> {
        let unsigned = text.strip_prefix('+').unwrap_or(text);
        let split = unsigned.find(|c: char| !c.is_ascii_digit()).unwrap_or(unsigned.len());
        let (digits, suffix) = unsigned.split_at(split);
        if digits.is_empty() {
            return None;
        }
        let unit = match suffix {
            "" => Unit::ImplicitSeconds,
            "ms" => Unit::Milliseconds,
            "s" => Unit::Seconds,
            "m" => Unit::Minutes,
            "h" => Unit::Hours,
            _ => return None,
        };
        Some(DittoDuration { amount: digits.parse().ok()?, unit })
    }

    pub fn as_duration(self) -> Duration {
        let length = self.unit.length();
        let amount = u32::try_from(self.amount).unwrap_or(u32::MAX);
        length.saturating_mul(amount)
    }

    /// Whether the unit is at least a second: what Ditto accepts for a
    /// `beforeExpiry` (seconds, minutes, hours).
    pub fn in_whole_seconds(self) -> bool {
        self.unit != Unit::Milliseconds
    }

    /// `DittoDuration.setAmount`: `duration` in this unit, rounded down,
    /// at least 1.
    pub fn with_length(self, duration: Duration) -> DittoDuration {
        let amount = duration.as_nanos() / self.unit.length().as_nanos();
        DittoDuration { amount: u64::try_from(amount).unwrap_or(u64::MAX).max(1), unit: self.unit }
    }
}

impl fmt::Display for DittoDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.amount, self.unit.suffix())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_and_writes_back_as_ditto_does() {
        for (text, length) in [
            ("5", Duration::from_secs(5)),
            ("5s", Duration::from_secs(5)),
            ("250ms", Duration::from_millis(250)),
            ("2m", Duration::from_secs(120)),
            ("1h", Duration::from_secs(3600)),
            ("0", Duration::ZERO),
        ] {
            let parsed = DittoDuration::parse(text).unwrap();
            assert_eq!((parsed.as_duration(), parsed.to_string()), (length, text.to_owned()));
        }
        assert_eq!(DittoDuration::parse("+5s").unwrap().to_string(), "5s");
        for bad in ["", "s", "-1", "5x", "1.5s", "1d", "5 s"] {
            assert_eq!(DittoDuration::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_new_length_keeps_the_unit() {
        let thirty = DittoDuration::parse("30s").unwrap();
        assert_eq!(thirty.with_length(Duration::from_secs(60)).to_string(), "60s");
        let hours = DittoDuration::parse("2h").unwrap();
        assert_eq!(hours.with_length(Duration::from_secs(60)).to_string(), "1h");
        assert!(!DittoDuration::parse("10ms").unwrap().in_whole_seconds());
    }
}
