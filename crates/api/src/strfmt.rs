//! String formats of custom resource schemas (`format:` in a CRD's OpenAPI v3 schema), as
//! kube-apiserver 1.33 checks them.
//!
//! # What is checked
//!
//! apiextensions-apiserver validates custom resources with kube-openapi's validator and
//! strfmt's default registry, after stripping from the schema every format that is not in its
//! `supportedVersionedFormats` list (at the 1.0 compatibility level, the only set 1.33 has).
//! Both look a format name up after go-openapi's normalization, which removes every `-` and
//! nothing else (so `date-time` is `datetime`, while `DateTime` or `int32` is not checked at
//! all). The checked formats, and the Go function each one reproduces:
//!
//! | format | Go check |
//! | --- | --- |
//! | `bsonobjectid` | `bson.ObjectIDFromHex`: exactly 24 hex digits |
//! | `uri` | govalidator `IsRequestURI`: `net/url.ParseRequestURI` succeeds |
//! | `email` | strfmt `IsEmail`: `net/mail.ParseAddress` succeeds |
//! | `hostname` | strfmt `IsHostname`: its regex, at most 255 bytes, labels of at most 63 bytes |
//! | `ipv4` | `k8s.io/utils/net.ParseIPSloppy` succeeds and the text has a `.` |
//! | `ipv6` | govalidator `IsIPv6`: `net.ParseIP` succeeds and the text has a `:` |
//! | `cidr` | `k8s.io/utils/net.ParseCIDRSloppy` succeeds |
//! | `mac` | govalidator `IsMAC`: `net.ParseMAC` succeeds |
//! | `uuid`, `uuid3`, `uuid4`, `uuid5` | strfmt's UUID regexes |
//! | `isbn`, `isbn10`, `isbn13` | govalidator `IsISBN10` / `IsISBN13`, with their checksums |
//! | `creditcard` | govalidator `IsCreditCard`: its regex on the digits, then Luhn |
//! | `ssn` | govalidator `IsSSN`: 11 bytes and its regex |
//! | `hexcolor`, `rgbcolor` | govalidator `IsHexcolor`, `IsRGBcolor` regexes |
//! | `byte` | govalidator `IsBase64`: its regex (padded standard alphabet, at least 4 characters) |
//! | `password` | always valid |
//! | `date` | strfmt `IsDate`: `time.Parse("2006-01-02", s)` succeeds |
//! | `duration` | strfmt `IsDuration`: `time.ParseDuration`, else strfmt's `\d+ unit` fallback |
//! | `datetime` | strfmt `IsDateTime`: a date, `T`, then its `hh:mm:ss[.frac](Z\|±hh:mm)` regex |
//!
//! Note that `byte` is checked by the regex (so the empty string and text with line breaks are
//! invalid, although Go's `base64.StdEncoding` would decode them), and `datetime` by
//! `IsDateTime`, not by strfmt's `ParseDateTime` (which is only used to unmarshal): the text is
//! lowercased and split at every `t`, the first piece must be a date and the second must match
//! the regex, any further pieces are ignored, and the offset's hours and minutes are not
//! range-checked. Both quirks are kube-apiserver's and are kept.
//!
//! # Go's behaviour, reproduced
//!
//! The regexes are upstream's, with Go's ASCII-only `\d` and `\s` spelled out as `[0-9]` and
//! `[\t\n\f\r ]` (Rust's are Unicode-wide). The parsers are ports of the Go functions they name
//! (Go 1.24, which builds kube-apiserver 1.33), on bytes, without panics on any input:
//!
//! * `net/url.ParseRequestURI`: no control characters; `*`; a scheme (`[a-zA-Z][a-zA-Z0-9+.-]*:`)
//!   followed by an opaque part (never checked) or by a path; or a path starting with `/`. The
//!   query is never checked and there is no fragment (a `#` is part of the path). With a scheme,
//!   `//` starts an authority: the userinfo (before the last `@`) has only RFC 3986 characters,
//!   the host only the characters Go allows in hosts, `%` escapes of non-ASCII bytes (or `%25`)
//!   only, and an optional `:port` of digits (any number of them, not range-checked), and a
//!   bracketed host must hold an IPv6 address (with an optional `%25`-escaped zone). Every `%`
//!   in the path must start a two-hex-digit escape.
//! * `net/mail.ParseAddress`: one address, `local@domain` (dot-atom or quoted-string local part;
//!   dot-atom or IP domain literal), or `Display Name <local@domain>` (the name made of atoms and
//!   quoted-strings), or a group `name: address;` holding exactly one address, with spaces,
//!   tabs and (nested) comments where Go skips them. RFC 6532 UTF-8 is allowed in atoms. A
//!   comment after an address or a word of the display name that is a well-formed RFC 2047
//!   encoded-word in a charset other than UTF-8, ISO-8859-1 or US-ASCII fails, as it does in Go.
//! * `net.ParseIP` (`net/netip`'s parser since Go 1.22): dotted quads without leading zeros;
//!   IPv6 with at most four hex digits a group, one `::`, an optional trailing dotted quad;
//!   zones rejected.
//! * `ParseIPSloppy` / `ParseCIDRSloppy` (a fork of Go 1.16's parser): as above, but IPv4 parts
//!   may have leading zeros and IPv6 groups any number of leading zeros. For `ipv4` it only
//!   needs to parse and to contain a `.`, so an IPv6 address with an embedded dotted quad
//!   (`::ffff:1.2.3.4`) passes, as in kube-apiserver.
//! * `net.ParseMAC`: 6, 8 or 20 bytes as pairs of hex digits separated by all `:` or all `-`,
//!   or as groups of four hex digits separated by `.`.
//! * `time.ParseDuration`: `[-+]` then one or more `number[.fraction]unit` (`ns`, `us`, `µs`,
//!   `μs`, `ms`, `s`, `m`, `h`), or `0`, within ±2⁶³ ns.
//!
//! # Approximations
//!
//! * `uri`: the bracketed-host rule is the one Go 1.24.8 introduced for CVE-2025-47912 (a host
//!   with a `[` must end in `[IPv6]` or `[IPv6]:port`, the text before the last `[` is not
//!   looked at); kube-apiserver builds from earlier Go 1.24 patch releases accepted anything
//!   between the brackets. Later Go releases (1.26) also reject text before the `[` and extra
//!   colons in `http(s)` hosts; those are not applied.
//! * `email`: the parser of Go 1.23 and 1.24: domain literals hold an address `net.ParseIP`
//!   accepts, without RFC 5321's `IPv6:` tag; display names may not hold unquoted specials
//!   (Go 1.19 allowed `()[];@\,`). Display names are not decoded, only checked for the RFC 2047
//!   charset failure above, and the quoted-string and comment rules are Go's, not RFC 5322's
//!   (no folding white space, for instance).
//! * `hostname`, `datetime`: Go's regexp and Rust's `regex` agree on the patterns used here,
//!   except that `\p{L}` and `\p{S}` follow the Unicode version each library ships. Go
//!   lowercases `datetime` text before matching; only `T` lowercases to `t` and only `Z` to `z`
//!   among the characters that matter, so the text is matched as it is, with `T`/`t` and `Z`/`z`
//!   accepted alike.
//! * `duration`: the strfmt fallback reads numbers with `strconv.Atoi` (a number above
//!   `i64::MAX` makes the whole value invalid) and, like Go, does not care about what surrounds
//!   the matches, so `in 3 days` is a duration.

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::Regex;

use crate::go_url::hex_value;

/// `k8s.io/utils/net.ParseIPSloppy` reads `value` (IPv4 or IPv6, leading zeros allowed).
#[must_use]
pub fn is_ip_sloppy(value: &str) -> bool {
    ip::parse_sloppy(value.as_bytes())
}

/// `k8s.io/utils/net.ParseCIDRSloppy` reads `value` (an address, leading zeros allowed, and a
/// prefix length within its family's bits).
#[must_use]
pub fn is_cidr_sloppy(value: &str) -> bool {
    ip::parse_cidr_sloppy(value.as_bytes())
}

/// The address `ParseIPSloppy` reads `value` as (IPv4-mapped IPv6 addresses as their IPv4
/// address, as Go's `To4` sees them); `None` when it is no address, or one of the sloppy forms
/// the standard parser refuses that is not an IPv4 address with leading zeros.
#[must_use]
pub fn parse_ip_sloppy(value: &str) -> Option<std::net::IpAddr> {
    if !is_ip_sloppy(value) {
        return None;
    }
    let address = match value.parse::<std::net::IpAddr>() {
        Ok(address) => address,
        Err(_) if !value.contains(':') => {
            let parts: Vec<u8> = value
                .split('.')
                .map(|part| part.parse::<u8>())
                .collect::<Result<_, _>>()
                .ok()?;
            let octets: [u8; 4] = parts.try_into().ok()?;
            std::net::IpAddr::from(octets)
        }
        Err(_) => return None,
    };
    Some(match address {
        std::net::IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(address, std::net::IpAddr::V4),
        v4 => v4,
    })
}

