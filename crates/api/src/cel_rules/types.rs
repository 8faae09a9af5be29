//! The type check a rule gets when its CRD is written, as far as it can be sure: the part of
//! cel-go's checker that decides what kube-apiserver refuses most often.
//!
//! `self` (and `oldSelf`) is typed by the rule's schema node as kube's `SchemaDeclType` types
//! it: `boolean`, `integer`, `number` and `string` are `bool`, `int`, `double` and `string`
//! (`date-time` and `date` strings `timestamp`, `duration` strings `duration`), objects and
//! arrays are the schema's own. From there the check follows field selections, indexes,
//! comprehensions' variables, literals, operators and the functions whose result type does
//! not depend on their arguments, and reports the first of:
//! - a field an object's schema does not declare (`undefined field 'replica'`; not under
//!   `x-kubernetes-preserve-unknown-fields`, nor `apiVersion`, `kind`, `metadata` of a
//!   resource);
//! - an operator applied to operands of known scalar types it has no overload for (`found no
//!   matching overload for '_+_' applied to '(int, string)'`: arithmetic across `int`, `uint`
//!   and `double`, `&&` on a string, ordering a `bool` against an `int`, `size` of an `int`);
//! - then, for the whole expression, a result of a known type other than the one asked (`cel
//!   expression must evaluate to a bool`, `messageExpression must evaluate to a string`).
//!
//! **Never stricter than kube.** Where the check is not sure of a type it is unknown, and an
//! unknown type passes everything: `x-kubernetes-int-or-string`, untyped and
//! `x-kubernetes-preserve-unknown-fields` values, `byte` strings (values here are strings,
//! kube's are bytes), `null`, map and list elements it cannot follow, function results that
//! depend on their arguments (`sum`, `min`, `optional`), libraries this server lacks.
//! Equality is checked only across kinds (a string against an int, not an int against a
//! double). So a rule kube compiles is never refused; some rules kube refuses for their types
//! are accepted here and fail when they run.

use cel::common::ast::{Expr, IdedExpr, LiteralValue};
use serde_json::{Map, Value};

use super::{children, escape};
use crate::schema_node::flag;

/// What the check knows of an expression's value.
#[derive(Clone, Copy)]
pub(super) enum Ty<'a> {
    /// A value of this schema node of `type: object` or `array` (a resource's root or an
    /// embedded resource when `true`).
    Schema(&'a Map<String, Value>, bool),
    /// A value of this CEL type.
    Known(Cel),
    Unknown,
}

/// The CEL types the check names.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Cel {
    Bool,
    Int,
    Uint,
    Double,
    String,
    Bytes,
    Null,
    Timestamp,
    Duration,
    List,
    Map,
}

use Cel::{Bool, Bytes, Double, Duration, Int, List, Null, Timestamp, Uint};

impl Cel {
    /// The name cel-go's `FormatCELType` gives the type; `None` for the aggregates, whose
    /// element types the check does not follow (no error names them).
    fn name(self) -> Option<&'static str> {
        Some(match self {
            Bool => "bool",
            Int => "int",
            Uint => "uint",
            Double => "double",
            Cel::String => "string",
            Bytes => "bytes",
            Timestamp => "timestamp",
            Duration => "duration",
            Null | List | Cel::Map => return None,
        })
    }

    fn numeric(self) -> bool {
        matches!(self, Int | Uint | Double)
    }
}

