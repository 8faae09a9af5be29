//! Kubernetes label and field selectors: parsing exactly as kube-apiserver parses them, and
//! matching.
//!
//! ## Guarantees
//! - **kube's answers.** [`LabelSelector::parse`] accepts exactly what kube 1.33's
//!   `labels.Parse` (`k8s.io/apimachinery/pkg/labels/selector.go`) accepts, and refuses the rest
//!   with its error text word for word (the [`SelectorError`]'s message, which kube-apiserver
//!   puts unchanged in a 400 BadRequest). [`LabelSelector::matches`] selects what kube's
//!   `Selector.Matches` selects.
//! - **Total.** No input panics the parsers or the matchers.
//! - **Round trip.** A parsed selector's [`Display`](fmt::Display) text parses back to an equal
//!   selector.
//! - **Cheap matching.** Matching allocates nothing and parses nothing but a label's integer
//!   for `>` and `<` (the bound is read once, at parse time): it runs for every event of every
//!   watcher in the dispatcher.
//! - **Matching costs the object's size, not the selector's.** A selector is compiled at parse
//!   time into one rule per distinct key (a plan: the intersection of its `in` sets, the
//!   union of its `notin` sets, the tightest `>` and `<`, whether the key must be present), so
//!   a match looks at most `min(distinct keys, object's labels)` keys, each a binary search,
//!   plus a binary search per value set: O(min(k, l) · log) for a selector of any length
//!   (kube's `Selector.Matches` walks every requirement, and each `in` set linearly; a watch's
//!   64 KB selector of 9,000 requirements cost every event 9,000 checks per such watcher on the
//!   dispatcher, which delayed every other watcher of the resource). The plan holds no strings
//!   of its own (indices into the requirements): 36 bytes per distinct key, 8 per set value.
//!
//! ## Label selectors (kube's lexer and parser)
//! Requirements `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k>n`, `k<n`, `k`
//! (exists) and `!k` (does not exist), separated by `,` and ANDed. Tokens are separated by
//! spaces, tabs, CRs and LFs only; an identifier is any run of other bytes up to one of
//! `=!(),<>` (so `a=b c` is `a=b` followed by a stray `c`); symbol runs take the longest token
//! (`==`, `!=`, else one symbol: `a>=1` is `a>` then `=`); `in` and `notin` are identifiers
//! where a key or value is expected (`in in (in)`); a NUL byte ends the text where a token
//! would start and ends the token otherwise. Values may be empty (`a=`, `a in ()`, `a in (,b)`).
//! Keys are qualified names, values label values (kube's `IsQualifiedName`,
//! `IsValidLabelValue`, messages joined by `; `); `>` and `<` take one integer (Go's
//! `ParseInt`), matching only labels whose value is an integer above or below it. Values of a
//! set are kept sorted without duplicates and requirements sorted by key (stably), as kube's
//! parser keeps them; duplicates are kept. Errors: the parser's `found '…', expected: …`, those
//! inside a requirement prefixed `unable to parse requirement: `; a bad key is
//! `<nil>: Invalid value: "k": …` (kube's nil path), a bad value `values[i][k]: Invalid value:
//! …`, a non-integer bound `values[0]: Invalid value: …`, several of them as `[e1, e2]`.
//!
//! ## Field selectors
//! Parsed as kube's `fields.ParseSelector` (apimachinery `pkg/fields/selector.go`): terms
//! split at unescaped commas, sorted, empty ones skipped, each split at its first `!=`, `==`
//! or `=`, nothing trimmed; values unescaped as `UnescapeValue` (`\\`, `\,` and `\=`; any other
//! escape, and an unescaped `,` or `=`, refused), with its error texts. Which fields a
//! resource supports is the caller's business (the server answers kube's `field label not
//! supported: {field}`); the core only matches.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::gotext::go_quote;
use crate::object::Attributes;

/// What a selector reads: the value of a label or field, if the object has it.
pub trait Lookup {
    /// The value of `key`.
    fn lookup(&self, key: &str) -> Option<&str>;
    /// How many keys have a value.
    fn count(&self) -> usize;
    /// Calls `f` with each key and value until it returns `false`; whether it never did.
    fn all_pairs(&self, f: &mut dyn FnMut(&str, &str) -> bool) -> bool;
}

impl Lookup for BTreeMap<String, String> {
    fn lookup(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }

    fn count(&self) -> usize {
        self.len()
    }

    fn all_pairs(&self, f: &mut dyn FnMut(&str, &str) -> bool) -> bool {
        self.iter().all(|(k, v)| f(k, v))
    }
}

impl Lookup for Attributes {
    fn lookup(&self, key: &str) -> Option<&str> {
        self.get(key)
    }

    fn count(&self) -> usize {
        self.len()
    }

    fn all_pairs(&self, f: &mut dyn FnMut(&str, &str) -> bool) -> bool {
        self.iter().all(|(k, v)| f(k, v))
    }
}

/// A selector compiled for matching: one [`Rule`] per distinct key, sorted by key, and the
/// value sets the rules search, as indices into the selector's requirements (see the module
/// documentation). Derived from the requirements alone, so it takes no part in equality.
#[derive(Clone, Debug, Default)]
struct Plan {
    rules: Vec<Rule>,
    /// Rules whose key must have a value (that fail on an absent key).
    required: usize,
    /// The values the rules' sets name: (requirement, value within it), each set's run sorted
    /// by value.
    values: Vec<(u32, u32)>,
    /// The `>` and `<` bounds of the rules that have any: (above, below).
    bounds: Vec<(Option<i64>, Option<i64>)>,
}

/// What every requirement on one key asks of that key's value, together.
#[derive(Clone, Copy, Debug)]
struct Rule {
    /// The first requirement on the key (its key names the rule).
    first: u32,
    /// The value must be one of these (`values[allowed.0..allowed.1]`; the intersection of
    /// the key's `in` sets), when there is an `in`.
    allowed: Option<(u32, u32)>,
    /// The value must be none of these (the union of its `notin` sets).
    forbidden: (u32, u32),
    /// Index into `bounds`, when the key has a `>` or `<`.
    bounds: Option<u32>,
    /// No `!k`: the key may have a value.
    present_ok: bool,
    /// Only `notin` and `!k` (labels), or the rule holds for `""` (fields): the key may be
    /// absent.
    absent_ok: bool,
}

