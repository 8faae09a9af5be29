//! `application/yaml` bodies and answers, as kube-apiserver's YAML serializer has them: a
//! create or update body in YAML is read as the JSON it converts to (sigs.k8s.io/yaml's
//! `YAMLToJSON`), and an answer the client asked for in YAML is the JSON answer converted
//! (`JSONToYAML`: keys sorted, block style, two-space indentation, sequences at their key's
//! indentation, strings that would read as another type quoted).
//!
//! ## Guarantees
//! - A body that is a JSON object is passed through as it is (JSON is YAML; kubectl and
//!   client libraries send JSON), so everything the JSON path checks (duplicate fields, strict
//!   field validation) applies to it unchanged.
//! - Reading is bounded as server-side apply's YAML is ([`crate::apply::config`]): nesting
//!   beyond 64 levels, and aliases expanding the document past twice the body's length in
//!   nodes or scalar bytes (an alias bomb, a large string aliased many times), are 400 before
//!   any large value is built, in go-yaml's words (`yaml: document contains excessive
//!   aliasing`, `yaml: line N: exceeded max depth of 64`: [`crate::go_yaml`]).
//! - A body's numbers are converted as sigs.k8s.io/yaml's `YAMLToJSON` writes them (go-yaml
//!   reads a float64, Go's `json.Marshal` writes it: `1.0` is `1`, `-0.0` `-0`, `1.50` `1.5`),
//!   so a built-in kind's integer field takes `replicas: 1.0` and quotes `1.5` as kube does;
//!   an integer past int64 that uint64 holds keeps its digits, as go-yaml reads a uint64; a
//!   plain number past float64's range (`1e400`) is the string go-yaml keeps it as
//!   ([`crate::go_yaml::past_float64_quoted`]).
//! - Converting an answer never changes what it says: the YAML reads back as the same JSON
//!   value (tested), and an answer that is not JSON is left alone. Numbers are written as
//!   kube's `JSONToYAML` writes them (go-yaml v2 reads the JSON, then writes it): an integer
//!   of int64 or uint64 as its digits, any other number as a float64 in Go's `%g` layout
//!   (`strconv.FormatFloat(f, 'g', -1, 64)`: `1e+20` for the JSON `100000000000000000000`,
//!   `1e+21`, `0.1`, `1e-07`, `1.2345675e+06`). An object nested as deep as
//!   a stored one may be ([`crate::go_json::parse_stored`]: its managed fields nest deeper
//!   than any body) is converted too, on its own stack (before, it was answered as JSON),
//!   within the bound its caller gives on the YAML's size ([`yaml_from_json`]: block style
//!   indents each level, so nesting makes the text grow as the square of the depth).

use serde_json::Value;

use crate::apply::config::read_yaml;
use crate::error::ApiError;

/// The YAML media type.
pub const YAML_MEDIA_TYPE: &str = "application/yaml";

/// The JSON of a create or update body sent as `application/yaml` (see the module docs).
///
/// # Errors
/// 400 BadRequest, `error converting YAML to JSON: yaml: ...` with the parser's line, for
/// YAML that does not parse, is not valid UTF-8, or breaks the reading bounds.
pub fn json_from_yaml_body(body: &[u8]) -> Result<Vec<u8>, ApiError> {
    let first = body.iter().find(|b| !b.is_ascii_whitespace());
    if first == Some(&b'{') && serde_json::from_slice::<serde::de::IgnoredAny>(body).is_ok() {
        return Ok(body.to_vec());
    }
    let value = read_yaml(body, "")?;
    // Numbers as Go's `json.Marshal` writes go-yaml's: a float64 in `floatEncoder`'s text
    // (`1.0` is `1`, `1e2` `100`, `1.50` `1.5`, `-0.0` `-0`), which the typed decoder then
    // reads as kube's does (`replicas: 1.0` in YAML is 1; `1.5` is refused as `number 1.5`);
    // an integer past int64 that uint64 holds as its digits (go-yaml reads it as a uint64:
    // `9223372036854775808`), one past uint64 as the float64 go-yaml reads it
    // (`18446744073709552000`).
    let mut json = Vec::with_capacity(body.len());
    watchkeeper_core::order::write_object_marshalled(&mut json, &value);
    Ok(json)
}

