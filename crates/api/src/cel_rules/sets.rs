//! cel-go's sets extension (`ext.Sets()`, in kube's base environment since 1.29):
//! `sets.contains`, `sets.equivalent` and `sets.intersects` over two lists.
//!
//! ## Guarantees
//! - `sets.contains(a, b)`: every element of `b` is equal to one of `a` (true for an empty
//!   `b`); `sets.equivalent(a, b)`: each contains the other; `sets.intersects(a, b)`: some
//!   element of `a` is equal to one of `b` (false when either is empty). Equality is CEL's
//!   (`1 == 1.0`, lists and maps by their elements), as cel-go's `Equal`.
//! - Each call costs the product of the two lists' lengths in the expression's bound (cel-go
//!   charges the same product), so the comparisons one call makes are bounded by the per-call
//!   limit.

use cel::common::types::{CelBool, LIST_TYPE};
use cel::common::value::{CowVal, Val};
use cel::{DeclarationError, Env, ExecutionError};

use super::library::{items, two};

/// The functions of the library (called on the `sets` namespace), for the cost bound.
pub(crate) const FUNCTIONS: [&str; 3] = ["contains", "equivalent", "intersects"];

/// Registers the library on `env`.
pub(super) fn extension(env: &mut Env) -> Result<(), DeclarationError> {
    let lists = || vec![LIST_TYPE, LIST_TYPE];
    env.add_overload(
        "sets.contains",
        "list_sets_contains_list",
        lists(),
        contains,
    )?;
    env.add_overload(
        "sets.equivalent",
        "list_sets_equivalent_list",
        lists(),
        equivalent,
    )?;
    env.add_overload(
        "sets.intersects",
        "list_sets_intersects_list",
        lists(),
        intersects,
    )?;
    Ok(())
}

/// Whether every element of `of` equals one of `within`.
fn all_within(of: &[&(dyn Val + '_)], within: &[&(dyn Val + '_)]) -> bool {
    of.iter()
        .all(|item| within.iter().any(|other| other.equals(*item)))
}

fn contains<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [a, b] = two(args)?;
    let (a, b) = (
        items(a.as_ref(), "sets.contains")?,
        items(b.as_ref(), "sets.contains")?,
    );
    Ok(CowVal::owned(CelBool::from(all_within(&b, &a))))
}

fn equivalent<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [a, b] = two(args)?;
    let (a, b) = (
        items(a.as_ref(), "sets.equivalent")?,
        items(b.as_ref(), "sets.equivalent")?,
    );
    Ok(CowVal::owned(CelBool::from(
        all_within(&a, &b) && all_within(&b, &a),
    )))
}

fn intersects<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [a, b] = two(args)?;
    let (a, b) = (
        items(a.as_ref(), "sets.intersects")?,
        items(b.as_ref(), "sets.intersects")?,
    );
    Ok(CowVal::owned(CelBool::from(
        a.iter()
            .any(|item| b.iter().any(|other| other.equals(*item))),
    )))
}
