//! kube's CEL IP and CIDR libraries (`k8s.io/apiserver/pkg/cel/library/ip.go`, `cidr.go`, in
//! the base environment since 1.30): the `net.IP` and `net.CIDR` types.
//!
//! ## Guarantees
//! - `ip(s)` and `isIP(s)` read an IPv4 or IPv6 address as Go's `netip.ParseAddr` (no leading
//!   zeros in IPv4 fields) and refuse a zone (`IP address "fe80::1%eth0" with zone value is not
//!   allowed`) and an IPv4-mapped IPv6 address (`IPv4-mapped IPv6 address "::ffff:1.2.3.4" is
//!   not allowed`), as kube's `parseIPAddr`; `ip.isCanonical(s)` is whether `s` is the form Go's
//!   `Addr.String` writes (lower-case hex, the longest run of zero groups compressed).
//! - `<IP>.family()` (`4` or `6`), `.isUnspecified()`, `.isLoopback()`,
//!   `.isLinkLocalMulticast()`, `.isLinkLocalUnicast()`, `.isGlobalUnicast()` as Go's `netip`.
//! - `cidr(s)` and `isCIDR(s)` read a prefix as Go's `netip.ParsePrefix` (an address, `/`, a
//!   length in decimal without leading zeros that fits the family; the address's bits past the
//!   length kept), without an IPv4-mapped address; `<CIDR>.containsIP(ip or string)`,
//!   `.containsCIDR(cidr or string)`, `.ip()`, `.masked()`, `.prefixLength()`.
//! - `string(ip)` and `string(cidr)` give the canonical text; two IPs (two CIDRs) are `==` when
//!   they are the same address (prefix); `net.IP` and `net.CIDR` name the types
//!   (`type(ip(s)) == net.IP`), as kube declares them.
//! - The methods cost a constant in the expression's bound; what reads a string (`ip()`,
//!   `cidr()`, `isIP()`, `isCIDR()`, `ip.isCanonical()`, `containsIP`/`containsCIDR` of a
//!   string) a tenth per byte of it, as any string function.
//! - A text that is not an address fails with kube's prefix and Go's `netip.ParseAddr` error,
//!   which names the first thing it found wrong (`IP Address "1.2.3.256" parse error during
//!   conversion from string: ParseAddr("1.2.3.256"): IPv4 field has value >255`; the parse is
//!   a port of Go's).

use std::net::IpAddr;

use cel::common::functions::Function;
use cel::common::types::{CelBool, CelInt, CelString, STRING_TYPE, Type};
use cel::common::value::{CowVal, Val};
use cel::{DeclarationError, Env, ExecutionError};
use watchkeeper_core::gotext::go_quote;

use super::library::{one, opaque_val, string, two};

const IP: Type = Type::new_unspecified_type("net.IP");
static IP_TYPE: Type = IP;
const CIDR: Type = Type::new_unspecified_type("net.CIDR");
static CIDR_TYPE: Type = CIDR;