impl<'a> Ty<'a> {
    /// The type of a value of schema node `s` (a resource's root or embedded resource when
    /// `resource`).
    pub(super) fn of_schema(s: &'a Map<String, Value>, resource: bool) -> Ty<'a> {
        if flag(s, "x-kubernetes-int-or-string") {
            return Ty::Unknown;
        }
        match s.get("type").and_then(Value::as_str) {
            Some("object" | "array") => Ty::Schema(s, resource),
            Some("boolean") => Ty::Known(Bool),
            Some("integer") => Ty::Known(Int),
            Some("number") => Ty::Known(Double),
            Some("string") => match s.get("format").and_then(Value::as_str) {
                Some("date-time" | "date") => Ty::Known(Timestamp),
                Some("duration") => Ty::Known(Duration),
                Some("byte") => Ty::Unknown,
                _ => Ty::Known(Cel::String),
            },
            _ => Ty::Unknown,
        }
    }

    fn known(self) -> Option<Cel> {
        match self {
            Ty::Known(cel) => Some(cel),
            Ty::Schema(s, _) if s.get("type").and_then(Value::as_str) == Some("array") => {
                Some(List)
            }
            Ty::Schema(..) => Some(Cel::Map),
            Ty::Unknown => None,
        }
    }

    /// Whether a value of this type is certainly not of type `want`.
    pub(super) fn is_not(self, want: Cel) -> bool {
        self.known().is_some_and(|cel| cel != want)
    }
}

/// The type of an element of a value of schema `s`: a list's item; a map's value when
/// `indexed`, else its key (what a comprehension ranges over).
fn element(s: &Map<String, Value>, indexed: bool) -> Ty<'_> {
    match (s.get("items"), s.get("additionalProperties")) {
        (Some(Value::Object(items)), _) => {
            Ty::of_schema(items, flag(items, "x-kubernetes-embedded-resource"))
        }
        (_, Some(Value::Object(values))) if indexed => Ty::of_schema(values, false),
        (_, Some(Value::Object(_))) => Ty::Known(Cel::String),
        _ => Ty::Unknown,
    }
}

/// The type of `expr` under `own` (the type of `self`), or the first type error: the id of
/// the expression it is at and cel-go's message. Recursive: called only on trees of at most
/// [`super::DEPTH_MAX`].
pub(super) fn type_of<'a>(
    expr: &'a IdedExpr,
    own: Ty<'a>,
    scope: &mut Vec<(&'a str, Ty<'a>)>,
) -> Result<Ty<'a>, (u64, String)> {
    match &expr.expr {
        Expr::Ident(name) => Ok(match scope.iter().rev().find(|(n, _)| n == name) {
            Some((_, ty)) => *ty,
            None if name == "self" || name == "oldSelf" => own,
            None => Ty::Unknown,
        }),
        Expr::Literal(literal) => Ok(Ty::Known(match literal {
            LiteralValue::Boolean(_) => Bool,
            LiteralValue::Bytes(_) => Bytes,
            LiteralValue::Double(_) => Double,
            LiteralValue::Int(_) => Int,
            LiteralValue::Null => Null,
            LiteralValue::String(_) => Cel::String,
            LiteralValue::UInt(_) => Uint,
        })),
        Expr::List(list) => {
            for element in &list.elements {
                type_of(element, own, scope)?;
            }
            Ok(Ty::Known(List))
        }
        Expr::Map(_) => {
            for part in children(expr) {
                type_of(part, own, scope)?;
            }
            Ok(Ty::Known(Cel::Map))
        }
        Expr::Select(select) => {
            let operand = type_of(&select.operand, own, scope)?;
            let selected = field(operand, &select.field)
                .ok_or_else(|| (expr.id, format!("undefined field '{}'", select.field)))?;
            Ok(if select.test {
                Ty::Known(Bool)
            } else {
                selected
            })
        }
        Expr::Call(call) => {
            let target = match &call.target {
                Some(target) => Some(type_of(target, own, scope)?),
                None => None,
            };
            let mut args = Vec::with_capacity(call.args.len());
            for arg in &call.args {
                args.push(type_of(arg, own, scope)?);
            }
            overload(&call.func_name, target, &args).map_err(|signature| {
                (
                    expr.id,
                    format!(
                        "found no matching overload for '{}' applied to '{signature}'",
                        call.func_name
                    ),
                )
            })
        }
        Expr::Comprehension(c) => {
            let range = type_of(&c.iter_range, own, scope)?;
            let accumulator = type_of(&c.accu_init, own, scope)?;
            let outer = scope.len();
            let item = match range {
                Ty::Schema(s, _) => element(s, false),
                _ => Ty::Unknown,
            };
            match &c.iter_var2 {
                // Two variables: an index or key, then the element.
                Some(second) => {
                    let first = match range {
                        Ty::Schema(s, _) if s.contains_key("items") => Ty::Known(Int),
                        _ => Ty::Unknown,
                    };
                    let value = match range {
                        Ty::Schema(s, _) => element(s, true),
                        _ => Ty::Unknown,
                    };
                    scope.push((&c.iter_var, first));
                    scope.push((second, value));
                }
                None => scope.push((&c.iter_var, item)),
            }
            scope.push((&c.accu_var, accumulator));
            type_of(&c.loop_cond, own, scope)?;
            type_of(&c.loop_step, own, scope)?;
            scope.truncate(outer);
            scope.push((&c.accu_var, accumulator));
            let result = type_of(&c.result, own, scope)?;
            scope.truncate(outer);
            Ok(result)
        }
        Expr::Struct(_) | Expr::Unspecified => {
            for part in children(expr) {
                type_of(part, own, scope)?;
            }
            Ok(Ty::Unknown)
        }
    }
}

