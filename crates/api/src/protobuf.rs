//! Kubernetes protobuf (`application/vnd.kubernetes.protobuf`): request bodies decoded to the
//! JSON the rest of the server handles, and responses encoded from it ([`encode`]), with one
//! set of schema tables for both directions, generated from Kubernetes' own definitions.
//!
//! ## Guarantees
//! - Anything outside the tables is refused, never dropped: an unknown field number in a
//!   known message is a 415 naming the message and the field, a kind without a table is a 415,
//!   and malformed bytes are a 400. No input panics (a property test feeds arbitrary bytes).
//! - Responses: whatever [`encode`] writes decodes back to the same JSON here (a test for every
//!   kind, with objects that reach every message of the kind), and an object with a field
//!   outside the tables is not encoded at all (the caller answers JSON, or 406).
//! - The tables are Kubernetes 1.33's schema of every built-in kind the server serves or
//!   answers, whole (all fields of every message they reach): `tables.rs` is generated from
//!   `crates/api/protobuf/kubernetes-1.33.schema`, an extract of the `generated.proto` files
//!   and Go struct tags of `k8s.io/api`, `k8s.io/apimachinery`, `k8s.io/kube-aggregator` and
//!   `k8s.io/apiextensions-apiserver` (v0.33.13) made by `crates/api/protobuf/extract.py`; a
//!   test fails when `tables.rs` is not what the extract gives (`protobuf/generate.rs`).
//! - CustomResourceDefinitions too, as kube-apiserver serves them (apiextensions' types have
//!   `generated.proto`): their JSON schemas' Go types with a JSON form of their own are
//!   rendered as their `MarshalJSON` renders them — `JSON` (`default`, `example`, `enum`) as
//!   the raw value, `JSONSchemaPropsOrArray` / `OrBool` / `OrStringArray` (`items`,
//!   `additionalProperties`, `additionalItems`, `dependencies`) as the schema or the array
//!   or boolean ([`SchemaOr`]), and `double`s (`maximum`, `minimum`, `multipleOf`) as Go writes
//!   a `float64` (`10`, `0.5`).
//!
//! ## Requests
//! client-go (so kubectl's generator commands and every typed client: `create configmap`,
//! `create deployment`, `run`, `expose`, `auth can-i`, a controller's `Create`) sends built-in
//! kinds as `application/vnd.kubernetes.protobuf` and does not fall back to JSON on 415. The
//! body is Kubernetes' envelope: the magic `k8s\0`, then a `runtime.Unknown` message
//! (1 `typeMeta` {1 `apiVersion`, 2 `kind`}, 2 `raw` = the object's own protobuf,
//! 3 `contentEncoding`, 4 `contentType`).
//!
//! [`decode_protobuf`] decodes `raw` with the tables (field number → JSON name and type). The
//! output follows Go's `encoding/json` of the same struct: zero values of `omitempty` scalars
//! are left out (the Go marshaller writes every non-pointer field, so they are on the wire),
//! while fields that are pointers, are not `omitempty`, or are structs keep whatever value was
//! sent; nested messages always appear (`resources: {}`), a zero `metav1.Time` or `MicroTime`
//! (an empty message, as Go writes it) is `null`, `bytes` become base64 strings, `json:",inline"` structs join their parent,
//! `IntOrString` is a number or a string and `Quantity` a string. The tables keep each Go
//! field's shape (pointer, `omitempty`, slice), from which [`gostruct`] gives JSON bodies the
//! whole of Go's decode-then-encode (absent and `null` fields as Go's zero values too).
//!
//! ## Limits
//! Custom resources have no protobuf form (kube-apiserver serves them as JSON too, and lists
//! protobuf in their 406 only for their metadata); a kind is matched by its exact
//! `apiVersion`, so a body in a version the server does not serve is a 415.

use serde_json::{Map, Value};

use crate::error::ApiError;
use crate::resources::ResourceDef;

pub mod encode;
pub mod gostruct;

pub use encode::{
    ENVELOPE_TAIL, EncodeError, WatchFraming, cached_object_message, decode_response,
    decode_watch_stream, encode_object_message, encode_protobuf, envelope, envelope_head,
    has_protobuf_schema, list_item_head, list_meta_field, metadata_message_of_json,
    metadata_prefix, watch_frame, watch_frame_head,
};

/// The four bytes every Kubernetes protobuf body starts with.
pub const PROTOBUF_MAGIC: &[u8; 4] = b"k8s\0";

/// The media type of Kubernetes protobuf bodies.
pub const PROTOBUF_MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// Whether a `Content-Type` value names Kubernetes protobuf (parameters ignored).
#[must_use]
pub fn is_protobuf_media_type(content_type: &str) -> bool {
    content_type
        .split(';')
        .next()
        .is_some_and(|media| media.trim().eq_ignore_ascii_case(PROTOBUF_MEDIA_TYPE))
}

