//! Go's `net/url` parser (Go 1.24, with the CVE-2025-47912 check of bracketed hosts), ported
//! for what kube-apiserver reads with it: the OpenAPI `uri` format of custom resources
//! (`url.ParseRequestURI` succeeds, [`crate::strfmt`]) and CEL's URL library (`url()`,
//! `isURL()` and the URL getters, `cel_rules::url`).
//!
//! ## Guarantees
//! - [`parse_request_uri`] accepts exactly what `url.ParseRequestURI` accepts: an absolute URI
//!   or an absolute path (or `*`), no control character, a scheme of a letter then letters,
//!   digits, `+`, `-`, `.`, a port of digits only, well-formed `%` escapes, in a host only
//!   escapes of non-ASCII bytes (and `%25` before a zone) and no ASCII byte a host may not hold,
//!   a bracketed host only an IPv6 address (perhaps zoned), and user info of RFC 3986's
//!   characters. Its errors are Go's `url.Error` texts (`parse "https://a:b:c/": invalid port
//!   ":c" after host`).
//! - [`parse`] is `url.Parse`: the fragment cut off first; a relative reference accepted
//!   unless its first segment holds a `:`.
//! - The parsed [`Url`] holds what `url.URL` holds of the scheme (lower-cased), host (with its
//!   port, IPv6 in brackets), decoded path and its written form, and raw query; its
//!   `EscapedPath`, `Hostname`, `Port` and `Query` are Go's.

/// What Go's `url.URL` holds that its readers here use.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Url {
    /// Lower-cased.
    pub(crate) scheme: String,
    /// With the port; an IPv6 address in brackets.
    pub(crate) host: String,
    /// Decoded.
    pub(crate) path: String,
    /// The path as written, when it is not the default escaping of `path`.
    raw_path: String,
    pub(crate) raw_query: String,
}

/// How a part of a URL is escaped (Go's `encoding`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Path,
    Host,
    Zone,
    UserPassword,
    QueryComponent,
    Fragment,
}

