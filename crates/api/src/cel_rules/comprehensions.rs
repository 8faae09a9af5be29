//! cel-go's two-variable comprehensions (`ext.TwoVarComprehensions`, in kube's base
//! environment since 1.32), which the `cel` crate's parser leaves as calls, expanded into
//! what the crate runs.
//!
//! ## Guarantees
//! - `e.all(k, v, p)`, `e.exists(k, v, p)`, `e.existsOne(k, v, p)` (and `exists_one`) and
//!   `e.transformList(k, v, [filter,] x)` are cel-go's: over a list `k` is each index and `v`
//!   its element, over a map `k` each key and `v` its value; `all` and `exists` short-circuit
//!   and absorb errors as the one-variable macros do, `existsOne` is true for exactly one,
//!   `transformList` lists `x` for each entry (the filter's true ones). They are expanded into
//!   the crate's one-variable comprehension over `@keys(e)` (the list's indices, or the map's
//!   keys) with `e` evaluated once (bound to `@rangeN`, as `cel.bind` binds), `k` renamed
//!   `@keyN` and `v` read as `@rangeN[@keyN]` (names no identifier spells, so a comprehension of
//!   the body rebinding `k` does not change what `v` reads), so the expression's bound counts
//!   them as any comprehension, and the CRD-time estimate (`cost`) recognizes the expansion
//!   and estimates it as cel-go's two-variable comprehension.
//! - `e.transformMap(k, v, [filter,] x)` maps each key (index) to `x`;
//!   `e.transformMapEntry(k, v, [filter,] m)` merges the maps `m` (a key given twice is
//!   cel-go's `insert failed: key k already exists`). Each step appends its entry (`[k, x]`,
//!   or `m`) to a list, in place, and the list is made a map once at the end (`@toMap`): each
//!   insert costs a constant in the expression's bound, as cel-go's in-place insert.
//!
//! ## Differs from cel-go
//! - `transformMapEntry` finds a key given twice when the map is made, after every step ran:
//!   when a later step fails too, that step's error is the one reported (cel-go reports the
//!   repeated key, found at its step).

use cel::common::ast::LiteralValue;
use cel::common::ast::{CallExpr, ComprehensionExpr, EntryExpr, Expr, IdedExpr, ListExpr};
use std::collections::HashMap;

use cel::common::types::{CelInt, CelList, CelMap, CelMapKey, DYN_TYPE};
use cel::common::value::{CowVal, Val};
use cel::parser::{Macro, MacroExprHelper, ParseError};
use cel::{DeclarationError, Env, ExecutionError};

use super::library::one;

/// The function giving a list's indices or a map's keys, which only these expansions call
/// (no identifier can spell it).
pub(super) const KEYS: &str = "@keys";

/// The prefix of the name the range of a two-variable comprehension is held under (then its
/// id): `cost` recognizes the expansion by it.
pub(super) const RANGE: &str = "@range";

/// Likewise, of the key's (or index's) name.
pub(super) const KEY: &str = "@key";

/// cel-go's `cel.@mapInsert`, which its `transformMap` and `transformMapEntry` call at each
/// step: the name `cost` gives it when it estimates our expansion as cel-go's.
pub(super) const MAP_INSERT: &str = "@mapInsert";

/// The function building `transformMap`'s and `transformMapEntry`'s map from the list the
/// comprehension appended (`[key, value]` pairs, or maps to merge), once, at the end.
pub(super) const TO_MAP: &str = "@toMap";

/// Registers the macros and [`KEYS`] on `env`.
pub(super) fn extension(env: &mut Env) -> Result<(), DeclarationError> {
    for name in ["all", "exists", "existsOne", "exists_one"] {
        env.add_macro(Macro::receiver(name, 3, move |helper, target, args| {
            two_variables(helper, target, args, name)
        }))?;
    }
    for count in [3, 4] {
        for name in ["transformList", "transformMap", "transformMapEntry"] {
            env.add_macro(Macro::receiver(name, count, move |helper, target, args| {
                two_variables(helper, target, args, name)
            }))?;
        }
    }
    env.add_overload(TO_MAP, "to_map", vec![DYN_TYPE], to_map)?;
    env.add_overload(KEYS, "keys_of", vec![DYN_TYPE], keys)?;
    Ok(())
}

/// `@keys(e)`: a list's indices, or a map's keys.
fn keys<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let value = one(args)?;
    let items: Vec<Box<dyn Val + 'v>> = if let Some(size) = value
        .as_iterable()
        .filter(|_| value.get_type().name() == "list")
        .map(|list| {
            let mut iter = list.iter();
            let mut n = 0i64;
            while iter.next().is_some() {
                n += 1;
            }
            n
        }) {
        (0..size)
            .map(|i| Box::new(CelInt::from(i)) as Box<dyn Val + 'v>)
            .collect()
    } else if let Some(map) = value.as_iterable() {
        let mut iter = map.iter();
        let mut keys = Vec::new();
        while let Some(key) = iter.next() {
            keys.push(key.clone_as_boxed());
        }
        keys
    } else {
        return Err(ExecutionError::function_error(
            "all",
            "no such overload: a list or a map is iterated",
        ));
    };
    Ok(CowVal::owned(CelList::from(items)))
}

