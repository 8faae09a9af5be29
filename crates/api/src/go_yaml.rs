//! The cause of a YAML body that does not read, in go-yaml's words where kube-apiserver's
//! reader (sigs.k8s.io/yaml over go-yaml v2) has words for it.
//!
//! ## Guarantees
//! - Aliases that expand past the reading bounds ([`crate::apply::config`]: nodes or scalar
//!   bytes past what the body's own text could hold) are go-yaml's `yaml: document contains
//!   excessive aliasing`, without a line, as go-yaml reports it.
//! - Nesting past the bound is go-yaml's `yaml: line N: exceeded max depth of M` (no `line N:
//!   ` on the first line, as go-yaml omits it there), with this server's bound for `M`
//!   ([`MAX_DEPTH`]; go-yaml's is 10,000), whether the budget or the
//!   parser's own recursion limit caught it.
//! - Any other error is `yaml: line N: <the parser's message>` on one line: never the
//!   parser's source snippet, which quoted up to a screen of the body's text back.
//! - A plain number past float64's range (`1e400`), which the reader refuses as an infinite
//!   float, is read as the string go-yaml's resolver leaves it ([`past_float64_quoted`]: the
//!   body is read a second time, with such numbers quoted; never more).

use serde_saphyr::budget::BudgetBreach;

/// Deepest nesting of a YAML body (serde-saphyr's default, which keeps the parser's
/// recursion within a worker thread's stack; a JSON body keeps serde_json's limit of 128).
pub const MAX_DEPTH: usize = 64;

/// go-yaml's text for `error` (see the module docs), starting with `yaml: `.
#[must_use]
pub fn cause(error: &serde_saphyr::Error) -> String {
    let error = original(error);
    let line = error.location().map_or(0, |location| location.line());
    let at = if line > 1 {
        format!("line {line}: ")
    } else {
        String::new()
    };
    let depth = || format!("yaml: {at}exceeded max depth of {MAX_DEPTH}");
    match error {
        serde_saphyr::Error::Budget { breach, .. } => match breach {
            BudgetBreach::Depth { .. } => depth(),
            BudgetBreach::Nodes { .. }
            | BudgetBreach::ScalarBytes { .. }
            | BudgetBreach::Aliases { .. }
            | BudgetBreach::AliasAnchorRatio { .. } => EXCESSIVE_ALIASING.to_owned(),
            _ => format!("yaml: {at}{}", message(error)),
        },
        serde_saphyr::Error::AliasExpansionLimitExceeded { .. }
        | serde_saphyr::Error::AliasReplayLimitExceeded { .. } => EXCESSIVE_ALIASING.to_owned(),
        _ => {
            let text = message(error);
            if text.contains("recursion limit exceeded") {
                depth()
            } else {
                format!("yaml: {at}{text}")
            }
        }
    }
}

/// The error under the parser's wrappers (a source snippet, the alias it was found through).
fn original(mut error: &serde_saphyr::Error) -> &serde_saphyr::Error {
    while let serde_saphyr::Error::AliasError { error: inner, .. }
    | serde_saphyr::Error::WithSnippet { error: inner, .. } = error
    {
        error = inner;
    }
    error
}

/// `text` with every plain, untagged scalar that reads as a number past float64's range
/// (`1e400`, `-1e400`, `.5e400`, `1_0e400`, 400 digits) double-quoted, when `error` is the
/// reader's refusal of such a number; `None` for any other error.
///
/// go-yaml v2 resolves a plain scalar with `strconv.ParseFloat` when it looks like a float
/// (`resolve.go`: `yamlStyleFloat`), and one whose parse fails, out of range, stays the string
/// it is (`1e400` is `"1e400"`); serde-saphyr reads it as an infinite float, which it refuses.
/// Quoted, such a scalar is that string to any reader. The explicit infinities and NaN
/// (`.inf`, `-.Inf`, `.nan`) are floats to go-yaml too, which JSON cannot hold: they stay
/// refused. The scan is one pass of the parser's events over the text, without building a
/// value.
#[must_use]
pub fn past_float64_quoted(text: &str, error: &serde_saphyr::Error) -> Option<String> {
    use serde_saphyr::granit_parser::{Event, Parser, ScalarStyle};
    let serde_saphyr::Error::NonFiniteFloat { value, .. } = original(error) else {
        return None;
    };
    if !past_float64(value.trim()) {
        return None;
    }
    let mut out = String::with_capacity(text.len() + 2);
    let mut copied = 0;
    for event in Parser::new_from_str(text) {
        let Ok((event, span)) = event else {
            // The reading again reports it.
            break;
        };
        if let Event::Scalar(value, ScalarStyle::Plain, _, None) = event
            && past_float64(&value)
            && let Some(range) = span.byte_range()
            && range.start >= copied
            && text.get(range.clone()) == Some(value.as_ref())
        {
            out.push_str(&text[copied..range.start]);
            out.push('"');
            out.push_str(&value);
            out.push('"');
            copied = range.end;
        }
    }
    out.push_str(&text[copied..]);
    Some(out)
}

