//! Numbers written as kube-apiserver writes them: the text of a JSON number in an answer or a
//! stored object, and Go's `strconv` layouts other texts need.
//!
//! kube-apiserver reads a free-form JSON number (a custom resource's fields, the free-form
//! parts of built-in kinds) with `sigs.k8s.io/json`'s `UnmarshalCaseSensitivePreserveInts`
//! (`convertNumber`): a literal without `.` that `strconv.ParseInt` reads is an `int64`, any
//! other a `float64` (`1.0`, `1e3`, `-0.0`, and integers past int64 like
//! `12345678901234567890`). It writes a `float64` with `encoding/json`'s `floatEncoder`: the
//! shortest digits that read back as the same float, `strconv.AppendFloat(f, 'f', -1, 64)`
//! when `1e-6 <= |f| < 1e21` (or `f` is zero), else the `'e'` layout with a two-digit
//! exponent cut back to one for a negative exponent (`1e+21`, `1e-7`, `5e-324`). And a write
//! is answered from what it stored read back (etcd3 `store.Create`/`GuaranteedUpdate` decode
//! the bytes they wrote into the answer; the watch cache holds what etcd holds), so a number
//! is answered as the float's text read once more: `1.0` is `1`, `1e3` is `1000`, `-0.0` and
//! `-0` are `0`, `1e20` is `100000000000000000000` (read back: past int64, a float),
//! `1e21` is `1e+21`, `12345678901234567890` is `12345678901234567000`.
//!
//! ## Guarantees
//! - [`write_json_number`] writes a `serde_json::Number` as that read-back text: an integer in
//!   int64's range as its digits; any other integer (serde_json holds up to `u64::MAX`) and
//!   every float that is not an integer in int64's range, as Go's `floatEncoder` writes its
//!   float64; an integral float in int64's range (`-0.0` too) as that integer's digits. The
//!   text always parses back to a number with the same value (but for the float64 rounding
//!   of integers past int64, which kube makes too), and writing it again gives the same text.
//! - The shortest digits are Rust's (`{}`/`{:e}` of `f64` print the shortest digits that read
//!   back, as Go's `strconv` with precision -1 does); only the layout is Go's. Total: no
//!   input panics (serde_json's numbers are finite).
//! - Costs nothing for integers (the common case): they take serde_json's writer as before;
//!   the float path runs only for a float.
//!
//! ## How it differs from kube
//! - A free-form field kube keeps as raw bytes in a built-in kind (`runtime.RawExtension`,
//!   `apiextensionsv1.JSON`, e.g. a CRD schema's `default: 1.0`) keeps the client's literal
//!   in kube; here it is written as above (`1`). The number's value is the same.

use std::io::Write as _;

use serde_json::Number;

/// `2^63`: the first float past int64's range (and `-2^63` its least value).
const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;

/// Appends `number` as kube-apiserver answers it after its storage round trip (see the
/// module docs).
#[inline]
pub fn write_json_number(out: &mut Vec<u8>, number: &Number) {
    if number.is_i64() {
        // serde_json's own integer writer (itoa), as before; writing into a `Vec` cannot fail.
        let _ = serde_json::to_writer(&mut *out, number);
        return;
    }
    // A `u64` past `i64::MAX` is a float64 to Go's decoder; so is every other float.
    #[allow(clippy::cast_precision_loss)]
    let float = number
        .as_u64()
        .map_or_else(|| number.as_f64().unwrap_or_default(), |u| u as f64);
    match read_back_integer(float) {
        Some(integer) => {
            let _ = serde_json::to_writer(&mut *out, &Number::from(integer));
        }
        None => write_json_float(out, float),
    }
}

