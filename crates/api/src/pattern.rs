//! Schema `pattern`s in Go's RE2 syntax: translated where the `regex` crate reads Go's syntax
//! differently, compiled once and kept (at most [`PATTERNS_KEPT`], each at most
//! [`PATTERN_SIZE_MAX`] bytes compiled), matched in linear time. Used by the schema checks
//! ([`crate::structural`]), the CRD schema checks and CEL's `matches`/`find`/`findAll`.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, OnceLock};

use regex::Regex;

/// Compiled patterns kept between checks; past this many the kept set is emptied and starts
/// again (patterns come from stored CRDs, so a working set is far smaller).
pub const PATTERNS_KEPT: usize = 256;

/// The largest compiled program of one pattern, in bytes; a pattern needing more is invalid
/// (refused when its CRD is written, and a failure of the value checked against it).
pub const PATTERN_SIZE_MAX: usize = 1 << 20;

/// Compiles a schema's `pattern` as Go's `regexp.Compile` reads it.
///
/// # Errors
/// Why the pattern is not a valid (or is too large a) regular expression.
pub fn compile_pattern(pattern: &str) -> Result<Regex, String> {
    let translated = go_syntax(pattern);
    if let Some(repeat) = repeat_over_go_limit(&translated) {
        return Err(format!(
            "error parsing regexp: invalid repeat count: `{repeat}`"
        ));
    }
    regex::RegexBuilder::new(&translated)
        .size_limit(PATTERN_SIZE_MAX)
        .dfa_size_limit(PATTERN_SIZE_MAX)
        .build()
        .map_err(|error| match error {
            regex::Error::CompiledTooBig(limit) => {
                format!("error parsing regexp: expression too large (over {limit} bytes compiled)")
            }
            regex::Error::Syntax(text) => {
                // The parser's last line says what is wrong.
                let what = text.lines().last().unwrap_or_default().trim();
                format!(
                    "error parsing regexp: {}",
                    what.strip_prefix("error: ").unwrap_or(what)
                )
            }
            other => format!("error parsing regexp: {other}"),
        })
}

/// The kept compiled pattern (or its error) for `pattern`.
pub(crate) fn pattern(pattern: &str) -> Result<Arc<Regex>, String> {
    type Kept = HashMap<String, Result<Arc<Regex>, String>>;
    static KEPT: OnceLock<Mutex<Kept>> = OnceLock::new();
    let kept = KEPT.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(found) = kept
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .get(pattern)
    {
        return found.clone();
    }
    let compiled = compile_pattern(pattern).map(Arc::new);
    let mut kept = kept
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if kept.len() >= PATTERNS_KEPT {
        kept.clear();
    }
    kept.insert(pattern.to_owned(), compiled.clone());
    compiled
}