/// Whether a plain scalar is a number literal past float64's range, as go-yaml v2's resolver
/// reads it (underscores left out) and serde-saphyr reads it as infinite.
fn past_float64(text: &str) -> bool {
    let unsigned = text.strip_prefix(['+', '-']).unwrap_or(text);
    unsigned.bytes().any(|byte| byte.is_ascii_digit())
        && text.bytes().all(|byte| {
            byte.is_ascii_digit() || matches!(byte, b'+' | b'-' | b'.' | b'_' | b'e' | b'E')
        })
        && text
            .replace('_', "")
            .parse::<f64>()
            .is_ok_and(f64::is_infinite)
}

/// go-yaml's refusal of an alias bomb (`decode.go`).
const EXCESSIVE_ALIASING: &str = "yaml: document contains excessive aliasing";

/// The parser's message of `error` on one line, without its location prefix.
fn message(error: &serde_saphyr::Error) -> String {
    let text = error.to_string();
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let text = text.strip_prefix("error: ").unwrap_or(&text);
    // `line 7 column 20: ...` and `... at line 2, column 103`: the line is given go-yaml's
    // way by the caller.
    let text = match text.split_once(": ") {
        Some((place, rest)) if place.starts_with("line ") && place.contains(" column ") => rest,
        _ => text,
    };
    match text.rsplit_once(" at line ") {
        Some((message, place)) if place.contains(", column ") => message.to_owned(),
        _ => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use crate::apply::config::read_yaml;

    fn refusal(body: &str) -> String {
        read_yaml(body.as_bytes(), "").unwrap_err().message
    }

    #[test]
    fn bombs_and_depth_in_go_yaml_s_words() {
        let mut laughs = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n".to_owned();
        for level in 1..9u8 {
            let name = char::from(b'a' + level);
            let previous = char::from(b'a' + level - 1);
            let items = vec![format!("*{previous}"); 9].join(", ");
            laughs.push_str(&format!("{name}: &{name} [{items}]\n"));
        }
        let large = format!(
            "s: &s {}\nrefs: [{}]\n",
            "x".repeat(100_000),
            vec!["*s"; 100].join(", ")
        );
        for body in [&laughs, &large] {
            assert_eq!(
                refusal(body),
                "error converting YAML to JSON: yaml: document contains excessive aliasing"
            );
        }
        let flow = format!("kind: x\nx: {}{}\n", "[".repeat(100), "]".repeat(100));
        assert_eq!(
            refusal(&flow),
            "error converting YAML to JSON: yaml: line 2: exceeded max depth of 64"
        );
        assert_eq!(
            refusal(&"- ".repeat(20_000)),
            "error converting YAML to JSON: yaml: exceeded max depth of 64"
        );
        let deep_flow = format!("kind: x\nx: {}\n", "[".repeat(20_000));
        assert_eq!(
            refusal(&deep_flow),
            "error converting YAML to JSON: yaml: line 2: exceeded max depth of 64"
        );
    }

    #[test]
    fn other_errors_are_one_line_without_the_body_s_text() {
        let body = format!("a: 1\nsecret: {}\nb: [c\nd: e\n", "s".repeat(300));
        let message = refusal(&body);
        assert!(
            message.starts_with("error converting YAML to JSON: yaml: line "),
            "{message}"
        );
        assert!(!message.contains('\n'), "{message}");
        assert!(!message.contains("sss"), "{message}");
    }
}
