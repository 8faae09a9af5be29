//! The body of a server-side apply (`application/apply-patch+yaml`): YAML or JSON, as
//! kube-apiserver reads it (`yaml.Unmarshal` into a map, then the apply).
//!
//! ## Guarantees
//! - A JSON object is read as JSON (a JSON document is YAML, and this is the fast path that
//!   kubectl, client-go and kube-rs take: they send JSON under the YAML media type).
//! - Anything else is read as one YAML document (block or flow style, comments, anchors and
//!   aliases, quoted and block scalars) into the same JSON value; plain `yes`/`no`/`on`/`off`
//!   are booleans, as in kube-apiserver's YAML 1.1 reader. A document that is not a
//!   mapping is kube-apiserver's 400 `error decoding YAML: error unmarshaling JSON: while
//!   decoding JSON: json: cannot unmarshal array into Go value of type map[string]interface
//!   {}`; an empty or `null` document is an empty configuration (which the apply then refuses
//!   for its missing `apiVersion`, as kube-apiserver does); a syntax error is 400
//!   `error decoding YAML: ...` with the parser's line, on one line ([`crate::go_yaml`]).
//! - Parsing is bounded: nesting deeper than [`MAX_DEPTH`] levels is refused with 400, and so
//!   is alias expansion past what the body's own text could hold: more than twice its length
//!   plus [`ALIAS_SLACK_NODES`] nodes, or more than twice its length plus
//!   [`ALIAS_SLACK_SCALAR_BYTES`] bytes of scalars (and twice as many parser events as
//!   nodes). A document without aliases never comes near either
//!   (a node takes at least one byte of text, and no escape makes a scalar twice its text), so
//!   the value built from a body is bounded by the body's size, itself bounded by the request
//!   body limit: a 300-byte alias bomb is refused after a few thousand nodes, and a 100 KB
//!   string aliased a hundred times (10 MB of JSON) is refused before it is built. Both are
//!   go-yaml's `yaml: document contains excessive aliasing`, and nesting go-yaml's `exceeded
//!   max depth of 64` ([`crate::go_yaml`]).
//! - The reading runs on its own stack ([`READ_STACK`]), whatever stack its caller has left: a
//!   body nested to the bound never overflows a runtime worker's (it did, in a debug build,
//!   aborting the server on an apply of 127 nested flow sequences).

use serde_json::Value;

use crate::error::ApiError;

pub use crate::go_yaml::MAX_DEPTH;

/// Nodes aliases may add beyond twice the body's length (see the module docs).
pub const ALIAS_SLACK_NODES: usize = 4096;

/// Scalar bytes aliases may add beyond twice the body's length (see the module docs).
pub const ALIAS_SLACK_SCALAR_BYTES: usize = 64 << 10;

/// kube-apiserver's prefix of every undecodable apply body.
const PREFIX: &str = "error decoding YAML: ";

/// Reads an apply configuration from its body (see the module docs), its numbers as kube's
/// storage round trip leaves them ([`crate::go_json::ReadBack`]: kube reads the configuration
/// with Go's `encoding/json`, every number a float64, which a custom resource stores and
/// reads back so, and which a built-in kind's converter sets an integer field from when it is
/// integral: `replicas: 3.0` is 3).
///
/// # Errors
/// 400 BadRequest in kube-apiserver's words for YAML that does not parse or is not a mapping.
pub fn parse_configuration(body: &[u8]) -> Result<Value, ApiError> {
    let first = body.iter().find(|b| !b.is_ascii_whitespace());
    if first == Some(&b'{')
        && let Ok(value @ Value::Object(_)) = crate::go_json::parse_read_back(body)
    {
        return Ok(value);
    }
    let value = read_yaml_as::<crate::go_json::ReadBack>(body, PREFIX)?.0;
    let kind = match &value {
        Value::Object(_) => return Ok(value),
        Value::Null => return Ok(Value::Object(serde_json::Map::new())),
        Value::Array(_) => "array",
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Bool(_) => "bool",
    };
    Err(ApiError::bad_request(format!(
        "{PREFIX}error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {kind} into Go value of type map[string]interface {{}}"
    )))
}

