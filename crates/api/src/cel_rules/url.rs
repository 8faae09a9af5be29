//! kube's CEL URL library (`k8s.io/apiserver/pkg/cel/library/urls.go`, in the base
//! environment since 1.0): the `kubernetes.URL` type over Go's `net/url` parser, ported.
//!
//! ## Guarantees
//! - `url(s)` accepts what Go's `url.ParseRequestURI` accepts (an absolute URI or an absolute
//!   path, no control characters, a port of digits only, well-formed `%` escapes, no escaped
//!   ASCII in a host) and is then read as `url.Parse` reads it (the fragment cut off); else it
//!   fails with kube's error (`URL parse error during conversion from string: parse "...":
//!   invalid URI for request`, Go's own words after the prefix). `isURL(s)` says whether
//!   `ParseRequestURI` accepts `s`.
//! - `.getScheme()` (lower-cased), `.getHost()` (with the port, IPv6 in brackets),
//!   `.getHostname()` (without the port and brackets), `.getPort()`, `.getEscapedPath()` (Go's
//!   `EscapedPath`: the path as the client escaped it when that is a valid spelling, else
//!   escaped as Go escapes a path) and `.getQuery()` (Go's `ParseQuery`: `&`-separated pairs,
//!   `+` read as a space, a pair with a `;` or a bad escape left out, a key's values in order).
//! - Every function costs a tenth per byte of its operands in the expression's bound, as any
//!   string operation (a URL's parts are never longer than its text).

use std::any::Any;
use std::sync::Arc;

use std::collections::HashMap;

use cel::common::types::{CelBool, CelList, CelMap, CelMapKey, CelString, STRING_TYPE, Type};
use cel::common::value::{CowVal, StaticVal, Val};
use cel::{DeclarationError, Env, ExecutionError};
use watchkeeper_core::gotext::go_quote;

use super::library::{one, string};

const URL: Type = Type::new_unspecified_type("kubernetes.URL");
static URL_TYPE: Type = URL;

/// What Go's `url.URL` holds that the library reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Url {
    scheme: String,
    host: String,
    /// The decoded path.
    path: String,
    /// The path as written, when it is not the default escaping of `path`.
    raw_path: String,
    raw_query: String,
}

#[derive(Clone, Debug)]
struct UrlVal(Arc<Url>);

impl Val for UrlVal {
    fn get_type(&self) -> &Type {
        &URL_TYPE
    }
    fn cel_type() -> &'static Type {
        &URL_TYPE
    }
    fn equals(&self, other: &dyn Val) -> bool {
        other
            .downcast_ref::<UrlVal>()
            .is_some_and(|other| other.0 == self.0)
    }
    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}

impl StaticVal for UrlVal {}

/// Registers the library on `env`.
pub(super) fn extension(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_overload("url", "string_to_url", vec![STRING_TYPE], to_url)?;
    env.add_overload("isURL", "is_url_string", vec![STRING_TYPE], is_url)?;
    env.add_member_overload("getScheme", "url_get_scheme", URL, vec![], get_scheme)?;
    env.add_member_overload("getHost", "url_get_host", URL, vec![], get_host)?;
    env.add_member_overload("getHostname", "url_get_hostname", URL, vec![], get_hostname)?;
    env.add_member_overload("getPort", "url_get_port", URL, vec![], get_port)?;
    env.add_member_overload(
        "getEscapedPath",
        "url_get_escaped_path",
        URL,
        vec![],
        get_escaped_path,
    )?;
    env.add_member_overload("getQuery", "url_get_query", URL, vec![], get_query)?;
    Ok(())
}

#[derive(Clone, Copy)]
enum Part {
    Scheme,
    Host,
    Hostname,
    Port,
    EscapedPath,
}

/// How a part of a URL is escaped (Go's `encoding`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Path,
    Host,
    UserPassword,
    QueryComponent,
    Fragment,
}

/// Go's `shouldEscape`.
fn should_escape(c: u8, mode: Mode) -> bool {
    if c.is_ascii_alphanumeric() {
        return false;
    }
    if mode == Mode::Host && b"!$&'()*+,;=:[]<>\"".contains(&c) {
        return false;
    }
    match c {
        b'-' | b'_' | b'.' | b'~' => return false,
        b'$' | b'&' | b'+' | b',' | b'/' | b':' | b';' | b'=' | b'?' | b'@' => match mode {
            Mode::Path => return c == b'?',
            Mode::UserPassword => return matches!(c, b'@' | b'/' | b'?' | b':'),
            Mode::QueryComponent => return true,
            Mode::Fragment => return false,
            Mode::Host => {}
        },
        _ => {}
    }
    if mode == Mode::Fragment && matches!(c, b'!' | b'(' | b')' | b'*') {
        return false;
    }
    true
}

