//! A create or update body that is not a JSON object, refused in kube-apiserver's words.
//!
//! kube-apiserver reads a body's `apiVersion` and `kind` with Go's `encoding/json` first
//! (`SimpleMetaFactory.Interpret`); when that fails, the create and update handlers answer
//! 400 BadRequest `the object provided is unrecognized (must be of type <Kind>): couldn't get
//! version/kind; json parse error: <Go's error> (<the body's first 30 bytes>)`
//! (`transformDecodeError` and `summarizeData` of `endpoints/handlers/rest.go`: the bytes as
//! text when the body starts with `{`, else in hex, ` ...` when cut, `<empty>` when empty).
//! A YAML body that does not convert is refused in the same frame ([`unrecognized`]) with the
//! converter's error (`error converting YAML to JSON: yaml: ...`).
//!
//! ## Guarantees
//! - Go's syntax errors are reproduced by a port of its scanner ([`syntax_error`], the
//!   `checkValid` pass `json.Unmarshal` makes before decoding): `invalid character 'ï'
//!   looking for beginning of value` (a byte-order mark), `unexpected end of JSON input` (an
//!   empty or cut body), `invalid character 'x' after top-level value` (trailing bytes),
//!   `invalid character '[' exceeded max depth` (nesting past 10,000 levels), and every other
//!   context Go names. The scan keeps a byte per open level, so it is linear in the body and
//!   bounded by it; it runs only on a body serde_json refused (serde_json reads a subset of
//!   what Go reads), so a body that decodes costs no second pass.
//! - A body whose top level is not an object is Go's `json: cannot unmarshal array into Go
//!   value of type struct { ... }` (the anonymous struct `Interpret` decodes into); `null` is
//!   an empty object, as Go decodes it (the create then refuses its missing name). An
//!   `apiVersion` or `kind` that is not a string (nor `null`) is that struct's `json: cannot
//!   unmarshal number into Go struct field .kind of type string`.
//! - Nesting is read to Go's limit ([`BODY_MAX_DEPTH`] = [`GO_MAX_DEPTH`], 10,000 levels,
//!   the object's own counted), past serde_json's own 128 levels on a stack of its own; one
//!   level more is Go's `invalid character '[' exceeded max depth`, naming the bracket that
//!   opens the level past the limit. Every walk the server makes over such an object runs on
//!   a stack with room for it (`watchkeeper_core::stack`, docs/ARCHITECTURE.md).
//! - What Go reads and serde_json does not is refused in the same frame, with the nearest Go
//!   words: a number past float64's range (`1e400`) is Go's `json: cannot unmarshal number 1e400
//!   into Go value of type float64` (`sigs.k8s.io/json`'s `convertNumber`, decoding a
//!   free-form value), in a create or update body in the frame kube's decode errors take,
//!   400 `<Kind> in version "<v>" cannot be handled as a <Kind>: ...` (a built-in kind's
//!   typed field would name the field; an unknown field Go skips: both are refused so here).
//!
//! ## Numbers
//! A number is written as kube-apiserver writes it after its storage round trip
//! ([`watchkeeper_core::gonum`]: `1.0` is answered and stored `1`, `1e3` `1000`, `-0` and
//! `-0.0` `0`, `1e20` `100000000000000000000`, `1e21` `1e+21`, `12345678901234567890`
//! `12345678901234567000`, `0.10` `0.1`), in the answers' and the store's one writer
//! (`watchkeeper_core::order`). It is read so that the value held is kube's too, with no pass
//! over the value beyond the reading ([`ReadBack`], a visitor of its own):
//! - a custom resource's create, update or patch body ([`decode_custom_object`]), a strategic
//!   merge patch and an apply configuration ([`parse_read_back`]): an integer of int64's range
//!   whatever its literal (`1.0` is 1, `-0` 0), any other number a float (an integer past
//!   int64 too), as kube holds a custom resource once stored and as its converter sets a
//!   built-in kind's integer field from an integral float64 (`replicas: 3.0` applied is 3);
//! - any other body ([`decode_object`], a built-in kind's merge or JSON patch) as serde_json
//!   reads it, so that a built-in kind's integer field refuses a float literal in Go's words
//!   ([`crate::schema`]: `json: cannot unmarshal number 1.0 into Go struct field
//!   DeploymentSpec.spec.replicas of type int32`), as kube's typed decoder does; `-0` is
//!   taken there as Go's `ParseInt` takes it.
//!
//! While a custom resource's request runs, kube holds `1.0` as a float64 where this holds the
//! integer 1: a schema's `type: integer` and `type: number` take both, and CEL sees a number
//! under a `type: number` schema as a double either way; only a field without a type (under
//! `x-kubernetes-preserve-unknown-fields`) is an int to CEL here, a double in kube.

use serde_json::Value;
use watchkeeper_core::gotext::go_quote;

use crate::error::ApiError;

/// Go's `encoding/json` nesting limit (`maxNestingDepth`).
pub const GO_MAX_DEPTH: usize = 10_000;

/// The Go type `SimpleMetaFactory.Interpret` decodes a body's `apiVersion` and `kind` into, as
/// Go's `reflect` prints it.
const FIND_KIND_TYPE: &str = r#"struct { APIVersion string "json:\"apiVersion,omitempty\""; Kind string "json:\"kind,omitempty\"" }"#;

/// A create or update body of `kind` as the JSON object it holds, or kube-apiserver's 400
/// (see the module docs).
///
/// # Errors
/// 400 BadRequest `the object provided is unrecognized (must be of type <kind>): ...`.
pub fn decode_object(kind: &str, version: &str, body: &[u8]) -> Result<Value, ApiError> {
    decode_object_as(kind, version, body, false)
}

/// [`decode_object`] of a custom resource's body: its numbers as kube's storage round trip
/// leaves them ([`ReadBack`]), as kube holds a custom resource's once stored.
///
/// # Errors
/// As [`decode_object`].
pub fn decode_custom_object(kind: &str, version: &str, body: &[u8]) -> Result<Value, ApiError> {
    decode_object_as(kind, version, body, true)
}

