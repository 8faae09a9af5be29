//! Timestamps without a clock: RFC 3339 conversion and kubectl's human-readable durations.

/// Days from 1970-01-01 to the given civil date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_index = (month + 9) % 12;
    let day_of_year = (153 * month_index + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The civil date of a day count since 1970-01-01.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let days = days + 719_468;
    let era = days.div_euclid(146_097);
    let day_of_era = days - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Formats Unix seconds as RFC 3339 in UTC with whole seconds, the form Kubernetes uses for
/// `metav1.Time`: `2026-11-29T15:00:00Z`.
#[must_use]
pub fn rfc3339_from_unix(seconds: i64) -> String {
    let days = seconds.div_euclid(86_400);
    let rest = seconds.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    if !(0..=9999).contains(&year) {
        return format!(
            "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
            rest / 3600,
            rest % 3600 / 60,
            rest % 60
        );
    }
    // The same text as the `format!` above, digit by digit (a write formats two or three
    // times per PATCH, for its managed fields' times): room for `MicroTime`'s fraction too.
    let mut text = String::with_capacity(27);
    push_digits(&mut text, year, 4);
    text.push('-');
    push_digits(&mut text, month, 2);
    text.push('-');
    push_digits(&mut text, day, 2);
    text.push('T');
    push_digits(&mut text, rest / 3600, 2);
    text.push(':');
    push_digits(&mut text, rest % 3600 / 60, 2);
    text.push(':');
    push_digits(&mut text, rest % 60, 2);
    text.push('Z');
    text
}

/// `value` (at least 0, below 10^`width`) in `width` decimal digits, zero-padded.
fn push_digits(text: &mut String, value: i64, width: u32) {
    for place in (0..width).rev() {
        let digit = value / 10_i64.pow(place) % 10;
        text.push(char::from(b'0' + u8::try_from(digit).unwrap_or(0)));
    }
}

/// Formats Unix microseconds as RFC 3339 with six fractional digits, Kubernetes'
/// `metav1.MicroTime` (used by `eventTime` and leases): `2026-11-29T15:00:00.000000Z`.
#[must_use]
pub fn rfc3339_micro_from_unix(micros: i64) -> String {
    let seconds = micros.div_euclid(1_000_000);
    let fraction = micros.rem_euclid(1_000_000);
    let mut whole = rfc3339_from_unix(seconds);
    whole.pop();
    whole.push('.');
    push_digits(&mut whole, fraction, 6);
    whole.push('Z');
    whole
}

/// Go's `time.Duration.String` of `nanos`.
#[must_use]
pub fn go_duration(nanos: i128) -> String {
    if nanos == 0 {
        return "0s".to_owned();
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let n = nanos.unsigned_abs();
    let fraction = |value: u128, unit: u128| {
        let whole = value / unit;
        let rest = value % unit;
        if rest == 0 {
            whole.to_string()
        } else {
            let digits = unit.to_string().len() - 1;
            let text = format!("{rest:0digits$}");
            format!("{whole}.{}", text.trim_end_matches('0'))
        }
    };
    if n < 1_000 {
        return format!("{sign}{n}ns");
    }
    if n < 1_000_000 {
        return format!("{sign}{}µs", fraction(n, 1_000));
    }
    if n < 1_000_000_000 {
        return format!("{sign}{}ms", fraction(n, 1_000_000));
    }
    let seconds = n % 60_000_000_000;
    let minutes = (n / 60_000_000_000) % 60;
    let hours = n / 3_600_000_000_000;
    let seconds = format!("{}s", fraction(seconds, 1_000_000_000));
    if hours > 0 {
        format!("{sign}{hours}h{minutes}m{seconds}")
    } else if minutes > 0 {
        format!("{sign}{minutes}m{seconds}")
    } else {
        format!("{sign}{seconds}")
    }
}

/// Formats Unix `seconds` and `nanos` as Go's `time.RFC3339Nano` in UTC: the fraction's
/// trailing zeros left out, no fraction when it is zero (`2026-11-29T15:00:00.5Z`).
#[must_use]
pub fn rfc3339_nano_from_unix(seconds: i64, nanos: u32) -> String {
    let mut whole = rfc3339_from_unix(seconds);
    if nanos > 0 && nanos < 1_000_000_000 {
        whole.pop();
        let fraction = format!(".{nanos:09}");
        whole.push_str(fraction.trim_end_matches('0'));
        whole.push('Z');
    }
    whole
}

fn digits(s: &str) -> Option<i64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Parses an RFC 3339 timestamp (`Z` or `±hh:mm` offset, optional fraction, which is
/// truncated) into Unix seconds; `None` when malformed.
#[must_use]
pub fn unix_from_rfc3339(text: &str) -> Option<i64> {
    let text = text.trim();
    canonical_rfc3339(text).or_else(|| split_rfc3339(text))
}

/// `text` in the layout Kubernetes writes (`2026-11-29T15:00:00Z`: UTC, whole seconds, upper
/// case `T` and `Z`), read by position: what [`split_rfc3339`] gives for it, without splitting
/// (a write reads its managed fields' times four times). `None` for any other layout, or for
/// a field out of range, which [`split_rfc3339`] then refuses too.
fn canonical_rfc3339(text: &str) -> Option<i64> {
    let [year, month, day, hour, minute, second] = canonical_fields(text)?;
    Some(days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second)
}

/// The six fields of `text` in the layout Kubernetes writes (see [`canonical_rfc3339`]),
/// each within the range [`split_rfc3339`] accepts.
fn canonical_fields(text: &str) -> Option<[i64; 6]> {
    let b = text.as_bytes();
    if b.len() != 20
        || (b[4], b[7], b[10], b[13], b[16], b[19]) != (b'-', b'-', b'T', b':', b':', b'Z')
    {
        return None;
    }
    let number = |at: std::ops::Range<usize>| {
        b[at].iter().try_fold(0_i64, |n, digit| {
            digit
                .is_ascii_digit()
                .then(|| n * 10 + i64::from(digit - b'0'))
        })
    };
    let (year, month, day) = (number(0..4)?, number(5..7)?, number(8..10)?);
    let (hour, minute, second) = (number(11..13)?, number(14..16)?, number(17..19)?);
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    Some([year, month, day, hour, minute, second])
}

/// Whether `text` is what [`normalized_rfc3339`] (not micro) gives for it: the layout
/// Kubernetes writes, and a real date and time (not the 31st of a 30-day month, not second
/// 60), whose digits the time written back repeats.
fn is_normalized(text: &str) -> bool {
    let Some(fields @ [year, month, day, hour, minute, second]) = canonical_fields(text) else {
        return false;
    };
    let seconds = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second;
    let (y, m, d) = civil_from_days(seconds.div_euclid(86_400));
    let rest = seconds.rem_euclid(86_400);
    fields == [y, m, d, rest / 3600, rest % 3600 / 60, rest % 60]
}

/// Rewrites `text` as [`normalized_rfc3339`] gives it, leaving it as it is when it is
/// malformed or already so (most times read back: without a copy of the text).
pub fn normalize_rfc3339(text: &mut String, micro: bool) {
    if !micro && is_normalized(text) {
        return;
    }
    if let Some(normalized) = normalized_rfc3339(text, micro) {
        *text = normalized;
    }
}

/// Whether [`normalize_rfc3339`] changes `text`.
#[must_use]
pub fn normalizes_rfc3339(text: &str, micro: bool) -> bool {
    (micro || !is_normalized(text))
        && normalized_rfc3339(text, micro).is_some_and(|normalized| normalized != text)
}

/// [`unix_from_rfc3339`] of any layout it accepts: the date's and the clock's fields split at
/// their separators, an optional fraction, a `Z` or an offset.
fn split_rfc3339(text: &str) -> Option<i64> {
    if text.len() < 20 || !text.is_char_boundary(10) || !text.is_char_boundary(19) {
        return None;
    }
    let (date, rest) = text.split_at(10);
    let (time, zone) = rest.split_at(9);
    let mut date = date.split('-');
    let (Some(year), Some(month), Some(day), None) =
        (date.next(), date.next(), date.next(), date.next())
    else {
        return None;
    };
    let time = time.strip_prefix(['T', 't', ' '])?;
    let mut clock = time.split(':');
    let (Some(hour), Some(minute), Some(second), None) =
        (clock.next(), clock.next(), clock.next(), clock.next())
    else {
        return None;
    };
    let (year, month, day) = (digits(year)?, digits(month)?, digits(day)?);
    let (hour, minute, second) = (digits(hour)?, digits(minute)?, digits(second)?);
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let zone = match zone.strip_prefix('.') {
        Some(fraction) => {
            let end = fraction
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(fraction.len());
            if end == 0 {
                return None;
            }
            &fraction[end..]
        }
        None => zone,
    };
    let offset = match zone {
        "Z" | "z" => 0,
        _ => {
            let sign = match zone.as_bytes().first()? {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let (hours, minutes) = zone[1..].split_once(':')?;
            sign * (digits(hours)? * 3600 + digits(minutes)? * 60)
        }
    };
    Some(days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - offset)
}

/// Parses an RFC 3339 timestamp into Unix microseconds (a fraction past six digits is
/// truncated, as Go's `time` keeps nanoseconds and `MicroTime` prints microseconds); `None`
/// when malformed.
#[must_use]
pub fn unix_micros_from_rfc3339(text: &str) -> Option<i64> {
    let seconds = unix_from_rfc3339(text)?;
    let text = text.trim();
    let micros = match text.get(19..).and_then(|rest| rest.strip_prefix('.')) {
        Some(fraction) => {
            let digits: String = fraction
                .chars()
                .take_while(char::is_ascii_digit)
                .take(6)
                .collect();
            format!("{digits:0<6}").parse::<i64>().ok()?
        }
        None => 0,
    };
    seconds.checked_mul(1_000_000)?.checked_add(micros)
}

/// Go's `RFC3339Micro`, the layout `metav1.MicroTime` is read with.
const RFC3339_MICRO: &str = "2006-01-02T15:04:05.000000Z07:00";

/// The error of Go's `time.Parse(RFC3339Micro, text)`, which `metav1.MicroTime`'s
/// `UnmarshalJSON` returns for a JSON string (k8s.io/apimachinery `pkg/apis/meta/v1/
/// micro_time.go`), or `None` when Go reads `text`. The layout's `.000000` takes exactly a
/// period and six digits, then `Z` or a `±hh:mm` offset: kube-apiserver refuses an
/// `eventTime` or a lease's `renewTime` in whole seconds, in milliseconds (JavaScript's
/// `Date.toISOString()`) or in nanoseconds, which a `metav1.Time` takes.
#[must_use]
pub fn micro_time_parse_error(text: &str) -> Option<String> {
    let cannot = |value: &str, element: &str| {
        Some(format!(
            "parsing time {text:?} as {RFC3339_MICRO:?}: cannot parse {value:?} as {element:?}"
        ))
    };
    // Whatever `unix_from_rfc3339` reads has an ASCII date and clock in its first 19 bytes.
    if text.trim() != text || unix_from_rfc3339(text).is_none() {
        return cannot(text, "2006");
    }
    let bytes = text.as_bytes();
    if bytes[10] != b'T' {
        return cannot(&text[10..], "T");
    }
    let rest = &text[19..];
    let fraction = rest.as_bytes();
    if fraction.len() < 7 || fraction[0] != b'.' || !fraction[1..7].iter().all(u8::is_ascii_digit) {
        return cannot(rest, ".000000");
    }
    let zone = &rest[7..];
    if zone == "Z" {
        return None;
    }
    let z = zone.as_bytes();
    let two_digits = |at: usize| z[at].is_ascii_digit() && z[at + 1].is_ascii_digit();
    if z.len() < 6
        || !matches!(z[0], b'+' | b'-')
        || z[3] != b':'
        || !two_digits(1)
        || !two_digits(4)
    {
        return cannot(zone, "Z07:00");
    }
    if z.len() > 6 {
        return Some(format!(
            "parsing time {text:?}: extra text: {:?}",
            &zone[6..]
        ));
    }
    None
}

/// A `metav1.Time` (`micro`: `metav1.MicroTime`) as Kubernetes writes it back whatever form a
/// client sent it in: UTC, whole seconds (six fractional digits); `None` when malformed.
#[must_use]
pub fn normalized_rfc3339(text: &str, micro: bool) -> Option<String> {
    if micro {
        unix_micros_from_rfc3339(text).map(rfc3339_micro_from_unix)
    } else {
        unix_from_rfc3339(text).map(rfc3339_from_unix)
    }
}

/// kubectl's `duration.HumanDuration` for a number of seconds: `45s`, `5m`, `7m30s`, `3h`,
/// `2d`, `3y`; `<invalid>` more than a second in the future.
#[must_use]
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".to_owned();
    }
    if seconds < 0 {
        return "0s".to_owned();
    }
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let days = (hours / 24) % 365;
        return if days == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{days}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Go's `time.Parse(RFC3339Micro, …)`: six fractional digits, then `Z` or `±hh:mm`;
    /// its errors name the rest of the text where the layout's element did not match.
    #[test]
    fn micro_time_takes_six_fractional_digits_as_go_does() {
        for good in [
            "2026-12-06T14:10:00.123456Z",
            "2026-12-06T14:10:00.000000+01:00",
            "2026-12-06T14:10:00.999999-11:30",
        ] {
            assert_eq!(micro_time_parse_error(good), None, "{good}");
        }
        let layout = "\"2006-01-02T15:04:05.000000Z07:00\"";
        for (bad, value, element) in [
            ("2026-12-06T14:10:00.123Z", ".123Z", ".000000"),
            ("2026-12-06T14:10:00Z", "Z", ".000000"),
            ("2026-12-06T14:10:00+01:00", "+01:00", ".000000"),
            ("2026-12-06T14:10:00.123+01:00", ".123+01:00", ".000000"),
            ("2026-12-06T14:10:00.123456789Z", "789Z", "Z07:00"),
            ("2026-12-06T14:10:00.1234567+01:00", "7+01:00", "Z07:00"),
            ("2026-12-06T14:10:00.123456z", "z", "Z07:00"),
            ("2026-12-06t14:10:00.123456Z", "t14:10:00.123456Z", "T"),
            ("soon", "soon", "2006"),
        ] {
            assert_eq!(
                micro_time_parse_error(bad).as_deref(),
                Some(
                    format!(
                        "parsing time {bad:?} as {layout}: cannot parse {value:?} as {element:?}"
                    )
                    .as_str()
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn rfc3339_nano_is_gos() {
        assert_eq!(rfc3339_nano_from_unix(0, 0), "1970-01-01T00:00:00Z");
        assert_eq!(
            rfc3339_nano_from_unix(1_800_000_000, 500_000_000),
            "2027-01-15T08:00:00.5Z"
        );
        assert_eq!(
            rfc3339_nano_from_unix(1_800_000_000, 1_020),
            "2027-01-15T08:00:00.00000102Z"
        );
    }

    #[test]
    fn round_trip() {
        assert_eq!(rfc3339_from_unix(0), "1970-01-01T00:00:00Z");
        assert_eq!(unix_from_rfc3339("1970-01-01T00:00:00Z"), Some(0));
        let t = unix_from_rfc3339("2026-11-29T15:00:00Z").unwrap();
        assert_eq!(rfc3339_from_unix(t), "2026-11-29T15:00:00Z");
        assert_eq!(unix_from_rfc3339("2026-11-29T15:00:00.123456Z"), Some(t));
        assert_eq!(unix_from_rfc3339("2026-11-29T16:30:00+01:30"), Some(t));
        assert_eq!(
            rfc3339_micro_from_unix(t * 1_000_000 + 5),
            "2026-11-29T15:00:00.000005Z"
        );
        assert_eq!(rfc3339_from_unix(951_782_400), "2000-02-29T00:00:00Z");
        for bad in [
            "",
            "2026-11-29",
            "2026-13-01T00:00:00Z",
            "2026-11-29T15:00:00",
            "2026-11-29T15:00:00.Z",
            "xxxx-11-29T15:00:00Z",
            "2026-11-29T15:00:00é",
        ] {
            assert_eq!(unix_from_rfc3339(bad), None, "{bad}");
        }
    }

    /// The formatting of `rfc3339_from_unix` and `rfc3339_micro_from_unix` as they were
    /// written with `format!`, before they pushed digits.
    fn formatted(seconds: i64) -> String {
        let (year, month, day) = civil_from_days(seconds.div_euclid(86_400));
        let rest = seconds.rem_euclid(86_400);
        format!(
            "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
            rest / 3600,
            rest % 3600 / 60,
            rest % 60
        )
    }

    #[test]
    fn digits_pushed_are_the_formatted_text() {
        // Year 0, 9999, the years past it and before 0 (formatted as before), leap days.
        for seconds in [
            -62_167_219_200,
            -62_167_219_201,
            253_402_300_799,
            253_402_300_800,
            -1,
            0,
            951_782_400,
            1_764_428_400,
        ] {
            assert_eq!(rfc3339_from_unix(seconds), formatted(seconds), "{seconds}");
        }
        assert_eq!(rfc3339_from_unix(253_402_300_799), "9999-12-31T23:59:59Z");
        assert_eq!(rfc3339_from_unix(-1), "1969-12-31T23:59:59Z");
        assert_eq!(rfc3339_micro_from_unix(-1), "1969-12-31T23:59:59.999999Z");
    }

    proptest::proptest! {
        #[test]
        fn any_time_is_formatted_as_before(seconds in -100_000_000_000_i64..400_000_000_000) {
            proptest::prop_assert_eq!(rfc3339_from_unix(seconds), formatted(seconds));
            let micros = seconds * 1_000_000 + seconds.rem_euclid(1_000_000);
            let whole = formatted(micros.div_euclid(1_000_000));
            proptest::prop_assert_eq!(
                rfc3339_micro_from_unix(micros),
                format!("{}.{:06}Z", &whole[..whole.len() - 1], micros.rem_euclid(1_000_000))
            );
            // Parsing what was written gives the time back.
            if (0..=9999).contains(&civil_from_days(seconds.div_euclid(86_400)).0) {
                proptest::prop_assert_eq!(unix_from_rfc3339(&rfc3339_from_unix(seconds)), Some(seconds));
            }
        }
    }

    proptest::proptest! {
        /// Goal: the layout read by position gives what splitting it gives, for every
        /// string in that layout (digits anywhere, fields out of range included).
        #[test]
        fn the_canonical_layout_reads_as_split(
            fields in proptest::collection::vec(0_u32..10, 14),
            valid in proptest::bool::ANY,
        ) {
            let d: Vec<char> = fields.iter().map(|n| char::from_digit(*n, 10).unwrap_or('0')).collect();
            let text = if valid {
                // A likely valid time: month 01-12, day 01-28, hour 00-23.
                format!(
                    "{}{}{}{}-{:02}-{:02}T{:02}:{}{}:{}{}Z",
                    d[0], d[1], d[2], d[3],
                    fields[4] + 1, fields[5] * 2 + 1 + fields[6] % 8, fields[7] * 2 + fields[8] % 4,
                    d[9].min('5'), d[10], d[11].min('5'), d[12]
                )
            } else {
                format!(
                    "{}{}{}{}-{}{}-{}{}T{}{}:{}{}:{}{}Z",
                    d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], d[8], d[9], d[10], d[11], d[12], d[13]
                )
            };
            let split = split_rfc3339(&text);
            proptest::prop_assert_eq!(unix_from_rfc3339(&text), split);
            if let Some(seconds) = canonical_rfc3339(&text) {
                proptest::prop_assert_eq!(Some(seconds), split);
            }
            if valid {
                proptest::prop_assert!(canonical_rfc3339(&text).is_some(), "{}", text);
            }
        }
    }

    /// What `normalize_rfc3339` must leave in `text`: the normalized time, or the text as it
    /// was when malformed.
    fn normalized_or_kept(text: &str, micro: bool) -> String {
        normalized_rfc3339(text, micro).unwrap_or_else(|| text.to_owned())
    }

    #[test]
    fn a_time_normalized_in_place_is_the_normalized_time() {
        for text in [
            "2026-11-29T15:00:00Z",
            "2024-02-29T00:00:00Z",
            "2026-02-29T00:00:00Z",
            "2026-04-31T12:00:00Z",
            "2026-11-29T23:59:60Z",
            "0000-01-01T00:00:00Z",
            "9999-12-31T23:59:59Z",
            "2026-11-29T16:30:00+01:30",
            "2026-11-29T15:00:00.5Z",
            " 2026-11-29T15:00:00Z",
            "2026-11-29t15:00:00z",
            "2026-13-01T00:00:00Z",
            "not a time",
        ] {
            for micro in [false, true] {
                let mut normalized = text.to_owned();
                normalize_rfc3339(&mut normalized, micro);
                assert_eq!(
                    normalized,
                    normalized_or_kept(text, micro),
                    "{text} {micro}"
                );
            }
        }
        assert!(is_normalized("2024-02-29T00:00:00Z"));
        assert!(!is_normalized("2026-02-29T00:00:00Z"));
        assert!(!is_normalized("2026-11-29T23:59:60Z"));
    }

    proptest::proptest! {
        /// Goal: normalizing in place gives what `normalized_rfc3339` gives (or keeps a
        /// malformed text) for any text in Kubernetes' layout, days past a month's end and
        /// second 60 included.
        #[test]
        fn any_time_normalized_in_place_is_the_normalized_time(
            year in 0_u32..10_000, month in 0_u32..14, day in 0_u32..33,
            hour in 0_u32..25, minute in 0_u32..61, second in 0_u32..62,
            micro in proptest::bool::ANY,
        ) {
            let text = format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}Z");
            let mut normalized = text.clone();
            normalize_rfc3339(&mut normalized, micro);
            proptest::prop_assert_eq!(normalized, normalized_or_kept(&text, micro));
        }
    }

    #[test]
    fn fields_are_split_at_their_separators_not_their_widths() {
        // Three date and three clock fields, whatever their widths within the 10 and 8
        // characters; a fourth field is malformed.
        let fifth = days_from_civil(20_261, 1, 5) * 86_400;
        assert_eq!(unix_from_rfc3339("20261-1-05T00:00:00Z"), Some(fifth));
        assert_eq!(
            unix_from_rfc3339("2026-01-05T01:002:3Z"),
            unix_from_rfc3339("2026-01-05T01:02:03Z")
        );
        assert_eq!(unix_from_rfc3339("2026-1-0-1T00:00:00Z"), None);
        assert_eq!(unix_from_rfc3339("2026--1-05T00:00:00Z"), None);
        assert_eq!(unix_from_rfc3339("2026-01-05T1:2:3:45Z"), None);
        assert_eq!(unix_from_rfc3339("2026-01-05T01:02-03Z"), None);
    }

    #[test]
    fn human_durations_match_kubectl() {
        let cases = [
            (-5, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (119, "119s"),
            (120, "2m"),
            (450, "7m30s"),
            (600, "10m"),
            (10_799, "179m"),
            (10_800, "3h"),
            (5 * 3600 + 60, "5h1m"),
            (47 * 3600, "47h"),
            (2 * 86_400, "2d"),
            (3 * 86_400 + 3600, "3d1h"),
            (30 * 86_400, "30d"),
            (3 * 365 * 86_400, "3y"),
            (3 * 365 * 86_400 + 86_400, "3y1d"),
            (10 * 365 * 86_400, "10y"),
        ];
        for (seconds, expected) in cases {
            assert_eq!(human_duration(seconds), expected, "{seconds}");
        }
    }
}