impl Plan {
    fn u32(index: usize) -> u32 {
        // A selector is at most a URL's length (64 KiB), far below u32's range.
        u32::try_from(index).unwrap_or(u32::MAX)
    }

    /// Whether `object` satisfies every rule, `key_of` naming a rule's key and `value_of` a
    /// set's value: the rules' keys looked up in the object, or the object's keys in the
    /// rules, whichever are fewer.
    fn matches<'a>(
        &self,
        object: &impl Lookup,
        key_of: impl Fn(&Rule) -> &'a str,
        value_of: impl Fn((u32, u32)) -> &'a str,
        absent: Option<&str>,
    ) -> bool {
        if self.rules.is_empty() {
            return true;
        }
        let present = |rule: &Rule, value: &str| self.present(rule, value, &value_of);
        let pairs = object.count();
        if self.required > pairs {
            return false;
        }
        if self.rules.len() <= pairs {
            return self
                .rules
                .iter()
                .all(|rule| match object.lookup(key_of(rule)).or(absent) {
                    Some(value) => present(rule, value),
                    None => rule.absent_ok,
                });
        }
        let mut met = 0;
        object.all_pairs(&mut |key, value| {
            let Ok(at) = self.rules.binary_search_by(|rule| key_of(rule).cmp(key)) else {
                return true;
            };
            let rule = &self.rules[at];
            met += usize::from(!rule.absent_ok);
            present(rule, value)
        }) && met == self.required
    }

    /// Whether `rule` holds for a key whose value is `value`.
    fn present<'a>(
        &self,
        rule: &Rule,
        value: &str,
        value_of: &impl Fn((u32, u32)) -> &'a str,
    ) -> bool {
        let within = |(start, end): (u32, u32)| {
            self.values[start as usize..end as usize]
                .binary_search_by(|at| value_of(*at).cmp(value))
                .is_ok()
        };
        if !rule.present_ok
            || rule.allowed.is_some_and(|allowed| !within(allowed))
            || within(rule.forbidden)
        {
            return false;
        }
        let Some(at) = rule.bounds else {
            return true;
        };
        let (above, below) = self.bounds[at as usize];
        parse_go_int(Some(value)).is_some_and(|v| {
            above.is_none_or(|bound| v > bound) && below.is_none_or(|bound| v < bound)
        })
    }

    /// Appends `set` (sorted by value) to `values`: its range.
    fn push_set(&mut self, set: impl IntoIterator<Item = (u32, u32)>) -> (u32, u32) {
        let start = Plan::u32(self.values.len());
        self.values.extend(set);
        (start, Plan::u32(self.values.len()))
    }
}

/// The set `values` of `requirement`: (requirement, value) pairs, in the values' order.
fn indexed(requirement: usize, values: &[String]) -> impl Iterator<Item = (u32, u32)> + '_ {
    (0..values.len()).map(move |at| (Plan::u32(requirement), Plan::u32(at)))
}

/// The value `at` names in a label selector's `requirements`: (requirement, value of its set).
fn label_value(requirements: &[LabelRequirement], (r, v): (u32, u32)) -> &str {
    match &requirements[r as usize].operator {
        LabelOperator::In(values) | LabelOperator::NotIn(values) => &values[v as usize],
        _ => "",
    }
}

impl Plan {
    /// The plan of a label selector's requirements, sorted by key.
    fn of_labels(requirements: &[LabelRequirement]) -> Plan {
        let value_of = |at| label_value(requirements, at);
        let mut plan = Plan::default();
        let mut start = 0;
        while start < requirements.len() {
            let key = &requirements[start].key;
            let end = start
                + requirements[start..]
                    .iter()
                    .take_while(|r| r.key == *key)
                    .count();
            let mut allowed: Option<Vec<(u32, u32)>> = None;
            let mut forbidden = Vec::new();
            let (mut above, mut below) = (None::<i64>, None::<i64>);
            let (mut present_ok, mut absent_ok) = (true, true);
            for (index, requirement) in requirements.iter().enumerate().take(end).skip(start) {
                match &requirement.operator {
                    LabelOperator::In(values) => {
                        absent_ok = false;
                        allowed = Some(match allowed {
                            None => indexed(index, values).collect(),
                            Some(mut kept) => {
                                kept.retain(|at| {
                                    values
                                        .binary_search_by(|v| v.as_str().cmp(value_of(*at)))
                                        .is_ok()
                                });
                                kept
                            }
                        });
                    }
                    LabelOperator::NotIn(values) => forbidden.extend(indexed(index, values)),
                    LabelOperator::Exists => absent_ok = false,
                    LabelOperator::DoesNotExist => present_ok = false,
                    LabelOperator::GreaterThan(bound) => {
                        absent_ok = false;
                        above = Some(above.map_or(*bound, |b| b.max(*bound)));
                    }
                    LabelOperator::LessThan(bound) => {
                        absent_ok = false;
                        below = Some(below.map_or(*bound, |b| b.min(*bound)));
                    }
                }
            }
            forbidden.sort_by(|a, b| value_of(*a).cmp(value_of(*b)));
            forbidden.dedup_by(|a, b| value_of(*a) == value_of(*b));
            let bounds = (above.is_some() || below.is_some()).then(|| {
                plan.bounds.push((above, below));
                Plan::u32(plan.bounds.len() - 1)
            });
            let rule = Rule {
                first: Plan::u32(start),
                allowed: allowed.map(|set| plan.push_set(set)),
                forbidden: plan.push_set(forbidden),
                bounds,
                present_ok,
                absent_ok,
            };
            plan.required += usize::from(!absent_ok);
            plan.rules.push(rule);
            start = end;
        }
        plan.values.shrink_to_fit();
        plan
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

/// One operator of a label requirement, as matching needs it (kube's `=`, `==` and `in` select
/// alike, as do `!=` and `notin`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LabelOperator {
    /// `k=v`, `k==v`, `k in (v...)`: the label is present with one of the values (sorted,
    /// without duplicates, as kube's parser keeps them).
    In(Vec<String>),
    /// `k!=v`, `k notin (v...)`: the label is absent or has none of the values (sorted, without
    /// duplicates).
    NotIn(Vec<String>),
    /// `k`: the label is present.
    Exists,
    /// `!k`: the label is absent.
    DoesNotExist,
    /// `k>n`: the label is present, an integer (Go's `strconv.ParseInt(v, 10, 64)`), above `n`.
    GreaterThan(i64),
    /// `k<n`: the label is present, an integer, below `n`.
    LessThan(i64),
}

/// One requirement of a label selector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LabelRequirement {
    /// The label key.
    pub key: String,
    /// What the label must satisfy.
    pub operator: LabelOperator,
}

