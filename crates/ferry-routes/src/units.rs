//! Durations (`"2h"`, `"250ms"`) and sizes (`"256KiB"`, `"10GiB"`) as the
//! configuration writes them. A bare integer is seconds or bytes.

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use std::fmt;
use std::time::Duration;

/// A duration from the configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span(pub Duration);

/// A size in bytes from the configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size(pub u64);

const DURATION_UNITS: [(&str, u64); 5] =
    [("ms", 1), ("s", 1_000), ("m", 60_000), ("h", 3_600_000), ("d", 86_400_000)];

const SIZE_UNITS: [(&str, u64); 7] = [
    ("B", 1),
    ("KiB", 1 << 10),
    ("MiB", 1 << 20),
    ("GiB", 1 << 30),
    ("KB", 1_000),
    ("MB", 1_000_000),
    ("GB", 1_000_000_000),
];

impl Span {
    pub fn parse(text: &str) -> Result<Span, String> {
        let millis = with_unit(text, &DURATION_UNITS, 1_000).ok_or_else(|| {
            format!("{text:?} is not a duration like \"250ms\", \"30s\", \"2h\" or \"7d\"")
        })?;
        Ok(Span(Duration::from_millis(millis)))
    }
}

impl Size {
    pub fn parse(text: &str) -> Result<Size, String> {
        with_unit(text, &SIZE_UNITS, 1).map(Size).ok_or_else(|| {
            format!("{text:?} is not a size like \"256KiB\", \"64MiB\" or \"10GiB\"")
        })
    }
}

/// `text` as a whole number with one of `units` after it (or none, meaning
/// `bare`), in the smallest unit; `None` if it is not that or overflows.
fn with_unit(text: &str, units: &[(&str, u64)], bare: u64) -> Option<u64> {
    let text = text.trim();
    let digits = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    if digits == 0 {
        return None;
    }
    let number: u64 = text[..digits].parse().ok()?;
    let unit = text[digits..].trim();
    let scale = match unit {
        "" => bare,
        unit => units.iter().find(|(name, _)| *name == unit)?.1,
    };
    number.checked_mul(scale)
}

impl<'de> Deserialize<'de> for Span {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Span, D::Error> {
        deserializer.deserialize_any(UnitVisitor {
            parse: Span::parse,
            bare: |n| Span(Duration::from_secs(n)),
            what: "a duration",
        })
    }
}

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Size, D::Error> {
        deserializer.deserialize_any(UnitVisitor { parse: Size::parse, bare: Size, what: "a size" })
    }
}

struct UnitVisitor<T> {
    parse: fn(&str) -> Result<T, String>,
    bare: fn(u64) -> T,
    what: &'static str,
}

impl<T> Visitor<'_> for UnitVisitor<T> {
    type Value = T;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        write!(formatter, "{} (a string with a unit, or a whole number)", self.what)
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<T, E> {
        Ok((self.bare)(value))
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<T, E> {
        u64::try_from(value)
            .map(self.bare)
            .map_err(|_| E::custom(format!("{} cannot be negative", self.what)))
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<T, E> {
        (self.parse)(value).map_err(E::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_sizes_read_as_written() {
        for (text, millis) in [
            ("250ms", 250),
            ("30s", 30_000),
            ("2h", 7_200_000),
            ("7d", 604_800_000),
            ("0", 0),
            ("15", 15_000),
            ("5 m", 300_000),
        ] {
            assert_eq!(Span::parse(text), Ok(Span(Duration::from_millis(millis))), "{text}");
        }
        for (text, bytes) in [
            ("256KiB", 262_144),
            ("64MiB", 67_108_864),
            ("10GiB", 10 << 30),
            ("1000", 1000),
            ("5MB", 5_000_000),
        ] {
            assert_eq!(Size::parse(text), Ok(Size(bytes)), "{text}");
        }
        for bad in ["", "h", "2x", "-1s", "1.5h", "99999999999999999999d"] {
            assert!(Span::parse(bad).is_err(), "{bad}");
        }
        assert!(Size::parse("10 TiB").is_err());
    }
}