/// The type of field `name` of a value of type `operand`, `None` when its schema does not
/// declare it.
fn field<'a>(operand: Ty<'a>, name: &str) -> Option<Ty<'a>> {
    let Ty::Schema(s, resource) = operand else {
        return Some(Ty::Unknown);
    };
    if resource && matches!(name, "apiVersion" | "kind" | "metadata") {
        return Some(Ty::Unknown);
    }
    if let Some(properties) = s.get("properties").and_then(Value::as_object) {
        let found = properties
            .iter()
            .find(|(property, _)| escape(property).as_deref() == Some(name));
        return match found {
            Some((_, Value::Object(sub))) => Some(Ty::of_schema(
                sub,
                flag(sub, "x-kubernetes-embedded-resource"),
            )),
            Some(_) => Some(Ty::Unknown),
            None if flag(s, "x-kubernetes-preserve-unknown-fields") => Some(Ty::Unknown),
            None => None,
        };
    }
    Some(match s.get("additionalProperties") {
        Some(Value::Object(sub)) => Ty::of_schema(sub, false),
        _ => Ty::Unknown,
    })
}

/// The result type of a call of `function` on `target` with `args`, or the signature cel-go
/// prints when no overload takes them (only when every operand's type is a known scalar).
fn overload<'a>(function: &str, target: Option<Ty<'a>>, args: &[Ty<'a>]) -> Result<Ty<'a>, String> {
    let scalars: Option<Vec<Cel>> = target
        .iter()
        .chain(args)
        .map(|ty| match ty {
            Ty::Known(cel) if cel.name().is_some() => Some(*cel),
            _ => None,
        })
        .collect();
    let refuse = || -> Result<Ty<'a>, String> {
        match &scalars {
            Some(types) => {
                let names: Vec<&str> = types.iter().filter_map(|t| t.name()).collect();
                Err(match target {
                    Some(_) => format!("{}.({})", names[0], names[1..].join(", ")),
                    None => format!("({})", names.join(", ")),
                })
            }
            None => Ok(Ty::Unknown),
        }
    };
    let known = |ty: Ty<'a>| ty.known();
    let ok = |cel: Cel| Ok(Ty::Known(cel));
    if target.is_none() {
        match (function, args) {
            ("_&&_" | "_||_", _) | ("!_", _) => {
                if args.iter().any(|a| a.is_not(Bool)) {
                    return refuse();
                }
                return ok(Bool);
            }
            ("_==_" | "_!=_", [a, b]) => {
                return match (known(*a), known(*b)) {
                    (Some(x), Some(y))
                        if x != y && !(x.numeric() && y.numeric()) && x != Null && y != Null =>
                    {
                        refuse()
                    }
                    _ => ok(Bool),
                };
            }
            ("_<_" | "_<=_" | "_>_" | "_>=_", [a, b]) => {
                return match (known(*a), known(*b)) {
                    (Some(x), Some(y)) if x.numeric() && y.numeric() => ok(Bool),
                    (Some(x), Some(y))
                        if x == y
                            && matches!(x, Bool | Cel::String | Bytes | Timestamp | Duration) =>
                    {
                        ok(Bool)
                    }
                    (Some(_), Some(_)) => refuse(),
                    _ => ok(Bool),
                };
            }
            ("_+_", [a, b]) => {
                return match (known(*a), known(*b)) {
                    (Some(x), Some(y)) if x == y && x.numeric() => ok(x),
                    (Some(x), Some(y)) if x == y && matches!(x, Cel::String | Bytes | List) => {
                        ok(x)
                    }
                    (Some(Timestamp), Some(Duration)) | (Some(Duration), Some(Timestamp)) => {
                        ok(Timestamp)
                    }
                    (Some(Duration), Some(Duration)) => ok(Duration),
                    (Some(_), Some(_)) => refuse(),
                    _ => Ok(Ty::Unknown),
                };
            }
            ("_-_", [a, b]) => {
                return match (known(*a), known(*b)) {
                    (Some(x), Some(y)) if x == y && x.numeric() => ok(x),
                    (Some(Timestamp), Some(Timestamp)) | (Some(Duration), Some(Duration)) => {
                        ok(Duration)
                    }
                    (Some(Timestamp), Some(Duration)) => ok(Timestamp),
                    (Some(_), Some(_)) => refuse(),
                    _ => Ok(Ty::Unknown),
                };
            }
            ("_*_" | "_/_" | "_%_", [a, b]) => {
                return match (known(*a), known(*b)) {
                    (Some(x), Some(y)) if x == y && x.numeric() => {
                        if function == "_%_" && x == Double {
                            refuse()
                        } else {
                            ok(x)
                        }
                    }
                    (Some(_), Some(_)) => refuse(),
                    _ => Ok(Ty::Unknown),
                };
            }
            ("-_", [a]) => {
                return match known(*a) {
                    Some(x @ (Int | Double)) => ok(x),
                    Some(_) => refuse(),
                    None => Ok(Ty::Unknown),
                };
            }
            ("_?_:_", [condition, yes, no]) => {
                let kinds = (known(*yes), known(*no));
                let apart = matches!(kinds, (Some(x), Some(y))
                    if x != y && !(x.numeric() && y.numeric()) && x != Null && y != Null);
                if condition.is_not(Bool) || apart {
                    return refuse();
                }
                return Ok(match kinds {
                    (Some(x), Some(y)) if x == y && !matches!(yes, Ty::Schema(..)) => *yes,
                    _ => Ty::Unknown,
                });
            }
            ("_[_]", [Ty::Schema(s, _), _]) => return Ok(element(s, true)),
            ("@in" | "@not_strictly_false", _) => return ok(Bool),
            _ => {}
        }
    }
    // `size` as a function or a method.
    let operands: Vec<Ty<'a>> = target.iter().chain(args).copied().collect();
    if function == "size" && operands.len() == 1 {
        return match known(operands[0]) {
            Some(Cel::String | Bytes | List | Cel::Map) | None => ok(Int),
            Some(_) => refuse(),
        };
    }
    Ok(match function {
        "int" | "getFullYear" | "getMonth" | "getDayOfYear" | "getDayOfMonth" | "getDate"
        | "getDayOfWeek" | "getHours" | "getMinutes" | "getSeconds" | "getMilliseconds"
        | "indexOf" | "lastIndexOf" => Ty::Known(Int),
        "uint" => Ty::Known(Uint),
        "double" => Ty::Known(Double),
        "string" | "lowerAscii" | "upperAscii" | "trim" | "replace" | "substring" | "charAt"
        | "join" | "find" | "quote" | "format" => Ty::Known(Cel::String),
        "bytes" => Ty::Known(Bytes),
        "bool" | "matches" | "startsWith" | "endsWith" | "contains" | "isSorted" | "isIP"
        | "isCIDR" | "has" => Ty::Known(Bool),
        "timestamp" => Ty::Known(Timestamp),
        "duration" => Ty::Known(Duration),
        "split" | "findAll" => Ty::Known(List),
        _ => Ty::Unknown,
    })
}
