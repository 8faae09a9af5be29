//! The cost kube-apiserver estimates for a rule when its CRD is written: cel-go's static cost
//! estimate (`checker.Cost`) of the checked expression, with kube's sizes for the schema's
//! values (`SchemaDeclType`'s `MaxElements`: `maxLength` times 4, `maxItems`,
//! `maxProperties`, else what fits in a 3 MiB request) and kube's library estimates
//! (`library.CostEstimator`).
//!
//! **Guarantee: never above kube's estimate.** [`estimate`] gives a number only for an
//! expression it follows the way cel-go does, node by node, and only where the operands'
//! types decide a single overload the way cel-go's checker would: literals, `self`, field
//! selections, `has`, list and map literals, the macros (`all`, `exists`, `exists_one`,
//! `map`, `filter`, `optMap`, `optFlatMap`, and the two-variable `all`, `exists`,
//! `existsOne`, `transformList`, `transformMap`, `transformMapEntry` — recognized in the
//! crate's expansion of them and estimated as cel-go's comprehension with two variables), the
//! operators, `dyn`, the conversions (`string()` of anything gives a result of unknown size,
//! as cel-go, `bytes()`/`string()` between strings and bytes one of its input's size), the
//! timestamp accessors, optionals (`optional.of`, `.?f`, `[?i]`, `value`, `orValue`, `or`,
//! `hasValue`), cel-go's strings and sets extensions, and kube's libraries: regex (`find`,
//! `findAll`), lists, URLs (`url()`'s result as long as its text), quantity, IP, CIDR,
//! format (`validate` as if each format's regex were `MaxNameFormatRegexSize` long) and
//! semver — each call as cel-go's `functionCost` gets it: the extension's own estimator
//! (sets), else kube's `library.CostEstimator.EstimateCallCost` (including its equality of
//! two values of a library type), else cel-go's, else 1. The tests check the numbers against
//! kube's `library/cost_test.go` (with its test size estimator) and apiextensions'
//! `TestCostEstimation` and `TestCelEstimatedCostStability`. Anything else gives `None` (the
//! rule is not estimated, counted as costing nothing, never refused for its cost): `type()`,
//! kube's authorizer library (no CRD rule can reach an authorizer), a `dyn` operand where
//! the overload depends on the type, a struct literal, a `replace` whose estimate converts a
//! float beyond `uint64` (Go's result is then the machine's), `optionalOldSelf`. Where kube
//! versions differ in a size, the smaller is taken: a resource's `metadata.name` is at most
//! 253 characters (newer kube; 1.33 takes it as unbounded), and a string with an `enum` is at
//! most as long as its longest value.
//!
//! Recursive over the expression (at most [`super::DEPTH_MAX`] deep) and over the schema's
//! nesting; linear in the expression's size but for `optMap`'s target, which cel-go copies
//! and so costs again at each use (exponential in nested `optMap`s, as cel-go's copy):
//! past [`STEPS_MAX`] expressions costed the estimate gives up (`None`). The schema is walked
//! only along the paths the expression names.

use std::collections::HashMap;

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};
use serde_json::{Map, Value};

use super::escape;
use crate::schema_node::flag;

/// kube's `StaticEstimatedCostLimit`: the most one rule may cost, times the times it runs.
pub(crate) const RULE_COST_LIMIT: u64 = 10_000_000;

/// kube's `StaticEstimatedCRDCostLimit`: the most all of a schema's rules may cost together.
pub(crate) const SCHEMA_COST_LIMIT: u64 = 100_000_000;

/// kube's `MaxRequestSizeBytes`.
const MAX_REQUEST_BYTES: i64 = 3 * 1024 * 1024;

/// cel-go's cost constants (`common/cost.go`).
const SELECT_AND_IDENT: u64 = 1;
const LIST_CREATE: u64 = 10;
const MAP_CREATE: u64 = 30;
const STRING_TRAVERSAL: f64 = 0.1;
const REGEX_LENGTH: f64 = 0.25;

/// kube's `MaxFormatSize` and `MaxNameFormatRegexSize` (`pkg/cel/limits.go`).
const MAX_FORMAT_SIZE: u64 = 64;
const MAX_NAME_FORMAT_REGEX_SIZE: f64 = 128.0;

/// kube's error detail for a cost above its limit (`getCostErrorMessage`).
pub(crate) fn exceeds(cost_name: &str, cost: u64, limit: u64) -> String {
    let factor = cost as f64 / limit as f64;
    let factor = if factor > 100.0 {
        "more than 100x".to_owned()
    } else if factor < 1.5 {
        format!("{factor:.6}x")
    } else {
        format!("{factor:.1}x")
    };
    format!(
        "{cost_name} exceeds budget by factor of {factor} (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
    )
}

/// `a * b`, or `u64::MAX` when it overflows (kube's `multiplyWithOverflowGuard`).
pub(crate) fn times(a: u64, b: u64) -> u64 {
    a.saturating_mul(b)
}

/// How many times a rule on a node of schema `s` runs at most when its enclosing arrays and
/// maps are not all bounded: as many of its values as fit in a request (kube's
/// `maxCardinality` of the node's minimal serialized size). `None` when kube has no CEL type
/// for the node.
pub(crate) fn unbounded_cardinality(s: &Map<String, Value>, resource: bool) -> Option<u64> {
    let decl = Decl::of(s, resource)?;
    u64::try_from(MAX_REQUEST_BYTES / (decl.min_size() + 1)).ok()
}

/// The factor by which a node of schema `s` multiplies how often its children's rules run
/// (kube's `extractMaxElements`): `None` when unbounded.
pub(crate) fn children_factor(s: &Map<String, Value>) -> Option<u64> {
    let size = |key: &str| {
        s.get(key)
            .and_then(Value::as_i64)
            .map(|n| u64::try_from(n.max(0)).unwrap_or(0))
    };
    match s.get("type").and_then(Value::as_str) {
        Some("object") if s.get("additionalProperties").is_some_and(|a| !a.is_null()) => {
            size("maxProperties")
        }
        Some("array") => size("maxItems"),
        _ => Some(1),
    }
}

/// cel-go's estimate of the most `expr` costs on a node of schema `s` (a resource's root or an
/// embedded resource when `resource`), or `None` when it does not follow the expression.
pub(crate) fn estimate(expr: &IdedExpr, s: &Map<String, Value>, resource: bool) -> Option<u64> {
    let root = Decl::of(s, resource)?;
    Coster::new(Some(root), None).cost(expr).map(|c| c.max)
}

/// A schema node as kube's `DeclType` sees it.
#[derive(Clone, Copy, Debug)]
enum Decl<'a> {
    /// A node of the schema; a resource's root or an embedded resource when `true`.
    Node(&'a Map<String, Value>, bool),
    /// The `metadata` kube puts at a resource's root: `name` and `generateName` (the node
    /// the schema declares, if any).
    Meta(Option<&'a Map<String, Value>>),
    /// A string of at most this many bytes (kube's additions: `kind`, `apiVersion`, `name`, a
    /// map's keys).
    Str(i64),
}

/// The CEL type kinds the estimate tells apart.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Bool,
    Int,
    Uint,
    Double,
    String,
    Bytes,
    Timestamp,
    Duration,
    Null,
    Type,
    List,
    Map,
    Struct,
    Dyn,
    /// One of kube's library types.
    Lib(Lib),
    /// An `optional_type` (its value's type is the `Ty`'s).
    Optional,
}

/// kube's library types (`k8s.io/apiserver/pkg/cel`): `kubernetes.Quantity`, `net.IP`,
/// `net.CIDR`, `kubernetes.URL`, `kubernetes.NamedFormat`, `kubernetes.Semver`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Lib {
    Quantity,
    Ip,
    Cidr,
    Url,
    Format,
    Semver,
}

impl<'a> Decl<'a> {
    /// kube's `SchemaDeclType`: `None` for a node CEL does not see.
    fn of(s: &'a Map<String, Value>, resource: bool) -> Option<Decl<'a>> {
        if flag(s, "x-kubernetes-int-or-string") {
            return Some(Decl::Node(s, resource));
        }
        match s.get("type").and_then(Value::as_str)? {
            "array" => {
                let items = s.get("items")?.as_object()?;
                Decl::of(items, flag(items, "x-kubernetes-embedded-resource"))?;
                Some(Decl::Node(s, resource))
            }
            "object" => {
                if let Some(Value::Object(values)) = s.get("additionalProperties") {
                    Decl::of(values, flag(values, "x-kubernetes-embedded-resource"))?;
                }
                Some(Decl::Node(s, resource))
            }
            "string" | "boolean" | "number" | "integer" => Some(Decl::Node(s, resource)),
            _ => None,
        }
    }

    fn kind(self) -> Kind {
        let s = match self {
            Decl::Node(s, _) => s,
            Decl::Meta(_) => return Kind::Struct,
            Decl::Str(_) => return Kind::String,
        };
        if flag(s, "x-kubernetes-int-or-string") {
            return Kind::Dyn;
        }
        match s.get("type").and_then(Value::as_str) {
            Some("array") => Kind::List,
            Some("object") if matches!(s.get("additionalProperties"), Some(Value::Object(_))) => {
                Kind::Map
            }
            Some("object") => Kind::Struct,
            Some("boolean") => Kind::Bool,
            Some("number") => Kind::Double,
            Some("integer") => Kind::Int,
            _ => match s.get("format").and_then(Value::as_str) {
                Some("byte") => Kind::Bytes,
                Some("duration") => Kind::Duration,
                Some("date" | "date-time") => Kind::Timestamp,
                _ => Kind::String,
            },
        }
    }

    fn items(self) -> Option<(&'a Map<String, Value>, bool)> {
        let Decl::Node(s, _) = self else { return None };
        let items = match self.kind() {
            Kind::List => s.get("items")?.as_object()?,
            Kind::Map => s.get("additionalProperties")?.as_object()?,
            _ => return None,
        };
        Some((items, flag(items, "x-kubernetes-embedded-resource")))
    }

    /// A list's item or a map's value.
    fn element(self) -> Option<Decl<'a>> {
        let (items, resource) = self.items()?;
        Decl::of(items, resource)
    }