/// Why an answer is not converted to YAML ([`yaml_from_json`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotYaml {
    /// It is not JSON: it is answered as it is.
    NotJson,
    /// Its YAML would pass the bound given: block style indents each level, so an object
    /// nested `d` levels deep takes about `d²` bytes of YAML (10,000 levels of maps: 100 MB,
    /// from a 50 KB object).
    Larger,
}

/// `json` as YAML (see the module docs), at most `max_bytes` of it.
///
/// # Errors
/// [`NotYaml`]: not JSON, or its YAML larger than `max_bytes` (the writing stops there).
pub fn yaml_from_json(json: &[u8], max_bytes: usize) -> Result<Vec<u8>, NotYaml> {
    let value: Value = crate::go_json::parse_stored(json).map_err(|_| NotYaml::NotJson)?;
    stacker::grow(WRITE_STACK, || {
        let floats = std::cell::RefCell::new(Vec::new());
        let marked = write_bounded(
            &Marked {
                value: &value,
                floats: &floats,
            },
            max_bytes,
        )?;
        let floats = floats.into_inner();
        if floats.is_empty() {
            return Ok(marked.into_bytes());
        }
        match unmark(&marked, &floats) {
            Some(text) => Ok(text.into_bytes()),
            // A string held a marker's digits: the writer's own float text, never a wrong one.
            None => write_bounded(&value, max_bytes).map(String::into_bytes),
        }
    })
}

/// `value` in YAML, at most `max_bytes` of it ([`yaml_from_json`]).
fn write_bounded<T: serde::Serialize>(value: &T, max_bytes: usize) -> Result<String, NotYaml> {
    let mut out = Bounded {
        text: String::new(),
        max_bytes,
        over: false,
    };
    match serde_saphyr::to_fmt_writer(&mut out, value) {
        Ok(()) => Ok(out.text),
        Err(_) if out.over => Err(NotYaml::Larger),
        Err(_) => Err(NotYaml::NotJson),
    }
}

/// A YAML writer's output, refused past `max_bytes` ([`yaml_from_json`]).
struct Bounded {
    text: String,
    max_bytes: usize,
    over: bool,
}

impl std::fmt::Write for Bounded {
    fn write_str(&mut self, piece: &str) -> std::fmt::Result {
        if self.text.len().saturating_add(piece.len()) > self.max_bytes {
            self.over = true;
            return Err(std::fmt::Error);
        }
        self.text.push_str(piece);
        Ok(())
    }

    /// One character without `write_str`'s UTF-8 encoding and copy: the writer indents
    /// character by character, and an answer nested `d` levels holds `d²` bytes of
    /// indentation.
    fn write_char(&mut self, c: char) -> std::fmt::Result {
        if self.text.len().saturating_add(c.len_utf8()) > self.max_bytes {
            self.over = true;
            return Err(std::fmt::Error);
        }
        self.text.push(c);
        Ok(())
    }
}

/// The first marker of a float in the YAML writer's text ([`Marked`]): `2^127`, 39 digits,
/// past any integer a JSON value holds (serde_json's are at most `u64::MAX`, 20 digits).
const FLOAT_MARKER: u128 = 1 << 127;

/// A value written for the YAML writer with each float replaced by the integer
/// [`FLOAT_MARKER`]` + n` (its index in `floats`), which the writer writes as plain digits;
/// [`unmark`] puts go-yaml's text of the float in its place (the writer has no way to write a
/// scalar's text as given, and writes floats its own way: `1.0e+20`, where go-yaml writes
/// `1e+20`).
struct Marked<'a> {
    value: &'a Value,
    floats: &'a std::cell::RefCell<Vec<f64>>,
}

impl serde::Serialize for Marked<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap as _, SerializeSeq as _};
        let marked = |value| Marked {
            value,
            floats: self.floats,
        };
        match self.value {
            Value::Number(number) if number.is_f64() => {
                let mut floats = self.floats.borrow_mut();
                let marker = FLOAT_MARKER + floats.len() as u128;
                floats.push(number.as_f64().unwrap_or_default());
                serializer.serialize_u128(marker)
            }
            Value::Array(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(&marked(item))?;
                }
                seq.end()
            }
            Value::Object(map) => {
                let mut out = serializer.serialize_map(Some(map.len()))?;
                for (key, item) in map {
                    out.serialize_entry(key, &marked(item))?;
                }
                out.end()
            }
            other => other.serialize(serializer),
        }
    }
}