/// How one field's value is encoded and rendered.
#[derive(Clone, Copy)]
enum Ty {
    Str,
    Int32,
    Int64,
    Bool,
    /// `bytes`, rendered as standard base64.
    Bytes,
    Msg(&'static Message),
    /// A Go struct embedded with `json:",inline"`: its fields join the parent object.
    Inline(&'static Message),
    /// `map<string, string>`.
    MapStr,
    /// `map<string, bytes>`, values as base64.
    MapBytes,
    /// `map<string, Quantity>` (`ResourceList`).
    MapQuantity,
    /// `map<string, Time>` (a PodDisruptionBudget's `disruptedPods`).
    MapTime,
    /// `map<string, ExtraValue>`: a Go named `[]string`, the message {1 repeated `items`},
    /// rendered as an array.
    MapStrList,
    /// `metav1.Time` {1 seconds, 2 nanos} as RFC 3339 (whole seconds); an empty message (Go's
    /// zero time) is `null`.
    Time,
    /// `metav1.MicroTime` {1 seconds, 2 nanos} as RFC 3339 with six fractional digits; an
    /// empty message is `null`.
    MicroTime,
    /// `intstr.IntOrString` {1 type, 2 intVal, 3 strVal} as a number or a string.
    IntOrString,
    /// `resource.Quantity` {1 string} as its string.
    Quantity,
    /// `metav1.FieldsV1` {1 Raw} whose bytes are JSON.
    FieldsV1,
    /// `runtime.RawExtension` {1 raw} whose bytes are JSON (a ControllerRevision's `data`).
    RawExtension,
    /// `double` (a JSON schema's `maximum`), a 64-bit fixed value; Go's `encoding/json` writes
    /// a whole `float64` without a fraction (`5`, not `5.0`).
    Double,
    /// apiextensions' `JSON` {1 raw} (a JSON schema's `default`, `example`, `enum` items): its
    /// bytes are the JSON value, none is `null`.
    Json,
    /// One of apiextensions' `JSONSchemaPropsOr…` messages (the message's own table), whose
    /// JSON is one of two shapes ([`SchemaOr`]).
    Union(&'static Message, SchemaOr),
    /// `map<string, M>` for a message `M` (a JSON schema's `properties`, `definitions`).
    MapMsg(&'static Message),
    /// `map<string, U>` for a union `U` (a JSON schema's `dependencies`).
    MapUnion(&'static Message, SchemaOr),
}

/// The JSON shapes of apiextensions' `JSONSchemaPropsOr…` messages, as their Go
/// `MarshalJSON` and `UnmarshalJSON` give them (`apiextensions/v1/marshal.go`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SchemaOr {
    /// `JSONSchemaPropsOrArray` {1 schema, 2 repeated jSONSchemas}: an array when it has
    /// items, else the schema (`null` without one).
    Array,
    /// `JSONSchemaPropsOrBool` {1 allows, 2 schema}: the schema when there is one, else the
    /// boolean.
    Bool,
    /// `JSONSchemaPropsOrStringArray` {1 schema, 2 repeated property}: an array of strings
    /// when it has any, else the schema, else `null`.
    StringArray,
}

#[derive(Clone, Copy)]
struct Field {
    number: u32,
    name: &'static str,
    ty: Ty,
    repeated: bool,
    /// The Go field's JSON tag has `omitempty`.
    omitempty: bool,
    /// The Go field is a pointer (`nil` is `null`, or left out with `omitempty`).
    pointer: bool,
}

impl Field {
    /// Rendered even when zero: the Go field is a pointer, not `omitempty`, or a struct.
    const fn keep_zero(&self) -> bool {
        self.pointer || !self.omitempty || self.ty.is_struct()
    }
}

impl Ty {
    /// Whether the Go type is a struct (`encoding/json` never leaves a struct out, whatever
    /// its tag says): a message, a time, `IntOrString`, `Quantity`, `FieldsV1`,
    /// `RawExtension`.
    const fn is_struct(self) -> bool {
        matches!(
            self,
            Ty::Msg(_)
                | Ty::Inline(_)
                | Ty::Time
                | Ty::MicroTime
                | Ty::IntOrString
                | Ty::Quantity
                | Ty::FieldsV1
                | Ty::RawExtension
                | Ty::Json
                | Ty::Union(..)
        )
    }
}

struct Message {
    name: &'static str,
    fields: &'static [Field],
}

const fn field(
    number: u32,
    name: &'static str,
    ty: Ty,
    repeated: bool,
    omitempty: bool,
    pointer: bool,
) -> Field {
    Field {
        number,
        name,
        ty,
        repeated,
        omitempty,
        pointer,
    }
}

/// A value field with `omitempty` (a struct one is rendered whatever it holds).
const fn f(number: u32, name: &'static str, ty: Ty) -> Field {
    field(number, name, ty, false, true, false)
}

/// A value field without `omitempty`: its zero value is rendered (`""`, `0`, `false`, a nil
/// map as `null`, a struct as its zero).
const fn k(number: u32, name: &'static str, ty: Ty) -> Field {
    field(number, name, ty, false, false, false)
}

/// A pointer with `omitempty`: `nil` is left out, a zero value that was sent is kept.
const fn p(number: u32, name: &'static str, ty: Ty) -> Field {
    field(number, name, ty, false, true, true)
}

/// A pointer without `omitempty`: `nil` is `null`.
const fn n(number: u32, name: &'static str, ty: Ty) -> Field {
    field(number, name, ty, false, false, true)
}

/// A repeated field (a Go slice) with `omitempty`: nil or empty is left out.
const fn r(number: u32, name: &'static str, ty: Ty) -> Field {
    field(number, name, ty, true, true, false)
}

/// A repeated field without `omitempty`: nil is `null`, empty is `[]`.
const fn l(number: u32, name: &'static str, ty: Ty) -> Field {
    field(number, name, ty, true, false, false)
}

use Ty::{
    Bool, Bytes, Double, FieldsV1, Inline, Int32, Int64, IntOrString, Json, MapBytes, MapMsg,
    MapQuantity, MapStr, MapStrList, MapTime, MapUnion, MicroTime, Msg, Quantity, RawExtension,
    Str, Time, Union,
};

#[cfg(test)]
mod crosscheck;
#[cfg(test)]
mod generate;
#[rustfmt::skip]
mod tables;

use tables::KINDS;

/// Why a body could not be decoded.
enum DecodeError {
    /// The bytes are not valid protobuf for the schema (400).
    Malformed(String),
    /// Valid protobuf this server does not understand (415).
    Unsupported(String),
}

type Result<T> = std::result::Result<T, DecodeError>;

fn malformed<T>(message: &Message, what: impl std::fmt::Display) -> Result<T> {
    Err(DecodeError::Malformed(format!(
        "{what} in {}",
        message.name
    )))
}

/// A cursor over protobuf bytes.
struct Reader<'a> {
    bytes: &'a [u8],
    position: usize,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { bytes, position: 0 }
    }

    fn done(&self) -> bool {
        self.position >= self.bytes.len()
    }

    /// A base-128 varint of at most ten bytes.
    fn varint(&mut self, message: &Message) -> Result<u64> {
        let mut value: u64 = 0;
        for index in 0..10 {
            let Some(&byte) = self.bytes.get(self.position) else {
                return malformed(message, "a truncated varint");
            };
            self.position += 1;
            value |= u64::from(byte & 0x7f) << (7 * index);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        malformed(message, "a varint longer than ten bytes")
    }

    /// A 64-bit little-endian value (`double`, `fixed64`).
    fn fixed64(&mut self, message: &Message) -> Result<u64> {
        let Some(bytes) = self.bytes.get(self.position..self.position + 8) else {
            return malformed(message, "a truncated 64-bit value");
        };
        self.position += 8;
        let mut word = [0u8; 8];
        word.copy_from_slice(bytes);
        Ok(u64::from_le_bytes(word))
    }

    /// A length-delimited value.
    fn delimited(&mut self, message: &Message) -> Result<&'a [u8]> {
        let length = self.varint(message)?;
        let remaining = self.bytes.len() - self.position;
        match usize::try_from(length) {
            Ok(length) if length <= remaining => {
                let value = &self.bytes[self.position..self.position + length];
                self.position += length;
                Ok(value)
            }
            _ => malformed(
                message,
                format!("a length of {length} bytes past the end of the data"),
            ),
        }
    }
}

const WIRE_VARINT: u64 = 0;
const WIRE_FIXED64: u64 = 1;
const WIRE_DELIMITED: u64 = 2;

fn wire_name(wire: u64) -> &'static str {
    match wire {
        0 => "varint",
        1 => "64-bit",
        2 => "length-delimited",
        3 => "start-group",
        4 => "end-group",
        5 => "32-bit",
        _ => "invalid",
    }
}

/// Decodes one message into a JSON object.
/// The most messages a body may nest, one in another (a CustomResourceDefinition's JSON
/// schemas nest without end: `properties`, `items`, `not`): half of Go's JSON depth limit
/// ([`crate::go_json::GO_MAX_DEPTH`]), as a level of messages is at most two levels of the JSON
/// it decodes to, which the rest of the server then walks. Deeper is a 400.
pub const MESSAGE_MAX_DEPTH: usize = crate::go_json::GO_MAX_DEPTH / 2;

thread_local! {
    /// How many messages the decode on this thread is inside of.
    static DECODE_DEPTH: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Decodes one message into a JSON object, at most [`MESSAGE_MAX_DEPTH`] messages deep, each
/// level on a stack with room for it (`core::stack`).
fn decode_message(message: &'static Message, bytes: &[u8]) -> Result<Map<String, Value>> {
    let depth = DECODE_DEPTH.get();
    if depth >= MESSAGE_MAX_DEPTH {
        return malformed(
            message,
            format!("messages nested more than {MESSAGE_MAX_DEPTH} levels"),
        );
    }
    DECODE_DEPTH.set(depth + 1);
    let decoded = watchkeeper_core::stack::deep(depth, || decode_message_level(message, bytes));
    DECODE_DEPTH.set(depth);
    decoded
}

fn decode_message_level(message: &'static Message, bytes: &[u8]) -> Result<Map<String, Value>> {
    let mut out = Map::new();
    let mut reader = Reader::new(bytes);
    while !reader.done() {
        let tag = reader.varint(message)?;
        let wire = tag & 7;
        let number = tag >> 3;
        if number == 0 || number > u64::from(u32::MAX >> 3) {
            return malformed(message, format!("an invalid field number {number}"));
        }
        let Some(field) = message
            .fields
            .iter()
            .find(|f| u64::from(f.number) == number)
        else {
            return Err(DecodeError::Unsupported(format!(
                "field number {number} ({} wire type) of protobuf message {} is not known to this server; send the object as application/json",
                wire_name(wire),
                message.name
            )));
        };
        decode_field(message, field, wire, &mut reader, &mut out)?;
    }
    Ok(out)
}

fn expect_wire(message: &Message, field: &Field, wire: u64, expected: u64) -> Result<()> {
    if wire == expected {
        Ok(())
    } else {
        malformed(
            message,
            format!(
                "field {} ({}) with {} wire type, expected {}",
                field.number,
                field.name,
                wire_name(wire),
                wire_name(expected)
            ),
        )
    }
}

fn utf8(message: &Message, field: &Field, bytes: &[u8]) -> Result<String> {
    match std::str::from_utf8(bytes) {
        Ok(text) => Ok(text.to_owned()),
        Err(_) => malformed(
            message,
            format!("field {} ({}) is not valid UTF-8", field.number, field.name),
        ),
    }
}

/// Whether a decoded scalar is its type's zero value (left out of `omitempty` fields).
fn is_zero(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_i64() == Some(0),
        Value::Array(_) | Value::Object(_) => false,
    }
}

#[allow(clippy::cast_possible_wrap, clippy::cast_possible_truncation)]
fn decode_field(
    message: &'static Message,
    field: &Field,
    wire: u64,
    reader: &mut Reader<'_>,
    out: &mut Map<String, Value>,
) -> Result<()> {
    let value = match field.ty {
        Int32 | Int64 | Bool if field.repeated && wire == WIRE_DELIMITED => {
            // A packed repeated scalar.
            let mut packed = Reader::new(reader.delimited(message)?);
            let items = out
                .entry(field.name)
                .or_insert_with(|| Value::Array(Vec::new()));
            let Value::Array(items) = items else {
                return malformed(message, format!("field {} twice", field.number));
            };
            while !packed.done() {
                let raw = packed.varint(message)?;
                items.push(scalar_from_varint(field.ty, raw));
            }
            return Ok(());
        }
        Int32 | Int64 | Bool => {
            expect_wire(message, field, wire, WIRE_VARINT)?;
            scalar_from_varint(field.ty, reader.varint(message)?)
        }
        Str => {
            expect_wire(message, field, wire, WIRE_DELIMITED)?;
            Value::String(utf8(message, field, reader.delimited(message)?)?)
        }
        Bytes => {
            expect_wire(message, field, wire, WIRE_DELIMITED)?;
            Value::String(base64(reader.delimited(message)?))
        }
        Msg(inner) => {
            expect_wire(message, field, wire, WIRE_DELIMITED)?;
            Value::Object(decode_message(inner, reader.delimited(message)?)?)
        }
        Inline(inner) => {
            expect_wire(message, field, wire, WIRE_DELIMITED)?;
            let fields = decode_message(inner, reader.delimited(message)?)?;
            out.extend(fields);
            return Ok(());
        }
        MapStr | MapBytes | MapQuantity | MapTime | MapStrList | MapMsg(_) | MapUnion(..) => {
            expect_wire(message, field, wire, WIRE_DELIMITED)?;
            let (key, value) = decode_map_entry(message, field, reader.delimited(message)?)?;
            let map = out
                .entry(field.name)
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(map) = map {
                map.insert(key, value);
            }
            return Ok(());
        }
        Time => {
            expect_wire(message, field, wire, WIRE_DELIMITED)?;
            decode_time(reader.delimited(message)?)?
        }
        MicroTime => {
            expect_wire(message, field, wire, WIRE_DELIMITED)?;
            decode_micro_time(reader.delimited(message)?)?
        }
        IntOrString => {
            expect_wire(message, field, wire, WIRE_DELIMITED)?;
            decode_int_or_string(reader.delimited(message)?)?
        }
        Quantity => {
            expect_wire(message, field, wire, WIRE_DELIMITED)?;
            decode_quantity(reader.delimited(message)?)?
        }
        FieldsV1 => {
            expect_wire(message, field, wire, WIRE_DELIMITED)?;
            decode_raw_json(&FIELDS_V1, reader.delimited(message)?)?
        }
        RawExtension => {
            expect_wire(message, field, wire, WIRE_DELIMITED)?;
            decode_raw_json(&RAW_EXTENSION, reader.delimited(message)?)?
        }
        Json => {
            expect_wire(message, field, wire, WIRE_DELIMITED)?;
            decode_raw_json(&JSON, reader.delimited(message)?)?
        }
        Double => {
            expect_wire(message, field, wire, WIRE_FIXED64)?;
            float_json(f64::from_bits(reader.fixed64(message)?))
        }
        Union(inner, union) => {
            expect_wire(message, field, wire, WIRE_DELIMITED)?;
            union_json(union, decode_message(inner, reader.delimited(message)?)?)
        }
    };
    if field.repeated {
        let items = out
            .entry(field.name)
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(items) = items {
            items.push(value);
        }
    } else if field.keep_zero() || !is_zero(&value) {
        out.insert(field.name.to_owned(), value);
    } else {
        out.remove(field.name);
    }
    Ok(())
}

#[allow(clippy::cast_possible_wrap, clippy::cast_possible_truncation)]
fn scalar_from_varint(ty: Ty, raw: u64) -> Value {
    match ty {
        // int32 is sign-extended to 64 bits on the wire; truncation restores it.
        Int32 => Value::from(raw as i32),
        Bool => Value::Bool(raw != 0),
        _ => Value::from(raw as i64),
    }
}

static MAP_ENTRY: Message = Message {
    name: "map entry",
    fields: &[],
};

fn decode_map_entry(message: &Message, field: &Field, bytes: &[u8]) -> Result<(String, Value)> {
    let mut reader = Reader::new(bytes);
    let mut key = String::new();
    // A value left out is the Go zero value of the map's value type.
    let mut value = match field.ty {
        MapQuantity => Value::String("0".to_owned()),
        MapTime | MapStrList | MapUnion(..) => Value::Null,
        // A zero `JSONSchemaProps`: every field `omitempty`.
        MapMsg(_) => Value::Object(Map::new()),
        _ => Value::String(String::new()),
    };
    while !reader.done() {
        let tag = reader.varint(&MAP_ENTRY)?;
        let (number, wire) = (tag >> 3, tag & 7);
        if wire != WIRE_DELIMITED || !(1..=2).contains(&number) {
            return malformed(
                message,
                format!(
                    "field {} ({}) with a map entry holding field {number} ({} wire type)",
                    field.number,
                    field.name,
                    wire_name(wire)
                ),
            );
        }
        let bytes = reader.delimited(&MAP_ENTRY)?;
        if number == 1 {
            key = utf8(message, field, bytes)?;
        } else {
            value = match field.ty {
                MapBytes => Value::String(base64(bytes)),
                MapQuantity => decode_quantity(bytes)?,
                MapTime => decode_time(bytes)?,
                MapStrList => decode_str_list(bytes)?,
                MapMsg(inner) => Value::Object(decode_message(inner, bytes)?),
                MapUnion(inner, union) => union_json(union, decode_message(inner, bytes)?),
                _ => Value::String(utf8(message, field, bytes)?),
            };
        }
    }
    Ok((key, value))
}

static TIME: Message = Message {
    name: "io.k8s.apimachinery.pkg.apis.meta.v1.Time",
    fields: &[k(1, "seconds", Int64), k(2, "nanos", Int32)],
};

/// 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z, the range of `metav1.Time`.
const TIME_MIN: i64 = -62_135_596_800;
const TIME_MAX: i64 = 253_402_300_799;

fn decode_time(bytes: &[u8]) -> Result<Value> {
    // Go writes a zero time as an empty message (and reads one back as zero); any other
    // message is a time, 1970-01-01T00:00:00Z included.
    if bytes.is_empty() {
        return Ok(Value::Null);
    }
    let fields = decode_message(&TIME, bytes)?;
    let seconds = fields.get("seconds").and_then(Value::as_i64).unwrap_or(0);
    let nanos = fields.get("nanos").and_then(Value::as_i64).unwrap_or(0);
    if !(TIME_MIN..=TIME_MAX).contains(&seconds) || !(0..1_000_000_000).contains(&nanos) {
        return malformed(
            &TIME,
            format!("a time out of range ({seconds}s, {nanos}ns)"),
        );
    }
    Ok(Value::String(crate::time::rfc3339_from_unix(seconds)))
}

static MICRO_TIME: Message = Message {
    name: "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime",
    fields: &[k(1, "seconds", Int64), k(2, "nanos", Int32)],
};

/// A `MicroTime`: RFC 3339 with microseconds (Go's JSON truncates the nanoseconds).
fn decode_micro_time(bytes: &[u8]) -> Result<Value> {
    // Go writes a zero time as an empty message (and reads one back as zero); any other
    // message is a time, 1970-01-01T00:00:00Z included.
    if bytes.is_empty() {
        return Ok(Value::Null);
    }
    let fields = decode_message(&MICRO_TIME, bytes)?;
    let seconds = fields.get("seconds").and_then(Value::as_i64).unwrap_or(0);
    let nanos = fields.get("nanos").and_then(Value::as_i64).unwrap_or(0);
    if !(TIME_MIN..=TIME_MAX).contains(&seconds) || !(0..1_000_000_000).contains(&nanos) {
        return malformed(
            &MICRO_TIME,
            format!("a time out of range ({seconds}s, {nanos}ns)"),
        );
    }
    Ok(Value::String(crate::time::rfc3339_micro_from_unix(
        seconds * 1_000_000 + nanos / 1000,
    )))
}

/// A Go named `[]string` (`ExtraValue`): the message {1 repeated `items`}.
static STR_LIST: Message = Message {
    name: "io.k8s.api.authentication.v1.ExtraValue",
    fields: &[r(1, "items", Str)],
};

fn decode_str_list(bytes: &[u8]) -> Result<Value> {
    let mut fields = decode_message(&STR_LIST, bytes)?;
    Ok(fields
        .remove("items")
        .unwrap_or_else(|| Value::Array(Vec::new())))
}

static INT_OR_STRING: Message = Message {
    name: "io.k8s.apimachinery.pkg.util.intstr.IntOrString",
    fields: &[
        k(1, "type", Int64),
        k(2, "intVal", Int32),
        k(3, "strVal", Str),
    ],
};

fn decode_int_or_string(bytes: &[u8]) -> Result<Value> {
    let mut fields = decode_message(&INT_OR_STRING, bytes)?;
    match fields.get("type").and_then(Value::as_i64).unwrap_or(0) {
        0 => Ok(fields.remove("intVal").unwrap_or_else(|| Value::from(0))),
        1 => Ok(fields
            .remove("strVal")
            .unwrap_or_else(|| Value::String(String::new()))),
        other => malformed(&INT_OR_STRING, format!("an unknown type {other}")),
    }
}

static QUANTITY: Message = Message {
    name: "io.k8s.apimachinery.pkg.api.resource.Quantity",
    fields: &[k(1, "string", Str)],
};

fn decode_quantity(bytes: &[u8]) -> Result<Value> {
    let mut fields = decode_message(&QUANTITY, bytes)?;
    Ok(fields
        .remove("string")
        .unwrap_or_else(|| Value::String("0".to_owned())))
}

static FIELDS_V1: Message = Message {
    name: "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1",
    fields: &[k(1, "Raw", Bytes)],
};

static RAW_EXTENSION: Message = Message {
    name: "io.k8s.apimachinery.pkg.runtime.RawExtension",
    fields: &[k(1, "raw", Bytes)],
};

static JSON: Message = Message {
    name: "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSON",
    fields: &[k(1, "raw", Bytes)],
};

/// A `FieldsV1`, `RawExtension` or apiextensions `JSON` message: its one `bytes` field holds
/// JSON.
fn decode_raw_json(message: &'static Message, bytes: &[u8]) -> Result<Value> {
    let mut reader = Reader::new(bytes);
    // Go's empty `FieldsV1` reads `{}`, an empty `RawExtension` or `JSON` `null`.
    let mut raw: &[u8] = if message.name == FIELDS_V1.name {
        b"{}"
    } else {
        b"null"
    };
    while !reader.done() {
        let tag = reader.varint(message)?;
        if tag != (1 << 3 | WIRE_DELIMITED) {
            return Err(DecodeError::Unsupported(format!(
                "field number {} of protobuf message {} is not known to this server",
                tag >> 3,
                message.name
            )));
        }
        raw = reader.delimited(message)?;
    }
    if raw.is_empty() && message.name == JSON.name {
        // `JSON.MarshalJSON`: no bytes are `null`.
        return Ok(Value::Null);
    }
    // Go's reading, as deep as a body may nest (serde_json alone stops at 128 levels).
    match crate::go_json::parse(raw) {
        Ok(value) => Ok(value),
        Err(e) => malformed(message, format!("Raw that is not JSON ({e})")),
    }
}

/// A `float64` as Go's `encoding/json` writes it: a whole number without a fraction.
#[allow(clippy::cast_possible_truncation, clippy::float_cmp)]
fn float_json(value: f64) -> Value {
    // Whole values up to 2^53 are exact in both; Go writes larger ones (< 1e21) without an
    // exponent too, which an i64 holds up to 9.2e18.
    if value.fract() == 0.0 && value.abs() < 9.0e18 {
        return Value::from(value as i64);
    }
    serde_json::Number::from_f64(value).map_or(Value::Null, Value::Number)
}

/// The JSON of a `JSONSchemaPropsOr…` message decoded to its fields (see [`SchemaOr`]).
fn union_json(union: SchemaOr, mut fields: Map<String, Value>) -> Value {
    let schema = fields.remove("schema");
    match union {
        SchemaOr::Array => match fields.remove("jSONSchemas") {
            Some(items @ Value::Array(_)) => items,
            _ => schema.unwrap_or(Value::Null),
        },
        SchemaOr::Bool => schema.unwrap_or_else(|| {
            Value::Bool(fields.get("allows").and_then(Value::as_bool) == Some(true))
        }),
        SchemaOr::StringArray => match fields.remove("property") {
            Some(items @ Value::Array(_)) => items,
            _ => schema.unwrap_or(Value::Null),
        },
    }
}

/// Standard base64 with padding, as Go's `encoding/json` writes `[]byte`.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for (index, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if index <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> shift & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

static UNKNOWN: Message = Message {
    name: "io.k8s.apimachinery.pkg.runtime.Unknown",
    fields: &[
        k(1, "typeMeta", Msg(&TYPE_META)),
        k(2, "raw", Bytes),
        k(3, "contentEncoding", Str),
        k(4, "contentType", Str),
    ],
};

static TYPE_META: Message = Message {
    name: "io.k8s.apimachinery.pkg.runtime.TypeMeta",
    fields: &[k(1, "apiVersion", Str), k(2, "kind", Str)],
};

/// The parts of the `runtime.Unknown` envelope.
struct Envelope<'a> {
    api_version: String,
    kind: String,
    raw: &'a [u8],
    content_encoding: String,
}