    /// kube's `MinSerializedSize`.
    fn min_size(self) -> i64 {
        let s = match self {
            Decl::Node(s, _) => s,
            Decl::Meta(_) => return 2,
            Decl::Str(_) => return 2,
        };
        match self.kind() {
            Kind::Dyn => 1,
            Kind::List | Kind::Map => 2,
            Kind::Struct => {
                let required: Vec<&str> = s
                    .get("required")
                    .and_then(Value::as_array)
                    .map(|r| r.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                let mut size: i64 = 2;
                for (name, field) in self.fields() {
                    let defaulted = match field {
                        Decl::Node(p, _) => p.get("default").is_some_and(|d| !d.is_null()),
                        _ => false,
                    };
                    if required.contains(&name) && !defaulted {
                        size = size
                            .saturating_add(name.len() as i64)
                            .saturating_add(field.min_size())
                            .saturating_add(4);
                    }
                }
                size
            }
            Kind::Bool => 4,
            Kind::Int | Kind::Double => 1,
            Kind::Duration => 3,
            Kind::Timestamp => {
                if s.get("format").and_then(Value::as_str) == Some("date") {
                    12
                } else {
                    21
                }
            }
            _ => 2,
        }
    }

    /// kube's `MaxElements`.
    fn max_elements(self) -> i64 {
        let s = match self {
            Decl::Node(s, _) => s,
            Decl::Meta(_) => return 0,
            Decl::Str(max) => return max,
        };
        let number = |key: &str| s.get(key).and_then(Value::as_i64);
        let unbounded_string = MAX_REQUEST_BYTES - 2;
        match self.kind() {
            Kind::Dyn => {
                number("maxLength").map_or(unbounded_string, |n| n.max(0).saturating_mul(4))
            }
            Kind::List => number("maxItems").map_or_else(
                || {
                    let items = self.element().map_or(1, Decl::min_size);
                    (MAX_REQUEST_BYTES - 2) / (items.saturating_add(1)).max(1)
                },
                |n| n.max(0),
            ),
            Kind::Map => number("maxProperties").map_or_else(
                || {
                    let values = self.element().map_or(1, Decl::min_size);
                    (MAX_REQUEST_BYTES - 2) / (values.saturating_add(6)).max(1)
                },
                |n| n.max(0),
            ),
            Kind::Bytes => number("maxLength").map_or(unbounded_string, |n| n.max(0)),
            Kind::Duration => 32,
            Kind::Timestamp => {
                if s.get("format").and_then(Value::as_str) == Some("date") {
                    12
                } else {
                    32
                }
            }
            Kind::String => {
                if let Some(n) = number("maxLength") {
                    return n.max(0).saturating_mul(4);
                }
                match s.get("enum").and_then(Value::as_array) {
                    Some(values) if !values.is_empty() => values
                        .iter()
                        .filter_map(Value::as_str)
                        .map(|v| v.len() as i64)
                        .max()
                        .unwrap_or(0),
                    _ => unbounded_string,
                }
            }
            _ => 0,
        }
    }

    /// Whether kube adds `apiVersion`, `kind` and `metadata` to this resource's root (its
    /// `WithTypeAndObjectMeta`).
    fn adds_meta(s: &Map<String, Value>) -> bool {
        let typed = |s: Option<&Value>, want: &str| {
            s.and_then(|s| s.get("type")).and_then(Value::as_str) == Some(want)
        };
        let properties = s.get("properties").and_then(Value::as_object);
        let property = |name: &str| properties.and_then(|p| p.get(name));
        let meta = property("metadata")
            .and_then(|m| m.get("properties"))
            .and_then(Value::as_object);
        !(typed(property("kind"), "string")
            && typed(property("apiVersion"), "string")
            && typed(property("metadata"), "object")
            && meta.is_some_and(|m| {
                typed(m.get("name"), "string") && typed(m.get("generateName"), "string")
            }))
    }

    /// An object's fields CEL sees, by property name.
    fn fields(self) -> Vec<(&'a str, Decl<'a>)> {
        match self {
            Decl::Node(s, resource) => {
                let adds = resource && Decl::adds_meta(s);
                let mut fields = Vec::new();
                if let Some(properties) = s.get("properties").and_then(Value::as_object) {
                    for (name, property) in properties {
                        if adds && matches!(name.as_str(), "kind" | "apiVersion" | "metadata") {
                            continue;
                        }
                        if let Value::Object(p) = property
                            && let Some(decl) =
                                Decl::of(p, flag(p, "x-kubernetes-embedded-resource"))
                        {
                            fields.push((name.as_str(), decl));
                        }
                    }
                }
                if adds {
                    let meta = s
                        .get("properties")
                        .and_then(|p| p.get("metadata"))
                        .and_then(Value::as_object);
                    fields.push(("kind", Decl::Str(MAX_REQUEST_BYTES - 2)));
                    fields.push(("apiVersion", Decl::Str(MAX_REQUEST_BYTES - 2)));
                    fields.push(("metadata", Decl::Meta(meta)));
                }
                fields
            }
            Decl::Meta(declared) => {
                let capped = |name: &str, most: i64| {
                    let declared = declared
                        .and_then(|m| m.get("properties"))
                        .and_then(|p| p.get(name))
                        .and_then(|n| n.get("maxLength"))
                        .and_then(Value::as_i64);
                    Decl::Str(
                        declared
                            .map_or(most, |d| d.min(most))
                            .max(0)
                            .saturating_mul(4),
                    )
                };
                vec![
                    ("name", capped("name", 253)),
                    ("generateName", capped("generateName", 252)),
                ]
            }
            Decl::Str(_) => Vec::new(),
        }
    }

    /// The field CEL names `name` (escaped as kube escapes property names).
    fn field(self, name: &str) -> Option<Decl<'a>> {
        if self.kind() != Kind::Struct {
            return None;
        }
        self.fields()
            .into_iter()
            .find(|(property, _)| escape(property).as_deref() == Some(name))
            .map(|(_, decl)| decl)
    }
}

/// What the estimate knows of an expression's type.
#[derive(Clone, Debug)]
enum Ty<'a> {
    Decl(Decl<'a>),
    Prim(Kind),
    List(Box<Ty<'a>>),
    Map(Box<Ty<'a>>, Box<Ty<'a>>),
    Optional(Box<Ty<'a>>),
}

impl<'a> Ty<'a> {
    fn kind(&self) -> Kind {
        match self {
            Ty::Decl(d) => d.kind(),
            Ty::Prim(k) => *k,
            Ty::List(_) => Kind::List,
            Ty::Map(..) => Kind::Map,
            Ty::Optional(_) => Kind::Optional,
        }
    }

    fn lib(&self) -> Option<Lib> {
        match self.kind() {
            Kind::Lib(lib) => Some(lib),
            _ => None,
        }
    }

    /// A list's element type, a map's value type.
    fn element(&self) -> Option<Ty<'a>> {
        match self {
            Ty::Decl(d) => d.element().map(Ty::Decl),
            Ty::List(e) | Ty::Map(_, e) => Some((**e).clone()),
            Ty::Prim(_) | Ty::Optional(_) => None,
        }
    }

    /// A map's key type.
    fn key(&self) -> Option<Ty<'a>> {
        match self {
            Ty::Decl(d) if d.kind() == Kind::Map => Some(Ty::Prim(Kind::String)),
            Ty::Map(k, _) => Some((**k).clone()),
            _ => None,
        }
    }

    /// cel-go's `isScalar`: of a constant size (an optional of one too).
    fn scalar(&self) -> bool {
        if let Ty::Optional(value) = self {
            return value.scalar();
        }
        matches!(
            self.kind(),
            Kind::Bool | Kind::Double | Kind::Duration | Kind::Int | Kind::Timestamp | Kind::Uint
        )
    }

    fn numeric(&self) -> bool {
        matches!(self.kind(), Kind::Int | Kind::Uint | Kind::Double)
    }
}

/// cel-go's `SizeEstimate` and `CostEstimate` (the same arithmetic).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Est {
    min: u64,
    max: u64,
}

impl Est {
    const UNKNOWN: Est = Est {
        min: 0,
        max: u64::MAX,
    };

    fn fixed(n: u64) -> Est {
        Est { min: n, max: n }
    }

    fn add(self, o: Est) -> Est {
        Est {
            min: self.min.saturating_add(o.min),
            max: self.max.saturating_add(o.max),
        }
    }

    fn multiply(self, o: Est) -> Est {
        Est {
            min: times(self.min, o.min),
            max: times(self.max, o.max),
        }
    }

    fn factor(self, f: f64) -> Est {
        Est {
            min: by_factor(self.min, f),
            max: by_factor(self.max, f),
        }
    }