/// One YAML document of `body` as a JSON value, within the reading bounds ([`options`]).
///
/// # Errors
/// 400 BadRequest, `{prefix}error converting YAML to JSON: yaml: ...` with the parser's line
/// (or `invalid UTF-8`), as kube-apiserver's YAML readers word it ([`crate::go_yaml`]).
pub(crate) fn read_yaml(body: &[u8], prefix: &str) -> Result<Value, ApiError> {
    read_yaml_as(body, prefix)
}

/// [`read_yaml`] into `T`.
fn read_yaml_as<T: serde::de::DeserializeOwned>(body: &[u8], prefix: &str) -> Result<T, ApiError> {
    let text = std::str::from_utf8(body).map_err(|e| {
        ApiError::bad_request(format!(
            "{prefix}error converting YAML to JSON: yaml: invalid UTF-8: {e}"
        ))
    })?;
    stacker::grow(READ_STACK, || {
        from_yaml(text, body.len()).map_err(|e| {
            ApiError::bad_request(format!(
                "{prefix}error converting YAML to JSON: {}",
                crate::go_yaml::cause(&e)
            ))
        })
    })
}

/// `text` read as YAML into `T` with the [`options`] of a body of `len` bytes. A plain number
/// past float64's range is the string go-yaml v2 reads it as (the reader refuses it as an
/// infinite float): the text is read once more with every such number quoted
/// ([`crate::go_yaml::past_float64_quoted`]), so at most twice.
fn from_yaml<T: serde::de::DeserializeOwned>(
    text: &str,
    len: usize,
) -> Result<T, serde_saphyr::Error> {
    serde_saphyr::from_str_with_options(text, options(len)).or_else(|error| {
        match crate::go_yaml::past_float64_quoted(text, &error) {
            Some(quoted) => serde_saphyr::from_str_with_options(&quoted, options(len)),
            None => Err(error),
        }
    })
}

/// The stack a YAML body is read on, in bytes: reserved, touched only as deep as the reading
/// goes. The reader recurses per level (a debug build takes about 20 KiB a level: the
/// [`MAX_DEPTH`] levels need more than a runtime worker's whole 2 MiB stack, and overflowed
/// it, aborting the server, when a request came deep into it).
const READ_STACK: usize = 16 << 20;

/// The YAML reader's options for a body of `len` bytes: [`MAX_DEPTH`], the expansion bounds
/// of the module docs, integers read as go-yaml v2 reads them (`010` octal; `0x10`, `0o10`,
/// `0b101`, `1_000` and `+1` too, as the reader does by default), and repeated keys handed to the value built (the last one wins, as in
/// kube-apiserver's non-strict `yaml.Unmarshal`; the strict reading reports them:
/// [`duplicate_keys`]).
fn options(len: usize) -> serde_saphyr::Options {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_depth = MAX_DEPTH;
    let twice = len.saturating_mul(2);
    // Bounded by the body alone: serde-saphyr's fixed 250,000 nodes and 1,000,000 events
    // refused a plain 3 MB manifest that kube-apiserver reads (go-yaml bounds the share of
    // alias-expanded nodes, not the document's own).
    budget.max_nodes = twice.saturating_add(ALIAS_SLACK_NODES);
    budget.max_events = budget
        .max_nodes
        .saturating_mul(2)
        .saturating_add(ALIAS_SLACK_NODES);
    budget.max_total_scalar_bytes = twice.saturating_add(ALIAS_SLACK_SCALAR_BYTES);
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    options.duplicate_keys = serde_saphyr::DuplicateKeyPolicy::PassThrough;
    // go-yaml v2 reads a plain integer with Go's `strconv.ParseInt(s, 0, 64)`: a leading `0`
    // is octal (`010` is 8), as in YAML 1.1.
    options.legacy_octal_numbers = true;
    options
}