/// The integer a float64 is once Go has written it and `convertNumber` has read it back: the
/// integer of the text Go writes for an integral `float` when int64 holds it (`-0.0` is 0);
/// `None` for any other float (`1.5`, `1e20`), which stays a float. Past 2^53 Go writes the
/// shortest digits that read back to the float, then zeros, so the integer is that text's,
/// not the float's exact value: `-2^63` is written `-9223372036854776000`, past int64, and
/// stays a float; `2^63 - 1024` is written and read back as `9223372036854775000`.
#[must_use]
pub fn read_back_integer(float: f64) -> Option<i64> {
    if float.fract() != 0.0 || !(-TWO_POW_63..=TWO_POW_63).contains(&float) {
        return None;
    }
    if float.abs() < TWO_POW_53 {
        // Every integer below 2^53 is a float64's value and its shortest text.
        #[allow(clippy::cast_possible_truncation)]
        return Some(float as i64);
    }
    // Rust writes a float's shortest round-trip digits as Go's `'f'` layout does.
    float.to_string().parse().ok()
}

/// 2^53: integral float64s below it are exactly their shortest texts.
const TWO_POW_53: f64 = 9_007_199_254_740_992.0;

/// `number` as [`write_json_number`] writes it.
#[must_use]
pub fn json_number(number: &Number) -> String {
    let mut out = Vec::new();
    write_json_number(&mut out, number);
    String::from_utf8(out).unwrap_or_default()
}

/// Appends `f` as Go's `encoding/json` writes a float64 (`floatEncoder`, see the module docs):
/// `100000000000000000000`, `0.000001`, `1e+21`, `1e-7`, `-0`. `f` must be finite (Go refuses
/// to encode NaN and the infinities; a non-finite `f` is written as Rust prints it).
pub fn write_json_float(out: &mut Vec<u8>, f: f64) {
    let abs = f.abs();
    if abs == 0.0 || (1e-6..1e21).contains(&abs) || !f.is_finite() {
        let _ = write!(out, "{f}");
        return;
    }
    let start = out.len();
    let _ = write!(out, "{f:e}");
    // Go's `'e'` layout signs a positive exponent; its two-digit negative exponents are cut
    // back to one digit by `floatEncoder`, as Rust writes them already.
    if let Some(e) = out[start..].iter().position(|&b| b == b'e')
        && out.get(start + e + 1) != Some(&b'-')
    {
        out.insert(start + e + 1, b'+');
    }
}

/// `f` as Go's `encoding/json` writes a float64 ([`write_json_float`]).
#[must_use]
pub fn json_float(f: f64) -> String {
    let mut out = Vec::new();
    write_json_float(&mut out, f);
    String::from_utf8(out).unwrap_or_default()
}