fn call(helper: &mut MacroExprHelper<'_>, function: &str, args: Vec<IdedExpr>) -> IdedExpr {
    helper.next_expr(Expr::Call(CallExpr {
        func_name: function.to_owned(),
        target: None,
        args,
    }))
}

fn ident(helper: &mut MacroExprHelper<'_>, name: &str) -> IdedExpr {
    helper.next_expr(Expr::Ident(name.to_owned()))
}

fn literal(helper: &mut MacroExprHelper<'_>, value: LiteralValue) -> IdedExpr {
    helper.next_expr(Expr::Literal(value))
}

/// A variable's name from a macro argument, or cel-go's error.
fn variable(helper: &MacroExprHelper<'_>, arg: &IdedExpr) -> Result<String, ParseError> {
    match &arg.expr {
        Expr::Ident(name) => Ok(name.clone()),
        _ => Err(helper.new_error(arg.id, "argument must be a simple name")),
    }
}

/// `body` with each free use of `var` replaced by a copy of `with` (keeping the use's id, so
/// its position).
fn substitute(expr: &mut IdedExpr, var: &str, with: &Expr) {
    match &mut expr.expr {
        Expr::Ident(name) if name == var => expr.expr = with.clone(),
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
        Expr::Call(call) => {
            if let Some(target) = call.target.as_deref_mut() {
                substitute(target, var, with);
            }
            for arg in &mut call.args {
                substitute(arg, var, with);
            }
        }
        Expr::Select(select) => substitute(&mut select.operand, var, with),
        Expr::List(list) => {
            for element in &mut list.elements {
                substitute(element, var, with);
            }
        }
        Expr::Map(map) => {
            for entry in &mut map.entries {
                if let EntryExpr::MapEntry(entry) = &mut entry.expr {
                    substitute(&mut entry.key, var, with);
                    substitute(&mut entry.value, var, with);
                }
            }
        }
        Expr::Struct(fields) => {
            for entry in &mut fields.entries {
                if let EntryExpr::StructField(field) = &mut entry.expr {
                    substitute(&mut field.value, var, with);
                }
            }
        }
        Expr::Comprehension(c) => {
            substitute(&mut c.iter_range, var, with);
            substitute(&mut c.accu_init, var, with);
            // Inside, a comprehension's own variables hide `var`.
            let hidden =
                c.iter_var == var || c.accu_var == var || c.iter_var2.as_deref() == Some(var);
            if !hidden {
                substitute(&mut c.loop_cond, var, with);
                substitute(&mut c.loop_step, var, with);
                substitute(&mut c.result, var, with);
            }
        }
    }
}

/// `init` bound to the accumulator `name` around `body`, as `cel.bind` binds.
fn bound(helper: &mut MacroExprHelper<'_>, name: &str, init: IdedExpr, body: IdedExpr) -> IdedExpr {
    let no_elements = helper.next_expr(Expr::List(ListExpr::new(Vec::new())));
    let never = literal(helper, LiteralValue::Boolean(false.into()));
    let step = ident(helper, name);
    helper.next_expr(Expr::Comprehension(Box::new(ComprehensionExpr {
        iter_range: no_elements,
        iter_var: "#unused".to_owned(),
        iter_var2: None,
        accu_var: name.to_owned(),
        accu_init: init,
        loop_cond: never,
        loop_step: step,
        result: body,
    })))
}

