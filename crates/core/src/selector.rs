//! Kubernetes label and field selectors: parsing with clear errors, and matching.
//!
//! Label selectors accept the full Kubernetes syntax: `k=v`, `k==v`, `k!=v`, `k in (a,b)`,
//! `k notin (a,b)`, `k` (exists) and `!k` (does not exist), comma-separated and ANDed. Field
//! selectors accept `f=v`, `f==v` and `f!=v` with `\`-escapes for `,`, `=`, `!` and `\` in values.
//! Which fields a resource supports is the caller's business (the server validates names); the
//! core only matches.

use std::collections::BTreeMap;
use std::fmt;

use crate::object::Attributes;

/// What a selector reads: the value of a label or field, if the object has it.
pub trait Lookup {
    /// The value of `key`.
    fn lookup(&self, key: &str) -> Option<&str>;
}

impl Lookup for BTreeMap<String, String> {
    fn lookup(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

impl Lookup for Attributes {
    fn lookup(&self, key: &str) -> Option<&str> {
        self.get(key)
    }
}

/// A selector that failed to parse, with a message a person understands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SelectorError {
    /// What is wrong, e.g. `unable to parse requirement: found '(', expected: ...`.
    pub message: String,
}

impl fmt::Display for SelectorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for SelectorError {}

fn error(message: impl Into<String>) -> SelectorError {
    SelectorError {
        message: message.into(),
    }
}

/// One operator of a label requirement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LabelOperator {
    /// `k=v`, `k==v`, `k in (v...)`: the label is present with one of the values.
    In(Vec<String>),
    /// `k!=v`, `k notin (v...)`: the label is absent or has none of the values.
    NotIn(Vec<String>),
    /// `k`: the label is present.
    Exists,
    /// `!k`: the label is absent.
    DoesNotExist,
}

/// One requirement of a label selector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LabelRequirement {
    /// The label key.
    pub key: String,
    /// What the label must satisfy.
    pub operator: LabelOperator,
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<LabelRequirement>,
}

impl LabelSelector {
    /// The selector that matches everything.
    #[must_use]
    pub fn everything() -> LabelSelector {
        LabelSelector::default()
    }

    /// Whether this selector matches every object.
    #[must_use]
    pub fn is_everything(&self) -> bool {
        self.requirements.is_empty()
    }

    /// The requirements, ANDed.
    #[must_use]
    pub fn requirements(&self) -> &[LabelRequirement] {
        &self.requirements
    }

    /// Parses the Kubernetes label selector syntax.
    ///
    /// # Errors
    /// A [`SelectorError`] naming the offending requirement.
    pub fn parse(input: &str) -> Result<LabelSelector, SelectorError> {
        let mut requirements = Vec::new();
        for part in split_top_level(input)? {
            let part = part.trim();
            if part.is_empty() {
                if input.trim().is_empty() {
                    continue;
                }
                return Err(error(format!(
                    "invalid label selector {input:?}: empty requirement"
                )));
            }
            requirements.push(parse_label_requirement(part)?);
        }
        Ok(LabelSelector { requirements })
    }

    /// Whether `labels` satisfy every requirement.
    #[must_use]
    pub fn matches(&self, labels: &impl Lookup) -> bool {
        self.requirements.iter().all(|requirement| {
            let value = labels.lookup(&requirement.key);
            match &requirement.operator {
                LabelOperator::In(values) => value.is_some_and(|v| values.iter().any(|x| x == v)),
                LabelOperator::NotIn(values) => {
                    value.is_none_or(|v| !values.iter().any(|x| x == v))
                }
                LabelOperator::Exists => value.is_some(),
                LabelOperator::DoesNotExist => value.is_none(),
            }
        })
    }
}

/// The canonical text of the selector: requirements joined by `,`, single values as `k=v` and
/// `k!=v`, sets as `k in (a,b)` and `k notin (a,b)`. Parsing it gives back an equal selector.
impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, requirement) in self.requirements.iter().enumerate() {
            if index > 0 {
                f.write_str(",")?;
            }
            write!(f, "{requirement}")?;
        }
        Ok(())
    }
}