/// [`decode_object`], and whether the body held a number serde_json reads as a float (a
/// literal with a fraction or an exponent, or `-0`): only then may a built-in kind's integer
/// field hold a number whose text Go would quote, or refuse, from its literal
/// ([`crate::schema::decode_body`]). Noted as the body is read, at no other cost.
///
/// # Errors
/// As [`decode_object`].
pub fn decode_object_noting_floats(
    kind: &str,
    version: &str,
    body: &[u8],
) -> Result<(Value, bool), ApiError> {
    FLOAT_READ.with(|read| read.set(false));
    let value = decode_object_as(kind, version, body, false)?;
    Ok((value, FLOAT_READ.with(std::cell::Cell::get)))
}

fn decode_object_as(
    kind: &str,
    version: &str,
    body: &[u8],
    read_back: bool,
) -> Result<Value, ApiError> {
    decode_as(body, read_back).map_err(|cause| {
        let number = past_float64(body).map(past_float64_error);
        match number.filter(|error| cause.ends_with(error.as_str())) {
            Some(error) => ApiError::bad_request(format!(
                "{kind} in version {version:?} cannot be handled as a {kind}: {error}"
            )),
            None => unrecognized(kind, body, &cause),
        }
    })
}

/// Go's error for a number literal past float64's range (`1e400`) decoded into a free-form
/// value (`sigs.k8s.io/json`'s `convertNumber`).
fn past_float64_error(literal: &str) -> String {
    format!("json: cannot unmarshal number {literal} into Go value of type float64")
}

/// The first number literal of a JSON text that Go's scanner reads but that is past float64's
/// range (`1e400`, `-1e999`): serde_json refuses such a text (`number out of range`), and Go
/// refuses it only when it decodes the number, in its own words. `None` when there is none.
/// Runs only on a body serde_json refused.
fn past_float64(body: &[u8]) -> Option<&str> {
    let (mut at, mut in_string) = (0, false);
    while at < body.len() {
        match body[at] {
            b'"' => in_string = !in_string,
            b'\\' if in_string => at += 1,
            b'-' | b'0'..=b'9' if !in_string => {
                let length = body[at..]
                    .iter()
                    .take_while(|b| matches!(b, b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9'))
                    .count();
                let literal = std::str::from_utf8(&body[at..at + length]).ok()?;
                if literal.parse::<f64>().is_ok_and(f64::is_infinite) {
                    return Some(literal);
                }
                at += length;
                continue;
            }
            _ => {}
        }
        at += 1;
    }
    None
}

/// A body as the JSON object it holds, or the error kube-apiserver's `Interpret` reports for
/// it, `couldn't get version/kind; json parse error: <Go's error>` (see the module docs; a
/// DELETE's options answer it as it is, a 500).
///
/// # Errors
/// The error's text.
pub fn decode(body: &[u8]) -> Result<Value, String> {
    decode_as(body, false)
}

/// [`decode`], its numbers read back ([`ReadBack`]) when `read_back`.
fn decode_as(body: &[u8], read_back: bool) -> Result<Value, String> {
    let interpret = |cause: &str| format!("couldn't get version/kind; json parse error: {cause}");
    let parsed = if read_back {
        parse_read_back(body)
    } else {
        parse_as::<Noted>(body).map(|read| read.0)
    };
    // serde_json reads a subset of what Go reads, so Go's scanner runs only on its refusals.
    let value: Value = parsed.map_err(|e| {
        if syntax_error(body).is_none()
            && let Some(literal) = past_float64(body)
        {
            return interpret(&past_float64_error(literal));
        }
        let cause = syntax_error(body)
            .or_else(|| e.is_syntax().then(|| scan(body, BODY_MAX_DEPTH)).flatten())
            .unwrap_or_else(|| e.to_string());
        interpret(&cause)
    })?;
    let Value::Object(fields) = &value else {
        if value.is_null() {
            return Ok(Value::Object(serde_json::Map::new()));
        }
        return Err(interpret(&format!(
            "json: cannot unmarshal {} into Go value of type {FIND_KIND_TYPE}",
            go_kind(&value)
        )));
    };
    for field in ["apiVersion", "kind"] {
        if let Some(found) = fields.get(field)
            && !found.is_string()
            && !found.is_null()
        {
            return Err(interpret(&format!(
                "json: cannot unmarshal {} into Go struct field .{field} of type string",
                go_kind(found)
            )));
        }
    }
    Ok(value)
}

/// `body` as the JSON value Go's `encoding/json` reads from it: serde_json's reading, or, when
/// serde_json refuses it, its reading of the body with what Go replaces by U+FFFD replaced
/// (bytes of a string that are not UTF-8, [`replace_invalid_utf8`]; `\u` escapes of lone
/// UTF-16 surrogates, [`replace_lone_surrogates`]). A body serde_json reads costs nothing more.
///
/// # Errors
/// serde_json's error (of the replaced text, when something was replaced).
pub fn parse(body: &[u8]) -> Result<Value, serde_json::Error> {
    parse_as::<Value>(body)
}

/// [`parse`], its numbers read as kube's storage round trip leaves them ([`ReadBack`]: `1.0`
/// is the integer 1, `-0` 0, `12345678901234567890` a float), in the same single pass.
///
/// # Errors
/// As [`parse`].
pub fn parse_read_back(body: &[u8]) -> Result<Value, serde_json::Error> {
    parse_as::<ReadBack>(body).map(|read| read.0)
}

/// [`parse`] into `T`.
fn parse_as<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, serde_json::Error> {
    read_nested(body, BODY_MAX_DEPTH).or_else(|error| {
        let text = match std::str::from_utf8(body) {
            Ok(text) => std::borrow::Cow::Borrowed(text),
            Err(_) => std::borrow::Cow::Owned(replace_invalid_utf8(body)),
        };
        match (replace_lone_surrogates(&text), text) {
            (Some(replaced), _) => read_nested(replaced.as_bytes(), BODY_MAX_DEPTH),
            (None, std::borrow::Cow::Owned(text)) => read_nested(text.as_bytes(), BODY_MAX_DEPTH),
            (None, std::borrow::Cow::Borrowed(_)) => Err(error),
        }
    })
}

/// `bytes` read as `T`: serde_json's reading, or, for a text nested past serde_json's
/// recursion limit but at most `max_depth` levels, the same reading without the limit on its
/// own stack ([`DEEP_STACK`]). The common case costs nothing more.
fn read_nested<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
    max_depth: usize,
) -> Result<T, serde_json::Error> {
    serde_json::from_slice(bytes).or_else(|error| {
        if !error.is_syntax()
            || !error.to_string().starts_with("recursion limit exceeded")
            || scan(bytes, max_depth).is_some()
        {
            return Err(error);
        }
        stacker::grow(DEEP_STACK, || {
            let mut reader = serde_json::Deserializer::from_slice(bytes);
            reader.disable_recursion_limit();
            let value = T::deserialize(&mut reader)?;
            reader.end()?;
            Ok(value)
        })
    })
}

/// A JSON value whose numbers are read as kube-apiserver holds a custom resource's after its
/// storage round trip (`sigs.k8s.io/json`'s `convertNumber`, Go's `floatEncoder`, then
/// `convertNumber` again from etcd): an integer of int64's range is that integer, whatever its
/// literal (`1.0`, `1e3`, `-0`, `-0.0`); any other number is a float64 (`1.5`, `1e20`, an
/// integer past int64 such as `12345678901234567890`, rounded). Built by its own visitor as
/// the reader reads (serde_json's `Value` is built the same way), so it costs no pass over the
/// value; read from YAML too (any serde reader).
pub struct ReadBack(pub Value);

impl<'de> serde::Deserialize<'de> for ReadBack {
    fn deserialize<D: serde::Deserializer<'de>>(reader: D) -> Result<Self, D::Error> {
        reader.deserialize_any(Visitor::<true>).map(ReadBack)
    }
}