fn decode_envelope(bytes: &[u8]) -> Result<Envelope<'_>> {
    let mut envelope = Envelope {
        api_version: String::new(),
        kind: String::new(),
        raw: &[],
        content_encoding: String::new(),
    };
    let mut reader = Reader::new(bytes);
    while !reader.done() {
        let tag = reader.varint(&UNKNOWN)?;
        let (number, wire) = (tag >> 3, tag & 7);
        let Some(field) = UNKNOWN
            .fields
            .iter()
            .find(|f| u64::from(f.number) == number)
        else {
            return Err(DecodeError::Unsupported(format!(
                "field number {number} of protobuf message {} is not known to this server",
                UNKNOWN.name
            )));
        };
        expect_wire(&UNKNOWN, field, wire, WIRE_DELIMITED)?;
        let value = reader.delimited(&UNKNOWN)?;
        match number {
            1 => {
                let type_meta = decode_message(&TYPE_META, value)?;
                let text = |key: &str| {
                    type_meta
                        .get(key)
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned()
                };
                envelope.api_version = text("apiVersion");
                envelope.kind = text("kind");
            }
            2 => envelope.raw = value,
            3 => envelope.content_encoding = utf8(&UNKNOWN, field, value)?,
            _ => {
                utf8(&UNKNOWN, field, value)?;
            }
        }
    }
    Ok(envelope)
}