/// The methods of an IP or a CIDR that read no string, for the cost bound: each costs a
/// constant (the others cost a tenth per byte of their operands, as any string function).
pub(crate) const FUNCTIONS: [&str; 8] = [
    "family",
    "isUnspecified",
    "isLoopback",
    "isLinkLocalMulticast",
    "isLinkLocalUnicast",
    "isGlobalUnicast",
    "masked",
    "prefixLength",
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct IpVal(IpAddr);

/// A prefix: its address (bits past the length kept, as `netip.Prefix`) and its length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct CidrVal(IpAddr, u8);

opaque_val!(IpVal, &IP_TYPE, equal: |a: &IpVal, b: &IpVal| a == b);
opaque_val!(CidrVal, &CIDR_TYPE, equal: |a: &CidrVal, b: &CidrVal| a == b);

/// Registers the libraries on `env` (`isIP` and `isCIDR` among them: they replace the
/// string-only checks of [`super::library`]).
pub(super) fn extension(env: &mut Env) -> Result<(), DeclarationError> {
    let text = || vec![STRING_TYPE];
    // `type(ip('1.2.3.4')) == net.IP`: kube declares the types' names as identifiers.
    env.add_type(IP)?;
    env.add_type(CIDR)?;
    env.add_overload("ip", "string_to_ip", text(), to_ip)?;
    env.add_overload("isIP", "is_ip", text(), is_ip)?;
    env.add_overload("ip.isCanonical", "ip_is_canonical", text(), is_canonical)?;
    env.add_overload("string", "ip_to_string", vec![IP], to_string)?;
    for (name, id, function) in [
        ("family", "ip_family", family as Function),
        ("isUnspecified", "ip_is_unspecified", is_unspecified),
        ("isLoopback", "ip_is_loopback", is_loopback),
        (
            "isLinkLocalMulticast",
            "ip_is_link_local_multicast",
            is_link_local_multicast,
        ),
        (
            "isLinkLocalUnicast",
            "ip_is_link_local_unicast",
            is_link_local_unicast,
        ),
        ("isGlobalUnicast", "ip_is_global_unicast", is_global_unicast),
    ] {
        env.add_member_overload(name, id, IP, vec![], function)?;
    }
    env.add_overload("cidr", "string_to_cidr", text(), to_cidr)?;
    env.add_overload("isCIDR", "is_cidr", text(), is_cidr)?;
    env.add_overload("string", "cidr_to_string", vec![CIDR], to_string)?;
    env.add_member_overload(
        "containsIP",
        "cidr_contains_ip_string",
        CIDR,
        text(),
        contains_ip,
    )?;
    env.add_member_overload(
        "containsIP",
        "cidr_contains_ip_ip",
        CIDR,
        vec![IP],
        contains_ip,
    )?;
    env.add_member_overload(
        "containsCIDR",
        "cidr_contains_cidr_string",
        CIDR,
        text(),
        contains_cidr,
    )?;
    env.add_member_overload(
        "containsCIDR",
        "cidr_contains_cidr",
        CIDR,
        vec![CIDR],
        contains_cidr,
    )?;
    env.add_member_overload("ip", "cidr_ip", CIDR, vec![], cidr_ip)?;
    env.add_member_overload(
        "prefixLength",
        "cidr_prefix_length",
        CIDR,
        vec![],
        prefix_length,
    )?;
    env.add_member_overload("masked", "cidr_masked", CIDR, vec![], masked)?;
    Ok(())
}

fn failure(function: &str, message: String) -> ExecutionError {
    ExecutionError::function_error(function, message)
}

/// A port of Go's `netip.ParseAddr`: the address and whether it had a zone, or Go's error
/// (`ParseAddr("1.2.3.256"): IPv4 field has value >255`).
fn go_parse_addr(s: &str) -> Result<(IpAddr, bool), String> {
    for b in s.bytes() {
        match b {
            b'.' => return go_parse_ipv4(s).map(|a| (IpAddr::V4(a), false)),
            b':' => return go_parse_ipv6(s),
            b'%' => return Err(addr_error(s, "missing IPv6 address", "")),
            _ => {}
        }
    }
    Err(addr_error(s, "unable to parse IP", ""))
}

/// Go's `parseAddrError`: what failed in `input`, and from where (`at`) when it says.
fn addr_error(input: &str, message: &str, at: &str) -> String {
    let input = go_quote(input);
    if at.is_empty() {
        format!("ParseAddr({input}): {message}")
    } else {
        format!("ParseAddr({input}): {message} (at {})", go_quote(at))
    }
}

/// Go's `netip.parseIPv4`.
fn go_parse_ipv4(s: &str) -> Result<std::net::Ipv4Addr, String> {
    let bytes = s.as_bytes();
    let rest = |i: usize| s.get(i..).unwrap_or("");
    let mut fields = [0u8; 4];
    let (mut value, mut position, mut digits) = (0u32, 0usize, 0);
    for (i, &c) in bytes.iter().enumerate() {
        if c.is_ascii_digit() {
            if digits == 1 && value == 0 {
                return Err(addr_error(s, "IPv4 field has octet with leading zero", ""));
            }
            value = value * 10 + u32::from(c - b'0');
            digits += 1;
            if value > 255 {
                return Err(addr_error(s, "IPv4 field has value >255", ""));
            }
        } else if c == b'.' {
            if i == 0 || i == bytes.len() - 1 || bytes[i - 1] == b'.' {
                return Err(addr_error(
                    s,
                    "IPv4 field must have at least one digit",
                    rest(i),
                ));
            }
            if position == 3 {
                return Err(addr_error(s, "IPv4 address too long", ""));
            }
            fields[position] = value as u8;
            position += 1;
            value = 0;
            digits = 0;
        } else {
            return Err(addr_error(s, "unexpected character", rest(i)));
        }
    }
    if position < 3 {
        return Err(addr_error(s, "IPv4 address too short", ""));
    }
    fields[3] = value as u8;
    Ok(std::net::Ipv4Addr::from(fields))
}

/// Go's `netip.parseIPv6`: the address and whether it had a zone.
fn go_parse_ipv6(input: &str) -> Result<(IpAddr, bool), String> {
    let (mut s, zoned) = match input.split_once('%') {
        Some((_, "")) => return Err(addr_error(input, "zone must be a non-empty string", "")),
        Some((address, _)) => (address, true),
        None => (input, false),
    };
    let fail = |message: &str, at: &str| Err(addr_error(input, message, at));
    let mut ip = [0u8; 16];
    let mut ellipsis: Option<usize> = None;
    if let Some(after) = s.strip_prefix("::") {
        ellipsis = Some(0);
        s = after;
        if s.is_empty() {
            return Ok((IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED), zoned));
        }
    }
    let mut i = 0;
    while i < 16 {
        let mut off = 0;
        let mut acc: u32 = 0;
        for &c in s.as_bytes() {
            let Some(digit) = (c as char).to_digit(16) else {
                break;
            };
            acc = (acc << 4) + digit;
            if acc > u32::from(u16::MAX) {
                return fail("IPv6 field has value >=2^16", s);
            }
            off += 1;
        }
        if off == 0 {
            return fail("each colon-separated field must have at least one digit", s);
        }
        if s.as_bytes().get(off) == Some(&b'.') {
            if ellipsis.is_none() && i != 12 {
                return fail(
                    "embedded IPv4 address must replace the final 2 fields of the address",
                    s,
                );
            }
            if i + 4 > 16 {
                return fail(
                    "too many hex fields to fit an embedded IPv4 at the end of the address",
                    s,
                );
            }
            let v4 = match go_parse_ipv4(s) {
                Ok(v4) => v4,
                Err(e) => return fail(&e, s),
            };
            ip[i..i + 4].copy_from_slice(&v4.octets());
            s = "";
            i += 4;
            break;
        }
        ip[i] = (acc >> 8) as u8;
        ip[i + 1] = acc as u8;
        i += 2;
        s = &s[off..];
        if s.is_empty() {
            break;
        }
        if !s.starts_with(':') {
            return fail("unexpected character, want colon", s);
        } else if s.len() == 1 {
            return fail("colon must be followed by more characters", s);
        }
        s = &s[1..];
        if s.starts_with(':') {
            if ellipsis.is_some() {
                return fail("multiple :: in address", s);
            }
            ellipsis = Some(i);
            s = &s[1..];
            if s.is_empty() {
                break;
            }
        }
    }
    if !s.is_empty() {
        return fail("trailing garbage after address", s);
    }
    if i < 16 {
        let Some(ellipsis) = ellipsis else {
            return fail("address string too short", "");
        };
        let n = 16 - i;
        ip.copy_within(ellipsis..i, ellipsis + n);
        ip[ellipsis..ellipsis + n].fill(0);
    } else if ellipsis.is_some() {
        return fail("the :: must expand to at least one field of zeros", "");
    }
    Ok((IpAddr::V6(std::net::Ipv6Addr::from(ip)), zoned))
}