/// The family `ParseIPSloppy` reads `value` as: `Some(false)` for IPv4 (an IPv4-mapped IPv6
/// address too, as Go's `To4` sees it), `Some(true)` for IPv6, `None` when it is no address.
#[must_use]
pub fn ip_is_v6_sloppy(value: &str) -> Option<bool> {
    if !is_ip_sloppy(value) {
        return None;
    }
    if !value.contains(':') {
        return Some(false);
    }
    let mapped = match value.parse::<std::net::Ipv6Addr>() {
        Ok(address) => address.to_ipv4_mapped().is_some(),
        // The sloppy forms std refuses: leading zeros in an embedded dotted quad.
        Err(_) => value.to_ascii_lowercase().starts_with("::ffff:") && value.contains('.'),
    };
    Some(!mapped)
}

/// Whether `value` is valid for `format`; `None` when `format` is not one kube-apiserver
/// checks for custom resources (the check is then skipped).
#[must_use]
pub fn check(format: &str, value: &str) -> Option<bool> {
    // go-openapi's `DefaultNameNormalizer`: `strings.Replace(name, "-", "", -1)`.
    let name: Cow<'_, str> = if format.contains('-') {
        Cow::Owned(format.replace('-', ""))
    } else {
        Cow::Borrowed(format)
    };
    let valid = match name.as_ref() {
        "bsonobjectid" => value.len() == 24 && value.bytes().all(|b| b.is_ascii_hexdigit()),
        "uri" => crate::go_url::parse_request_uri(value).is_ok(),
        "email" => mail::is_address(value.as_bytes()),
        "hostname" => is_hostname(value),
        "ipv4" => ip::parse_sloppy(value.as_bytes()) && value.contains('.'),
        // `net.ParseIP` reads a text with a `:` as IPv6 or not at all: `!is4` is the `:` test.
        "ipv6" => ip::parse_ip(value.as_bytes()).is_some_and(|addr| !addr.is4),
        "cidr" => ip::parse_cidr_sloppy(value.as_bytes()),
        "mac" => ip::is_mac(value.as_bytes()),
        "uuid" => UUID.is_match(value),
        "uuid3" => UUID3.is_match(value),
        "uuid4" => UUID4.is_match(value),
        "uuid5" => UUID5.is_match(value),
        "isbn" => is_isbn10(value) || is_isbn13(value),
        "isbn10" => is_isbn10(value),
        "isbn13" => is_isbn13(value),
        "creditcard" => is_credit_card(value),
        // govalidator's `IsSSN` checks the byte length before the regex.
        "ssn" => value.len() == 11 && SSN.is_match(value),
        "hexcolor" => HEX_COLOR.is_match(value),
        "rgbcolor" => RGB_COLOR.is_match(value),
        "byte" => BASE64.is_match(value),
        "password" => true,
        "date" => times::is_date(value.as_bytes()),
        "duration" => times::is_duration(value),
        "datetime" => times::is_date_time(value),
        _ => return None,
    };
    Some(valid)
}

/// Compiles one of this module's constant patterns.
fn compile(pattern: &str) -> Regex {
    Regex::new(pattern).expect("strfmt's patterns are valid")
}