/// The kinds [`decode_protobuf`] understands, as (`apiVersion`, kind): every built-in kind
/// the server serves or answers (reviews, subresources' kinds), and `DeleteOptions`.
#[must_use]
pub fn protobuf_kinds() -> Vec<(&'static str, &'static str)> {
    let mut kinds: Vec<(&str, &str)> = KINDS
        .iter()
        .map(|(api_version, kind, _)| (*api_version, *kind))
        .collect();
    kinds.push(("v1", "DeleteOptions"));
    kinds
}

/// The message of objects of `kind` in `api_version`, if this server has its schema.
fn schema_of(api_version: &str, kind: &str) -> Option<&'static Message> {
    KINDS
        .iter()
        .find(|(v, k, _)| *v == api_version && *k == kind)
        .map(|(_, _, schema)| *schema)
}

/// Decodes a Kubernetes protobuf request body (`k8s\0` + `runtime.Unknown`) sent to the
/// resource `def` into the JSON object Go's `encoding/json` would produce for it, with
/// `apiVersion` and `kind` from the envelope (the resource's when the envelope has none).
/// A `DeleteOptions` body (the body of a DELETE) is decoded whatever `def` is.
///
/// # Errors
/// 400 BadRequest for bytes that are not a well-formed envelope or message; 415
/// UnsupportedMediaType for a kind without a schema here, a compressed `raw`, or a field
/// number this server does not know (the message names the protobuf message and the field).
pub fn decode_protobuf(def: &ResourceDef, body: &[u8]) -> std::result::Result<Value, ApiError> {
    let Some(rest) = body.strip_prefix(PROTOBUF_MAGIC) else {
        return Err(ApiError::bad_request(
            "the protobuf body does not start with the Kubernetes magic bytes \"k8s\\x00\""
                .to_owned(),
        ));
    };
    decode_body(def, rest).map_err(protobuf_error)
}

