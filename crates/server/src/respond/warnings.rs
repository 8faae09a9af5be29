//! The `Warning` headers of one answer, as kube-apiserver's warning recorder
//! (`apiserver/pkg/endpoints/filters/warning.go`) keeps them.
//!
//! ## Guarantees
//! - A warning is recorded once (the same text again, from a retried update attempt or from
//!   many unknown fields of one kind, adds nothing), found by a hash of its text: recording
//!   `n` warnings is linear in their bytes, never quadratic (a body of 32,000 unknown fields
//!   used to spend 12.7 s comparing each new warning with every one before it).
//! - The headers' text is bounded as kube bounds it: while the warnings' text (in characters)
//!   stays within 4,096, each is sent whole; the warning that would pass it switches to
//!   truncation: every warning is then cut to its first 256 characters (the ones already
//!   recorded too, in their order), and once the total reaches 4,096 further warnings are
//!   dropped. So an answer carries at most ~4,350 characters of warnings whatever the request.
//! - Each header is kube's `net.NewWarningHeader(299, "-", text)`: `299 - "<text>"` with Go's
//!   `strconv.Quote`; a text with a control character (or empty) is not sent.

use std::collections::HashSet;

use axum::http::{HeaderValue, header};
use axum::response::Response;
use watchkeeper_core::gotext::go_quote;

/// kube's `truncateAtTotalRunes`.
const TOTAL_CHARS: usize = 4 * 1024;
/// kube's `truncateItemRunes`.
const ITEM_CHARS: usize = 256;

/// The warnings of one answer (see the module docs).
#[derive(Debug, Default)]
pub struct Warnings {
    recorded: HashSet<String>,
    /// Every recorded warning, in order (replayed, cut, when truncation begins).
    ordered: Vec<String>,
    /// The headers' texts so far.
    shown: Vec<String>,
    /// Characters of `shown`.
    written: usize,
    truncating: bool,
    limits: (usize, usize),
}

impl Warnings {
    /// No warnings, with kube's bounds.
    #[must_use]
    pub fn new() -> Warnings {
        Warnings::with_limits(TOTAL_CHARS, ITEM_CHARS)
    }

    fn with_limits(total: usize, item: usize) -> Warnings {
        Warnings {
            limits: (total, item),
            ..Warnings::default()
        }
    }

    /// Records `text` (kube's `AddWarning`).
    pub fn add(&mut self, text: String) {
        let (total, item) = self.limits;
        if text.is_empty() || (self.truncating && self.written >= total) {
            return;
        }
        if !self.recorded.insert(text.clone()) {
            return;
        }
        self.ordered.push(text.clone());
        let text = if self.truncating {
            cut(&text, item)
        } else {
            text
        };
        if !sendable(&text) {
            return;
        }
        let chars = text.chars().count();
        if self.truncating || self.written + chars <= total {
            self.written += chars;
            self.shown.push(text);
            return;
        }
        // Over the bound: every warning so far again, cut.
        self.truncating = true;
        self.written = 0;
        self.shown.clear();
        for text in &self.ordered {
            let text = cut(text, item);
            if sendable(&text) {
                self.written += text.chars().count();
                self.shown.push(text);
            }
        }
    }

    /// Whether there is none to send.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.shown.is_empty()
    }

    /// The warnings' texts, as they will be sent.
    pub fn texts(&self) -> impl Iterator<Item = &str> {
        self.shown.iter().map(String::as_str)
    }

    /// `response` with one `Warning` header per warning.
    #[must_use]
    pub fn on(&self, mut response: Response) -> Response {
        for text in &self.shown {
            if let Some(value) = header_value(text) {
                response.headers_mut().append(header::WARNING, value);
            }
        }
        response
    }
}

/// `text`'s first `chars` characters.
fn cut(text: &str, chars: usize) -> String {
    match text.char_indices().nth(chars) {
        Some((end, _)) => text[..end].to_owned(),
        None => text.to_owned(),
    }
}

/// kube's `NewWarningHeader` refuses a text with a control character.
fn sendable(text: &str) -> bool {
    !text.chars().any(char::is_control)
}

/// The `Warning` header of one warning: `299 - "<text>"` (kube's `NewWarningHeader` with its
/// default agent), none for a text kube would not send.
#[must_use]
pub fn header_value(text: &str) -> Option<HeaderValue> {
    if text.is_empty() || !sendable(text) {
        return None;
    }
    HeaderValue::from_str(&format!("299 - {}", go_quote(text))).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(warnings: &Warnings) -> Vec<&str> {
        warnings.texts().collect()
    }

    /// kube's own `TestTruncation`, with its bounds (25 characters in all, 5 per warning).
    #[test]
    fn truncation_follows_kubes_recorder() {
        let mut warnings = Warnings::with_limits(25, 5);
        for text in ["aaaaaaaaaa", "aaaaaaaaaa", "bb", "ccc", "Iñtërnâtiô"] {
            warnings.add(text.to_owned());
        }
        assert_eq!(texts(&warnings), ["aaaaaaaaaa", "bb", "ccc", "Iñtërnâtiô"]);
        for text in ["e", "ffffffffff", "ffffffffff", "gggggggggg", "h"] {
            warnings.add(text.to_owned());
        }
        assert_eq!(
            texts(&warnings),
            ["aaaaa", "bb", "ccc", "Iñtër", "e", "fffff", "ggggg"]
        );
    }

    /// kube's `TestAddWarning` cases: empty and control-character texts are not sent, a
    /// repeated one once.
    #[test]
    fn texts_kube_would_not_send_are_dropped() {
        let mut warnings = Warnings::new();
        warnings.add(String::new());
        warnings.add("my\ntext".to_owned());
        assert!(warnings.is_empty());
        warnings.add("mytext".to_owned());
        warnings.add("mytext".to_owned());
        assert_eq!(texts(&warnings), ["mytext"]);
        assert_eq!(
            header_value("say \"hi\"").unwrap(),
            HeaderValue::from_static("299 - \"say \\\"hi\\\"\"")
        );
        assert!(header_value("a\tb").is_none());
    }

    /// Many distinct warnings (a body of unknown fields): bounded, linear.
    #[test]
    fn many_warnings_stay_within_kubes_bound() {
        let mut warnings = Warnings::new();
        for field in 0..50_000 {
            warnings.add(format!("unknown field \"spec.f{field}\""));
        }
        let sent: usize = warnings.texts().map(|t| t.chars().count()).sum();
        assert!(
            (TOTAL_CHARS..=TOTAL_CHARS + ITEM_CHARS).contains(&sent),
            "{sent}"
        );
        assert_eq!(texts(&warnings)[0], "unknown field \"spec.f0\"");
        assert!(warnings.texts().all(|t| t.chars().count() <= ITEM_CHARS));
    }
}