/// `text` with the markers of [`Marked`] replaced by go-yaml's text of their floats
/// (`strconv.FormatFloat(f, 'g', -1, 64)`: go-yaml reads a JSON number that is not an integer
/// of int64 or uint64 as a float64 and writes it so: `1e+20`, `0.1`, `1e-07`). A marker is
/// such digits as a whole plain scalar (after `: ` or `- `, ending its line; a string of
/// digits alone is quoted); `None` unless those are exactly the floats' markers, in order (a
/// line of a block string could hold one).
fn unmark(text: &str, floats: &[f64]) -> Option<String> {
    let marker = FLOAT_MARKER.to_string();
    let prefix = &marker[..30];
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut index = 0;
    while let Some(at) = rest.find(prefix) {
        let digits = rest[at..].bytes().take_while(u8::is_ascii_digit).count();
        let end = at + digits;
        // A marker is a whole plain scalar: a map's value or a sequence's item, on its own line.
        let scalar = (rest[..at].ends_with(": ") || rest[..at].ends_with("- "))
            && matches!(rest.as_bytes().get(end), None | Some(b'\n'));
        if !scalar {
            out.push_str(&rest[..end]);
            rest = &rest[end..];
            continue;
        }
        let found: u128 = rest[at..end].parse().ok()?;
        if found != FLOAT_MARKER + index as u128 {
            return None;
        }
        out.push_str(&rest[..at]);
        out.push_str(&watchkeeper_core::gonum::format_g(*floats.get(index)?));
        rest = &rest[end..];
        index += 1;
    }
    (index == floats.len()).then(|| {
        out.push_str(rest);
        out
    })
}

/// The stack an answer is written as YAML on, in bytes (reserved, touched only as deep as the
/// writing goes: the writer recurses per level, and an object may nest as deep as a stored
/// one, [`crate::go_json::STORED_MAX_DEPTH`]).
const WRITE_STACK: usize = watchkeeper_core::stack::SEGMENT;

#[cfg(test)]
mod tests {
    use super::*;

    /// Goal: an answer's YAML is written up to the bound its caller gives, and refused past
    /// it (block style indents each level: nesting grows the text as the square of the depth).
    #[test]
    fn an_answer_s_yaml_is_bounded() {
        let json = format!("{}1{}", "{\"a\":".repeat(100), "}".repeat(100));
        let whole = yaml_from_json(json.as_bytes(), usize::MAX).unwrap();
        assert!(whole.len() > 10_000, "{}", whole.len());
        assert_eq!(
            yaml_from_json(json.as_bytes(), whole.len()),
            Ok(whole.clone())
        );
        assert_eq!(
            yaml_from_json(json.as_bytes(), whole.len() - 1),
            Err(NotYaml::Larger)
        );
    }

    #[test]
    fn answers_read_back_as_the_same_json() {
        let object = serde_json::json!({
            "kind": "ConfigMap", "apiVersion": "v1",
            "metadata": {"name": "x", "labels": {"a": "1", "on": "yes"}, "annotations": {},
                "managedFields": [{"manager": "m", "fieldsV1": {"f:data": {".": {}, "f:k": {}}}}]},
            "data": {"multi": "line one\nline two\n", "num": "007", "t": "true", "long": "x ".repeat(100),
                "empty": "", "colon": "a: b", "dash": "- x", "null": "null"},
            "spec": {"replicas": 3, "ratio": 0.5, "on": true, "none": null, "list": [], "nested": [[1, 2], {"a": []}]}
        });
        let json = serde_json::to_vec(&object).unwrap();
        let yaml = yaml_from_json(&json, usize::MAX).expect("JSON");
        let text = String::from_utf8(yaml.clone()).unwrap();
        // Keys sorted, sequences at their key's indentation, empty collections in flow style.
        assert!(text.starts_with("apiVersion: v1\ndata:\n"), "{text}");
        assert!(text.contains("  managedFields:\n  - fieldsV1:\n"), "{text}");
        assert!(text.contains("annotations: {}"), "{text}");
        assert!(text.contains("list: []"), "{text}");
        let back = json_from_yaml_body(&yaml).expect("reads back");
        let back: Value = serde_json::from_slice(&back).unwrap();
        assert_eq!(back, object, "{text}");
        assert_eq!(
            yaml_from_json(b"not json", usize::MAX),
            Err(NotYaml::NotJson)
        );
    }