/// A hex digit's value (`strfmt` reads its escapes and addresses with it too).
pub(crate) fn hex_value(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Go's `shouldEscape`.
fn should_escape(c: u8, mode: Mode) -> bool {
    if c.is_ascii_alphanumeric() {
        return false;
    }
    if matches!(mode, Mode::Host | Mode::Zone) && b"!$&'()*+,;=:[]<>\"".contains(&c) {
        return false;
    }
    match c {
        b'-' | b'_' | b'.' | b'~' => return false,
        b'$' | b'&' | b'+' | b',' | b'/' | b':' | b';' | b'=' | b'?' | b'@' => match mode {
            Mode::Path => return c == b'?',
            Mode::UserPassword => return matches!(c, b'@' | b'/' | b'?' | b':'),
            Mode::QueryComponent => return true,
            Mode::Fragment => return false,
            Mode::Host | Mode::Zone => {}
        },
        _ => {}
    }
    if mode == Mode::Fragment && matches!(c, b'!' | b'(' | b')' | b'*') {
        return false;
    }
    true
}

/// Go's `unescape`: the decoded bytes, or Go's error.
fn unescape(s: &[u8], mode: Mode) -> Result<Vec<u8>, String> {
    let quoted = |bytes: &[u8]| watchkeeper_core::gotext::go_quote(&String::from_utf8_lossy(bytes));
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while let Some(&c) = s.get(i) {
        match c {
            b'%' => {
                let (Some(high), Some(low)) = (
                    s.get(i + 1).copied().and_then(hex_value),
                    s.get(i + 2).copied().and_then(hex_value),
                ) else {
                    let end = (i + 3).min(s.len());
                    return Err(format!("invalid URL escape {}", quoted(&s[i..end])));
                };
                let byte = high << 4 | low;
                let percent25 = byte == b'%';
                // Hosts escape non-ASCII bytes only (and `%25`, a zone's start); zones only
                // bytes a host may hold unescaped, and spaces.
                if mode == Mode::Host && high < 8 && !percent25 {
                    return Err(format!("invalid URL escape {}", quoted(&s[i..i + 3])));
                }
                if mode == Mode::Zone && !percent25 && byte != b' ' && should_escape(byte, mode) {
                    return Err(format!("invalid URL escape {}", quoted(&s[i..i + 3])));
                }
                out.push(byte);
                i += 3;
            }
            b'+' if mode == Mode::QueryComponent => {
                out.push(b' ');
                i += 1;
            }
            _ => {
                if matches!(mode, Mode::Host | Mode::Zone) && c < 0x80 && should_escape(c, mode) {
                    return Err(format!("invalid character {} in host name", quoted(&[c])));
                }
                out.push(c);
                i += 1;
            }
        }
    }
    Ok(out)
}

fn unescape_text(s: &str, mode: Mode) -> Result<String, String> {
    unescape(s.as_bytes(), mode).map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
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

/// Go's `validOptionalPort`: empty, or `:` and digits.
fn valid_optional_port(port: &str) -> bool {
    port.is_empty()
        || port
            .strip_prefix(':')
            .is_some_and(|digits| digits.bytes().all(|b| b.is_ascii_digit()))
}

/// Go's `parseHost` (Go 1.24 with the CVE-2025-47912 check: what is in brackets must be an
/// IPv6 address, perhaps zoned; what comes before the last `[` is dropped, as Go drops it).
fn parse_host(host: &str) -> Result<String, String> {
    let quoted = watchkeeper_core::gotext::go_quote;
    if let Some(open) = host.rfind('[') {
        let Some(close) = host.rfind(']') else {
            return Err("missing ']' in host".to_owned());
        };
        // A `]` before the `[` leaves the `[` in the port, which refuses it.
        let colon_port = &host[close + 1..];
        if !valid_optional_port(colon_port) {
            return Err(format!("invalid port {} after host", quoted(colon_port)));
        }
        let colon_port = unescape_text(colon_port, Mode::Host)?;
        let name = &host.as_bytes()[open + 1..close];
        let unescaped = match name.windows(3).position(|w| w == b"%25") {
            Some(zone) => {
                let mut address = unescape(&name[..zone], Mode::Host)?;
                address.extend(unescape(&name[zone..], Mode::Zone)?);
                address
            }
            None => unescape(name, Mode::Host)?,
        };
        let literal = String::from_utf8_lossy(&unescaped).into_owned();
        // netip's reading: an address, and a zone (not empty) only after an IPv6 one.
        let (address, zone) = match literal.split_once('%') {
            Some((address, zone)) => (address, Some(zone)),
            None => (literal.as_str(), None),
        };
        match (address.parse::<std::net::IpAddr>(), zone) {
            (Ok(std::net::IpAddr::V6(_)), None) => {}
            (Ok(std::net::IpAddr::V6(_)), Some(zone)) if !zone.is_empty() => {}
            (Ok(std::net::IpAddr::V4(_)), None) => {
                return Err("invalid IP-literal".to_owned());
            }
            _ => {
                return Err(format!(
                    "invalid host: ParseAddr({}): unable to parse IP",
                    quoted(&literal)
                ));
            }
        }
        return Ok(format!("[{literal}]{colon_port}"));
    }
    if let Some(colon) = host.rfind(':') {
        let colon_port = &host[colon..];
        if !valid_optional_port(colon_port) {
            return Err(format!("invalid port {} after host", quoted(colon_port)));
        }
    }
    unescape_text(host, Mode::Host)
}

/// Go's `parseAuthority`: the host (the user info is checked, not kept).
fn parse_authority(authority: &str) -> Result<String, String> {
    let (userinfo, host) = match authority.rfind('@') {
        Some(at) => (Some(&authority[..at]), &authority[at + 1..]),
        None => (None, authority),
    };
    let host = parse_host(host)?;
    if let Some(userinfo) = userinfo {
        // Go's `validUserinfo`: RFC 3986 unreserved, sub-delims, `:`, `%` and `@` only.
        let valid = userinfo
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-._:~!$&'()*+,;=%@".contains(c));
        if !valid {
            return Err("net/url: invalid userinfo".to_owned());
        }
        let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
        unescape(user.as_bytes(), Mode::UserPassword)?;
        unescape(password.as_bytes(), Mode::UserPassword)?;
    }
    Ok(host)
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

/// Go's unexported `parse`: `via_request` for `ParseRequestURI`; the error without its
/// `parse "..."` prefix.
fn parse_url(raw: &str, via_request: bool) -> Result<Url, String> {
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
    let (scheme, mut rest) = scheme(raw)?;
    url.scheme = scheme.to_ascii_lowercase();
    if rest.ends_with('?') && rest.matches('?').count() == 1 {
        rest = &rest[..rest.len() - 1];
    } else if let Some((before, query)) = rest.split_once('?') {
        url.raw_query = query.to_owned();
        rest = before;
    }
    if !rest.starts_with('/') {
        if !url.scheme.is_empty() {
            // A rootless remainder is an opaque part: no host, no path.
            return Ok(url);
        }
        if via_request {
            return Err("invalid URI for request".to_owned());
        }
        if rest.split('/').next().unwrap_or_default().contains(':') {
            return Err("first path segment in URL cannot contain colon".to_owned());
        }
    }
    if (!url.scheme.is_empty() || !via_request && !rest.starts_with("///"))
        && rest.starts_with("//")
    {
        let after = &rest[2..];
        let (authority, path) = after.find('/').map_or((after, ""), |i| after.split_at(i));
        url.host = parse_authority(authority)?;
        rest = path;
    }
    url.path = unescape_text(rest, Mode::Path)?;
    if escape(&url.path, Mode::Path) != rest {
        url.raw_path = rest.to_owned();
    }
    Ok(url)
}

/// `url.ParseRequestURI(raw)`.
///
/// # Errors
/// Go's `url.Error` text.
pub(crate) fn parse_request_uri(raw: &str) -> Result<Url, String> {
    parse_url(raw, true)
        .map_err(|e| format!("parse {}: {e}", watchkeeper_core::gotext::go_quote(raw)))
}

/// `url.Parse(raw)`: the fragment cut off (and checked).
///
/// # Errors
/// Go's `url.Error` text.
pub(crate) fn parse(raw: &str) -> Result<Url, String> {
    let quoted = watchkeeper_core::gotext::go_quote;
    let (before, fragment) = raw.split_once('#').unwrap_or((raw, ""));
    let url = parse_url(before, false).map_err(|e| format!("parse {}: {e}", quoted(before)))?;
    unescape(fragment.as_bytes(), Mode::Fragment)
        .map_err(|e| format!("parse {}: {e}", quoted(raw)))?;
    Ok(url)
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

impl Url {
    /// Go's `URL.Hostname`: the host without its port and brackets.
    pub(crate) fn hostname(&self) -> &str {
        split_host_port(&self.host).0
    }

    /// Go's `URL.Port`.
    pub(crate) fn port(&self) -> &str {
        split_host_port(&self.host).1
    }

    /// Go's `URL.EscapedPath`: the path as written when that is a valid spelling of it, else
    /// as Go escapes a path.
    pub(crate) fn escaped_path(&self) -> String {
        let valid_encoded = self
            .raw_path
            .bytes()
            .all(|c| b"!$&'()*+,;=:@[]%".contains(&c) || !should_escape(c, Mode::Path));
        if !self.raw_path.is_empty()
            && valid_encoded
            && unescape_text(&self.raw_path, Mode::Path).is_ok_and(|p| p == self.path)
        {
            return self.raw_path.clone();
        }
        if self.path == "*" {
            return "*".to_owned();
        }
        escape(&self.path, Mode::Path)
    }

    /// Go's `URL.Query` (`ParseQuery`, its error ignored): `&`-separated pairs, `+` a space, a
    /// pair with a `;` or a bad escape left out; each key once, its values in order.
    pub(crate) fn query(&self) -> Vec<(String, Vec<String>)> {
        let mut pairs: Vec<(String, Vec<String>)> = Vec::new();
        for pair in self.raw_query.split('&') {
            if pair.is_empty() || pair.contains(';') {
                continue;
            }
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let (Ok(key), Ok(value)) = (
                unescape_text(key, Mode::QueryComponent),
                unescape_text(value, Mode::QueryComponent),
            ) else {
                continue;
            };
            match pairs.iter_mut().find(|(k, _)| *k == key) {
                Some((_, values)) => values.push(value),
                None => pairs.push((key, vec![value])),
            }
        }
        pairs
    }
}

#[cfg(test)]
mod tests {
    use super::{parse, parse_request_uri, split_host_port};

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
            ("http://[fe80::1%25en0]/", "http", "[fe80::1%en0]", "/", ""),
            (
                "https://example.com/path with spaces/",
                "https",
                "example.com",
                "/path with spaces/",
                "",
            ),
            ("https://example.com", "https", "example.com", "", ""),
            ("mailto:someone@example.com", "mailto", "", "", ""),
            ("*", "", "", "*", ""),
        ] {
            let url = parse_request_uri(raw).and_then(|_| parse(raw)).unwrap();
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
                "http://%41/",
                "parse \"http://%41/\": invalid URL escape \"%41\"",
            ),
            (
                "http://x/\n",
                "parse \"http://x/\\n\": net/url: invalid control character in URL",
            ),
            (
                "http://[::1/",
                "parse \"http://[::1/\": missing ']' in host",
            ),
            (
                "http://[1.2.3.4]/",
                "parse \"http://[1.2.3.4]/\": invalid IP-literal",
            ),
            (
                "http://[x]/",
                "parse \"http://[x]/\": invalid host: ParseAddr(\"x\"): unable to parse IP",
            ),
            (
                "http://u^@x/",
                "parse \"http://u^@x/\": net/url: invalid userinfo",
            ),
        ] {
            assert_eq!(
                parse_request_uri(raw).map(|_| ()),
                Err(error.to_owned()),
                "{raw}"
            );
        }
        // A request URI keeps its fragment (an opaque part here); Parse checks it.
        assert!(parse_request_uri("a:#%").is_ok());
        assert_eq!(
            parse("a:#%").map(|_| ()),
            Err("parse \"a:#%\": invalid URL escape \"%\"".to_owned())
        );
        // What comes before the last `[` is dropped, as Go 1.24 drops it.
        assert_eq!(
            parse_request_uri("http://a[::1]:8/").unwrap().host,
            "[::1]:8"
        );
        let url = parse("https://x/a%2Fb?k=a+b&k=c&bad=%zz&x;y=1#frag").unwrap();
        assert_eq!(
            (url.path.as_str(), url.escaped_path().as_str()),
            ("/a/b", "/a%2Fb")
        );
        assert_eq!(
            url.query(),
            [("k".to_owned(), vec!["a b".to_owned(), "c".to_owned()])]
        );
        assert_eq!(parse("https://x/a b").unwrap().escaped_path(), "/a%20b");
        assert_eq!(split_host_port("[::1]:80"), ("::1", "80"));
        assert_eq!(split_host_port("example.com"), ("example.com", ""));
        // Go's golang.org/issue/16822: a malformed scheme is no relative path.
        assert_eq!(
            parse("cache_object:foo/bar"),
            Err(
                "parse \"cache_object:foo/bar\": first path segment in URL cannot contain colon"
                    .to_owned()
            )
        );
        assert!(parse("a:b/c").is_ok());
        assert!(parse("ab/c:d").is_ok());
        assert_eq!(parse("/x:y").map(|u| u.path), Ok("/x:y".to_owned()));
    }
}
