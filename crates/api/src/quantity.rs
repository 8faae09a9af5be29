//! `resource.Quantity`'s canonical form (apimachinery's `ParseQuantity` then
//! `CanonicalizeBytes`): what kube-apiserver writes back for a quantity a client sent in another
//! form — `0.5` is `500m`, `1024Mi` is `1Gi`, `1.5Gi` is `1536Mi`, `1000m` is `1`.
//!
//! ## Guarantees
//! - The value is kept exactly (rounded up to nano units past nine fractional digits, as kube
//!   rounds); the form follows the input's: decimal SI suffixes (`m`, `k`, `M`, ...) with the
//!   exponent a multiple of three and no trailing zeros, binary suffixes (`Ki`, `Mi`, ...) for
//!   an integer of at least 1024 (else decimal SI), `e<n>` exponents.
//! - Anything [`canonical`] cannot be sure of — a text `ParseQuantity` would refuse, a value
//!   past 128 bits of billionths, an exponent beyond kube's suffixes — gives `None`: the caller
//!   keeps what the client sent.
//! - [`Quantity`] is also the arithmetic the server's quota and LimitRanger admission use
//!   (sums keep their first term's format, as kube's `Add`).

use std::cmp::Ordering;
use std::fmt;

/// How a quantity is written (kube's `resource.Format`): sums keep their first term's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `k`, `M`, ... and `m`, `u`, `n`, or no suffix.
    DecimalSi,
    /// `Ki`, `Mi`, ... `Ei`.
    BinarySi,
    /// `e3`, `E-2`.
    DecimalExponent,
}

/// A Kubernetes quantity: its value in billionths, and its format.
#[derive(Clone, Copy, Debug)]
pub struct Quantity {
    nanos: i128,
    format: Format,
}

/// Billionths in one unit: a quantity's value is counted in them.
pub const NANOS: i128 = 1_000_000_000;

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.nanos == other.nanos
    }
}

impl Eq for Quantity {}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> Ordering {
        self.nanos.cmp(&other.nanos)
    }
}

impl Quantity {
    /// `n` objects.
    #[must_use]
    pub fn count(n: i64) -> Quantity {
        Quantity {
            nanos: i128::from(n) * NANOS,
            format: Format::DecimalSi,
        }
    }

    /// Nothing (kube's zero quantity: a sum starting from it takes its first term's format).
    #[must_use]
    pub fn zero() -> Quantity {
        Quantity::count(0)
    }

    /// Parses kube's quantity grammar: a signed decimal number and a suffix (binary `Ki` ...
    /// `Ei`, decimal `n` `u` `m` `k` `M` `G` `T` `P` `E`, or an exponent `e3`). Precision past
    /// a billionth is rounded up, as kube's `ParseQuantity`. `None` for anything else, or
    /// beyond what 128 bits of billionths hold.
    #[must_use]
    pub fn parse(text: &str) -> Option<Quantity> {
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
        if whole.len() + fraction.len() == 0 || whole.len() + fraction.len() > 30 {
            return None;
        }
        if fraction.contains('.') {
            return None;
        }
        let mut mantissa: i128 = 0;
        for digit in whole.bytes().chain(fraction.bytes()) {
            mantissa = mantissa * 10 + i128::from(digit - b'0');
        }
        let (binary, exponent, format) = match suffix {
            "" => (0, 0, Format::DecimalSi),
            "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" => {
                let power = "KMGTPE".find(&suffix[..1])? + 1;
                (power * 10, 0, Format::BinarySi)
            }
            "n" => (0, -9, Format::DecimalSi),
            "u" => (0, -6, Format::DecimalSi),
            "m" => (0, -3, Format::DecimalSi),
            "k" => (0, 3, Format::DecimalSi),
            "M" => (0, 6, Format::DecimalSi),
            "G" => (0, 9, Format::DecimalSi),
            "T" => (0, 12, Format::DecimalSi),
            "P" => (0, 15, Format::DecimalSi),
            "E" => (0, 18, Format::DecimalSi),
            _ => {
                let exponent = suffix.strip_prefix(['e', 'E'])?;
                if exponent.is_empty() {
                    return None;
                }
                let exponent: i32 = exponent.parse().ok()?;
                (0, exponent, Format::DecimalExponent)
            }
        };
        let mut nanos = mantissa.checked_mul(1i128.checked_shl(u32::try_from(binary).ok()?)?)?;
        let fraction_digits = i32::try_from(fraction.len()).ok()?;
        let scale = exponent.checked_add(9)?.checked_sub(fraction_digits)?;
        if scale >= 0 {
            nanos = nanos.checked_mul(10i128.checked_pow(u32::try_from(scale).ok()?)?)?;
        } else {
            let divisor = 10i128.checked_pow(u32::try_from(-scale).ok()?);
            nanos = match divisor {
                Some(divisor) => nanos / divisor + i128::from(nanos % divisor != 0),
                None => i128::from(nanos != 0),
            };
        }
        Some(Quantity {
            nanos: if negative { -nanos } else { nanos },
            format,
        })
    }

    /// `self + other`, in `self`'s format (`other`'s when `self` is zero, as kube's `Add`).
    #[must_use]
    pub fn plus(self, other: Quantity) -> Quantity {
        Quantity {
            nanos: self.nanos.saturating_add(other.nanos),
            format: if self.nanos == 0 {
                other.format
            } else {
                self.format
            },
        }
    }

