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
//!
//! ## Differs from kube
//! - A text that is not an address at all fails with `ParseAddr("..."): unable to parse IP`
//!   after kube's prefix, where Go's `netip` names the first thing it found wrong (`IPv4 field
//!   has value >255`, ...).

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

/// Go's `netip.ParseAddr` of `raw`, without a zone (`%`), the address and whether it had one.
fn parse_addr(raw: &str) -> Option<(IpAddr, bool)> {
    match raw.split_once('%') {
        // A zone only follows an IPv6 address, and is not empty.
        Some((address, zone)) if !zone.is_empty() && address.contains(':') => address
            .parse::<std::net::Ipv6Addr>()
            .ok()
            .map(|a| (IpAddr::V6(a), true)),
        Some(_) => None,
        None => raw.parse::<IpAddr>().ok().map(|a| (a, false)),
    }
}

fn is_mapped(address: IpAddr) -> bool {
    matches!(address, IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some())
}

/// kube's `parseIPAddr`: an address without a zone, not IPv4-mapped, or kube's error.
fn parse_ip(raw: &str) -> Result<IpAddr, String> {
    let quoted = go_quote(raw);
    match parse_addr(raw) {
        None => Err(format!(
            "IP Address {quoted} parse error during conversion from string: ParseAddr({quoted}): unable to parse IP"
        )),
        Some((_, true)) => Err(format!(
            "IP address {quoted} with zone value is not allowed"
        )),
        Some((address, false)) if is_mapped(address) => {
            Err(format!("IPv4-mapped IPv6 address {quoted} is not allowed"))
        }
        Some((address, false)) => Ok(address),
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
    let address = match parse_addr(address) {
        Some((_, true)) => return Err(problem("IPv6 zones cannot be present in a prefix".into())),
        Some((address, false)) => address,
        None => {
            let inner = go_quote(address);
            return Err(problem(format!("ParseAddr({inner}): unable to parse IP")));
        }
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