impl fmt::Display for LabelRequirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = &self.key;
        match &self.operator {
            LabelOperator::In(values) if values.len() == 1 => write!(f, "{key}={}", values[0]),
            LabelOperator::NotIn(values) if values.len() == 1 => {
                write!(f, "{key}!={}", values[0])
            }
            LabelOperator::In(values) => write!(f, "{key} in ({})", values.join(",")),
            LabelOperator::NotIn(values) => write!(f, "{key} notin ({})", values.join(",")),
            LabelOperator::Exists => f.write_str(key),
            LabelOperator::DoesNotExist => write!(f, "!{key}"),
        }
    }
}

/// Splits on commas that are not inside parentheses.
fn split_top_level(input: &str) -> Result<Vec<&str>, SelectorError> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (index, c) in input.char_indices() {
        match c {
            '(' => {
                if depth > 0 {
                    return Err(error(format!(
                        "invalid label selector {input:?}: nested parentheses"
                    )));
                }
                depth += 1;
            }
            ')' => {
                if depth == 0 {
                    return Err(error(format!(
                        "invalid label selector {input:?}: unmatched ')'"
                    )));
                }
                depth -= 1;
            }
            ',' if depth == 0 => {
                parts.push(&input[start..index]);
                start = index + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(error(format!(
            "invalid label selector {input:?}: unclosed '('"
        )));
    }
    parts.push(&input[start..]);
    Ok(parts)
}

fn parse_label_requirement(part: &str) -> Result<LabelRequirement, SelectorError> {
    if let Some(key) = part.strip_prefix('!') {
        let key = key.trim();
        validate_label_key(key)?;
        return Ok(LabelRequirement {
            key: key.to_owned(),
            operator: LabelOperator::DoesNotExist,
        });
    }
    for (token, negate) in [("!=", true), ("==", false), ("=", false)] {
        if let Some(index) = part.find(token) {
            let key = part[..index].trim();
            let value = part[index + token.len()..].trim();
            validate_label_key(key)?;
            validate_label_value(value)?;
            let values = vec![value.to_owned()];
            return Ok(LabelRequirement {
                key: key.to_owned(),
                operator: if negate {
                    LabelOperator::NotIn(values)
                } else {
                    LabelOperator::In(values)
                },
            });
        }
    }
    if let Some(open) = part.find('(') {
        let head = part[..open].trim();
        let close = part
            .rfind(')')
            .ok_or_else(|| error(format!("invalid requirement {part:?}: missing ')'")))?;
        if !part[close + 1..].trim().is_empty() {
            return Err(error(format!(
                "invalid requirement {part:?}: unexpected text after ')'"
            )));
        }
        let (key, negate) = if let Some(key) = head.strip_suffix(" notin") {
            (key.trim(), true)
        } else if let Some(key) = head.strip_suffix(" in") {
            (key.trim(), false)
        } else {
            return Err(error(format!(
                "invalid requirement {part:?}: expected 'in' or 'notin' before '('"
            )));
        };
        validate_label_key(key)?;
        let mut values = Vec::new();
        for value in part[open + 1..close].split(',') {
            let value = value.trim();
            validate_label_value(value)?;
            values.push(value.to_owned());
        }
        return Ok(LabelRequirement {
            key: key.to_owned(),
            operator: if negate {
                LabelOperator::NotIn(values)
            } else {
                LabelOperator::In(values)
            },
        });
    }
    for unsupported in [">", "<"] {
        if part.contains(unsupported) {
            return Err(error(format!(
                "invalid requirement {part:?}: operator {unsupported:?} is not supported in label selectors"
            )));
        }
    }
    let key = part.trim();
    if key.contains(char::is_whitespace) {
        return Err(error(format!(
            "invalid requirement {part:?}: expected one of =, ==, !=, in, notin"
        )));
    }
    validate_label_key(key)?;
    Ok(LabelRequirement {
        key: key.to_owned(),
        operator: LabelOperator::Exists,
    })
}

fn is_name_part(s: &str, max: usize) -> bool {
    !s.is_empty()
        && s.len() <= max
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric())
}

fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|label| {
            !label.is_empty()
                && label
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

fn validate_label_key(key: &str) -> Result<(), SelectorError> {
    let valid = match key.split_once('/') {
        Some((prefix, name)) => is_dns_subdomain(prefix) && is_name_part(name, 63),
        None => is_name_part(key, 63),
    };
    if valid {
        Ok(())
    } else {
        Err(error(format!(
            "invalid label key {key:?}: a valid label key is an optional DNS subdomain prefix and '/', then a name of at most 63 characters of [A-Za-z0-9_.-] that starts and ends with an alphanumeric character"
        )))
    }
}

fn validate_label_value(value: &str) -> Result<(), SelectorError> {
    if value.is_empty() || is_name_part(value, 63) {
        Ok(())
    } else {
        Err(error(format!(
            "invalid label value {value:?}: a valid label value is empty or at most 63 characters of [A-Za-z0-9_.-] that starts and ends with an alphanumeric character"
        )))
    }
}

/// One requirement of a field selector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldRequirement {
    /// The field path, e.g. `spec.nodeName`.
    pub field: String,
    /// The value compared against.
    pub value: String,
    /// `true` for `!=`.
    pub negated: bool,
}

/// A parsed field selector; the empty selector matches everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSelector {
    requirements: Vec<FieldRequirement>,
}

impl FieldSelector {
    /// The selector that matches everything.
    #[must_use]
    pub fn everything() -> FieldSelector {
        FieldSelector::default()
    }

    /// Whether this selector matches every object.
    #[must_use]
    pub fn is_everything(&self) -> bool {
        self.requirements.is_empty()
    }

    /// The requirements, ANDed.
    #[must_use]
    pub fn requirements(&self) -> &[FieldRequirement] {
        &self.requirements
    }

    /// The value of an exact (`=`) requirement on `field`, if there is one.
    #[must_use]
    pub fn exact(&self, field: &str) -> Option<&str> {
        self.requirements
            .iter()
            .find(|r| !r.negated && r.field == field)
            .map(|r| r.value.as_str())
    }

    /// Parses `f=v,f2!=v2`.
    ///
    /// # Errors
    /// A [`SelectorError`] naming the offending term.
    pub fn parse(input: &str) -> Result<FieldSelector, SelectorError> {
        let mut requirements = Vec::new();
        if input.trim().is_empty() {
            return Ok(FieldSelector { requirements });
        }
        for term in split_escaped(input, ',') {
            // kube's `fields.ParseSelector` texts: this one, and the escapes' below.
            let (field, value, negated) = split_field_term(&term).ok_or_else(|| {
                error(format!(
                    "invalid selector: '{input}'; can't understand '{term}'"
                ))
            })?;
            let field = field.trim();
            if field.is_empty()
                || !field.chars().all(|c| {
                    c.is_ascii_alphanumeric() || c == '.' || c == '_' || c == '-' || c == '/'
                })
            {
                return Err(error(format!(
                    "invalid field selector: invalid field name {field:?} in {term:?}"
                )));
            }
            let value = unescape(value.trim())
                .map_err(|message| error(format!("invalid field selector: {message}")))?;
            requirements.push(FieldRequirement {
                field: field.to_owned(),
                value,
                negated,
            });
        }
        Ok(FieldSelector { requirements })
    }

    /// Whether the object's fields satisfy every requirement (a missing field reads as empty).
    #[must_use]
    pub fn matches(&self, fields: &impl Lookup) -> bool {
        self.requirements.iter().all(|requirement| {
            let value = fields.lookup(&requirement.field).unwrap_or("");
            (value == requirement.value) != requirement.negated
        })
    }
}

/// The canonical text of the selector: `field=value` and `field!=value` joined by `,`, with
/// `\`, `,` and `=` in values escaped by a backslash. Parsing it gives back an equal selector.
impl fmt::Display for FieldSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, requirement) in self.requirements.iter().enumerate() {
            if index > 0 {
                f.write_str(",")?;
            }
            write!(f, "{requirement}")?;
        }
        Ok(())
    }
}

impl fmt::Display for FieldRequirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.field)?;
        f.write_str(if self.negated { "!=" } else { "=" })?;
        for c in self.value.chars() {
            if matches!(c, '\\' | ',' | '=') {
                f.write_str("\\")?;
            }
            write!(f, "{c}")?;
        }
        Ok(())
    }
}