impl LabelRequirement {
    /// Whether `value` (the label's value, `None` when absent) satisfies this requirement.
    /// Allocation-free: an integer label is read in place for `>` and `<`.
    #[must_use]
    pub fn matches_value(&self, value: Option<&str>) -> bool {
        match &self.operator {
            LabelOperator::In(values) => value.is_some_and(|v| values.iter().any(|x| x == v)),
            LabelOperator::NotIn(values) => value.is_none_or(|v| !values.iter().any(|x| x == v)),
            LabelOperator::Exists => value.is_some(),
            LabelOperator::DoesNotExist => value.is_none(),
            LabelOperator::GreaterThan(bound) => parse_go_int(value).is_some_and(|v| v > *bound),
            LabelOperator::LessThan(bound) => parse_go_int(value).is_some_and(|v| v < *bound),
        }
    }
}

/// Go's `strconv.ParseInt(v, 10, 64)`: an optional `+` or `-`, then ASCII digits, in range.
/// Rust's `i64::from_str` accepts exactly that.
fn parse_go_int(value: Option<&str>) -> Option<i64> {
    value.and_then(|v| v.parse::<i64>().ok())
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Clone, Debug, Default)]
pub struct LabelSelector {
    requirements: Vec<LabelRequirement>,
    plan: Plan,
}

impl PartialEq for LabelSelector {
    fn eq(&self, other: &LabelSelector) -> bool {
        self.requirements == other.requirements
    }
}

impl Eq for LabelSelector {}

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

    /// The requirements, ANDed, sorted by key (stably: requirements on one key keep the order
    /// they were written in; duplicates are kept, as kube keeps them).
    #[must_use]
    pub fn requirements(&self) -> &[LabelRequirement] {
        &self.requirements
    }

    /// Parses the Kubernetes label selector syntax exactly as kube's `labels.Parse` does (see
    /// the module documentation).
    ///
    /// # Errors
    /// A [`SelectorError`] whose message is kube's error text, word for word.
    pub fn parse(input: &str) -> Result<LabelSelector, SelectorError> {
        let mut parser = Parser {
            tokens: lex(input),
            position: 0,
        };
        let mut requirements = parser.parse().map_err(error)?;
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector {
            plan: Plan::of_labels(&requirements),
            requirements,
        })
    }

    /// Whether `labels` satisfy every requirement (through the selector's plan: at most
    /// `min(distinct keys, labels)` keys looked at, see the module documentation).
    #[must_use]
    pub fn matches(&self, labels: &impl Lookup) -> bool {
        // A selector of everything (most watchers') is not evaluated: the dispatcher asks
        // per watcher, twice per event (object and previous).
        if self.is_everything() {
            return true;
        }
        let requirements = &self.requirements;
        self.plan.matches(
            labels,
            |rule| requirements[rule.first as usize].key.as_str(),
            |at| label_value(requirements, at),
            None,
        )
    }
}

/// The canonical text of the selector: requirements joined by `,`, single values as `k=v` and
/// `k!=v`, sets as `k in (a,b)` and `k notin (a,b)`, `k>n`, `k<n`, `k` and `!k`. Parsing it
/// gives back an equal selector.
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
            LabelOperator::GreaterThan(bound) => write!(f, "{key}>{bound}"),
            LabelOperator::LessThan(bound) => write!(f, "{key}<{bound}"),
        }
    }
}

/// A token of kube's label selector lexer (`labels.Token`; its `ErrorToken` is left out: the
/// first byte of a symbol run is always a token by itself, so kube's lexer never makes one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Token {
    EndOfString,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

/// kube's `string2token`: the literals that are tokens.
fn keyword(literal: &[u8]) -> Option<Token> {
    Some(match literal {
        b")" => Token::ClosedPar,
        b"," => Token::Comma,
        b"!" => Token::DoesNotExist,
        b"==" => Token::DoubleEquals,
        b"=" => Token::Equals,
        b">" => Token::GreaterThan,
        b"in" => Token::In,
        b"<" => Token::LessThan,
        b"!=" => Token::NotEquals,
        b"notin" => Token::NotIn,
        b"(" => Token::OpenPar,
        _ => return None,
    })
}

/// kube's `isWhitespace`: only these four bytes separate tokens.
fn is_whitespace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

