//! Indented JSON for people, as kube-apiserver answers them: an answer is pretty-printed when
//! the query says `pretty=true` (or `1`, `t`, ... as Go's `strconv.ParseBool`; `pretty=false`
//! turns it off), or, without that parameter, when the `User-Agent` starts with `curl`, `Wget`
//! or `Mozilla/5.0` (a browser) — `isPrettyPrint` in kube-apiserver's negotiation. Indentation
//! is Go's `json.Indent` with two spaces: a newline and the depth's indentation after `{`, `[`
//! and `,`, `": "` after a key, empty objects and arrays kept as `{}` and `[]`, and a final
//! newline. Watch streams stay one event per line, as kube-apiserver's watch encoder writes
//! them.
//!
//! ## Guarantees
//! - The bytes are re-indented as they stream (a LIST's pieces one by one), never gathered:
//!   a pretty answer holds one piece and the indenter's state (a depth and three flags).
//! - Only whitespace between tokens changes: strings (escapes included) and the order of
//!   fields are kept byte for byte, so the answer parses to the same value (tested).

use axum::body::Body;
use axum::http::{HeaderMap, header};
use axum::response::Response;

use crate::http::transform::{Transform, Transformed, is_plain_json};

/// Whether an answer to this request is pretty-printed (see the module docs).
#[must_use]
pub fn wants_pretty(query: Option<&str>, headers: &HeaderMap) -> bool {
    let asked = query.and_then(|query| {
        query
            .split('&')
            .filter_map(|pair| pair.split_once('=').or(Some((pair, ""))))
            .find(|(key, _)| *key == "pretty")
            .map(|(_, value)| value)
    });
    if let Some(value) = asked.filter(|value| !value.is_empty()) {
        return matches!(value, "1" | "t" | "T" | "true" | "TRUE" | "True");
    }
    headers
        .get(header::USER_AGENT)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|agent| {
            agent.starts_with("curl")
                || agent.starts_with("Wget")
                || agent.starts_with("Mozilla/5.0")
        })
}

/// `response` indented, when it is an uncompressed JSON answer; anything else as it is.
#[must_use]
pub fn pretty(response: Response) -> Response {
    if !is_plain_json(&response) {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(
        parts,
        Body::new(Transformed::new(body, Indenter::default())),
    )
}

/// Go's `json.Indent` as a state machine over compact (or any) JSON bytes.
#[derive(Debug, Default)]
struct Indenter {
    depth: usize,
    in_string: bool,
    escaped: bool,
    /// An object or array was just opened: its first byte decides between `{}` and a newline.
    opened: bool,
    /// Anything was written (the final newline follows a value only).
    wrote: bool,
}

impl Indenter {
    fn newline(&self, out: &mut Vec<u8>) {
        out.push(b'\n');
        out.resize(out.len() + 2 * self.depth, b' ');
    }

    fn indent(&mut self, input: &[u8], out: &mut Vec<u8>) {
        out.reserve(input.len() + input.len() / 4);
        for &byte in input {
            if self.in_string {
                out.push(byte);
                if self.escaped {
                    self.escaped = false;
                } else if byte == b'\\' {
                    self.escaped = true;
                } else if byte == b'"' {
                    self.in_string = false;
                }
                continue;
            }
            if matches!(byte, b' ' | b'\t' | b'\n' | b'\r') {
                continue;
            }
            self.wrote = true;
            if self.opened {
                self.opened = false;
                if matches!(byte, b'}' | b']') {
                    self.depth = self.depth.saturating_sub(1);
                    out.push(byte);
                    continue;
                }
                self.newline(out);
            }
            match byte {
                b'"' => {
                    self.in_string = true;
                    out.push(byte);
                }
                b'{' | b'[' => {
                    out.push(byte);
                    self.depth += 1;
                    self.opened = true;
                }
                b'}' | b']' => {
                    self.depth = self.depth.saturating_sub(1);
                    self.newline(out);
                    out.push(byte);
                }
                b',' => {
                    out.push(byte);
                    self.newline(out);
                }
                b':' => out.extend_from_slice(b": "),
                _ => out.push(byte),
            }
        }
    }

    fn end(&mut self, out: &mut Vec<u8>) {
        if self.wrote {
            out.push(b'\n');
        }
    }
}

impl Transform for Indenter {
    fn feed(&mut self, input: &[u8]) -> std::io::Result<Vec<u8>> {
        let mut out = Vec::new();
        self.indent(input, &mut out);
        Ok(out)
    }

    fn finish(&mut self) -> std::io::Result<Vec<u8>> {
        let mut out = Vec::new();
        self.end(&mut out);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn indent(pieces: &[&str]) -> String {
        let mut indenter = Indenter::default();
        let mut out = Vec::new();
        for piece in pieces {
            indenter.indent(piece.as_bytes(), &mut out);
        }
        indenter.end(&mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn indents_as_go_json_indent() {
        let compact = r#"{"kind":"List","items":[{"a":"x,y:{}[]","b":"q\"{,","e":{},"f":[]},1,true,null],"n":{"m":-1.5e3}}"#;
        let expected = "{\n  \"kind\": \"List\",\n  \"items\": [\n    {\n      \"a\": \"x,y:{}[]\",\n      \"b\": \"q\\\"{,\",\n      \"e\": {},\n      \"f\": []\n    },\n    1,\n    true,\n    null\n  ],\n  \"n\": {\n    \"m\": -1.5e3\n  }\n}\n";
        assert_eq!(indent(&[compact]), expected);
        // Cut anywhere, inside strings, escapes and empty collections alike: the same bytes.
        for cut in 0..compact.len() {
            let (a, b) = compact.split_at(cut);
            assert_eq!(indent(&[a, b]), expected, "cut at {cut}");
        }
        let value: serde_json::Value = serde_json::from_str(&indent(&[compact])).unwrap();
        assert_eq!(
            value,
            serde_json::from_str::<serde_json::Value>(compact).unwrap()
        );
        // A trailing newline in the input is not doubled.
        assert_eq!(indent(&["{}\n"]), "{}\n");
        assert_eq!(indent(&[""]), "");
    }

    #[test]
    fn pretty_for_the_query_or_a_person_s_client() {
        let agent = |ua: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::USER_AGENT, ua.parse().unwrap());
            headers
        };
        assert!(wants_pretty(None, &agent("curl/8.5.0")));
        assert!(wants_pretty(None, &agent("Wget/1.21")));
        assert!(wants_pretty(
            None,
            &agent("Mozilla/5.0 (X11; Linux x86_64)")
        ));
        assert!(!wants_pretty(None, &agent("kubectl/v1.33.1 (linux/amd64)")));
        assert!(!wants_pretty(None, &HeaderMap::new()));
        assert!(wants_pretty(Some("limit=1&pretty=true"), &HeaderMap::new()));
        assert!(wants_pretty(Some("pretty=1"), &HeaderMap::new()));
        assert!(!wants_pretty(Some("pretty=false"), &agent("curl/8.5.0")));
        assert!(!wants_pretty(Some("pretty=0"), &agent("curl/8.5.0")));
        // An empty value is no answer: the agent decides.
        assert!(wants_pretty(Some("pretty="), &agent("curl/8.5.0")));
        assert!(!wants_pretty(Some("prettyish=true"), &HeaderMap::new()));
    }
}
