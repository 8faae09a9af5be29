//! The functions kube-apiserver adds to CEL's standard ones that rules use most, over the
//! `cel` crate's value traits: `matches` (Go's RE2 syntax, compiled once and kept, as the
//! schema's patterns: [`crate::structural`]), kube's regex library (`find`, `findAll`) and
//! lists library (`isSorted`, `sum`, `min`, `max`, `indexOf`, `lastIndexOf`), with kube's
//! results and errors (`min` of an empty list is an error, `sum` of one is `0`). (kube's IP
//! and CIDR libraries are [`super::net`].)

use std::cmp::Ordering;

use cel::common::traits::Iterable;
use cel::common::types::{
    CelBool, CelInt, CelList, CelString, DYN_TYPE, INT_TYPE, LIST_TYPE, STRING_TYPE,
};
use cel::common::value::{CowVal, Val};
use cel::{DeclarationError, Env, ExecutionError};

/// `Val` for a Rust type that is one of kube's library types to CEL (a `kubernetes.Quantity`,
/// a `net.IP`, an authorizer's check, ...): its CEL type — the same for every value
/// (`$cel`), or per value (`get: |v| ...`) —, downcasts, and `==` by `equal: |a, b| ...`
/// (kube's `Equal`), or never equal (kube's authorizer values have no `Equal`).
macro_rules! opaque_val {
    ($rust:ty, $cel:expr, equal: $equal:expr) => {
        opaque_val!(@impl $rust, $cel, |_: &$rust| $cel, $equal);
    };
    ($rust:ty, $cel:expr, get: $get:expr) => {
        opaque_val!(@impl $rust, $cel, $get, |_: &$rust, _: &$rust| false);
    };
    (@impl $rust:ty, $cel:expr, $get:expr, $equal:expr) => {
        impl cel::common::value::Val for $rust {
            fn get_type(&self) -> &cel::common::types::Type {
                $get(self)
            }
            fn cel_type() -> &'static cel::common::types::Type {
                $cel
            }
            fn equals(&self, other: &dyn cel::common::value::Val) -> bool {
                other
                    .downcast_ref::<$rust>()
                    .is_some_and(|other| $equal(self, other))
            }
            fn clone_as_boxed<'v>(&self) -> Box<dyn cel::common::value::Val + 'v> {
                Box::new(self.clone())
            }
            fn as_any(&self) -> Option<&dyn std::any::Any> {
                Some(self)
            }
        }
        impl cel::common::value::StaticVal for $rust {}
    };
}
pub(super) use opaque_val;

/// Registers the library on `env` (built without the crate's own `matches`).
pub(super) fn extension(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_overload(
        "matches",
        "matches",
        vec![STRING_TYPE, STRING_TYPE],
        matches,
    )?;
    env.add_member_overload(
        "matches",
        "string_matches",
        STRING_TYPE,
        vec![STRING_TYPE],
        matches,
    )?;
    env.add_member_overload("find", "string_find", STRING_TYPE, vec![STRING_TYPE], find)?;
    env.add_member_overload(
        "findAll",
        "string_find_all",
        STRING_TYPE,
        vec![STRING_TYPE],
        find_all,
    )?;
    env.add_member_overload(
        "findAll",
        "string_find_all_n",
        STRING_TYPE,
        vec![STRING_TYPE, INT_TYPE],
        find_all,
    )?;
    env.add_member_overload("isSorted", "list_is_sorted", LIST_TYPE, vec![], is_sorted)?;
    env.add_member_overload("sum", "list_sum", LIST_TYPE, vec![], sum)?;
    env.add_member_overload("min", "list_min", LIST_TYPE, vec![], min)?;
    env.add_member_overload("max", "list_max", LIST_TYPE, vec![], max)?;
    env.add_member_overload(
        "indexOf",
        "list_index_of",
        LIST_TYPE,
        vec![DYN_TYPE],
        index_of,
    )?;
    env.add_member_overload(
        "lastIndexOf",
        "list_last_index_of",
        LIST_TYPE,
        vec![DYN_TYPE],
        last_index_of,
    )?;
    Ok(())
}

pub(super) fn string<'a>(val: &'a dyn Val, function: &str) -> Result<&'a str, ExecutionError> {
    val.downcast_ref::<CelString>()
        .map(|s| s.inner())
        .ok_or_else(|| ExecutionError::function_error(function, "expected a string"))
}

fn regex(pattern: &str, function: &str) -> Result<std::sync::Arc<regex::Regex>, ExecutionError> {
    crate::pattern::pattern(pattern)
        .map_err(|e| ExecutionError::function_error(function, format!("error parsing regexp: {e}")))
}

fn matches<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [text, pattern] = two(args)?;
    let re = regex(string(pattern.as_ref(), "matches")?, "matches")?;
    Ok(CowVal::owned(CelBool::from(
        re.is_match(string(text.as_ref(), "matches")?),
    )))
}