/// The repeated keys of an apply body, as the strict YAML reader kube-apiserver runs under
/// `fieldValidation=Strict` or `Warn` (go-yaml v2's `UnmarshalStrict`) reports them: `line 10:
/// key "paused" already set in map`, one per repeated key, a nested one before the key whose
/// value holds it, the line that of the repeated key's value (1-based). Empty when there are
/// none or the body does not parse (then the apply has already refused it).
#[must_use]
pub fn duplicate_keys(body: &[u8]) -> Vec<String> {
    // The fast path: a JSON object without repeated keys (the common case) needs no YAML
    // reading.
    let first = body.iter().find(|b| !b.is_ascii_whitespace());
    if first == Some(&b'{')
        && crate::schema::duplicate_fields(body).is_some_and(|fields| fields.is_empty())
    {
        return Vec::new();
    }
    let Ok(text) = std::str::from_utf8(body) else {
        return Vec::new();
    };
    stacker::grow(READ_STACK, || {
        from_yaml::<Repeated>(text, body.len())
            .map(|repeated| repeated.0)
            .unwrap_or_default()
    })
}

/// The `already set in map` messages of a YAML value (see [`duplicate_keys`]).
struct Repeated(Vec<String>);

impl<'de> serde::Deserialize<'de> for Repeated {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(RepeatedVisitor)
    }
}

struct RepeatedVisitor;