/// A JSON value as serde_json reads it, noting in [`FLOAT_READ`] whether a number was read
/// as a float ([`decode_object_noting_floats`]).
struct Noted(Value);

impl<'de> serde::Deserialize<'de> for Noted {
    fn deserialize<D: serde::Deserializer<'de>>(reader: D) -> Result<Self, D::Error> {
        reader.deserialize_any(Visitor::<false>).map(Noted)
    }
}

std::thread_local! {
    /// Whether the reading of a [`Noted`] value on this thread met a float (reset by its
    /// caller before the reading; the reading is synchronous).
    static FLOAT_READ: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The visitor of [`ReadBack`] (`READ_BACK`) and [`Noted`]; its own seed for nested values.
#[derive(Clone, Copy)]
struct Visitor<const READ_BACK: bool>;

impl<'de, const READ_BACK: bool> serde::de::DeserializeSeed<'de> for Visitor<READ_BACK> {
    type Value = Value;

    fn deserialize<D: serde::Deserializer<'de>>(self, reader: D) -> Result<Value, D::Error> {
        reader.deserialize_any(self)
    }
}

impl<'de, const READ_BACK: bool> serde::de::Visitor<'de> for Visitor<READ_BACK> {
    type Value = Value;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("any valid JSON value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Value, E> {
        Ok(value.into())
    }

    fn visit_u64<E>(self, value: u64) -> Result<Value, E> {
        if !READ_BACK {
            return Ok(value.into());
        }
        #[allow(clippy::cast_precision_loss)]
        Ok(i64::try_from(value).map_or_else(|_| read_back_float(value as f64), Value::from))
    }

    fn visit_f64<E>(self, value: f64) -> Result<Value, E> {
        if !READ_BACK {
            FLOAT_READ.with(|read| read.set(true));
            return Ok(serde_json::Number::from_f64(value).map_or(Value::Null, Value::Number));
        }
        Ok(read_back_float(value))
    }

    fn visit_str<E>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_owned()))
    }

    fn visit_string<E>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: serde::Deserializer<'de>>(self, reader: D) -> Result<Value, D::Error> {
        reader.deserialize_any(self)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(item) = seq.next_element_seed(self)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut fields = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let item = map.next_value_seed(self)?;
            fields.insert(key, item);
        }
        Ok(Value::Object(fields))
    }
}

/// A float64 as kube's storage round trip leaves it: the integer it holds when that is in
/// int64's range (`-0.0` is 0), else the float.
fn read_back_float(float: f64) -> Value {
    match watchkeeper_core::gonum::read_back_integer(float) {
        Some(integer) => integer.into(),
        None => serde_json::Number::from_f64(float).map_or(Value::Null, Value::Number),
    }
}

/// The deepest nesting of a JSON body (see the module docs): Go's 10,000 levels
/// ([`GO_MAX_DEPTH`]), as kube reads it. Every walk over an object (its drop, copies, checks,
/// merges, field sets and encodings) takes it on a server thread's stack
/// (`watchkeeper_core::stack`; docs/ARCHITECTURE.md).
pub const BODY_MAX_DEPTH: usize = GO_MAX_DEPTH;

/// The deepest nesting a stored object is read with ([`parse_stored`]): a body is at most
/// [`BODY_MAX_DEPTH`] levels deep, and the managed fields recorded for it nest a few levels
/// deeper than its deepest field.
pub const STORED_MAX_DEPTH: usize = BODY_MAX_DEPTH + 65;

/// The stack a text nested past serde_json's recursion limit is read on, in bytes (reserved,
/// touched only as deep as the reading goes).
const DEEP_STACK: usize = watchkeeper_core::stack::SEGMENT;

/// A stored object's JSON value: serde_json's reading, or, for one nested past serde_json's
/// recursion limit but at most [`STORED_MAX_DEPTH`] levels (an object a body nested near the
/// limit, whose managed fields nest deeper: before, such an object was stored and then never
/// read back, absent from the cache, its GET a 404), the same reading without the limit on its
/// own stack ([`DEEP_STACK`]). The common case costs nothing more.
///
/// # Errors
/// serde_json's error.
pub fn parse_stored(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    read_nested(bytes, STORED_MAX_DEPTH)
}

/// A step of a path into a JSON value: an object's key or an array's index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathStep<'a> {
    /// An object's key.
    Key(&'a str),
    /// An array's index.
    Index(usize),
}

