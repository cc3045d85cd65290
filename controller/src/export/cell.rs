//! CSV written by hand where it is hot: the `steps` table's cells, as the
//! `csv` crate would write them, without its per-field cost.

use std::io::Write;

use crate::text::escape_controls;

/// CSV rows written field by field into bytes, as the `csv` crate writes
/// them with its defaults (`,`, `\n` after each record, a field quoted only
/// when it holds `,`, `"`, `\r` or `\n`, quotes doubled), and numbers as
/// `to_string` writes them. Text shows its control characters escaped
/// ([`escape_controls`]): a CSV is read in terminals too.
pub(super) struct Row {
    pub(super) bytes: Vec<u8>,
    /// Whether the current record has a field yet.
    started: bool,
    /// Records ended.
    rows: u64,
}

impl Row {
    /// Rows appended to `bytes`.
    pub(super) fn new(bytes: Vec<u8>) -> Row {
        Row {
            bytes,
            started: false,
            rows: 0,
        }
    }

    /// Records ended so far.
    pub(super) fn rows(&self) -> u64 {
        self.rows
    }

    /// Starts a field.
    fn separate(&mut self) {
        if self.started {
            self.bytes.push(b',');
        }
        self.started = true;
    }

    /// Ends the record.
    pub(super) fn end(&mut self) {
        self.bytes.push(b'\n');
        self.started = false;
        self.rows += 1;
    }

    /// An empty field.
    pub(super) fn empty(&mut self) {
        self.separate();
    }

    /// `n` empty fields.
    pub(super) fn empties(&mut self, n: usize) {
        if n == 0 {
            return;
        }
        if self.started {
            self.bytes.push(b',');
        }
        self.bytes.extend(std::iter::repeat_n(b',', n - 1));
        self.started = true;
    }

    pub(super) fn str(&mut self, s: &str) {
        self.separate();
        let s = escape_controls(s);
        if s.bytes().any(|b| matches!(b, b',' | b'"' | b'\r' | b'\n')) {
            self.bytes.push(b'"');
            for b in s.bytes() {
                if b == b'"' {
                    self.bytes.push(b'"');
                }
                self.bytes.push(b);
            }
            self.bytes.push(b'"');
        } else {
            self.bytes.extend_from_slice(s.as_bytes());
        }
    }

    /// A field that never needs quoting.
    pub(super) fn cell(&mut self, v: impl Cell) {
        self.separate();
        v.write(&mut self.bytes);
    }

    /// Numbers, each printed once where it repeats the one before (the
    /// statistics of one run are one number five times); NaN is empty.
    pub(super) fn floats(&mut self, values: &[f64]) {
        let mut before: Option<(u64, std::ops::Range<usize>)> = None;
        for v in values {
            self.separate();
            if v.is_nan() {
                continue;
            }
            let start = self.bytes.len();
            match before {
                Some((bits, ref text)) if bits == v.to_bits() => {
                    self.bytes.extend_from_within(text.clone())
                }
                _ => v.write(&mut self.bytes),
            }
            before = Some((v.to_bits(), start..self.bytes.len()));
        }
    }

    /// Lower-case hex digits, as [`kiln_protocol::ContentHash`] prints.
    pub(super) fn hex(&mut self, bytes: &[u8]) {
        self.separate();
        hex_digits(bytes, &mut self.bytes);
    }
}

/// Appends the lower-case hex digits of `bytes` to `out`.
pub(super) fn hex_digits(bytes: &[u8], out: &mut Vec<u8>) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)]);
        out.push(DIGITS[usize::from(b & 15)]);
    }
}

/// A value whose text needs no CSV quoting, written as `to_string` writes it.
pub(super) trait Cell: Copy {
    fn write(self, out: &mut Vec<u8>);
}

macro_rules! integer_cells {
    ($($t:ty),*) => {$(
        impl Cell for $t {
            fn write(self, out: &mut Vec<u8>) {
                out.extend_from_slice(itoa::Buffer::new().format(self).as_bytes());
            }
        }
    )*};
}

integer_cells!(u32, u64, i64);

impl Cell for bool {
    fn write(self, out: &mut Vec<u8>) {
        out.extend_from_slice(if self { b"true" } else { b"false" });
    }
}

impl Cell for f64 {
    /// As `{}` writes it (plain decimal, the shortest digits that read back
    /// as the same `f64`, `NaN`, `inf`), without its cost where it is common:
    /// integers through itoa, other numbers with fewer than 16 significant
    /// digits laid out from ryu's (the same digits: see [`plain_decimal`]).
    fn write(self, out: &mut Vec<u8>) {
        // Below 2^53 every integer is an f64, and its digits are its shortest.
        const EXACT_INTEGERS: f64 = 9_007_199_254_740_992.0;
        let integer = self as i64;
        if self.abs() < EXACT_INTEGERS && integer as f64 == self {
            if integer == 0 && self.is_sign_negative() {
                out.extend_from_slice(b"-0");
            } else {
                integer.write(out);
            }
            return;
        }
        if self.is_finite() && plain_decimal(ryu::Buffer::new().format_finite(self), out) {
            return;
        }
        let _ = write!(out, "{self}");
    }
}

/// Writes the shortest digits of an `f64` (as ryu or serde_json write them,
/// `1.5e-7`, `100.0`) as Rust prints the `f64` (`{}`: plain decimal, no
/// exponent, no trailing zeros, `-0` for negative zero), if its significant
/// digits are fewer than 16; `false` (nothing written) otherwise or if it is
/// no plain number. Below 16 digits a decimal names at most one double, so
/// every shortest algorithm finds the same digits; from 16 on, two shortest
/// candidates can tie and two algorithms may round differently.
fn plain_decimal(text: &str, out: &mut Vec<u8>) -> bool {
    let Some(decimal) = Decimal::parse(text.as_bytes()) else {
        return false;
    };
    if decimal.n >= 16 {
        return false;
    }
    decimal.write(out);
    true
}

