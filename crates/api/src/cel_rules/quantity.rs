//! kube's CEL quantity library (`k8s.io/apiserver/pkg/cel/library/quantity.go`, in the base
//! environment since 1.28): the `kubernetes.Quantity` type over [`crate::quantity::Quantity`].
//!
//! ## Guarantees
//! - `quantity(s)` parses `s` as kube's `resource.ParseQuantity` does, else fails with kube's
//!   error (`quantities must match the regular expression ...`); `isQuantity(s)` says whether
//!   it would parse.
//! - `<Quantity>.sign()` (`-1`, `0`, `1`), `.isInteger()` (a whole number that fits an `int`,
//!   as Go's `AsInt64` tells), `.asInteger()` (that number, else `cannot convert value to
//!   integer`), `.asApproximateFloat()`, `.compareTo(q)` (`-1`, `0`, `1`), `.isGreaterThan(q)`,
//!   `.isLessThan(q)`, `.add(q)` and `.sub(q)` with a quantity or an `int`.
//! - Two quantities are `==` when they are the same amount (`quantity('1') ==
//!   quantity('1000m')`, kube's `Quantity.Equal`); no other operator takes a quantity.
//! - Every method costs a constant in the expression's bound (a quantity is a few words);
//!   `quantity()` and `isQuantity()` a tenth per byte of their string, as any string function.
//!
//! ## Differs from kube
//! - Amounts are kept in billionths over 128 bits (this crate's [`Quantity`]); kube keeps
//!   arbitrary-precision decimals, so a sum past ~10^29 saturates here where kube's grows, and
//!   precision past a billionth is rounded up at parse time (kube rounds it when it writes).

use std::cmp::Ordering;

use cel::common::types::{CelBool, CelDouble, CelInt, INT_TYPE, STRING_TYPE, Type};
use cel::common::value::{CowVal, Val};
use cel::{DeclarationError, Env, ExecutionError};

use super::library::{one, opaque_val, string, two};
use crate::quantity::{NANOS, Quantity};

const QUANTITY: Type = Type::new_unspecified_type("kubernetes.Quantity");
static QUANTITY_TYPE: Type = QUANTITY;

/// The methods of a quantity, for the cost bound: each costs a constant (`quantity()` and
/// `isQuantity()`, which read a string, cost a tenth per byte as any string function).
pub(crate) const FUNCTIONS: [&str; 9] = [
    "sign",
    "isInteger",
    "asInteger",
    "asApproximateFloat",
    "compareTo",
    "isGreaterThan",
    "isLessThan",
    "add",
    "sub",
];

/// kube's error for a text that is not a quantity (`resource.ErrFormatWrong`).
const FORMAT_WRONG: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

#[derive(Clone, Copy, Debug)]
struct QuantityVal(Quantity);

// Equal by amount, as kube's `Quantity.Equal` (`Cmp == 0`).
opaque_val!(QuantityVal, &QUANTITY_TYPE, equal: |a: &QuantityVal, b: &QuantityVal| a.0 == b.0);

/// Registers the library on `env`.
pub(super) fn extension(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_overload("quantity", "string_to_quantity", vec![STRING_TYPE], parse)?;
    env.add_overload(
        "isQuantity",
        "is_quantity_string",
        vec![STRING_TYPE],
        is_quantity,
    )?;
    for (name, id, function) in [
        (
            "sign",
            "quantity_sign",
            sign as cel::common::functions::Function,
        ),
        ("isInteger", "quantity_is_integer", is_integer),
        ("asInteger", "quantity_get_integer", as_integer),
        (
            "asApproximateFloat",
            "quantity_get_float",
            as_approximate_float,
        ),
    ] {
        env.add_member_overload(name, id, QUANTITY, vec![], function)?;
    }
    for (name, id, function) in [
        (
            "compareTo",
            "quantity_compare_to",
            compare_to as cel::common::functions::Function,
        ),
        ("isGreaterThan", "quantity_is_greater_than", is_greater_than),
        ("isLessThan", "quantity_is_less_than", is_less_than),
        ("add", "quantity_add", add),
        ("sub", "quantity_sub", sub),
    ] {
        env.add_member_overload(name, id, QUANTITY, vec![QUANTITY], function)?;
    }
    env.add_member_overload("add", "quantity_add_int", QUANTITY, vec![INT_TYPE], add)?;
    env.add_member_overload("sub", "quantity_sub_int", QUANTITY, vec![INT_TYPE], sub)?;
    Ok(())
}