fn is_mapped(address: IpAddr) -> bool {
    matches!(address, IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some())
}

/// kube's `parseIPAddr`: an address without a zone, not IPv4-mapped, or kube's error.
fn parse_ip(raw: &str) -> Result<IpAddr, String> {
    let quoted = go_quote(raw);
    match go_parse_addr(raw) {
        Err(e) => Err(format!(
            "IP Address {quoted} parse error during conversion from string: {e}"
        )),
        Ok((_, true)) => Err(format!(
            "IP address {quoted} with zone value is not allowed"
        )),
        Ok((address, false)) if is_mapped(address) => {
            Err(format!("IPv4-mapped IPv6 address {quoted} is not allowed"))
        }
        Ok((address, false)) => Ok(address),
    }
}

/// kube's `parseCIDR` (Go's `netip.ParsePrefix`, then no IPv4-mapped address), or its error
/// (as kube's `cidr()` gives it, its prefix twice).
fn parse_cidr(raw: &str) -> Result<CidrVal, String> {
    let quoted = go_quote(raw);
    let prefix = "network address parse error during conversion from string";
    let problem = |what: String| format!("{prefix}: netip.ParsePrefix({quoted}): {what}");
    let Some((address, bits)) = raw.rsplit_once('/') else {
        return Err(problem("no '/'".to_owned()));
    };
    let address = match go_parse_addr(address) {
        Ok((_, true)) => return Err(problem("IPv6 zones cannot be present in a prefix".into())),
        Ok((address, false)) => address,
        Err(e) => return Err(problem(e)),
    };
    let max = if address.is_ipv4() { 32 } else { 128 };
    let length = (!bits.is_empty()
        && bits.len() <= 3
        && bits.bytes().all(|b| b.is_ascii_digit())
        && (bits == "0" || !bits.starts_with('0')))
    .then(|| bits.parse::<u8>().ok())
    .flatten()
    .filter(|n| *n <= max);
    let Some(length) = length else {
        return Err(problem(format!("bad bits after slash: {}", go_quote(bits))));
    };
    if is_mapped(address) {
        return Err(format!("IPv4-mapped IPv6 address {quoted} is not allowed"));
    }
    Ok(CidrVal(address, length))
}