    /// `self - other`, not below zero.
    #[must_use]
    pub fn minus(self, other: Quantity) -> Quantity {
        Quantity {
            nanos: self.nanos.saturating_sub(other.nanos).max(0),
            format: self.format,
        }
    }

    /// `-self` (saturating), in `self`'s format.
    #[must_use]
    pub fn negated(self) -> Quantity {
        Quantity {
            nanos: self.nanos.saturating_neg(),
            format: self.format,
        }
    }

    /// The value in billionths.
    #[must_use]
    pub fn nanos(self) -> i128 {
        self.nanos
    }

    /// The value rounded away from zero to a whole number of thousandths, in its format, or
    /// `None` when it already is one (kube's `RoundUp(-3)`, which `SetDefaults_ResourceList`
    /// applies to every resource list).
    #[must_use]
    pub fn rounded_to_milli(self) -> Option<Quantity> {
        const MILLI: i128 = NANOS / 1000;
        let rest = self.nanos % MILLI;
        if rest == 0 {
            return None;
        }
        let away = if self.nanos > 0 { MILLI } else { -MILLI };
        Some(Quantity {
            nanos: self.nanos - rest + away,
            format: self.format,
        })
    }

    /// The larger of the two (kube's `maxResourceList`: the first kept on a tie).
    #[must_use]
    pub fn max_of(self, other: Quantity) -> Quantity {
        if other.nanos > self.nanos {
            other
        } else {
            self
        }
    }
}

/// kube's canonical form (`Quantity.String()`): the shortest integer mantissa with an
/// exponent that is a multiple of 3 (decimal) or of 1024 (binary, for whole values of at
/// least 1024; others fall back to decimal).
impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.nanos == 0 {
            return f.write_str("0");
        }
        let mut format = self.format;
        if format == Format::BinarySi
            && (self.nanos.abs() < 1024 * NANOS || self.nanos % NANOS != 0)
        {
            format = Format::DecimalSi;
        }
        if format == Format::BinarySi {
            let mut units = self.nanos / NANOS;
            let mut power = 0;
            while power < 6 && units % 1024 == 0 {
                units /= 1024;
                power += 1;
            }
            let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][power];
            return write!(f, "{units}{suffix}");
        }
        let mut mantissa = self.nanos;
        let mut exponent: i32 = -9;
        while mantissa % 10 == 0 {
            mantissa /= 10;
            exponent += 1;
        }
        match exponent.rem_euclid(3) {
            1 => {
                mantissa *= 10;
                exponent -= 1;
            }
            2 => {
                mantissa *= 100;
                exponent -= 2;
            }
            _ => {}
        }
        let suffix = match (format, exponent) {
            (_, 0) => String::new(),
            (Format::DecimalExponent, e) => format!("e{e}"),
            (_, -9) => "n".to_owned(),
            (_, -6) => "u".to_owned(),
            (_, -3) => "m".to_owned(),
            (_, 3) => "k".to_owned(),
            (_, 6) => "M".to_owned(),
            (_, 9) => "G".to_owned(),
            (_, 12) => "T".to_owned(),
            (_, 15) => "P".to_owned(),
            (_, 18) => "E".to_owned(),
            (_, e) => format!("e{e}"),
        };
        write!(f, "{mantissa}{suffix}")
    }
}

/// The canonical text of quantity `text` (kube's `Quantity.String()` after `ParseQuantity`), or
/// `None` (see the module docs).
#[must_use]
pub fn canonical(text: &str) -> Option<String> {
    let quantity = Quantity::parse(text)?;
    let written = quantity.to_string();
    // An exponent past kube's suffixes (beyond `E` or `n`) is written as `e<n>` here, where
    // kube's own output drops the suffix: keep what the client sent.
    (quantity.format == Format::DecimalExponent || !written.contains('e')).then_some(written)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::{Quantity, canonical};

    #[test]
    fn resource_lists_round_up_to_thousandths() {
        let round = |text: &str| {
            Quantity::parse(text)
                .unwrap()
                .rounded_to_milli()
                .map(|q| q.to_string())
        };
        assert_eq!(round("0.0001").as_deref(), Some("1m"));
        assert_eq!(round("100u").as_deref(), Some("1m"));
        assert_eq!(round("1.0001").as_deref(), Some("1001m"));
        assert_eq!(round("-1n").as_deref(), Some("-1m"));
        assert_eq!(round("1e-4").as_deref(), Some("1e-3"));
        assert_eq!(round("500m"), None);
        assert_eq!(round("1Gi"), None);
    }

    proptest! {
        /// The canonical form is canonical: written again, it stays (but for binary amounts
        /// written as plain integers, see below); and it is the same amount (compared in nano
        /// units, where the input has at most nine decimals).
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
            // A binary amount that is no whole number of Ki is written as a plain integer,
            // which reads back as decimal (kube too: `31937.5Ki` is `32704000`, then
            // `32704k`): the same amount, not the same text.
            if suffix.ends_with('i') && !once.ends_with('i') {
                prop_assert_eq!(twice.as_deref().and_then(nanos), nanos(&once), "{}", text);
            } else {
                prop_assert_eq!(twice.as_deref(), Some(once.as_str()), "{}", text);
            }
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
