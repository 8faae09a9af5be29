//! kube's CEL semver library (`k8s.io/apiserver/pkg/cel/library/semverlib.go`,
//! `SemverVersion(1)`, in the base environment of kube 1.33 for stored expressions): the
//! `kubernetes.Semver` type over a port of `github.com/blang/semver/v4`'s `Parse`.
//!
//! ## Guarantees
//! - `semver(s)` and `isSemver(s)` read `s` as `semver.Parse` does (`MAJOR.MINOR.PATCH`,
//!   numbers without leading zeros, dot-separated pre-release identifiers after `-`, build
//!   metadata after `+`), failing with its error text (`No Major.Minor.Patch elements found`,
//!   ...); with a second argument `true` they first normalize as kube's `normalizeAndParse`
//!   (a leading `v` dropped, leading zeros dropped, a missing minor or patch filled with `0`).
//! - `.major()`, `.minor()`, `.patch()`; `.compareTo(v)`, `.isGreaterThan(v)`,
//!   `.isLessThan(v)` by semver precedence (pre-releases below their release, numeric
//!   identifiers below alphanumeric ones, build metadata ignored); two versions are `==` when
//!   they compare equal.
//! - Every function costs a constant in the expression's bound but the parsing ones, which
//!   cost a tenth per byte as any string function.

use std::cmp::Ordering;

use cel::common::functions::Function;
use cel::common::types::{BOOL_TYPE, CelBool, CelInt, STRING_TYPE, Type};
use cel::common::value::{CowVal, Val};
use cel::{DeclarationError, Env, ExecutionError};

use super::library::{one, opaque_val, string, two};

const SEMVER: Type = Type::new_unspecified_type("kubernetes.Semver");
static SEMVER_TYPE: Type = SEMVER;

/// A pre-release identifier: numeric ones order below alphanumeric ones.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Pre {
    Number(u64),
    Text(String),
}

#[derive(Clone, Debug)]
struct Version {
    major: u64,
    minor: u64,
    patch: u64,
    pre: Vec<Pre>,
}

impl Version {
    /// blang's `Version.Compare`.
    fn compare(&self, other: &Version) -> Ordering {
        (self.major, self.minor, self.patch)
            .cmp(&(other.major, other.minor, other.patch))
            .then_with(|| match (self.pre.is_empty(), other.pre.is_empty()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                (false, false) => self.pre.cmp(&other.pre),
            })
    }
}

// Equal when they compare equal, as blang's `Version.Equals`.
opaque_val!(Version, &SEMVER_TYPE, equal: |a: &Version, b: &Version| a.compare(b) == Ordering::Equal);

/// Registers the library on `env`.
pub(super) fn extension(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_overload("semver", "string_to_semver", vec![STRING_TYPE], to_semver)?;
    env.add_overload(
        "semver",
        "string_bool_to_semver",
        vec![STRING_TYPE, BOOL_TYPE],
        to_semver,
    )?;
    env.add_overload("isSemver", "is_semver_string", vec![STRING_TYPE], is_semver)?;
    env.add_overload(
        "isSemver",
        "is_semver_string_bool",
        vec![STRING_TYPE, BOOL_TYPE],
        is_semver,
    )?;
    for (name, id, function) in [
        ("major", "semver_major", major as Function),
        ("minor", "semver_minor", minor),
        ("patch", "semver_patch", patch),
    ] {
        env.add_member_overload(name, id, SEMVER, vec![], function)?;
    }
    for (name, id, function) in [
        (
            "isGreaterThan",
            "semver_is_greater_than",
            is_greater_than as Function,
        ),
        ("isLessThan", "semver_is_less_than", is_less_than),
        ("compareTo", "semver_compare_to", compare_to),
    ] {
        env.add_member_overload(name, id, SEMVER, vec![SEMVER], function)?;
    }
    Ok(())
}

/// Go's `strconv.ParseUint(s, 10, 64)`, with its error text.
fn parse_uint(s: &str) -> Result<u64, String> {
    let quoted = watchkeeper_core::gotext::go_quote(s);
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "strconv.ParseUint: parsing {quoted}: invalid syntax"
        ));
    }
    s.parse()
        .map_err(|_| format!("strconv.ParseUint: parsing {quoted}: value out of range"))
}