fn decode_body(def: &ResourceDef, bytes: &[u8]) -> Result<Value> {
    let envelope = decode_envelope(bytes)?;
    if !envelope.content_encoding.is_empty() {
        return Err(DecodeError::Unsupported(format!(
            "protobuf bodies with contentEncoding {:?} are not supported",
            envelope.content_encoding
        )));
    }
    let kind = if envelope.kind.is_empty() {
        def.kind.clone()
    } else {
        envelope.kind
    };
    let api_version = if envelope.api_version.is_empty() {
        def.api_version()
    } else {
        envelope.api_version
    };
    let schema = if kind == "DeleteOptions" {
        &tables::META_V1_DELETE_OPTIONS
    } else if let Some(schema) = schema_of(&api_version, &kind) {
        schema
    } else {
        return Err(DecodeError::Unsupported(format!(
            "this server has no protobuf schema for {kind} ({api_version}); send the body as application/json"
        )));
    };
    let fields = decode_message(schema, envelope.raw)?;
    let mut object = Map::new();
    object.insert("apiVersion".to_owned(), Value::String(api_version));
    object.insert("kind".to_owned(), Value::String(kind));
    object.extend(fields);
    Ok(Value::Object(object))
}

fn protobuf_error(error: DecodeError) -> ApiError {
    match error {
        DecodeError::Malformed(message) => {
            ApiError::bad_request(format!("the protobuf body is malformed: {message}"))
        }
        DecodeError::Unsupported(message) => ApiError::unsupported_media_type(message),
    }
}

/// A response body of any shape this server encodes (object, list, Status) back to JSON (the
/// audit log's `responseObject` of a protobuf answer).
///
/// # Errors
/// As [`decode_protobuf`], for bytes this server did not encode.
pub fn decode_any(body: &[u8]) -> std::result::Result<Value, ApiError> {
    let Some(rest) = body.strip_prefix(PROTOBUF_MAGIC) else {
        return Err(ApiError::bad_request(
            "the protobuf body does not start with the Kubernetes magic bytes".to_owned(),
        ));
    };
    let envelope = decode_envelope(rest).map_err(protobuf_error)?;
    let fields = match encode::shape_of(&envelope.api_version, &envelope.kind) {
        Some(encode::Shape::Object(schema)) => decode_message(schema, envelope.raw),
        Some(encode::Shape::Status) => decode_message(&tables::META_V1_STATUS, envelope.raw),
        Some(encode::Shape::List(schema)) => decode_list(schema, envelope.raw),
        None => Err(DecodeError::Unsupported(format!(
            "no protobuf schema for {} ({})",
            envelope.kind, envelope.api_version
        ))),
    }
    .map_err(protobuf_error)?;
    let mut object = Map::new();
    object.insert("apiVersion".to_owned(), Value::String(envelope.api_version));
    object.insert("kind".to_owned(), Value::String(envelope.kind));
    object.extend(fields);
    Ok(Value::Object(object))
}

static LIST: Message = Message {
    name: "list",
    fields: &[],
};

/// A list message: 1 `metadata` (ListMeta), 2 `items` (the kind's message, repeated).
fn decode_list(schema: &'static Message, bytes: &[u8]) -> Result<Map<String, Value>> {
    let mut out = Map::new();
    let mut items = Vec::new();
    let mut reader = Reader::new(bytes);
    while !reader.done() {
        let tag = reader.varint(&LIST)?;
        let value = match tag & 7 {
            WIRE_DELIMITED => reader.delimited(&LIST)?,
            wire => return malformed(&LIST, format!("a {} field", wire_name(wire))),
        };
        match tag >> 3 {
            1 => {
                out.insert(
                    "metadata".to_owned(),
                    Value::Object(decode_message(&tables::META_V1_LIST_META, value)?),
                );
            }
            2 => items.push(Value::Object(decode_message(schema, value)?)),
            number => {
                return Err(DecodeError::Unsupported(format!(
                    "field number {number} of a list is not known to this server"
                )));
            }
        }
    }
    out.insert("items".to_owned(), Value::Array(items));
    Ok(out)
}

