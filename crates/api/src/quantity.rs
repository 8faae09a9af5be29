//! `resource.Quantity`'s canonical form (apimachinery's `ParseQuantity` then
//! `CanonicalizeBytes`): what kube-apiserver writes back for a quantity a client sent in another
//! form — `0.5` is `500m`, `1024Mi` is `1Gi`, `1.5Gi` is `1536Mi`, `1000m` is `1`.
//!
//! ## Guarantees
//! - The value is kept exactly (rounded up to nano units past nine fractional digits, as kube
//!   rounds); the form follows the input's: decimal SI suffixes (`m`, `k`, `M`, ...) with the
//!   exponent a multiple of three and no trailing zeros, binary suffixes (`Ki`, `Mi`, ...) for
//!   an integer of at least 1024 (else decimal SI), `e<n>` exponents.
//! - Anything this module cannot be sure of — a text `check_quantity` would refuse, a value
//!   past 128-bit arithmetic, an exponent without a suffix — gives `None`: the caller keeps
//!   what the client sent.

/// The suffix kinds of `resource.Format`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Format {
    DecimalSi,
    BinarySi,
    DecimalExponent,
}

/// kube's `quantitySuffixer.interpret`: base, exponent and format of a suffix.
fn interpret(suffix: &str) -> Option<(u32, i32, Format)> {
    let decimal = |e| Some((10, e, Format::DecimalSi));
    let binary = |e| Some((2, e, Format::BinarySi));
    match suffix {
        "" => decimal(0),
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        "Ki" => binary(10),
        "Mi" => binary(20),
        "Gi" => binary(30),
        "Ti" => binary(40),
        "Pi" => binary(50),
        "Ei" => binary(60),
        _ => {
            let exponent = suffix.strip_prefix(['e', 'E'])?;
            let digits = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            Some((10, exponent.parse().ok()?, Format::DecimalExponent))
        }
    }
}

