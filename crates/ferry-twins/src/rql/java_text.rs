//! The texts Java gives numbers, which Ditto's in-memory evaluator
//! compares when types differ and matches `like` patterns against: a
//! `long` as its digits, a `double` as `Double.toString` (`1.5E-5`) or, once
//! Ditto has made a `BigDecimal` of it, as `BigDecimal.toString`
//! (`0.000015`, `1.5E+20`). Written into a buffer on the stack, because
//! they are made per candidate value.

use std::fmt::{self, Write};

/// Room for the longest of these texts: 17 significant digits, six zeros
/// of padding, a sign, a point and a four-character exponent.
const CAPACITY: usize = 48;

pub(crate) struct JavaText {
    buf: [u8; CAPACITY],
    len: usize,
}

impl JavaText {
    fn new() -> Self {
        JavaText { buf: [0; CAPACITY], len: 0 }
    }

    pub(crate) fn as_str(&self) -> &str {
        std::str::from_utf8(&self.buf[..self.len]).expect("only ASCII is written")
    }

    fn push(&mut self, byte: u8) {
        self.buf[self.len] = byte;
        self.len += 1;
    }

    fn push_all(&mut self, bytes: &[u8]) {
        bytes.iter().for_each(|b| self.push(*b));
    }

    fn zeros(&mut self, n: usize) {
        (0..n).for_each(|_| self.push(b'0'));
    }
}

impl Write for JavaText {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        if self.len + s.len() > CAPACITY {
            return Err(fmt::Error);
        }
        self.push_all(s.as_bytes());
        Ok(())
    }
}

/// A Java `long` (or a `BigDecimal` of one).
pub(crate) fn long_text(value: i128) -> JavaText {
    let mut text = JavaText::new();
    write!(text, "{value}").expect("an i128 fits");
    text
}

/// The shortest decimal digits of a finite, non-zero `|value|` and the
/// power of ten of the first: `1.5e-5` is (`15`, -5).
fn shortest_digits(value: f64) -> ([u8; 17], usize, i32) {
    let mut text = JavaText::new();
    write!(text, "{:e}", value.abs()).expect("a double's exponent form fits");
    let (mantissa, exponent) = text.as_str().split_once('e').expect("`{:e}` writes an exponent");
    let mut digits = [0u8; 17];
    let mut n = 0;
    for b in mantissa.bytes().filter(u8::is_ascii_digit) {
        digits[n] = b;
        n += 1;
    }
    (digits, n, exponent.parse().expect("`{:e}` writes an integer exponent"))
}

/// `Double.toString(value)` (JDK 19 and later, which print the shortest
/// digits, as Rust does).
pub(crate) fn double_text(value: f64) -> JavaText {
    let mut text = JavaText::new();
    if value.is_sign_negative() {
        text.push(b'-');
    }
    if value == 0.0 {
        text.push_all(b"0.0");
        return text;
    }
    let (digits, n, e) = shortest_digits(value);
    let digits = &digits[..n];
    if (-3..7).contains(&e) {
        if e >= 0 {
            let int_len = e as usize + 1;
            text.push_all(&digits[..n.min(int_len)]);
            text.zeros(int_len.saturating_sub(n));
            text.push(b'.');
            if n > int_len {
                text.push_all(&digits[int_len..]);
            } else {
                text.push(b'0');
            }
        } else {
            text.push_all(b"0.");
            text.zeros((-e - 1) as usize);
            text.push_all(digits);
        }
    } else {
        text.push(digits[0]);
        text.push(b'.');
        if n > 1 {
            text.push_all(&digits[1..]);
        } else {
            text.push(b'0');
        }
        write!(text, "E{e}").expect("the exponent fits");
    }
    text
}

/// `new BigDecimal(Double.toString(value)).toString()`: what Ditto's
/// comparison falls back to for a double beside a boolean or a string
/// that is not a number.
pub(crate) fn big_decimal_text(value: f64) -> JavaText {
    let mut text = JavaText::new();
    if value == 0.0 {
        // BigDecimal has no negative zero.
        text.push_all(b"0.0");
        return text;
    }
    if value < 0.0 {
        text.push(b'-');
    }
    // The coefficient and scale of the BigDecimal that Double.toString's
    // text denotes.
    let (digits, n, e) = shortest_digits(value);
    let mut coefficient = [b'0'; 24];
    let (len, scale): (usize, i32) = if (-3..7).contains(&e) && e >= 0 {
        let int_len = e as usize + 1;
        coefficient[..n].copy_from_slice(&digits[..n]);
        // Double.toString pads the integer part with zeros, and writes at
        // least one fraction digit.
        let len = n.max(int_len) + usize::from(n <= int_len);
        (len, (len - int_len) as i32)
    } else if (-3..7).contains(&e) {
        coefficient[..n].copy_from_slice(&digits[..n]);
        (n, n as i32 - e - 1)
    } else {
        coefficient[..n].copy_from_slice(&digits[..n]);
        let len = n.max(2);
        (len, len as i32 - 1 - e)
    };
    let coefficient = &coefficient[..len];
    let adjusted = -scale + (len as i32 - 1);
    if scale >= 0 && adjusted >= -6 {
        let scale = scale as usize;
        if scale == 0 {
            text.push_all(coefficient);
        } else if len > scale {
            text.push_all(&coefficient[..len - scale]);
            text.push(b'.');
            text.push_all(&coefficient[len - scale..]);
        } else {
            text.push_all(b"0.");
            text.zeros(scale - len);
            text.push_all(coefficient);
        }
    } else {
        text.push(coefficient[0]);
        if len > 1 {
            text.push(b'.');
            text.push_all(&coefficient[1..]);
        }
        let sign = if adjusted > 0 { "+" } else { "" };
        write!(text, "E{sign}{adjusted}").expect("the exponent fits");
    }
    text
}

/// A number as Java's `MessageFormat` writes it: `1,234,567`.
pub(crate) fn grouped(value: i64) -> String {
    let digits = value.unsigned_abs().to_string();
    let mut text = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if value < 0 {
        text.push('-');
    }
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            text.push(',');
        }
        text.push(digit);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_as_java_writes_them() {
        let cases = [
            (5.0, "5.0"),
            (-123.7, "-123.7"),
            (100.0, "100.0"),
            (0.001, "0.001"),
            (1.0e-4, "1.0E-4"),
            (1.5e-5, "1.5E-5"),
            (1.0e7, "1.0E7"),
            (1234567.5, "1234567.5"),
            (1.5e20, "1.5E20"),
            (0.0, "0.0"),
            (-0.0, "-0.0"),
        ];
        for (value, java) in cases {
            assert_eq!(double_text(value).as_str(), java, "{value}");
        }
    }

    #[test]
    fn big_decimals_of_doubles_as_java_writes_them() {
        let cases = [
            (5.0, "5.0"),
            (-123.7, "-123.7"),
            (100.0, "100.0"),
            (0.001, "0.001"),
            (1.0e-4, "0.00010"),
            (1.5e-5, "0.000015"),
            (1.0e-7, "1.0E-7"),
            (1.0e7, "1.0E+7"),
            (1.5e20, "1.5E+20"),
            (0.0, "0.0"),
            (-0.0, "0.0"),
        ];
        for (value, java) in cases {
            assert_eq!(big_decimal_text(value).as_str(), java, "{value}");
        }
        assert_eq!(long_text(-42).as_str(), "-42");
    }
}