/// A number part of a version (`what`: `Major`, `Minor`, `Patch`), as blang reads it.
fn number(s: &str, what: &str) -> Result<u64, String> {
    let quoted = watchkeeper_core::gotext::go_quote(s);
    if !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "Invalid character(s) found in {} number {quoted}",
            what.to_ascii_lowercase()
        ));
    }
    if s.len() > 1 && s.starts_with('0') {
        return Err(format!(
            "{what} number must not contain leading zeroes {quoted}"
        ));
    }
    parse_uint(s)
}

fn alphanumeric(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// blang's `semver.Parse`.
fn parse(s: &str) -> Result<Version, String> {
    if s.is_empty() {
        return Err("Version string empty".to_owned());
    }
    let parts: Vec<&str> = s.splitn(3, '.').collect();
    let [major, minor, rest] = parts.as_slice() else {
        return Err("No Major.Minor.Patch elements found".to_owned());
    };
    let major = number(major, "Major")?;
    let minor = number(minor, "Minor")?;
    let (rest, build) = match rest.split_once('+') {
        Some((rest, build)) => (rest, Some(build)),
        None => (*rest, None),
    };
    let (patch, pre) = match rest.split_once('-') {
        Some((patch, pre)) => (patch, Some(pre)),
        None => (rest, None),
    };
    let patch = number(patch, "Patch")?;
    let mut version = Version {
        major,
        minor,
        patch,
        pre: Vec::new(),
    };
    for identifier in pre
        .map(|p| p.split('.').collect::<Vec<_>>())
        .unwrap_or_default()
    {
        let quoted = watchkeeper_core::gotext::go_quote(identifier);
        if identifier.is_empty() {
            return Err("Prerelease is empty".to_owned());
        }
        if identifier.bytes().all(|b| b.is_ascii_digit()) {
            if identifier.len() > 1 && identifier.starts_with('0') {
                return Err(format!(
                    "Numeric PreRelease version must not contain leading zeroes {quoted}"
                ));
            }
            version.pre.push(Pre::Number(parse_uint(identifier)?));
        } else if alphanumeric(identifier) {
            version.pre.push(Pre::Text(identifier.to_owned()));
        } else {
            return Err(format!("Invalid character(s) found in prerelease {quoted}"));
        }
    }
    for meta in build
        .map(|b| b.split('.').collect::<Vec<_>>())
        .unwrap_or_default()
    {
        if meta.is_empty() {
            return Err("Build meta data is empty".to_owned());
        }
        if !alphanumeric(meta) {
            return Err(format!(
                "Invalid character(s) found in build meta data {}",
                watchkeeper_core::gotext::go_quote(meta)
            ));
        }
    }
    Ok(version)
}

/// kube's `normalizeAndParse`.
fn normalize_and_parse(s: &str) -> Result<Version, String> {
    let s = s.strip_prefix('v').unwrap_or(s);
    let mut parts: Vec<String> = s.splitn(3, '.').map(str::to_owned).collect();
    for part in &mut parts {
        if part.len() > 1 {
            let trimmed = part.trim_start_matches('0');
            *part = if trimmed.bytes().next().is_some_and(|b| b.is_ascii_digit()) {
                trimmed.to_owned()
            } else {
                format!("0{trimmed}")
            };
        }
    }
    if parts.len() < 3 {
        if parts.last().is_some_and(|p| p.contains(['+', '-'])) {
            return Err("short version cannot contain PreRelease/Build meta data".to_owned());
        }
        parts.resize(3, "0".to_owned());
    }
    parse(&parts.join("."))
}

/// The text and, when given, the normalize flag of a `semver` or `isSemver` call.
fn read(
    args: Vec<CowVal<'_, '_>>,
    function: &str,
) -> Result<Result<Version, String>, ExecutionError> {
    let count = args.len();
    let (text, normalize) = match count {
        1 => (one(args)?, false),
        2 => {
            let [text, flag] = two(args)?;
            let flag = flag
                .downcast_ref::<CelBool>()
                .map(|b| *b.inner())
                .ok_or_else(|| ExecutionError::function_error(function, "no such overload"))?;
            (text, flag)
        }
        _ => return Err(ExecutionError::invalid_argument_count(1, count)),
    };
    let text = string(text.as_ref(), function)?;
    Ok(if normalize {
        normalize_and_parse(text)
    } else {
        parse(text)
    })
}

fn to_semver<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    read(args, "semver")?
        .map(CowVal::owned)
        .map_err(|message| ExecutionError::function_error("semver", message))
}