fn hex(c: u8) -> Option<u8> {
    char::from(c)
        .to_digit(16)
        .and_then(|d| u8::try_from(d).ok())
}

/// Go's `unescape`: the decoded text, or Go's error.
fn unescape(s: &str, mode: Mode) -> Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let (Some(high), Some(low)) = (
                    bytes.get(i + 1).copied().and_then(hex),
                    bytes.get(i + 2).copied().and_then(hex),
                ) else {
                    let end = (i + 3).min(bytes.len());
                    let shown = String::from_utf8_lossy(&bytes[i..end]).into_owned();
                    return Err(format!("invalid URL escape {}", go_quote(&shown)));
                };
                if mode == Mode::Host && high < 8 && &s[i..i + 3] != "%25" {
                    return Err(format!("invalid URL escape {}", go_quote(&s[i..i + 3])));
                }
                out.push(high << 4 | low);
                i += 3;
            }
            b'+' if mode == Mode::QueryComponent => {
                out.push(b' ');
                i += 1;
            }
            c => {
                if mode == Mode::Host && c < 0x80 && should_escape(c, mode) {
                    let shown = char::from(c).to_string();
                    return Err(format!(
                        "invalid character {} in host name",
                        go_quote(&shown)
                    ));
                }
                out.push(c);
                i += 1;
            }
        }
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// Go's `escape`.
fn escape(s: &str, mode: Mode) -> String {
    let mut out = String::with_capacity(s.len());
    for &c in s.as_bytes() {
        if should_escape(c, mode) {
            out.push_str(&format!("%{c:02X}"));
        } else {
            out.push(char::from(c));
        }
    }
    out
}

/// Go's `validOptionalPort`.
fn valid_optional_port(port: &str) -> bool {
    port.is_empty()
        || port
            .strip_prefix(':')
            .is_some_and(|p| p.bytes().all(|b| b.is_ascii_digit()))
}

/// Go's `parseHost` (RFC 6874 zones kept as they are written).
fn parse_host(host: &str) -> Result<String, String> {
    if host.starts_with('[') {
        let Some(close) = host.rfind(']') else {
            return Err("missing ']' in host".to_owned());
        };
        let colon_port = &host[close + 1..];
        if !valid_optional_port(colon_port) {
            return Err(format!("invalid port {} after host", go_quote(colon_port)));
        }
        if host[..close].contains("%25") {
            return Ok(host.to_owned());
        }
    } else if let Some(colon) = host.rfind(':') {
        let colon_port = &host[colon..];
        if !valid_optional_port(colon_port) {
            return Err(format!("invalid port {} after host", go_quote(colon_port)));
        }
    }
    unescape(host, Mode::Host)
}

/// Go's `parseAuthority`: the host (the user info is checked, not kept).
fn parse_authority(authority: &str) -> Result<String, String> {
    let (userinfo, host) = match authority.rfind('@') {
        Some(at) => (Some(&authority[..at]), &authority[at + 1..]),
        None => (None, authority),
    };
    let host = parse_host(host)?;
    if let Some(userinfo) = userinfo {
        let valid = userinfo
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || b"-._:~!$&'()*+,;=%@".contains(&c));
        if !valid {
            return Err("net/url: invalid userinfo".to_owned());
        }
        let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
        unescape(user, Mode::UserPassword)?;
        unescape(password, Mode::UserPassword)?;
    }
    Ok(host)
}