/// The address with its bits past `length` cleared.
fn masked_address(address: IpAddr, length: u8) -> IpAddr {
    match address {
        IpAddr::V4(v4) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(length)).unwrap_or(0);
            IpAddr::V4((u32::from(v4) & mask).into())
        }
        IpAddr::V6(v6) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(length)).unwrap_or(0);
            IpAddr::V6((u128::from(v6) & mask).into())
        }
    }
}

/// `netip.Prefix.Contains`: same family, and the same bits up to the length.
fn contains(cidr: CidrVal, address: IpAddr) -> bool {
    cidr.0.is_ipv4() == address.is_ipv4()
        && masked_address(cidr.0, cidr.1) == masked_address(address, cidr.1)
}

fn ip_of(val: &dyn Val, function: &str) -> Result<IpAddr, ExecutionError> {
    val.downcast_ref::<IpVal>()
        .map(|ip| ip.0)
        .ok_or_else(|| failure(function, "no such overload".into()))
}

fn cidr_of(val: &dyn Val, function: &str) -> Result<CidrVal, ExecutionError> {
    val.downcast_ref::<CidrVal>()
        .copied()
        .ok_or_else(|| failure(function, "no such overload".into()))
}

fn to_ip<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let text = one(args)?;
    let text = string(text.as_ref(), "ip")?;
    parse_ip(text)
        .map(|address| CowVal::owned(IpVal(address)))
        .map_err(|message| failure("ip", message))
}

fn is_ip<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let text = one(args)?;
    let text = string(text.as_ref(), "isIP")?;
    Ok(CowVal::owned(CelBool::from(parse_ip(text).is_ok())))
}

fn is_canonical<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let text = one(args)?;
    let text = string(text.as_ref(), "ip.isCanonical")?;
    let address = parse_ip(text).map_err(|message| failure("ip.isCanonical", message))?;
    Ok(CowVal::owned(CelBool::from(address.to_string() == text)))
}