/// A `WatchEvent` message: its `type` and its object's `raw` bytes.
fn decode_watch_event(bytes: &[u8]) -> std::result::Result<(String, &[u8]), ApiError> {
    static WATCH_EVENT: Message = Message {
        name: "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent",
        fields: &[],
    };
    let inner = || -> Result<(String, &[u8])> {
        let mut event_type = String::new();
        let mut raw: &[u8] = &[];
        let mut reader = Reader::new(bytes);
        while !reader.done() {
            let tag = reader.varint(&WATCH_EVENT)?;
            if tag & 7 != WIRE_DELIMITED {
                return malformed(&WATCH_EVENT, "a field that is not length-delimited");
            }
            let value = reader.delimited(&WATCH_EVENT)?;
            match tag >> 3 {
                1 => {
                    event_type = String::from_utf8(value.to_vec()).map_err(|_| {
                        DecodeError::Malformed("a WatchEvent type that is not UTF-8".to_owned())
                    })?;
                }
                2 => {
                    let mut extension = Reader::new(value);
                    while !extension.done() {
                        let tag = extension.varint(&WATCH_EVENT)?;
                        if tag != (1 << 3 | WIRE_DELIMITED) {
                            return malformed(&WATCH_EVENT, "a RawExtension field other than raw");
                        }
                        raw = extension.delimited(&WATCH_EVENT)?;
                    }
                }
                number => return malformed(&WATCH_EVENT, format!("field number {number}")),
            }
        }
        Ok((event_type, raw))
    };
    inner().map_err(protobuf_error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::builtin_resources;
    use proptest::prelude::*;
    use serde_json::json;

    fn def(plural: &str) -> ResourceDef {
        builtin_resources()
            .into_iter()
            .find(|d| d.plural == plural)
            .unwrap()
    }

    /// A tiny protobuf encoder for the tests.
    #[derive(Default)]
    struct Enc(Vec<u8>);

    impl Enc {
        fn varint(&mut self, mut v: u64) -> &mut Self {
            loop {
                let byte = (v & 0x7f) as u8;
                v >>= 7;
                if v == 0 {
                    self.0.push(byte);
                    return self;
                }
                self.0.push(byte | 0x80);
            }
        }
        fn uint(&mut self, field: u64, v: u64) -> &mut Self {
            self.varint(field << 3).varint(v)
        }
        fn bytes(&mut self, field: u64, v: &[u8]) -> &mut Self {
            self.varint(field << 3 | 2).varint(v.len() as u64);
            self.0.extend_from_slice(v);
            self
        }
        fn str(&mut self, field: u64, v: &str) -> &mut Self {
            self.bytes(field, v.as_bytes())
        }
        fn msg(&mut self, field: u64, build: impl FnOnce(&mut Enc)) -> &mut Self {
            let mut inner = Enc::default();
            build(&mut inner);
            self.bytes(field, &inner.0)
        }
        fn entry(&mut self, field: u64, key: &str, value: &[u8]) -> &mut Self {
            self.msg(field, |e| {
                e.str(1, key).bytes(2, value);
            })
        }
    }

    fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
        let mut e = Enc::default();
        e.msg(1, |t| {
            t.str(1, api_version).str(2, kind);
        })
        .bytes(2, raw)
        .str(3, "")
        .str(4, "");
        let mut body = PROTOBUF_MAGIC.to_vec();
        body.extend_from_slice(&e.0);
        body
    }

    /// ObjectMeta as gogo-protobuf writes it: every non-pointer field, zero or not.
    fn meta(e: &mut Enc, name: &str) {
        e.str(1, name)
            .str(2, "")
            .str(3, "")
            .str(4, "")
            .str(5, "")
            .str(6, "")
            .uint(7, 0)
            // A zero `metav1.Time` is an empty message (`42 00` in kubectl's bodies).
            .msg(8, |_| {});
    }

    #[test]
    fn configmap_as_kubectl_create_sends_it() {
        let mut raw = Enc::default();
        raw.msg(1, |m| {
            meta(m, "demo");
            m.entry(11, "app", b"web");
        })
        .entry(2, "a", b"1")
        .entry(2, "b", b"two")
        .entry(3, "bin", &[0, 1, 2, 255]);
        let body = envelope("v1", "ConfigMap", &raw.0);
        let value = decode_protobuf(&def("configmaps"), &body).unwrap();
        assert_eq!(
            value,
            json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "demo", "creationTimestamp": null, "labels": {"app": "web"}},
                "data": {"a": "1", "b": "two"},
                "binaryData": {"bin": "AAEC/w=="}
            })
        );
    }

    fn unhex(text: &str) -> Vec<u8> {
        (0..text.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
            .collect()
    }

    /// The exact body kubectl 1.33.1 POSTs for
    /// `kubectl create deployment fixture3 --image=nginx:1.27 --replicas=0 --port=8080 -n fx`
    /// (from `-v=9`); the expected value is that command's `--dry-run=client -o json` output.
    #[test]
    fn kubectl_create_deployment_body() {
        let body = unhex(&[
        "6b3873000a150a07617070732f7631120a4465706c6f796d656e7412d4010a2b0a08666978747572653312001a026678",
        "22002a003200380042005a0f0a0361707012086669787475726533129601080012110a0f0a0361707012086669787475",
        "7265331a770a210a0012001a0022002a003200380042005a0f0a0361707012086669787475726533125212340a056e67",
        "696e78120a6e67696e783a312e32372a00320b0a00100018903f22002a0042006a007200800100880100900100a20100",
        "1a00320042004a0052005800600068008201008a01009a0100c2010022020a00280038001a0c08001000180020002800",
        "38001a002200",
        ]
        .concat());
        let value = decode_protobuf(&def("deployments"), &body).unwrap();
        assert_eq!(
            value,
            json!({"kind": "Deployment", "apiVersion": "apps/v1",
                "metadata": {"name": "fixture3", "namespace": "fx", "creationTimestamp": null, "labels": {"app": "fixture3"}},
                "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "fixture3"}},
                    "template": {"metadata": {"creationTimestamp": null, "labels": {"app": "fixture3"}},
                        "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27",
                            "ports": [{"containerPort": 8080}], "resources": {}}]}},
                    "strategy": {}},
                "status": {}})
        );
    }

    /// The Deployment a typed client's create of an ordinary Deployment sends, as Go's JSON
    /// renders it (zero `omitempty` scalars left out, pointers kept, structs always present).
    pub(crate) fn ordinary_deployment_json() -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", "creationTimestamp": null,
                "labels": {"app": "web"}},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"creationTimestamp": null, "labels": {"app": "web"}},
                    "spec": {
                        "volumes": [
                            {"name": "config", "configMap": {"name": "web-config",
                                "items": [{"key": "app.conf", "path": "app.conf"}], "defaultMode": 420}},
                            {"name": "cache", "emptyDir": {"sizeLimit": "1Gi"}},
                            {"name": "data", "persistentVolumeClaim": {"claimName": "web-data"}}
                        ],
                        "containers": [{
                            "name": "web",
                            "image": "nginx:1.27",
                            "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
                            "env": [
                                {"name": "POD_NAME", "valueFrom": {"fieldRef":
                                    {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
                                {"name": "PASSWORD", "valueFrom": {"secretKeyRef":
                                    {"name": "web-secret", "key": "password", "optional": false}}},
                                {"name": "CPU_LIMIT", "valueFrom": {"resourceFieldRef":
                                    {"containerName": "web", "resource": "limits.cpu", "divisor": "1m"}}}
                            ],
                            "envFrom": [{"prefix": "CFG_", "configMapRef": {"name": "web-env"}}],
                            "resources": {"limits": {"cpu": "500m", "memory": "256Mi"},
                                "requests": {"cpu": "250m", "memory": "128Mi"}},
                            "volumeMounts": [
                                {"name": "config", "readOnly": true, "mountPath": "/etc/web"},
                                {"name": "cache", "mountPath": "/cache"}
                            ],
                            "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http", "scheme": "HTTP"},
                                "initialDelaySeconds": 5, "timeoutSeconds": 1, "periodSeconds": 10,
                                "successThreshold": 1, "failureThreshold": 3},
                            "readinessProbe": {"tcpSocket": {"port": 8080}, "periodSeconds": 5},
                            "startupProbe": {"exec": {"command": ["cat", "/tmp/ready"]}, "failureThreshold": 30},
                            "lifecycle": {"preStop": {"sleep": {"seconds": 5}}},
                            "imagePullPolicy": "IfNotPresent",
                            "securityContext": {"capabilities": {"drop": ["ALL"]}, "runAsUser": 1000,
                                "runAsNonRoot": true, "readOnlyRootFilesystem": true,
                                "allowPrivilegeEscalation": false, "seccompProfile": {"type": "RuntimeDefault"}}
                        }],
                        "securityContext": {"runAsGroup": 3000, "fsGroup": 2000},
                        "affinity": {
                            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [{"matchExpressions": [
                                    {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]}]}},
                            "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                                {"weight": 100, "podAffinityTerm": {
                                    "labelSelector": {"matchLabels": {"app": "web"}},
                                    "topologyKey": "kubernetes.io/hostname"}}]}
                        },
                        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "web", "effect": "NoSchedule"}],
                        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                            "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {"matchLabels": {"app": "web"}}}]
                    }
                },
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": 1}}
            },
            "status": {}})
    }

    /// An ordinary Deployment, encoded by protoc (not by this crate) from
    /// `protobuf/fixtures/deployment.txtpb`, decodes to Go's JSON of it; and the encoder's
    /// bytes for that JSON decode back to it too.
    #[test]
    fn an_ordinary_deployment_from_protoc() {
        let raw = include_bytes!("../protobuf/fixtures/deployment.pb");
        let body = envelope("apps/v1", "Deployment", raw);
        let value = decode_protobuf(&def("deployments"), &body).unwrap();
        assert_eq!(value, ordinary_deployment_json());
        // The encoder leaves the zero creation times out (Go reads both alike).
        let again = encode::encode_protobuf(&value).unwrap();
        let mut expected = value.clone();
        for pointer in ["/metadata", "/spec/template/metadata"] {
            let meta = expected.pointer_mut(pointer).unwrap();
            meta.as_object_mut().unwrap().remove("creationTimestamp");
        }
        assert_eq!(encode::decode_response(&again).unwrap(), expected);
    }

    #[test]
    fn secret_data_is_base64() {
        let mut raw = Enc::default();
        raw.msg(1, |m| meta(m, "s"))
            .entry(2, "password", b"hunter2")
            .str(3, "Opaque");
        let value = decode_protobuf(&def("secrets"), &envelope("v1", "Secret", &raw.0)).unwrap();
        assert_eq!(value["data"]["password"], "aHVudGVyMg==");
        assert_eq!(value["type"], "Opaque");
    }

    #[test]
    fn deployment_with_template_selector_and_strategy() {
        let mut raw = Enc::default();
        raw.msg(1, |m| {
            meta(m, "web");
            m.entry(11, "app", b"web");
        })
        .msg(2, |spec| {
            spec.uint(1, 0) // replicas: 0 is a pointer that was set
                .msg(2, |sel| {
                    sel.entry(1, "app", b"web").msg(2, |req| {
                        req.str(1, "tier").str(2, "In").str(3, "a").str(3, "b");
                    });
                })
                .msg(3, |template| {
                    template
                        .msg(1, |m| {
                            meta(m, "");
                            m.entry(11, "app", b"web");
                        })
                        .msg(2, |pod| {
                            pod.msg(2, |c| {
                                c.str(1, "nginx")
                                    .str(2, "nginx:1.27")
                                    .str(3, "sh")
                                    .str(3, "-c")
                                    .msg(6, |p| {
                                        p.str(1, "").uint(2, 0).uint(3, 80).str(4, "TCP");
                                    })
                                    .msg(7, |env| {
                                        env.str(1, "A").str(2, "1");
                                    })
                                    .msg(8, |res| {
                                        res.msg(1, |entry| {
                                            entry.str(1, "cpu").msg(2, |q| {
                                                q.str(1, "500m");
                                            });
                                        });
                                    })
                                    .str(13, "")
                                    .str(14, "")
                                    .uint(16, 0);
                            })
                            .str(3, "")
                            .str(6, "")
                            .msg(14, |_| {});
                        });
                })
                .msg(4, |strategy| {
                    strategy.str(1, "RollingUpdate").msg(2, |ru| {
                        ru.msg(1, |ios| {
                            ios.uint(1, 1).uint(2, 0).str(3, "25%");
                        })
                        .msg(2, |ios| {
                            ios.uint(1, 0).uint(2, 2).str(3, "");
                        });
                    });
                })
                .uint(5, 0)
                .uint(7, 0);
        })
        .msg(3, |_| {});
        let value = decode_protobuf(
            &def("deployments"),
            &envelope("apps/v1", "Deployment", &raw.0),
        )
        .unwrap();
        assert_eq!(
            value,
            json!({
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "web", "creationTimestamp": null, "labels": {"app": "web"}},
                "spec": {
                    "replicas": 0,
                    "selector": {
                        "matchLabels": {"app": "web"},
                        "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]
                    },
                    "template": {
                        "metadata": {"creationTimestamp": null, "labels": {"app": "web"}},
                        "spec": {
                            "containers": [{
                                "name": "nginx",
                                "image": "nginx:1.27",
                                "command": ["sh", "-c"],
                                "ports": [{"containerPort": 80, "protocol": "TCP"}],
                                "env": [{"name": "A", "value": "1"}],
                                "resources": {"limits": {"cpu": "500m"}}
                            }],
                            "securityContext": {}
                        }
                    },
                    "strategy": {
                        "type": "RollingUpdate",
                        "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": 2}
                    }
                },
                "status": {}
            })
        );
    }

    #[test]
    fn service_ports_with_int_or_string_target() {
        let mut raw = Enc::default();
        raw.msg(1, |m| meta(m, "svc"))
            .msg(2, |spec| {
                spec.msg(1, |port| {
                    port.str(1, "http")
                        .str(2, "TCP")
                        .uint(3, 80)
                        .msg(4, |t| {
                            t.uint(1, 1).uint(2, 0).str(3, "web");
                        })
                        .uint(5, 0);
                })
                .entry(2, "app", b"web")
                .str(3, "")
                .str(4, "ClusterIP")
                .str(7, "");
            })
            .msg(3, |status| {
                status.msg(1, |_| {});
            });
        let value = decode_protobuf(&def("services"), &envelope("v1", "Service", &raw.0)).unwrap();
        assert_eq!(
            value["spec"],
            json!({"ports": [{"name": "http", "protocol": "TCP", "port": 80, "targetPort": "web"}],
                   "selector": {"app": "web"}, "type": "ClusterIP"})
        );
        assert_eq!(value["status"], json!({"loadBalancer": {}}));
    }

    #[test]
    fn times_owner_references_and_negative_ints() {
        let mut raw = Enc::default();
        raw.msg(1, |m| {
            m.str(1, "x")
                .msg(8, |t| {
                    t.uint(1, 1_764_428_400).uint(2, 0);
                })
                .uint(10, (-5_i64) as u64)
                .msg(13, |o| {
                    o.str(1, "Deployment")
                        .str(3, "web")
                        .str(4, "uid-1")
                        .str(5, "apps/v1")
                        .uint(6, 1);
                })
                .str(14, "a/b");
        });
        let value =
            decode_protobuf(&def("namespaces"), &envelope("v1", "Namespace", &raw.0)).unwrap();
        let meta = &value["metadata"];
        assert_eq!(meta["creationTimestamp"], "2025-11-29T15:00:00Z");
        assert_eq!(meta["deletionGracePeriodSeconds"], -5);
        assert_eq!(
            meta["ownerReferences"],
            json!([{"kind": "Deployment", "name": "web", "uid": "uid-1", "apiVersion": "apps/v1", "controller": true}])
        );
        assert_eq!(meta["finalizers"], json!(["a/b"]));
    }

    #[test]
    fn an_empty_time_is_null_and_the_epoch_is_a_time() {
        let mut raw = Enc::default();
        raw.msg(1, |m| {
            m.str(1, "x").msg(8, |_| {}).msg(9, |t| {
                t.uint(1, 0).uint(2, 0);
            });
        });
        let value =
            decode_protobuf(&def("namespaces"), &envelope("v1", "Namespace", &raw.0)).unwrap();
        assert_eq!(value["metadata"]["creationTimestamp"], Value::Null);
        assert_eq!(
            value["metadata"]["deletionTimestamp"],
            "1970-01-01T00:00:00Z"
        );
        let body = encode::encode_protobuf(&value).unwrap();
        assert_eq!(
            encode::decode_response(&body).unwrap()["metadata"]["deletionTimestamp"],
            "1970-01-01T00:00:00Z"
        );
    }

    #[test]
    fn delete_options_decode_for_any_resource() {
        let mut raw = Enc::default();
        raw.uint(1, 0).str(4, "Background").str(5, "All");
        let body = envelope("meta.k8s.io/v1", "DeleteOptions", &raw.0);
        let value = decode_protobuf(&def("pods"), &body).unwrap();
        assert_eq!(
            value,
            json!({"apiVersion": "meta.k8s.io/v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0,
                   "propagationPolicy": "Background", "dryRun": ["All"]})
        );
    }

    #[test]
    fn unknown_field_is_a_415_naming_message_and_field() {
        let mut raw = Enc::default();
        raw.msg(1, |m| {
            meta(m, "p");
        })
        .msg(2, |spec| {
            spec.msg(2, |c| {
                // livenessProbe is known; field 99 is in no Kubernetes version.
                c.str(1, "c").msg(10, |_| {}).msg(99, |_| {});
            });
        });
        let error = decode_protobuf(&def("pods"), &envelope("v1", "Pod", &raw.0)).unwrap_err();
        assert_eq!(error.code, 415);
        assert!(
            error.message.contains("field number 99"),
            "{}",
            error.message
        );
        assert!(
            error.message.contains("io.k8s.api.core.v1.Container"),
            "{}",
            error.message
        );
    }

    #[test]
    fn unsupported_kind_is_a_415() {
        // Custom resources have no protobuf schema, in kube-apiserver either.
        let body = envelope("example.com/v1", "Widget", &[]);
        let error = decode_protobuf(&def("pods"), &body).unwrap_err();
        assert_eq!(error.code, 415);
        assert!(
            error.message.contains("Widget (example.com/v1)"),
            "{}",
            error.message
        );
        // A served kind in a version this server does not serve.
        let body = envelope("storage.k8s.io/v1beta1", "VolumeAttributesClass", &[]);
        assert_eq!(decode_protobuf(&def("pods"), &body).unwrap_err().code, 415);
    }

    #[test]
    fn malformed_bodies_are_400() {
        let pods = def("pods");
        assert_eq!(decode_protobuf(&pods, b"{}").unwrap_err().code, 400);
        assert_eq!(
            decode_protobuf(&pods, b"k8s\0\x0a\x05ab").unwrap_err().code,
            400
        );
        // A string field sent as a varint.
        let mut raw = Enc::default();
        raw.msg(1, |m| {
            m.uint(1, 7);
        });
        let error = decode_protobuf(&pods, &envelope("v1", "Pod", &raw.0)).unwrap_err();
        assert_eq!(error.code, 400);
        assert!(
            error.message.contains("field 1 (name)"),
            "{}",
            error.message
        );
        // A compressed body.
        let mut e = Enc::default();
        e.msg(1, |t| {
            t.str(1, "v1").str(2, "Pod");
        })
        .str(3, "gzip");
        let mut body = PROTOBUF_MAGIC.to_vec();
        body.extend_from_slice(&e.0);
        assert_eq!(decode_protobuf(&pods, &body).unwrap_err().code, 415);
    }

    #[test]
    fn base64_matches_the_standard_alphabet() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foob"), "Zm9vYg==");
        assert_eq!(base64(&[0xfb, 0xff]), "+/8=");
    }

    #[test]
    fn media_type_detection() {
        assert!(is_protobuf_media_type(
            "application/vnd.kubernetes.protobuf"
        ));
        assert!(is_protobuf_media_type(
            "application/vnd.kubernetes.protobuf; charset=binary"
        ));
        assert!(!is_protobuf_media_type("application/json"));
    }

    /// A CustomResourceDefinition whose schema nests `levels` schemas through `not`, as
    /// client-go would send it.
    fn nested_definition(levels: usize) -> Vec<u8> {
        let wrap = |number: u32, inner: &[u8]| {
            let mut out = Vec::new();
            encode::put_varint(&mut out, u64::from(number << 3 | 2));
            encode::put_varint(&mut out, inner.len() as u64);
            out.extend_from_slice(inner);
            out
        };
        let mut schema = wrap(5, b"object");
        for _ in 1..levels {
            schema = [wrap(5, b"object"), wrap(28, &schema)].concat();
        }
        let version = [
            wrap(1, b"v1"),
            vec![0x10, 1, 0x18, 1],
            wrap(4, &wrap(1, &schema)),
        ]
        .concat();
        let spec = [wrap(1, b"example.com"), wrap(7, &version)].concat();
        let crd = [wrap(1, &wrap(1, b"deep.example.com")), wrap(2, &spec)].concat();
        envelope("apiextensions.k8s.io/v1", "CustomResourceDefinition", &crd)
    }

    /// A definition's schemas nest without end; a body nesting past [`MESSAGE_MAX_DEPTH`]
    /// messages is a 400 (it once recursed once per level on the worker's stack, which a
    /// 3 MiB body could overflow), and one just inside decodes, on stacks grown as it goes, to
    /// the JSON it encodes back from.
    #[test]
    fn nesting_is_bounded_and_deep_definitions_do_not_overflow() {
        let def = crate::crd::definition();
        // The definition, its spec, a version, its validation, then the schemas.
        let inside = MESSAGE_MAX_DEPTH - 4;
        let decoded = decode_protobuf(&def, &nested_definition(inside)).unwrap();
        let mut schema = &decoded["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
        let mut levels = 1;
        while let Some(not) = schema.get("not") {
            assert_eq!(schema["type"], "object");
            schema = not;
            levels += 1;
        }
        assert_eq!(levels, inside);
        let body = encode_protobuf(&decoded).unwrap();
        assert_eq!(decode_protobuf(&def, &body).unwrap(), decoded);
        let error = decode_protobuf(&def, &nested_definition(inside + 1)).unwrap_err();
        assert_eq!(error.code, 400, "{}", error.message);
        assert!(
            error.message.contains("nested more than 5000 levels"),
            "{}",
            error.message
        );
        // The refusal leaves nothing behind: the next body decodes from the top.
        assert!(decode_protobuf(&def, &nested_definition(3)).is_ok());
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let pods = def("pods");
            let _ = decode_protobuf(&pods, &bytes);
            let mut body = PROTOBUF_MAGIC.to_vec();
            body.extend_from_slice(&bytes);
            let _ = decode_protobuf(&pods, &body);
        }

        #[test]
        fn arbitrary_raw_objects_never_panic(
            kind in proptest::sample::select(vec!["Pod", "ConfigMap", "Secret", "Service", "Namespace", "ServiceAccount", "DeleteOptions"]),
            raw in proptest::collection::vec(any::<u8>(), 0..512),
        ) {
            let _ = decode_protobuf(&def("pods"), &envelope("v1", kind, &raw));
            let _ = decode_protobuf(&def("deployments"), &envelope("apps/v1", "Deployment", &raw));
        }
    }
}