/// Go's `parse`: `via_request` for `ParseRequestURI`.
fn parse(raw: &str, via_request: bool) -> Result<Url, String> {
    if raw.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return Err("net/url: invalid control character in URL".to_owned());
    }
    if raw.is_empty() && via_request {
        return Err("empty url".to_owned());
    }
    let mut url = Url::default();
    if raw == "*" {
        url.path = "*".to_owned();
        return Ok(url);
    }
    let (scheme, rest) = scheme(raw)?;
    url.scheme = scheme.to_ascii_lowercase();
    let mut rest = rest;
    if rest.ends_with('?') && rest.matches('?').count() == 1 {
        rest = &rest[..rest.len() - 1];
    } else if let Some((before, query)) = rest.split_once('?') {
        url.raw_query = query.to_owned();
        rest = before;
    }
    if !rest.starts_with('/') {
        if !url.scheme.is_empty() {
            // A rootless path is opaque: no host, no path.
            return Ok(url);
        }
        if via_request {
            return Err("invalid URI for request".to_owned());
        }
        let segment = rest.split('/').next().unwrap_or("");
        if segment.contains(':') {
            return Err("first path segment in URL cannot contain colon".to_owned());
        }
    }
    if (!url.scheme.is_empty() || !via_request && !rest.starts_with("///"))
        && rest.starts_with("//")
    {
        let authority = &rest[2..];
        let (authority, path) = match authority.find('/') {
            Some(slash) => (&authority[..slash], &authority[slash..]),
            None => (authority, ""),
        };
        url.host = parse_authority(authority)?;
        rest = path;
    }
    url.path = unescape(rest, Mode::Path)?;
    if escape(&url.path, Mode::Path) != rest {
        url.raw_path = rest.to_owned();
    }
    Ok(url)
}

/// Go's `getScheme`.
fn scheme(raw: &str) -> Result<(&str, &str), String> {
    for (i, c) in raw.bytes().enumerate() {
        match c {
            b'a'..=b'z' | b'A'..=b'Z' => {}
            b'0'..=b'9' | b'+' | b'-' | b'.' if i > 0 => {}
            b':' if i == 0 => return Err("missing protocol scheme".to_owned()),
            b':' => return Ok((&raw[..i], &raw[i + 1..])),
            _ => return Ok(("", raw)),
        }
    }
    Ok(("", raw))
}

/// Go's `url.ParseRequestURI`, its error as `url.Error` prints it.
fn parse_request_uri(raw: &str) -> Result<Url, String> {
    parse(raw, true).map_err(|e| format!("parse {}: {e}", go_quote(raw)))
}

/// Go's `url.Parse`: the fragment cut off (and checked).
fn parse_reference(raw: &str) -> Result<Url, String> {
    let (before, fragment) = raw.split_once('#').unwrap_or((raw, ""));
    let url = parse(before, false).map_err(|e| format!("parse {}: {e}", go_quote(before)))?;
    unescape(fragment, Mode::Fragment).map_err(|e| format!("parse {}: {e}", go_quote(raw)))?;
    Ok(url)
}

/// Go's `validEncoded` for a path.
fn valid_encoded_path(s: &str) -> bool {
    s.bytes()
        .all(|c| b"!$&'()*+,;=:@[]%".contains(&c) || !should_escape(c, Mode::Path))
}

/// Go's `splitHostPort`.
fn split_host_port(host_port: &str) -> (&str, &str) {
    let (mut host, mut port) = (host_port, "");
    if let Some(colon) = host_port.rfind(':')
        && valid_optional_port(&host_port[colon..])
    {
        (host, port) = (&host_port[..colon], &host_port[colon + 1..]);
    }
    if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        host = inner;
    }
    (host, port)
}

fn to_url<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let text = one(args)?;
    let text = string(text.as_ref(), "url")?;
    parse_request_uri(text)
        .and_then(|_| parse_reference(text))
        .map(|url| CowVal::owned(UrlVal(Arc::new(url))))
        .map_err(|e| {
            ExecutionError::function_error(
                "url",
                format!("URL parse error during conversion from string: {e}"),
            )
        })
}

fn is_url<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let text = one(args)?;
    let text = string(text.as_ref(), "isURL")?;
    Ok(CowVal::owned(CelBool::from(
        parse_request_uri(text).is_ok(),
    )))
}

fn url_of(val: &dyn Val) -> Result<&Url, ExecutionError> {
    val.downcast_ref::<UrlVal>()
        .map(|u| u.0.as_ref())
        .ok_or_else(|| ExecutionError::function_error("url", "no such overload"))
}