fn quantity_of(val: &dyn Val, function: &str) -> Result<Quantity, ExecutionError> {
    val.downcast_ref::<QuantityVal>()
        .map(|q| q.0)
        .ok_or_else(|| ExecutionError::function_error(function, "no such overload"))
}

/// A quantity, or an `int` as a quantity of that many units (the `add` and `sub` overloads).
fn operand(val: &dyn Val, function: &str) -> Result<Quantity, ExecutionError> {
    match val.downcast_ref::<CelInt>() {
        Some(n) => Ok(Quantity::count(*n.inner())),
        None => quantity_of(val, function),
    }
}

fn parse<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let text = one(args)?;
    let text = string(text.as_ref(), "quantity")?;
    Quantity::parse(text)
        .map(|q| CowVal::owned(QuantityVal(q)))
        .ok_or_else(|| ExecutionError::function_error("quantity", FORMAT_WRONG))
}

fn is_quantity<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let text = one(args)?;
    let text = string(text.as_ref(), "isQuantity")?;
    Ok(CowVal::owned(CelBool::from(
        Quantity::parse(text).is_some(),
    )))
}

/// The whole number a quantity is, when it is one that fits an `int` (Go's `AsInt64`).
fn whole(q: Quantity) -> Option<i64> {
    let nanos = q.nanos();
    (nanos % NANOS == 0)
        .then(|| i64::try_from(nanos / NANOS).ok())
        .flatten()
}

fn ordering(ordering: Ordering) -> i64 {
    match ordering {
        Ordering::Less => -1,
        Ordering::Equal => 0,
        Ordering::Greater => 1,
    }
}

fn sign<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let q = quantity_of(one(args)?.as_ref(), "sign")?;
    Ok(CowVal::owned(CelInt::from(ordering(q.nanos().cmp(&0)))))
}

fn is_integer<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let q = quantity_of(one(args)?.as_ref(), "isInteger")?;
    Ok(CowVal::owned(CelBool::from(whole(q).is_some())))
}

fn as_integer<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let q = quantity_of(one(args)?.as_ref(), "asInteger")?;
    whole(q)
        .map(|n| CowVal::owned(CelInt::from(n)))
        .ok_or_else(|| {
            ExecutionError::function_error("asInteger", "cannot convert value to integer")
        })
}

fn as_approximate_float<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let q = quantity_of(one(args)?.as_ref(), "asApproximateFloat")?;
    #[allow(clippy::cast_precision_loss)]
    let value = q.nanos() as f64 / NANOS as f64;
    Ok(CowVal::owned(CelDouble::from(value)))
}

/// The receiver and the argument of a comparison.
fn pair(args: Vec<CowVal<'_, '_>>, function: &str) -> Result<(Quantity, Quantity), ExecutionError> {
    let [a, b] = two(args)?;
    Ok((
        quantity_of(a.as_ref(), function)?,
        quantity_of(b.as_ref(), function)?,
    ))
}

fn compare_to<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (a, b) = pair(args, "compareTo")?;
    Ok(CowVal::owned(CelInt::from(ordering(a.cmp(&b)))))
}

fn is_greater_than<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (a, b) = pair(args, "isGreaterThan")?;
    Ok(CowVal::owned(CelBool::from(a > b)))
}

fn is_less_than<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (a, b) = pair(args, "isLessThan")?;
    Ok(CowVal::owned(CelBool::from(a < b)))
}

fn add<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [a, b] = two(args)?;
    let (a, b) = (quantity_of(a.as_ref(), "add")?, operand(b.as_ref(), "add")?);
    Ok(CowVal::owned(QuantityVal(a.plus(b))))
}

fn sub<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [a, b] = two(args)?;
    let (a, b) = (quantity_of(a.as_ref(), "sub")?, operand(b.as_ref(), "sub")?);
    Ok(CowVal::owned(QuantityVal(a.plus(b.negated()))))
}