/// A decimal number's significant digits: `0.D × 10^point`, signed.
struct Decimal {
    negative: bool,
    /// The significant digits, leading and trailing zeros dropped: `digits[..n]`.
    digits: [u8; 24],
    n: usize,
    point: i64,
}

impl Decimal {
    /// The number `b` writes (`-`, digits with at most one `.`, an exponent); `None` where
    /// it is no plain number or has more than 24 significant digits.
    fn parse(b: &[u8]) -> Option<Decimal> {
        let negative = b.first() == Some(&b'-');
        let mut i = usize::from(negative);
        let mut digits = [0u8; 24];
        let (mut n, mut int_len, mut dot) = (0usize, 0i64, false);
        let (mut zeros_after_dot, mut any_digit) = (0i64, false);
        while i < b.len() {
            any_digit |= b[i].is_ascii_digit();
            match b[i] {
                b'0' if n == 0 => zeros_after_dot += i64::from(dot),
                c @ b'0'..=b'9' => {
                    *digits.get_mut(n)? = c;
                    n += 1;
                    int_len += i64::from(!dot);
                }
                b'.' if !dot => dot = true,
                b'e' | b'E' => break,
                _ => return None,
            }
            i += 1;
        }
        if !any_digit {
            return None;
        }
        let exp = match i < b.len() {
            true => exponent(&b[i + 1..])?,
            false => 0,
        };
        // Trailing zeros change nothing.
        while n > 0 && digits[n - 1] == b'0' {
            n -= 1;
        }
        Some(Decimal {
            negative,
            digits,
            n,
            point: int_len + exp - zeros_after_dot,
        })
    }

    /// Writes it as Rust prints an `f64`: plain decimal, no exponent, no trailing zeros.
    fn write(&self, out: &mut Vec<u8>) {
        if self.negative {
            out.push(b'-');
        }
        if self.n == 0 {
            out.push(b'0');
            return;
        }
        let (d, point) = (&self.digits[..self.n], self.point);
        let len = self.n as i64;
        if point <= 0 {
            out.extend_from_slice(b"0.");
            out.extend((0..-point).map(|_| b'0'));
            out.extend_from_slice(d);
        } else if point >= len {
            out.extend_from_slice(d);
            out.extend((0..point - len).map(|_| b'0'));
        } else {
            out.extend_from_slice(&d[..point as usize]);
            out.push(b'.');
            out.extend_from_slice(&d[point as usize..]);
        }
    }
}

/// The exponent after an `e`: an optional sign and digits (at most about 100,000).
fn exponent(b: &[u8]) -> Option<i64> {
    let minus = b.first() == Some(&b'-');
    let b = match b.first() {
        Some(b'-' | b'+') => &b[1..],
        _ => b,
    };
    if b.is_empty() {
        return None;
    }
    let mut exp = 0i64;
    for &c in b {
        if !c.is_ascii_digit() || exp > 100_000 {
            return None;
        }
        exp = exp * 10 + i64::from(c - b'0');
    }
    Some(if minus { -exp } else { exp })
}

#[cfg(test)]
mod tests {
    use super::{plain_decimal, Cell};

    fn written(v: f64) -> String {
        let mut out = Vec::new();
        v.write(&mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn floats_print_as_rust_prints_them() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut values = vec![
            0.0,
            -0.0,
            1.0,
            -1.0,
            0.1,
            0.5,
            1e21,
            1e22,
            1e-7,
            5e-324,
            1e15,
            1e16,
            1e17,
            123456.0,
            936535.0,
            0.3,
            2.0 / 3.0,
            f64::MAX,
            f64::MIN_POSITIVE,
            f64::from_bits(0x4307_3C41_4C03_F1E2), // 817521951276604.25: a tie at 16 digits
            411950.69999999995,
            9_007_199_254_740_991.0,
            9_007_199_254_740_992.0,
            9_007_199_254_740_994.0,
            -9_007_199_254_740_992.0,
            1e300,
            -1e-300,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ];
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            values.push(f64::from_bits(x));
            values.push((x >> 11) as f64);
            values.push((x % 10_000_000) as f64 / 1000.0);
            values.push((x % 1_000_000_000) as f64 * 1e-9);
        }
        for v in values {
            assert_eq!(written(v), format!("{v}"), "{v:?}");
        }
    }

    #[test]
    fn rows_are_quoted_as_the_csv_crate_quotes_them() {
        let fields = [
            "plain",
            "",
            "a,b",
            "say \"hi\"",
            "line\nbreak",
            "cr\r",
            "@ main:1:2",
            "é",
        ];
        let mut row = super::Row::new(Vec::new());
        for f in fields {
            row.str(f);
        }
        row.end();
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record(fields.map(|f| f.replace('\r', "\\x0d")))
            .unwrap();
        assert_eq!(row.bytes, w.into_inner().unwrap());
    }

    #[test]
    fn odd_texts_are_left_to_the_parser() {
        let mut out = Vec::new();
        for text in ["null", "1e", "1.2.3", "-", "1x"] {
            assert!(!plain_decimal(text, &mut out), "{text}");
        }
        for (text, shown) in [
            ("100.0", "100"),
            ("-0.0", "-0"),
            ("1.5e-3", "0.0015"),
            ("0.00012", "0.00012"),
            ("1e21", "1000000000000000000000"),
            ("12.5E+2", "1250"),
        ] {
            out.clear();
            assert!(plain_decimal(text, &mut out), "{text}");
            assert_eq!(out, shown.as_bytes(), "{text}");
        }
    }
}