/// kube's `isSpecialSymbol`.
fn is_special(b: u8) -> bool {
    matches!(b, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

/// kube's `Lexer`, byte by byte. As in kube, reading past the end gives 0, and so does a NUL
/// byte of the text: a NUL where a token would start ends the text, a NUL inside an
/// identifier or a symbol run ends that token and is skipped.
struct Lexer<'a> {
    text: &'a str,
    position: usize,
}

impl<'a> Lexer<'a> {
    fn read(&mut self) -> u8 {
        match self.text.as_bytes().get(self.position) {
            Some(&b) => {
                self.position += 1;
                b
            }
            None => 0,
        }
    }

    /// Only ever called after a read of a byte that is not 0, so it never underflows.
    fn unread(&mut self) {
        self.position = self.position.saturating_sub(1);
    }

    /// The text between two byte positions; both sit next to ASCII bytes (or the ends), so
    /// the slice is on character boundaries.
    fn slice(&self, start: usize, end: usize) -> &'a str {
        self.text.get(start..end).unwrap_or("")
    }

    /// kube's `Lex`.
    fn lex(&mut self) -> (Token, &'a str) {
        let mut b = self.read();
        while is_whitespace(b) {
            b = self.read();
        }
        if b == 0 {
            return (Token::EndOfString, "");
        }
        self.unread();
        if is_special(b) {
            self.scan_special_symbol()
        } else {
            self.scan_identifier_or_keyword()
        }
    }

    /// kube's `scanIDOrKeyword`: bytes up to a symbol, a whitespace, a NUL or the end.
    fn scan_identifier_or_keyword(&mut self) -> (Token, &'a str) {
        let start = self.position;
        let end = loop {
            let before = self.position;
            let b = self.read();
            if b == 0 {
                // The end, or a NUL byte, which stays consumed.
                break before;
            }
            if is_special(b) || is_whitespace(b) {
                self.unread();
                break before;
            }
        };
        let literal = self.slice(start, end);
        (
            keyword(literal.as_bytes()).unwrap_or(Token::Identifier),
            literal,
        )
    }

    /// kube's `scanSpecialSymbol`: the longest run of symbols that is a token (`==`, `!=`, or
    /// one symbol); a NUL right after it is skipped.
    fn scan_special_symbol(&mut self) -> (Token, &'a str) {
        let start = self.position;
        // The first byte is a symbol, and every symbol is a token by itself.
        self.position += 1;
        let mut end = self.position;
        let mut token = keyword(self.slice(start, end).as_bytes()).unwrap_or(Token::Identifier);
        loop {
            let b = self.read();
            if b == 0 {
                break;
            }
            if !is_special(b) {
                self.unread();
                break;
            }
            match keyword(self.slice(start, self.position).as_bytes()) {
                Some(longer) => {
                    token = longer;
                    end = self.position;
                }
                None => {
                    self.unread();
                    break;
                }
            }
        }
        (token, self.slice(start, end))
    }
}

/// kube's `Parser.scan`: every token up to and including the end.
fn lex(text: &str) -> Vec<(Token, &str)> {
    let mut lexer = Lexer { text, position: 0 };
    let mut tokens = Vec::new();
    loop {
        let (token, literal) = lexer.lex();
        tokens.push((token, literal));
        if token == Token::EndOfString {
            return tokens;
        }
    }
}

/// kube's `ParserContext`: where values are expected, `in` and `notin` are identifiers.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    KeyAndOperator,
    Values,
}

/// kube's `selection.Operator`s that its parser produces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Operator {
    In,
    NotIn,
    Equals,
    DoubleEquals,
    NotEquals,
    GreaterThan,
    LessThan,
    Exists,
    DoesNotExist,
}

/// kube's `binaryOperators`, as its "expected:" message lists them.
const BINARY_OPERATORS: &str = "in, notin, =, ==, !=, gt, lt";

/// kube's `Parser` (Kubernetes 1.33: `labels/selector.go`), error texts word for word.
struct Parser<'a> {
    tokens: Vec<(Token, &'a str)>,
    position: usize,
}

impl<'a> Parser<'a> {
    /// The current token (the end once past it, where kube would index out of range; its
    /// grammar never gets there).
    fn lookahead(&self, context: Context) -> (Token, &'a str) {
        let (token, literal) = self
            .tokens
            .get(self.position)
            .or_else(|| self.tokens.last())
            .copied()
            .unwrap_or((Token::EndOfString, ""));
        match token {
            Token::In | Token::NotIn if context == Context::Values => (Token::Identifier, literal),
            _ => (token, literal),
        }
    }

    fn consume(&mut self, context: Context) -> (Token, &'a str) {
        let item = self.lookahead(context);
        self.position += 1;
        item
    }

    /// kube's `Parser.parse`.
    fn parse(&mut self) -> Result<Vec<LabelRequirement>, String> {
        let mut requirements = Vec::new();
        loop {
            let (token, literal) = self.lookahead(Context::Values);
            match token {
                Token::Identifier | Token::DoesNotExist => {
                    let requirement = self
                        .parse_requirement()
                        .map_err(|e| format!("unable to parse requirement: {e}"))?;
                    requirements.push(requirement);
                    let (token, literal) = self.consume(Context::Values);
                    match token {
                        Token::EndOfString => return Ok(requirements),
                        Token::Comma => {
                            let (next, literal) = self.lookahead(Context::Values);
                            if next != Token::Identifier && next != Token::DoesNotExist {
                                return Err(format!(
                                    "found '{literal}', expected: identifier after ','"
                                ));
                            }
                        }
                        _ => {
                            return Err(format!(
                                "found '{literal}', expected: ',' or 'end of string'"
                            ));
                        }
                    }
                }
                Token::EndOfString => return Ok(requirements),
                _ => {
                    return Err(format!(
                        "found '{literal}', expected: !, identifier, or 'end of string'"
                    ));
                }
            }
        }
    }

    /// kube's `parseRequirement`.
    fn parse_requirement(&mut self) -> Result<LabelRequirement, String> {
        let (key, operator) = self.parse_key_and_infer_operator()?;
        if let Some(operator @ (Operator::Exists | Operator::DoesNotExist)) = operator {
            return new_requirement(key, operator, &[]);
        }
        let operator = self.parse_operator()?;
        let values = match operator {
            Operator::In | Operator::NotIn => self.parse_values()?,
            _ => self.parse_exact_value()?,
        };
        new_requirement(key, operator, &values)
    }

    /// kube's `parseKeyAndInferOperator`: `!` and the key; `Exists` (or `DoesNotExist`) when
    /// the requirement ends there, no operator yet otherwise (also after `!`, which then fails
    /// at the caller's next token).
    fn parse_key_and_infer_operator(&mut self) -> Result<(&'a str, Option<Operator>), String> {
        let mut operator = None;
        let (mut token, mut literal) = self.consume(Context::Values);
        if token == Token::DoesNotExist {
            operator = Some(Operator::DoesNotExist);
            (token, literal) = self.consume(Context::Values);
        }
        if token != Token::Identifier {
            return Err(format!("found '{literal}', expected: identifier"));
        }
        let errors = label_key_errors(literal);
        if !errors.is_empty() {
            // kube validates with the parser's path, which is nil: Go prints it `<nil>`.
            return Err(invalid("<nil>", literal, &errors.join("; ")));
        }
        let (next, _) = self.lookahead(Context::Values);
        if matches!(next, Token::EndOfString | Token::Comma) && operator.is_none() {
            operator = Some(Operator::Exists);
        }
        Ok((literal, operator))
    }