    fn union(self, o: Est) -> Est {
        Est {
            min: self.min.min(o.min),
            max: self.max.max(o.max),
        }
    }
}

/// cel-go's `multiplyByCostFactor`.
fn by_factor(x: u64, f: f64) -> u64 {
    let x = x as f64;
    if x > 0.0 && f > 0.0 && x > u64::MAX as f64 / f {
        return u64::MAX;
    }
    let ceil = (x * f).ceil();
    if ceil >= 18_446_744_073_709_551_616.0 {
        u64::MAX
    } else {
        ceil as u64
    }
}

/// cel-go's `entrySizeEstimate`: a list's or map's entries.
#[derive(Clone, Copy, Debug)]
struct Entry {
    list: bool,
    key: Est,
    value: Est,
}

impl Entry {
    fn union(a: Option<Entry>, b: Option<Entry>) -> Option<Entry> {
        let (a, b) = (a?, b?);
        Some(Entry {
            list: a.list,
            key: a.key.union(b.key),
            value: a.value.union(b.value),
        })
    }
}

struct Local<'a> {
    name: String,
    path: Vec<String>,
    size: Option<Est>,
    entry: Option<Entry>,
    ty: Ty<'a>,
}

/// The value of a two-variable comprehension as our expansion reads it, `@rangeN[@keyN]`
/// (`super::comprehensions`): what cel-go's `pushIterValue` pushes for its second variable.
struct Alias<'a> {
    range: String,
    key: String,
    value: Local<'a>,
}

/// cel-go's `coster`, with the types its checker would have given.
struct Coster<'a> {
    /// The rule's node (`self`), sized by kube's `sizeEstimator` over the schema.
    root: Option<Decl<'a>>,
    /// Instead of the schema's sizes, every string and bytes value without a size of its own
    /// is at most this long (the `testCostEstimator` of kube's `library/cost_test.go`).
    strings: Option<u64>,
    paths: HashMap<u64, Vec<String>>,
    sizes: HashMap<u64, Est>,
    entries: HashMap<u64, Entry>,
    types: HashMap<u64, Ty<'a>>,
    locals: Vec<Local<'a>>,
    aliases: Vec<Alias<'a>>,
    /// The cel crate's `@target` of `optMap`/`optFlatMap`, which cel-go does not bind but
    /// copies: each use costs the target's expression again.
    inlined: Vec<IdedExpr>,
    /// Expressions costed so far (copies included): past [`STEPS_MAX`] the estimate gives up.
    steps: usize,
    /// The last id given to a node of cel-go's expansion built from ours (see `inserting`).
    synthetic: u64,
}

/// The most expressions one estimate costs (copied targets of nested `optMap`s cost their
/// expression again, as in cel-go, which grows exponentially with the nesting).
const STEPS_MAX: usize = 1_000_000;

/// The variable the cel crate binds an `optMap`'s or `optFlatMap`'s target to.
const OPTIONAL_TARGET: &str = "@target";

/// What cel-go's cost functions see of an argument (its `AstNode`).
struct Node<'a> {
    path: Vec<String>,
    ty: Ty<'a>,
    size: Option<Est>,
}

impl<'a> Coster<'a> {
    fn new(root: Option<Decl<'a>>, strings: Option<u64>) -> Coster<'a> {
        Coster {
            root,
            strings,
            paths: HashMap::new(),
            sizes: HashMap::new(),
            entries: HashMap::new(),
            types: HashMap::new(),
            locals: Vec::new(),
            aliases: Vec::new(),
            inlined: Vec::new(),
            steps: 0,
            synthetic: u64::MAX,
        }
    }

    /// kube's `EstimateSize` of a node at `path` of type `ty` (the schema's, or the test
    /// estimator's by type).
    fn estimate_size(&self, path: &[String], ty: Option<&Ty<'a>>) -> Option<Est> {
        match self.strings {
            Some(n) => ty
                .is_some_and(|t| matches!(t.kind(), Kind::String | Kind::Bytes))
                .then_some(Est { min: 0, max: n }),
            None => self.size_at(path),
        }
    }

    fn local(&self, name: &str) -> Option<&Local<'a>> {
        self.locals.iter().rev().find(|l| l.name == name)
    }