/// Rewrites Go (RE2) syntax where the `regex` crate reads it differently: Go's `\d`, `\s`,
/// `\w` and `\b` are ASCII (the crate's are Unicode); inside a bracket expression Go reads
/// `[` (other than `[:name:]`), `&` and `~` literally (the crate reads nested classes and set
/// operators there); Go quotes with `\Q…\E` and reads a `{` that starts no repeat (`a{`,
/// `a{,2}`) literally (the crate refuses both).
pub(crate) fn go_syntax(pattern: &str) -> String {
    const DIGIT: &str = "0-9";
    const SPACE: &str = r"\t\n\x0C\r ";
    const WORD: &str = "0-9A-Za-z_";
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut chars = pattern.chars().peekable();
    // Inside a bracket expression, and whether its first item is still to come (a `]` there
    // is literal).
    let mut class = false;
    let mut class_start = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let Some(next) = chars.next() else {
                    out.push('\\');
                    break;
                };
                let ascii = match next {
                    'd' => Some((DIGIT, false)),
                    'D' => Some((DIGIT, true)),
                    's' => Some((SPACE, false)),
                    'S' => Some((SPACE, true)),
                    'w' => Some((WORD, false)),
                    'W' => Some((WORD, true)),
                    _ => None,
                };
                match (ascii, class) {
                    (Some((set, false)), true) => out.push_str(set),
                    (Some((set, negated)), _) => {
                        out.push_str(if negated { "[^" } else { "[" });
                        out.push_str(set);
                        out.push(']');
                    }
                    (None, false) if matches!(next, 'b' | 'B') => {
                        let _ = write!(out, r"(?-u:\{next})");
                    }
                    (None, false) if next == 'Q' => {
                        // `\Q…\E`: literal text up to `\E` or the end.
                        let mut literal = String::new();
                        while let Some(inner) = chars.next() {
                            if inner == '\\' && chars.peek() == Some(&'E') {
                                chars.next();
                                break;
                            }
                            literal.push(inner);
                        }
                        out.push_str(&regex::escape(&literal));
                    }
                    (None, _) => {
                        out.push('\\');
                        out.push(next);
                        if matches!(next, 'p' | 'P' | 'x') && chars.peek() == Some(&'{') {
                            // `\p{Greek}`, `\x{10FFFF}`: the braces are the escape's.
                            for inner in chars.by_ref() {
                                out.push(inner);
                                if inner == '}' {
                                    break;
                                }
                            }
                        }
                    }
                }
                class_start = false;
            }
            '[' if !class => {
                out.push('[');
                class = true;
                class_start = true;
                if chars.peek() == Some(&'^') {
                    chars.next();
                    out.push('^');
                }
                continue;
            }
            '[' => {
                if chars.peek() == Some(&':') {
                    // `[:alpha:]` inside a bracket expression: copied to its closing `:]`.
                    out.push('[');
                    for inner in chars.by_ref() {
                        out.push(inner);
                        if inner == ']' {
                            break;
                        }
                    }
                } else {
                    out.push_str(r"\[");
                }
                class_start = false;
            }
            ']' if class && !class_start => {
                out.push(']');
                class = false;
            }
            '{' if !class && !is_go_repeat(chars.clone()) => {
                // Go reads a `{` that does not start `{n}`, `{n,}` or `{n,m}` literally.
                out.push_str(r"\{");
                class_start = false;
            }
            '&' | '~' if class => {
                out.push('\\');
                out.push(c);
                class_start = false;
            }
            other => {
                out.push(other);
                class_start = false;
            }
        }
    }
    out
}

/// The first repeat (`{n}`, `{n,}`, `{n,m}`) of a translated pattern whose count passes Go's
/// limit of 1000, which Go refuses and the `regex` crate would compile.
fn repeat_over_go_limit(translated: &str) -> Option<&str> {
    let bytes = translated.as_bytes();
    let mut index = 0;
    let mut class = false;
    while index < bytes.len() {
        match bytes[index] {
            b'\\' => {
                let braced = matches!(bytes.get(index + 1), Some(b'p' | b'P' | b'x'))
                    && bytes.get(index + 2) == Some(&b'{');
                index = if braced {
                    // `\p{…}`, `\x{…}`: braces of the escape, not a repeat.
                    translated[index..]
                        .find('}')
                        .map_or(bytes.len(), |e| index + e)
                } else {
                    index + 1
                };
            }
            b'[' => class = true,
            b']' => class = false,
            b'{' if !class => {
                let end = translated[index..].find('}').map(|e| index + e)?;
                let inner = &translated[index + 1..end];
                let counts_over = inner
                    .split(',')
                    .any(|n| n.parse::<u64>().map_or(!n.is_empty(), |n| n > 1000));
                if counts_over {
                    return Some(&translated[index..=end]);
                }
                index = end;
            }
            _ => {}
        }
        index += 1;
    }
    None
}

/// Whether the text after a `{` makes it a repeat in Go's syntax: `n}`, `n,}` or `n,m}`.
fn is_go_repeat(mut rest: impl Iterator<Item = char>) -> bool {
    let mut digits = 0;
    let mut next = rest.next();
    while next.is_some_and(|c| c.is_ascii_digit()) {
        digits += 1;
        next = rest.next();
    }
    if digits == 0 {
        return false;
    }
    if next == Some(',') {
        next = rest.next();
        while next.is_some_and(|c| c.is_ascii_digit()) {
            next = rest.next();
        }
    }
    next == Some('}')
}