    /// kube's `parseOperator`.
    fn parse_operator(&mut self) -> Result<Operator, String> {
        let (token, literal) = self.consume(Context::KeyAndOperator);
        Ok(match token {
            Token::In => Operator::In,
            Token::Equals => Operator::Equals,
            Token::DoubleEquals => Operator::DoubleEquals,
            Token::GreaterThan => Operator::GreaterThan,
            Token::LessThan => Operator::LessThan,
            Token::NotIn => Operator::NotIn,
            Token::NotEquals => Operator::NotEquals,
            _ => return Err(format!("found '{literal}', expected: {BINARY_OPERATORS}")),
        })
    }

    /// kube's `parseValues`: `(a,b)`, sorted and without duplicates (a `sets.String`); `()`
    /// is the empty value.
    fn parse_values(&mut self) -> Result<Vec<&'a str>, String> {
        let (token, literal) = self.consume(Context::Values);
        if token != Token::OpenPar {
            // kube's text has no colon here.
            return Err(format!("found '{literal}' expected: '('"));
        }
        let (token, literal) = self.lookahead(Context::Values);
        match token {
            Token::Identifier | Token::Comma => {
                let values = self.parse_identifiers_list()?;
                if self.consume(Context::Values).0 != Token::ClosedPar {
                    // Not reachable (the list ends before a `)`); kube names the first value.
                    return Err(format!("found '{literal}', expected: ')'"));
                }
                Ok(values.into_iter().collect())
            }
            Token::ClosedPar => {
                self.consume(Context::Values);
                Ok(vec![""])
            }
            _ => Err(format!(
                "found '{literal}', expected: ',', ')' or identifier"
            )),
        }
    }

    /// kube's `parseIdentifiersList` (1.33's: after `,,` it consumes the second comma, so
    /// `(a,,)` is refused with "found ')', expected: ',', or identifier").
    fn parse_identifiers_list(&mut self) -> Result<BTreeSet<&'a str>, String> {
        let mut values = BTreeSet::new();
        loop {
            let (token, literal) = self.consume(Context::Values);
            match token {
                Token::Identifier => {
                    values.insert(literal);
                    let (next, literal) = self.lookahead(Context::Values);
                    match next {
                        Token::Comma => {}
                        Token::ClosedPar => return Ok(values),
                        _ => return Err(format!("found '{literal}', expected: ',' or ')'")),
                    }
                }
                Token::Comma => {
                    if values.is_empty() {
                        values.insert("");
                    }
                    match self.lookahead(Context::Values).0 {
                        Token::ClosedPar => {
                            values.insert("");
                            return Ok(values);
                        }
                        Token::Comma => {
                            self.consume(Context::Values);
                            values.insert("");
                        }
                        _ => {}
                    }
                }
                _ => return Err(format!("found '{literal}', expected: ',', or identifier")),
            }
        }
    }

    /// kube's `parseExactValue`: one identifier, or the empty value before `,` or the end.
    fn parse_exact_value(&mut self) -> Result<Vec<&'a str>, String> {
        let (token, _) = self.lookahead(Context::Values);
        if matches!(token, Token::EndOfString | Token::Comma) {
            return Ok(vec![""]);
        }
        let (token, literal) = self.consume(Context::Values);
        if token == Token::Identifier {
            Ok(vec![literal])
        } else {
            Err(format!("found '{literal}', expected: identifier"))
        }
    }
}

/// kube's `NewRequirement`, the checks of an operator's values and of the key and values, every
/// failure a field error of path `key`, `values`, `values[i]` or `values[i][key]`, joined as
/// kube's aggregate joins them (one alone, several as `[a, b]`, repeated texts once).
fn new_requirement(
    key: &str,
    operator: Operator,
    values: &[&str],
) -> Result<LabelRequirement, String> {
    let mut errors = Vec::new();
    let key_errors = label_key_errors(key);
    if !key_errors.is_empty() {
        errors.push(invalid("key", key, &key_errors.join("; ")));
    }
    let values_text = || {
        let quoted: Vec<String> = values.iter().map(|v| go_quote(v)).collect();
        format!("[]string{{{}}}", quoted.join(", "))
    };
    let invalid_values =
        |detail: &str| format!("values: Invalid value: {}: {detail}", values_text());
    let mut bound = None;
    match operator {
        Operator::In | Operator::NotIn if values.is_empty() => {
            errors.push(invalid_values(
                "for 'in', 'notin' operators, values set can't be empty",
            ));
        }
        Operator::Equals | Operator::DoubleEquals | Operator::NotEquals if values.len() != 1 => {
            errors.push(invalid_values(
                "exact-match compatibility requires one single value",
            ));
        }
        Operator::Exists | Operator::DoesNotExist if !values.is_empty() => {
            errors.push(invalid_values(
                "values set must be empty for exists and does not exist",
            ));
        }
        Operator::GreaterThan | Operator::LessThan => {
            if values.len() != 1 {
                errors.push(invalid_values(
                    "for 'Gt', 'Lt' operators, exactly one value is required",
                ));
            }
            for (index, value) in values.iter().enumerate() {
                match value.parse::<i64>() {
                    Ok(number) => bound = Some(number),
                    Err(_) => errors.push(invalid(
                        &format!("values[{index}]"),
                        value,
                        "for 'Gt', 'Lt' operators, the value must be an integer",
                    )),
                }
            }
        }
        _ => {}
    }
    for (index, value) in values.iter().enumerate() {
        let value_errors = label_value_errors(value);
        if !value_errors.is_empty() {
            errors.push(invalid(
                &format!("values[{index}][{key}]"),
                value,
                &value_errors.join("; "),
            ));
        }
    }
    if !errors.is_empty() {
        return Err(aggregate(errors));
    }
    let owned = || values.iter().map(|v| (*v).to_owned()).collect();
    let operator = match (operator, bound) {
        (Operator::In | Operator::Equals | Operator::DoubleEquals, _) => LabelOperator::In(owned()),
        (Operator::NotIn | Operator::NotEquals, _) => LabelOperator::NotIn(owned()),
        (Operator::Exists, _) => LabelOperator::Exists,
        (Operator::DoesNotExist, _) => LabelOperator::DoesNotExist,
        (Operator::GreaterThan, Some(bound)) => LabelOperator::GreaterThan(bound),
        (Operator::LessThan, Some(bound)) => LabelOperator::LessThan(bound),
        // Checked above: `>` and `<` have exactly one integer value.
        (Operator::GreaterThan | Operator::LessThan, None) => {
            return Err(invalid_values(
                "for 'Gt', 'Lt' operators, exactly one value is required",
            ));
        }
    };
    Ok(LabelRequirement {
        key: key.to_owned(),
        operator,
    })
}

