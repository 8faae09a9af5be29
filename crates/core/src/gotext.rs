//! Go's `%q` (`strconv.Quote`): how Kubernetes' messages quote a string, e.g. the value of a
//! field error (`Invalid value: "x y"`). Shared by the core's selector errors and the api
//! crate's field errors, so both quote alike.
//!
//! Guarantees: total (every `&str` quotes, no panic); printable characters are kept as they
//! are, the others escaped as Go escapes them (`\n`, `\x7f`, `\u00a0`, `\U000e0001`);
//! `go_printable` approximates Go's `unicode.IsPrint` (not a control, format or separator
//! character other than the ASCII space).

use std::fmt::Write as _;

/// A string as Go's `%q` (`strconv.Quote`) prints it: printable characters as they are, the
/// others escaped (`\n`, `\x7f`, `\u00a0`, `\U000e0001`).
#[must_use]
pub fn go_quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if go_printable(c) => out.push(c),
            c if u32::from(c) < 0x80 => {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c if u32::from(c) <= 0xFFFF => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => {
                let _ = write!(out, "\\U{:08x}", u32::from(c));
            }
        }
    }
    out.push('"');
    out
}

/// Go's `unicode.IsPrint`, approximately: not a control, format or separator character other
/// than the ASCII space.
fn go_printable(c: char) -> bool {
    c == ' '
        || !(c.is_control()
            || c.is_whitespace()
            || matches!(c, '\u{ad}' | '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}'
                | '\u{2060}'..='\u{2064}' | '\u{feff}' | '\u{fff9}'..='\u{fffb}'
                | '\u{e0000}'..='\u{e007f}'))
}

#[cfg(test)]
mod tests {
    use super::go_quote;

    #[test]
    fn quotes_as_go_does() {
        assert_eq!(go_quote("a b"), r#""a b""#);
        assert_eq!(go_quote("\"\\"), r#""\"\\""#);
        assert_eq!(go_quote("\n\t\u{0}\u{7f}"), r#""\n\t\x00\x7f""#);
        assert_eq!(go_quote("ü\u{a0}\u{e0001}"), r#""ü\u00a0\U000e0001""#);
    }
}