/// Splits on `separator` not preceded by a backslash, keeping escapes in the parts.
fn split_escaped(input: &str, separator: char) -> Vec<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut escaped = false;
    for c in input.chars() {
        if escaped {
            current.push('\\');
            current.push(c);
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == separator {
            parts.push(std::mem::take(&mut current));
        } else {
            current.push(c);
        }
    }
    if escaped {
        current.push('\\');
    }
    parts.push(current);
    parts
}

/// Finds the first unescaped operator in a field term.
fn split_field_term(term: &str) -> Option<(&str, &str, bool)> {
    let bytes = term.as_bytes();
    let mut index = 0;
    while index < bytes.len() {
        match bytes[index] {
            b'\\' => index += 2,
            b'!' if bytes.get(index + 1) == Some(&b'=') => {
                return Some((&term[..index], &term[index + 2..], true));
            }
            b'=' => {
                let skip = if bytes.get(index + 1) == Some(&b'=') {
                    2
                } else {
                    1
                };
                return Some((&term[..index], &term[index + skip..], false));
            }
            _ => index += 1,
        }
    }
    None
}

/// Removes the backslashes of `\\`, `\,`, `\=` and `\!`. As Kubernetes' `UnescapeValue`, any
/// other escape and a trailing lone backslash are errors: accepting them silently (dropping the
/// backslash) made `f=a \` select the value `"a "`, which no selector text can express
/// once values are trimmed (found by the `selector_field` fuzz target).
fn unescape(value: &str) -> Result<String, String> {
    let mut out = String::with_capacity(value.len());
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some(next @ ('\\' | ',' | '=' | '!')) => out.push(next),
                Some(next) => return Err(format!("invalid escape sequence: \\{next}")),
                None => return Err("invalid escape sequence: \\".to_owned()),
            }
        } else {
            out.push(c);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn label_selector_full_syntax() {
        let selector = LabelSelector::parse(
            "app=web, tier!=db,env in (prod, staging),zone notin (z1),team,!legacy",
        )
        .unwrap();
        assert_eq!(selector.requirements().len(), 6);
        assert!(selector.matches(&labels(&[("app", "web"), ("env", "prod"), ("team", "a")])));
        assert!(!selector.matches(&labels(&[("app", "web"), ("env", "dev"), ("team", "a")])));
        assert!(!selector.matches(&labels(&[
            ("app", "web"),
            ("env", "prod"),
            ("team", "a"),
            ("legacy", "")
        ])));
        assert!(!selector.matches(&labels(&[("app", "web"), ("env", "prod")])));
        assert!(
            LabelSelector::parse("a==b")
                .unwrap()
                .matches(&labels(&[("a", "b")]))
        );
        assert!(LabelSelector::parse("").unwrap().is_everything());
        assert!(LabelSelector::parse("example.com/app=x").is_ok());
    }

    #[test]
    fn label_selector_errors_are_clear() {
        for bad in [
            "a=(", "a in b", "a in (b", "=b", "a=b,,c=d", "a > 3", "a b", "-a=b", "a=b c",
        ] {
            let err = LabelSelector::parse(bad).unwrap_err();
            assert!(!err.message.is_empty(), "{bad}");
        }
    }

    #[test]
    fn field_selector_parse_and_match() {
        let selector = FieldSelector::parse("spec.nodeName=n1,status.phase!=Failed").unwrap();
        assert_eq!(selector.exact("spec.nodeName"), Some("n1"));
        assert_eq!(selector.exact("status.phase"), None);
        assert!(selector.matches(&labels(&[
            ("spec.nodeName", "n1"),
            ("status.phase", "Running")
        ])));
        assert!(!selector.matches(&labels(&[
            ("spec.nodeName", "n1"),
            ("status.phase", "Failed")
        ])));
        assert!(!selector.matches(&labels(&[("status.phase", "Running")])));
        let escaped = FieldSelector::parse(r"metadata.name=a\,b").unwrap();
        assert_eq!(escaped.exact("metadata.name"), Some("a,b"));
        assert!(FieldSelector::parse("novalue").is_err());
        assert!(FieldSelector::parse("a b=c").is_err());
        assert!(
            FieldSelector::parse("metadata.name==x")
                .unwrap()
                .exact("metadata.name")
                == Some("x")
        );
    }
}