/// `strconv.FormatFloat(f, 'g', -1, 64)`, as Go's `%v` prints a float64 and go-yaml writes
/// one: the shortest digits, in the `'e'` layout with at least two exponent digits (`1e+06`,
/// `1.5e-05`, `1e+20`) when the decimal exponent is below -4 or at least 6 (Go's precision
/// for the choice when the digits are the shortest), else plain (`100000`, `0.0001`,
/// `123456.7`). NaN and the infinities as Go prints them (`NaN`, `+Inf`, `-Inf`).
#[must_use]
pub fn format_g(f: f64) -> String {
    if !f.is_finite() {
        return if f.is_nan() {
            "NaN".to_owned()
        } else if f > 0.0 {
            "+Inf".to_owned()
        } else {
            "-Inf".to_owned()
        };
    }
    let scientific = format!("{f:e}");
    let Some((mantissa, exponent)) = scientific.split_once('e') else {
        return scientific;
    };
    let Ok(exponent) = exponent.parse::<i32>() else {
        return scientific;
    };
    if (-4..6).contains(&exponent) {
        return f.to_string();
    }
    let sign = if exponent < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exponent.abs())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn number(text: &str) -> Number {
        serde_json::from_str(text).unwrap()
    }

    /// Expected texts: Go's `json.Marshal(float64)` (go1.22), derived from `floatEncoder`.
    #[test]
    fn floats_in_go_s_json_layout() {
        let cases: [(f64, &str); 22] = [
            (0.0, "0"),
            (-0.0, "-0"),
            (1.0, "1"),
            (0.1, "0.1"),
            (-2.5, "-2.5"),
            (1e20, "100000000000000000000"),
            (1e21, "1e+21"),
            (-1e21, "-1e+21"),
            (1.5e300, "1.5e+300"),
            (1e-6, "0.000001"),
            (1e-7, "1e-7"),
            (1.2345e-7, "1.2345e-7"),
            (1e-10, "1e-10"),
            (5e-324, "5e-324"),
            (f64::MAX, "1.7976931348623157e+308"),
            (f64::MIN_POSITIVE, "2.2250738585072014e-308"),
            (123_456_789_012_345_680_000.0, "123456789012345680000"),
            (12_345_678_901_234_567_890.0, "12345678901234567000"),
            (9_223_372_036_854_775_808.0, "9223372036854776000"),
            (999_999_999_999_999_900_000.0, "999999999999999900000"),
            (0.000_001_5, "0.0000015"),
            (1.0 / 3.0, "0.3333333333333333"),
        ];
        for (f, want) in cases {
            assert_eq!(json_float(f), want, "{f:e}");
        }
    }

    /// Expected texts: what kube-apiserver answers for a custom resource's free-form field
    /// holding each literal (decoded by `UnmarshalCaseSensitivePreserveInts`, encoded, and
    /// decoded and encoded again from storage).
    #[test]
    fn numbers_as_kube_answers_them_after_the_storage_round_trip() {
        for (literal, want) in [
            ("1", "1"),
            ("-1", "-1"),
            ("0", "0"),
            ("-0", "0"),
            ("-0.0", "0"),
            ("1.0", "1"),
            ("1e3", "1000"),
            ("1E3", "1000"),
            ("2.50", "2.5"),
            ("0.10", "0.1"),
            ("1e20", "100000000000000000000"),
            ("1e21", "1e+21"),
            ("1e-7", "1e-7"),
            ("9223372036854775807", "9223372036854775807"),
            ("-9223372036854775808", "-9223372036854775808"),
            ("9223372036854775808", "9223372036854776000"),
            // -2^63 as a float64: Go writes `-9223372036854776000`, past int64: a float.
            ("-9223372036854775809", "-9223372036854776000"),
            ("-9.223372036854775808e18", "-9223372036854776000"),
            // 2^63 - 1024: written `9223372036854775000`, which int64 holds.
            ("9.223372036854774784e18", "9223372036854775000"),
            ("12345678901234567890", "12345678901234567000"),
            ("18446744073709551615", "18446744073709552000"),
            ("123456789012345678901234", "1.2345678901234569e+23"),
            ("9.2233720368547758e18", "9223372036854776000"),
            ("1.5", "1.5"),
            ("5e-324", "5e-324"),
            ("1.7976931348623157e308", "1.7976931348623157e+308"),
        ] {
            let text = json_number(&number(literal));
            assert_eq!(text, want, "{literal}");
            // Stable: the answer read back and written again is the same text.
            assert_eq!(json_number(&number(&text)), text, "{literal}");
        }
    }

    /// Expected texts: Go's `strconv.FormatFloat(f, 'g', -1, 64)`.
    #[test]
    fn g_layout_as_go_s() {
        for (f, want) in [
            (0.0, "0"),
            (1.0, "1"),
            (100_000.0, "100000"),
            (1e6, "1e+06"),
            (1_234_567.5, "1.2345675e+06"),
            (123_456.7, "123456.7"),
            (0.0001, "0.0001"),
            (0.000_01, "1e-05"),
            (1.5e-5, "1.5e-05"),
            (1e20, "1e+20"),
            (1e21, "1e+21"),
            (1.5e300, "1.5e+300"),
            (5e-324, "5e-324"),
            (-2.5, "-2.5"),
            (0.1, "0.1"),
            (f64::INFINITY, "+Inf"),
        ] {
            assert_eq!(format_g(f), want, "{f:e}");
        }
    }
}