    fn ty(&self, e: &IdedExpr) -> Option<Ty<'a>> {
        self.types.get(&e.id).cloned()
    }

    fn path(&self, e: &IdedExpr) -> Vec<String> {
        if let Expr::Ident(name) = &e.expr
            && let Some(local) = self.local(name)
        {
            return local.path.clone();
        }
        self.paths.get(&e.id).cloned().unwrap_or_default()
    }

    /// kube's `sizeEstimator.EstimateSize`: the node the path names from the rule's node.
    fn size_at(&self, path: &[String]) -> Option<Est> {
        let (_, rest) = path.split_first()?;
        let mut node = self.root?;
        for step in rest {
            node = match step.as_str() {
                "@items" | "@values" => match node.kind() {
                    Kind::List | Kind::Map => node.element()?,
                    _ => return None,
                },
                "@keys" => match node.kind() {
                    Kind::Map => Decl::Str(0),
                    _ => return None,
                },
                name => match node {
                    Decl::Node(..) | Decl::Meta(_) if node.kind() == Kind::Struct => {
                        node.fields()
                            .into_iter()
                            .find(|(p, _)| escape(p).as_deref() == Some(name))?
                            .1
                    }
                    _ => return None,
                },
            };
        }
        Some(Est {
            min: 0,
            max: u64::try_from(node.max_elements()).unwrap_or(0),
        })
    }

    /// cel-go's `computeSize`.
    fn size(&mut self, e: &IdedExpr) -> Option<Est> {
        if let Some(size) = self.sizes.get(&e.id) {
            return Some(*size);
        }
        if let Some(size) = literal_size(e) {
            return Some(size);
        }
        if let Some(size) = self.estimate_size(&self.path(e), self.ty(e).as_ref()) {
            self.sizes.insert(e.id, size);
            return Some(size);
        }
        if self.ty(e).is_some_and(|t| t.scalar()) {
            return Some(Est::fixed(1));
        }
        if let Expr::Ident(name) = &e.expr
            && let Some(local) = self.local(name)
        {
            return local.size;
        }
        None
    }

    fn size_or_unknown(&mut self, e: &IdedExpr) -> Est {
        self.size(e).unwrap_or(Est::UNKNOWN)
    }

    /// cel-go's `computeEntrySize`.
    fn entry(&self, e: &IdedExpr) -> Option<Entry> {
        if let Some(entry) = self.entries.get(&e.id) {
            return Some(*entry);
        }
        if let Expr::Ident(name) = &e.expr {
            return self.local(name).and_then(|l| l.entry);
        }
        None
    }

    fn node(&mut self, e: &IdedExpr) -> Option<Node<'a>> {
        Some(Node {
            path: self.path(e),
            ty: self.ty(e)?,
            size: self.size(e),
        })
    }

    fn cost(&mut self, e: &IdedExpr) -> Option<Est> {
        self.steps += 1;
        if self.steps > STEPS_MAX {
            return None;
        }
        if let Expr::Ident(name) = &e.expr
            && name == OPTIONAL_TARGET
        {
            // A copy of the target, as cel-go's macro writes it.
            let target = self.inlined.last()?.clone();
            let cost = self.cost(&target)?;
            let ty = self.ty(&target)?;
            if let Some(size) = self.size(&target) {
                self.sizes.insert(e.id, size);
            }
            if let Some(entry) = self.entry(&target) {
                self.entries.insert(e.id, entry);
            }
            self.paths.insert(e.id, self.path(&target));
            self.types.insert(e.id, ty);
            return Some(cost);
        }
        let (cost, ty) = match &e.expr {
            Expr::Literal(literal) => (
                Est::fixed(0),
                Ty::Prim(match literal {
                    LiteralValue::Boolean(_) => Kind::Bool,
                    LiteralValue::Bytes(_) => Kind::Bytes,
                    LiteralValue::Double(_) => Kind::Double,
                    LiteralValue::Int(_) => Kind::Int,
                    LiteralValue::Null => Kind::Null,
                    LiteralValue::String(_) => Kind::String,
                    LiteralValue::UInt(_) => Kind::Uint,
                }),
            ),
            Expr::Ident(name) => {
                let ty = match self.local(name) {
                    Some(local) => local.ty.clone(),
                    None => {
                        let ty = match name.as_str() {
                            "self" | "oldSelf" => Ty::Decl(self.root?),
                            "bool" | "int" | "uint" | "double" | "string" | "bytes" | "list"
                            | "map" | "null_type" | "type" => Ty::Prim(Kind::Type),
                            _ => return None,
                        };
                        self.paths.insert(e.id, vec![name.clone()]);
                        ty
                    }
                };
                (Est::fixed(SELECT_AND_IDENT), ty)
            }
            Expr::Select(select) => {
                let operand = self.cost(&select.operand)?;
                let operand_ty = self.ty(&select.operand)?;
                if select.test {
                    // kube turns off cel-go's cost of a presence test (`PresenceTestHasCost(false)`).
                    (operand, Ty::Prim(Kind::Bool))
                } else {
                    let ty = match operand_ty.kind() {
                        Kind::Struct => match &operand_ty {
                            Ty::Decl(d) => Ty::Decl(d.field(&select.field)?),
                            _ => return None,
                        },
                        Kind::Map => operand_ty.element()?,
                        Kind::Dyn => Ty::Prim(Kind::Dyn),
                        _ => return None,
                    };
                    let extra = match operand_ty.kind() {
                        Kind::Map | Kind::Struct => SELECT_AND_IDENT,
                        _ => 0,
                    };
                    let mut path = self.path(&select.operand);
                    path.push(select.field.clone());
                    self.paths.insert(e.id, path);
                    (operand.add(Est::fixed(extra)), ty)
                }
            }
            Expr::List(list) => {
                if !list.optional_indices.is_empty() {
                    return None;
                }
                let mut sum = Est::fixed(0);
                let mut item = Est {
                    min: if list.elements.is_empty() {
                        0
                    } else {
                        u64::MAX
                    },
                    max: 0,
                };
                let mut element: Option<Ty<'a>> = None;
                for el in &list.elements {
                    sum = sum.add(self.cost(el)?);
                    item = item.union(self.size_or_unknown(el));
                    element = Some(join_types(element, self.ty(el)?));
                }
                self.entries.insert(
                    e.id,
                    Entry {
                        list: true,
                        key: Est::fixed(1),
                        value: item,
                    },
                );
                (
                    sum.add(Est::fixed(LIST_CREATE)),
                    Ty::List(Box::new(element.unwrap_or(Ty::Prim(Kind::Dyn)))),
                )
            }
            Expr::Map(map) => {
                let mut sum = Est::fixed(0);
                let empty = map.entries.is_empty();
                let start = Est {
                    min: if empty { 0 } else { u64::MAX },
                    max: 0,
                };
                let (mut keys, mut values) = (start, start);
                let (mut key_ty, mut value_ty): (Option<Ty<'a>>, Option<Ty<'a>>) = (None, None);
                for entry in &map.entries {
                    let EntryExpr::MapEntry(entry) = &entry.expr else {
                        return None;
                    };
                    if entry.optional {
                        return None;
                    }
                    sum = sum.add(self.cost(&entry.key)?);
                    sum = sum.add(self.cost(&entry.value)?);
                    keys = keys.union(self.size_or_unknown(&entry.key));
                    values = values.union(self.size_or_unknown(&entry.value));
                    key_ty = Some(join_types(key_ty, self.ty(&entry.key)?));
                    value_ty = Some(join_types(value_ty, self.ty(&entry.value)?));
                }
                self.entries.insert(
                    e.id,
                    Entry {
                        list: false,
                        key: keys,
                        value: values,
                    },
                );
                let dyn_ty = || Ty::Prim(Kind::Dyn);
                (
                    sum.add(Est::fixed(MAP_CREATE)),
                    Ty::Map(
                        Box::new(key_ty.unwrap_or_else(dyn_ty)),
                        Box::new(value_ty.unwrap_or_else(dyn_ty)),
                    ),
                )
            }
            Expr::Comprehension(c) => {
                if c.iter_var2.is_some() {
                    return None;
                }
                if let Some((inner, map)) = two_variables(c) {
                    let cel_go;
                    let inner = if map {
                        cel_go = self.inserting(inner)?;
                        &cel_go
                    } else {
                        inner
                    };
                    let (cost, ty) = self.two_variables(e, c, inner)?;
                    self.types.insert(e.id, ty);
                    return Some(cost);
                }
                let bind = matches!(&c.iter_range.expr, Expr::List(l) if l.elements.is_empty())
                    && matches!(&c.loop_cond.expr, Expr::Literal(LiteralValue::Boolean(b)) if !**b)
                    && c.accu_var != "@result";
                if bind && c.accu_var == OPTIONAL_TARGET {
                    // No bind in cel-go: the macro's uses of the target are copies of it.
                    self.inlined.push(c.accu_init.clone());
                    let result = self.cost(&c.result);
                    self.inlined.pop();
                    let result = result?;
                    if let Some(size) = self.size(&c.result) {
                        self.sizes.insert(e.id, size);
                    }
                    if let Some(entry) = self.entry(&c.result) {
                        self.entries.insert(e.id, entry);
                    }
                    (result, self.ty(&c.result)?)
                } else if bind {
                    let mut sum = self.cost(&c.iter_range)?;
                    sum = sum.add(self.cost(&c.accu_init)?);
                    let ty = self.ty(&c.accu_init)?;
                    self.push_local(&c.accu_var, &c.accu_init, ty);
                    let result = self.cost(&c.result);
                    self.locals.pop();
                    sum = sum.add(result?);
                    if let Some(size) = self.size(&c.result) {
                        self.sizes.insert(e.id, size);
                    }
                    if let Some(entry) = self.entry(&c.result) {
                        self.entries.insert(e.id, entry);
                    }
                    (sum, self.ty(&c.result)?)
                } else {
                    self.comprehension(e, c)?
                }
            }
            Expr::Call(call) => match self.alias(call) {
                Some(i) => {
                    // cel-go's `computeSize` of the variable: by its path, its type, else the
                    // size pushed with it.
                    let value = &self.aliases[i].value;
                    let (path, ty, pushed) = (value.path.clone(), value.ty.clone(), value.size);
                    let size = self
                        .estimate_size(&path, Some(&ty))
                        .or_else(|| ty.scalar().then_some(Est::fixed(1)))
                        .or(pushed);
                    if let Some(size) = size {
                        self.sizes.insert(e.id, size);
                    }
                    self.paths.insert(e.id, path);
                    (Est::fixed(SELECT_AND_IDENT), ty)
                }
                None => self.call(e, call)?,
            },
            Expr::Struct(_) | Expr::Unspecified => return None,
        };
        self.types.insert(e.id, ty);
        Some(cost)
    }

    /// Which alias `call` reads, if it is `@rangeN[@keyN]` of a two-variable comprehension
    /// being estimated.
    fn alias(&self, call: &cel::common::ast::CallExpr) -> Option<usize> {
        if call.func_name != "_[_]" || call.target.is_some() {
            return None;
        }
        let [range, key] = call.args.as_slice() else {
            return None;
        };
        let (Expr::Ident(range), Expr::Ident(key)) = (&range.expr, &key.expr) else {
            return None;
        };
        self.aliases
            .iter()
            .rposition(|a| &a.range == range && &a.key == key)
    }

    /// cel-go's `costComprehension` of a two-variable comprehension, from our expansion of it
    /// (`bind`: the range held; `c`: the comprehension over its keys): the range is costed
    /// once, the key is cel-go's `pushIterKey`, the value `pushIterValue`, each costing 1.
    fn two_variables(
        &mut self,
        e: &IdedExpr,
        bind: &cel::common::ast::ComprehensionExpr,
        c: &cel::common::ast::ComprehensionExpr,
    ) -> Option<(Est, Ty<'a>)> {
        let range = &bind.accu_init;
        let mut sum = self.cost(range)?;
        sum = sum.add(self.cost(&c.accu_init)?);
        let range_ty = self.ty(range)?;
        let accu_ty = self.ty(&c.accu_init)?;
        let entry = self.entry(range);
        let list = match entry {
            Some(entry) => entry.list,
            None => match range_ty.kind() {
                Kind::List => true,
                Kind::Map => false,
                _ => return None,
            },
        };
        let (key_sub, key_ty, value_sub) = if list {
            ("@indices", Some(Ty::Prim(Kind::Int)), "@items")
        } else {
            ("@keys", range_ty.key(), "@values")
        };
        let (key_ty, value_ty) = (key_ty?, range_ty.element()?);
        let path = self.path(range);
        let at = |sub: &str| {
            let mut path = path.clone();
            path.push(sub.to_owned());
            path
        };
        self.push_local(&c.accu_var, &c.accu_init, accu_ty);
        self.locals.push(Local {
            name: c.iter_var.clone(),
            path: at(key_sub),
            size: entry.map(|e| e.key),
            entry: None,
            ty: key_ty,
        });
        self.aliases.push(Alias {
            range: bind.accu_var.clone(),
            key: c.iter_var.clone(),
            value: Local {
                name: String::new(),
                path: at(value_sub),
                size: entry.map(|e| e.value),
                entry: None,
                ty: value_ty,
            },
        });
        let loop_cost = self.cost(&c.loop_cond);
        let step_cost = self.cost(&c.loop_step);
        self.aliases.pop();
        self.locals.pop();
        let (Some(loop_cost), Some(step_cost)) = (loop_cost, step_cost) else {
            self.locals.pop();
            return None;
        };
        self.comprehension_end(e, c, range, sum, loop_cost.add(step_cost))
    }

    /// cel-go's `transformMap`/`transformMapEntry` comprehension from ours: an empty map
    /// literal, each step `cel.@mapInsert(@result, k, t)` (`@mapInsert(@result, m)`), perhaps
    /// filtered, where ours appends `[k, t]` (`m`) to a list (nodes added get ids no
    /// expression has: counted down from the largest).
    fn inserting(
        &mut self,
        c: &cel::common::ast::ComprehensionExpr,
    ) -> Option<cel::common::ast::ComprehensionExpr> {
        use cel::common::ast::{CallExpr, MapExpr};
        let accu = &c.accu_var;
        let is_accu = |e: &IdedExpr| matches!(&e.expr, Expr::Ident(n) if n == accu);
        let appended = |e: &IdedExpr| -> Option<IdedExpr> {
            let Expr::Call(add) = &e.expr else {
                return None;
            };
            match (add.func_name.as_str(), add.args.as_slice()) {
                ("_+_", [a, list]) if is_accu(a) && add.target.is_none() => match &list.expr {
                    Expr::List(l) if l.elements.len() == 1 => Some(l.elements[0].clone()),
                    _ => None,
                },
                _ => None,
            }
        };
        let (filter, entry) = match &c.loop_step.expr {
            Expr::Call(t) if t.func_name == "_?_:_" && t.target.is_none() => {
                match t.args.as_slice() {
                    [f, step, otherwise] if is_accu(otherwise) => {
                        (Some(f.clone()), appended(step)?)
                    }
                    _ => return None,
                }
            }
            _ => (None, appended(&c.loop_step)?),
        };
        let mut fresh = |expr: Expr| {
            self.synthetic -= 1;
            IdedExpr {
                id: self.synthetic,
                expr,
            }
        };
        let accu_ident = || Expr::Ident(accu.clone());
        let args = match &entry.expr {
            Expr::List(pair) => match pair.elements.as_slice() {
                [key, value] if matches!(&key.expr, Expr::Ident(k) if k == &c.iter_var) => {
                    vec![fresh(accu_ident()), key.clone(), value.clone()]
                }
                _ => return None,
            },
            _ => vec![fresh(accu_ident()), entry],
        };
        let call = |func: &str, args: Vec<IdedExpr>| {
            Expr::Call(CallExpr {
                func_name: func.to_owned(),
                target: None,
                args,
            })
        };
        let mut step = fresh(call(super::comprehensions::MAP_INSERT, args));
        if let Some(filter) = filter {
            let otherwise = fresh(accu_ident());
            step = fresh(call("_?_:_", vec![filter, step, otherwise]));
        }
        let mut cel_go = c.clone();
        cel_go.accu_init = fresh(Expr::Map(MapExpr {
            entries: Vec::new(),
        }));
        cel_go.loop_step = step;
        Some(cel_go)
    }

    /// What cel-go's `costComprehension` records of its result's size and entries.
    fn comprehension_size(
        &mut self,
        e: &IdedExpr,
        c: &cel::common::ast::ComprehensionExpr,
        count: Est,
    ) {
        match &c.accu_init.expr {
            Expr::Literal(_) => {
                if let Some(size) = self.size(&c.accu_init) {
                    self.sizes.insert(e.id, size);
                }
            }
            Expr::List(_) | Expr::Map(_) => {
                self.sizes.insert(e.id, count);
                if let Some(entry) = self.entry(&c.loop_step) {
                    self.entries.insert(e.id, entry);
                }
            }
            _ => {}
        }
    }

    fn push_local(&mut self, name: &str, e: &IdedExpr, ty: Ty<'a>) {
        let local = Local {
            name: name.to_owned(),
            path: self.path(e),
            size: self.size(e),
            entry: self.entry(e),
            ty,
        };
        self.locals.push(local);
    }

    fn comprehension(
        &mut self,
        e: &IdedExpr,
        c: &cel::common::ast::ComprehensionExpr,
    ) -> Option<(Est, Ty<'a>)> {
        let mut sum = self.cost(&c.iter_range)?;
        sum = sum.add(self.cost(&c.accu_init)?);
        let range_ty = self.ty(&c.iter_range)?;
        let accu_ty = self.ty(&c.accu_init)?;
        self.push_local(&c.accu_var, &c.accu_init, accu_ty);
        // pushIterSingle
        let entry = self.entry(&c.iter_range);
        let list = match entry {
            Some(entry) => entry.list,
            None => match range_ty.kind() {
                Kind::List => true,
                Kind::Map => false,
                _ => {
                    self.locals.pop();
                    return None;
                }
            },
        };
        let (size, sub, item_ty) = if list {
            (entry.map(|e| e.value), "@items", range_ty.element())
        } else {
            (entry.map(|e| e.key), "@keys", range_ty.key())
        };
        let Some(item_ty) = item_ty else {
            self.locals.pop();
            return None;
        };
        let mut path = self.path(&c.iter_range);
        path.push(sub.to_owned());
        self.locals.push(Local {
            name: c.iter_var.clone(),
            path,
            size,
            entry: None,
            ty: item_ty,
        });
        let loop_cost = self.cost(&c.loop_cond);
        let step_cost = self.cost(&c.loop_step);
        self.locals.pop();
        let (Some(loop_cost), Some(step_cost)) = (loop_cost, step_cost) else {
            self.locals.pop();
            return None;
        };
        self.comprehension_end(e, c, &c.iter_range, sum, loop_cost.add(step_cost))
    }

    /// The end of a comprehension's estimate, its loop costed (`per_element`: the condition's
    /// and the step's cost) with only the accumulator still pushed: the accumulator takes the
    /// step's type (a `map` or `filter` builds a list of its elements' type), then the result
    /// is costed and the loop charged once per element of `range`.
    fn comprehension_end(
        &mut self,
        e: &IdedExpr,
        c: &cel::common::ast::ComprehensionExpr,
        range: &IdedExpr,
        sum: Est,
        per_element: Est,
    ) -> Option<(Est, Ty<'a>)> {
        let step_ty = self.ty(&c.loop_step);
        if let (Some(step_ty), Some(accu)) = (step_ty, self.locals.last_mut()) {
            accu.ty = step_ty;
        }
        let result = self.cost(&c.result);
        self.locals.pop();
        let count = self.size_or_unknown(range);
        let sum = sum.add(result?).add(count.multiply(per_element));
        self.comprehension_size(e, c, count);
        Some((sum, self.ty(&c.result)?))
    }

    /// cel-go's `costCall` and `functionCost`, with kube's library estimates, for the calls
    /// whose overload the operands' types decide.
    fn call(&mut self, e: &IdedExpr, call: &cel::common::ast::CallExpr) -> Option<(Est, Ty<'a>)> {
        if call.func_name == "dyn"
            && call.target.is_none()
            && let [arg] = call.args.as_slice()
        {
            // cel-go's `maybeUnwrapDynCall`: 1 and the argument, its sizes kept.
            let cost = self.cost(arg)?;
            if let Some(size) = self.size(arg) {
                self.sizes.insert(e.id, size);
            }
            if let Some(entry) = self.entry(arg) {
                self.entries.insert(e.id, entry);
            }
            return Some((cost.add(Est::fixed(1)), Ty::Prim(Kind::Dyn)));
        }
        // `a.b.f(...)` is the function `a.b.f` when the environment declares it (cel-go's
        // checker resolves it so, and drops the target).
        let namespaced = call
            .target
            .as_deref()
            .and_then(super::qualified)
            .map(|q| format!("{q}.{}", call.func_name))
            .filter(|name| super::functions::declared(name));
        let f = namespaced.as_deref().unwrap_or(call.func_name.as_str());
        let call_target = match namespaced {
            Some(_) => None,
            None => call.target.as_deref(),
        };
        let mut arg_costs = Vec::with_capacity(call.args.len());
        let mut args = Vec::with_capacity(call.args.len());
        for arg in &call.args {
            arg_costs.push(self.cost(arg)?);
            let mut node = self.node(arg)?;
            if node.path.first().is_some_and(|p| p == "@result") {
                node.path.clear();
            }
            args.push(node);
        }
        let mut sum = Est::fixed(0);
        let target = match call_target {
            Some(target) => {
                sum = self.cost(target)?;
                let mut node = self.node(target)?;
                if node.path.first().is_some_and(|p| p == "@result") {
                    node.path.clear();
                }
                Some(node)
            }
            None => None,
        };
        let arg_sum = arg_costs.iter().fold(Est::fixed(0), |a, c| a.add(*c));
        let default = Est::fixed(1).add(arg_sum);
        let kinds: Vec<Kind> = args.iter().map(|a| a.ty.kind()).collect();
        let dyn_arg = kinds.contains(&Kind::Dyn);
        let traversal = |n: &Node<'_>| n.size.unwrap_or(Est::UNKNOWN).factor(STRING_TRAVERSAL);
        let size_of = |n: &Node<'_>| n.size.unwrap_or(Est::UNKNOWN);
        let mut result_size: Option<Est> = None;
        let (cost, ty) = match (f, target.as_ref(), args.as_slice()) {
            ("_&&_" | "_||_", None, [a, b]) => {
                if a.ty.kind() != Kind::Bool && a.ty.kind() != Kind::Dyn
                    || b.ty.kind() != Kind::Bool && b.ty.kind() != Kind::Dyn
                {
                    return None;
                }
                let (l, r) = (arg_costs[0], arg_costs[1]);
                (
                    Est {
                        min: l.min,
                        max: l.add(r).max,
                    },
                    Ty::Prim(Kind::Bool),
                )
            }
            ("!_" | "@not_strictly_false", None, [_]) => (default, Ty::Prim(Kind::Bool)),
            ("_?_:_", None, [_, yes, no]) => {
                let size = size_of(yes).union(size_of(no));
                let entry = Entry::union(self.entry(&call.args[1]), self.entry(&call.args[2]));
                if let Some(entry) = entry {
                    self.entries.insert(e.id, entry);
                }
                result_size = Some(size);
                let ty = match (yes.ty.kind(), no.ty.kind()) {
                    (Kind::Null, _) => no.ty.clone(),
                    (_, Kind::Null) => yes.ty.clone(),
                    (a, b) if a == b => yes.ty.clone(),
                    _ => return None,
                };
                (arg_costs[0].add(arg_costs[1].union(arg_costs[2])), ty)
            }
            // kube's equality of its library types (`library.CostEstimator`), for operands of
            // the same type.
            ("_==_", None, [a, b]) if a.ty.lib().is_some() && a.ty.lib() == b.ty.lib() => {
                let cost = match a.ty.lib() {
                    Some(Lib::Format) => Est {
                        min: 1,
                        max: MAX_FORMAT_SIZE,
                    }
                    .factor(STRING_TRAVERSAL),
                    // kube takes the right side's size for both.
                    Some(Lib::Url) => Est {
                        min: 1,
                        max: b.size.unwrap_or(Est::fixed(1)).max,
                    }
                    .factor(STRING_TRAVERSAL),
                    _ => Est::fixed(1),
                };
                (cost.add(arg_sum), Ty::Prim(Kind::Bool))
            }
            ("_==_" | "_!=_", None, [a, b]) => (
                equality(size_of(a), size_of(b)).add(arg_sum),
                Ty::Prim(Kind::Bool),
            ),
            ("_<_" | "_<=_" | "_>_" | "_>=_", None, [a, b]) => {
                let (x, y) = (a.ty.kind(), b.ty.kind());
                let cost = if (x == Kind::String && y == Kind::String)
                    || (x == Kind::Bytes && y == Kind::Bytes)
                {
                    equality(size_of(a), size_of(b)).add(arg_sum)
                } else if (a.ty.numeric() && b.ty.numeric())
                    || (x == y && matches!(x, Kind::Bool | Kind::Timestamp | Kind::Duration))
                {
                    default
                } else {
                    return None;
                };
                (cost, Ty::Prim(Kind::Bool))
            }
            ("_+_", None, [a, b]) => {
                let (x, y) = (a.ty.kind(), b.ty.kind());
                if (x == Kind::String && y == Kind::String)
                    || (x == Kind::Bytes && y == Kind::Bytes)
                    || (x == Kind::List && y == Kind::List)
                {
                    let size = size_of(a).add(size_of(b));
                    let entry = Entry::union(self.entry(&call.args[0]), self.entry(&call.args[1]));
                    if let Some(entry) = entry {
                        self.entries.insert(e.id, entry);
                    }
                    result_size = Some(size);
                    if x == Kind::List {
                        let element = match (a.ty.element(), b.ty.element()) {
                            (Some(l), Some(r)) if l.kind() == Kind::Dyn => r,
                            (Some(l), _) => l,
                            _ => return None,
                        };
                        (default, Ty::List(Box::new(element)))
                    } else {
                        (size.factor(STRING_TRAVERSAL).add(arg_sum), a.ty.clone())
                    }
                } else if a.ty.numeric() && x == y {
                    (default, a.ty.clone())
                } else {
                    match (x, y) {
                        (Kind::Timestamp, Kind::Duration) | (Kind::Duration, Kind::Timestamp) => {
                            (default, Ty::Prim(Kind::Timestamp))
                        }
                        (Kind::Duration, Kind::Duration) => (default, Ty::Prim(Kind::Duration)),
                        _ => return None,
                    }
                }
            }
            ("_-_", None, [a, b]) => {
                let (x, y) = (a.ty.kind(), b.ty.kind());
                let ty = match (x, y) {
                    _ if a.ty.numeric() && x == y => a.ty.clone(),
                    (Kind::Timestamp, Kind::Timestamp) | (Kind::Duration, Kind::Duration) => {
                        Ty::Prim(Kind::Duration)
                    }
                    (Kind::Timestamp, Kind::Duration) => Ty::Prim(Kind::Timestamp),
                    _ => return None,
                };
                (default, ty)
            }
            ("_*_" | "_/_" | "_%_", None, [a, b])
                if a.ty.numeric() && a.ty.kind() == b.ty.kind() =>
            {
                (default, a.ty.clone())
            }
            ("-_", None, [a]) if a.ty.numeric() => (default, a.ty.clone()),
            ("@in", None, [_, container]) => match container.ty.kind() {
                Kind::List => (size_of(container).add(arg_sum), Ty::Prim(Kind::Bool)),
                Kind::Map => (default, Ty::Prim(Kind::Bool)),
                _ => return None,
            },
            ("_[_]", None, [container, index]) => {
                let (sub, ty) = match (container.ty.kind(), index.ty.kind()) {
                    (Kind::List, Kind::Int) => ("@items", container.ty.element()?),
                    (Kind::Map, Kind::String) => ("@values", container.ty.element()?),
                    _ => return None,
                };
                result_size = self.entry(&call.args[0]).map(|en| en.value);
                let mut path = self.path(&call.args[0]);
                path.push(sub.to_owned());
                self.paths.insert(e.id, path);
                (default, ty)
            }
            ("size", None, [a]) | ("size", Some(a), []) => match a.ty.kind() {
                Kind::String | Kind::Bytes | Kind::List | Kind::Map | Kind::Dyn => {
                    (default, Ty::Prim(Kind::Int))
                }
                _ => return None,
            },
            ("matches", Some(t), [re])
                if t.ty.kind() == Kind::String && re.ty.kind() == Kind::String =>
            {
                let text = size_of(t).add(Est::fixed(1)).factor(STRING_TRAVERSAL);
                let regex = size_of(re).factor(REGEX_LENGTH);
                (text.multiply(regex).add(arg_sum), Ty::Prim(Kind::Bool))
            }
            ("matches", None, [s, re])
                if s.ty.kind() == Kind::String && re.ty.kind() == Kind::String =>
            {
                (default, Ty::Prim(Kind::Bool))
            }
            ("startsWith" | "endsWith", Some(t), [a])
                if t.ty.kind() == Kind::String && a.ty.kind() == Kind::String =>
            {
                (traversal(a).add(arg_sum), Ty::Prim(Kind::Bool))
            }
            ("contains", Some(t), [a])
                if t.ty.kind() == Kind::String && a.ty.kind() == Kind::String =>
            {
                (
                    traversal(t).multiply(traversal(a)).add(arg_sum),
                    Ty::Prim(Kind::Bool),
                )
            }
            // kube's library estimates (`library.CostEstimator.EstimateCallCost`).
            ("lowerAscii" | "upperAscii" | "trim", Some(t), []) if t.ty.kind() == Kind::String => {
                let size = size_of(t);
                result_size = Some(size);
                (traversal(t).add(arg_sum), Ty::Prim(Kind::String))
            }
            ("substring", Some(t), [a] | [a, _])
                if t.ty.kind() == Kind::String
                    && a.ty.kind() == Kind::Int
                    && args.iter().all(|x| x.ty.kind() == Kind::Int) =>
            {
                let size = size_of(t);
                result_size = Some(size);
                (traversal(t).add(arg_sum), Ty::Prim(Kind::String))
            }
            ("charAt", Some(t), [a]) if t.ty.kind() == Kind::String && a.ty.kind() == Kind::Int => {
                (default, Ty::Prim(Kind::String))
            }
            ("split", Some(t), [sep] | [sep, _])
                if t.ty.kind() == Kind::String
                    && sep.ty.kind() == Kind::String
                    && args.get(1).is_none_or(|n| n.ty.kind() == Kind::Int) =>
            {
                let size = size_of(t);
                let mut max = size.max;
                if let Some(limit) = call.args.get(1) {
                    // Go's `uint64(i)`: a negative limit wraps.
                    if let Expr::Literal(LiteralValue::Int(n)) = &limit.expr {
                        max = **n as u64;
                    }
                }
                result_size = Some(Est { min: 0, max });
                (
                    size.factor(2.0 * STRING_TRAVERSAL).add(arg_sum),
                    Ty::List(Box::new(Ty::Prim(Kind::String))),
                )
            }
            ("join", Some(t), [] | [_])
                if t.ty.kind() == Kind::List
                    && t.ty.element().is_some_and(|e| e.kind() == Kind::String)
                    && args.iter().all(|a| a.ty.kind() == Kind::String) =>
            {
                let list = size_of(t);
                let mut size = list.multiply(self.element_size(t));
                if let Some(sep) = args.first() {
                    let separators = Est {
                        min: list.min.saturating_sub(1),
                        max: list.max.saturating_sub(1),
                    };
                    size = size.add(size_of(sep).multiply(separators));
                }
                result_size = Some(size);
                (
                    size.factor(STRING_TRAVERSAL).add(arg_sum),
                    Ty::Prim(Kind::String),
                )
            }
            ("isSorted" | "sum" | "min" | "max" | "indexOf" | "lastIndexOf", Some(t), _) => {
                let ty = match (f, t.ty.kind(), args.as_slice()) {
                    ("indexOf" | "lastIndexOf", Kind::String, [a] | [a, _])
                        if a.ty.kind() == Kind::String
                            && args.get(1).is_none_or(|n| n.ty.kind() == Kind::Int) =>
                    {
                        Ty::Prim(Kind::Int)
                    }
                    ("indexOf" | "lastIndexOf", Kind::List, [_]) => Ty::Prim(Kind::Int),
                    ("isSorted", Kind::List, []) => Ty::Prim(Kind::Bool),
                    ("sum" | "min" | "max", Kind::List, []) => {
                        let element = t.ty.element()?;
                        if !element.scalar()
                            && !matches!(element.kind(), Kind::String | Kind::Bytes)
                        {
                            return None;
                        }
                        element
                    }
                    _ => return None,
                };
                let cost = if t.ty.kind() == Kind::List {
                    let element = t.ty.element()?;
                    let mut per = Est::fixed(1);
                    if matches!(element.kind(), Kind::String | Kind::Bytes) {
                        let size = self.element_size(t);
                        per = per.add(size.factor(STRING_TRAVERSAL));
                    }
                    size_of(t).multiply(per)
                } else {
                    traversal(t)
                };
                (cost.add(arg_sum), ty)
            }
            ("int" | "uint" | "double" | "bool" | "duration" | "timestamp", None, [a])
                if !dyn_arg =>
            {
                let kind = match f {
                    "int" => Kind::Int,
                    "uint" => Kind::Uint,
                    "double" => Kind::Double,
                    "bool" => Kind::Bool,
                    "duration" => Kind::Duration,
                    _ => Kind::Timestamp,
                };
                let _ = a;
                (default, Ty::Prim(kind))
            }
            // `string()` of a string, a number, a timestamp, an IP or a CIDR: cel-go's 1, and
            // no size for the result, so a concatenation with it is estimated without bound (as
            // kube: its `validation_test.go` refuses the messageExpression `string(self[0]) +
            // string(self[1])`).
            ("string", None, [a])
                if a.ty.scalar()
                    || matches!(
                        a.ty.kind(),
                        Kind::String | Kind::Lib(Lib::Ip) | Kind::Lib(Lib::Cidr)
                    ) =>
            {
                (default, Ty::Prim(Kind::String))
            }
            // cel-go's `BytesToString` and `StringToBytes` (Go's wrapping `uint64` products).
            ("string", None, [a]) if a.ty.kind() == Kind::Bytes => {
                let size = size_of(a);
                result_size = Some(Est {
                    min: size.min / 4,
                    max: size.max,
                });
                (traversal(a).add(arg_sum), Ty::Prim(Kind::String))
            }
            ("bytes", None, [a]) if a.ty.kind() == Kind::String => {
                let size = size_of(a);
                result_size = Some(Est {
                    min: size.min,
                    max: size.max.wrapping_mul(4),
                });
                (traversal(a).add(arg_sum), Ty::Prim(Kind::Bytes))
            }
            ("bytes", None, [a]) if a.ty.kind() == Kind::Bytes => (default, Ty::Prim(Kind::Bytes)),
            (
                "getFullYear" | "getMonth" | "getDayOfYear" | "getDayOfMonth" | "getDate"
                | "getDayOfWeek" | "getHours" | "getMinutes" | "getSeconds" | "getMilliseconds",
                Some(t),
                _,
            ) if matches!(t.ty.kind(), Kind::Timestamp | Kind::Duration)
                && args.iter().all(|a| a.ty.kind() == Kind::String) =>
            {
                (default, Ty::Prim(Kind::Int))
            }
            _ => {
                let (cost, ty, size) = self.library(f, target.as_ref(), &args, call)?;
                result_size = size;
                (cost.add(arg_sum), ty)
            }
        };
        let result_size = match result_size {
            Some(size) => Some(size),
            None => {
                // computeSize of the call itself (its path, if indexing; else its type).
                let path = self.paths.get(&e.id).cloned().unwrap_or_default();
                self.estimate_size(&path, Some(&ty))
                    .or_else(|| ty.scalar().then_some(Est::fixed(1)))
            }
        };
        if let Some(size) = result_size {
            self.sizes.insert(e.id, size);
        }
        Some((sum.add(cost), ty))
    }

    /// The estimate of a call of kube's libraries, cel-go's extensions (strings, sets) and
    /// optionals, as cel-go's `functionCost` gets it: the extension's own estimator
    /// (`OverloadCostEstimate`: sets), else kube's `library.CostEstimator.EstimateCallCost`,
    /// else cel-go's own (`format`, `strings.quote`), else 1. The call's own cost (without its
    /// arguments'), its type, and its result's size when the estimator gives one. `None` for a
    /// call whose overload the operands' types do not decide.
    fn library(
        &mut self,
        f: &str,
        target: Option<&Node<'a>>,
        args: &[Node<'a>],
        call: &cel::common::ast::CallExpr,
    ) -> Option<(Est, Ty<'a>, Option<Est>)> {
        use Kind::{Bool, Int, String as Str};
        let size_of = |n: &Node<'_>| n.size.unwrap_or(Est::UNKNOWN);
        let traversal = |n: &Node<'_>| size_of(n).factor(STRING_TRAVERSAL);
        let one = Est::fixed(1);
        let kind = |n: &Node<'_>| n.ty.kind();
        let lib = |n: &Node<'_>| n.ty.lib();
        let prim = Ty::Prim;
        let libt = |l: Lib| Ty::Prim(Kind::Lib(l));
        Some(match (f, target, args) {
            // kube's quantity and semver libraries: parsing traverses the string.
            ("quantity", None, [s]) if kind(s) == Str => (traversal(s), libt(Lib::Quantity), None),
            ("semver", None, [s] | [s, _])
                if kind(s) == Str && args.get(1).is_none_or(|b| kind(b) == Bool) =>
            {
                (traversal(s), libt(Lib::Semver), None)
            }
            ("isQuantity", None, [s]) if kind(s) == Str => (traversal(s), prim(Bool), None),
            ("isSemver", None, [s] | [s, _])
                if kind(s) == Str && args.get(1).is_none_or(|b| kind(b) == Bool) =>
            {
                (traversal(s), prim(Bool), None)
            }
            ("sign" | "asInteger", Some(t), []) if lib(t) == Some(Lib::Quantity) => {
                (one, prim(Int), None)
            }
            ("isInteger", Some(t), []) if lib(t) == Some(Lib::Quantity) => (one, prim(Bool), None),
            ("asApproximateFloat", Some(t), []) if lib(t) == Some(Lib::Quantity) => {
                (one, prim(Kind::Double), None)
            }
            ("add" | "sub", Some(t), [a])
                if lib(t) == Some(Lib::Quantity)
                    && (lib(a) == Some(Lib::Quantity) || kind(a) == Int) =>
            {
                (one, libt(Lib::Quantity), None)
            }
            ("isGreaterThan" | "isLessThan" | "compareTo", Some(t), [a])
                if matches!(lib(t), Some(Lib::Quantity | Lib::Semver)) && lib(t) == lib(a) =>
            {
                let ty = if f == "compareTo" { Int } else { Bool };
                (one, prim(ty), None)
            }
            ("major" | "minor" | "patch", Some(t), []) if lib(t) == Some(Lib::Semver) => {
                (one, prim(Int), None)
            }
            // kube's IP and CIDR libraries.
            ("ip", None, [s]) if kind(s) == Str => (traversal(s), libt(Lib::Ip), None),
            ("ip", Some(t), []) if lib(t) == Some(Lib::Cidr) => (one, libt(Lib::Ip), None),
            ("cidr", None, [s]) if kind(s) == Str => (traversal(s), libt(Lib::Cidr), None),
            ("isIP" | "isCIDR", None, [s]) if kind(s) == Str => (traversal(s), prim(Bool), None),
            ("ip.isCanonical", None, [s]) if kind(s) == Str => {
                (size_of(s).factor(2.0 * STRING_TRAVERSAL), prim(Bool), None)
            }
            ("family", Some(t), []) if lib(t) == Some(Lib::Ip) => (one, prim(Int), None),
            (
                "isUnspecified"
                | "isLoopback"
                | "isLinkLocalMulticast"
                | "isLinkLocalUnicast"
                | "isGlobalUnicast",
                Some(t),
                [],
            ) if lib(t) == Some(Lib::Ip) => (one, prim(Bool), None),
            ("masked", Some(t), []) if lib(t) == Some(Lib::Cidr) => (one, libt(Lib::Cidr), None),
            ("prefixLength", Some(t), []) if lib(t) == Some(Lib::Cidr) => (one, prim(Int), None),
            ("containsIP" | "containsCIDR", Some(t), [a]) if lib(t) == Some(Lib::Cidr) => {
                let other = if f == "containsIP" {
                    Lib::Ip
                } else {
                    Lib::Cidr
                };
                // Two addresses of 4 to 16 bytes compared.
                let bytes = Est { min: 4, max: 16 };
                let mut cost = bytes.add(bytes).factor(STRING_TRAVERSAL);
                if other == Lib::Cidr {
                    cost = cost.add(bytes.factor(STRING_TRAVERSAL)).add(one);
                }
                if kind(a) == Str {
                    cost = cost.add(traversal(a));
                } else if lib(a) != Some(other) {
                    return None;
                }
                (cost, prim(Bool), None)
            }
            // kube's URL library: the URL is as long as its text.
            ("url", None, [s]) if kind(s) == Str => {
                (traversal(s), libt(Lib::Url), Some(size_of(s)))
            }
            ("isURL", None, [s]) if kind(s) == Str => (one, prim(Bool), None),
            (
                "getScheme" | "getHost" | "getHostname" | "getPort" | "getEscapedPath",
                Some(t),
                [],
            ) if lib(t) == Some(Lib::Url) => (one, prim(Str), None),
            ("getQuery", Some(t), []) if lib(t) == Some(Lib::Url) => (
                one,
                Ty::Map(Box::new(prim(Str)), Box::new(Ty::List(Box::new(prim(Str))))),
                None,
            ),
            // kube's format library: a format's regex is taken as `MaxNameFormatRegexSize`
            // long.
            ("format.named", None, [s]) if kind(s) == Str => {
                (one, Ty::Optional(Box::new(libt(Lib::Format))), None)
            }
            (name, None, []) if name.starts_with("format.") => (one, libt(Lib::Format), None),
            ("validate", Some(t), [s]) if lib(t) == Some(Lib::Format) && kind(s) == Str => (
                traversal(s).factor(MAX_NAME_FORMAT_REGEX_SIZE * REGEX_LENGTH),
                Ty::Optional(Box::new(Ty::List(Box::new(prim(Str))))),
                None,
            ),
            // cel-go's sets extension (its own estimator: the product of the lists' sizes).
            ("sets.contains" | "sets.intersects" | "sets.equivalent", None, [a, b])
                if kind(a) == Kind::List && kind(b) == Kind::List =>
            {
                let factor = if f == "sets.equivalent" { 2.0 } else { 1.0 };
                let product = size_of(a).multiply(size_of(b)).factor(factor);
                (product.add(one), prim(Bool), None)
            }
            // cel-go's strings extension and kube's regex library.
            ("replace", Some(t), [from, to] | [from, to, _])
                if kind(t) == Str
                    && kind(from) == Str
                    && kind(to) == Str
                    && args.get(2).is_none_or(|n| kind(n) == Int) =>
            {
                let size = replaced_size(size_of(t), size_of(from), size_of(to))?;
                (
                    size_of(t).factor(2.0 * STRING_TRAVERSAL),
                    prim(Str),
                    Some(size),
                )
            }
            ("find" | "findAll", Some(t), [re] | [re, _])
                if kind(t) == Str
                    && kind(re) == Str
                    && (f == "findAll" || args.len() == 1)
                    && args.get(1).is_none_or(|n| kind(n) == Int) =>
            {
                let size = size_of(t);
                let text = size.add(one).factor(STRING_TRAVERSAL);
                let regex = size_of(re).factor(REGEX_LENGTH);
                let ty = if f == "find" {
                    prim(Str)
                } else {
                    Ty::List(Box::new(prim(Str)))
                };
                (
                    text.multiply(regex),
                    ty,
                    Some(Est {
                        min: 0,
                        max: size.max,
                    }),
                )
            }
            ("format", Some(t), [list]) if kind(t) == Str && kind(list) == Kind::List => {
                (traversal(t), prim(Str), None)
            }
            ("strings.quote", None, [s]) if kind(s) == Str => {
                let size = size_of(s);
                // Go's wrapping `uint64` arithmetic.
                let quoted = Est {
                    min: size.min.wrapping_add(2),
                    max: size.max.wrapping_mul(2).wrapping_add(2),
                };
                (traversal(s), prim(Str), Some(quoted))
            }
            // cel-go's `cel.@mapInsert` of `transformMap` and `transformMapEntry`: 1.
            (super::comprehensions::MAP_INSERT, None, [map, key, value])
                if kind(map) == Kind::Map =>
            {
                let ty = Ty::Map(Box::new(key.ty.clone()), Box::new(value.ty.clone()));
                (one, ty, None)
            }
            (super::comprehensions::MAP_INSERT, None, [map, other])
                if kind(map) == Kind::Map && kind(other) == Kind::Map =>
            {
                (one, other.ty.clone(), None)
            }
            // cel-go's optional types library: 1 each.
            ("optional.of" | "optional.ofNonZeroValue", None, [a]) => {
                (one, Ty::Optional(Box::new(a.ty.clone())), None)
            }
            ("optional.none", None, []) => (one, Ty::Optional(Box::new(prim(Kind::Dyn))), None),
            ("hasValue", Some(t), []) if kind(t) == Kind::Optional => (one, prim(Bool), None),
            ("value", Some(t), []) => match &t.ty {
                Ty::Optional(value) => (one, (**value).clone(), None),
                _ => return None,
            },
            ("orValue", Some(t), [_]) => match &t.ty {
                Ty::Optional(value) => (one, (**value).clone(), None),
                _ => return None,
            },
            ("or", Some(t), [a]) if kind(t) == Kind::Optional && kind(a) == Kind::Optional => {
                (one, t.ty.clone(), None)
            }
            ("_?._", None, [operand, field]) => {
                let Some(Expr::Literal(LiteralValue::String(name))) =
                    call.args.get(1).map(|f| &f.expr)
                else {
                    return None;
                };
                let _ = field;
                let value = match &operand.ty {
                    Ty::Decl(d) if d.kind() == Kind::Struct => Ty::Decl(d.field(name)?),
                    t if t.kind() == Kind::Map => t.element()?,
                    _ => return None,
                };
                (one, Ty::Optional(Box::new(value)), None)
            }
            ("_[?_]", None, [container, index]) => {
                let value = match (container.ty.kind(), index.ty.kind()) {
                    (Kind::List, Int) | (Kind::Map, Str) => container.ty.element()?,
                    _ => return None,
                };
                (one, Ty::Optional(Box::new(value)), None)
            }
            _ => return None,
        })
    }

    /// The size kube's estimator gives a list's element (its `listElementNode`): by the
    /// list's path when it has one, else unknown.
    fn element_size(&self, list: &Node<'a>) -> Est {
        let mut path = list.path.clone();
        if !path.is_empty() {
            path.push("@items".to_owned());
        }
        self.estimate_size(&path, list.ty.element().as_ref())
            .unwrap_or(Est::UNKNOWN)
    }
}