/// `field.Invalid(path, value, detail).Error()` for a string value.
fn invalid(path: &str, value: &str, detail: &str) -> String {
    format!("{path}: Invalid value: {}: {detail}", go_quote(value))
}

/// kube's `ErrorList.ToAggregate().Error()`: repeated texts once; one text alone, several as
/// `[a, b]`.
fn aggregate(errors: Vec<String>) -> String {
    let mut unique: Vec<String> = Vec::with_capacity(errors.len());
    for error in errors {
        if !unique.contains(&error) {
            unique.push(error);
        }
    }
    if unique.len() == 1 {
        unique.pop().unwrap_or_default()
    } else {
        format!("[{}]", unique.join(", "))
    }
}

const QUALIFIED_NAME_FORMAT: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

const DNS1123_SUBDOMAIN_FORMAT: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

const LABEL_VALUE_FORMAT: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`.
fn is_name_part(s: &str) -> bool {
    let bytes = s.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && bytes
                    .iter()
                    .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*`.
fn is_dns_subdomain(s: &str) -> bool {
    s.split('.').all(|label| {
        let bytes = label.as_bytes();
        let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
        bytes.first().is_some_and(alnum)
            && bytes.last().is_some_and(alnum)
            && bytes.iter().all(|b| alnum(b) || *b == b'-')
    })
}

/// kube 1.33's `validation.IsQualifiedName`: every message, in its order.
fn label_key_errors(key: &str) -> Vec<String> {
    let mut errors = Vec::new();
    let parts: Vec<&str> = key.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errors.push("prefix part must be non-empty".to_owned());
            } else {
                if prefix.len() > 253 {
                    errors.push("prefix part must be no more than 253 characters".to_owned());
                }
                if !is_dns_subdomain(prefix) {
                    errors.push(format!("prefix part {DNS1123_SUBDOMAIN_FORMAT}"));
                }
            }
            *name
        }
        _ => {
            errors.push(format!(
                "a qualified name {QUALIFIED_NAME_FORMAT} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            ));
            return errors;
        }
    };
    if name.is_empty() {
        errors.push("name part must be non-empty".to_owned());
    } else if name.len() > 63 {
        errors.push("name part must be no more than 63 characters".to_owned());
    }
    if !is_name_part(name) {
        errors.push(format!("name part {QUALIFIED_NAME_FORMAT}"));
    }
    errors
}

/// kube 1.33's `validation.IsValidLabelValue`: every message, in its order.
fn label_value_errors(value: &str) -> Vec<&'static str> {
    let mut errors = Vec::new();
    if value.len() > 63 {
        errors.push("must be no more than 63 characters");
    }
    if !value.is_empty() && !is_name_part(value) {
        errors.push(LABEL_VALUE_FORMAT);
    }
    errors
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
#[derive(Clone, Debug, Default)]
pub struct FieldSelector {
    requirements: Vec<FieldRequirement>,
    plan: Plan,
}

impl PartialEq for FieldSelector {
    fn eq(&self, other: &FieldSelector) -> bool {
        self.requirements == other.requirements
    }
}

impl Eq for FieldSelector {}

impl Plan {
    /// The plan of a field selector's requirements (a `=` is an `in` of one value, a `!=` a
    /// `notin`; an absent field reads as `""`). They are in kube's order, sorted as text,
    /// which does not group a field's terms when a field is another's prefix (`a.b=x` comes
    /// before `a=y`), so they are taken in field order here.
    fn of_fields(requirements: &[FieldRequirement]) -> Plan {
        let value_of = |(r, _): (u32, u32)| requirements[r as usize].value.as_str();
        let mut order: Vec<usize> = (0..requirements.len()).collect();
        order.sort_by(|a, b| requirements[*a].field.cmp(&requirements[*b].field));
        let mut plan = Plan::default();
        let mut start = 0;
        while start < order.len() {
            let field = &requirements[order[start]].field;
            let end = start
                + order[start..]
                    .iter()
                    .take_while(|at| requirements[**at].field == *field)
                    .count();
            let mut allowed: Option<Vec<(u32, u32)>> = None;
            let mut forbidden = Vec::new();
            for &index in &order[start..end] {
                let requirement = &requirements[index];
                let at = (Plan::u32(index), 0);
                if requirement.negated {
                    forbidden.push(at);
                } else {
                    allowed = Some(match allowed {
                        None => vec![at],
                        Some(mut kept) => {
                            kept.retain(|kept| value_of(*kept) == requirement.value);
                            kept
                        }
                    });
                }
            }
            forbidden.sort_by(|a, b| value_of(*a).cmp(value_of(*b)));
            forbidden.dedup_by(|a, b| value_of(*a) == value_of(*b));
            let mut rule = Rule {
                first: Plan::u32(order[start]),
                allowed: allowed.map(|set| plan.push_set(set)),
                forbidden: plan.push_set(forbidden),
                bounds: None,
                present_ok: true,
                absent_ok: true,
            };
            rule.absent_ok = plan.present(&rule, "", &value_of);
            plan.required += usize::from(!rule.absent_ok);
            plan.rules.push(rule);
            start = end;
        }
        plan.values.shrink_to_fit();
        plan
    }
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