fn to_string<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let value = one(args)?;
    let text = match (
        value.downcast_ref::<IpVal>(),
        value.downcast_ref::<CidrVal>(),
    ) {
        (Some(ip), _) => ip.0.to_string(),
        (_, Some(cidr)) => format!("{}/{}", cidr.0, cidr.1),
        _ => return Err(failure("string", "no such overload".into())),
    };
    Ok(CowVal::owned(CelString::from(text)))
}

fn family<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let address = ip_of(one(args)?.as_ref(), "family")?;
    Ok(CowVal::owned(CelInt::from(if address.is_ipv4() {
        4
    } else {
        6
    })))
}

/// A predicate of an address, as a member function.
fn predicate<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
    function: &str,
    test: impl Fn(IpAddr) -> bool,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let address = ip_of(one(args)?.as_ref(), function)?;
    Ok(CowVal::owned(CelBool::from(test(address))))
}

fn is_unspecified<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    predicate(args, "isUnspecified", |a| a.is_unspecified())
}

fn is_loopback<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    predicate(args, "isLoopback", |a| a.is_loopback())
}

/// Go's `IsLinkLocalMulticast`: `224.0.0.0/24`, `ff02::/16`.
fn is_link_local_multicast<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    predicate(args, "isLinkLocalMulticast", |a| match a {
        IpAddr::V4(v4) => v4.octets()[..3] == [224, 0, 0],
        IpAddr::V6(v6) => v6.segments()[0] & 0xff0f == 0xff02,
    })
}

/// Go's `IsLinkLocalUnicast`: `169.254.0.0/16`, `fe80::/10`.
fn is_link_local_unicast<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    predicate(args, "isLinkLocalUnicast", |a| match a {
        IpAddr::V4(v4) => v4.octets()[..2] == [169, 254],
        IpAddr::V6(v6) => v6.segments()[0] & 0xffc0 == 0xfe80,
    })
}

/// Go's `IsGlobalUnicast`: not unspecified, not the IPv4 broadcast address, not loopback,
/// not multicast, not link-local unicast.
fn is_global_unicast<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    predicate(args, "isGlobalUnicast", |a| {
        let link_local = match a {
            IpAddr::V4(v4) => v4.octets()[..2] == [169, 254],
            IpAddr::V6(v6) => v6.segments()[0] & 0xffc0 == 0xfe80,
        };
        !a.is_unspecified()
            && a != IpAddr::V4(std::net::Ipv4Addr::BROADCAST)
            && !a.is_loopback()
            && !a.is_multicast()
            && !link_local
    })
}

fn to_cidr<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let text = one(args)?;
    let text = string(text.as_ref(), "cidr")?;
    parse_cidr(text).map(CowVal::owned).map_err(|message| {
        failure(
            "cidr",
            format!("network address parse error during conversion from string: {message}"),
        )
    })
}

fn is_cidr<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let text = one(args)?;
    let text = string(text.as_ref(), "isCIDR")?;
    Ok(CowVal::owned(CelBool::from(parse_cidr(text).is_ok())))
}

fn contains_ip<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [cidr, other] = two(args)?;
    let cidr = cidr_of(cidr.as_ref(), "containsIP")?;
    let address = match other.downcast_ref::<CelString>() {
        Some(text) => parse_ip(text.inner()).map_err(|message| failure("containsIP", message))?,
        None => ip_of(other.as_ref(), "containsIP")?,
    };
    Ok(CowVal::owned(CelBool::from(contains(cidr, address))))
}

fn contains_cidr<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [cidr, other] = two(args)?;
    let cidr = cidr_of(cidr.as_ref(), "containsCIDR")?;
    let inner = match other.downcast_ref::<CelString>() {
        Some(text) => parse_cidr(text.inner()).map_err(|message| {
            failure(
                "containsCIDR",
                format!("network address parse error during conversion from string: {message}"),
            )
        })?,
        None => cidr_of(other.as_ref(), "containsCIDR")?,
    };
    // kube's test: the inner prefix's address masked to the outer length is the outer
    // network, and the inner prefix is no shorter.
    Ok(CowVal::owned(CelBool::from(
        contains(cidr, inner.0) && cidr.1 <= inner.1,
    )))
}