/// The text of the number (or other scalar) at `path` in the JSON text `body`, as sent: what
/// Go's `encoding/json` quotes in an `UnmarshalTypeError` (`number 1e0`, `number -0.0`).
/// A repeated key's last value, as Go and serde_json keep it. `None` when the body does not
/// hold a scalar there (or is not JSON serde_json read: a body it read after replacing
/// invalid UTF-8 may not match). Walks the text without recursion, linear in the body; for
/// errors only.
#[must_use]
pub fn literal_at<'b>(body: &'b [u8], path: &[PathStep<'_>]) -> Option<&'b str> {
    let mut at = skip_space(body, 0);
    for step in path {
        at = match (*step, body.get(at)?) {
            (PathStep::Key(wanted), b'{') => member_at(body, at, wanted)?,
            (PathStep::Index(wanted), b'[') => element_at(body, at, wanted)?,
            _ => return None,
        };
    }
    let end = value_end(body, at)?;
    match body.get(at)? {
        b'{' | b'[' => None,
        _ => std::str::from_utf8(&body[at..end]).ok(),
    }
}

/// The first byte at or after `at` that is not JSON white space.
pub(crate) fn skip_space(body: &[u8], mut at: usize) -> usize {
    while body.get(at).is_some_and(|b| is_space(*b)) {
        at += 1;
    }
    at
}

/// Where the value starting at `at` ends (the byte after it), in a text serde_json read;
/// without recursion.
pub(crate) fn value_end(body: &[u8], at: usize) -> Option<usize> {
    match body.get(at)? {
        b'"' => string_end(body, at),
        b'{' | b'[' => {
            let (mut depth, mut i) = (0usize, at);
            while i < body.len() {
                match body[i] {
                    b'"' => {
                        i = string_end(body, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth = depth.checked_sub(1)?;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            None
        }
        _ => Some(
            at + body[at..]
                .iter()
                .take_while(|b| !matches!(b, b',' | b'}' | b']') && !is_space(**b))
                .count(),
        ),
    }
}

/// Where the string starting at `at` (its opening quote) ends (the byte after its closing one).
pub(crate) fn string_end(body: &[u8], at: usize) -> Option<usize> {
    let mut i = at + 1;
    while i < body.len() {
        match body[i] {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

/// Where the last value of `wanted` in the object starting at `at` starts.
fn member_at(body: &[u8], at: usize, wanted: &str) -> Option<usize> {
    let mut found = None;
    let mut i = skip_space(body, at + 1);
    while body.get(i)? == &b'"' {
        let key_end = string_end(body, i)?;
        let key = &body[i..key_end];
        let matches = if key.contains(&b'\\') {
            serde_json::from_slice::<String>(key).is_ok_and(|key| key == wanted)
        } else {
            &key[1..key.len() - 1] == wanted.as_bytes()
        };
        i = skip_space(body, key_end);
        (body.get(i)? == &b':').then_some(())?;
        let start = skip_space(body, i + 1);
        if matches {
            found = Some(start);
        }
        i = skip_space(body, value_end(body, start)?);
        if body.get(i)? == &b',' {
            i = skip_space(body, i + 1);
        }
    }
    found
}

/// Where element `wanted` of the array starting at `at` starts.
fn element_at(body: &[u8], at: usize, wanted: usize) -> Option<usize> {
    let mut i = skip_space(body, at + 1);
    for _ in 0..wanted {
        if body.get(i)? == &b']' {
            return None;
        }
        i = skip_space(body, value_end(body, i)?);
        (body.get(i)? == &b',').then_some(())?;
        i = skip_space(body, i + 1);
    }
    (body.get(i)? != &b']').then_some(i)
}

/// `text` with each `\u` escape of a lone UTF-16 surrogate written `\ufffd`, as Go's
/// `encoding/json` reads it (`unquote`: a leading surrogate not followed by the escape of a
/// trailing one is U+FFFD, and the escape after it is read on its own; a trailing surrogate
/// alone is U+FFFD), or `None` when there is none. Only escapes inside strings are escapes.
fn replace_lone_surrogates(text: &str) -> Option<String> {
    let escape_at = |bytes: &[u8], at: usize| -> Option<u32> {
        let digits = bytes.get(at..at + 6)?.strip_prefix(b"\\u")?;
        u32::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
    };
    let bytes = text.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0;
    let (mut at, mut in_string) = (0, false);
    while at < bytes.len() {
        match bytes[at] {
            b'"' => {
                in_string = !in_string;
                at += 1;
            }
            b'\\' if in_string => match escape_at(bytes, at) {
                Some(0xD800..=0xDBFF)
                    if escape_at(bytes, at + 6).is_some_and(|u| (0xDC00..=0xDFFF).contains(&u)) =>
                {
                    at += 12;
                }
                Some(0xD800..=0xDFFF) => {
                    let out = out.get_or_insert_with(|| String::with_capacity(text.len()));
                    out.push_str(&text[copied..at]);
                    out.push_str("\\ufffd");
                    at += 6;
                    copied = at;
                }
                _ => at += 2,
            },
            _ => at += 1,
        }
    }
    out.map(|mut out| {
        out.push_str(&text[copied..]);
        out
    })
}

/// How Go's `encoding/json` names the JSON type of `value` in an `UnmarshalTypeError`.
pub fn go_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// kube-apiserver's 400 for a create or update body of `kind` that does not decode, before its
/// kind is known (`transformDecodeError`): `cause` and the body summarized.
#[must_use]
pub fn unrecognized(kind: &str, body: &[u8], cause: &str) -> ApiError {
    ApiError::bad_request(format!(
        "the object provided is unrecognized (must be of type {kind}): {cause} ({})",
        summarize(body)
    ))
}

/// `bytes` with each byte of an invalid UTF-8 sequence replaced by U+FFFD, as Go's
/// `encoding/json` reads a string (the scanner has refused such bytes anywhere else).
fn replace_invalid_utf8(mut bytes: &[u8]) -> String {
    let mut text = String::with_capacity(bytes.len() + 16);
    loop {
        match std::str::from_utf8(bytes) {
            Ok(valid) => {
                text.push_str(valid);
                return text;
            }
            Err(error) => {
                let (valid, rest) = bytes.split_at(error.valid_up_to());
                text.push_str(std::str::from_utf8(valid).unwrap_or_default());
                let invalid = error.error_len().unwrap_or(rest.len());
                text.extend(std::iter::repeat_n('\u{fffd}', invalid));
                bytes = &rest[invalid..];
            }
        }
    }
}

/// The body as kube's `summarizeData(body, 30)` prints it in a decode error.
fn summarize(body: &[u8]) -> String {
    const MAX: usize = 30;
    let cut = body.len() > MAX;
    let head = &body[..body.len().min(MAX)];
    let text = match body.first() {
        None => return "<empty>".to_owned(),
        // Go's `string(bytes)` keeps invalid UTF-8 as it is; a Status is text, so replaced.
        Some(b'{') => String::from_utf8_lossy(head).into_owned(),
        Some(_) => head.iter().map(|b| format!("{b:02x}")).collect(),
    };
    if cut { format!("{text} ...") } else { text }
}

/// A byte as Go's `encoding/json` quotes it in an error (`quoteChar`: the byte as the
/// character of that code point, quoted with single quotes).
fn quote_byte(byte: u8) -> String {
    match byte {
        b'\'' => r"'\''".to_owned(),
        b'"' => "'\"'".to_owned(),
        _ => {
            let quoted = go_quote(&char::from(byte).to_string());
            format!("'{}'", &quoted[1..quoted.len() - 1])
        }
    }
}

/// What the scanner expects next (Go's `scanner.step` functions).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    BeginValueOrEmpty,
    BeginValue,
    BeginStringOrEmpty,
    BeginString,
    EndValue,
    EndTop,
    InString,
    InStringEsc,
    InStringEscU(u8),
    Neg,
    One,
    Zero,
    Dot,
    Dot0,
    E,
    ESign,
    E0,
    /// Inside `true`, `false` or `null`: the literal and the index of the next byte.
    Literal(&'static [u8], usize),
}

/// What an open level holds (Go's `parseState`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Level {
    ObjectKey,
    ObjectValue,
    ArrayValue,
}

/// The scanner of Go's `encoding/json` (`scanner.go`), for its errors only.
struct Scanner {
    step: Step,
    levels: Vec<Level>,
    end_top: bool,
    max_depth: usize,
}

fn is_space(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\r' | b'\n')
}

impl Scanner {
    fn error(byte: u8, context: &str) -> String {
        format!("invalid character {} {context}", quote_byte(byte))
    }

    fn push(&mut self, byte: u8, level: Level, next: Step) -> Result<(), String> {
        self.levels.push(level);
        if self.levels.len() > self.max_depth {
            return Err(Self::error(byte, "exceeded max depth"));
        }
        self.step = next;
        Ok(())
    }

    fn pop(&mut self) {
        self.levels.pop();
        if self.levels.is_empty() {
            self.step = Step::EndTop;
            self.end_top = true;
        } else {
            self.step = Step::EndValue;
        }
    }

    fn begin_value(&mut self, byte: u8) -> Result<(), String> {
        self.step = match byte {
            b if is_space(b) => return Ok(()),
            b'{' => return self.push(byte, Level::ObjectKey, Step::BeginStringOrEmpty),
            b'[' => return self.push(byte, Level::ArrayValue, Step::BeginValueOrEmpty),
            b'"' => Step::InString,
            b'-' => Step::Neg,
            b'0' => Step::Zero,
            b'1'..=b'9' => Step::One,
            b't' => Step::Literal(b"true", 1),
            b'f' => Step::Literal(b"false", 1),
            b'n' => Step::Literal(b"null", 1),
            _ => return Err(Self::error(byte, "looking for beginning of value")),
        };
        Ok(())
    }

    fn end_value(&mut self, byte: u8) -> Result<(), String> {
        let Some(&level) = self.levels.last() else {
            self.step = Step::EndTop;
            self.end_top = true;
            return self.byte(byte);
        };
        if is_space(byte) {
            self.step = Step::EndValue;
            return Ok(());
        }
        match (level, byte) {
            (Level::ObjectKey, b':') => {
                *self.levels.last_mut().expect("a level") = Level::ObjectValue;
                self.step = Step::BeginValue;
            }
            (Level::ObjectKey, _) => return Err(Self::error(byte, "after object key")),
            (Level::ObjectValue, b',') => {
                *self.levels.last_mut().expect("a level") = Level::ObjectKey;
                self.step = Step::BeginString;
            }
            (Level::ObjectValue, b'}') | (Level::ArrayValue, b']') => self.pop(),
            (Level::ObjectValue, _) => {
                return Err(Self::error(byte, "after object key:value pair"));
            }
            (Level::ArrayValue, b',') => self.step = Step::BeginValue,
            (Level::ArrayValue, _) => return Err(Self::error(byte, "after array element")),
        }
        Ok(())
    }

    /// Go's `scanner.step` for one byte.
    fn byte(&mut self, byte: u8) -> Result<(), String> {
        match self.step {
            Step::BeginValueOrEmpty if is_space(byte) => {}
            Step::BeginValueOrEmpty if byte == b']' => return self.end_value(byte),
            Step::BeginValueOrEmpty | Step::BeginValue => return self.begin_value(byte),
            Step::BeginStringOrEmpty if is_space(byte) => {}
            Step::BeginStringOrEmpty if byte == b'}' => {
                *self.levels.last_mut().expect("a level") = Level::ObjectValue;
                return self.end_value(byte);
            }
            Step::BeginStringOrEmpty | Step::BeginString => match byte {
                b if is_space(b) => {}
                b'"' => self.step = Step::InString,
                _ => {
                    return Err(Self::error(
                        byte,
                        "looking for beginning of object key string",
                    ));
                }
            },
            Step::EndValue => return self.end_value(byte),
            Step::EndTop => {
                if !is_space(byte) {
                    return Err(Self::error(byte, "after top-level value"));
                }
            }
            Step::InString => match byte {
                b'"' => self.step = Step::EndValue,
                b'\\' => self.step = Step::InStringEsc,
                0..0x20 => return Err(Self::error(byte, "in string literal")),
                _ => {}
            },
            Step::InStringEsc => match byte {
                b'b' | b'f' | b'n' | b'r' | b't' | b'\\' | b'/' | b'"' => {
                    self.step = Step::InString;
                }
                b'u' => self.step = Step::InStringEscU(0),
                _ => return Err(Self::error(byte, "in string escape code")),
            },
            Step::InStringEscU(seen) => {
                if !byte.is_ascii_hexdigit() {
                    return Err(Self::error(byte, "in \\u hexadecimal character escape"));
                }
                self.step = if seen == 3 {
                    Step::InString
                } else {
                    Step::InStringEscU(seen + 1)
                };
            }
            Step::Neg => match byte {
                b'0' => self.step = Step::Zero,
                b'1'..=b'9' => self.step = Step::One,
                _ => return Err(Self::error(byte, "in numeric literal")),
            },
            Step::One if byte.is_ascii_digit() => {}
            Step::One | Step::Zero => match byte {
                b'.' => self.step = Step::Dot,
                b'e' | b'E' => self.step = Step::E,
                _ => return self.end_value(byte),
            },
            Step::Dot if byte.is_ascii_digit() => self.step = Step::Dot0,
            Step::Dot => {
                return Err(Self::error(byte, "after decimal point in numeric literal"));
            }
            Step::Dot0 => match byte {
                b'0'..=b'9' => {}
                b'e' | b'E' => self.step = Step::E,
                _ => return self.end_value(byte),
            },
            Step::E if byte == b'+' || byte == b'-' => self.step = Step::ESign,
            Step::E | Step::ESign => {
                if !byte.is_ascii_digit() {
                    return Err(Self::error(byte, "in exponent of numeric literal"));
                }
                self.step = Step::E0;
            }
            Step::E0 if byte.is_ascii_digit() => {}
            Step::E0 => return self.end_value(byte),
            Step::Literal(word, next) => {
                if byte != word[next] {
                    let name = std::str::from_utf8(word).unwrap_or_default();
                    return Err(Self::error(
                        byte,
                        &format!("in literal {name} (expecting {})", quote_byte(word[next])),
                    ));
                }
                self.step = if next + 1 == word.len() {
                    Step::EndValue
                } else {
                    Step::Literal(word, next + 1)
                };
            }
        }
        Ok(())
    }
}

/// Go's `encoding/json` syntax error for `data`, as `json.Unmarshal` reports it before
/// decoding (`checkValid`), or `None` when Go reads it as one JSON value.
#[must_use]
pub fn syntax_error(data: &[u8]) -> Option<String> {
    scan(data, GO_MAX_DEPTH)
}

/// Go's scanner over `data` with a nesting limit of `max_depth` levels.
fn scan(data: &[u8], max_depth: usize) -> Option<String> {
    let mut scanner = Scanner {
        step: Step::BeginValue,
        levels: Vec::new(),
        end_top: false,
        max_depth,
    };
    for &byte in data {
        if let Err(error) = scanner.byte(byte) {
            return Some(error);
        }
    }
    // Go's `scanner.eof`: a space ends a number; a literal cut short fails on that space.
    if scanner.end_top {
        return None;
    }
    if let Err(error) = scanner.byte(b' ') {
        return Some(error);
    }
    (!scanner.end_top).then(|| "unexpected end of JSON input".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_literal_is_found_by_its_path_as_sent() {
        use PathStep::{Index, Key};
        let body = br#" { "a" : { "x": [1, "s,]}", {"n": 1e0}, -0.0 ], "k\"ey": 1.50 },
            "b": 3000000000, "a": {"x": [0, 0, {"n": 2.0}]} } "#;
        // A repeated key's last value, as Go keeps it.
        assert_eq!(
            literal_at(body, &[Key("a"), Key("x"), Index(2), Key("n")]),
            Some("2.0")
        );
        assert_eq!(literal_at(body, &[Key("b")]), Some("3000000000"));
        let first = br#"{"a": {"x": [1, "s,]}", {"n": 1e0}, -0.0], "k\"ey": 1.50}}"#;
        assert_eq!(
            literal_at(first, &[Key("a"), Key("x"), Index(2), Key("n")]),
            Some("1e0")
        );
        assert_eq!(
            literal_at(first, &[Key("a"), Key("x"), Index(3)]),
            Some("-0.0")
        );
        assert_eq!(literal_at(first, &[Key("a"), Key("k\"ey")]), Some("1.50"));
        assert_eq!(literal_at(first, &[Key("a"), Key("x"), Index(4)]), None);
        assert_eq!(literal_at(first, &[Key("a"), Key("x")]), None);
        assert_eq!(literal_at(first, &[Key("nope")]), None);
        assert_eq!(literal_at(b"{\"a\": [1,", &[Key("a"), Index(3)]), None);
    }

    #[test]
    fn a_body_s_floats_are_noted_as_read() {
        let noted = |body: &str| decode_object_noting_floats("Pod", "v1", body.as_bytes()).unwrap();
        assert!(!noted(r#"{"a": [1, -1, 18446744073709551615, "1.0"]}"#).1);
        for float in ["1.0", "-0", "1e0", "-0.0", "99999999999999999999"] {
            let (value, floats) = noted(&format!(r#"{{"a": [{{"b": {float}}}]}}"#));
            assert!(floats, "{float}");
            assert!(value["a"][0]["b"].is_f64(), "{float}");
        }
    }

    #[test]
    fn go_syntax_errors_word_for_word() {
        // Expected texts: Go's `json.Unmarshal(data, &v)` on the same bytes (go1.19.8).
        let cases: [(&[u8], Option<&str>); 24] = [
            (b"{}", None),
            (
                b" {\"a\": [1, -2.5e+3, true, false, null, \"\\u00e9\\n\"]} \n",
                None,
            ),
            (b"123", None),
            (b"", Some("unexpected end of JSON input")),
            (b"   ", Some("unexpected end of JSON input")),
            (b"{\"a\":", Some("unexpected end of JSON input")),
            (
                b"\xef\xbb\xbf{}",
                Some("invalid character '\u{ef}' looking for beginning of value"),
            ),
            (b"{} x", Some("invalid character 'x' after top-level value")),
            (b"{}{}", Some("invalid character '{' after top-level value")),
            (b"{\"a\" 1}", Some("invalid character '1' after object key")),
            (
                b"{\"a\":1 \"b\"}",
                Some("invalid character '\"' after object key:value pair"),
            ),
            (b"[1 2]", Some("invalid character '2' after array element")),
            (
                b"{1:2}",
                Some("invalid character '1' looking for beginning of object key string"),
            ),
            (
                b"{\"a\":1,}",
                Some("invalid character '}' looking for beginning of object key string"),
            ),
            (
                b"[1,]",
                Some("invalid character ']' looking for beginning of value"),
            ),
            (
                b"\"a\x01\"",
                Some("invalid character '\\x01' in string literal"),
            ),
            (
                b"\"\\x\"",
                Some("invalid character 'x' in string escape code"),
            ),
            (
                b"\"\\u12g4\"",
                Some("invalid character 'g' in \\u hexadecimal character escape"),
            ),
            (b"-x", Some("invalid character 'x' in numeric literal")),
            (
                b"1.e5",
                Some("invalid character 'e' after decimal point in numeric literal"),
            ),
            (
                b"1e+",
                Some("invalid character ' ' in exponent of numeric literal"),
            ),
            (
                b"tru",
                Some("invalid character ' ' in literal true (expecting 'e')"),
            ),
            (
                b"nul1",
                Some("invalid character '1' in literal null (expecting 'l')"),
            ),
            (
                b"'a'",
                Some("invalid character '\\'' looking for beginning of value"),
            ),
        ];
        for (data, want) in cases {
            assert_eq!(
                syntax_error(data).as_deref(),
                want,
                "{:?}",
                String::from_utf8_lossy(data)
            );
        }
        // Invalid UTF-8 inside a string is not a syntax error to Go.
        assert_eq!(syntax_error(b"{\"a\":\"\xff\xfe\"}"), None);
    }

    /// Go's scanner runs only on serde_json's refusals: what serde_json reads, Go reads too.
    #[test]
    fn what_serde_json_reads_go_reads() {
        let edges: [&[u8]; 14] = [
            b"-0",
            b"1E5",
            b"0.5e-3",
            b"-1.0E+2",
            b"\"\\u0000\"",
            b"\"\x7f\"",
            b" {} ",
            b"\t[]\r\n",
            b"\"\\ud800\"",
            b"1.",
            b"01",
            b"[1,]",
            b"{\"a\":1,}",
            b"\"\\/\"",
        ];
        for data in edges {
            if serde_json::from_slice::<Value>(data).is_ok() {
                assert_eq!(
                    syntax_error(data),
                    None,
                    "{:?}",
                    String::from_utf8_lossy(data)
                );
            }
        }
    }

    #[test]
    fn nesting_past_go_s_limit_is_its_error_and_the_body_limit_is_in_its_words() {
        // On a server thread's stack: serde_json's own walks over 10,000 levels need it.
        stacker::grow(
            watchkeeper_core::stack::THREAD_STACK,
            nesting_past_go_s_limit,
        );
    }

    fn nesting_past_go_s_limit() {
        let deep = |levels: usize| format!("{}{}", "[".repeat(levels), "]".repeat(levels));
        assert_eq!(syntax_error(deep(GO_MAX_DEPTH).as_bytes()), None);
        assert_eq!(
            syntax_error(deep(GO_MAX_DEPTH + 1).as_bytes()).as_deref(),
            Some("invalid character '[' exceeded max depth")
        );
        // The body limit: the deepest body is read (past serde_json's own 128 levels), one
        // level more refused at the bracket that opens it.
        let at_limit = format!("{{\"a\":{}}}", deep(BODY_MAX_DEPTH - 1));
        assert!(serde_json::from_str::<Value>(&at_limit).is_err());
        let value = decode_object("ConfigMap", "v1", at_limit.as_bytes()).unwrap();
        assert!(value["a"].is_array());
        assert!(parse_read_back(at_limit.as_bytes()).is_ok());
        // A stored object may nest deeper (its managed fields), up to its own bound.
        let stored = format!("{{\"a\":{}}}", deep(STORED_MAX_DEPTH - 1));
        let value = parse_stored(stored.as_bytes()).unwrap();
        let (mut levels, mut at) = (0, &value);
        while let Some(inner) = at.get("a").or_else(|| at.get(0)) {
            (levels, at) = (levels + 1, inner);
        }
        assert_eq!(levels, STORED_MAX_DEPTH - 1);
        let past = format!("{{\"a\":{}}}", deep(STORED_MAX_DEPTH));
        assert!(parse_stored(past.as_bytes()).is_err());
        assert!(parse_stored(b"{\"a\":[1,]}").is_err());
        // A deep body that is not JSON is refused as before, in Go's words.
        let broken = format!("{{\"a\":{}1,]{}}}", "[".repeat(300), "]".repeat(299));
        let error = decode_object("ConfigMap", "v1", broken.as_bytes()).unwrap_err();
        assert!(
            error
                .message
                .contains("invalid character ']' looking for beginning of value"),
            "{}",
            error.message
        );
        let past = format!(
            "{{\"a\":{}{{\"b\":1}}{}}}",
            "[".repeat(BODY_MAX_DEPTH - 1),
            "]".repeat(BODY_MAX_DEPTH - 1)
        );
        let error = decode_object("ConfigMap", "v1", past.as_bytes()).unwrap_err();
        assert!(
            error
                .message
                .contains("json parse error: invalid character '{' exceeded max depth ("),
            "{}",
            error.message
        );
        let body = format!("{{\"a\":{}}}", deep(BODY_MAX_DEPTH + 100));
        let error = decode_object("ConfigMap", "v1", body.as_bytes()).unwrap_err();
        assert_eq!(error.code, 400);
        assert_eq!(
            error.message,
            "the object provided is unrecognized (must be of type ConfigMap): couldn't get version/kind; json parse error: invalid character '[' exceeded max depth ({\"a\":[[[[[[[[[[[[[[[[[[[[[[[[[ ...)"
        );
    }

    /// Expected values: kube's `convertNumber` of the literal, written by `floatEncoder` and
    /// read by `convertNumber` again (the storage round trip).
    #[test]
    fn numbers_read_back_as_kube_holds_them_once_stored() {
        let body = br#"{"a":[1,1.0,1e3,-0,-0.0,1e20,12345678901234567890,0.5,-9223372036854775808,9223372036854775807,1e-400]}"#;
        let read = parse_read_back(body).unwrap();
        let a = read["a"].as_array().unwrap();
        for (index, want) in [1, 1, 1000, 0, 0].into_iter().enumerate() {
            assert_eq!(a[index].as_i64(), Some(want), "{}", a[index]);
            assert!(!a[index].is_f64(), "{}", a[index]);
        }
        assert!(a[5].is_f64() && a[5].as_f64() == Some(1e20), "{}", a[5]);
        assert!(a[6].is_f64(), "past int64, a float: {}", a[6]);
        assert_eq!(a[6].as_f64(), Some(12_345_678_901_234_567_890.0));
        assert_eq!(a[7].as_f64(), Some(0.5));
        assert_eq!(a[8].as_i64(), Some(i64::MIN));
        assert_eq!(a[9].as_i64(), Some(i64::MAX));
        assert_eq!(a[10].as_i64(), Some(0));
        // The plain reading keeps serde_json's: the literal's kind.
        let plain = parse(body).unwrap();
        assert!(plain["a"][1].is_f64() && plain["a"][6].is_u64());
        // The same fallbacks (invalid UTF-8 read as U+FFFD).
        assert_eq!(
            parse_read_back(b"{\"s\":\"\xff\",\"n\":2.0}").unwrap(),
            serde_json::json!({"s": "\u{fffd}", "n": 2})
        );
        assert_eq!(
            decode_custom_object("Widget", "v1", b"{\"n\":[3.0,{\"m\":-0}]}").unwrap(),
            serde_json::json!({"n": [3, {"m": 0}]})
        );
    }

    /// Expected texts: `sigs.k8s.io/json`'s `convertNumber` error (`strconv.ParseFloat`'s range
    /// error) in kube's `transformDecodeError` frame.
    #[test]
    fn numbers_past_float64_are_go_s_refusal() {
        let body = br#"{"kind":"Widget","s":"1e400 \" 2e400","spec":{"a":[1,-1e400]}}"#;
        assert_eq!(
            decode_object("Widget", "v1", body).unwrap_err().message,
            "Widget in version \"v1\" cannot be handled as a Widget: json: cannot unmarshal number -1e400 into Go value of type float64"
        );
        assert_eq!(
            decode(b"{\"a\":1E+999}").unwrap_err(),
            "couldn't get version/kind; json parse error: json: cannot unmarshal number 1E+999 into Go value of type float64"
        );
        // An underflow is 0 to Go and to serde_json alike; a syntax error keeps Go's words.
        assert_eq!(decode(b"{\"a\":1e-400}").unwrap()["a"], 0.0);
        assert!(
            decode_object("Widget", "v1", b"{\"a\":1e400,}")
                .unwrap_err()
                .message
                .contains("invalid character '}' looking for beginning of object key string")
        );
    }

    #[test]
    fn refusals_carry_kube_s_frame_and_summary() {
        let refused = |body: &[u8]| decode_object("Pod", "v1", body).unwrap_err().message;
        assert_eq!(
            refused(b""),
            "the object provided is unrecognized (must be of type Pod): couldn't get version/kind; json parse error: unexpected end of JSON input (<empty>)"
        );
        assert_eq!(
            refused(b"\xef\xbb\xbf{\"kind\":\"Pod\",\"apiVersion\":\"v1\"}"),
            "the object provided is unrecognized (must be of type Pod): couldn't get version/kind; json parse error: invalid character '\u{ef}' looking for beginning of value (efbbbf7b226b696e64223a22506f64222c2261706956657273696f6e223a ...)"
        );
        assert_eq!(
            refused(b"[1]"),
            format!(
                "the object provided is unrecognized (must be of type Pod): couldn't get version/kind; json parse error: json: cannot unmarshal array into Go value of type {FIND_KIND_TYPE} (5b315d)"
            )
        );
        assert_eq!(
            refused(b"{\"kind\":5}"),
            "the object provided is unrecognized (must be of type Pod): couldn't get version/kind; json parse error: json: cannot unmarshal number into Go struct field .kind of type string ({\"kind\":5})"
        );
        assert!(refused(b"{\"apiVersion\":[],\"kind\":\"Pod\"}").contains(
            "json: cannot unmarshal array into Go struct field .apiVersion of type string ("
        ));
        assert_eq!(
            decode_object("Pod", "v1", b"{\"kind\":null}").unwrap()["kind"],
            Value::Null
        );
        assert_eq!(
            refused(b"{\"a\": 1} trailing"),
            "the object provided is unrecognized (must be of type Pod): couldn't get version/kind; json parse error: invalid character 't' after top-level value ({\"a\": 1} trailing)"
        );
        // Checked against go1.19.8's `json.Unmarshal` into a map.
        for (body, want) in [
            (&b"{\"a\":\"\xff\xfe\"}"[..], "\u{fffd}\u{fffd}"),
            (b"{\"a\":\"x\xe2\x82y\"}", "x\u{fffd}\u{fffd}y"),
            (b"{\"a\":\"\xf0\x9f\x98\"}", "\u{fffd}\u{fffd}\u{fffd}"),
        ] {
            assert_eq!(decode_object("Pod", "v1", body).unwrap()["a"], want);
        }
        // Lone UTF-16 surrogates, as go1.19.8's `json.Unmarshal` reads them: U+FFFD, the
        // escape after a lone leading one read on its own; a pair, and escaped backslashes
        // before a `u`, as they are.
        for (body, want) in [
            (&br#"{"a":"\ud800"}"#[..], "\u{fffd}"),
            (br#"{"a":"x\udc00y"}"#, "x\u{fffd}y"),
            (br#"{"a":"\ud800\u0041"}"#, "\u{fffd}A"),
            (br#"{"a":"\ud800\ud800"}"#, "\u{fffd}\u{fffd}"),
            (br#"{"a":"\ud83d\ude00\ud800"}"#, "\u{1f600}\u{fffd}"),
            (b"{\"a\":\"\\ud800\xff\"}", "\u{fffd}\u{fffd}"),
        ] {
            assert_eq!(decode_object("Pod", "v1", body).unwrap()["a"], want);
        }
        assert_eq!(
            decode_object("Pod", "v1", br#"{"a":"\\ud800","\ud800":1}"#).unwrap(),
            serde_json::json!({"a": "\\ud800", "\u{fffd}": 1})
        );
        assert_eq!(
            decode_object("Pod", "v1", b"null").unwrap(),
            Value::Object(serde_json::Map::new())
        );
        assert_eq!(
            decode_object("Pod", "v1", b"{\"kind\":\"Pod\"}").unwrap()["kind"],
            "Pod"
        );
    }
}