/// The canonical text of quantity `text`, or `None` (see the module docs).
#[must_use]
pub fn canonical(text: &str) -> Option<String> {
    let (negative, rest) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let number_end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(number_end);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if number.is_empty() || fraction.contains('.') || (whole.is_empty() && fraction.is_empty()) {
        return None;
    }
    let (base, exponent, format) = interpret(suffix)?;
    let digits = format!("{whole}{fraction}");
    let digits = digits.trim_start_matches('0');
    let mut mantissa: i128 = if digits.is_empty() {
        0
    } else {
        digits.parse().ok()?
    };
    let mut exp10 = -i32::try_from(fraction.len()).ok()?;
    if base == 2 {
        mantissa = mantissa.checked_mul(1i128.checked_shl(u32::try_from(exponent).ok()?)?)?;
    } else {
        exp10 = exp10.checked_add(exponent)?;
    }
    if mantissa == 0 {
        return Some("0".to_owned());
    }
    // Rounded up (away from zero) to nano units, as `ParseQuantity` rounds.
    if exp10 < -9 {
        let divisor = 10i128.checked_pow(u32::try_from(-9 - exp10).ok()?)?;
        mantissa = mantissa.div_euclid(divisor) + i128::from(mantissa.rem_euclid(divisor) != 0);
        exp10 = -9;
    }
    let sign = if negative { "-" } else { "" };
    // Binary only for an integer of at least 1024 (`CanonicalizeBytes`).
    if format == Format::BinarySi {
        let integer = if exp10 >= 0 {
            mantissa.checked_mul(10i128.checked_pow(u32::try_from(exp10).ok()?)?)
        } else {
            let divisor = 10i128.checked_pow(u32::try_from(-exp10).ok()?)?;
            (mantissa % divisor == 0).then_some(mantissa / divisor)
        };
        if let Some(mut integer) = integer.filter(|i| *i >= 1024) {
            let mut power = 0;
            while integer % 1024 == 0 && power < 6 {
                integer /= 1024;
                power += 1;
            }
            let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][power];
            return Some(format!("{sign}{integer}{suffix}"));
        }
    }
    while mantissa % 10 == 0 {
        mantissa /= 10;
        exp10 += 1;
    }
    while exp10.rem_euclid(3) != 0 {
        mantissa = mantissa.checked_mul(10)?;
        exp10 -= 1;
    }
    let suffix = match format {
        Format::DecimalExponent if exp10 == 0 => String::new(),
        Format::DecimalExponent => format!("e{exp10}"),
        Format::DecimalSi | Format::BinarySi => match exp10 {
            -9 => "n",
            -6 => "u",
            -3 => "m",
            0 => "",
            3 => "k",
            6 => "M",
            9 => "G",
            12 => "T",
            15 => "P",
            18 => "E",
            _ => return None,
        }
        .to_owned(),
    };
    Some(format!("{sign}{mantissa}{suffix}"))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::canonical;

    proptest! {
        /// The canonical form is canonical: written again, it stays; and it is the same
        /// amount (compared in nano units, where the input has at most nine decimals).
        #[test]
        fn canonical_forms_are_fixed_points_of_the_same_amount(
            whole in 0u64..100_000,
            fraction in "[0-9]{0,9}",
            suffix in prop::sample::select(vec!["", "n", "m", "k", "M", "G", "T", "Ki", "Mi", "Gi", "Ti", "e3", "e-3", "e6"]),
            negative in any::<bool>(),
        ) {
            let sign = if negative { "-" } else { "" };
            let text = if fraction.is_empty() {
                format!("{sign}{whole}{suffix}")
            } else {
                format!("{sign}{whole}.{fraction}{suffix}")
            };
            let once = canonical(&text).expect("a well-formed quantity");
            let twice = canonical(&once);
            prop_assert_eq!(twice.as_deref(), Some(once.as_str()), "{}", text);
            // Amounts finer than a nano unit round up; the others are kept exactly.
            if let Some(exact) = nanos(&text) {
                prop_assert_eq!(nanos(&once), Some(exact), "{} -> {}", text, once);
            }
        }
    }

    /// The amount of a quantity in nano units, by exact integer arithmetic (independent of
    /// [`canonical`]'s code).
    fn nanos(text: &str) -> Option<i128> {
        let (negative, text) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let end = text
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(text.len());
        let (number, suffix) = text.split_at(end);
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        let scale: i128 = 10i128.pow(u32::try_from(fraction.len()).ok()?);
        let value: i128 = format!("{whole}{fraction}0").parse::<i128>().ok()? / 10;
        let decimal = |exponent: i32| -> Option<(i128, i128)> {
            let shift = exponent + 9;
            if shift >= 0 {
                Some((10i128.checked_pow(u32::try_from(shift).ok()?)?, 1))
            } else {
                Some((1, 10i128.checked_pow(u32::try_from(-shift).ok()?)?))
            }
        };
        let binary = |power: u32| Some((1_000_000_000i128 << power, 1));
        let (numerator, denominator): (i128, i128) = match suffix {
            "" => decimal(0)?,
            "n" => decimal(-9)?,
            "u" => decimal(-6)?,
            "m" => decimal(-3)?,
            "k" => decimal(3)?,
            "M" => decimal(6)?,
            "G" => decimal(9)?,
            "T" => decimal(12)?,
            "P" => decimal(15)?,
            "E" => decimal(18)?,
            "Ki" => binary(10)?,
            "Mi" => binary(20)?,
            "Gi" => binary(30)?,
            "Ti" => binary(40)?,
            "Pi" => binary(50)?,
            "Ei" => binary(60)?,
            other => decimal(other.strip_prefix('e')?.parse().ok()?)?,
        };
        let amount = value * numerator;
        // Finer than a nano unit: no exact amount to compare.
        if amount % (scale * denominator) != 0 {
            return None;
        }
        let amount = amount / denominator;
        let nanos = amount / scale;
        Some(if negative { -nanos } else { nanos })
    }

    #[test]
    fn quantities_take_kube_s_canonical_form() {
        for (sent, kube) in [
            ("0.5", "500m"),
            ("1000m", "1"),
            ("1024Mi", "1Gi"),
            ("1.5Gi", "1536Mi"),
            ("100Mi", "100Mi"),
            ("500m", "500m"),
            ("2e3", "2e3"),
            ("1.5e3", "1500"),
            ("0.1Gi", "107374182400m"),
            ("512", "512"),
            ("1024", "1024"),
            ("2048Ki", "2Mi"),
            ("1k", "1k"),
            ("1000", "1k"),
            ("0", "0"),
            ("0.0", "0"),
            ("00100m", "100m"),
            ("-1.5", "-1500m"),
            ("+2", "2"),
            ("1.0000000001", "1000000001n"),
            ("0.0000000001", "1n"),
            ("1.", "1"),
            (".5", "500m"),
            ("12E", "12E"),
            ("1e-3", "1e-3"),
        ] {
            assert_eq!(canonical(sent).as_deref(), Some(kube), "{sent}");
        }
        for unsure in ["", "abc", "1.2.3", "5Q", ".", "1e", "1000E"] {
            assert_eq!(canonical(unsure), None, "{unsure}");
        }
    }
}