    /// Parses `f=v,f2!=v2` exactly as kube's `fields.ParseSelector`: terms split at commas
    /// not escaped by a backslash, sorted (bytewise, as Go's `sort.Strings`), empty ones
    /// skipped; each term split at the first `!=`, `==` or `=` (escapes do not protect an
    /// operator); the field taken as written (no trimming; which fields a resource supports
    /// is the caller's check, kube's `field label not supported: {field}`); the value
    /// unescaped by `UnescapeValue` (`\\`, `\,`, `\=` only; an unescaped `,` or `=` is refused).
    ///
    /// # Errors
    /// A [`SelectorError`] with kube's text: `invalid selector: '{input}'; can't understand
    /// '{term}'`, `invalid field selector: invalid escape sequence: \x`, `invalid field
    /// selector: unescaped character in value: 61` (Go prints the rune as its number).
    pub fn parse(input: &str) -> Result<FieldSelector, SelectorError> {
        let mut terms = split_terms(input);
        terms.sort_unstable();
        let mut requirements = Vec::new();
        for term in terms.into_iter().filter(|term| !term.is_empty()) {
            let (field, value, negated) = split_field_term(term).ok_or_else(|| {
                error(format!(
                    "invalid selector: '{input}'; can't understand '{term}'"
                ))
            })?;
            let value = unescape(value).map_err(error)?;
            requirements.push(FieldRequirement {
                field: field.to_owned(),
                value,
                negated,
            });
        }
        Ok(FieldSelector {
            plan: Plan::of_fields(&requirements),
            requirements,
        })
    }