fn get<'b, 'v>(args: Vec<CowVal<'b, 'v>>, part: Part) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let value = one(args)?;
    let url = url_of(value.as_ref())?;
    let text = match part {
        Part::Scheme => url.scheme.clone(),
        Part::Host => url.host.clone(),
        Part::Hostname => split_host_port(&url.host).0.to_owned(),
        Part::Port => split_host_port(&url.host).1.to_owned(),
        Part::EscapedPath => {
            if !url.raw_path.is_empty()
                && valid_encoded_path(&url.raw_path)
                && unescape(&url.raw_path, Mode::Path).is_ok_and(|p| p == url.path)
            {
                url.raw_path.clone()
            } else if url.path == "*" {
                "*".to_owned()
            } else {
                escape(&url.path, Mode::Path)
            }
        }
    };
    Ok(CowVal::owned(CelString::from(text)))
}

fn get_scheme<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    get(args, Part::Scheme)
}

fn get_host<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    get(args, Part::Host)
}

fn get_hostname<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    get(args, Part::Hostname)
}

fn get_port<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    get(args, Part::Port)
}

fn get_escaped_path<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    get(args, Part::EscapedPath)
}

fn get_query<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let value = one(args)?;
    let url = url_of(value.as_ref())?;
    let mut pairs: Vec<(String, Vec<String>)> = Vec::new();
    for pair in url.raw_query.split('&') {
        if pair.is_empty() || pair.contains(';') {
            continue;
        }
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let (Ok(key), Ok(value)) = (
            unescape(key, Mode::QueryComponent),
            unescape(value, Mode::QueryComponent),
        ) else {
            continue;
        };
        match pairs.iter_mut().find(|(k, _)| *k == key) {
            Some((_, values)) => values.push(value),
            None => pairs.push((key, vec![value])),
        }
    }
    let map: HashMap<CelMapKey<'v>, Box<dyn Val + 'v>> = pairs
        .into_iter()
        .map(|(key, values)| {
            let values: Vec<Box<dyn Val + 'v>> = values
                .into_iter()
                .map(|v| Box::new(CelString::from(v)) as Box<dyn Val + 'v>)
                .collect();
            (
                CelMapKey::from(key),
                Box::new(CelList::from(values)) as Box<dyn Val + 'v>,
            )
        })
        .collect();
    Ok(CowVal::owned(CelMap::from(map)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_as_gos_net_url() {
        for (raw, scheme, host, path, query) in [
            (
                "https://user:pass@example.com:80/path?query=val#fragment",
                "https",
                "example.com:80",
                "/path",
                "query=val",
            ),
            ("/absolute-path", "", "", "/absolute-path", ""),
            ("HTTPS://[::1]:80/", "https", "[::1]:80", "/", ""),
            (
                "https://example.com/path with spaces/",
                "https",
                "example.com",
                "/path with spaces/",
                "",
            ),
            ("https://example.com", "https", "example.com", "", ""),
            ("mailto:someone@example.com", "mailto", "", "", ""),
        ] {
            let url = parse_request_uri(raw)
                .and_then(|_| parse_reference(raw))
                .unwrap();
            assert_eq!(
                (
                    url.scheme.as_str(),
                    url.host.as_str(),
                    url.path.as_str(),
                    url.raw_query.as_str()
                ),
                (scheme, host, path, query),
                "{raw}"
            );
        }
        for (raw, error) in [
            (
                "https://a:b:c/",
                "parse \"https://a:b:c/\": invalid port \":c\" after host",
            ),
            (
                "../relative-path",
                "parse \"../relative-path\": invalid URI for request",
            ),
            ("", "parse \"\": empty url"),
            (":x", "parse \":x\": missing protocol scheme"),
            (
                "http://a b/",
                "parse \"http://a b/\": invalid character \" \" in host name",
            ),
            (
                "http://x/%zz",
                "parse \"http://x/%zz\": invalid URL escape \"%zz\"",
            ),
            (
                "http://x/\n",
                "parse \"http://x/\\n\": net/url: invalid control character in URL",
            ),
            (
                "http://[::1/",
                "parse \"http://[::1/\": missing ']' in host",
            ),
        ] {
            assert_eq!(parse_request_uri(raw), Err(error.to_owned()), "{raw}");
        }
        // A fragment is part of the path for ParseRequestURI, cut off by Parse.
        let url = parse_reference("https://x/a%2Fb#frag").unwrap();
        assert_eq!(
            (url.path.as_str(), url.raw_path.as_str()),
            ("/a/b", "/a%2Fb")
        );
        assert_eq!(split_host_port("[::1]:80"), ("::1", "80"));
        assert_eq!(split_host_port("example.com"), ("example.com", ""));
    }
}