fn find<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [text, pattern] = two(args)?;
    let re = regex(string(pattern.as_ref(), "find")?, "find")?;
    let found = re
        .find(string(text.as_ref(), "find")?)
        .map_or("", |m| m.as_str());
    Ok(CowVal::owned(CelString::from(found.to_owned())))
}

fn find_all<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let mut args = args.into_iter();
    let (Some(text), Some(pattern)) = (args.next(), args.next()) else {
        return Err(ExecutionError::invalid_argument_count(2, 0));
    };
    let limit = match args.next() {
        Some(n) => *n
            .as_ref()
            .downcast_ref::<CelInt>()
            .ok_or_else(|| ExecutionError::function_error("findAll", "expected an int"))?
            .inner(),
        None => -1,
    };
    let re = regex(string(pattern.as_ref(), "findAll")?, "findAll")?;
    let text = string(text.as_ref(), "findAll")?;
    // Go's FindAllString: a negative limit is no limit, zero finds nothing.
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let found: Vec<Box<dyn Val + 'v>> = re
        .find_iter(text)
        .take(limit)
        .map(|m| Box::new(CelString::from(m.as_str().to_owned())) as Box<dyn Val + 'v>)
        .collect();
    Ok(CowVal::owned(CelList::from(found)))
}

pub(super) fn two<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
) -> Result<[CowVal<'b, 'v>; 2], ExecutionError> {
    let count = args.len();
    args.try_into()
        .map_err(|_| ExecutionError::invalid_argument_count(2, count))
}

pub(super) fn one<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let count = args.len();
    let [list]: [CowVal<'b, 'v>; 1] = args
        .try_into()
        .map_err(|_| ExecutionError::invalid_argument_count(1, count))?;
    Ok(list)
}

pub(super) fn items<'a, 'v>(
    list: &'a (dyn Val + 'v),
    function: &str,
) -> Result<Vec<&'a (dyn Val + 'v)>, ExecutionError> {
    let iterable: &dyn Iterable = list
        .as_iterable()
        .ok_or_else(|| ExecutionError::function_error(function, "expected a list"))?;
    let mut iter = iterable.iter();
    let mut items = Vec::new();
    while let Some(item) = iter.next() {
        items.push(item);
    }
    Ok(items)
}

fn compare(a: &dyn Val, b: &dyn Val, function: &str) -> Result<Ordering, ExecutionError> {
    a.as_comparer()
        .ok_or_else(|| ExecutionError::function_error(function, "elements are not comparable"))?
        .compare(b)
}

fn is_sorted<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let list = one(args)?;
    let items = items(list.as_ref(), "isSorted")?;
    for pair in items.windows(2) {
        if compare(pair[0], pair[1], "isSorted")? == Ordering::Greater {
            return Ok(CowVal::owned(CelBool::from(false)));
        }
    }
    Ok(CowVal::owned(CelBool::from(true)))
}

fn sum<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let list = one(args)?;
    let items = items(list.as_ref(), "sum")?;
    let Some((first, rest)) = items.split_first() else {
        return Ok(CowVal::owned(CelInt::from(0)));
    };
    let mut total: Box<dyn Val + 'v> = first.clone_as_boxed();
    for item in rest {
        let next = total
            .as_adder()
            .ok_or_else(|| ExecutionError::function_error("sum", "elements cannot be added"))?
            .add(*item)?
            .into_owned();
        total = next;
    }
    Ok(CowVal::Owned(total))
}

fn extreme<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
    function: &str,
    keep: Ordering,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let list = one(args)?;
    let items = items(list.as_ref(), function)?;
    let Some((first, rest)) = items.split_first() else {
        return Err(ExecutionError::function_error(
            function,
            format!("{function} called on empty list"),
        ));
    };
    let mut best = *first;
    for item in rest {
        if compare(*item, best, function)? == keep {
            best = *item;
        }
    }
    Ok(CowVal::Owned(best.clone_as_boxed()))
}

fn min<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    extreme(args, "min", Ordering::Less)
}

fn max<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    extreme(args, "max", Ordering::Greater)
}

fn position<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
    function: &str,
    last: bool,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [list, wanted] = two(args)?;
    let items = items(list.as_ref(), function)?;
    let found = if last {
        items.iter().rposition(|item| item.equals(wanted.as_ref()))
    } else {
        items.iter().position(|item| item.equals(wanted.as_ref()))
    };
    let index = found.map_or(-1, |i| i64::try_from(i).unwrap_or(i64::MAX));
    Ok(CowVal::owned(CelInt::from(index)))
}

fn index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    position(args, "indexOf", false)
}

fn last_index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    position(args, "lastIndexOf", true)
}