    /// Expected texts: sigs.k8s.io/yaml's `JSONToYAML` (go-yaml v2 reads the JSON and writes
    /// a float64 with `strconv.FormatFloat(f, 'g', -1, 64)`).
    #[test]
    fn numbers_in_answers_are_go_yaml_s_text() {
        let json = br#"{"a":1,"b":100000000000000000000,"c":1e+21,"d":0.1,"e":1e-7,"f":12345678901234567000,"g":1234567.5,"h":[2.5,-0.5],"i":"170141183460469231731687303715884105728"}"#;
        let yaml = String::from_utf8(yaml_from_json(json, usize::MAX).unwrap()).unwrap();
        assert_eq!(
            yaml,
            "a: 1\nb: 1e+20\nc: 1e+21\nd: 0.1\ne: 1e-07\nf: 12345678901234567000\ng: 1.2345675e+06\nh:\n- 2.5\n- -0.5\ni: \"170141183460469231731687303715884105728\"\n"
        );
        // A string holding a marker's digits never takes a float's place.
        let json = br#"{"a":0.5,"b":"x 170141183460469231731687303715884105728 y"}"#;
        let yaml = String::from_utf8(yaml_from_json(json, usize::MAX).unwrap()).unwrap();
        assert!(
            yaml.contains("b: x 170141183460469231731687303715884105728 y"),
            "{yaml}"
        );
        assert!(yaml.starts_with("a: 0.5\n"), "{yaml}");
    }

    /// Expected values: go-yaml v2's `resolve` (`strconv.ParseInt(plain, 0, 64)` after dropping
    /// underscores, then its float pattern), which sigs.k8s.io/yaml's `YAMLToJSON` writes.
    #[test]
    fn numbers_in_yaml_bodies_read_as_go_yaml_reads_them() {
        let body = b"a: 010\nb: 0x10\nc: 0o10\nd: 1_000\ne: +1\nf: .5\ng: 1.0\nh: 0b101\ni: 1e3\nj: -0\nk: 12345678901234567890\n";
        let json: Value = serde_json::from_slice(&json_from_yaml_body(body).unwrap()).unwrap();
        for (key, want) in [
            ("a", 8.0),
            ("b", 16.0),
            ("c", 8.0),
            ("d", 1000.0),
            ("e", 1.0),
            ("f", 0.5),
            ("g", 1.0),
            ("h", 5.0),
            ("i", 1000.0),
            ("j", 0.0),
            ("k", 12_345_678_901_234_567_890.0),
        ] {
            assert_eq!(json[key].as_f64(), Some(want), "{key}: {json}");
        }
    }

    #[test]
    fn bodies_in_yaml_convert_to_json_and_json_passes_through() {
        let body = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: yml  # a comment\ndata:\n  a: \"1\"\n  b: yes\n";
        let json: Value = serde_json::from_slice(&json_from_yaml_body(body).unwrap()).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "yml"}, "data": {"a": "1", "b": true}})
        );
        // JSON, even with a repeated key, is passed through untouched (the JSON path reports it).
        let raw = br#"{"metadata":{"name":"a","name":"b"}}"#;
        assert_eq!(json_from_yaml_body(raw).unwrap(), raw.to_vec());
        let error = json_from_yaml_body(b"a: [1, 2\nb: c").unwrap_err();
        assert_eq!(error.code, 400);
        assert!(
            error
                .message
                .starts_with("error converting YAML to JSON: yaml: "),
            "{}",
            error.message
        );
        let bomb = "a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n";
        assert_eq!(json_from_yaml_body(bomb.as_bytes()).unwrap_err().code, 400);
    }
}