fn is_semver<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let valid = read(args, "isSemver")?.is_ok();
    Ok(CowVal::owned(CelBool::from(valid)))
}

fn version_of<'a>(val: &'a dyn Val, function: &str) -> Result<&'a Version, ExecutionError> {
    val.downcast_ref::<Version>()
        .ok_or_else(|| ExecutionError::function_error(function, "no such overload"))
}

/// A number of the version a member function is called on.
fn part<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
    function: &str,
    read: impl Fn(&Version) -> u64,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let value = one(args)?;
    let number = read(version_of(value.as_ref(), function)?);
    // Go's `types.Int(v.Major)` wraps a uint64 past the int64 range.
    #[allow(clippy::cast_possible_wrap)]
    Ok(CowVal::owned(CelInt::from(number as i64)))
}

fn major<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    part(args, "major", |v| v.major)
}

fn minor<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    part(args, "minor", |v| v.minor)
}

fn patch<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    part(args, "patch", |v| v.patch)
}

/// The order of the receiver and the argument of a comparison.
fn ordering(args: Vec<CowVal<'_, '_>>, function: &str) -> Result<Ordering, ExecutionError> {
    let [a, b] = two(args)?;
    Ok(version_of(a.as_ref(), function)?.compare(version_of(b.as_ref(), function)?))
}

fn is_greater_than<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let order = ordering(args, "isGreaterThan")?;
    Ok(CowVal::owned(CelBool::from(order == Ordering::Greater)))
}

fn is_less_than<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let order = ordering(args, "isLessThan")?;
    Ok(CowVal::owned(CelBool::from(order == Ordering::Less)))
}

fn compare_to<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let order = ordering(args, "compareTo")?;
    Ok(CowVal::owned(CelInt::from(order as i64)))
}

#[cfg(test)]
mod tests {
    use std::cmp::Ordering;

    use super::{normalize_and_parse, parse};

    #[test]
    fn versions_parse_and_order_as_blangs() {
        assert_eq!(
            parse("1.2.3").map(|v| (v.major, v.minor, v.patch)),
            Ok((1, 2, 3))
        );
        for (text, error) in [
            ("", "Version string empty"),
            ("1.0", "No Major.Minor.Patch elements found"),
            ("200K", "No Major.Minor.Patch elements found"),
            (
                "01.0.0",
                "Major number must not contain leading zeroes \"01\"",
            ),
            ("1.x.0", "Invalid character(s) found in minor number \"x\""),
            ("1.0.0-", "Prerelease is empty"),
            (
                "1.0.0-01",
                "Numeric PreRelease version must not contain leading zeroes \"01\"",
            ),
            (
                "1.0.0-a_b",
                "Invalid character(s) found in prerelease \"a_b\"",
            ),
            ("1.0.0+", "Build meta data is empty"),
            (
                "v1.0.0",
                "Invalid character(s) found in major number \"v1\"",
            ),
            ("1..0", "strconv.ParseUint: parsing \"\": invalid syntax"),
        ] {
            assert_eq!(parse(text).map(|_| ()), Err(error.to_owned()), "{text}");
        }
        let order = |a: &str, b: &str| parse(a).unwrap().compare(&parse(b).unwrap());
        // semver.org's example of precedence.
        let chain = [
            "1.0.0-alpha",
            "1.0.0-alpha.1",
            "1.0.0-alpha.beta",
            "1.0.0-beta",
            "1.0.0-beta.2",
            "1.0.0-beta.11",
            "1.0.0-rc.1",
            "1.0.0",
            "1.0.1",
        ];
        for pair in chain.windows(2) {
            assert_eq!(order(pair[0], pair[1]), Ordering::Less, "{pair:?}");
        }
        assert_eq!(order("1.0.0+a", "1.0.0+b"), Ordering::Equal);
        for (text, normal) in [
            ("v1.0.0", "1.0.0"),
            ("1.0", "1.0.0"),
            ("01.01.01", "1.1.1"),
            ("2", "2.0.0"),
        ] {
            assert_eq!(
                normalize_and_parse(text).map(|v| (v.major, v.minor, v.patch)),
                parse(normal).map(|v| (v.major, v.minor, v.patch)),
                "{text}"
            );
        }
        assert_eq!(
            normalize_and_parse("1.0-rc").map(|_| ()),
            Err("short version cannot contain PreRelease/Build meta data".to_owned())
        );
    }
}