/// cel-go's cost of comparing two values of these sizes (equality, string ordering): a tenth
/// per element of the shorter.
fn equality(a: Est, b: Est) -> Est {
    let smallest = a.max.min(b.max);
    Est {
        min: u64::from(smallest > 0),
        max: smallest,
    }
    .factor(STRING_TRAVERSAL)
}

/// The type of a list's elements or a map's keys or values given one more of them.
fn join_types<'a>(so_far: Option<Ty<'a>>, next: Ty<'a>) -> Ty<'a> {
    match so_far {
        None => next,
        Some(t) if t.kind() == next.kind() && t.kind() != Kind::List && t.kind() != Kind::Map => t,
        Some(_) => Ty::Prim(Kind::Dyn),
    }
}

/// kube's estimate of the size of `text.replace(from, to)` (`library.CostEstimator`), or
/// `None` where it converts a float beyond `uint64` (Go's result is then the machine's).
fn replaced_size(text: Est, from: Est, to: Est) -> Option<Est> {
    let (mut count, mut kept) = (Est::fixed(0), Est::fixed(0));
    // The longest result.
    if from.min == 0 {
        count.max = if text.max < u64::MAX {
            text.max + 1
        } else {
            text.max
        };
        kept.max = text.max;
    } else if to.max <= from.min {
        kept.max = text.max;
    } else {
        count.max = ceil_div(text.max, from.min)?;
    }
    // The shortest.
    if from.max == 0 {
        count.min = if text.min < u64::MAX {
            text.min + 1
        } else {
            text.min
        };
        kept.min = text.min;
    } else if from.max <= to.min {
        kept.min = text.min;
    } else {
        count.min = ceil_div(text.min, from.max)?;
    }
    Some(count.multiply(to).add(kept))
}

