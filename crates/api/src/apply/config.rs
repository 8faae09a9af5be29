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
//!   `error decoding YAML: ...` with the parser's line and column.
//! - Parsing is bounded: nesting deeper than [`MAX_DEPTH`] levels, and alias expansion beyond
//!   `serde-saphyr`'s default budget (an alias bomb), are refused with 400 before any large
//!   value is built; the body itself is already bounded by the request body limit.

use serde_json::Value;

use crate::error::ApiError;

/// Deepest nesting of a YAML configuration (serde-saphyr's default, which keeps the parser's
/// recursion within a worker thread's stack; a JSON body keeps serde_json's limit of 128).
pub const MAX_DEPTH: usize = 64;

/// kube-apiserver's prefix of every undecodable apply body.
const PREFIX: &str = "error decoding YAML: ";

/// Reads an apply configuration from its body (see the module docs).
///
/// # Errors
/// 400 BadRequest in kube-apiserver's words for YAML that does not parse or is not a mapping.
pub fn parse_configuration(body: &[u8]) -> Result<Value, ApiError> {
    let first = body.iter().find(|b| !b.is_ascii_whitespace());
    if first == Some(&b'{')
        && let Ok(value @ Value::Object(_)) = serde_json::from_slice::<Value>(body)
    {
        return Ok(value);
    }
    let text = std::str::from_utf8(body).map_err(|e| {
        ApiError::bad_request(format!(
            "{PREFIX}error converting YAML to JSON: yaml: invalid UTF-8: {e}"
        ))
    })?;
    let mut budget = serde_saphyr::Budget::default();
    budget.max_depth = MAX_DEPTH;
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    let value: Value = serde_saphyr::from_str_with_options(text, options).map_err(|e| {
        ApiError::bad_request(format!(
            "{PREFIX}error converting YAML to JSON: yaml: {}",
            one_line(&e.to_string())
        ))
    })?;
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

/// The parser's message on one line (it may draw the offending line under it).
fn one_line(message: &str) -> String {
    message
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
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
}
