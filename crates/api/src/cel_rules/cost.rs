//! The cost kube-apiserver estimates for a rule when its CRD is written: cel-go's static cost
//! estimate (`checker.Cost`) of the checked expression, with kube's sizes for the schema's
//! values (`SchemaDeclType`'s `MaxElements`: `maxLength` times 4, `maxItems`,
//! `maxProperties`, else what fits in a 3 MiB request) and kube's library estimates
//! (`library.CostEstimator`).
//!
//! **Guarantee: never above kube's estimate.** [`estimate`] gives a number only for an
//! expression it follows the way cel-go does, node by node (literals, `self`, field
//! selections, `has`, list and map literals, the macros `all`, `exists`, `exists_one`, `map`,
//! `filter`, `cel.bind`, the operators, `size`, the string tests (`matches`, `startsWith`,
//! `endsWith`, `contains`), `lowerAscii`, `upperAscii`, `trim`, `substring`, `charAt`,
//! `split`, `join`, `indexOf`, `lastIndexOf`, the lists library (`isSorted`, `sum`, `min`,
//! `max`), the type conversions and timestamp accessors), and only where the operands' types
//! decide a single overload the way cel-go's checker would. Anything else (an other function,
//! a `dyn` operand where the overload depends on the type, two-variable comprehensions,
//! optionals, `optionalOldSelf`) gives `None`: the rule is not estimated, counted as costing
//! nothing, never refused for its cost. Where kube versions differ in a size, the smaller is
//! taken: a resource's `metadata.name` is at most 253 characters (newer kube; 1.33 takes it
//! as unbounded), and a string with an `enum` is at most as long as its longest value.
//!
//! Recursive over the expression (at most [`super::DEPTH_MAX`] deep) and over the schema's
//! nesting; linear in the expression's size, the schema walked only along the paths it names.

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
    let mut coster = Coster {
        root,
        paths: HashMap::new(),
        sizes: HashMap::new(),
        entries: HashMap::new(),
        types: HashMap::new(),
        locals: Vec::new(),
    };
    coster.cost(expr).map(|c| c.max)
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
}

impl<'a> Ty<'a> {
    fn kind(&self) -> Kind {
        match self {
            Ty::Decl(d) => d.kind(),
            Ty::Prim(k) => *k,
            Ty::List(_) => Kind::List,
            Ty::Map(..) => Kind::Map,
        }
    }

    /// A list's element type, a map's value type.
    fn element(&self) -> Option<Ty<'a>> {
        match self {
            Ty::Decl(d) => d.element().map(Ty::Decl),
            Ty::List(e) | Ty::Map(_, e) => Some((**e).clone()),
            Ty::Prim(_) => None,
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

    fn scalar(&self) -> bool {
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

/// cel-go's `coster`, with the types its checker would have given.
struct Coster<'a> {
    root: Decl<'a>,
    paths: HashMap<u64, Vec<String>>,
    sizes: HashMap<u64, Est>,
    entries: HashMap<u64, Entry>,
    types: HashMap<u64, Ty<'a>>,
    locals: Vec<Local<'a>>,
}

/// What cel-go's cost functions see of an argument (its `AstNode`).
struct Node<'a> {
    path: Vec<String>,
    ty: Ty<'a>,
    size: Option<Est>,
}

impl<'a> Coster<'a> {
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
        let mut node = self.root;
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
        if let Some(size) = self.size_at(&self.path(e)) {
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
                            "self" | "oldSelf" => Ty::Decl(self.root),
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
                let bind = matches!(&c.iter_range.expr, Expr::List(l) if l.elements.is_empty())
                    && matches!(&c.loop_cond.expr, Expr::Literal(LiteralValue::Boolean(b)) if !**b)
                    && c.accu_var != "@result";
                if bind {
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
            Expr::Call(call) => self.call(e, call)?,
            Expr::Struct(_) | Expr::Unspecified => return None,
        };
        self.types.insert(e.id, ty);
        Some(cost)
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
        // The accumulator's type is the step's (a `map` or `filter` builds a list of its
        // elements' type).
        let step_ty = self.ty(&c.loop_step);
        if let (Some(step_ty), Some(accu)) = (step_ty, self.locals.last_mut()) {
            accu.ty = step_ty;
        }
        let result = self.cost(&c.result);
        self.locals.pop();
        sum = sum.add(result?);
        let range = self.size_or_unknown(&c.iter_range);
        sum = sum.add(range.multiply(step_cost.add(loop_cost)));
        match &c.accu_init.expr {
            Expr::Literal(_) => {
                if let Some(size) = self.size(&c.accu_init) {
                    self.sizes.insert(e.id, size);
                }
            }
            Expr::List(_) | Expr::Map(_) => {
                self.sizes.insert(e.id, range);
                if let Some(entry) = self.entry(&c.loop_step) {
                    self.entries.insert(e.id, entry);
                }
            }
            _ => {}
        }
        Some((sum, self.ty(&c.result)?))
    }

    /// cel-go's `costCall` and `functionCost`, with kube's library estimates, for the calls
    /// whose overload the operands' types decide.
    fn call(&mut self, e: &IdedExpr, call: &cel::common::ast::CallExpr) -> Option<(Est, Ty<'a>)> {
        let f = call.func_name.as_str();
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
        let target = match &call.target {
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
                    match &limit.expr {
                        Expr::Literal(LiteralValue::Int(n)) => max = u64::try_from(**n).ok()?,
                        Expr::Literal(_) => return None,
                        _ => {}
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
                        if !element.scalar() && element.kind() != Kind::String {
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
            // `string()` of a number: cel-go gives its result no size, so a concatenation with
            // it is estimated without bound — kube's documentation nonetheless shows
            // `'x exceeded max limit of ' + string(self.maxLimit)` as a messageExpression, so
            // whether kube's own estimator bounds it is not settled here: not estimated (never
            // a refusal kube might not make).
            ("string", None, [a]) if a.ty.kind() == Kind::String => {
                (default, Ty::Prim(Kind::String))
            }
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
            _ => return None,
        };
        let result_size = match result_size {
            Some(size) => Some(size),
            None => {
                // computeSize of the call itself (its path, if indexing; else its type).
                let path = self.paths.get(&e.id).cloned().unwrap_or_default();
                self.size_at(&path)
                    .or_else(|| ty.scalar().then_some(Est::fixed(1)))
            }
        };
        if let Some(size) = result_size {
            self.sizes.insert(e.id, size);
        }
        Some((sum.add(cost), ty))
    }

    /// The size kube's estimator gives a list's element (its `listElementNode`): by the
    /// list's path when it has one, else unknown.
    fn element_size(&self, list: &Node<'a>) -> Est {
        if list.path.is_empty() {
            return Est::UNKNOWN;
        }
        let mut path = list.path.clone();
        path.push("@items".to_owned());
        self.size_at(&path).unwrap_or(Est::UNKNOWN)
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