/// strfmt's `HostnamePattern` (the `-` of its third class escaped, which Go reads as a literal).
static HOSTNAME: LazyLock<Regex> = LazyLock::new(|| {
    compile(
        r"^([a-zA-Z0-9\p{S}\p{L}]((-?[a-zA-Z0-9\p{S}\p{L}]{0,62})?)|([a-zA-Z0-9\p{S}\p{L}](([a-zA-Z0-9\-\p{S}\p{L}]{0,61}[a-zA-Z0-9\p{S}\p{L}])?)(\.)){1,}([a-zA-Z\p{L}]){2,63})$",
    )
});
/// strfmt's `UUIDPattern`.
static UUID: LazyLock<Regex> = LazyLock::new(|| {
    compile(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$")
});
/// strfmt's `UUID3Pattern`.
static UUID3: LazyLock<Regex> = LazyLock::new(|| {
    compile(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$")
});
/// strfmt's `UUID4Pattern`.
static UUID4: LazyLock<Regex> = LazyLock::new(|| {
    compile(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$")
});
/// strfmt's `UUID5Pattern`.
static UUID5: LazyLock<Regex> = LazyLock::new(|| {
    compile(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$")
});
/// govalidator's `CreditCard`.
static CREDIT_CARD: LazyLock<Regex> = LazyLock::new(|| {
    compile(
        r"^(?:4[0-9]{12}(?:[0-9]{3})?|5[1-5][0-9]{14}|6(?:011|5[0-9][0-9])[0-9]{12}|3[47][0-9]{13}|3(?:0[0-5]|[68][0-9])[0-9]{11}|(?:2131|1800|35[0-9]{3})[0-9]{11})$",
    )
});
/// govalidator's `ISBN10`.
static ISBN10: LazyLock<Regex> = LazyLock::new(|| compile(r"^(?:[0-9]{9}X|[0-9]{10})$"));
/// govalidator's `ISBN13`.
static ISBN13: LazyLock<Regex> = LazyLock::new(|| compile(r"^(?:[0-9]{13})$"));
/// govalidator's `Hexcolor`.
static HEX_COLOR: LazyLock<Regex> =
    LazyLock::new(|| compile(r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$"));
/// govalidator's `RGBcolor`.
static RGB_COLOR: LazyLock<Regex> = LazyLock::new(|| {
    let byte = r"(0|[1-9][0-9]?|1[0-9][0-9]?|2[0-4][0-9]|25[0-5])";
    let space = r"[\t\n\f\r ]*";
    compile(&format!(
        r"^rgb\({space}{byte}{space},{space}{byte}{space},{space}{byte}{space}\)$"
    ))
});
/// govalidator's `Base64`.
static BASE64: LazyLock<Regex> = LazyLock::new(|| {
    compile(r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})$")
});
/// govalidator's `SSN`.
static SSN: LazyLock<Regex> = LazyLock::new(|| compile(r"^[0-9]{3}[- ]?[0-9]{2}[- ]?[0-9]{4}$"));

/// strfmt's `IsHostname`: the pattern, at most 255 bytes, no dot-separated label over 63 bytes.
fn is_hostname(value: &str) -> bool {
    // Go runs the regex first; the length checks are cheaper and the result is the same.
    value.len() <= 255
        && value.split('.').all(|label| label.len() <= 63)
        && HOSTNAME.is_match(value)
}

/// govalidator's `IsISBN(str, 10)`.
fn is_isbn10(value: &str) -> bool {
    let digits = isbn_digits(value);
    if !ISBN10.is_match(&digits) {
        return false;
    }
    let bytes = digits.as_bytes();
    let check_digit = match bytes[9] {
        b'X' => 10,
        digit => u32::from(digit - b'0'),
    };
    let checksum: u32 = (1..=9)
        .zip(bytes)
        .map(|(weight, &digit)| weight * u32::from(digit - b'0'))
        .sum::<u32>()
        + 10 * check_digit;
    checksum.is_multiple_of(11)
}

/// govalidator's `IsISBN(str, 13)`.
fn is_isbn13(value: &str) -> bool {
    let digits = isbn_digits(value);
    if !ISBN13.is_match(&digits) {
        return false;
    }
    let bytes = digits.as_bytes();
    let checksum: u32 = bytes[..12]
        .iter()
        .zip([1, 3].into_iter().cycle())
        .map(|(&digit, factor)| factor * u32::from(digit - b'0'))
        .sum();
    u32::from(bytes[12] - b'0') == (10 - checksum % 10) % 10
}

/// govalidator's ISBN sanitizing: every run of `[\s-]` (Go's ASCII `\s`) removed.
fn isbn_digits(value: &str) -> String {
    value
        .chars()
        .filter(|c| !matches!(c, '\t' | '\n' | '\x0c' | '\r' | ' ' | '-'))
        .collect()
}

/// govalidator's `IsCreditCard`: the pattern on the ASCII digits alone, then Luhn's checksum.
fn is_credit_card(value: &str) -> bool {
    let digits: String = value.chars().filter(char::is_ascii_digit).collect();
    if !CREDIT_CARD.is_match(&digits) {
        return false;
    }
    let sum: u32 = digits
        .bytes()
        .rev()
        .enumerate()
        .map(|(i, digit)| {
            let n = u32::from(digit - b'0');
            match (i % 2 == 1, n * 2) {
                (false, _) => n,
                (true, doubled) if doubled >= 10 => doubled % 10 + 1,
                (true, doubled) => doubled,
            }
        })
        .sum();
    sum.is_multiple_of(10)
}

/// IP and MAC addresses: Go's `net/netip` and `net` parsers, and the Go 1.16 fork that
/// `k8s.io/utils/net` keeps for its `*Sloppy` functions.
mod ip {
    use super::hex_value;

    /// `big` in Go's `net` parsers: numbers at or above it are rejected while being read.
    const BIG: u32 = 0x00FF_FFFF;

    /// What this module needs of the address Go's `netip.ParseAddr` returns.
    pub(super) struct Addr {
        /// Whether it was read as a dotted quad, `Is4`.
        pub(super) is4: bool,
        /// Whether it has a `%zone`.
        zoned: bool,
    }

    /// Which parser: `net/netip` (strict), or the Go 1.16 fork in `k8s.io/utils/net`.
    #[derive(Clone, Copy, PartialEq, Eq)]
    enum Flavor {
        Strict,
        Sloppy,
    }

    /// `netip.ParseAddr`.
    pub(super) fn parse_addr(s: &[u8]) -> Option<Addr> {
        for &c in s {
            match c {
                b'.' => {
                    strict_ipv4(s)?;
                    return Some(Addr {
                        is4: true,
                        zoned: false,
                    });
                }
                b':' => {
                    let (s, zoned) = match s.iter().position(|&c| c == b'%') {
                        // A `%` must introduce a non-empty zone.
                        Some(i) if i + 1 == s.len() => return None,
                        Some(i) => (&s[..i], true),
                        None => (s, false),
                    };
                    ipv6(s, Flavor::Strict)?;
                    return Some(Addr { is4: false, zoned });
                }
                b'%' => return None,
                _ => {}
            }
        }
        None
    }

    /// `net.ParseIP` (Go 1.22 and later): `netip.ParseAddr` without a zone.
    pub(super) fn parse_ip(s: &[u8]) -> Option<Addr> {
        parse_addr(s).filter(|addr| !addr.zoned)
    }

    /// `k8s.io/utils/net.ParseIPSloppy` succeeds.
    pub(super) fn parse_sloppy(s: &[u8]) -> bool {
        match s.iter().find(|&&c| c == b'.' || c == b':') {
            Some(b'.') => sloppy_ipv4(s).is_some(),
            Some(_) => ipv6(s, Flavor::Sloppy).is_some(),
            None => false,
        }
    }

    /// `k8s.io/utils/net.ParseCIDRSloppy` succeeds.
    pub(super) fn parse_cidr_sloppy(s: &[u8]) -> bool {
        let Some(slash) = s.iter().position(|&c| c == b'/') else {
            return false;
        };
        let (addr, mask) = (&s[..slash], &s[slash + 1..]);
        let bits = if sloppy_ipv4(addr).is_some() {
            32
        } else if ipv6(addr, Flavor::Sloppy).is_some() {
            128
        } else {
            return false;
        };
        dtoi(mask).is_some_and(|(n, used)| used == mask.len() && n <= bits)
    }

    /// `net.ParseMAC` succeeds: IEEE 802 MAC-48, EUI-48, EUI-64 or 20-octet InfiniBand
    /// addresses as `xx:xx:…`, `xx-xx-…` or `xxxx.xxxx.…`.
    pub(super) fn is_mac(s: &[u8]) -> bool {
        if s.len() < 14 {
            return false;
        }
        let valid_len = |n: usize| matches!(n, 6 | 8 | 20);
        if s[2] == b':' || s[2] == b'-' {
            let sep = s[2];
            (s.len() + 1).is_multiple_of(3)
                && valid_len((s.len() + 1) / 3)
                && s.chunks(3).all(|group| match group {
                    [a, b] | [a, b, _] if group.len() == 2 || group[2] == sep => {
                        hex_value(*a).is_some() && hex_value(*b).is_some()
                    }
                    _ => false,
                })
        } else if s[4] == b'.' {
            (s.len() + 1).is_multiple_of(5)
                && valid_len(2 * (s.len() + 1) / 5)
                && s.chunks(5).all(|group| match group {
                    [a, b, c, d, rest @ ..] if rest.is_empty() || rest == b"." => {
                        [a, b, c, d].iter().all(|&&x| hex_value(x).is_some())
                    }
                    _ => false,
                })
        } else {
            false
        }
    }

    /// `net/netip`'s `parseIPv4Fields`: four decimal fields without leading zeros, each
    /// at most 255.
    fn strict_ipv4(s: &[u8]) -> Option<[u8; 4]> {
        let mut fields = [0u8; 4];
        let mut val: u32 = 0;
        let mut pos = 0;
        let mut digits = 0;
        for (i, &c) in s.iter().enumerate() {
            if c.is_ascii_digit() {
                if digits == 1 && val == 0 {
                    return None;
                }
                val = val * 10 + u32::from(c - b'0');
                digits += 1;
                if val > 255 {
                    return None;
                }
            } else if c == b'.' {
                if i == 0 || i == s.len() - 1 || s[i - 1] == b'.' || pos == 3 {
                    return None;
                }
                fields[pos] = u8::try_from(val).ok()?;
                pos += 1;
                val = 0;
                digits = 0;
            } else {
                return None;
            }
        }
        if pos < 3 {
            return None;
        }
        fields[3] = u8::try_from(val).ok()?;
        Some(fields)
    }

    /// The Go 1.16 `parseIPv4` kept by `k8s.io/utils/net`: four decimal fields, leading zeros
    /// allowed, each at most 255.
    fn sloppy_ipv4(mut s: &[u8]) -> Option<[u8; 4]> {
        let mut fields = [0u8; 4];
        for (i, field) in fields.iter_mut().enumerate() {
            if s.is_empty() {
                return None;
            }
            if i > 0 {
                s = s.strip_prefix(b".")?;
            }
            let (n, used) = dtoi(s)?;
            *field = u8::try_from(n).ok()?;
            s = &s[used..];
        }
        s.is_empty().then_some(fields)
    }

    /// Go's `net` `dtoi`: the leading decimal number of `s` and how many bytes it used.
    fn dtoi(s: &[u8]) -> Option<(u32, usize)> {
        let mut n: u32 = 0;
        let mut used = 0;
        for &c in s {
            if !c.is_ascii_digit() {
                break;
            }
            n = n * 10 + u32::from(c - b'0');
            if n >= BIG {
                return None;
            }
            used += 1;
        }
        (used > 0).then_some((n, used))
    }

    /// How many bytes the leading hex group of an IPv6 address uses: one to four digits for
    /// netip, any number of digits worth at most `0xffff` for the fork.
    fn hex_group(s: &[u8], flavor: Flavor) -> Option<usize> {
        let mut acc: u32 = 0;
        let mut used = 0;
        for &c in s {
            let Some(digit) = hex_value(c) else {
                break;
            };
            acc = acc * 16 + u32::from(digit);
            let too_long = match flavor {
                Flavor::Strict => used > 3,
                Flavor::Sloppy => acc >= BIG,
            };
            if too_long {
                return None;
            }
            used += 1;
        }
        (used > 0 && acc <= 0xffff).then_some(used)
    }

    /// netip's `parseIPv6` (zone already split off) or the fork's `parseIPv6` succeeds.
    fn ipv6(mut s: &[u8], flavor: Flavor) -> Option<()> {
        // Bytes of the 16 read so far, and where the `::` stands.
        let mut filled = 0;
        let mut ellipsis = None;
        if let Some(rest) = s.strip_prefix(b"::") {
            ellipsis = Some(0);
            s = rest;
            if s.is_empty() {
                return Some(());
            }
        }
        while filled < 16 {
            let used = hex_group(s, flavor)?;
            if s.get(used) == Some(&b'.') {
                // A trailing dotted quad, read from the start of this group.
                if (ellipsis.is_none() && filled != 12) || filled + 4 > 16 {
                    return None;
                }
                match flavor {
                    Flavor::Strict => strict_ipv4(s),
                    Flavor::Sloppy => sloppy_ipv4(s),
                }?;
                s = &[];
                filled += 4;
                break;
            }
            filled += 2;
            s = &s[used..];
            if s.is_empty() {
                break;
            }
            if s[0] != b':' || s.len() == 1 {
                return None;
            }
            s = &s[1..];
            if s[0] == b':' {
                if ellipsis.is_some() {
                    return None;
                }
                ellipsis = Some(filled);
                s = &s[1..];
                if s.is_empty() {
                    break;
                }
            }
        }
        // All read; and a `::` must stand for at least one group, which is then missing.
        (s.is_empty() && (filled < 16) == ellipsis.is_some()).then_some(())
    }
}

/// `net/mail.ParseAddress` (Go 1.24).
mod mail {
    use super::ip;

    /// Go's result for a failed parse (the message does not matter here).
    type Result<T> = std::result::Result<T, ()>;

    /// One rune as Go's `utf8.DecodeRuneInString` reads it.
    enum Rune {
        /// No input left (size 0).
        End,
        /// Invalid UTF-8 (`RuneError` with size 1).
        Invalid,
        /// A character and its size in bytes.
        Char(char, usize),
    }

    /// The first rune of `s`.
    fn decode_rune(s: &[u8]) -> Rune {
        let Some(&first) = s.first() else {
            return Rune::End;
        };
        let size = match first {
            0x00..=0x7f => 1,
            0xc0..=0xdf => 2,
            0xe0..=0xef => 3,
            0xf0..=0xf7 => 4,
            _ => return Rune::Invalid,
        };
        match s
            .get(..size)
            .and_then(|bytes| std::str::from_utf8(bytes).ok())
        {
            Some(text) => text
                .chars()
                .next()
                .map_or(Rune::Invalid, |c| Rune::Char(c, size)),
            None => Rune::Invalid,
        }
    }

    /// RFC 5322 VCHAR, extended to every multi-byte character by RFC 6532.
    fn is_vchar(c: char) -> bool {
        ('!'..='~').contains(&c) || !c.is_ascii()
    }

    /// RFC 5322 atext (with `.` when `dot`).
    fn is_atext(c: char, dot: bool) -> bool {
        match c {
            '.' => dot,
            '(' | ')' | '<' | '>' | '[' | ']' | ':' | ';' | '@' | '\\' | ',' | '"' => false,
            _ => is_vchar(c),
        }
    }

    /// RFC 5322 qtext: VCHAR but `\` and `"`.
    fn is_qtext(c: char) -> bool {
        c != '\\' && c != '"' && is_vchar(c)
    }

    /// RFC 5322 dtext: VCHAR but `[`, `]` and `\`.
    fn is_dtext(c: char) -> bool {
        !matches!(c, '[' | ']' | '\\') && is_vchar(c)
    }

    /// RFC 5234 WSP: a space or a tab.
    fn is_wsp(c: char) -> bool {
        c == ' ' || c == '\t'
    }

    /// `mail.ParseAddress(address)` succeeds (its `Address` is then never empty).
    pub(super) fn is_address(address: &[u8]) -> bool {
        let mut p = Parser { s: address };
        p.parse_address(true) == Ok(1) && p.skip_cfws() && p.s.is_empty()
    }

    /// Go's `addrParser`: the input not read yet.
    struct Parser<'a> {
        s: &'a [u8],
    }

    impl<'a> Parser<'a> {
        /// The next byte.
        fn peek(&self) -> Option<u8> {
            self.s.first().copied()
        }

        /// Consumes `c` if it is next.
        fn consume(&mut self, c: u8) -> bool {
            match self.s.split_first() {
                Some((&first, rest)) if first == c => {
                    self.s = rest;
                    true
                }
                _ => false,
            }
        }

        /// Skips spaces and tabs.
        fn skip_space(&mut self) {
            while let Some(rest) = self
                .s
                .strip_prefix(b" ")
                .or_else(|| self.s.strip_prefix(b"\t"))
            {
                self.s = rest;
            }
        }

        /// Skips spaces and comments; `false` for an unclosed comment.
        fn skip_cfws(&mut self) -> bool {
            self.skip_space();
            while self.consume(b'(') {
                if self.consume_comment().is_none() {
                    return false;
                }
                self.skip_space();
            }
            true
        }

        /// The rest of a comment whose `(` is consumed, or `None` when it is not closed.
        fn consume_comment(&mut self) -> Option<Vec<u8>> {
            let mut depth: usize = 1;
            let mut comment = Vec::new();
            while depth > 0 {
                let &c = self.s.first()?;
                if c == b'\\' && self.s.len() > 1 {
                    self.s = &self.s[1..];
                } else if c == b'(' {
                    depth += 1;
                } else if c == b')' {
                    depth -= 1;
                }
                if depth > 0 {
                    comment.push(self.s[0]);
                }
                self.s = &self.s[1..];
            }
            Some(comment)
        }

        /// Go's `parseAddress`: how many addresses (a group may hold none or several).
        fn parse_address(&mut self, handle_group: bool) -> Result<usize> {
            self.skip_space();
            if self.s.is_empty() {
                return Err(());
            }
            // addr-spec has a more restricted grammar than name-addr, so it is tried first.
            if self.consume_addr_spec().is_ok() {
                self.skip_space();
                if self.peek() == Some(b'(') {
                    self.consume_display_name_comment()?;
                }
                return Ok(1);
            }
            if self.peek() != Some(b'<') {
                self.consume_phrase()?;
            }
            self.skip_space();
            if handle_group && self.consume(b':') {
                return self.consume_group_list();
            }
            if !self.consume(b'<') {
                return Err(());
            }
            self.consume_addr_spec()?;
            if self.consume(b'>') { Ok(1) } else { Err(()) }
        }

        /// Go's `consumeGroupList`, after the `:`.
        fn consume_group_list(&mut self) -> Result<usize> {
            self.skip_space();
            if self.consume(b';') {
                return if self.skip_cfws() { Ok(0) } else { Err(()) };
            }
            let mut count = 0;
            loop {
                self.skip_space();
                count += self.parse_address(false)?;
                if !self.skip_cfws() {
                    return Err(());
                }
                if self.consume(b';') {
                    return if self.skip_cfws() { Ok(count) } else { Err(()) };
                }
                if !self.consume(b',') {
                    return Err(());
                }
            }
        }

        /// Go's `consumeAddrSpec`: `local-part@domain`, the input left as it was on failure.
        fn consume_addr_spec(&mut self) -> Result<()> {
            let orig = self.s;
            let result = self.consume_addr_spec_unrestored();
            if result.is_err() {
                self.s = orig;
            }
            result
        }

        /// [`Self::consume_addr_spec`] without the restoring.
        fn consume_addr_spec_unrestored(&mut self) -> Result<()> {
            self.skip_space();
            match self.peek() {
                None => return Err(()),
                Some(b'"') => {
                    if self.consume_quoted_string()?.is_empty() {
                        return Err(());
                    }
                }
                Some(_) => {
                    self.consume_atom(true, false)?;
                }
            }
            if !self.consume(b'@') {
                return Err(());
            }
            self.skip_space();
            match self.peek() {
                None => Err(()),
                Some(b'[') => self.consume_domain_literal(),
                Some(_) => self.consume_atom(true, false).map(drop),
            }
        }

        /// Go's `consumePhrase`: one or more words (atoms, taken as dot-atoms, or
        /// quoted-strings), comments allowed after the first.
        fn consume_phrase(&mut self) -> Result<()> {
            let mut words = 0;
            loop {
                if words > 0 && !self.skip_cfws() {
                    return Err(());
                }
                self.skip_space();
                if self.s.is_empty() {
                    return Ok(());
                }
                let word = if self.peek() == Some(b'"') {
                    self.consume_quoted_string().map(drop)
                } else {
                    self.consume_atom(true, true).and_then(check_encoded_word)
                };
                if word.is_err() {
                    // Go ignores the error once it has a word.
                    return if words > 0 { Ok(()) } else { Err(()) };
                }
                words += 1;
            }
        }

        /// Go's `consumeQuotedString` at a `"`: the unquoted content.
        fn consume_quoted_string(&mut self) -> Result<String> {
            let mut i = 1;
            let mut content = String::new();
            let mut escaped = false;
            loop {
                let (c, size) = match decode_rune(self.s.get(i..).unwrap_or_default()) {
                    Rune::End | Rune::Invalid => return Err(()),
                    Rune::Char(c, size) => (c, size),
                };
                if escaped {
                    if !is_vchar(c) && !is_wsp(c) {
                        return Err(());
                    }
                    content.push(c);
                    escaped = false;
                } else if is_qtext(c) || is_wsp(c) {
                    content.push(c);
                } else if c == '"' {
                    break;
                } else if c == '\\' {
                    escaped = true;
                } else {
                    return Err(());
                }
                i += size;
            }
            self.s = self.s.get(i + 1..).unwrap_or_default();
            Ok(content)
        }

        /// Go's `consumeAtom`: an atom (a dot-atom when `dot`; without leading, trailing or
        /// double dots unless `permissive`). The input is consumed even when the dots fail.
        fn consume_atom(&mut self, dot: bool, permissive: bool) -> Result<&'a [u8]> {
            let mut i = 0;
            loop {
                match decode_rune(&self.s[i..]) {
                    Rune::Invalid => return Err(()),
                    Rune::Char(c, size) if is_atext(c, dot) => i += size,
                    Rune::End | Rune::Char(..) => break,
                }
            }
            if i == 0 {
                return Err(());
            }
            let (atom, rest) = self.s.split_at(i);
            self.s = rest;
            if !permissive
                && (atom.starts_with(b".")
                    || atom.ends_with(b".")
                    || atom.windows(2).any(|w| w == b".."))
            {
                return Err(());
            }
            Ok(atom)
        }

        /// Go's `consumeDomainLiteral`: `[dtext]`, where the text must be an IP address.
        fn consume_domain_literal(&mut self) -> Result<()> {
            if !self.consume(b'[') {
                return Err(());
            }
            let start = self.s;
            let mut len = 0;
            loop {
                match decode_rune(&self.s[len..]) {
                    Rune::End | Rune::Invalid => return Err(()),
                    Rune::Char(']', _) => break,
                    Rune::Char(c, size) if is_dtext(c) => len += size,
                    Rune::Char(..) => return Err(()),
                }
            }
            self.s = &self.s[len + 1..];
            ip::parse_ip(&start[..len]).map(drop).ok_or(())
        }

        /// Go's `consumeDisplayNameComment`: a comment after an addr-spec, whose
        /// space-separated words are decoded as RFC 2047 encoded-words.
        fn consume_display_name_comment(&mut self) -> Result<()> {
            if !self.consume(b'(') {
                return Err(());
            }
            let comment = self.consume_comment().ok_or(())?;
            comment
                .split(|&c| c == b' ' || c == b'\t')
                .filter(|word| !word.is_empty())
                .try_for_each(check_encoded_word)
        }
    }

    /// Go's `decodeRFC2047Word` fails only when `word` is a valid encoded-word whose
    /// charset the default decoder does not know (malformed words are left as they are).
    fn check_encoded_word(word: &[u8]) -> Result<()> {
        let Some(inner) = word
            .strip_prefix(b"=?")
            .and_then(|w| w.strip_suffix(b"?="))
            .filter(|_| word.len() >= 8 && word.iter().filter(|&&c| c == b'?').count() == 4)
        else {
            return Ok(());
        };
        let mut parts = inner.splitn(3, |&c| c == b'?');
        let (Some(charset), Some(encoding), Some(text)) =
            (parts.next(), parts.next(), parts.next())
        else {
            return Ok(());
        };
        let decodes = match encoding {
            b"B" | b"b" => std_base64_decodes(text),
            b"Q" | b"q" => q_decodes(text),
            _ => false,
        };
        if charset.is_empty() || !decodes {
            return Ok(());
        }
        let known = ["utf-8", "iso-8859-1", "us-ascii"]
            .iter()
            .any(|name| equal_fold(charset, name));
        if known { Ok(()) } else { Err(()) }
    }

    /// Go's `strings.EqualFold(charset, name)` for an ASCII lowercase `name`: besides ASCII
    /// case, `ſ` (U+017F) folds to `s` and the Kelvin sign (U+212A) to `k`.
    fn equal_fold(charset: &[u8], name: &str) -> bool {
        let Ok(charset) = std::str::from_utf8(charset) else {
            return false;
        };
        let folded = charset.chars().map(|c| match c {
            'ſ' => 's',
            '\u{212a}' => 'k',
            c => c.to_ascii_lowercase(),
        });
        folded.eq(name.chars())
    }

    /// Go's `base64.StdEncoding.DecodeString` succeeds: the standard alphabet in quanta of
    /// four, the last one perhaps padded with `=`; `\r` and `\n` ignored.
    fn std_base64_decodes(text: &[u8]) -> bool {
        let text: Vec<u8> = text
            .iter()
            .copied()
            .filter(|&c| c != b'\r' && c != b'\n')
            .collect();
        if !text.len().is_multiple_of(4) {
            return false;
        }
        let alphabet = |c: &u8| c.is_ascii_alphanumeric() || *c == b'+' || *c == b'/';
        let body = match text.len() {
            0 => return true,
            n => &text[..n - 4],
        };
        let last = &text[text.len() - 4..];
        body.iter().all(alphabet)
            && match last {
                [a, b, b'=', b'='] => alphabet(a) && alphabet(b),
                [a, b, c, b'='] => alphabet(a) && alphabet(b) && alphabet(c),
                _ => last.iter().all(alphabet),
            }
    }

    /// Go's `mime` `qDecode` succeeds: `=XX` escapes, `_`, printable ASCII, tabs and newlines.
    fn q_decodes(text: &[u8]) -> bool {
        let mut i = 0;
        while let Some(&c) = text.get(i) {
            match c {
                b'=' => {
                    let escape = text.get(i + 1..i + 3);
                    if !escape.is_some_and(|hex| hex.iter().all(u8::is_ascii_hexdigit)) {
                        return false;
                    }
                    i += 3;
                }
                b' '..=b'~' | b'\n' | b'\r' | b'\t' => i += 1,
                _ => return false,
            }
        }
        true
    }
}

/// `date`, `datetime` and `duration`.
mod times {
    use std::sync::LazyLock;

    use regex::Regex;

    use super::compile;

    /// strfmt's `DateTimePattern`, matched against text Go has lowercased (so `[zZ]` here).
    static TIME: LazyLock<Regex> = LazyLock::new(|| {
        compile(r"^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?([zZ]|([+-][0-9]{2}:[0-9]{2}))$")
    });

    /// strfmt's `durationMatcher`, with Go's ASCII `\d` and `\s`.
    static DURATION: LazyLock<Regex> =
        LazyLock::new(|| compile(r"([0-9]+)[\t\n\x0c\r ]*([A-Za-zµ]+)"));

    /// strfmt's `timeUnits`: the last spelling of each unit is also a prefix (`hours`).
    const UNITS: [&[&str]; 8] = [
        &["ns", "nano"],
        &["us", "µs", "micro"],
        &["ms", "milli"],
        &["s", "sec"],
        &["m", "min"],
        &["h", "hr", "hour"],
        &["d", "day"],
        &["w", "wk", "week"],
    ];

    /// strfmt's `IsDate`: `time.Parse("2006-01-02", s)` succeeds.
    pub(super) fn is_date(s: &[u8]) -> bool {
        let [y1, y2, y3, y4, b'-', m1, m2, b'-', d1, d2] = *s else {
            return false;
        };
        let digits = [y1, y2, y3, y4, m1, m2, d1, d2];
        if !digits.iter().all(u8::is_ascii_digit) {
            return false;
        }
        let number = |digits: &[u8]| {
            digits
                .iter()
                .fold(0u32, |n, &d| n * 10 + u32::from(d - b'0'))
        };
        let (year, month, day) = (
            number(&digits[..4]),
            number(&digits[4..6]),
            number(&digits[6..]),
        );
        let leap =
            year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400));
        let days = match month {
            1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
            4 | 6 | 9 | 11 => 30,
            2 if leap => 29,
            2 => 28,
            _ => return false,
        };
        (1..=days).contains(&day)
    }

    /// strfmt's `IsDateTime`: lowercased and split at each `t`, the first piece a date, the
    /// second `hh:mm:ss[.frac](z|±hh:mm)` with the time in range; other pieces ignored.
    pub(super) fn is_date_time(s: &str) -> bool {
        // Only `T` and `t` lowercase to `t`, and lowercasing maps each character to one.
        let mut pieces = s.split(['t', 'T']);
        let (Some(date), Some(time)) = (pieces.next(), pieces.next()) else {
            return false;
        };
        if !is_date(date.as_bytes()) {
            return false;
        }
        TIME.captures(time).is_some_and(|m| {
            let field = |i: usize| m.get(i).map_or("", |f| f.as_str());
            field(1) <= "23" && field(2) <= "59" && field(3) <= "59"
        })
    }

    /// strfmt's `ParseDuration` succeeds: Go's `time.ParseDuration`, else at least one
    /// `number unit` match of its own pattern with a known unit (and no number too large for
    /// `strconv.Atoi`).
    pub(super) fn is_duration(s: &str) -> bool {
        if go_parse_duration(s.as_bytes()) {
            return true;
        }
        let mut known = false;
        for m in DURATION.captures_iter(s) {
            let (Some(number), Some(unit)) = (m.get(1), m.get(2)) else {
                continue;
            };
            if number.as_str().parse::<i64>().is_err() {
                return false;
            }
            let unit = unit.as_str().to_ascii_lowercase();
            known |= UNITS.iter().any(|spellings| {
                let last = spellings.len() - 1;
                spellings.iter().enumerate().any(|(i, &spelling)| {
                    unit == spelling || (i == last && unit.starts_with(spelling))
                })
            });
        }
        known
    }

    /// Go's `time.ParseDuration(s)` succeeds.
    fn go_parse_duration(s: &[u8]) -> bool {
        const LIMIT: u64 = 1 << 63;
        let (neg, mut s) = match s.split_first() {
            Some((b'-', rest)) => (true, rest),
            Some((b'+', rest)) => (false, rest),
            _ => (false, s),
        };
        if s == b"0" {
            return true;
        }
        if s.is_empty() {
            return false;
        }
        let mut total: u64 = 0;
        while !s.is_empty() {
            if !(s[0] == b'.' || s[0].is_ascii_digit()) {
                return false;
            }
            let Some((mut value, rest)) = leading_int(s) else {
                return false;
            };
            let before_point = rest.len() != s.len();
            s = rest;
            let (fraction, scale, after_point) = match s.strip_prefix(b".") {
                Some(rest) => {
                    let (fraction, scale, after) = leading_fraction(rest);
                    let after_point = after.len() != rest.len();
                    s = after;
                    (fraction, scale, after_point)
                }
                None => (0, 1.0, false),
            };
            if !before_point && !after_point {
                return false;
            }
            let unit_len = s
                .iter()
                .position(|&c| c == b'.' || c.is_ascii_digit())
                .unwrap_or(s.len());
            let (unit, rest) = s.split_at(unit_len);
            s = rest;
            let unit: u64 = match unit {
                b"ns" => 1,
                // `µs` is U+00B5 (micro sign), `μs` U+03BC (Greek mu).
                b"us" | b"\xc2\xb5s" | b"\xce\xbcs" => 1_000,
                b"ms" => 1_000_000,
                b"s" => 1_000_000_000,
                b"m" => 60_000_000_000,
                b"h" => 3_600_000_000_000,
                _ => return false,
            };
            if value > LIMIT / unit {
                return false;
            }
            value *= unit;
            if fraction > 0 {
                // As Go: in float64, truncated (the product is below one unit).
                let part = (fraction as f64 * (unit as f64 / scale)) as u64;
                value += part;
                if value > LIMIT {
                    return false;
                }
            }
            // Go's uint64 addition wraps; both terms are at most 2^63.
            total = total.wrapping_add(value);
            if total > LIMIT {
                return false;
            }
        }
        neg || total < LIMIT
    }

    /// Go's `leadingInt`: the leading digits of `s` as a number up to 2^63, and the rest.
    fn leading_int(s: &[u8]) -> Option<(u64, &[u8])> {
        let mut x: u64 = 0;
        let mut used = 0;
        for &c in s {
            if !c.is_ascii_digit() {
                break;
            }
            if x > (1 << 63) / 10 {
                return None;
            }
            x = x * 10 + u64::from(c - b'0');
            if x > 1 << 63 {
                return None;
            }
            used += 1;
        }
        Some((x, &s[used..]))
    }

    /// Go's `leadingFraction`: the leading digits of `s` as a fraction `x / scale` (precision
    /// dropped past 2^63), and the rest.
    fn leading_fraction(s: &[u8]) -> (u64, f64, &[u8]) {
        let mut x: u64 = 0;
        let mut scale = 1.0;
        let mut overflow = false;
        let mut used = 0;
        for &c in s {
            if !c.is_ascii_digit() {
                break;
            }
            used += 1;
            if overflow {
                continue;
            }
            if x > ((1 << 63) - 1) / 10 {
                overflow = true;
                continue;
            }
            let y = x * 10 + u64::from(c - b'0');
            if y > 1 << 63 {
                overflow = true;
                continue;
            }
            x = y;
            scale *= 10.0;
        }
        (x, scale, &s[used..])
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::check;

    /// Every format kube-apiserver checks, as normalized.
    const FORMATS: [&str; 24] = [
        "bsonobjectid",
        "uri",
        "email",
        "hostname",
        "ipv4",
        "ipv6",
        "cidr",
        "mac",
        "uuid",
        "uuid3",
        "uuid4",
        "uuid5",
        "isbn",
        "isbn10",
        "isbn13",
        "creditcard",
        "ssn",
        "hexcolor",
        "rgbcolor",
        "byte",
        "password",
        "date",
        "duration",
        "datetime",
    ];

    /// Asserts that each of `valid` passes and each of `invalid` fails `format`.
    fn assert_format(format: &str, valid: &[&str], invalid: &[&str]) {
        for value in valid {
            assert_eq!(
                check(format, value),
                Some(true),
                "{format}: {value:?} should be valid"
            );
        }
        for value in invalid {
            assert_eq!(
                check(format, value),
                Some(false),
                "{format}: {value:?} should be invalid"
            );
        }
    }

    #[test]
    fn names_are_normalized_by_removing_dashes_only() {
        assert_eq!(check("date-time", "2014-12-15T19:30:20Z"), Some(true));
        assert_eq!(check("date-time", "2014-12-15"), Some(false));
        assert_eq!(check("-u-r-i-", "/x"), Some(true));
        assert_eq!(check("uuid-4", "not-a-uuid"), Some(false));
        // Case is kept: `DateTime` is not `datetime`, so it is not checked.
        assert_eq!(check("DateTime", "garbage"), None);
        assert_eq!(check("date_time", "garbage"), None);
    }

    #[test]
    fn formats_kube_apiserver_does_not_check_are_skipped() {
        for format in [
            "",
            "int32",
            "int64",
            "float",
            "double",
            "binary",
            "k8s-short-name",
            "ip",
            "url",
        ] {
            assert_eq!(check(format, "garbage"), None, "{format}");
        }
        for format in FORMATS {
            assert!(check(format, "").is_some(), "{format}");
        }
    }

    #[test]
    fn bsonobjectid() {
        assert_format(
            "bsonobjectid",
            &[
                "507f1f77bcf86cd799439011",
                "507F1F77BCF86CD799439011",
                "000000000000000000000000",
            ],
            &[
                "",
                "507f1f77bcf86cd79943901",
                "507f1f77bcf86cd7994390111",
                "507f1f77bcf86cd79943901g",
                "507f1f77bcf86cd79943901١",
            ],
        );
    }

    #[test]
    fn uri() {
        // govalidator's TestIsRequestURI, and strfmt's TestFormatURI.
        assert_format(
            "uri",
            &[
                "http://somewhere.com",
                "http://foo.bar/#com",
                "http://foobar.com",
                "https://foobar.com",
                "http://foobar.coffee/",
                "http://foobar.中文网/",
                "http://foobar.org:8080/",
                "ftp://foobar.ru/",
                "http://user:pass@www.foobar.com/",
                "http://127.0.0.1/",
                "http://duckduckgo.com/?q=%2F",
                "http://localhost:3000/",
                "http://foobar.com/?foo=bar#baz=qux",
                "http://foobar.com?foo=bar",
                "http://www.xn--froschgrn-x9a.net/",
                "xyz://foobar.com",
                "rtmp://foobar.com",
                "http://www.foo_bar.com/",
                "http://foobar.com/t$-_.+!*\\'(),",
                "http://www.foobar.com/~foobar",
                "http://www.-foobar.com/",
                "mailto:someone@example.com",
                "irc://irc.server.org/channel",
                "/abs/test/dir",
                // Beyond upstream's tables, from Go's parser.
                "*",
                "/a b/%41",
                "http://[::1]:8080/x",
                "http://[fe80::1%25en0]/",
                "http://[::ffff:1.2.3.4]/",
                "http://host:99999/",
                "http://host:/",
                "http://%C3%A9.com/",
                "urn:%zz",
                "http:opaque path",
                "http://u@h@x.com/",
                "http:///path",
                "//no-scheme-authority/is/a/path",
                "/?%zz",
            ],
            &[
                "",
                "somewhere.com",
                "foobar.com",
                "invalid.",
                ".com",
                "./rel/test/dir",
                ":x",
                "1http://x.com",
                "http://x.com/\n",
                "http://x.com/\u{7f}",
                "/a%zz",
                "/a%4",
                "http://host:8x/",
                "http://ho st/",
                "http://ex%41mple.com/",
                "http://a{b}/",
                "http://[::1/",
                "http://[1.2.3.4]/",
                "http://[v1.x]/",
                "http://[::1]x/",
                "http://[fe80::1%en0]/",
                "http://ü@example.com/",
                "http://us er@example.com/",
                "http://u%zz@example.com/",
                "http://example.com/%",
            ],
        );
    }

    #[test]
    fn email() {
        // strfmt's TestFormatEmail.
        assert_format(
            "email",
            &[
                "somebody@somewhere.com",
                "blah@gmail.com",
                "test@d.verylongtoplevel",
                "email+tag@gmail.com",
                r#"" "@example.com"#,
                r#""Abc\@def"@example.com"#,
                r#""Fred Bloggs"@example.com"#,
                r#""Joe\\Blow"@example.com"#,
                r#""Abc@def"@example.com"#,
                "customer/department=shipping@example.com",
                "$A12345@example.com",
                "!def!xyz%abc@example.com",
                "_somename@example.com",
                "!#$%&'*+-/=?^_`{}|~@example.com",
                "Miles.O'Brian@example.com",
                "postmaster@☁→❄→☃→☀→☺→☂→☹→✝.ws",
                "root@localhost",
                "john@com",
                "api@piston.ninja",
                // Go's net/mail test addresses.
                "John Doe <jdoe@machine.example>",
                r#""Joe Q. Public" <john.q.public@example.com>"#,
                "  a@b.c  ",
                "a@b.c (a comment)",
                "Group: a@b.c;",
                "<jdoe@[192.168.0.1]>",
                "jdoe@[::1]",
                "=?utf-8?q?J=C3=B6rg?= <j@example.com>",
                "a@b.c (=?utf-8?q?J=C3=B6rg?=)",
                "jdoe@ machine.example",
            ],
            &[
                "",
                "somebody@somewhere@com",
                "john.doe",
                "john.doe@",
                "John Doe@foo.bar",
                ".a@b.c",
                "a.@b.c",
                "a..b@c.d",
                "a@b..c",
                r#"""@example.com"#,
                "a @b.c",
                "John Doe <jdoe@machine.example",
                "Group: a@b.c, d@e.f;",
                "Group: ;",
                " group: null@example.com; (asd",
                "(John) Doe <jdoe@machine.example>",
                "<jdoe@[[192.168.0.1]>",
                "<jdoe@[192.168.0.1>",
                "<jdoe@[256.0.0.1]>",
                "jdoe@[fe80::1%eth0]",
                "a@b.c (unclosed",
                "=?koi8-r?q?x?= <j@example.com>",
                "a@b.c (=?koi8-r?b?QQ==?=)",
            ],
        );
    }

    #[test]
    fn hostname() {
        // strfmt's TestFormatHostname.
        assert_format(
            "hostname",
            &[
                "somewhere.com",
                "888.com",
                "a.com",
                "a.b.com",
                "a.b.c.com",
                "a.b.c.d.com",
                "a.b.c.d.e.com",
                "1.com",
                "1.2.com",
                "1.2.3.com",
                "1.2.3.4.com",
                "99.domain.com",
                "99.99.domain.com",
                "1wwworg.example.com",
                "1000wwworg.example.com",
                "xn--bcher-kva.example.com",
                "xn-80ak6aa92e.co",
                "xn-80ak6aa92e.com",
                "xn--ls8h.la",
                "☁→❄→☃→☀→☺→☂→☹→✝.ws",
                "www.example.onion",
                "www.example.ôlà",
                "ôlà.ôlà",
                "ôlà.ôlà.ôlà",
                "ex$ample",
                "localhost",
                "example",
                "x",
                "x-y",
                "a.b.c.dot",
                "www.example.org",
                "a.b.c.d.e.f.g.dot",
                "ex=ample.com",
                "<foo>",
                "www.example-hyphenated.org",
                "www.詹姆斯.org",
                "www.élégigôö.org",
                "www.詹姆斯.london",
            ],
            &[
                "somewhere.com!",
                "user@email.domain",
                "1.1.1.1",
                &"a".repeat(256),
                &format!("x.y.{}", "a".repeat(64)),
                "www.example-.org",
                "www.--example.org",
                "-www.example.org",
                "www-.example.org",
                "www.d-.org",
                "www.-d.org",
                "www-",
                "-www",
                "www.ex ample.org",
                "_www.example.org",
                "www.ex;ample.org",
                "www.example_underscored.org",
                "www.詹姆斯.x",
                "a.b.c.d",
                "-xyz",
                "xyz-",
                "x.",
                "a.b.c.dot-",
                "a.b.c.é;ö",
                "",
            ],
        );
    }

    #[test]
    fn ipv4() {
        // strfmt's TestFormatIPv4 (leading zeros are tolerated, as before Go 1.17).
        assert_format(
            "ipv4",
            &[
                "192.168.254.1",
                "127.0.0.1",
                "192.168.1.1",
                "192.168.1.01",
                "000.0000.00.00",
                "::ffff:1.2.3.4",
            ],
            &[
                "198.168.254.2.2",
                "",
                "1.2.3",
                "256.1.1.1",
                "1.2.3.4.",
                "::1",
                "1.2.3.4/8",
                "1.2.3.-4",
            ],
        );
    }

    #[test]
    fn ipv6() {
        // strfmt's TestFormatIPv6 and govalidator's TestIIsIPv6.
        assert_format(
            "ipv6",
            &[
                "::1",
                "::2",
                "2001:db8:0000:1:1:1:1:1",
                "::",
                "1::",
                "::ffff:1.2.3.4",
                "1:2:3:4:5:6:1.2.3.4",
                "FE80::abcd",
            ],
            &[
                "",
                "127.0.0.1",
                "0.0.0.0",
                "255.255.255.255",
                "1.2.3.4",
                "300.0.0.0",
                "fe80::1%eth0",
                "00001::",
                "1:2:3:4:5:6:7:8:9",
                "1:2:3:4:5:6:7",
                "1::2::3",
                "1:2:3:4:5:6:7::8",
                "::ffff:01.2.3.4",
                ":1::",
                "1:",
                "[::1]",
            ],
        );
    }

    #[test]
    fn cidr() {
        // strfmt's TestFormatCIDR.
        assert_format(
            "cidr",
            &[
                "192.168.254.1/24",
                "192.0.2.1/24",
                "192.0.02.1/24",
                "2001:db8:a0b:12f0::1/32",
                "0.0.0.0/0",
                "::/128",
                "10.0.0.0/008",
                "00001::/64",
            ],
            &[
                "198.168.254.2",
                "2001:db8:a0b:12f0::1",
                "1.2.3.4/33",
                "::/129",
                "1.2.3.4/",
                "1.2.3.4/+8",
                "/8",
                "1.2.3.4/8/8",
            ],
        );
    }

    #[test]
    fn mac() {
        // strfmt's TestFormatMAC and govalidator's TestIsMAC.
        assert_format(
            "mac",
            &[
                "01:02:03:04:05:06",
                "06:05:04:03:02:01",
                "3D:F2:C9:A6:B3:4F",
                "3d-f2-c9-a6-b3-4f",
                "0102.0304.0506",
                "01:02:03:04:05:06:07:08",
                "00:00:00:00:fe:80:00:00:00:00:00:00:02:00:5e:10:00:00:00:01",
            ],
            &[
                "01:02:03:04:05",
                "3D-F2-C9-A6-B3:4F",
                "123",
                "",
                "abacaba",
                "01:02:03:04:05:0g",
                "01:02:03:04:05:06:07",
                "0102.0304.05067",
            ],
        );
    }

    #[test]
    fn uuids() {
        // What strfmt's tests generate: v3 and v5 UUIDs of "somewhere.com" in the URL
        // namespace, and a random v4.
        let v3 = "fba4f6bb-77ab-3976-8146-0a48a348c416";
        let v4 = "f47ac10b-58cc-4372-a567-0e02b2c3d479";
        let v5 = "b1690c37-3ee8-5346-b699-8c23cac63839";
        assert_format(
            "uuid",
            &[v3, v4, v5, "F47AC10B58CC4372A5670E02B2C3D479"],
            &["not-a-uuid", "", "f47ac10b-58cc-4372-a567-0e02b2c3d47"],
        );
        assert_format("uuid3", &[v3], &["not-a-uuid", v4, v5]);
        assert_format(
            "uuid4",
            &[v4, "F47AC10B-58CC-4372-B567-0E02B2C3D479"],
            &["not-a-uuid", v3, v5, "f47ac10b-58cc-4372-c567-0e02b2c3d479"],
        );
        assert_format("uuid5", &[v5], &["not-a-uuid", v3, v4]);
    }

    #[test]
    fn isbn() {
        // govalidator's TestIsISBN and strfmt's TestFormatISBN*.
        let isbn10 = [
            "0321751043",
            "3836221195",
            "1-61729-085-8",
            "3 423 21412 0",
            "3 401 01319 X",
        ];
        let isbn13 = [
            "978-0321751041",
            "9784873113685",
            "978-4-87311-368-5",
            "978 3401013190",
            "978-3-8362-2119-1",
        ];
        assert_format(
            "isbn10",
            &isbn10,
            &[
                "",
                "foo",
                "836217463",
                "3423214121",
                "978-3836221191",
                "3-423-21412-1",
                "3 423 21412 1",
            ],
        );
        assert_format(
            "isbn13",
            &isbn13,
            &[
                "",
                "foo",
                "978-0321751042",
                "3-8362-2119-5",
                "01234567890ab",
                "978 3 8362 2119 0",
            ],
        );
        assert_format(
            "isbn",
            &[isbn10, isbn13].concat(),
            &["", "foo", "836217463", "978-0321751042"],
        );
    }

    #[test]
    fn creditcard() {
        // govalidator's TestIsCreditCard and strfmt's TestFormatCreditCard.
        assert_format(
            "creditcard",
            &[
                "4111-1111-1111-1111",
                "4012-8888-8888-1881",
                "4220855426222389",
                "4220 8554 2622 2389",
                "4220-8554-2622-2389",
                "5139288802098206",
                "374953669708156",
                "6011464355444102",
                "3548209662790989",
            ],
            &[
                "",
                "credit card",
                "9999-9999-9999-999",
                "4220855426213389",
                "30190239451016",
                "6521674451993089",
                "2204151414444676",
                "624356436327468104",
            ],
        );
    }

    #[test]
    fn ssn() {
        // govalidator's TestIsSSN and strfmt's TestFormatSSN.
        assert_format(
            "ssn",
            &[
                "111-11-1111",
                "999 99 9999",
                "191 60 2869",
                "191-60-2869",
                "191-60 2869",
            ],
            &[
                "",
                "999 99 999",
                "00-90-8787",
                "66690-76",
                "191602869",
                "191--602869",
                "19a-60-2869",
            ],
        );
    }

    #[test]
    fn colors() {
        // govalidator's TestIsHexcolor and TestIsRGBcolor, and strfmt's tests.
        assert_format(
            "hexcolor",
            &["#FFFFFF", "#000000", "CCccCC", "fff", "#f00"],
            &["", "#fffffffz", "#ff", "fff0", "#ff12FG"],
        );
        assert_format(
            "rgbcolor",
            &[
                "rgb(255,255,255)",
                "rgb(0,0,0)",
                "rgb(0,31,255)",
                "rgb(0,  31, 255)",
                "rgb( 1 ,\t2 , 3 )",
            ],
            &[
                "",
                "rgb(300,0,0)",
                "rgb(1,349,275)",
                "rgb(01,31,255)",
                "rgb(0.6,31,255)",
                "rgba(0,31,255)",
                "rgb(0,0,0) ",
            ],
        );
    }

    #[test]
    fn byte() {
        // strfmt's TestFormatBase64 and govalidator's TestIsBase64.
        assert_format(
            "byte",
            &[
                "VGhpcyBpcyBhIGJ5dGUgYXJyYXkgd2l0aCB1bnByaW50YWJsZSBjaGFycywgYnV0IGl0IGFsc28gaXNu",
                "TG9yZW0gaXBzdW0gZG9sb3Igc2l0IGFtZXQsIGNvbnNlY3RldHVyIGFkaXBpc2NpbmcgZWxpdC4=",
                "Vml2YW11cyBmZXJtZW50dW0gc2VtcGVyIHBvcnRhLg==",
                "U3VzcGVuZGlzc2UgbGVjdHVzIGxlbw==",
                "ZWxpemFiZXRocG9zZXk=",
                "a+/=",
            ],
            &[
                "ZWxpemFiZXRocG9zZXk",
                "12345",
                "",
                "Vml2YW11cyBmZXJtZtesting123",
                "ZW==ZW==",
                "ZW-_",
                "ZWxp\nemFi",
                "====",
            ],
        );
    }

    #[test]
    fn password() {
        assert_format(
            "password",
            &["super secret stuff here", "even more secret", "", "\u{0}"],
            &[],
        );
    }

    #[test]
    fn date() {
        // strfmt's TestDate_IsDate.
        assert_format(
            "date",
            &[
                "2017-12-22",
                "2014-12-15",
                "2000-02-29",
                "2400-02-29",
                "0000-02-29",
                "9999-12-31",
            ],
            &[
                "2017-1-1",
                "17-13-22",
                "2017-02-29",
                "1900-02-29",
                "2100-02-29",
                "2017-13-22",
                "2017-12-32",
                "20171-12-32",
                "YYYY-MM-DD",
                "20-17-2017",
                "2017-12-22T01:02:03Z",
                "1972/01/01",
                "2017-00-10",
                "2017-04-31",
                "2017-04-00",
                "",
                "٢٠١٧-12-22",
            ],
        );
    }

    #[test]
    fn duration() {
        // strfmt's TestDurationParser, TestIsDuration_Caveats and TestIsDuration_Failed.
        assert_format(
            "duration",
            &[
                "1ns",
                "1us",
                "1µs",
                "1ms",
                "1s",
                "1m",
                "1h",
                "1hr",
                "1d",
                "1w",
                "1wk",
                "1nanoseconds",
                "1nanos",
                "1microseconds",
                "1micros",
                "1millis",
                "1milliseconds",
                "1second",
                "1sec",
                "1min",
                "1minute",
                "1hour",
                "1day",
                "1week",
                "1  ns",
                "1  us",
                "1  µs",
                "1  ms",
                "1  s",
                "1  m",
                "1  h",
                "1  hr",
                "1  d",
                "1  w",
                "1  wk",
                "45 weeks",
                "45 weekz",
                "12 hours",
                "12 minutes",
                // Go's time.ParseDuration.
                "0",
                "-0",
                "+5s",
                "-1.5h",
                "1h30m",
                ".5s",
                "5.s",
                "1μs",
                "2562047h47m16.854775807s",
                "-2562047h47m16.854775808s",
                // The fallback finds a match anywhere.
                "in 3 days",
                "5 SECONDS",
                // Too large for Go's parser, not for the fallback (which finds `854775808s`).
                "9999999999999h",
                "2562047h47m16.854775808s",
                "..5s",
            ],
            &[
                "45 wekk",
                "45 weeekks",
                "12 phours",
                "",
                "5",
                "s",
                "-",
                "1.5",
                ".s",
                "1x",
                "1 mo",
                "99999999999999999999 days",
                "1 day 99999999999999999999 days",
                "1μ s",
            ],
        );
    }

    #[test]
    fn datetime() {
        // strfmt's TestParseDateTime_fullCycle and TestDateTime_IsDateTime_errorCases.
        assert_format(
            "datetime",
            &[
                "2014-12-15T08:00:00.000Z",
                "2011-08-18T19:03:37.000+01:00",
                "2014-12-15T19:30:20.000Z",
                "0001-01-01T00:00:00.000Z",
                "2014-12-15T19:30:20Z",
                "2011-08-18T19:03:37.000000000+01:00",
                "2014-12-15t19:30:20z",
                "2014-12-15T23:59:59-99:99",
                "2014-12-15T19:30:20x5Z",
                "2014-12-15T19:30:20ZTanything",
            ],
            &[
                "zor",
                "zorg",
                "zorgTx",
                "1972-12-31Tx",
                "1972-12-31T24:40:00.000Z",
                "1972-12-31T23:63:00.000Z",
                "1972-12-31T23:59:60.000Z",
                "2014-12-15T08:00:00",
                "2014-12-15",
                "2014-02-30T08:00:00Z",
                "2014-12-15T08:00:00.Z",
                "2014-12-15T8:00:00Z",
                "2014-12-15 08:00:00Z",
                "",
            ],
        );
    }

    proptest! {
        #[test]
        fn check_never_panics(value in any::<String>(), pick in 0..FORMATS.len()) {
            let valid = check(FORMATS[pick], &value);
            prop_assert!(valid.is_some());
            // `password` accepts anything; the dashed spelling is the same check.
            prop_assert_eq!(check(&format!("-{}", FORMATS[pick]), &value), valid);
        }

        #[test]
        fn check_never_panics_on_format_like_text(
            value in r"[0-9a-fA-F:.%/@\[\]<>()\x22\\ ,;=?#tTzZ+-]{0,40}",
            pick in 0..FORMATS.len(),
        ) {
            prop_assert!(check(FORMATS[pick], &value).is_some());
        }
    }

    #[test]
    fn huge_values_are_handled() {
        let huge = "1".repeat(1 << 20);
        for format in FORMATS {
            assert!(check(format, &huge).is_some(), "{format}");
        }
        assert_eq!(check("duration", &format!("{huge}s")), Some(false));
        assert_eq!(check("byte", &"A".repeat(1 << 20)), Some(true));
        assert_eq!(
            check("email", &format!("a@b.c {}", "(".repeat(1 << 16))),
            Some(false)
        );
        assert_eq!(
            check(
                "email",
                &format!("a@b.c ({}x{})", "(".repeat(1 << 16), ")".repeat(1 << 16))
            ),
            Some(true)
        );
    }
}