/// Go's `uint64(math.Ceil(float64(a) / float64(b)))`, where it is defined.
fn ceil_div(a: u64, b: u64) -> Option<u64> {
    let q = (a as f64 / b as f64).ceil();
    (q < 18_446_744_073_709_551_616.0).then_some(q as u64)
}

/// The comprehension over a two-variable comprehension's keys when `bind` holds its range
/// (our expansion: `super::comprehensions`), and whether it builds a map (`transformMap`,
/// `transformMapEntry`: a list of entries made a map at the end).
fn two_variables(
    bind: &cel::common::ast::ComprehensionExpr,
) -> Option<(&cel::common::ast::ComprehensionExpr, bool)> {
    let held = bind.accu_var.strip_prefix(super::comprehensions::RANGE)?;
    if held.is_empty() || !held.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (comprehension, map) = match &bind.result.expr {
        Expr::Call(to_map)
            if to_map.func_name == super::comprehensions::TO_MAP && to_map.target.is_none() =>
        {
            match to_map.args.as_slice() {
                [c] => (c, true),
                _ => return None,
            }
        }
        _ => (&bind.result, false),
    };
    let Expr::Comprehension(c) = &comprehension.expr else {
        return None;
    };
    let Expr::Call(keys) = &c.iter_range.expr else {
        return None;
    };
    let reads_range = matches!(keys.args.as_slice(), [a] if matches!(&a.expr, Expr::Ident(n) if n == &bind.accu_var));
    (keys.func_name == super::comprehensions::KEYS && keys.target.is_none() && reads_range)
        .then_some((&**c, map))
}

/// cel-go's `computeExprSize` of a literal: a string's code points, bytes' length, 1 for the
/// rest; a list or map literal's entries.
fn literal_size(e: &IdedExpr) -> Option<Est> {
    let n = match &e.expr {
        Expr::Literal(LiteralValue::String(s)) => s.chars().count() as u64,
        Expr::Literal(LiteralValue::Bytes(b)) => b.len() as u64,
        Expr::Literal(_) => 1,
        Expr::List(l) => l.elements.len() as u64,
        Expr::Map(m) => m.entries.len() as u64,
        _ => return None,
    };
    Some(Est::fixed(n))
}

#[cfg(test)]
#[path = "cost_tests.rs"]
mod tests;