    /// Whether the object's fields satisfy every requirement (a missing field reads as empty;
    /// through the selector's plan, as [`LabelSelector::matches`]).
    #[must_use]
    pub fn matches(&self, fields: &impl Lookup) -> bool {
        // As the label selector's: a selector of everything is not evaluated.
        if self.is_everything() {
            return true;
        }
        let requirements = &self.requirements;
        self.plan.matches(
            fields,
            |rule| requirements[rule.first as usize].field.as_str(),
            |(r, _)| requirements[r as usize].value.as_str(),
            Some(""),
        )
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

/// kube's `splitTerms`: the parts between commas not escaped by a backslash (escapes kept).
fn split_terms(input: &str) -> Vec<&str> {
    if input.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let mut start = 0;
    let mut escaped = false;
    for (index, c) in input.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == ',' {
            terms.push(&input[start..index]);
            start = index + 1;
        }
    }
    terms.push(&input[start..]);
    terms
}

/// kube's `splitTerm`: the field before the first `!=`, `==` or `=` (tried in that order at
/// each place), the value after it, and whether it is `!=`.
fn split_field_term(term: &str) -> Option<(&str, &str, bool)> {
    for (index, _) in term.char_indices() {
        let rest = &term[index..];
        if let Some(value) = rest.strip_prefix("!=") {
            return Some((&term[..index], value, true));
        }
        if let Some(value) = rest.strip_prefix("==").or_else(|| rest.strip_prefix('=')) {
            return Some((&term[..index], value, false));
        }
    }
    None
}

/// kube's `UnescapeValue`: removes the backslash of `\\`, `\,` and `\=`; any other escape, a
/// trailing lone backslash, and an unescaped `,` or `=` are errors, with kube's texts.
fn unescape(value: &str) -> Result<String, String> {
    let mut out = String::with_capacity(value.len());
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(next @ ('\\' | ',' | '=')) => out.push(next),
                Some(next) => {
                    return Err(format!(
                        "invalid field selector: invalid escape sequence: \\{next}"
                    ));
                }
                None => {
                    return Err("invalid field selector: invalid escape sequence: \\".to_owned());
                }
            },
            ',' | '=' => {
                return Err(format!(
                    "invalid field selector: unescaped character in value: {}",
                    u32::from(c)
                ));
            }
            c => out.push(c),
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
            "a=(", "a in b", "a in (b", "=b", "a=b,,c=d", "a >= 3", "a b", "-a=b", "a=b c",
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
        // kube checks no field name at parse time: the caller refuses what the resource does
        // not support (`field label not supported: a b`).
        assert_eq!(
            FieldSelector::parse("a b=c").unwrap().exact("a b"),
            Some("c")
        );
        assert!(
            FieldSelector::parse("metadata.name==x")
                .unwrap()
                .exact("metadata.name")
                == Some("x")
        );
    }

    /// kube's `fields.ParseSelector`, input by input (traced through `splitTerms`, the sort,
    /// `splitTerm` and `UnescapeValue` of apimachinery's `pkg/fields/selector.go`).
    #[test]
    fn field_selectors_parse_as_kubes() {
        let ok = |input: &str| {
            FieldSelector::parse(input)
                .unwrap_or_else(|e| panic!("{input}: {e}"))
                .requirements()
                .iter()
                .map(|r| (r.field.clone(), r.value.clone(), r.negated))
                .collect::<Vec<_>>()
        };
        let req = |f: &str, v: &str, n: bool| (f.to_owned(), v.to_owned(), n);
        assert_eq!(ok(""), []);
        assert_eq!(ok(","), []);
        assert_eq!(ok("a=b,"), [req("a", "b", false)]);
        assert_eq!(ok(",,a=b,,"), [req("a", "b", false)]);
        // Sorted bytewise before parsing.
        assert_eq!(ok("b=1,a!=2"), [req("a", "2", true), req("b", "1", false)]);
        // Nothing is trimmed.
        assert_eq!(ok("f = v"), [req("f ", " v", false)]);
        assert_eq!(ok("a==b"), [req("a", "b", false)]);
        assert_eq!(ok("a!=b"), [req("a", "b", true)]);
        assert_eq!(ok("a!b=c"), [req("a!b", "c", false)]);
        assert_eq!(ok("a="), [req("a", "", false)]);
        assert_eq!(ok("=v"), [req("", "v", false)]);
        assert_eq!(ok(r"a=x\,y\=z\\w"), [req("a", r"x,y=z\w", false)]);
        assert_eq!(ok("a=é"), [req("a", "é", false)]);
        let err = |input: &str| FieldSelector::parse(input).unwrap_err().message;
        assert_eq!(
            err("novalue"),
            "invalid selector: 'novalue'; can't understand 'novalue'"
        );
        assert_eq!(
            err("b=1,zzz"),
            "invalid selector: 'b=1,zzz'; can't understand 'zzz'"
        );
        // An escape does not protect an operator: `a\=b=c` is the field `a\` and the value
        // `b=c`, whose `=` is unescaped.
        assert_eq!(
            err(r"a\=b=c"),
            "invalid field selector: unescaped character in value: 61"
        );
        assert_eq!(
            err("a=b=c"),
            "invalid field selector: unescaped character in value: 61"
        );
        assert_eq!(
            err(r"a=b\!"),
            r"invalid field selector: invalid escape sequence: \!"
        );
        assert_eq!(
            err(r"a=b\"),
            r"invalid field selector: invalid escape sequence: \"
        );
        // The sort decides which term's error comes first.
        assert_eq!(
            err("z=a=b,a"),
            "invalid selector: 'z=a=b,a'; can't understand 'a'"
        );
    }

    /// Every requirement checked one by one: what the plan must agree with.
    fn each_label(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
        selector
            .requirements()
            .iter()
            .all(|r| r.matches_value(labels.lookup(&r.key)))
    }

    fn each_field(selector: &FieldSelector, fields: &BTreeMap<String, String>) -> bool {
        selector
            .requirements()
            .iter()
            .all(|r| (fields.lookup(&r.field).unwrap_or("") == r.value) != r.negated)
    }

    /// Every subset of up to three of these maps (each key absent or one of the values).
    fn maps(keys: &[&str], values: &[&str]) -> Vec<BTreeMap<String, String>> {
        let mut maps = vec![BTreeMap::new()];
        for key in keys {
            maps = maps
                .into_iter()
                .flat_map(|map| {
                    let mut out = vec![map.clone()];
                    for value in values {
                        let mut with = map.clone();
                        with.insert((*key).to_owned(), (*value).to_owned());
                        out.push(with);
                    }
                    out
                })
                .collect();
        }
        maps
    }

    /// Every selector of up to three requirements (repeats and one key's runs included) over
    /// two keys selects what its requirements one by one select, on every map of those keys;
    /// so does every field selector of up to three terms over two fields, one the other's
    /// prefix (kube's text order does not group their terms).
    #[test]
    fn a_plan_selects_what_the_requirements_one_by_one_select() {
        let mut templates = Vec::new();
        for key in ["a", "b"] {
            for op in [
                "={v}",
                "!={v}",
                " in ({v},2)",
                " notin ({v},2)",
                " in ()",
                ">1",
                "<2",
                "",
            ] {
                for v in ["", "1", "x"] {
                    templates.push(format!("{key}{}", op.replace("{v}", v)));
                }
            }
            templates.push(format!("!{key}"));
        }
        templates.sort();
        templates.dedup();
        let objects = maps(&["a", "b"], &["", "1", "2", "x", "-3"]);
        let mut checked = 0;
        for first in &templates {
            for second in &templates {
                for third in ["", "a>0", "b notin (x)", "a in (1,x)"] {
                    let text = format!(
                        "{first},{second}{}{third}",
                        if third.is_empty() { "" } else { "," }
                    );
                    let selector = LabelSelector::parse(&text).unwrap();
                    for labels in &objects {
                        assert_eq!(
                            selector.matches(labels),
                            each_label(&selector, labels),
                            "{text} on {labels:?}"
                        );
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked > 100_000, "{checked}");
        let mut terms = Vec::new();
        for field in ["a", "a.b"] {
            for op in ["=", "!="] {
                for value in ["", "x", "y"] {
                    terms.push(format!("{field}{op}{value}"));
                }
            }
        }
        let objects = maps(&["a", "a.b"], &["", "x", "y", "z"]);
        for first in &terms {
            for second in &terms {
                for third in &terms {
                    let text = format!("{first},{second},{third}");
                    let selector = FieldSelector::parse(&text).unwrap();
                    for fields in &objects {
                        assert_eq!(
                            selector.matches(fields),
                            each_field(&selector, fields),
                            "{text} on {fields:?}"
                        );
                    }
                }
            }
        }
    }

    /// Counts what a match looks at.
    struct Counted<'a>(&'a BTreeMap<String, String>, std::cell::Cell<usize>);

    impl Lookup for Counted<'_> {
        fn lookup(&self, key: &str) -> Option<&str> {
            self.1.set(self.1.get() + 1);
            self.0.lookup(key)
        }

        fn count(&self) -> usize {
            self.0.count()
        }

        fn all_pairs(&self, f: &mut dyn FnMut(&str, &str) -> bool) -> bool {
            self.0.all_pairs(&mut |k, v| {
                self.1.set(self.1.get() + 1);
                f(k, v)
            })
        }
    }

    /// A selector of thousands of requirements looks at no more keys than the object has
    /// (a watch's 64 KB selector cost every event 9,000 checks per watcher on the dispatcher).
    #[test]
    fn a_long_selector_looks_at_no_more_keys_than_the_object_has() {
        let object = labels(&[("app", "web"), ("a00042", "v"), ("zzz", "1")]);
        let absent: Vec<String> = (0..9000).map(|i| format!("!b{i:05}")).collect();
        let long = LabelSelector::parse(&format!("{},zzz=1", absent.join(","))).unwrap();
        let values: Vec<String> = (0..20_000).map(|i| format!("v{i}")).collect();
        let set = LabelSelector::parse(&format!(
            "app notin ({}),a00042 in (v,{})",
            values.join(","),
            values.join(",")
        ))
        .unwrap();
        let unequal: Vec<String> = (0..9000).map(|i| format!("zzz!={i:05}")).collect();
        let unequal = LabelSelector::parse(&unequal.join(",")).unwrap();
        let names: Vec<String> = (0..9000)
            .map(|i| format!("metadata.name!=n{i:05}"))
            .collect();
        let names = FieldSelector::parse(&names.join(",")).unwrap();
        for (selector, expected) in [(&long, true), (&set, true), (&unequal, true)] {
            let counted = Counted(&object, std::cell::Cell::new(0));
            assert_eq!(selector.matches(&counted), expected);
            assert!(counted.1.get() <= object.len(), "{} looks", counted.1.get());
        }
        let fields = labels(&[("metadata.name", "n4"), ("metadata.namespace", "default")]);
        let counted = Counted(&fields, std::cell::Cell::new(0));
        assert!(names.matches(&counted));
        assert!(counted.1.get() <= fields.len(), "{} looks", counted.1.get());
        let fields = labels(&[("metadata.name", "n00004")]);
        assert!(!names.matches(&fields));
        // What the module documentation says a distinct key costs.
        assert_eq!(std::mem::size_of::<Rule>(), 36);
    }
}