fn cidr_ip<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let cidr = cidr_of(one(args)?.as_ref(), "ip")?;
    Ok(CowVal::owned(IpVal(cidr.0)))
}

fn prefix_length<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let cidr = cidr_of(one(args)?.as_ref(), "prefixLength")?;
    Ok(CowVal::owned(CelInt::from(i64::from(cidr.1))))
}

fn masked<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let cidr = cidr_of(one(args)?.as_ref(), "masked")?;
    Ok(CowVal::owned(CidrVal(
        masked_address(cidr.0, cidr.1),
        cidr.1,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_parse_and_fail_as_go_s_netip() {
        for (text, want) in [
            ("", r#"ParseAddr(""): unable to parse IP"#),
            ("x", r#"ParseAddr("x"): unable to parse IP"#),
            ("%eth0", r#"ParseAddr("%eth0"): missing IPv6 address"#),
            (
                "1.2.3.256",
                r#"ParseAddr("1.2.3.256"): IPv4 field has value >255"#,
            ),
            (
                "01.2.3.4",
                r#"ParseAddr("01.2.3.4"): IPv4 field has octet with leading zero"#,
            ),
            ("1.2.3", r#"ParseAddr("1.2.3"): IPv4 address too short"#),
            (
                "1.2.3.4.5",
                r#"ParseAddr("1.2.3.4.5"): IPv4 address too long"#,
            ),
            (
                "1..2.3",
                r#"ParseAddr("1..2.3"): IPv4 field must have at least one digit (at ".2.3")"#,
            ),
            (
                "1.2.3.a",
                r#"ParseAddr("1.2.3.a"): unexpected character (at "a")"#,
            ),
            (
                "fe80::1%",
                r#"ParseAddr("fe80::1%"): zone must be a non-empty string"#,
            ),
            (
                "1:2:3:4:5:6:7:8:9",
                r#"ParseAddr("1:2:3:4:5:6:7:8:9"): trailing garbage after address (at "9")"#,
            ),
            (
                "1::2::3",
                r#"ParseAddr("1::2::3"): multiple :: in address (at ":3")"#,
            ),
            (
                "12345::",
                r#"ParseAddr("12345::"): IPv6 field has value >=2^16 (at "12345::")"#,
            ),
            ("1:2", r#"ParseAddr("1:2"): address string too short"#),
            (
                "1:2:3:4:5:6:7:8::",
                r#"ParseAddr("1:2:3:4:5:6:7:8::"): the :: must expand to at least one field of zeros"#,
            ),
            (
                "1:2:3:4::5:6:7:8",
                r#"ParseAddr("1:2:3:4::5:6:7:8"): the :: must expand to at least one field of zeros"#,
            ),
            (
                "1:g::",
                r#"ParseAddr("1:g::"): each colon-separated field must have at least one digit (at "g::")"#,
            ),
            (
                "1:2:1.2.3.4",
                r#"ParseAddr("1:2:1.2.3.4"): embedded IPv4 address must replace the final 2 fields of the address (at "1.2.3.4")"#,
            ),
            (
                "::ffff:1.2.3.400",
                r#"ParseAddr("::ffff:1.2.3.400"): ParseAddr("1.2.3.400"): IPv4 field has value >255 (at "1.2.3.400")"#,
            ),
        ] {
            assert_eq!(go_parse_addr(text), Err(want.to_owned()), "{text}");
        }
        for (text, zoned) in [
            ("::", false),
            ("::1", false),
            ("1::", false),
            ("1:2:3:4:5:6:7:8", false),
            ("1:2:3:4:5:6:1.2.3.4", false),
            ("::ffff:1.2.3.4", false),
            ("fe80::1%eth0", true),
            ("10.0.0.1", false),
            ("0.0.0.0", false),
        ] {
            let std: IpAddr = text.split('%').next().unwrap_or("").parse().expect(text);
            assert_eq!(go_parse_addr(text), Ok((std, zoned)), "{text}");
        }
    }
}