/// A two-variable comprehension `macro_name` (see the module docs).
fn two_variables(
    helper: &mut MacroExprHelper<'_>,
    target: &mut Option<IdedExpr>,
    args: &mut Vec<IdedExpr>,
    macro_name: &str,
) -> Result<Option<IdedExpr>, ParseError> {
    let Some(range) = target.take() else {
        return Ok(None);
    };
    let key = variable(helper, &args[0])?;
    let value = variable(helper, &args[1])?;
    if key == value {
        return Err(helper.new_error(args[1].id, format!("duplicate variable name: {value}")));
    }
    // The range, evaluated once, and the key, under names no identifier spells (so that a
    // comprehension in the body naming its variable as the key does not hide it from `v`).
    let held = format!("{RANGE}{}", range.id);
    let key_held = format!("{KEY}{}", range.id);
    let element = {
        let of = ident(helper, &held);
        let at = ident(helper, &key_held);
        call(helper, "_[_]", vec![of, at]).expr
    };
    let mut rest: Vec<IdedExpr> = args.drain(2..).collect();
    for expr in &mut rest {
        substitute(expr, &key, &Expr::Ident(key_held.clone()));
        substitute(expr, &value, &element);
    }
    let key = key_held;
    let result_name = "@result";
    let accu = |helper: &mut MacroExprHelper<'_>| ident(helper, result_name);
    let (init, cond, step, result) = match macro_name {
        "all" | "exists" => {
            let all = macro_name == "all";
            let init = literal(helper, LiteralValue::Boolean(all.into()));
            let watched = if all {
                accu(helper)
            } else {
                let a = accu(helper);
                call(helper, "!_", vec![a])
            };
            let cond = call(helper, "@not_strictly_false", vec![watched]);
            let a = accu(helper);
            let test = rest.pop().unwrap_or_default();
            let step = call(helper, if all { "_&&_" } else { "_||_" }, vec![a, test]);
            (init, cond, step, accu(helper))
        }
        "existsOne" | "exists_one" => {
            let init = literal(helper, LiteralValue::Int(0.into()));
            let cond = literal(helper, LiteralValue::Boolean(true.into()));
            let test = rest.pop().unwrap_or_default();
            let (a, one_) = (accu(helper), literal(helper, LiteralValue::Int(1.into())));
            let plus = call(helper, "_+_", vec![a, one_]);
            let a = accu(helper);
            let step = call(helper, "_?_:_", vec![test, plus, a]);
            let (a, one_) = (accu(helper), literal(helper, LiteralValue::Int(1.into())));
            let result = call(helper, "_==_", vec![a, one_]);
            (init, cond, step, result)
        }
        _ => {
            // transformList, transformMap, transformMapEntry: [filter,] transform, each
            // element appended to a list, which the crate's evaluation does in place. A map's
            // entries (`[key, value]`, or the maps to merge) are made a map once at the end
            // ([`TO_MAP`]): each insert costs a constant, as cel-go's in-place insert.
            let transform = rest.pop().unwrap_or_default();
            let filter = rest.pop();
            let init = helper.next_expr(Expr::List(ListExpr::new(Vec::new())));
            let cond = literal(helper, LiteralValue::Boolean(true.into()));
            let entry = if macro_name == "transformMap" {
                let at = ident(helper, &key);
                helper.next_expr(Expr::List(ListExpr::new(vec![at, transform])))
            } else {
                transform
            };
            let a = accu(helper);
            let appended = helper.next_expr(Expr::List(ListExpr::new(vec![entry])));
            let append = call(helper, "_+_", vec![a, appended]);
            let step = match filter {
                Some(filter) => {
                    let a = accu(helper);
                    call(helper, "_?_:_", vec![filter, append, a])
                }
                None => append,
            };
            (init, cond, step, accu(helper))
        }
    };
    let of = ident(helper, &held);
    let keys = call(helper, KEYS, vec![of]);
    let mut comprehension = helper.next_expr(Expr::Comprehension(Box::new(ComprehensionExpr {
        iter_range: keys,
        iter_var: key,
        iter_var2: None,
        accu_var: result_name.to_owned(),
        accu_init: init,
        loop_cond: cond,
        loop_step: step,
        result,
    })));
    args.clear();
    if matches!(macro_name, "transformMap" | "transformMapEntry") {
        comprehension = call(helper, TO_MAP, vec![comprehension]);
    }
    Ok(Some(bound(helper, &held, range, comprehension)))
}

/// `@toMap(entries)`: the map of `transformMap`'s `[key, value]` pairs, or the merge of
/// `transformMapEntry`'s maps, in order; a key given twice is cel-go's `insert failed: key k
/// already exists`. Linear in the entries (the expression's bound charges it so).
fn to_map<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let entries = one(args)?;
    let no_overload = || ExecutionError::function_error(TO_MAP, "no such overload");
    let list = entries.downcast_ref::<CelList>().ok_or_else(no_overload)?;
    let mut map: HashMap<CelMapKey<'v>, Box<dyn Val + 'v>> = HashMap::new();
    let mut insert = |key: Box<dyn Val + 'v>, value: Box<dyn Val + 'v>| {
        let key = CelMapKey::try_from(key)?;
        if map.contains_key(&key) {
            // Go's `%v` of the key.
            let shown = match &key {
                CelMapKey::String(s) => s.inner().to_string(),
                CelMapKey::Int(i) => i.inner().to_string(),
                CelMapKey::UInt(u) => u.inner().to_string(),
                CelMapKey::Bool(b) => b.inner().to_string(),
            };
            return Err(ExecutionError::function_error(
                MAP_INSERT,
                format!("insert failed: key {shown} already exists"),
            ));
        }
        map.insert(key, value);
        Ok(())
    };
    for entry in list.inner() {
        if let Some(pair) = entry.downcast_ref::<CelList>() {
            let [key, value] = pair.inner() else {
                return Err(no_overload());
            };
            insert(key.clone_as_boxed(), value.clone_as_boxed())?;
        } else {
            let keys = entry.as_iterable().ok_or_else(no_overload)?;
            let indexer = entry.as_indexer().ok_or_else(no_overload)?;
            let mut iter = keys.iter();
            while let Some(key) = iter.next() {
                let value = indexer.get(key)?.into_owned();
                insert(key.clone_as_boxed(), value)?;
            }
        }
    }
    Ok(CowVal::owned(CelMap::from(map)))
}