impl<'de> serde::de::Visitor<'de> for RepeatedVisitor {
    type Value = Repeated;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Repeated, E> {
        Ok(Repeated(Vec::new()))
    }
    fn visit_i64<E>(self, _: i64) -> Result<Repeated, E> {
        Ok(Repeated(Vec::new()))
    }
    fn visit_u64<E>(self, _: u64) -> Result<Repeated, E> {
        Ok(Repeated(Vec::new()))
    }
    fn visit_f64<E>(self, _: f64) -> Result<Repeated, E> {
        Ok(Repeated(Vec::new()))
    }
    fn visit_str<E>(self, _: &str) -> Result<Repeated, E> {
        Ok(Repeated(Vec::new()))
    }
    fn visit_unit<E>(self) -> Result<Repeated, E> {
        Ok(Repeated(Vec::new()))
    }
    fn visit_none<E>(self) -> Result<Repeated, E> {
        Ok(Repeated(Vec::new()))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Repeated, A::Error> {
        let mut out = Vec::new();
        while let Some(Repeated(inner)) = seq.next_element::<Repeated>()? {
            out.extend(inner);
        }
        Ok(Repeated(out))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Repeated, A::Error> {
        let mut out = Vec::new();
        let mut seen = std::collections::HashSet::new();
        while let Some(key) = map.next_key::<Value>()? {
            let value: serde_saphyr::Spanned<Repeated> = map.next_value()?;
            out.extend(value.value.0);
            let text = match &key {
                // Go's `%#v` of the key.
                Value::String(text) => format!("{text:?}"),
                other => other.to_string(),
            };
            if !seen.insert(key) {
                out.push(format!(
                    "line {}: key {text} already set in map",
                    value.referenced.line()
                ));
            }
        }
        Ok(Repeated(out))
    }
}

/// The 400 an apply body with repeated keys gets under `fieldValidation=Strict`, after the
/// apply itself succeeded: `error strict decoding YAML: error converting YAML to JSON: yaml:
/// unmarshal errors:` and one indented line per key.
#[must_use]
pub fn duplicate_keys_error(duplicates: &[String]) -> ApiError {
    ApiError::bad_request(format!(
        "error strict decoding YAML: error converting YAML to JSON: yaml: unmarshal errors:\n  {}",
        duplicates.join("\n  ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_and_yaml_give_the_same_configuration() {
        let json =
            br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"a":"1"}}"#;
        let yaml = b"# a comment\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  a: \"1\"\n";
        let flow = b"{apiVersion: v1, kind: ConfigMap, metadata: {name: c}, data: {a: '1'}}";
        let expected = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}});
        for body in [&json[..], &yaml[..], &flow[..]] {
            assert_eq!(parse_configuration(body).unwrap(), expected);
        }
    }

    /// go-yaml v2 keeps a plain number past float64's range as the string it is (its
    /// `ParseFloat` fails: `resolve.go`), wherever it stands; an explicit infinity stays
    /// refused, and so does a number past float64 with a `!!float` tag.
    #[test]
    fn yaml_numbers_past_float64_are_the_strings_go_yaml_reads() {
        let yaml = b"a: 1e400\nb: [-1e400, .5e400, 1e300, '1e400']\nc:\n  - +1_0e400 # a comment\n  - &x 1e999\n  - *x\nd: {e: 1E400}\nf: 1e-400\n";
        assert_eq!(
            read_yaml(yaml, "").unwrap(),
            json!({"a": "1e400", "b": ["-1e400", ".5e400", 1e300, "1e400"],
                "c": ["+1_0e400", "1e999", "1e999"], "d": {"e": "1E400"}, "f": 0.0})
        );
        let digits = format!("n: {}\n", "9".repeat(400));
        assert_eq!(
            read_yaml(digits.as_bytes(), "").unwrap(),
            json!({"n": "9".repeat(400)})
        );
        for refused in [
            &b"a: .inf\nb: 1e400\n"[..],
            b"a: 1e400\nb: -.Inf\n",
            b"a: !!float 1e400\n",
        ] {
            assert!(
                read_yaml(refused, "").is_err(),
                "{}",
                String::from_utf8_lossy(refused)
            );
        }
    }

    #[test]
    fn yaml_scalars_lists_anchors_and_block_text() {
        let yaml = b"apiVersion: apps/v1\nkind: Deployment\nspec:\n  replicas: 3\n  paused: false\n  template: &t\n    metadata:\n      labels: {app: web}\n  x: *t\n  script: |\n    line one\n    line two\n  ports:\n  - 80\n  - 443\n  ratio: 0.5\n  nothing: null\n  word: yes\n";
        let value = parse_configuration(yaml).unwrap();
        assert_eq!(value["spec"]["replicas"], json!(3));
        assert_eq!(value["spec"]["paused"], json!(false));
        assert_eq!(value["spec"]["x"], value["spec"]["template"]);
        assert_eq!(value["spec"]["script"], json!("line one\nline two\n"));
        assert_eq!(value["spec"]["ports"], json!([80, 443]));
        assert_eq!(value["spec"]["ratio"], json!(0.5));
        assert_eq!(value["spec"]["nothing"], Value::Null);
        assert_eq!(
            value["spec"]["word"],
            json!(true),
            "YAML 1.1, as kube-apiserver"
        );
    }

    #[test]
    fn empty_and_null_documents_are_empty_configurations() {
        for body in [
            &b""[..],
            b"   \n",
            b"null\n",
            b"---\n",
            b"# only a comment\n",
        ] {
            assert_eq!(parse_configuration(body).unwrap(), json!({}), "{body:?}");
        }
    }

    #[test]
    fn errors_are_400_in_kube_apiservers_words() {
        let error = parse_configuration(b"- a\n- b\n").unwrap_err();
        assert_eq!(error.code, 400);
        assert_eq!(
            error.message,
            "error decoding YAML: error unmarshaling JSON: while decoding JSON: json: cannot unmarshal array into Go value of type map[string]interface {}"
        );
        let error = parse_configuration(b"just text").unwrap_err();
        assert!(
            error.message.contains("cannot unmarshal string"),
            "{}",
            error.message
        );
        for bad in [
            &b"apiVersion: v1\nkind: [ConfigMap\n"[..],
            b"a: b: c\n",
            b"{\"a\": 1,",
            b"a:\n\tb: 1\n",
            b"\xff\xfe: x",
        ] {
            let error = parse_configuration(bad).unwrap_err();
            assert_eq!(error.code, 400, "{bad:?}");
            assert_eq!(error.reason, "BadRequest");
            assert!(
                error
                    .message
                    .starts_with("error decoding YAML: error converting YAML to JSON: yaml: "),
                "{}",
                error.message
            );
            assert!(!error.message.contains('\n'), "{}", error.message);
        }
    }

    #[test]
    fn nesting_up_to_the_limit_is_read() {
        let nested = format!(
            "{}x{}",
            "[".repeat(MAX_DEPTH - 2),
            "]".repeat(MAX_DEPTH - 2)
        );
        assert!(parse_configuration(format!("a: {nested}").as_bytes()).is_ok());
    }

    #[test]
    fn deep_nesting_and_alias_bombs_are_refused() {
        let deep = format!(
            "{}x{}",
            "[".repeat(MAX_DEPTH + 10),
            "]".repeat(MAX_DEPTH + 10)
        );
        let error = parse_configuration(format!("a: {deep}").as_bytes()).unwrap_err();
        assert_eq!(error.code, 400);
        let mut bomb = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for level in 1..12 {
            let previous = format!("*a{}", level - 1);
            let items = [previous.as_str(); 10].join(", ");
            bomb.push_str(&format!("a{level}: &a{level} [{items}]\n"));
        }
        let error = parse_configuration(bomb.as_bytes()).unwrap_err();
        assert_eq!(error.code, 400, "10^12 expanded nodes are refused");
    }
    /// A `text` of `count` items joined by `separator`.
    fn repeat_joined(item: &str, count: usize, separator: &str) -> String {
        vec![item; count].join(separator)
    }

    #[test]
    fn aliases_may_not_expand_a_body_past_twice_its_size() {
        // A 100 KB string aliased 99 times: 10 MB of JSON from a 100 KB body (serde-saphyr's
        // own budget lets 64 MiB through).
        let big = "x".repeat(100_000);
        let refs = repeat_joined("*s", 99, ", ");
        let error =
            parse_configuration(format!("s: &s {big}\nrefs: [{refs}]\n").as_bytes()).unwrap_err();
        assert_eq!(error.code, 400);
        assert_eq!(
            error.message,
            "error decoding YAML: error converting YAML to JSON: yaml: document contains excessive aliasing"
        );
        // A 300-byte tree of aliases: 9^5 leaves (within serde-saphyr's 250,000 nodes).
        let mut tree = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x]\n");
        for level in 1..5 {
            let items = repeat_joined(&format!("*a{}", level - 1), 9, ", ");
            tree.push_str(&format!("a{level}: &a{level} [{items}]\n"));
        }
        let error = parse_configuration(tree.as_bytes()).unwrap_err();
        assert_eq!(error.code, 400);
        assert_eq!(
            error.message,
            "error decoding YAML: error converting YAML to JSON: yaml: document contains excessive aliasing"
        );
        // Anchors as manifests use them are read, and the aliases expanded.
        let labels = "labels: &l {app: web, tier: front, team: a}\n";
        let uses = (0..5).map(|i| format!("u{i}: *l\n")).collect::<String>();
        let value = parse_configuration(format!("{labels}{uses}").as_bytes()).unwrap();
        assert_eq!(
            value["u4"],
            json!({"app": "web", "tier": "front", "team": "a"})
        );
        let value = parse_configuration(format!("s: &s {big}\nt: *s\n").as_bytes()).unwrap();
        assert_eq!(value["t"].as_str().map(str::len), Some(100_000));
    }

    #[test]
    fn documents_without_aliases_stay_within_the_expansion_bounds() {
        // The densest shapes: a node per byte (a flow map of keys with null values, a block
        // sequence of nulls), and the one escape that grows (`\L`, two bytes to three).
        let keys = (0..60_000).map(|i| format!("k{i}")).collect::<Vec<_>>();
        let flow_map = format!("{{{}}}", keys.join(","));
        let value = parse_configuration(format!("a: {flow_map}\n").as_bytes()).unwrap();
        assert_eq!(
            value["a"].as_object().map(serde_json::Map::len),
            Some(60_000)
        );
        let nulls = "a:\n".to_owned() + &"-\n".repeat(100_000);
        let value = parse_configuration(nulls.as_bytes()).unwrap();
        assert_eq!(value["a"].as_array().map(Vec::len), Some(100_000));
        let escapes = format!("a: \"{}\"\n", "\\L".repeat(200_000));
        let value = parse_configuration(escapes.as_bytes()).unwrap();
        assert_eq!(value["a"].as_str().map(str::len), Some(600_000));
        let scalars = "a:\n".to_owned() + &"- 0\n".repeat(60_000);
        assert!(parse_configuration(scalars.as_bytes()).is_ok());
    }

    #[test]
    fn plain_documents_are_read_up_to_the_body_limit() {
        // Past serde-saphyr's fixed budget (250,000 nodes, 1,000,000 events), which refused
        // them as `excessive aliasing`; kube-apiserver reads them (go-yaml bounds the share of
        // nodes aliases add, not the document's own). 3 MB: the request body limit's size.
        let items = "a:\n".to_owned() + &"- 1\n".repeat(750_000);
        let value = parse_configuration(items.as_bytes()).unwrap();
        assert_eq!(value["a"].as_array().map(Vec::len), Some(750_000));
        let map = (0..270_000).fold(String::from("a:\n"), |mut text, i| {
            text.push_str(&format!("  k{i}: v\n"));
            text
        });
        assert!(map.len() > 3_000_000, "{}", map.len());
        let value = read_yaml(map.as_bytes(), "").unwrap();
        assert_eq!(
            value["a"].as_object().map(serde_json::Map::len),
            Some(270_000)
        );
    }

    #[test]
    fn repeated_keys_are_read_last_wins_and_reported_with_their_lines() {
        // As kube-apiserver's field validation tests read theirs: the line of the repeated key.
        let yaml = b"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\n  labels:\n    app: nginx\nspec:\n  selector:\n    matchLabels: {app: nginx}\n  paused: true\n  paused: false\n";
        let value = parse_configuration(yaml).unwrap();
        assert_eq!(value["spec"]["paused"], json!(false));
        assert_eq!(
            duplicate_keys(yaml),
            ["line 11: key \"paused\" already set in map"]
        );
        let nested = b"a:\n  b: 1\n  c:\n    d: 1\n    d: 2\n  b: 2\n";
        assert_eq!(
            duplicate_keys(nested),
            [
                "line 5: key \"d\" already set in map",
                "line 6: key \"b\" already set in map"
            ]
        );
        let json = b"{\n  \"a\": 1,\n  \"a\": 2\n}";
        assert_eq!(parse_configuration(json).unwrap(), json!({"a": 2}));
        assert_eq!(
            duplicate_keys(json),
            ["line 3: key \"a\" already set in map"]
        );
        assert!(duplicate_keys(b"{\"a\": {\"b\": 1}}").is_empty());
        // A block value's line is that of its first entry, as go-yaml's node for it.
        assert_eq!(
            duplicate_keys(b"a:\n  x: 1\na:\n\n  y: 2\nb:\n- 1\nb:\n- 2\n"),
            [
                "line 5: key \"a\" already set in map",
                "line 9: key \"b\" already set in map"
            ]
        );
        assert!(duplicate_keys(b"a: 1\nb: [1, 1]\n").is_empty());
        assert_eq!(
            duplicate_keys_error(&duplicate_keys(nested)).message,
            "error strict decoding YAML: error converting YAML to JSON: yaml: unmarshal errors:\n  line 5: key \"d\" already set in map\n  line 6: key \"b\" already set in map"
        );
    }
}
