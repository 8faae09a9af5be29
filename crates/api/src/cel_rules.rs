//! `x-kubernetes-validations`: a CRD's CEL rules, compiled and evaluated as kube-apiserver does
//! (`apiextensions-apiserver/pkg/apiserver/schema/cel`).
//!
//! **When a CRD is written** (`rule_error`, `field_path_error`) each rule and
//! `messageExpression` must parse (`compilation failed: ERROR: <input>:1:6: Syntax error: ...`,
//! CEL's own text, with the source line and a caret as cel-go prints them), may name no
//! variable but `self` and `oldSelf` (`undeclared reference to 'foo' (in container '')`) and
//! call no function kube-apiserver 1.33's CEL environment does not declare (the same words,
//! at the call's `(`: `self.name.startWith('a')`, `foo(1)`, `math.greatest(1, 2)`; the
//! `functions` module lists kube's names and where they come from; `a.b.f()` is the function
//! `a.b.f` when kube declares it, else `f` on `a.b`, as cel-go resolves qualified names; a
//! declared name called the wrong way, `startsWith('a', 'b')`, is the type check's), every
//! undeclared reference listed in the order of their positions as cel-go lists them (at most
//! 100, then `N more errors were truncated`), and
//! must type-check as far as the `types` module can be sure: no field its node's schema does not
//! declare (`undefined field 'replica'`), no operator on operands it has no overload for
//! (`found no matching overload for '_+_' applied to '(int, string)'`), a rule of a known type
//! other than `bool` (`cel expression must evaluate to a bool`) or a `messageExpression` of
//! one other than `string`. A `fieldPath` must name a field of the schema. A rule that
//! compiles then gets kube's *estimated* cost (the `cost` module: cel-go's static estimate with
//! the schema's `maxLength`, `maxItems`, `maxProperties`, else what fits in a 3 MiB request,
//! and kube's and cel-go's estimates of every library function: the same numbers as kube's
//! own cost tests),
//! times how many times it may run (the product of the enclosing arrays' and maps' bounds, else
//! as many of its node's values as fit in a request): above kube's `StaticEstimatedCostLimit`
//! it is refused (`Forbidden: estimated rule cost exceeds budget by factor of more than 100x
//! (try simplifying the rule, ...)`), likewise a `messageExpression` by its own cost, and a
//! schema whose rules together exceed `StaticEstimatedCRDCostLimit` (at the schema, and at its
//! up to 4 costliest rules). On an update leaving a version's schema unchanged a rule is not
//! refused for its own cost. **The estimate is never above kube's**: a rule with a function,
//! macro or type it does not follow as cel-go does is not estimated (counts as costing
//! nothing), so a CRD is refused for cost only when kube refuses it too (the 118 distinct CRDs
//! of Gateway API, Envoy Gateway, Cluster API, Karpenter and Kueue, 2,038 rules, all of them
//! estimated, are all accepted: `examples/crd_cost_corpus.rs`).
//!
//! **When a custom resource is written** (`check`) every rule of every schema node with a
//! non-null value is evaluated with `self` bound to that value (objects as maps of their
//! schema's properties, names escaped as kube escapes them — `x-y` is `self.x__dash__y` —;
//! `integer` as `int`, `number` as `double`; at the root and in embedded resources
//! `apiVersion`, `kind` and `metadata.name`/`generateName`). A rule using `oldSelf` (a
//! transition rule) runs only on an update, where the node correlates with the old object
//! (object fields, `map` list items by their keys), unless `optionalOldSelf` makes `oldSelf`
//! an optional. A false rule is a cause at the node (or its `fieldPath`) with `message`,
//! `messageExpression`'s string, or `failed rule: <rule>`, of the type `reason` names; an
//! evaluation error is `<error> evaluating rule: <rule>`. On an update a failure of a rule
//! without `oldSelf` is dropped when its node is unchanged (ratcheting, as the schema's own
//! checks). Rules run only when the schema's checks found no type, required, enum or size
//! failure, as kube's `hasBlockingErr`.
//!
//! **Bounded work.** kube-apiserver meters CEL's cost as it runs; the `cel` crate cannot, so
//! before each evaluation an upper bound of its cost is computed from the expression and the
//! actual sizes of `self` and `oldSelf` (every comprehension multiplies its body by the
//! number of elements it may range over; string and list operations cost a tenth per byte
//! they may touch, as kube's traversal factor; each evaluation counts 32 more for its own
//! setup, so the budget also bounds how many rules one write runs; a node's value is converted
//! and measured once for all its rules and counts 2 per byte). **Linear in the object**: the
//! object's values are converted once and shared (the `values` module: maps and lists behind
//! an `Arc`), so a node's `self` is its entry in the value of a node with rules above it,
//! converted with that one and counting nothing more; each value is measured once from its
//! elements' kept measures; a node's field path is a step from its parent's, written only for
//! a cause, and past the causes an answer carries (`--max-invalid-causes`) a cause is only
//! counted; whether a node is unchanged (ratcheting) is kept for the walk. So each byte of the
//! object is converted, charged and measured at most once however deep its nodes with rules
//! nest: a cheap rule at each of 4,000 nested levels costs a few units a level, where each
//! level converted and was charged its whole subtree (`d²`: refused for the budget past ~1,000
//! levels, where kube — which reads `self.a` lazily (`UnstructuredToVal`) and charges cel-go's
//! cost of the selection, not the field's size — accepts). What a rule does with a subtree
//! (compare it, range over it, build strings from it) still counts by the subtree's bytes in
//! its bound, every time it runs. A rule whose bound exceeds
//! [`PER_CALL_LIMIT`] fails without running (`call cost exceeds limit`), and one object's rules
//! share [`RUNTIME_BUDGET`], both kube's values. The bound is never below what the evaluation
//! does (an argument from the model, not a meter; measured, the slowest evaluation it let run
//! took 44 ms), so no CRD author can make one write run long or allocate much; it can be
//! above, so an object kube accepts near its limits may be refused here. Rules are at most
//! [`RULE_CODE_POINTS_MAX`] characters (CEL's own limit) and [`DEPTH_MAX`] deep; they parse on
//! a stack of [`COMPILE_STACK`] bytes and evaluate on one of [`EVALUATE_STACK`] bytes (reserved
//! once per object with rules, touched only as deep as the expression goes), so no expression
//! can overflow a server thread's stack. Compiled programs are kept by their text, at most
//! [`PROGRAMS_KEPT`] of them and [`PROGRAM_TEXT_KEPT`] bytes of text.
//!
//! **Functions**: CEL's standard ones, `ext.Strings`, kube's regex and lists libraries
//! (`library`: `matches`, `find`, `findAll` in Go's RE2 syntax, compiled once and kept as
//! the schema's patterns are; `isSorted`, `sum`, `min`, `max`, `indexOf`, `lastIndexOf`),
//! kube's quantity library (`quantity`: `quantity()`, `isQuantity()`, the
//! `kubernetes.Quantity` methods), kube's IP and CIDR libraries (`net`: `ip()`, `isIP()`,
//! `ip.isCanonical()`, `cidr()`, `isCIDR()` and their types' methods), kube's URL library
//! (`url`: `url()`, `isURL()` and the `kubernetes.URL` getters over `crate::go_url`),
//! kube's format library (`format`: `format.named()`, `format.<name>()`, `validate()`),
//! kube's semver library (`semver`: `semver()`, `isSemver()`, with or without normalizing,
//! and the `kubernetes.Semver` methods, over a port of blang's `semver.Parse`)
//! and cel-go's sets extension (`sets`: `sets.contains`, `sets.equivalent`,
//! `sets.intersects`, charged the product of the lists' lengths).
//!
//! **Admission policies** (`crate::admission_policy`) compile their expressions here too, with
//! their own declared variables (`object`, `oldObject`, `request`, `params`, ...: `Declared`),
//! and run them within the same bound and budgets (`run`).
//!
//! **Differs from kube**: an expression with undeclared references is refused with them only,
//! where cel-go also lists the type errors of the rest of the expression beside them. (No
//! kube environment, stored expressions' included, has `ext.Bindings`: `cel.bind(x, a, b)` is
//! refused as kube refuses it, undeclared references to `cel`, `bind` and `x`.)
//!
//! Two-variable comprehensions (`all(i, v, ...)`, `exists`, `existsOne`, `transformList`,
//! `transformMap`, `transformMapEntry`) are expanded into the crate's comprehensions
//! (`comprehensions`).
//!
//! **Not here yet**: the type check at CRD time
//! refuses only what it is sure of (see the `types` module: a rule kube refuses for types it cannot
//! follow compiles here and fails when it runs); the CRD-time cost estimate does not follow
//! `type()`, `dyn` operands whose overload depends on their type, or rules with
//! `optionalOldSelf` (never refused for cost, see the `cost` module); `byte` strings
//! are strings, not bytes. (`date-time` and `date` strings are timestamps, `duration` strings
//! durations, and `timestamp()`/`duration()` are there, as in kube.)

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex, OnceLock};

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue, MapExpr, StructExpr};
use cel::common::value::{CowVal, Val};
use cel::context::VariableResolver;
use cel::objects::Key;
use cel::{ExecutionError, Program};
use serde_json::{Map, Value};

use crate::field::{Cause, duplicate, forbidden, go_quote, invalid, required};

pub mod authentication;
pub mod authz;
mod comprehensions;
mod cost;
mod format;
mod functions;
mod library;
mod net;
mod quantity;
mod semver;
mod sets;
mod types;
mod url;
mod values;
use crate::schema_node::{Comparisons, MapItems, flag, unchanged_kept};
pub(crate) use cost::{
    RULE_COST_LIMIT, SCHEMA_COST_LIMIT, children_factor, exceeds, times, unbounded_cardinality,
};
pub(crate) use values::to_val;
use values::{Bound, Conversions};

/// The longest rule or `messageExpression`, in characters (cel-go's default
/// `ExpressionSizeCodePointLimit`).
pub const RULE_CODE_POINTS_MAX: usize = 100_000;

/// The deepest expression tree a rule may parse into (cel-go's default recursion limit).
pub const DEPTH_MAX: usize = 250;

/// The cost one rule's evaluation may reach (kube's `PerCallLimit`), in CEL cost units.
pub const PER_CALL_LIMIT: f64 = 1_000_000.0;

/// The cost all rules of one object may reach together (kube's `RuntimeCELCostBudget`).
pub const RUNTIME_BUDGET: f64 = 10_000_000.0;

/// The longest string a `messageExpression` may give (kube's
/// `MaxEvaluatedMessageExpressionSizeBytes`), in bytes.
pub const MESSAGE_EXPRESSION_BYTES_MAX: usize = 5 * 1024;

/// Compiled rules kept between writes; past this many the kept set is emptied and starts again.
pub const PROGRAMS_KEPT: usize = 1024;

/// The bytes of rule text whose programs are kept, likewise. A program takes up to ~180 bytes
/// per byte of its text (measured: a 66,000-character list literal compiles to 11.7 MiB), so
/// the kept programs hold at most ~180 MiB; a longer rule is compiled at each use.
pub const PROGRAM_TEXT_KEPT: usize = 1 << 20;

/// The stack a rule is parsed on, in bytes (reserved, touched only as deep as the parse goes:
/// a rule of [`RULE_CODE_POINTS_MAX`] characters nests at most half as many operators).
pub const COMPILE_STACK: usize = 256 << 20;

/// The stack an object's rules are evaluated on, in bytes (reserved like [`COMPILE_STACK`]).
pub const EVALUATE_STACK: usize = 64 << 20;

/// What one evaluation counts for besides its expression: its setup (binding `self`, the
/// bound itself) took 1.4-2.1 µs per evaluation, measured over 10,000 to 100,000 trivial ones
/// (release build), where a unit of the bound took ~44 ns (1,000,000 in 44 ms, the slowest);
/// so the object's budget also bounds how many rules run, to ~280,000 (about half a second).
const EVALUATION_COST: f64 = 32.0;

/// What converting a node's value for its rules counts for, per byte of its JSON: the
/// conversion and its drop took ~75 ns per byte (a 534 KB object, release build), two units'
/// worth at ~44 ns per unit. Once per node, however many rules it has.
const CONVERSION_COST_PER_BYTE: f64 = 2.0;

/// What inserting one entry into a map being built counts for in a bound (a hash and a move:
/// the order of a unit's ~44 ns, charged twice).
const MAP_ENTRY_COST: f64 = 2.0;

/// What compiling a pattern that is not a literal counts for in a bound.
const PATTERN_COMPILE_COST: f64 = 1_000.0;

/// The estimation steps one bound may take; past it the rule's cost counts as unbounded (an
/// expression of deeply nested comprehensions).
const ESTIMATE_STEPS_MAX: usize = 1_000_000;

/// The variables an expression may name besides comprehension variables and type names: a
/// CRD rule's (`self`, `oldSelf`), or an admission policy's (kube's `object`, `oldObject`,
/// `request`, `namespaceObject`, `variables`, `authorizer`, and `params` when the policy has
/// a `paramKind`), of which kube's validation leaves `variables` out of match conditions (its
/// compiler for them composes no variables) and `authorizer` out of message expressions
/// (`HasAuthorizer: false`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Declared {
    /// `self`, `oldSelf`.
    Crd,
    /// A ValidatingAdmissionPolicy's variables without `params`.
    Admission,
    /// A ValidatingAdmissionPolicy's variables with `params`.
    AdmissionWithParams,
    /// A match condition's (a policy's or a webhook's) when it is written: no `variables`.
    Condition,
    /// Likewise, with `params`.
    ConditionWithParams,
    /// A `messageExpression`'s when it is written: no `authorizer`.
    Message,
    /// Likewise, with `params`.
    MessageWithParams,
    /// A JWT authenticator's claim validation rule or claim mapping: `claims`.
    Claims,
    /// A JWT authenticator's user validation rule: `user`.
    User,
}

impl Declared {
    /// Where the programs compiled in this environment are kept ([`compile_in`]): only the
    /// environments expressions run in; those of a policy's validation when written
    /// (`Condition`, `Message`, ...) compile each expression once per write, so they keep none
    /// and add nothing to what is kept.
    fn kept(self) -> Option<usize> {
        match self {
            Declared::Crd => Some(0),
            Declared::Admission => Some(1),
            Declared::AdmissionWithParams => Some(2),
            Declared::Condition
            | Declared::ConditionWithParams
            | Declared::Message
            | Declared::MessageWithParams
            | Declared::Claims
            | Declared::User => None,
        }
    }

    fn names(self) -> &'static [&'static str] {
        match self {
            Declared::Crd => &["self", "oldSelf"],
            Declared::Admission => &[
                "object",
                "oldObject",
                "request",
                "namespaceObject",
                "variables",
                "authorizer",
            ],
            Declared::AdmissionWithParams => &[
                "object",
                "oldObject",
                "request",
                "namespaceObject",
                "variables",
                "authorizer",
                "params",
            ],
            Declared::Condition => &[
                "object",
                "oldObject",
                "request",
                "namespaceObject",
                "authorizer",
            ],
            Declared::ConditionWithParams => &[
                "object",
                "oldObject",
                "request",
                "namespaceObject",
                "authorizer",
                "params",
            ],
            Declared::Message => &[
                "object",
                "oldObject",
                "request",
                "namespaceObject",
                "variables",
            ],
            Declared::MessageWithParams => &[
                "object",
                "oldObject",
                "request",
                "namespaceObject",
                "variables",
                "params",
            ],
            Declared::Claims => &["claims"],
            Declared::User => &["user"],
        }
    }
}

/// A compiled rule.
pub(crate) struct Compiled {
    program: Program,
    uses_old_self: bool,
}

type Compilation = Result<Arc<Compiled>, String>;

fn environment() -> &'static Arc<cel::Env> {
    static ENV: OnceLock<Arc<cel::Env>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = cel::Env::stdlib();
        // ext.Strings and kube's libraries, as kube's base environment has them; adding them
        // to a fresh environment cannot conflict.
        let strings = env.add_extension(cel::extensions::strings);
        let kube = env.add_extension(library::extension);
        let authz = env.add_extension(authz::extension);
        let quantity = env.add_extension(quantity::extension);
        let sets = env.add_extension(sets::extension);
        let net = env.add_extension(net::extension);
        let url = env.add_extension(url::extension);
        let format = env.add_extension(format::extension);
        let semver = env.add_extension(semver::extension);
        let macros = env.add_extension(comprehensions::extension);
        debug_assert!(
            [
                &strings, &kube, &authz, &quantity, &sets, &net, &url, &format, &semver, &macros,
            ]
            .iter()
            .all(|added| added.is_ok()),
            "{strings:?} {kube:?} {authz:?} {quantity:?} {sets:?} {net:?} {url:?} {format:?} {semver:?} {macros:?}"
        );
        Arc::new(env)
    })
}

/// Compiles the CRD rule `text` (kept by its text, see [`PROGRAMS_KEPT`]).
///
/// # Errors
/// CEL's message (`ERROR: <input>:1:6: Syntax error: ...`).
pub(crate) fn compile(text: &str) -> Compilation {
    compile_in(text, Declared::Crd)
}

/// Compiles `text` where the variables `declared` are (kept by its text, per environment an
/// expression runs in, see [`PROGRAMS_KEPT`] and `Declared::kept`).
///
/// # Errors
/// CEL's message (`ERROR: <input>:1:6: Syntax error: ...`).
pub(crate) fn compile_in(text: &str, declared: Declared) -> Compilation {
    /// The kept programs by their text, and the bytes of text kept.
    type Kept = (HashMap<String, Arc<Compiled>>, usize);
    static KEPT: [OnceLock<Mutex<Kept>>; 3] = [const { OnceLock::new() }; 3];
    let Some(index) = declared.kept() else {
        return compile_uncached(text, declared);
    };
    let kept = KEPT[index].get_or_init(Mutex::default);
    if let Some(hit) = kept.lock().unwrap_or_else(|p| p.into_inner()).0.get(text) {
        return Ok(hit.clone());
    }
    // Failures are not kept: they are rare (a CRD refused) and their text can be long.
    let compiled = compile_uncached(text, declared)?;
    if text.len() > PROGRAM_TEXT_KEPT {
        return Ok(compiled);
    }
    let mut kept = kept.lock().unwrap_or_else(|p| p.into_inner());
    if kept.0.len() >= PROGRAMS_KEPT || kept.1 + text.len() > PROGRAM_TEXT_KEPT {
        // Dropping programs walks their trees: on the large stack, as their parse.
        let old = std::mem::take(&mut *kept);
        stacker::grow(EVALUATE_STACK, move || drop(old));
    }
    kept.1 += text.len();
    kept.0.insert(text.to_owned(), compiled.clone());
    Ok(compiled)
}

fn compile_uncached(text: &str, declared: Declared) -> Compilation {
    let points = text.chars().count();
    if points > RULE_CODE_POINTS_MAX {
        return Err(format!(
            "ERROR: <input>:-1:0: expression code point size exceeds limit: size: {points}, limit {RULE_CODE_POINTS_MAX}"
        ));
    }
    stacker::grow(COMPILE_STACK, || {
        let parsed = catch_unwind(AssertUnwindSafe(|| {
            environment().compile(text).map_err(|errors| {
                let shown: Vec<String> = errors
                    .errors
                    .iter()
                    .map(
                        |e| match (usize::try_from(e.pos.0), usize::try_from(e.pos.1)) {
                            (Ok(line @ 1..), Ok(column)) => display(text, line, column, &e.msg),
                            _ => e.to_string(),
                        },
                    )
                    .collect();
                shown.join("\n")
            })
        }));
        let program = match parsed {
            Ok(Ok(program)) => program,
            Ok(Err(message)) => return Err(message),
            Err(_) => return Err("ERROR: <input>:1:1: Syntax error: unparsable expression".into()),
        };
        if depth(program.expression()) > DEPTH_MAX {
            return Err(format!(
                "ERROR: <input>:1:1: expression recursion limit exceeded: {DEPTH_MAX}"
            ));
        }
        let mut found = Vec::new();
        undeclared(
            program.expression(),
            &mut Vec::new(),
            declared.names(),
            &mut found,
        );
        if !found.is_empty() {
            let errors = found.into_iter().map(|(id, name)| {
                let (line, column) = position(text, &program, id);
                (
                    line,
                    column,
                    format!("undeclared reference to '{name}' (in container '')"),
                )
            });
            return Err(shown_in_order(text, errors.collect()));
        }
        let uses_old_self = program.references().has_variable("oldSelf");
        Ok(Arc::new(Compiled {
            program,
            uses_old_self,
        }))
    })
}

fn position(text: &str, program: &Program, id: u64) -> (usize, usize) {
    let Some((start, _)) = program.source_info().offset_for(id) else {
        return (1, 1);
    };
    // The parser's offsets count bytes; columns count characters, as cel-go's.
    let mut start = (start as usize).min(text.len());
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    let before = &text[..start];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

fn children(expr: &IdedExpr) -> Vec<&IdedExpr> {
    match &expr.expr {
        Expr::Call(call) => call
            .target
            .as_deref()
            .into_iter()
            .chain(&call.args)
            .collect(),
        Expr::Comprehension(c) => vec![
            &c.iter_range,
            &c.accu_init,
            &c.loop_cond,
            &c.loop_step,
            &c.result,
        ],
        Expr::List(list) => list.elements.iter().collect(),
        Expr::Map(MapExpr { entries }) | Expr::Struct(StructExpr { entries, .. }) => entries
            .iter()
            .flat_map(|e| match &e.expr {
                EntryExpr::MapEntry(m) => vec![&m.key, &m.value],
                EntryExpr::StructField(f) => vec![&f.value],
            })
            .collect(),
        Expr::Select(select) => vec![&select.operand],
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => Vec::new(),
    }
}

/// The fields of `variables` an expression selects (`variables.x`), in the order they appear;
/// `None` when it uses `variables` otherwise (as a whole, or indexed), so any may be read.
pub(crate) fn variables_selected(compiled: &Compiled) -> Option<Vec<String>> {
    let mut named = Vec::new();
    let mut whole = false;
    let mut pending = vec![compiled.program.expression()];
    while let Some(expr) = pending.pop() {
        match &expr.expr {
            Expr::Select(select) if matches!(&select.operand.expr, Expr::Ident(n) if n == "variables") => {
                if !named.contains(&select.field) {
                    named.push(select.field.clone());
                }
            }
            Expr::Ident(name) if name == "variables" => whole = true,
            _ => pending.extend(children(expr)),
        }
    }
    (!whole).then_some(named)
}

/// cel-go's compile error for the first `variables.x` in `text` whose `x` is not one of
/// `declared` (`ERROR: <input>:1:10: undefined field 'x'` and its snippet), if any.
pub(crate) fn undefined_variable(
    text: &str,
    compiled: &Compiled,
    declared: &[&str],
) -> Option<String> {
    let mut found: Option<(usize, usize, &str)> = None;
    let mut pending = vec![compiled.program.expression()];
    while let Some(expr) = pending.pop() {
        if let Expr::Select(select) = &expr.expr
            && matches!(&select.operand.expr, Expr::Ident(n) if n == "variables")
        {
            if !declared.contains(&select.field.as_str()) {
                let (line, column) = position(text, &compiled.program, expr.id);
                if found.is_none_or(|(l, c, _)| (line, column) < (l, c)) {
                    found = Some((line, column, select.field.as_str()));
                }
            }
            continue;
        }
        pending.extend(children(expr));
    }
    found.map(|(line, column, field)| {
        display(text, line, column, &format!("undefined field '{field}'"))
    })
}

/// The size of a value an expression gave (a policy's variable), as [`measured`] sizes data.
pub(crate) fn measured_cel(value: &cel::Value) -> Size {
    let mut size = Size {
        count: 1.0,
        ..EMPTY
    };
    let mut pending = vec![value];
    while let Some(value) = pending.pop() {
        match value {
            cel::Value::String(s) => {
                size.count = size.count.max(s.len() as f64);
                size.bytes += s.len() as f64 + 2.0;
                size.item = size.item.max(s.len() as f64 + 2.0);
            }
            cel::Value::Bytes(b) => {
                size.count = size.count.max(b.len() as f64);
                size.bytes += b.len() as f64 + 2.0;
                size.item = size.item.max(b.len() as f64 + 2.0);
            }
            cel::Value::List(items) => {
                size.count = size.count.max(items.len() as f64);
                size.bytes += 2.0 + items.len() as f64;
                pending.extend(items.iter());
            }
            cel::Value::Map(map) => {
                size.count = size.count.max(map.map.len() as f64);
                size.bytes += 2.0;
                for (key, field) in map.map.iter() {
                    if let Key::String(key) = key {
                        size.bytes += key.len() as f64 + 4.0;
                    } else {
                        size.bytes += 12.0;
                    }
                    pending.push(field);
                }
            }
            _ => size.bytes += 8.0,
        }
    }
    // Any element is at most the whole.
    size.item = size.bytes;
    size
}

/// The depth of an expression tree, walked without recursion (the tree may be deep).
fn depth(root: &IdedExpr) -> usize {
    let mut deepest = 0;
    let mut pending = vec![(root, 1)];
    while let Some((expr, at)) = pending.pop() {
        deepest = deepest.max(at);
        if deepest > DEPTH_MAX {
            break;
        }
        pending.extend(children(expr).into_iter().map(|c| (c, at + 1)));
    }
    deepest
}

/// The undeclared references of an expression, as cel-go's checker finds them: identifiers
/// that are neither one of `declared`, a comprehension's variable nor a type name, and calls
/// of functions kube's environment does not declare ([`functions`]; `a.b.f()` is the
/// function `a.b.f` when that is declared, else `f` on the target `a.b`, as cel-go resolves
/// qualified names), each with the id cel-go reports it at (a call's is its `(`), into
/// `found`. Recursive: called only on trees of at most [`DEPTH_MAX`].
fn undeclared<'a>(
    expr: &'a IdedExpr,
    scope: &mut Vec<&'a str>,
    declared: &[&str],
    found: &mut Vec<(u64, &'a str)>,
) {
    /// Type names, which are identifiers too (`type(x) == int`; `google` for
    /// `google.protobuf.Timestamp`).
    const KNOWN: [&str; 12] = [
        "int",
        "uint",
        "double",
        "bool",
        "string",
        "bytes",
        "list",
        "map",
        "null_type",
        "type",
        "dyn",
        "google",
    ];
    match &expr.expr {
        Expr::Ident(name) => {
            if !KNOWN.contains(&name.as_str())
                && !declared.contains(&name.as_str())
                && !scope.contains(&name.as_str())
            {
                found.push((expr.id, name));
            }
        }
        Expr::Comprehension(c) => {
            undeclared(&c.iter_range, scope, declared, found);
            undeclared(&c.accu_init, scope, declared, found);
            let outer = scope.len();
            scope.push(&c.accu_var);
            scope.push(&c.iter_var);
            scope.extend(c.iter_var2.as_deref());
            undeclared(&c.loop_cond, scope, declared, found);
            undeclared(&c.loop_step, scope, declared, found);
            undeclared(&c.result, scope, declared, found);
            scope.truncate(outer);
        }
        Expr::Call(call) => {
            let name = call.func_name.as_str();
            let Some(target) = call.target.as_deref() else {
                for arg in &call.args {
                    undeclared(arg, scope, declared, found);
                }
                if !functions::operator(name) && !functions::declared(name) {
                    found.push((expr.id, name));
                }
                return;
            };
            for arg in &call.args {
                undeclared(arg, scope, declared, found);
            }
            if qualified(target).is_some_and(|q| functions::declared(&format!("{q}.{name}"))) {
                return;
            }
            undeclared(target, scope, declared, found);
            if !functions::declared(name) {
                found.push((expr.id, name));
            }
        }
        // The names of kube's IP and CIDR types are identifiers (`type(x) == net.IP`).
        Expr::Select(_) if matches!(qualified(expr).as_deref(), Some("net.IP" | "net.CIDR")) => {}
        _ => {
            for child in children(expr) {
                undeclared(child, scope, declared, found);
            }
        }
    }
}

/// The qualified name an identifier, or a selection of one (`a.b.c`, not `has(a.b)`), spells
/// (cel-go's `containers.ToQualifiedName`).
fn qualified(expr: &IdedExpr) -> Option<String> {
    match &expr.expr {
        Expr::Ident(name) => Some(name.clone()),
        Expr::Select(select) if !select.test => {
            qualified(&select.operand).map(|q| format!("{q}.{}", select.field))
        }
        _ => None,
    }
}

/// What a CRD's expression must evaluate to.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Expression {
    /// A rule: a `bool`.
    Rule,
    /// A `messageExpression`: a `string`.
    Message,
}

/// Why a rule or `messageExpression` of a CRD is refused, in kube's words (the field error's
/// detail: `compilation failed: ERROR: <input>:1:5: undefined field 'replica'` and cel-go's
/// source snippet, or `cel expression must evaluate to a bool`), or `None`: it does not
/// compile ([`compile`]), or it does not type-check against the schema node it is on as far
/// as [`types`] can be sure.
pub(crate) fn rule_error(
    text: &str,
    schema: &Map<String, Value>,
    resource: bool,
    expression: Expression,
) -> Option<String> {
    let failed = match expression {
        Expression::Rule => "compilation failed",
        Expression::Message => "messageExpression compilation failed",
    };
    let compiled = match compile(text) {
        Ok(compiled) => compiled,
        Err(e) => return Some(format!("{failed}: {e}")),
    };
    let root = compiled.program.expression();
    let mut scope = Vec::new();
    let own = types::Ty::of_schema(schema, resource);
    let typed = stacker::grow(EVALUATE_STACK, || types::type_of(root, own, &mut scope));
    match (typed, expression) {
        (Err((id, message)), _) => {
            let (line, column) = position(text, &compiled.program, id);
            Some(format!(
                "{failed}: {}",
                display(text, line, column, &message)
            ))
        }
        (Ok(ty), Expression::Rule) if ty.is_not(types::Cel::Bool) => {
            Some("cel expression must evaluate to a bool".to_owned())
        }
        (Ok(ty), Expression::Message) if ty.is_not(types::Cel::String) => {
            Some("messageExpression must evaluate to a string".to_owned())
        }
        (Ok(_), _) => None,
    }
}

/// Why an admission policy's expression `text` (compiled) is refused for its types, in
/// kube's words: a type error as far as [`types`] can be sure (variables are of unknown type;
/// `compilation failed: ERROR: <input>:1:3: found no matching overload ...`), or a result
/// certainly not of the type `wanted` (`must evaluate to bool`, `must evaluate to string`);
/// `None` when it passes.
pub(crate) fn admission_type_error(
    text: &str,
    compiled: &Compiled,
    wanted: Option<Expression>,
) -> Option<String> {
    let root = compiled.program.expression();
    let typed = stacker::grow(EVALUATE_STACK, || {
        types::type_of(root, types::Ty::Unknown, &mut Vec::new())
    });
    match (typed, wanted) {
        (Err((id, message)), _) => {
            let (line, column) = position(text, &compiled.program, id);
            Some(format!(
                "compilation failed: {}",
                display(text, line, column, &message)
            ))
        }
        (Ok(ty), Some(Expression::Rule)) if ty.is_not(types::Cel::Bool) => {
            Some("must evaluate to bool".to_owned())
        }
        (Ok(ty), Some(Expression::Message)) if ty.is_not(types::Cel::String) => {
            Some("must evaluate to string".to_owned())
        }
        (Ok(_), _) => None,
    }
}

/// The cost kube-apiserver estimates for `text` on a node of schema `schema` (a resource's
/// root or embedded resource when `resource`), once: not times the times it runs (see the
/// `cost` module). `None` when the estimate does not follow the expression (it is then never
/// refused for its cost), when it does not compile, or when `oldSelf` is an optional
/// (`optional_old_self`). Call only for a text [`rule_error`] accepts. (Public for the
/// corpus example, which counts the rules estimated.)
pub fn estimated_cost(
    text: &str,
    schema: &Map<String, Value>,
    resource: bool,
    optional_old_self: bool,
) -> Option<u64> {
    if optional_old_self {
        return None;
    }
    let compiled = compile(text).ok()?;
    let root = compiled.program.expression();
    stacker::grow(EVALUATE_STACK, || cost::estimate(root, schema, resource))
}

/// Errors at `(line, column, message)` of `text` as cel-go's `Errors.ToDisplayString` prints
/// them: sorted by position (stable, so errors at one position keep their order), each as
/// [`display`] shows it, one a line, the first 100 and then how many more there were.
fn shown_in_order(text: &str, mut errors: Vec<(usize, usize, String)>) -> String {
    /// cel-go's `maxErrorsToReport`.
    const REPORTED_MAX: usize = 100;
    errors.sort_by_key(|&(line, column, _)| (line, column));
    let more = errors.len().saturating_sub(REPORTED_MAX);
    let mut shown: Vec<String> = errors
        .iter()
        .take(REPORTED_MAX)
        .map(|(line, column, message)| display(text, *line, *column, message))
        .collect();
    if more > 0 {
        shown.push(format!("{more} more errors were truncated"));
    }
    shown.join("\n")
}

/// An error at `line` and `column` (1-based, in characters) of `text` as cel-go's
/// `Error.ToDisplayString` prints it: `ERROR: <input>:1:5: <message>`, then the line and a
/// caret under the column (`.` per character before it, full-width for wide ones).
fn display(text: &str, line: usize, column: usize, message: &str) -> String {
    /// cel-go's `maxSnippetLength`: longer lines are not shown.
    const SNIPPET_MAX: usize = 16_384;
    let mut shown = format!("ERROR: <input>:{line}:{column}: {message}");
    let Some(snippet) = text.split('\n').nth(line.wrapping_sub(1)) else {
        return shown;
    };
    if snippet.len() > SNIPPET_MAX {
        return shown;
    }
    let snippet = snippet.replace('\t', " ");
    let mut chars = snippet.chars();
    let mut caret = String::new();
    for c in chars.by_ref().take(column.saturating_sub(1)) {
        caret.push(if c.len_utf8() > 1 { '\u{ff0e}' } else { '.' });
    }
    caret.push(match chars.next() {
        Some(c) if c.len_utf8() > 1 => '\u{ff3e}',
        _ => '^',
    });
    shown.push_str(&format!("\n | {snippet}\n | {caret}"));
    shown
}

/// Why a rule's `fieldPath` does not name a field of `schema` (kube's `ValidFieldPath`), or
/// `None`; its normalized form otherwise, see [`normalized_field_path`].
pub(crate) fn field_path_error(schema: &Map<String, Value>, field_path: &str) -> Option<String> {
    normalized_field_path(schema, field_path).err()
}

/// A rule's `fieldPath` as a field path relative to its node (`.a['b.c']` is `a[b.c]` under an
/// object of additional properties, `a.b.c` under one with properties).
fn normalized_field_path(schema: &Map<String, Value>, field_path: &str) -> Result<String, String> {
    let mut path = String::new();
    // `None` under a schema that is not an object: no field below.
    let mut schema = Some(schema);
    let mut rest = field_path;
    fn step(
        name: &str,
        schema: &mut Option<&Map<String, Value>>,
        path: &mut String,
    ) -> Result<(), String> {
        let get = |key: &str| schema.and_then(|s| s.get(key));
        if let Some(properties) = get("properties").and_then(Value::as_object) {
            let Some(sub) = properties.get(name) else {
                return Err("does not refer to a valid field".into());
            };
            if !path.is_empty() {
                path.push('.');
            }
            path.push_str(name);
            *schema = sub.as_object();
        } else if let Some(sub) = get("additionalProperties").filter(|s| s.is_object()) {
            path.push('[');
            path.push_str(name);
            path.push(']');
            *schema = sub.as_object();
        } else {
            return Err("does not refer to a valid field".into());
        }
        Ok(())
    }
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[', ']']).unwrap_or(after.len());
            if end == 0 && after.is_empty() {
                return Err("unexpected end of JSON path".into());
            }
            step(&after[..end], &mut schema, &mut path)?;
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix('[') {
            let Some(quoted) = after.strip_prefix('\'') else {
                let token = after.split(['.', '[', ']']).next().unwrap_or("");
                return Err(format!("expected single quoted string but got {token}"));
            };
            let mut name = String::new();
            let mut chars = quoted.char_indices();
            let mut end = None;
            while let Some((at, c)) = chars.next() {
                match c {
                    '\'' => {
                        end = Some(at);
                        break;
                    }
                    '\\' => match chars.next().map(|(_, c)| c) {
                        Some('a') => name.push('\u{7}'),
                        Some('b') => name.push('\u{8}'),
                        Some('f') => name.push('\u{c}'),
                        Some('n') => name.push('\n'),
                        Some('r') => name.push('\r'),
                        Some('t') => name.push('\t'),
                        Some('v') => name.push('\u{b}'),
                        Some('\'') => name.push('\''),
                        Some('\\') => name.push('\\'),
                        Some(other) => {
                            return Err(format!(
                                "invalid string literal: invalid escape char \\{other}"
                            ));
                        }
                        None => return Err("unexpected end of JSON path".into()),
                    },
                    c => name.push(c),
                }
            }
            let Some(end) = end else {
                return Err("unexpected end of JSON path".into());
            };
            step(&name, &mut schema, &mut path)?;
            let after = &quoted[end + 1..];
            let Some(after) = after.strip_prefix(']') else {
                return Err(if after.is_empty() {
                    "unexpected end of JSON path".into()
                } else {
                    format!("expected ] but got {}", &after[..1])
                });
            };
            rest = after;
        } else {
            let token = rest.split(['.', '[', ']']).next().unwrap_or(rest);
            let token = if token.is_empty() { &rest[..1] } else { token };
            return Err(format!("expected [ or . but got: {token}"));
        }
    }
    Ok(path)
}

/// kube's `cel.Escape` of a property name: `None` when CEL cannot name it.
fn escape(name: &str) -> Option<String> {
    const RESERVED: [&str; 21] = [
        "true",
        "false",
        "null",
        "in",
        "as",
        "break",
        "const",
        "continue",
        "else",
        "for",
        "function",
        "if",
        "import",
        "let",
        "loop",
        "package",
        "namespace",
        "return",
        "var",
        "void",
        "while",
    ];
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    if RESERVED.contains(&name) {
        return Some(format!("__{name}__"));
    }
    let mut escaped = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(c) = rest.chars().next() {
        if let Some(after) = rest.strip_prefix("__") {
            escaped.push_str("__underscores__");
            rest = after;
            continue;
        }
        match c {
            '.' => escaped.push_str("__dot__"),
            '-' => escaped.push_str("__dash__"),
            '/' => escaped.push_str("__slash__"),
            c if c.is_ascii_alphanumeric() || c == '_' => escaped.push(c),
            _ => return None,
        }
        rest = &rest[c.len_utf8()..];
    }
    Some(escaped)
}

/// A string of format `date-time` or `date` as a timestamp, of format `duration` as a
/// duration (kube's `UnstructuredToVal`); `None` for other strings (or one that does not parse,
/// which the schema's format check has refused already).
fn typed_string(format: Option<&str>, text: &str) -> Option<cel::Value> {
    match format? {
        "date-time" => chrono::DateTime::parse_from_rfc3339(text)
            .ok()
            .map(cel::Value::Timestamp),
        "date" => {
            let date = chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d").ok()?;
            let utc = chrono::FixedOffset::east_opt(0)?;
            let midnight = date
                .and_hms_opt(0, 0, 0)?
                .and_local_timezone(utc)
                .single()?;
            Some(cel::Value::Timestamp(midnight))
        }
        "duration" => parse_duration(text)
            .map(|nanos| cel::Value::Duration(chrono::Duration::nanoseconds(nanos))),
        _ => None,
    }
}

/// A duration as go-openapi's `strfmt.ParseDuration` reads it: Go's `time.ParseDuration`
/// (`1h30m`, `1.5s`, `-2ms`), with days (`d`) and weeks (`w`) besides; in nanoseconds.
fn parse_duration(text: &str) -> Option<i64> {
    let (negative, mut rest) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    if rest == "0" {
        return Some(0);
    }
    let mut total: i128 = 0;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, after) = rest.split_at(number_end);
        let unit_end = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_end);
        let scale: i128 = match unit {
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            "d" => 86_400_000_000_000,
            "w" => 604_800_000_000_000,
            _ => return None,
        };
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if whole.is_empty() && fraction.is_empty() {
            return None;
        }
        let whole: i128 = if whole.is_empty() {
            0
        } else {
            whole.parse().ok()?
        };
        let mut value = whole.checked_mul(scale)?;
        let mut place = scale;
        for digit in fraction.bytes() {
            place /= 10;
            value += i128::from(digit - b'0') * place;
        }
        total = total.checked_add(value)?;
        rest = after;
    }
    let total = if negative { -total } else { total };
    i64::try_from(total).ok()
}

/// An upper bound of a value's size: its largest element count or string length anywhere,
/// its bytes, and the bytes of its largest element (a field's value, a list's item) anywhere.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Size {
    count: f64,
    bytes: f64,
    item: f64,
}

const SCALAR: Size = Size {
    count: 1.0,
    bytes: 8.0,
    item: 8.0,
};

pub(crate) const EMPTY: Size = Size {
    count: 0.0,
    bytes: 0.0,
    item: 0.0,
};

pub(crate) fn max_of(a: Size, b: Size) -> Size {
    Size {
        count: a.count.max(b.count),
        bytes: a.bytes.max(b.bytes),
        item: a.item.max(b.item),
    }
}

/// What [`Sizes`] knows of a value: its largest element count or string length anywhere (its
/// own included), its bytes, its largest element anywhere (a field's value, a list's item, a
/// key), and its largest own element.
#[derive(Clone, Copy, Debug)]
struct Measure {
    count: f64,
    bytes: f64,
    item: f64,
    largest: f64,
}

/// The bound of an evaluation's cost (see the module's guarantees).
struct Estimate<'d, 'm> {
    /// The size of anything taken from the data where the expression does not say what.
    data: Size,
    /// The variables bound to data (`self` and `oldSelf`, or a policy's `object`, ...) and
    /// their values: paths into them are measured as they are.
    roots: &'m [(&'static str, &'d Value)],
    steps: usize,
    /// The sizes of data values measured so far in the walk (each value is measured once,
    /// however many rules look at it).
    sizes: &'m mut Sizes,
}

/// The measures of data values by their address, for one walk (the object outlives it).
/// A value is measured from its elements' measures, and the measure of a map or list that was
/// asked for, or that holds a map or list, is kept: each value is measured once however many
/// nodes, rules and paths look at it and at what is below it, so measuring is linear in the
/// object's size (before, each node's value was measured whole: `d²` for rules at each of `d`
/// nested levels).
#[derive(Default)]
pub(crate) struct Sizes {
    measures: HashMap<*const Value, Measure>,
}

impl Sizes {
    pub(crate) fn new() -> Sizes {
        Sizes::default()
    }

    /// The measure of `value`; kept when `asked` or when it holds a map or list.
    fn measure(&mut self, value: &Value, asked: bool) -> Measure {
        if let Some(kept) = self.measures.get(&std::ptr::from_ref(value)) {
            return *kept;
        }
        let mut nested = false;
        let mut measure = Measure {
            count: 0.0,
            bytes: 0.0,
            item: 0.0,
            largest: 0.0,
        };
        match value {
            Value::String(s) => {
                measure.count = s.len() as f64;
                measure.bytes = s.len() as f64 + 2.0;
            }
            Value::Array(items) => {
                measure.count = items.len() as f64;
                measure.bytes = 2.0;
                for item in items {
                    nested |= item.is_array() || item.is_object();
                    let of = self.measure(item, false);
                    measure.count = measure.count.max(of.count);
                    measure.bytes += of.bytes + 1.0;
                    measure.item = measure.item.max(of.item).max(of.bytes);
                    measure.largest = measure.largest.max(of.bytes);
                }
            }
            // A map's keys are elements too (what a comprehension over it ranges over).
            Value::Object(fields) => {
                measure.count = fields.len() as f64;
                measure.bytes = 2.0;
                for (key, field) in fields {
                    nested |= field.is_array() || field.is_object();
                    let of = self.measure(field, false);
                    let key = key.len() as f64;
                    measure.count = measure.count.max(of.count);
                    measure.bytes += key + 4.0 + of.bytes;
                    measure.item = measure.item.max(key + 2.0).max(of.item).max(of.bytes);
                    measure.largest = measure.largest.max(of.bytes).max(key + 2.0);
                }
            }
            _ => measure.bytes = 8.0,
        }
        if (asked && (value.is_array() || value.is_object())) || nested {
            self.measures.insert(std::ptr::from_ref(value), measure);
        }
        measure
    }

    /// The size of `value` as the data a rule sees (its largest count anywhere at least 1).
    pub(crate) fn measured(&mut self, value: &Value) -> Size {
        // Once per node: kept only when it holds maps or lists (measured from their kept
        // measures, it is measured again from them at most once more).
        let measure = self.measure(value, false);
        Size {
            count: measure.count.max(1.0),
            bytes: measure.bytes,
            item: measure.item,
        }
    }

    /// The size of the values `known` (their largest count and bytes, their largest own
    /// element).
    fn size_of(&mut self, known: &[&Value]) -> Size {
        known.iter().fold(EMPTY, |size, value| {
            let measure = self.measure(value, true);
            max_of(
                size,
                Size {
                    count: measure.count,
                    bytes: measure.bytes,
                    item: measure.largest,
                },
            )
        })
    }
}

/// What the estimate knows of an expression's value.
struct Est<'d> {
    cost: f64,
    size: Size,
    /// The data values it may be, when it is a path into `self` or `oldSelf`.
    known: Option<Vec<&'d Value>>,
}

fn est(cost: f64, size: Size) -> Est<'static> {
    Est {
        cost,
        size,
        known: None,
    }
}

/// The size of `value` as the data a rule sees, measured on its own (a policy's variables).
pub(crate) fn measured(value: &Value) -> Size {
    Sizes::new().measured(value)
}

/// The values of `field` in `known` (a property by its escaped name, or a map's key).
fn select<'d>(known: &[&'d Value], field: &str) -> Vec<&'d Value> {
    known
        .iter()
        .filter_map(|value| value.as_object())
        .flat_map(|fields| {
            fields
                .iter()
                .filter(|(key, _)| *key == field || escape(key).as_deref() == Some(field))
                .map(|(_, value)| value)
        })
        .collect()
}

/// The elements of `known` (list items, map values).
fn elements<'d>(known: &[&'d Value]) -> Vec<&'d Value> {
    known
        .iter()
        .flat_map(|value| -> Box<dyn Iterator<Item = &'d Value> + 'd> {
            match value {
                Value::Array(items) => Box::new(items.iter()),
                Value::Object(fields) => Box::new(fields.values()),
                _ => Box::new(std::iter::empty()),
            }
        })
        .collect()
}

/// Functions whose cost does not grow with their arguments' sizes.
const CONSTANT_COST: [&str; 11] = [
    "_[_]",
    "_?_:_",
    "_&&_",
    "_||_",
    "!_",
    "size",
    "@not_strictly_false",
    "orValue",
    "hasValue",
    "value",
    "of",
];

/// Functions giving a boolean or a number.
const SCALAR_RESULT: [&str; 27] = [
    "_==_",
    "_!=_",
    "_<_",
    "_<=_",
    "_>_",
    "_>=_",
    "_&&_",
    "_||_",
    "!_",
    "-_",
    "_-_",
    "_*_",
    "_/_",
    "_%_",
    "@in",
    "@not_strictly_false",
    "size",
    "contains",
    "startsWith",
    "endsWith",
    "matches",
    "indexOf",
    "lastIndexOf",
    "isSorted",
    "sum",
    "int",
    "double",
];

impl<'d> Estimate<'d, '_> {
    /// The cost and size of `expr`; `scope` sizes (and knows) the comprehensions' variables.
    fn of<'a>(
        &mut self,
        expr: &'a IdedExpr,
        scope: &mut Vec<(&'a str, Size, Option<Vec<&'d Value>>)>,
    ) -> Est<'d> {
        self.steps += 1;
        if self.steps > ESTIMATE_STEPS_MAX {
            return est(f64::INFINITY, self.data);
        }
        match &expr.expr {
            Expr::Literal(LiteralValue::String(text)) => est(1.0, literal(text.len())),
            Expr::Literal(LiteralValue::Bytes(bytes)) => est(1.0, literal(bytes.len())),
            Expr::Literal(_) | Expr::Unspecified => est(1.0, SCALAR),
            Expr::Ident(name) => {
                if let Some((_, size, known)) = scope.iter().rev().find(|(n, ..)| n == name) {
                    return Est {
                        cost: 1.0,
                        size: *size,
                        known: known.clone(),
                    };
                }
                let root = self
                    .roots
                    .iter()
                    .find(|(root, _)| root == name)
                    .map(|(_, value)| *value);
                match root {
                    Some(root) => Est {
                        cost: 1.0,
                        size: self.sizes.size_of(&[root]),
                        known: Some(vec![root]),
                    },
                    None => est(1.0, self.data),
                }
            }
            Expr::Select(selection) => {
                // A field's value is an element of its object.
                let operand = self.of(&selection.operand, scope);
                let cost = operand.cost + 1.0;
                if selection.test {
                    // `has(x.f)`: a bool.
                    return est(cost, SCALAR);
                }
                match operand.known {
                    Some(known) => {
                        let found = select(&known, &selection.field);
                        Est {
                            cost,
                            size: self.sizes.size_of(&found),
                            known: Some(found),
                        }
                    }
                    _ => est(cost, part_of(operand.size, self.data)),
                }
            }
            Expr::List(_) | Expr::Map(_) | Expr::Struct(_) => {
                let parts = children(expr);
                let (mut cost, mut size) = (
                    1.0,
                    Size {
                        bytes: 2.0,
                        ..EMPTY
                    },
                );
                for part in &parts {
                    let Est {
                        cost: c, size: s, ..
                    } = self.of(part, scope);
                    cost += c;
                    size.bytes += s.bytes + 1.0;
                    size.item = size.item.max(s.bytes);
                    size.count = size.count.max(s.count);
                }
                size.count = size.count.max(parts.len() as f64);
                est(cost, size)
            }
            Expr::Call(call) => {
                let function = call.func_name.as_str();
                let accumulators: Vec<&str> = scope
                    .iter()
                    .filter(|(n, ..)| n.starts_with('@') || *n == "__result__")
                    .map(|(n, ..)| *n)
                    .collect();
                let mut cost = 1.0;
                let mut sizes = Vec::new();
                let mut touched = 0.0;
                let mut indexed = None;
                let arguments = call.target.as_deref().into_iter().chain(&call.args);
                for (at, arg) in arguments.enumerate() {
                    let Est {
                        cost: c,
                        size: s,
                        known,
                    } = self.of(arg, scope);
                    if at == 0 && function == "_[_]" && call.target.is_none() {
                        indexed = known;
                    }
                    cost += c;
                    let accumulator =
                        matches!(&arg.expr, Expr::Ident(n) if accumulators.contains(&n.as_str()));
                    if !accumulator {
                        touched += s.bytes;
                    }
                    sizes.push(s);
                }
                let on_sets = matches!(
                    call.target.as_deref().map(|t| &t.expr),
                    Some(Expr::Ident(namespace)) if namespace == "sets"
                ) && sets::FUNCTIONS.contains(&function);
                if function == "check" {
                    // An authorization check: kube's fixed cost, whatever it is given.
                    cost += authz::CHECK_COST;
                } else if on_sets {
                    // Each element of one list compared with each of the other (the
                    // namespace, `sizes[0]`, is no data).
                    let length = |at: usize| sizes.get(at).map_or(0.0, |s: &Size| s.count);
                    cost += length(1) * length(2) + 0.1 * (touched - sizes[0].bytes);
                } else if !CONSTANT_COST.contains(&function)
                    && !authz::FUNCTIONS.contains(&function)
                    && !quantity::FUNCTIONS.contains(&function)
                    && !net::FUNCTIONS.contains(&function)
                {
                    cost += 0.1 * touched;
                }
                // A pattern that is not a literal is compiled when the call runs (at most
                // 1 MiB of program, and kept): charged as a thousand steps.
                let pattern = match (function, call.target.is_some()) {
                    ("matches" | "find" | "findAll", true) => call.args.first(),
                    ("matches", false) => call.args.get(1),
                    _ => None,
                };
                if pattern
                    .is_some_and(|p| !matches!(p.expr, Expr::Literal(LiteralValue::String(_))))
                {
                    cost += PATTERN_COMPILE_COST;
                }
                // `transformMap`'s map built from its entries (or maps merged): each entry
                // hashed and moved once, besides the bytes read.
                if function == comprehensions::TO_MAP {
                    cost += MAP_ENTRY_COST * sizes.first().map_or(0.0, |s| s.count);
                }
                let first = sizes.first().copied().unwrap_or(SCALAR);
                let total = sizes.iter().map(|s| s.bytes).sum::<f64>();
                let size = match function {
                    _ if on_sets || SCALAR_RESULT.contains(&function) => SCALAR,
                    // A list's indices or a map's keys: one per element of the range.
                    "@keys" => first,
                    "_[_]" | "min" | "max" => part_of(first, self.data),
                    "_?_:_" => sizes.iter().skip(1).fold(EMPTY, |a, s| max_of(a, *s)),
                    "_+_" => Size {
                        count: sizes.iter().map(|s| s.count).sum(),
                        bytes: total,
                        item: sizes.iter().map(|s| s.item).fold(0.0, f64::max),
                    },
                    "replace" => {
                        let with = sizes.get(2).copied().unwrap_or(SCALAR);
                        let bytes = first.bytes * (1.0 + with.bytes);
                        Size {
                            count: bytes,
                            bytes,
                            item: 0.0,
                        }
                    }
                    "join" => {
                        let separator = sizes.get(1).map_or(0.0, |s| s.bytes);
                        let bytes = first.bytes + first.count * separator;
                        Size {
                            count: bytes,
                            bytes,
                            item: 0.0,
                        }
                    }
                    "split" | "findAll" => Size {
                        count: first.bytes + 1.0,
                        bytes: 3.0 * first.bytes + 2.0,
                        item: first.bytes,
                    },
                    // Anything else is built from its arguments.
                    _ => Size {
                        count: total,
                        bytes: total,
                        item: total,
                    },
                };
                if let Some(known) = indexed {
                    // An index into data: the element it names, or any element.
                    let found = match call.args.get(1).map(|i| &i.expr) {
                        Some(Expr::Literal(LiteralValue::String(key))) => select(&known, key),
                        _ => elements(&known),
                    };
                    return Est {
                        cost,
                        size: self.sizes.size_of(&found),
                        known: Some(found),
                    };
                }
                est(cost, size)
            }
            Expr::Comprehension(c) => {
                let Est {
                    cost: range_cost,
                    size: range,
                    known,
                } = self.of(&c.iter_range, scope);
                let Est {
                    cost: init_cost,
                    size: init,
                    ..
                } = self.of(&c.accu_init, scope);
                // Over a list of the data: its items as they are (over a map, its keys).
                let (item, item_known) = match known {
                    Some(known) if known.iter().all(|v| v.is_array()) => {
                        let items = elements(&known);
                        (self.sizes.size_of(&items), Some(items))
                    }
                    _ => (part_of(range, self.data), None),
                };
                let outer = scope.len();
                scope.push((&c.iter_var, item, item_known.clone()));
                if let Some(second) = &c.iter_var2 {
                    scope.push((second, item, item_known));
                }
                // A step's cost does not depend on the accumulator's size (the macros only
                // append to it, test it or count with it, and an append is not charged by
                // the accumulator's bytes, as the evaluation appends in place), so one
                // estimate with the initial accumulator gives the cost and what a step adds.
                scope.push((&c.accu_var, init, None));
                let Est {
                    cost: step_cost,
                    size: first_step,
                    ..
                } = self.of(&c.loop_step, scope);
                scope.pop();
                let growth = (first_step.bytes - init.bytes).max(0.0);
                let accumulator = Size {
                    count: init.count + range.count,
                    bytes: init.bytes + range.count * growth,
                    item: init.item.max(growth).max(first_step.item),
                };
                scope.push((&c.accu_var, accumulator, None));
                let cond_cost = self.of(&c.loop_cond, scope).cost;
                scope.truncate(outer);
                scope.push((&c.accu_var, accumulator, None));
                let result = self.of(&c.result, scope);
                scope.truncate(outer);
                let cost =
                    range_cost + init_cost + range.count * (cond_cost + step_cost) + result.cost;
                est(cost, result.size)
            }
        }
    }
}

/// The size of a string or bytes literal of `n` bytes.
fn literal(n: usize) -> Size {
    let n = n as f64;
    Size {
        count: n,
        bytes: n + 2.0,
        item: 0.0,
    }
}

/// The size of an element of a value of size `of` (a field, an item, an entry's key or
/// value): no more bytes than its largest element, no longer than anything in the data.
fn part_of(of: Size, data: Size) -> Size {
    Size {
        count: of.count.max(data.count),
        bytes: of.item.min(of.bytes),
        item: of.item.min(of.bytes),
    }
}

/// The bound of evaluating `compiled` on values of sizes `data`, `roots` the variables bound to
/// data and their values.
fn bound(
    compiled: &Compiled,
    data: Size,
    roots: &[(&'static str, &Value)],
    sizes: &mut Sizes,
) -> f64 {
    let mut estimate = Estimate {
        data,
        roots,
        steps: 0,
        sizes,
    };
    estimate
        .of(compiled.program.expression(), &mut Vec::new())
        .cost
}

/// The nearest node that correlates with the old object, for ratcheting: its schema, value
/// and old value.
type Correlated<'a> = Option<(&'a Map<String, Value>, &'a Value, &'a Value)>;

/// Evaluates every rule of `schema` on `object` (and `old` on an update); see the module's
/// guarantees. The causes' fields are relative to the object.
pub fn check(schema: &Value, rules: &RuleTree, object: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut walk = Walk {
        budget: RUNTIME_BUDGET,
        causes: Vec::new(),
        stopped: false,
        tasks: Vec::new(),
        sizes: Sizes::new(),
        conversions: Conversions::default(),
        steps: Vec::new(),
        compared: Comparisons::new(),
    };
    let root = schema.as_object().zip(old).map(|(s, o)| (s, object, o));
    // The walk finds the nodes with rules; their evaluations then run together on one large
    // stack (none is reserved for an object without rules).
    walk.node(schema, rules, object, old, root, None, true);
    let tasks = std::mem::take(&mut walk.tasks);
    let steps = std::mem::take(&mut walk.steps);
    if !tasks.is_empty() {
        for task in &tasks {
            walk.conversions.want(task.schema, task.value);
            if let Some(old) = task.old {
                walk.conversions.want(task.schema, old);
            }
        }
        stacker::grow(EVALUATE_STACK, || {
            for task in &tasks {
                if walk.stopped {
                    break;
                }
                walk.rules(task, &steps);
            }
            // Dropped here, where the stack has room for their depth.
            drop(std::mem::take(&mut walk.conversions));
        });
    }
    walk.causes
}

/// Where a schema's rules are: the parts of the schema the walk descends (`properties`,
/// `additionalProperties`, `items`) with a rule at or below them, so that a walk visits only
/// the parts of an object some rule looks at. Built once per served CRD version
/// ([`RuleTree::of`], kept with it), because finding them is a search of the whole schema:
/// measured, 436 µs for Envoy Gateway's `EnvoyProxy` schema (1.4 MB of YAML, release build),
/// paid by every write before the tree was kept.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RuleTree {
    properties: HashMap<String, RuleTree>,
    additional: Option<Box<RuleTree>>,
    items: Option<Box<RuleTree>>,
}

impl RuleTree {
    /// The tree of `schema`'s rules; `None` when it has none (on itself, its `allOf`, or
    /// below).
    #[must_use]
    pub fn of(schema: &Value) -> Option<RuleTree> {
        let s = schema.as_object()?;
        let own = |s: &Map<String, Value>| {
            s.get("x-kubernetes-validations")
                .and_then(Value::as_array)
                .is_some_and(|rules| !rules.is_empty())
        };
        let here = own(s)
            || s.get("allOf")
                .and_then(Value::as_array)
                .is_some_and(|all| all.iter().filter_map(Value::as_object).any(own));
        let properties: HashMap<String, RuleTree> = s
            .get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter_map(|(name, sub)| Some((name.clone(), RuleTree::of(sub)?)))
            .collect();
        let additional = s
            .get("additionalProperties")
            .and_then(RuleTree::of)
            .map(Box::new);
        let items = s.get("items").and_then(RuleTree::of).map(Box::new);
        (here || !properties.is_empty() || additional.is_some() || items.is_some()).then_some(
            RuleTree {
                properties,
                additional,
                items,
            },
        )
    }
}

struct Walk<'a> {
    budget: f64,
    causes: Vec<Cause>,
    stopped: bool,
    tasks: Vec<Task<'a>>,
    sizes: Sizes,
    /// The values converted for the rules, shared between the nodes.
    conversions: Conversions,
    /// The places of the nodes walked.
    steps: Vec<Step<'a>>,
    /// Whether nodes are unchanged on an update (for ratcheting), as compared so far.
    compared: Comparisons,
}

/// The rules of one schema node (or of one of its `allOf`) to evaluate on one value.
struct Task<'a> {
    rules: &'a [Value],
    schema: &'a Map<String, Value>,
    value: &'a Value,
    old: Option<&'a Value>,
    correlated: Correlated<'a>,
    /// Its step in [`Walk::steps`] (`None` at the root).
    path: Option<usize>,
    resource: bool,
}

/// A node's place in the object: a step from its parent's place, so that the walk takes one
/// step per level instead of copying its parent's text (`d²` bytes for nodes with rules at
/// each of `d` nested levels); the text is written only for a cause.
struct Step<'a> {
    parent: Option<usize>,
    kind: StepKind<'a>,
}

enum StepKind<'a> {
    /// `.name` (`name` at the root).
    Field(&'a str),
    /// `[key]`, a key of `additionalProperties`.
    Key(&'a str),
    /// `[index]`.
    Index(usize),
}

/// The text of the path at `at` (`""` for the root): `spec.items[0].labels[app]`.
fn path_text(steps: &[Step<'_>], at: Option<usize>) -> String {
    let mut chain = Vec::new();
    let mut at = at;
    while let Some(step) = at.and_then(|at| steps.get(at)) {
        chain.push(step);
        at = step.parent;
    }
    let mut text = String::new();
    for step in chain.into_iter().rev() {
        match step.kind {
            StepKind::Field(name) => {
                if !text.is_empty() {
                    text.push('.');
                }
                text.push_str(name);
            }
            StepKind::Key(key) => {
                text.push('[');
                text.push_str(key);
                text.push(']');
            }
            StepKind::Index(index) => {
                text.push('[');
                text.push_str(&index.to_string());
                text.push(']');
            }
        }
    }
    text
}

fn child(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_owned()
    } else {
        format!("{path}.{name}")
    }
}

impl<'a> Walk<'a> {
    #[allow(clippy::too_many_arguments)]
    fn node(
        &mut self,
        schema: &'a Value,
        tree: &RuleTree,
        value: &'a Value,
        old: Option<&'a Value>,
        correlated: Correlated<'a>,
        path: Option<usize>,
        resource: bool,
    ) {
        let Value::Object(s) = schema else { return };
        if value.is_null() {
            return;
        }
        let old = old.filter(|o| !o.is_null());
        self.task(s, s, value, old, correlated, path, resource);
        for sub in s
            .get("allOf")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(sub) = sub.as_object() {
                // kube does not ratchet allOf's rules by their node.
                let parent = correlated.filter(|(_, v, _)| !std::ptr::eq(*v, value));
                self.task(sub, s, value, old, parent, path, resource);
            }
        }
        match value {
            Value::Object(fields) => {
                let properties = s.get("properties").and_then(Value::as_object);
                let additional = s.get("additionalProperties").filter(|a| a.is_object());
                for (key, field) in fields {
                    let (sub, below, declared) =
                        match (properties.and_then(|p| p.get(key)), additional) {
                            (Some(sub), _) => (sub, tree.properties.get(key), true),
                            (None, Some(sub)) => (sub, tree.additional.as_deref(), false),
                            (None, None) => continue,
                        };
                    // No rule at or below it.
                    let Some(below) = below else { continue };
                    if resource && key == "metadata" {
                        continue;
                    }
                    let at = self.step(
                        path,
                        if declared {
                            StepKind::Field(key)
                        } else {
                            StepKind::Key(key)
                        },
                    );
                    let old_field = old.and_then(|o| o.get(key));
                    let here = match (sub.as_object(), old_field) {
                        (Some(sub), Some(old_field)) => Some((sub, field, old_field)),
                        _ => correlated,
                    };
                    let embedded = sub
                        .as_object()
                        .is_some_and(|s| flag(s, "x-kubernetes-embedded-resource"));
                    self.node(sub, below, field, old_field, here, at, embedded);
                }
            }
            Value::Array(items) => {
                let (Some(item_schema), Some(below)) = (s.get("items"), tree.items.as_deref())
                else {
                    return;
                };
                let list_type = s.get("x-kubernetes-list-type").and_then(Value::as_str);
                let old_items = old.and_then(Value::as_array);
                let map_items = match (list_type, old_items) {
                    (Some("map"), Some(old_items)) => MapItems::new(s, old_items),
                    _ => None,
                };
                let embedded = item_schema
                    .as_object()
                    .is_some_and(|s| flag(s, "x-kubernetes-embedded-resource"));
                for (index, item) in items.iter().enumerate() {
                    let by_keys = match (list_type, old_items) {
                        (Some("map"), Some(_)) => map_items.as_ref().and_then(|m| m.get(item)),
                        _ => None,
                    };
                    let by_index = match (list_type, old_items) {
                        (Some("map"), _) => by_keys,
                        (None, Some(old_items)) => old_items.get(index),
                        _ => None,
                    };
                    let here = match (item_schema.as_object(), by_index) {
                        (Some(sub), Some(old_item)) => Some((sub, item, old_item)),
                        _ => correlated,
                    };
                    let at = self.step(path, StepKind::Index(index));
                    self.node(item_schema, below, item, by_keys, here, at, embedded);
                }
            }
            _ => {}
        }
    }

    /// Keeps the rules of `rules_at` (the node's schema, or one of its `allOf`) for the node
    /// `schema` describes, if it has any.
    #[allow(clippy::too_many_arguments)]
    fn task(
        &mut self,
        rules_at: &'a Map<String, Value>,
        schema: &'a Map<String, Value>,
        value: &'a Value,
        old: Option<&'a Value>,
        correlated: Correlated<'a>,
        path: Option<usize>,
        resource: bool,
    ) {
        if let Some(rules) = rules_at
            .get("x-kubernetes-validations")
            .and_then(Value::as_array)
            .filter(|rules| !rules.is_empty())
        {
            self.tasks.push(Task {
                rules,
                schema,
                value,
                old,
                correlated,
                path,
                resource,
            });
        }
    }

    /// The place one `kind` of step below `parent`.
    fn step(&mut self, parent: Option<usize>, kind: StepKind<'a>) -> Option<usize> {
        self.steps.push(Step { parent, kind });
        Some(self.steps.len() - 1)
    }

    /// Evaluates one node's rules.
    fn rules(&mut self, task: &Task<'_>, steps: &[Step<'_>]) {
        let Task {
            rules,
            schema,
            value,
            old,
            correlated,
            path,
            resource,
        } = *task;
        // Written only for a cause.
        let path = || path_text(steps, path);
        let type_name = go_quote(schema.get("type").and_then(Value::as_str).unwrap_or(""));
        // `self` (and `oldSelf`, only for rules that use it) converted and measured once for
        // the node's rules.
        let mut bound_self: Option<(Box<dyn Val>, Size)> = None;
        let mut bound_old: Option<(Bound, Size)> = None;
        for rule in rules {
            if self.stopped {
                return;
            }
            let text = |key: &str| rule.get(key).and_then(Value::as_str).unwrap_or("");
            let source = text("rule");
            if source.trim().is_empty() {
                continue;
            }
            let error_string = if text("message").is_empty() {
                source.trim().to_owned()
            } else {
                text("message").trim().to_owned()
            };
            let compiled = match compile(source) {
                Ok(compiled) => compiled,
                Err(e) => {
                    self.cause(|| {
                        invalid(
                            &path(),
                            &type_name,
                            &format!("rule compile error: compilation failed: {e}"),
                        )
                    });
                    continue;
                }
            };
            let optional_old_self = rule
                .get("optionalOldSelf")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            if compiled.uses_old_self && old.is_none() && !optional_old_self {
                continue;
            }
            if bound_self.is_none() {
                let size = self.sizes.measured(value);
                if !self.convert(schema, value, size) {
                    return;
                }
                let converted = self.conversions.node(schema, value, resource);
                bound_self = Some((converted, size));
            }
            let uses_old = compiled.uses_old_self || text("messageExpression").contains("oldSelf");
            if uses_old && bound_old.is_none() {
                let size = old.map_or(EMPTY, |old| self.sizes.measured(old));
                if let Some(old) = old
                    && !self.convert(schema, old, size)
                {
                    return;
                }
                let converted = old.map(|o| self.conversions.node(schema, o, resource));
                bound_old = Some((Bound::new(converted), size));
            }
            let Some((self_value, self_data)) = &bound_self else {
                return;
            };
            let (old_bound, data) = match (&bound_old, uses_old) {
                (Some((bound, old_data)), true) => (Some(bound), max_of(*self_data, *old_data)),
                _ => (None, *self_data),
            };
            let data = &data;
            let self_value = self_value.as_ref();
            let old_value = old_bound.and_then(|b| b.plain.as_deref());
            let old_self = if optional_old_self {
                old_bound.map(|b| b.optional.as_ref())
            } else {
                old_value
            };
            let what = format!("rule: {error_string}");
            let outcome =
                self.evaluate(&compiled, self_value, old_self, *data, (value, old), &what);
            let passed = match outcome {
                Ok(cel::Value::Bool(passed)) => passed,
                Ok(_) => {
                    self.causes.push(invalid(
                        &path(),
                        &type_name,
                        &format!(
                            "rule compile error: cel expression must evaluate to a bool: {error_string}"
                        ),
                    ));
                    continue;
                }
                // (`evaluate` words the limits as a `Stop`.)
                Err(Failure::Skip | Failure::CallLimit | Failure::Budget) => continue,
                Err(Failure::Stop(detail)) => {
                    self.causes.push(invalid(&path(), &type_name, &detail));
                    self.stopped = true;
                    return;
                }
                Err(Failure::Error(e)) => {
                    self.cause(|| {
                        let detail = match e {
                            Some(e) => format!("{e} evaluating rule: {error_string}"),
                            None => format!(
                                "'no such overload': call arguments did not match a supported operator, function or macro signature for rule: {error_string}"
                            ),
                        };
                        invalid(&path(), &type_name, &detail)
                    });
                    continue;
                }
            };
            if passed {
                continue;
            }
            // Written only for a cause.
            let at = || match text("fieldPath") {
                "" => path(),
                field_path => match normalized_field_path(schema, field_path) {
                    Ok(relative) if relative.starts_with('[') => {
                        format!("{}{relative}", path())
                    }
                    Ok(relative) => child(&path(), &relative),
                    Err(_) => path(),
                },
            };
            let mut detail = None;
            let expression = text("messageExpression");
            if !expression.trim().is_empty()
                && let Ok(message_program) = compile(expression)
            {
                let what = format!("messageExpression: {}", go_quote(expression));
                match self.evaluate(
                    &message_program,
                    self_value,
                    old_value,
                    *data,
                    (value, old),
                    &what,
                ) {
                    Ok(cel::Value::String(s)) => {
                        let trimmed = s.trim();
                        if !trimmed.is_empty()
                            && trimmed.len() <= MESSAGE_EXPRESSION_BYTES_MAX
                            && !trimmed.contains('\n')
                        {
                            detail = Some(trimmed.to_owned());
                        }
                    }
                    Err(Failure::Stop(_)) => {
                        self.causes.push(invalid(
                            &at(),
                            &type_name,
                            "messageExpression evaluation failed due to running out of cost budget, no further validation rules will be run",
                        ));
                        self.stopped = true;
                        return;
                    }
                    _ => {}
                }
            }
            let ratcheted = !compiled.uses_old_self
                && correlated.is_some_and(|(s, v, o)| unchanged_kept(s, v, o, &mut self.compared));
            if ratcheted {
                continue;
            }
            self.cause(|| {
                let detail = detail.unwrap_or_else(|| {
                    if text("message").is_empty() {
                        format!("failed rule: {error_string}")
                    } else {
                        error_string.clone()
                    }
                });
                let at = at();
                match text("reason") {
                    "FieldValueForbidden" => forbidden(&at, &detail),
                    "FieldValueRequired" => required(&at, &detail),
                    "FieldValueDuplicate" => duplicate(&at, &type_name),
                    _ => invalid(&at, &type_name, &detail),
                }
            });
        }
    }

    /// Adds the cause `make` writes; past the causes an answer carries
    /// (`error::invalid_causes_max`) only counts it, as an empty cause the answer drops (the
    /// rules' causes come after the schema's): a rule false at each of `d` nested levels would
    /// otherwise write `d` paths of up to `d` steps each (`d²` bytes: 100 MB for a body of 60 KB
    /// nested 10,000 levels).
    fn cause(&mut self, make: impl FnOnce() -> Cause) {
        if self.causes.len() < crate::error::invalid_causes_max() {
            self.causes.push(make());
        } else {
            self.causes
                .push((String::new(), String::new(), String::new()));
        }
    }

    /// Charges the conversion of a node's `value` of `size` for its rules (its bytes, twice:
    /// the conversion and its drop took ~75 ns per byte, two units' worth; nothing when it was
    /// converted with a node above it, as its parent's entry); `false` when the budget is
    /// spent, with the cause.
    fn convert(&mut self, schema: &Map<String, Value>, value: &Value, size: Size) -> bool {
        if self.conversions.has(schema, value) {
            return true;
        }
        let cost = CONVERSION_COST_PER_BYTE * size.bytes;
        if cost > self.budget {
            self.causes.push(invalid(
                "<nil>",
                "\"null\"",
                "validation failed due to running out of cost budget, no further validation rules will be run",
            ));
            self.stopped = true;
            return false;
        }
        self.budget -= cost;
        true
    }

    /// Runs `compiled` within its cost bound and the object's budget.
    fn evaluate(
        &mut self,
        compiled: &Compiled,
        self_value: &dyn Val,
        old_self: Option<&dyn Val>,
        data: Size,
        json: (&Value, Option<&Value>),
        what: &str,
    ) -> Result<cel::Value, Failure> {
        let both = [("self", json.0), ("oldSelf", json.1.unwrap_or(json.0))];
        let roots = if json.1.is_some() {
            &both[..]
        } else {
            &both[..1]
        };
        let bindings = Bindings {
            self_value,
            old_self,
        };
        let metered = Metered {
            data,
            roots,
            resolver: &bindings,
        };
        run(compiled, &metered, &mut self.budget, &mut self.sizes).map_err(|failure| {
            match failure {
                Failure::CallLimit => Failure::Stop(format!(
                    "'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for {what}"
                )),
                Failure::Budget => Failure::Stop(
                    "validation failed due to running out of cost budget, no further validation rules will be run".to_owned(),
                ),
                other => other,
            }
        })
    }
}

/// What one evaluation runs on: the size of its data, the variables bound to data with their
/// JSON values (for the bound), and the resolver that lends their converted values.
pub(crate) struct Metered<'r> {
    pub(crate) data: Size,
    pub(crate) roots: &'r [(&'static str, &'r Value)],
    pub(crate) resolver: &'r dyn VariableResolver,
}

/// Runs `compiled` within its cost bound ([`PER_CALL_LIMIT`]) and `budget` (lowered by the
/// bound); the value, or why not.
pub(crate) fn run(
    compiled: &Compiled,
    on: &Metered<'_>,
    budget: &mut f64,
    sizes: &mut Sizes,
) -> Result<cel::Value, Failure> {
    let cost = bound(compiled, on.data, on.roots, sizes) + EVALUATION_COST;
    if cost > PER_CALL_LIMIT {
        return Err(Failure::CallLimit);
    }
    if cost > *budget {
        return Err(Failure::Budget);
    }
    *budget -= cost;
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let mut context = cel::Context::with_env(environment().clone());
        context.set_variable_resolver(on.resolver);
        compiled.program.execute(&context)
    }));
    match outcome {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(match e {
            // A function of kube's libraries this server does not have: the rule is skipped.
            ExecutionError::UndeclaredReference(_) => Failure::Skip,
            ExecutionError::NoSuchKey(key) => Failure::Error(Some(format!("no such key: {key}"))),
            ExecutionError::IndexOutOfBounds(index) => Failure::Error(Some(format!(
                "index out of bounds: {}",
                match index {
                    cel::Value::Int(i) => i.to_string(),
                    cel::Value::UInt(u) => u.to_string(),
                    other => format!("{other:?}"),
                }
            ))),
            ExecutionError::DivisionByZero(_) => {
                Failure::Error(Some("division by zero".to_owned()))
            }
            ExecutionError::Overflow(..) => Failure::Error(Some("integer overflow".to_owned())),
            ExecutionError::FunctionError { message, .. } => Failure::Error(Some(message)),
            ExecutionError::NoSuchOverload(_)
            | ExecutionError::UnsupportedBinaryOperator(..)
            | ExecutionError::UnexpectedType { .. } => Failure::Error(None),
            other => Failure::Error(Some(other.to_string())),
        }),
        Err(_) => Err(Failure::Error(Some("evaluation failed".to_owned()))),
    }
}

/// `self` and `oldSelf`, lent to each evaluation of a node's rules (converted once).
struct Bindings<'a> {
    self_value: &'a dyn Val,
    old_self: Option<&'a dyn Val>,
}

impl VariableResolver for Bindings<'_> {
    fn resolve<'b>(&'b self, variable: &str) -> Option<CowVal<'b, 'b>> {
        match variable {
            "self" => Some(CowVal::Borrowed(self.self_value)),
            "oldSelf" => self.old_self.map(CowVal::Borrowed),
            _ => None,
        }
    }
}

/// A converted value in the form evaluations borrow.
pub(crate) fn lendable(value: cel::Value) -> Box<dyn Val> {
    let converted: Result<Box<dyn Val>, _> = value.try_into();
    // Every value `to_cel` builds converts; null stands for one that would not.
    converted.unwrap_or_else(|_| Box::new(cel::common::types::CelNull))
}

pub(crate) enum Failure {
    /// The rule calls a function this server does not have.
    Skip,
    /// An evaluation error; `None` for a call no overload matches.
    Error(Option<String>),
    /// The cost limit or budget is reached: this cause, and no further rule.
    Stop(String),
    /// The bound passes [`PER_CALL_LIMIT`] (not run).
    CallLimit,
    /// The bound passes the budget left (not run).
    Budget,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn compile_error(text: &str) -> Option<String> {
        compile(text).err()
    }

    fn messages(schema: &Value, object: &Value, old: Option<&Value>) -> Vec<String> {
        let Some(rules) = RuleTree::of(schema) else {
            return Vec::new();
        };
        check(schema, &rules, object, old)
            .into_iter()
            .map(|(field, message, _)| format!("{field}: {message}"))
            .collect()
    }

    fn spec(rules: Value, properties: Value) -> Value {
        json!({"type": "object", "properties": {"spec": {
            "type": "object", "properties": properties, "x-kubernetes-validations": rules}}})
    }

    #[test]
    fn a_false_rule_is_a_cause_with_its_message_reason_and_field_path() {
        let schema = spec(
            json!([
                {"rule": "self.replicas <= self.max", "message": "replicas must not exceed max"},
                {"rule": "self.replicas <= self.max"},
                {"rule": "self.replicas <= self.max", "reason": "FieldValueForbidden",
                 "fieldPath": ".replicas", "message": "too many"},
                {"rule": "self.replicas <= self.max", "reason": "FieldValueRequired",
                 "messageExpression": "'replicas ' + string(self.replicas) + ' > ' + string(self.max)"},
                {"rule": "self.replicas <= self.max", "reason": "FieldValueDuplicate"},
                {"rule": "self.replicas > 0"}
            ]),
            json!({"replicas": {"type": "integer"}, "max": {"type": "integer"}}),
        );
        let object = json!({"spec": {"replicas": 5, "max": 3}});
        assert_eq!(
            messages(&schema, &object, None),
            [
                "spec: Invalid value: \"object\": replicas must not exceed max",
                "spec: Invalid value: \"object\": failed rule: self.replicas <= self.max",
                "spec.replicas: Forbidden: too many",
                "spec: Required value: replicas 5 > 3",
                "spec: Duplicate value: \"object\"",
            ]
        );
        assert!(messages(&schema, &json!({"spec": {"replicas": 3, "max": 3}}), None).is_empty());
    }

    #[test]
    fn values_are_typed_by_the_schema_and_names_escaped_as_kube_escapes_them() {
        let schema = spec(
            json!([
                {"rule": "self.ratio == 1.0 && self.count + 1 == 2"},
                {"rule": "self.x__dash__y == 'a' && self.__namespace__ == 'b'"},
                {"rule": "!has(self.absent) && has(self.count)"},
                {"rule": "self.tags.all(t, t.size() < 4) && self.tags.exists_one(t, t == 'ab')"},
                {"rule": "self.labels.all(k, self.labels[k].startsWith(k))"},
                {"rule": "self.name.lowerAscii().replace('-', '') == 'ab'"}
            ]),
            json!({
                "ratio": {"type": "number"}, "count": {"type": "integer"},
                "x-y": {"type": "string"}, "namespace": {"type": "string"},
                "absent": {"type": "string"}, "name": {"type": "string"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}}
            }),
        );
        let object = json!({"spec": {"ratio": 1, "count": 1, "x-y": "a", "namespace": "b",
            "name": "A-b", "tags": ["ab", "cd"], "labels": {"k": "k1"}}});
        assert_eq!(messages(&schema, &object, None), Vec::<String>::new());
        let object = json!({"spec": {"ratio": 1, "count": 1, "x-y": "a", "namespace": "b",
            "name": "A-b", "tags": ["ab", "ab"], "labels": {"k": "v"}}});
        assert_eq!(
            messages(&schema, &object, None),
            [
                "spec: Invalid value: \"object\": failed rule: self.tags.all(t, t.size() < 4) && self.tags.exists_one(t, t == 'ab')",
                "spec: Invalid value: \"object\": failed rule: self.labels.all(k, self.labels[k].startsWith(k))",
            ]
        );
    }

    #[test]
    fn evaluation_errors_name_the_rule() {
        let schema = spec(
            json!([
                {"rule": "self.missing == 1"},
                {"rule": "self.items[3] == 1", "message": "third"},
                {"rule": "self.count / 0 == 1"},
                {"rule": "self.count + 'a' == 1"},
            ]),
            json!({"missing": {"type": "integer"}, "count": {"type": "integer"},
                   "items": {"type": "array", "items": {"type": "integer"}},
                   "m": {"type": "object", "additionalProperties": {"type": "integer"}}}),
        );
        let object = json!({"spec": {"count": 1, "items": [2, 1], "m": {"a": 1}}});
        assert_eq!(
            messages(&schema, &object, None),
            [
                "spec: Invalid value: \"object\": no such key: missing evaluating rule: self.missing == 1",
                "spec: Invalid value: \"object\": index out of bounds: 3 evaluating rule: third",
                "spec: Invalid value: \"object\": division by zero evaluating rule: self.count / 0 == 1",
                "spec: Invalid value: \"object\": 'no such overload': call arguments did not match a supported operator, function or macro signature for rule: self.count + 'a' == 1",
            ]
        );
    }

    /// Each of `rules` holds on `object` and ran (a rule calling a function this server lacks
    /// is skipped and says nothing either way): negated, each fails.
    fn each_ran_and_holds<'a>(
        rules: impl IntoIterator<Item = &'a str>,
        properties: Value,
        object: &Value,
    ) {
        let negated: Vec<Value> = rules
            .into_iter()
            .map(|r| json!({"rule": format!("!({r})")}))
            .collect();
        let count = negated.len();
        let refused = messages(&spec(Value::Array(negated), properties), object, None);
        assert_eq!(refused.len(), count, "{refused:?}");
        assert!(
            refused.iter().all(|m| m.contains("failed rule: !(")),
            "{refused:?}"
        );
    }

    /// kube's quantity library and cel-go's sets extension run as in kube (they were
    /// skipped before): results, equality by amount, errors with kube's words.
    #[test]
    fn quantity_and_sets_libraries_run_as_kubes() {
        let rules = [
            "quantity(self.limit).isLessThan(quantity('1Gi'))",
            "quantity(self.limit).compareTo(quantity('2048Mi')) == 0",
            "quantity('1') == quantity('1000m') && quantity('1') != quantity('2')",
            "quantity(self.limit).add(1).sub(quantity('1')) == quantity(self.limit)",
            "quantity('1').sub(2).sign() == -1 && quantity('0').sign() == 0",
            "quantity('1.5').isInteger()",
            "quantity('1k').asInteger() == 1000 && quantity('500m').asApproximateFloat() == 0.5",
            "isQuantity('abc') || !isQuantity('1Gi')",
            "quantity('abc').sign() == 0",
            "quantity('1.5').asInteger() == 1",
            "quantity('1Gi').isGreaterThan(quantity('1Mi'))",
            "sets.contains(self.tags, ['a']) && !sets.contains(self.tags, ['z'])",
            "sets.contains(self.tags, [])",
            "sets.equivalent([1, 2], [2, 1, 1.0]) && !sets.equivalent([1], [1, 2])",
            "sets.intersects(self.tags, [])",
            "sets.intersects([1], [1.0]) && sets.intersects([[1]], [[1], [2]])",
        ];
        let validations: Vec<Value> = rules.iter().map(|r| json!({"rule": r})).collect();
        let schema = spec(
            Value::Array(validations),
            json!({"limit": {"type": "string"},
                   "tags": {"type": "array", "items": {"type": "string"}}}),
        );
        let object = json!({"spec": {"limit": "2Gi", "tags": ["a", "b"]}});
        let refused = |rule: &str| format!("spec: Invalid value: \"object\": failed rule: {rule}");
        let errored = |error: &str, rule: &str| {
            format!("spec: Invalid value: \"object\": {error} evaluating rule: {rule}")
        };
        assert_eq!(
            messages(&schema, &object, None),
            [
                refused(rules[0]),
                refused(rules[5]),
                refused(rules[7]),
                errored(
                    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
                    rules[8]
                ),
                errored("cannot convert value to integer", rules[9]),
                refused(rules[14]),
            ]
        );
        // The rules that hold ran (a skipped one would say nothing either): negated, each fails.
        let holding = [1, 2, 3, 4, 6, 10, 11, 12, 13, 15];
        each_ran_and_holds(
            holding.iter().map(|&i| rules[i]),
            json!({"limit": {"type": "string"},
                   "tags": {"type": "array", "items": {"type": "string"}}}),
            &object,
        );
        // A string function reads its string each time: a long one read in a loop is charged
        // for every read (`quantity()` and `ip()` were charged as constants).
        for rule in [
            "self.tags.all(t, !isQuantity(self.limit))",
            "self.tags.all(t, !isIP(self.limit))",
        ] {
            let object = json!({"spec": {"limit": "9".repeat(400_000), "tags": vec!["t"; 1_000]}});
            let schema = spec(
                json!([{"rule": rule}]),
                json!({"limit": {"type": "string"},
                       "tags": {"type": "array", "items": {"type": "string"}}}),
            );
            let found = messages(&schema, &object, None);
            assert!(
                found.len() == 1 && found[0].contains("call cost exceeds limit"),
                "{rule}: {found:?}"
            );
        }
        // The comparisons of one call are bounded: two lists of 2,000 are 4 M comparisons.
        let long: Vec<String> = (0..2_000).map(|i| format!("t{i}")).collect();
        let object = json!({"spec": {"limit": "1", "tags": long}});
        let schema = spec(
            json!([{"rule": "sets.intersects(self.tags, self.tags.map(t, t + 'x'))"}]),
            json!({"limit": {"type": "string"},
                   "tags": {"type": "array", "items": {"type": "string"}}}),
        );
        let found = messages(&schema, &object, None);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("call cost exceeds limit"), "{found:?}");
    }

    /// kube's IP and CIDR libraries, with the examples of kube's own documentation
    /// (`ip.go`, `cidr.go`; `containsCIDR` as fixed in 1.33, kubernetes#130450).
    #[test]
    fn ip_and_cidr_libraries_run_as_kubes() {
        let holds = [
            "ip('127.0.0.1').family() == 4 && ip('::1').family() == 6",
            "isIP('127.0.0.1') && isIP('::1') && !isIP('127.0.0.256') && !isIP(':::1')",
            "!isIP('::ffff:1.2.3.4') && !isIP('fe80::1%eth0') && !isIP('01.2.3.4')",
            "ip.isCanonical('127.0.0.1') && ip.isCanonical('2001:db8::abcd')",
            "!ip.isCanonical('2001:DB8::ABCD') && !ip.isCanonical('2001:db8::0:0:0:abcd')",
            "ip('0.0.0.0').isUnspecified() && ip('::').isUnspecified() && !ip('::1').isUnspecified()",
            "ip('127.0.0.1').isLoopback() && !ip('192.168.0.1').isLoopback() && ip('::1').isLoopback()",
            "ip('224.0.0.1').isLinkLocalMulticast() && !ip('224.0.1.1').isLinkLocalMulticast()",
            "ip('ff02::1').isLinkLocalMulticast() && !ip('fd00::1').isLinkLocalMulticast()",
            "ip('169.254.169.254').isLinkLocalUnicast() && ip('fe80::1').isLinkLocalUnicast()",
            "!ip('fd80::1').isLinkLocalUnicast() && ip('192.168.0.1').isGlobalUnicast()",
            "!ip('255.255.255.255').isGlobalUnicast() && ip('2001:db8::abcd').isGlobalUnicast()",
            "!ip('ff00::1').isGlobalUnicast() && ip('10.0.0.1') == ip('10.0.0.1')",
            "string(ip('2001:0db8:0:0::1')) == '2001:db8::1'",
            "isCIDR('192.168.0.0/16') && isCIDR('::1/128') && !isCIDR('192.168.0.0/33')",
            "!isCIDR('::1/129') && !isCIDR('10.0.0.0/08') && !isCIDR('10.0.0.0')",
            "cidr('192.168.0.0/24').containsIP(ip('192.168.0.1'))",
            "!cidr('192.168.0.0/24').containsIP(ip('192.168.1.1'))",
            "cidr('192.168.0.0/24').containsIP('192.168.0.1') && !cidr('192.168.0.0/24').containsIP('::1')",
            "cidr('192.168.0.0/16').containsCIDR(cidr('192.168.10.0/24'))",
            "!cidr('192.168.1.0/24').containsCIDR(cidr('192.168.2.0/24'))",
            "cidr('192.168.0.0/16').containsCIDR('192.168.0.1/32')",
            "!cidr('192.168.1.0/24').containsCIDR('192.168.0.0/16')",
            "cidr('192.168.0.1/24').ip() == ip('192.168.0.1') && cidr('::1/128').ip().family() == 6",
            "cidr('192.168.0.1/24').masked() == cidr('192.168.0.0/24')",
            "cidr('192.168.0.1/24') != cidr('192.168.0.1/24').masked()",
            "cidr('192.168.0.0/16').prefixLength() == 16 && cidr('::1/128').prefixLength() == 128",
            "string(cidr('10.1.2.3/8').masked()) == '10.0.0.0/8'",
            "type(ip('10.0.0.1')) == net.IP && type(cidr('::/0')) == net.CIDR && type(ip('::1')) != net.CIDR",
        ];
        let errors = [
            "ip('127.0.0.256') == ip('::1')",
            "ip('fe80::1%eth0') == ip('::1')",
            "cidr('10.0.0.0/33') == cidr('::1/128')",
            "cidr('::ffff:1.2.3.4/24') == cidr('::1/128')",
        ];
        let validations: Vec<Value> = holds
            .iter()
            .chain(&errors)
            .map(|r| json!({"rule": r}))
            .collect();
        let schema = spec(Value::Array(validations), json!({}));
        let object = json!({"spec": {}});
        // Each holding rule ran (a skipped one would say nothing either): negated, each fails.
        each_ran_and_holds(holds, json!({}), &object);
        let errored = |error: &str, rule: &str| {
            format!("spec: Invalid value: \"object\": {error} evaluating rule: {rule}")
        };
        assert_eq!(
            messages(&schema, &object, None),
            [
                errored(
                    "IP Address \"127.0.0.256\" parse error during conversion from string: ParseAddr(\"127.0.0.256\"): IPv4 field has value >255",
                    errors[0]
                ),
                errored(
                    "IP address \"fe80::1%eth0\" with zone value is not allowed",
                    errors[1]
                ),
                errored(
                    "network address parse error during conversion from string: network address parse error during conversion from string: netip.ParsePrefix(\"10.0.0.0/33\"): bad bits after slash: \"33\"",
                    errors[2]
                ),
                errored(
                    "network address parse error during conversion from string: IPv4-mapped IPv6 address \"::ffff:1.2.3.4/24\" is not allowed",
                    errors[3]
                ),
            ]
        );
    }

    /// kube's URL library, with the examples of kube's own documentation (`urls.go`), and the
    /// rules real CRDs write with it.
    #[test]
    fn url_library_runs_as_kubes() {
        let holds = [
            "isURL('https://user:pass@example.com:80/path?query=val#fragment') && isURL('/absolute-path')",
            "!isURL('https://a:b:c/') && !isURL('../relative-path')",
            "url('/path').getScheme() == '' && url('https://example.com/').getScheme() == 'https'",
            "url('https://example.com:80/').getHost() == 'example.com:80' && url('https://example.com/').getHost() == 'example.com'",
            "url('https://[::1]:80/').getHost() == '[::1]:80' && url('https://[::1]/').getHost() == '[::1]' && url('/path').getHost() == ''",
            "url('https://example.com:80/').getHostname() == 'example.com' && url('https://127.0.0.1:80/').getHostname() == '127.0.0.1'",
            "url('https://[::1]:80/').getHostname() == '::1' && url('/path').getHostname() == ''",
            "url('https://example.com:80/').getPort() == '80' && url('https://example.com/').getPort() == '' && url('/path').getPort() == ''",
            "url('https://example.com/path').getEscapedPath() == '/path' && url('https://example.com').getEscapedPath() == ''",
            "url('https://example.com/path with spaces/').getEscapedPath() == '/path%20with%20spaces/'",
            "url('https://example.com/path?k1=a&k2=b&k2=c').getQuery() == {'k1': ['a'], 'k2': ['b', 'c']}",
            "url('https://example.com/path?key with spaces=value with spaces').getQuery() == {'key with spaces': ['value with spaces']}",
            "url('https://example.com/path?').getQuery() == {} && url('https://example.com/path').getQuery() == {}",
            "isURL(self.issuer) && url(self.issuer).getScheme() == 'https' && url(self.issuer).getHostname() != ''",
        ];
        let validations: Vec<Value> = holds
            .iter()
            .chain(["url('../x').getScheme() == ''"].iter())
            .map(|r| json!({"rule": r}))
            .collect();
        let properties = json!({"issuer": {"type": "string"}});
        let schema = spec(Value::Array(validations), properties.clone());
        let object = json!({"spec": {"issuer": "https://sso.example.com/realms/a"}});
        assert_eq!(
            messages(&schema, &object, None),
            [
                "spec: Invalid value: \"object\": URL parse error during conversion from string: parse \"../x\": invalid URI for request evaluating rule: url('../x').getScheme() == ''"
            ]
        );
        each_ran_and_holds(holds, properties, &object);
    }

    /// kube's format library: validations as optionals of kube's messages, used as kube's
    /// documentation uses them (a rule, and its `messageExpression`).
    #[test]
    fn format_library_runs_as_kubes() {
        let holds = [
            "!format.dns1123Label().validate('my-label-name').hasValue()",
            "!format.dns1123Subdomain().validate('apiextensions.k8s.io').hasValue()",
            "!format.qualifiedName().validate('apiextensions.k8s.io/v1beta1').hasValue()",
            "!format.dns1123LabelPrefix().validate('my-label-prefix-').hasValue()",
            "!format.uri().validate('http://example.com').hasValue()",
            "!format.uuid().validate('123e4567-e89b-12d3-a456-426614174000').hasValue()",
            "!format.byte().validate('aGVsbG8=').hasValue() && !format.date().validate('2021-01-01').hasValue()",
            "format.named('labelValue').hasValue() && !format.named('nope').hasValue()",
            "format.named('dns1035Label').value().validate('1a').value().size() == 1",
            "format.datetime().validate('x') == optional.of(['invalid datetime'])",
        ];
        let mut validations: Vec<Value> = holds.iter().map(|r| json!({"rule": r})).collect();
        validations.push(json!({
            "rule": "!format.dns1123Label().validate(self.name).hasValue()",
            "messageExpression": "format.dns1123Label().validate(self.name).value().join('\\n')"
        }));
        let properties = json!({"name": {"type": "string"}});
        let schema = spec(Value::Array(validations), properties.clone());
        let object = json!({"spec": {"name": "Not_A_Label"}});
        assert_eq!(
            messages(&schema, &object, None),
            [format!(
                "spec: Invalid value: \"object\": {}",
                crate::names::DNS1123_LABEL_MESSAGE
            )]
        );
        each_ran_and_holds(holds, properties, &object);
    }

    /// kube's semver library, with the examples of kube's documentation (`semverlib.go`).
    #[test]
    fn semver_library_runs_as_kubes() {
        let holds = [
            "isSemver('1.0.0') && !isSemver('hello') && !isSemver('v1.0') && isSemver('v1.0', true)",
            "semver('1.0', true) == semver('1.0.0') && semver('01.01.01', true) == semver('1.1.1')",
            "semver('1.2.3').major() == 1 && semver('1.2.3').minor() == 2 && semver('1.2.3').patch() == 3",
            "semver('1.2.3').compareTo(semver('1.2.3')) == 0 && semver('1.2.3').compareTo(semver('2.0.0')) == -1",
            "semver('1.2.3').compareTo(semver('0.1.2')) == 1 && semver('0.1.0-alpha.1').isLessThan(semver('0.1.0'))",
            "semver(self.version).isGreaterThan(semver('1.27.0')) && quantity('2').isGreaterThan(quantity('1'))",
        ];
        let properties = json!({"version": {"type": "string"}});
        let object = json!({"spec": {"version": "1.33.1"}});
        each_ran_and_holds(holds, properties.clone(), &object);
        let schema = spec(json!([{"rule": "semver('200K').major() == 1"}]), properties);
        assert_eq!(
            messages(&schema, &object, None),
            [
                "spec: Invalid value: \"object\": No Major.Minor.Patch elements found evaluating rule: semver('200K').major() == 1"
            ]
        );
    }

    /// cel-go's two-variable comprehensions (kube 1.32+), which the `cel` crate's parser
    /// leaves as calls: expanded and run (and the crate's own `optMap` and `optFlatMap`).
    #[test]
    fn two_variable_comprehensions_and_optional_maps_run_as_cel_gos() {
        let holds = [
            "[10, 20].all(i, v, v == (i + 1) * 10)",
            "{'a': 1, 'b': 2}.exists(k, v, k == 'b' && v == 2) && !{'a': 1}.exists(k, v, v == 2)",
            "[1, 2, 3].existsOne(i, v, v == 2) && ![1, 2, 2].existsOne(i, v, v == 2)",
            "[1, 2, 3].exists_one(i, v, i == 0)",
            "[1, 2, 3].transformList(i, v, i * v) == [0, 2, 6]",
            "[1, 2, 3].transformList(i, v, v > 1, v) == [2, 3]",
            "self.items.all(i, v, v > i) && self.m.all(k, v, v == size(k))",
            "[[1, 2], [3]].all(i, l, l.all(j, v, v > i))",
            "[1].all(i, v, [5].all(v, v == 5)) && [1].all(i, v, [5].exists(x, x > v))",
            "optional.of(2).optMap(x, x * 2) == optional.of(4) && !optional.none().optMap(x, x * 2).hasValue()",
            "optional.of(2).optFlatMap(x, optional.of(x + 1)) == optional.of(3)",
            "[10, 20].transformMap(i, v, v + i) == {0: 10, 1: 21}",
            "{'a': 1, 'b': 2}.transformMap(k, v, v > 1, v * 10) == {'b': 20}",
            "{'a': 1}.transformMapEntry(k, v, {k + 'x': v}) == {'ax': 1}",
            "self.m.transformMap(k, v, v) == self.m",
            "self.?missing.optMap(m, m + 1).orValue(0) == 0",
        ];
        let properties = json!({"items": {"type": "array", "items": {"type": "integer"}},
            "m": {"type": "object", "additionalProperties": {"type": "integer"}},
            "missing": {"type": "integer"}});
        let object = json!({"spec": {"items": [5, 6, 7], "m": {"ab": 2, "c": 1}}});
        each_ran_and_holds(holds, properties, &object);
        let schema = spec(
            json!([{"rule": "[1, 2].transformMapEntry(i, v, {'same': v}) == {}"}]),
            json!({}),
        );
        assert_eq!(
            messages(&schema, &json!({"spec": {}}), None),
            [
                "spec: Invalid value: \"object\": insert failed: key same already exists evaluating rule: [1, 2].transformMapEntry(i, v, {'same': v}) == {}"
            ]
        );
        // Building a map costs a constant per entry, as cel-go's in-place insert (it was
        // copied at each step, and 3,000 entries exceeded the per-call limit): 10,000 run.
        let big: serde_json::Map<String, Value> =
            (0..10_000).map(|i| (format!("key{i}"), json!(i))).collect();
        let schema = spec(
            json!([
                {"rule": "self.m.transformMap(k, v, v) == self.m"},
                {"rule": "self.m.transformMapEntry(k, v, v >= 0, {k: v}).size() == 10000"},
                {"rule": "self.m.transformMap(k, v, v) != self.m", "message": "ran"}
            ]),
            json!({"m": {"type": "object", "additionalProperties": {"type": "integer"}}}),
        );
        assert_eq!(
            messages(&schema, &json!({"spec": {"m": big}}), None),
            ["spec: Invalid value: \"object\": ran"]
        );
        assert_eq!(
            compile_error("[1].all(1, v, true)")
                .as_deref()
                .map(|e| e.contains("argument must be a simple name")),
            Some(true)
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 256, ..Default::default() })]

        /// The libraries' string functions answer every text a hostile object may hold, an
        /// error or a result, and never panic (a panic would be caught and refused, but says
        /// a parser is wrong).
        #[test]
        fn library_functions_answer_any_text(
            text in proptest::prop_oneof![
                r"[0-9a-fA-F:.%/@\[\]v+\- ?#&=_~é]{0,30}",
                r"\PC{0,24}",
            ],
        ) {
            let rules = [
                "!isURL(self.t) || url(self.t).getEscapedPath() != 'never' && url(self.t).getQuery().size() >= 0 && url(self.t).getPort() != 'never'",
                "!isIP(self.t) || ip(self.t).family() > 0 && string(ip(self.t)) != ''",
                "!isCIDR(self.t) || cidr(self.t).masked().prefixLength() >= 0",
                "!isSemver(self.t, true) || semver(self.t, true).major() >= 0",
                "!isQuantity(self.t) || quantity(self.t).sign() >= -1",
                "format.dns1123LabelPrefix().validate(self.t).orValue([]).size() >= 0",
                "format.uri().validate(self.t).orValue([]).size() >= 0",
                "ip.isCanonical('::1') && (!isIP(self.t) || ip.isCanonical(self.t) || true)",
            ];
            let validations: Vec<Value> = rules.iter().map(|r| json!({"rule": r})).collect();
            let schema = spec(Value::Array(validations), json!({"t": {"type": "string"}}));
            let found = messages(&schema, &json!({"spec": {"t": text}}), None);
            // `url()` may fail where `isURL()` holds, as in kube: Go's `ParseRequestURI`
            // (`isURL`) keeps a fragment and reads no host without a scheme, `Parse` (which
            // `url()` reads with after it) checks both (`a:#%`, `// `).
            proptest::prop_assert!(
                found.iter().all(|m| m.contains("URL parse error during conversion from string: parse ")),
                "{:?}: {:?}", text, found
            );
        }
    }

    #[test]
    fn transition_rules_run_on_updates_against_the_correlated_old_value() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
        "properties": {
            "mode": {"type": "string", "x-kubernetes-validations": [
                {"rule": "self == oldSelf", "message": "mode is immutable"}]},
            "size": {"type": "integer", "x-kubernetes-validations": [
                {"rule": "!oldSelf.hasValue() || self >= oldSelf.value()",
                 "optionalOldSelf": true, "message": "size may only grow"}]},
            "ports": {"type": "array", "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "properties": {
                    "name": {"type": "string"}, "port": {"type": "integer"}},
                    "x-kubernetes-validations": [
                        {"rule": "self.port == oldSelf.port", "message": "port is immutable"}]}}
        }}}});
        let old = json!({"spec": {"mode": "a", "size": 2,
            "ports": [{"name": "http", "port": 80}, {"name": "https", "port": 443}]}});
        // A create has no old value: no transition rule runs, an optional one sees none.
        assert!(messages(&schema, &old, None).is_empty());
        let same = json!({"spec": {"mode": "a", "size": 3,
            "ports": [{"name": "https", "port": 443}, {"name": "http", "port": 80},
                      {"name": "new", "port": 1}]}});
        assert!(messages(&schema, &same, Some(&old)).is_empty());
        let changed = json!({"spec": {"mode": "b", "size": 1,
            "ports": [{"name": "https", "port": 8443}, {"name": "http", "port": 80}]}});
        assert_eq!(
            messages(&schema, &changed, Some(&old)),
            [
                "spec.mode: Invalid value: \"string\": mode is immutable",
                "spec.ports[0]: Invalid value: \"object\": port is immutable",
                "spec.size: Invalid value: \"integer\": size may only grow",
            ]
        );
    }

    #[test]
    fn an_unchanged_node_keeps_its_failing_rules_on_an_update_ratcheting() {
        let schema = spec(
            json!([{"rule": "self.a < 10", "message": "a below 10"}]),
            json!({"a": {"type": "integer"}, "b": {"type": "integer"}}),
        );
        let schema = json!({"type": "object", "properties": {
            "spec": schema["properties"]["spec"], "other": {"type": "string"}}});
        let old = json!({"spec": {"a": 20, "b": 1}, "other": "x"});
        let other_changed = json!({"spec": {"a": 20, "b": 1}, "other": "y"});
        assert!(messages(&schema, &other_changed, Some(&old)).is_empty());
        let spec_changed = json!({"spec": {"a": 20, "b": 2}, "other": "x"});
        assert_eq!(
            messages(&schema, &spec_changed, Some(&old)),
            ["spec: Invalid value: \"object\": a below 10"]
        );
        assert_eq!(
            messages(&schema, &old, None).len(),
            1,
            "a create is not ratcheted"
        );
    }

    #[test]
    fn the_resource_root_sees_its_kind_and_name_only() {
        let schema = json!({"type": "object", "x-kubernetes-validations": [
            {"rule": "self.metadata.name.startsWith('w-') && self.kind == 'Widget'",
             "message": "name must start with w-"},
            {"rule": "!has(self.metadata.labels)"}
        ], "properties": {"spec": {"type": "object"}}});
        let object = json!({"apiVersion": "e.io/v1", "kind": "Widget",
            "metadata": {"name": "x", "labels": {"a": "b"}}, "spec": {}});
        assert_eq!(
            messages(&schema, &object, None),
            [": Invalid value: \"object\": name must start with w-"]
        );
    }

    #[test]
    fn the_cost_bound_stops_a_rule_before_it_runs_long() {
        let schema = spec(
            json!([
                {"rule": "self.l.all(a, self.l.all(b, self.l.all(c, a + b + c >= 0)))"},
                {"rule": "self.l.size() > 0"}
            ]),
            json!({"l": {"type": "array", "items": {"type": "integer"}}}),
        );
        let small = json!({"spec": {"l": (0..10).collect::<Vec<i64>>()}});
        assert!(messages(&schema, &small, None).is_empty());
        let large = json!({"spec": {"l": (0..200).collect::<Vec<i64>>()}});
        assert_eq!(
            messages(&schema, &large, None),
            [
                "spec: Invalid value: \"object\": 'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: self.l.all(a, self.l.all(b, self.l.all(c, a + b + c >= 0)))"
            ]
        );
        // Many cheap rules share the object's budget.
        let schema = json!({"type": "object", "properties": {"items": {"type": "array",
            "items": {"type": "object", "properties": {"l": {"type": "array", "items": {"type": "string"}}},
                "x-kubernetes-validations": [{"rule": "self.l.all(a, self.l.all(b, a.size() == b.size()))"}]}}}});
        let item = json!({"l": vec!["ab"; 300]});
        let object = json!({"items": vec![item; 200]});
        let found = messages(&schema, &object, None);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].ends_with("validation failed due to running out of cost budget, no further validation rules will be run"), "{found:?}");
    }

    #[test]
    fn common_rules_on_large_objects_stay_within_the_bound() {
        // What CRDs do: per-item checks over long lists, pairwise uniqueness over shorter ones,
        // patterns over every key of a map.
        let schema = spec(
            json!([
                {"rule": "self.names.all(n, n.size() <= 63 && n.matches('^[a-z0-9-]+$'))"},
                {"rule": "self.ports.all(a, self.ports.exists_one(b, a.port == b.port))"},
                {"rule": "self.labels.all(k, k.startsWith('ex.io/') && self.labels[k].size() < 64)"},
                {"rule": "self.ports.map(p, p.name).join(',').size() > 0"}
            ]),
            json!({
                "names": {"type": "array", "items": {"type": "string"}},
                "ports": {"type": "array", "items": {"type": "object", "properties": {
                    "name": {"type": "string"}, "port": {"type": "integer"}}}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}}
            }),
        );
        let names: Vec<String> = (0..2_000).map(|i| format!("name-{i}")).collect();
        let ports: Vec<Value> = (0..200)
            .map(|i| json!({"name": format!("p{i}"), "port": i}))
            .collect();
        let labels: Map<String, Value> = (0..1_000)
            .map(|i| (format!("ex.io/k{i}"), json!("v")))
            .collect();
        let object = json!({"spec": {"names": names, "ports": ports, "labels": labels}});
        assert_eq!(messages(&schema, &object, None), Vec::<String>::new());
    }

    #[test]
    fn the_budget_also_bounds_how_many_rules_run() {
        let rules: Vec<Value> = (0..100)
            .map(|i| json!({"rule": format!("self.size() > {i} || true")}))
            .collect();
        let schema = json!({"type": "object", "properties": {"l": {"type": "array",
            "items": {"type": "string", "x-kubernetes-validations": rules}}}});
        let within = json!({"l": vec!["a"; 1_000]});
        assert_eq!(messages(&schema, &within, None), Vec::<String>::new());
        let past = json!({"l": vec!["a"; 5_000]});
        let found = messages(&schema, &past, None);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0]
                .ends_with("running out of cost budget, no further validation rules will be run"),
            "{found:?}"
        );
    }

    #[test]
    fn shared_values_answer_as_the_maps_and_lists_they_hold() {
        // `self.spec` is its entry in the root's value (converted once, shared): whether lent,
        // copied into a literal, or moved out of one, it answers as a map or list would.
        let expressions = [
            "self.m == {'a': [1, 2], 'b': [3]}",
            "{'a': [1, 2], 'b': [3]} == self.m",
            "type(self.m) == map && type(self.m.a) == list",
            "[self.m][0].a[1] == 2",
            "{'x': self.m}.x.b[0] == 3",
            "(self.m.a + self.m.b)[2] == 3",
            "self.m.a + [4] == [1, 2, 4]",
            "2 in self.m.a && 'b' in self.m",
            "self.m.all(k, size(self.m[k]) > 0) && self.m.map(k, k).size() == 2",
            "self.m.exists(k, self.m[k].exists(v, v == 3))",
            "[self.m.a, self.m.b][1] == [3]",
            "self.m.?a.orValue([]) == [1, 2] && !has(self.m.c)",
            "self.l.map(x, x.n).sum() == 3 && self.l[1].n == 2",
            "oldSelf.m == self.m && oldSelf.l[0] == self.l[0]",
        ];
        let rules: Vec<Value> = expressions
            .iter()
            .map(|e| json!({"rule": e, "message": e}))
            .collect();
        let schema = spec(
            json!(rules),
            json!({
                "m": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "integer"}}},
                "l": {"type": "array", "items": {"type": "object", "properties": {"n": {"type": "integer"}}}}
            }),
        );
        let object = json!({"spec": {"m": {"a": [1, 2], "b": [3]}, "l": [{"n": 1}, {"n": 2}]}});
        assert_eq!(
            messages(&schema, &object, Some(&object)),
            Vec::<String>::new()
        );
        let changed = json!({"spec": {"m": {"a": [1, 2], "b": [4]}, "l": [{"n": 1}, {"n": 2}]}});
        assert_eq!(
            messages(&schema, &changed, Some(&object)),
            [
                "spec: Invalid value: \"object\": self.m == {'a': [1, 2], 'b': [3]}",
                "spec: Invalid value: \"object\": {'a': [1, 2], 'b': [3]} == self.m",
                "spec: Invalid value: \"object\": {'x': self.m}.x.b[0] == 3",
                "spec: Invalid value: \"object\": (self.m.a + self.m.b)[2] == 3",
                "spec: Invalid value: \"object\": self.m.exists(k, self.m[k].exists(v, v == 3))",
                "spec: Invalid value: \"object\": [self.m.a, self.m.b][1] == [3]",
                "spec: Invalid value: \"object\": oldSelf.m == self.m && oldSelf.l[0] == self.l[0]",
            ]
        );
    }

    #[test]
    fn a_node_is_converted_and_measured_once_for_all_its_rules() {
        // 500 rules on a ~200 KB node: the conversion (~400,000 units) is charged once; were
        // it charged per rule, the budget would stop them.
        let rules: Vec<Value> = (0..500)
            .map(|i| json!({"rule": format!("size(self.l) > {i} || self.l[0] == 'item-0'")}))
            .collect();
        let schema = json!({"type": "object", "x-kubernetes-validations": rules,
            "properties": {"l": {"type": "array", "items": {"type": "string"}}}});
        let object = json!({"l": (0..20_000).map(|i| format!("item-{i}")).collect::<Vec<_>>()});
        assert_eq!(messages(&schema, &object, None), Vec::<String>::new());
    }

    #[test]
    fn the_bound_is_never_below_what_an_expression_builds() {
        // Strings built in loops: the bound grows with what `join` and `replace` make.
        let data = Size {
            count: 100.0,
            bytes: 1000.0,
            item: 500.0,
        };
        let cheap = bound(
            &compile("self.s.size() > 1").unwrap(),
            data,
            &[],
            &mut Sizes::new(),
        );
        let built = bound(
            &compile("self.l.map(x, self.s.replace('a', self.s)).join('').contains('z')").unwrap(),
            data,
            &[],
            &mut Sizes::new(),
        );
        assert!(cheap < 100.0, "{cheap}");
        assert!(built > PER_CALL_LIMIT, "{built}");
    }

    #[test]
    fn rules_that_do_not_parse_or_name_unknown_variables_are_refused_with_cels_text() {
        let e = compile_error("self.(").unwrap();
        assert!(e.starts_with("ERROR: <input>:1:6: Syntax error:"), "{e}");
        assert!(compile_error("self.a > minimum").unwrap().starts_with(
            "ERROR: <input>:1:10: undeclared reference to 'minimum' (in container '')\n"
        ));
        assert_eq!(
            compile_error("self.all(x, x > 0) && oldSelf == self && type(self) == map"),
            None
        );
        assert_eq!(compile_error("optional.none() == self.?a"), None);
        // Kube's libraries and macros this server lacks compile (and are skipped when run).
        for lacking in [
            "size(self) == 0 || format.dns1123Label().validate(self) == null",
            "sets.contains(self.a, [1]) && quantity('1').isInteger()",
            "self.m.transformMap(k, v, v + 1) == self.m",
        ] {
            assert_eq!(compile_error(lacking), None, "{lacking}");
        }
        // kube's environments (every version, stored expressions' too) have no
        // `ext.Bindings`: `cel.bind` is `bind` on an undeclared `cel`, its variable undeclared.
        let bind = "cel.bind(x, self.a, x > 1 && x < 5)";
        let error = |column: usize, name: &str| {
            format!(
                "ERROR: <input>:1:{column}: undeclared reference to '{name}' (in container '')\n | {bind}\n | {}^",
                ".".repeat(column - 1)
            )
        };
        assert_eq!(
            compile_error(bind),
            Some(
                [
                    error(1, "cel"),
                    error(9, "bind"),
                    error(10, "x"),
                    error(21, "x"),
                    error(30, "x"),
                ]
                .join("\n")
            )
        );
        let long = "1".repeat(RULE_CODE_POINTS_MAX + 1);
        assert!(
            compile_error(&long)
                .unwrap()
                .contains("code point size exceeds limit")
        );
    }

    #[test]
    fn calls_of_functions_kube_does_not_declare_are_refused_at_their_parenthesis() {
        let undeclared = |name: &str| format!("undeclared reference to '{name}' (in container '')");
        // A global call, a member call (the Kubernetes documentation's own typo of
        // `startsWith`), one in a macro's body and one on a second line: at their `(`.
        assert_eq!(
            compile_error("foo(1)").unwrap(),
            format!(
                "ERROR: <input>:1:4: {}\n | foo(1)\n | ...^",
                undeclared("foo")
            )
        );
        assert_eq!(
            compile_error("self.name.startWith('a')").unwrap(),
            format!(
                "ERROR: <input>:1:20: {}\n | self.name.startWith('a')\n | ...................^",
                undeclared("startWith")
            )
        );
        assert_eq!(
            compile_error("self.l.all(x, x.fooBar ())").unwrap(),
            format!(
                "ERROR: <input>:1:24: {}\n | self.l.all(x, x.fooBar ())\n | .......................^",
                undeclared("fooBar")
            )
        );
        assert_eq!(
            compile_error("self.a == 1 ||\n  nope(self)").unwrap(),
            format!(
                "ERROR: <input>:2:7: {}\n |   nope(self)\n | ......^",
                undeclared("nope")
            )
        );
        // A namespace kube does not have: its name is an undeclared identifier, then the
        // function; every error, in the order of their positions, as cel-go lists them.
        assert_eq!(
            compile_error("math.greatest(1, 2) == 2").unwrap(),
            format!(
                "ERROR: <input>:1:1: {}\n | math.greatest(1, 2) == 2\n | ^\nERROR: <input>:1:14: {}\n | math.greatest(1, 2) == 2\n | .............^",
                undeclared("math"),
                undeclared("greatest")
            )
        );
        let e = compile_error("bar(minimum) || self.baz()").unwrap();
        let positions: Vec<&str> = e.lines().filter(|l| l.starts_with("ERROR")).collect();
        assert_eq!(
            positions,
            [
                format!("ERROR: <input>:1:4: {}", undeclared("bar")),
                format!("ERROR: <input>:1:5: {}", undeclared("minimum")),
                format!("ERROR: <input>:1:25: {}", undeclared("baz")),
            ]
        );
        // Past 100 errors, cel-go counts the rest.
        let many = vec!["f()"; 102].join(" + ");
        let e = compile_error(&many).unwrap();
        assert_eq!(e.lines().filter(|l| l.starts_with("ERROR")).count(), 100);
        assert!(e.ends_with("\n2 more errors were truncated"), "{e}");
        // Namespaced and member functions kube 1.33 does not have.
        for (expression, name) in [
            ("base64.encode(b'a') == 'YQ=='", "base64"),
            ("lists.range(3).size() == 3", "lists"),
            ("'abc'.reverse() == 'cba'", "reverse"),
            ("sets.union([1], [2]) == [1, 2]", "sets"),
            ("strings.fooBar('a')", "strings"),
            ("isCanonical('::1')", "isCanonical"),
            ("self.l.all(x)", "all"),
            ("self.l.sortBy(x, x) == self.l", "sortBy"),
        ] {
            let e = compile_error(expression).unwrap_or_default();
            assert!(e.contains(&undeclared(name)), "{expression}: {e}");
        }
    }

    #[test]
    fn calls_of_every_namespace_and_library_kube_has_compile() {
        for expression in [
            // cel-go's standard library, called globally, as members, with a leading dot.
            "size(self.s) == self.s.size() && .size([1]) == 1 && int('1') == 1 && uint(1) == 1u",
            "double(1) == 1.0 && string(1) == '1' && bytes('a') == b'a' && bool('true')",
            "type(self) == map && dyn(1) == 1 && self.s.contains('a') && self.s.endsWith('a')",
            "self.s.startsWith('a') && self.s.matches('^a') && matches(self.s, 'a')",
            "timestamp('2020-01-01T00:00:00Z').getFullYear() == 2020 && duration('1s').getSeconds() == 1",
            "timestamp('2020-01-01T00:00:00Z').getMonth() + duration('1h').getHours() > 0",
            "_in_(1, [1]) && __not_strictly_false__(true)",
            // Optional types, their macros.
            "optional.of(1).hasValue() && optional.none().orValue(1) == 1 && optional.unwrap([optional.of(1)]) == [1]",
            "optional.ofNonZeroValue(0).or(optional.of(1)).value() == 1 && [1].first().hasValue() && [1].last().hasValue()",
            "optional.of(1).optMap(x, x + 1).value() == 2 && optional.of(1).optFlatMap(x, optional.of(x)).hasValue()",
            "[optional.of(1)].unwrapOpt() == [1] && self.?s.orValue('') == ''",
            // ext.Strings (version 2).
            "'a,b'.split(',').join('-') == 'a-b' && 'abc'.charAt(1) == 'b' && 'a'.upperAscii() == 'A'",
            "'abc'.indexOf('b') == 1 && 'abc'.lastIndexOf('b') == 1 && 'A'.lowerAscii() == 'a'",
            "'abc'.replace('b', 'c') == 'acc' && 'abc'.substring(1) == 'bc' && ' a '.trim() == 'a'",
            "'%s'.format(['a']) == 'a' && strings.quote('a') == '\"a\"'",
            // ext.Sets, two-variable comprehensions.
            "sets.contains([1], [1]) && sets.equivalent([1], [1]) && sets.intersects([1], [1])",
            "{'a': 1}.all(k, v, v > 0) && [1].exists(i, v, v == 1) && [1].existsOne(i, v, v == 1)",
            "[1].exists_one(i, v, v == 1) && [1].transformList(i, v, v * 2) == [2]",
            "[1].transformList(i, v, v > 0, v * 2) == [2] && {'a': 1}.transformMap(k, v, v + 1) == {'a': 2}",
            "{'a': 1}.transformMap(k, v, v > 0, v) == {'a': 1} && {'a': 1}.transformMapEntry(k, v, {k: v}) == {'a': 1}",
            "{'a': 1}.transformMapEntry(k, v, v > 0, {k: v}) == {'a': 1}",
            "{'a': [1]}.all(k, v, v.all(k, k > 0) && k == 'a') && [[2]].all(i, v, v.all(i, v[0] == i))",
            // kube's lists, regex, URLs, quantity, IP, CIDR, format and semver libraries.
            "[1, 2].isSorted() && [1].sum() == 1 && [1].min() == 1 && [1].max() == 1",
            "[1].indexOf(1) == 0 && [1].lastIndexOf(1) == 0 && self.s.find('a') == 'a' && self.s.findAll('a').size() == 1",
            "url('https://a:1/p?q=1').getHost() == 'a:1' && url('https://a').getScheme() == 'https' && isURL('https://a')",
            "url('https://a').getHostname() == 'a' && url('https://a').getPort() == '' && url('https://a').getEscapedPath() == ''",
            "url('https://a').getQuery().size() == 0",
            "quantity('1Gi').isGreaterThan(quantity('1Mi')) && isQuantity('1') && quantity('1').sign() == 1",
            "quantity('1').isLessThan(quantity('2')) && quantity('1').compareTo(quantity('1')) == 0",
            "quantity('1').add(1).sub(quantity('1')).asInteger() == 1 && quantity('1').isInteger() && quantity('1').asApproximateFloat() == 1.0",
            "ip.isCanonical('127.0.0.1') && ip('127.0.0.1').isLoopback() && ip('::1').family() == 6 && isIP('::1')",
            "ip('0.0.0.0').isUnspecified() && ip('ff02::1').isLinkLocalMulticast() && ip('fe80::1').isLinkLocalUnicast()",
            "ip('8.8.8.8').isGlobalUnicast() && string(ip('::1')) == '::1'",
            "cidr('10.0.0.0/8').containsIP(ip('10.0.0.1')) && cidr('10.0.0.0/8').containsCIDR('10.0.0.0/16') && isCIDR('10.0.0.0/8')",
            "cidr('10.0.0.0/8').ip() == ip('10.0.0.0') && cidr('10.0.0.0/8').prefixLength() == 8 && cidr('10.0.0.1/8').masked() == cidr('10.0.0.0/8')",
            "!format.dns1123Label().validate(self.s).hasValue() || format.named('uuid').hasValue()",
            "format.dns1123Subdomain().validate('a') == format.dns1035Label().validate('a') && format.qualifiedName().validate('a') == optional.none()",
            "format.dns1123LabelPrefix().validate('a') == format.dns1123SubdomainPrefix().validate('a')",
            "format.dns1035LabelPrefix().validate('a') == format.labelValue().validate('a') && format.uri().validate('a') == format.uuid().validate('a')",
            "format.byte().validate('a') == format.date().validate('a') && format.datetime().validate('a') == optional.none()",
            "semver('1.0.0').major() == 1 && semver('1.0.0').minor() == 0 && semver('1.0.0').patch() == 0 && isSemver('1.0.0')",
            "semver('1.0.0').isGreaterThan(semver('0.1.0')) && semver('v1.0', true).isLessThan(semver('2.0.0')) && isSemver('v1', true)",
            "semver('1.0.0').compareTo(semver('1.0.0')) == 0",
            // Declared names called the wrong way are the type check's to judge, not refused here.
            "'abc'.size() == size('abc') && self.s.startsWith('a', 'b')",
        ] {
            assert_eq!(compile_error(expression), None, "{expression}");
        }
        // kube's authorization library, on an admission policy's `authorizer`.
        for expression in [
            "authorizer.group('').resource('pods').namespace('a').name('b').subresource('s').check('get').allowed()",
            "authorizer.group('').resource('pods').fieldSelector('a=b').labelSelector('a=b').check('list').reason() == ''",
            "authorizer.path('/a').check('get').errored() || authorizer.serviceAccount('a', 'b').path('/a').check('get').error() == ''",
            "authorizer.requestResource.check('get').allowed()",
        ] {
            assert!(
                compile_in(expression, Declared::Admission).is_ok(),
                "{expression}"
            );
        }
    }

    #[test]
    fn deep_expressions_are_refused_without_overflowing_the_stack() {
        // Each would overflow a 2 MiB thread's stack if parsed or evaluated on it.
        for source in [
            format!("1{}", " + 1".repeat(40_000)),
            format!("self{}", ".a".repeat(40_000)),
        ] {
            let e = std::thread::Builder::new()
                .stack_size(2 << 20)
                .spawn(move || compile_error(&source))
                .unwrap()
                .join()
                .unwrap();
            assert!(e.is_some());
        }
        // Deep but within the limit: evaluated on the large stack, from a small one.
        let nested = format!("{}true{}", "[1].all(x, ".repeat(60), ")".repeat(60));
        let schema = json!({"type": "object", "x-kubernetes-validations": [{"rule": nested}]});
        let found = std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || messages(&schema, &json!({}), None))
            .unwrap()
            .join()
            .unwrap();
        assert!(found.is_empty(), "{found:?}");
        let e = compile_error(&format!("1{}", " + 1".repeat(DEPTH_MAX + 1))).unwrap();
        assert!(e.contains("recursion limit exceeded"), "{e}");
        assert_eq!(
            compile_error(&format!("1{}", " + 1".repeat(DEPTH_MAX - 2))),
            None
        );
    }

    #[test]
    fn selections_of_undeclared_fields_are_refused_where_the_schema_decides() {
        let schema = json!({"type": "object", "properties": {
            "replicas": {"type": "integer"},
            "x-y": {"type": "string"},
            "ports": {"type": "array", "items": {"type": "object", "properties": {
                "port": {"type": "integer"}}}},
            "labels": {"type": "object", "additionalProperties": {"type": "object",
                "properties": {"v": {"type": "string"}}}},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}});
        let schema = schema.as_object().unwrap();
        let rule = |text: &str, resource| rule_error(text, schema, resource, Expression::Rule);
        for fits in [
            "self.replicas > 1 && self.x__dash__y != ''",
            "self.ports.all(p, p.port > 0) && self.ports[0].port > 0",
            "self.labels.all(k, self.labels[k].v != '') && self.labels.k.v == ''",
            "has(self.free.anything) && self.free.a.b == 1",
            "self.ports.map(p, p).all(q, q.whatever == 1)",
        ] {
            assert_eq!(rule(fits, false), None, "{fits}");
        }
        assert_eq!(
            rule("self.replica > 1", false).as_deref(),
            Some(
                "compilation failed: ERROR: <input>:1:5: undefined field 'replica'\n | self.replica > 1\n | ....^"
            )
        );
        assert!(
            rule("self.ports.exists(p, has(p.name))", false)
                .unwrap()
                .starts_with("compilation failed: ERROR: <input>:1:25: undefined field 'name'\n")
        );
        assert!(
            rule("self.labels['a'].w == ''", false)
                .unwrap()
                .starts_with("compilation failed: ERROR: <input>:1:17: undefined field 'w'\n")
        );
        assert_eq!(rule("self.metadata.name == ''", true), None);
    }

    #[test]
    fn errors_show_the_source_line_as_cel_go_does() {
        assert_eq!(
            compile_error("self.a > minimum").unwrap(),
            "ERROR: <input>:1:10: undeclared reference to 'minimum' (in container '')\n | self.a > minimum\n | .........^"
        );
        assert_eq!(
            compile_error("1 +\n\tself.(").unwrap(),
            "ERROR: <input>:2:7: Syntax error: no viable alternative at input '.('\n |  self.(\n | ......^"
        );
        // Wide characters before the column are full-width dots, as cel-go prints them.
        assert_eq!(
            compile_error("'é' == nope").unwrap(),
            "ERROR: <input>:1:8: undeclared reference to 'nope' (in container '')\n | 'é' == nope\n | .\u{ff0e}.....^"
        );
    }

    #[test]
    fn rules_of_a_certain_wrong_type_are_refused_as_kube_refuses_them() {
        let schema = json!({"type": "object", "properties": {
            "replicas": {"type": "integer"},
            "ratio": {"type": "number"},
            "name": {"type": "string"},
            "on": {"type": "boolean"},
            "at": {"type": "string", "format": "date-time"},
            "every": {"type": "string", "format": "duration"},
            "data": {"type": "string", "format": "byte"},
            "port": {"x-kubernetes-int-or-string": true},
            "tags": {"type": "array", "items": {"type": "string"}},
            "limits": {"type": "object", "additionalProperties": {"type": "integer"}},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}});
        let schema = schema.as_object().unwrap();
        let rule = |text: &str| rule_error(text, schema, false, Expression::Rule);
        let message = |text: &str| rule_error(text, schema, false, Expression::Message);
        // What kube compiles is never refused.
        for fits in [
            "self.replicas + 1 > 2 && self.ratio * 2.0 < 1.5 && self.replicas < self.ratio",
            "self.name + 'x' != '' && size(self.name) < 5 && self.name.size() > 0",
            "self.at + self.every > timestamp('2020-01-01T00:00:00Z')",
            "self.at - self.at < duration('1h') && self.every + self.every > self.every",
            "self.tags.all(t, t.startsWith('a')) && self.tags.exists_one(t, t == 'b')",
            "self.tags.map(t, size(t)).all(n, n > 0) && self.tags.filter(t, t != '') == self.tags",
            "self.limits.all(k, k.startsWith('x') && self.limits[k] > 0)",
            "self.port == 80 || self.port == 'http'",
            "self.data == 'abc' && self.free.a + 1 == self.free.b",
            "self.replicas == 1.0 || self.name == null || self.on",
            "(self.on ? self.replicas : 2) > 1 && -self.replicas < 0",
            "int(self.name) > 0 && string(self.replicas) == '1' && self.tags.sum() > 0",
            "self.name.matches('^a') ? true : false",
            "self.tags.isSorted() && self.tags.indexOf('a') >= 0 && self.name.split(',').size() > 0",
            "sets.contains(self.tags, ['a']) && self.name.format([1]) != ''",
        ] {
            assert_eq!(rule(fits), None, "{fits}");
        }
        for (refused, detail) in [
            ("self.replicas", "cel expression must evaluate to a bool"),
            ("self.name + 'x'", "cel expression must evaluate to a bool"),
            ("self.tags", "cel expression must evaluate to a bool"),
            (
                "self.tags.map(t, t)",
                "cel expression must evaluate to a bool",
            ),
            ("size(self.tags)", "cel expression must evaluate to a bool"),
            ("self.at", "cel expression must evaluate to a bool"),
            (
                "self.replicas + 'x' == 1",
                "compilation failed: ERROR: <input>:1:15: found no matching overload for '_+_' applied to '(int, string)'\n | self.replicas + 'x' == 1\n | ..............^",
            ),
            (
                "self.replicas + self.ratio > 1.0",
                "compilation failed: ERROR: <input>:1:15: found no matching overload for '_+_' applied to '(int, double)'",
            ),
            (
                "self.name == 1",
                "compilation failed: ERROR: <input>:1:11: found no matching overload for '_==_' applied to '(string, int)'",
            ),
            (
                "self.name && self.on",
                "compilation failed: ERROR: <input>:1:11: found no matching overload for '_&&_' applied to '(string, bool)'",
            ),
            (
                "self.on < 1",
                "compilation failed: ERROR: <input>:1:9: found no matching overload for '_<_' applied to '(bool, int)'",
            ),
            (
                "size(self.replicas) > 0",
                "compilation failed: ERROR: <input>:1:5: found no matching overload for 'size' applied to '(int)'",
            ),
            (
                "self.ratio % 2.0 == 0.0",
                "compilation failed: ERROR: <input>:1:12: found no matching overload for '_%_' applied to '(double, double)'",
            ),
            (
                "self.at - 1 > self.at",
                "compilation failed: ERROR: <input>:1:9: found no matching overload for '_-_' applied to '(timestamp, int)'",
            ),
            (
                "self.tags.all(t, size(t) + 'x' != '')",
                "compilation failed: ERROR: <input>:1:26: found no matching overload for '_+_' applied to '(int, string)'",
            ),
            (
                "(self.on ? 1 : 'one') == 1",
                "compilation failed: ERROR: <input>:1:10: found no matching overload for '_?_:_' applied to '(bool, int, string)'",
            ),
        ] {
            let found = rule(refused);
            assert!(
                found.as_deref().is_some_and(|f| f.starts_with(detail)),
                "{refused}: {found:?}"
            );
        }
        assert_eq!(message("'replicas: ' + string(self.replicas)"), None);
        assert_eq!(message("self.free.reason"), None);
        assert_eq!(
            message("self.replicas").as_deref(),
            Some("messageExpression must evaluate to a string")
        );
        assert!(
            message("'n' + self.replicas")
                .unwrap()
                .starts_with("messageExpression compilation failed: ERROR: <input>:1:5: found no matching overload for '_+_' applied to '(string, int)'")
        );
    }

    #[test]
    fn kube_s_list_and_regex_functions_answer_as_kube_s() {
        let schema = spec(
            json!([
                {"rule": "self.n.isSorted() && !self.u.isSorted() && self.s.isSorted()"},
                {"rule": "self.n.sum() == 6 && self.e.sum() == 0 && self.d.sum() == 1.5"},
                {"rule": "self.n.min() == 1 && self.n.max() == 3 && self.s.max() == 'c'"},
                {"rule": "self.u.indexOf(2) == 1 && self.u.lastIndexOf(2) == 3 && self.u.indexOf(9) == -1"},
                {"rule": "self.t.find('[0-9]+') == '12' && self.t.findAll('[a-z]') == ['a', 'b', 'c']"},
                {"rule": "self.t.findAll('[a-z]', 2) == ['a', 'b'] && self.t.find('x') == ''"},
                {"rule": "self.t.matches('^\\\\w+$') && matches(self.t, '[0-9]') && !self.t.matches('^[0-9]')"},
                {"rule": "isIP('10.0.0.1') && isIP('::1') && !isIP('010.0.0.1') && !isIP('fe80::1%eth0') && !isIP('x')"},
                {"rule": "isCIDR('10.0.0.0/8') && isCIDR('::/0') && !isCIDR('10.0.0.0/33') && !isCIDR('10.0.0.0') && !isCIDR('1.2.3.4/08')"},
                {"rule": "self.e.min() == 0", "message": "empty min"},
                // Each function once in a false rule: a function missing would skip its rule.
                {"rule": "self.u.isSorted() || self.n.sum() == 0 || self.n.max() == 0 || self.u.indexOf(3) == 1", "message": "lists"},
                {"rule": "self.t.matches('x') || self.t.find('[a-z]') == 'b' || self.t.findAll('1').size() == 0", "message": "regex"},
                {"rule": "isIP('x') || isCIDR('x')", "message": "addresses"}
            ]),
            json!({
                "n": {"type": "array", "items": {"type": "integer"}},
                "u": {"type": "array", "items": {"type": "integer"}},
                "e": {"type": "array", "items": {"type": "integer"}},
                "d": {"type": "array", "items": {"type": "number"}},
                "s": {"type": "array", "items": {"type": "string"}},
                "t": {"type": "string"}
            }),
        );
        let object = json!({"spec": {"n": [1, 2, 3], "u": [3, 2, 1, 2], "e": [],
            "d": [0.5, 1], "s": ["a", "b", "c"], "t": "ab12c"}});
        assert_eq!(
            messages(&schema, &object, None),
            [
                "spec: Invalid value: \"object\": min called on empty list evaluating rule: empty min",
                "spec: Invalid value: \"object\": lists",
                "spec: Invalid value: \"object\": regex",
                "spec: Invalid value: \"object\": addresses",
            ]
        );
    }

    #[test]
    fn a_pattern_built_at_run_time_costs_its_compilation() {
        let data = Size {
            count: 10_000.0,
            bytes: 100_000.0,
            item: 10.0,
        };
        let literal = bound(
            &compile("self.l.all(x, x.matches('^a'))").unwrap(),
            data,
            &[],
            &mut Sizes::new(),
        );
        let dynamic = bound(
            &compile("self.l.all(x, 'a'.matches(x))").unwrap(),
            data,
            &[],
            &mut Sizes::new(),
        );
        assert!(literal < PER_CALL_LIMIT, "{literal}");
        assert!(dynamic > PER_CALL_LIMIT, "{dynamic}");
    }

    #[test]
    fn formatted_strings_are_timestamps_and_durations() {
        let schema = spec(
            json!([
                {"rule": "self.start < self.end && self.end - self.start == duration('90m')"},
                {"rule": "self.timeout <= duration('1h') && self.day < timestamp('2024-01-02T00:00:00Z')"},
                {"rule": "self.timeout > duration('1h')", "message": "long"}
            ]),
            json!({
                "start": {"type": "string", "format": "date-time"},
                "end": {"type": "string", "format": "date-time"},
                "timeout": {"type": "string", "format": "duration"},
                "day": {"type": "string", "format": "date"}
            }),
        );
        let object = json!({"spec": {"start": "2024-01-01T10:00:00Z",
            "end": "2024-01-01T12:30:00+01:00", "timeout": "1h", "day": "2024-01-01"}});
        assert_eq!(
            messages(&schema, &object, None),
            ["spec: Invalid value: \"object\": long"]
        );
    }

    #[test]
    fn durations_parse_as_go_and_strfmt_parse_them() {
        let second = 1_000_000_000;
        assert_eq!(parse_duration("1h30m"), Some(5_400 * second));
        assert_eq!(parse_duration("1.5s"), Some(second * 3 / 2));
        assert_eq!(parse_duration("-2ms"), Some(-2_000_000));
        assert_eq!(parse_duration("2d"), Some(172_800 * second));
        assert_eq!(parse_duration("0"), Some(0));
        assert_eq!(parse_duration("1"), None);
        assert_eq!(parse_duration("1x"), None);
        assert_eq!(parse_duration(""), None);
        assert_eq!(parse_duration("999999999999h"), None);
    }

    #[test]
    fn field_paths_follow_the_schema() {
        let schema = json!({"type": "object", "properties": {
            "a": {"type": "object", "properties": {"b.c": {"type": "string"}}},
            "m": {"type": "object", "additionalProperties": {"type": "string"}}}});
        let schema = schema.as_object().unwrap();
        assert_eq!(
            normalized_field_path(schema, ".a['b.c']"),
            Ok("a.b.c".into())
        );
        assert_eq!(normalized_field_path(schema, ".m['k']"), Ok("m[k]".into()));
        assert_eq!(normalized_field_path(schema, ".m.k"), Ok("m[k]".into()));
        assert_eq!(
            normalized_field_path(schema, ".x"),
            Err("does not refer to a valid field".into())
        );
        assert_eq!(
            normalized_field_path(schema, "a"),
            Err("expected [ or . but got: a".into())
        );
    }

    #[test]
    fn escaping_follows_kube() {
        assert_eq!(escape("x-y").as_deref(), Some("x__dash__y"));
        assert_eq!(escape("a.b/c").as_deref(), Some("a__dot__b__slash__c"));
        assert_eq!(escape("a__b").as_deref(), Some("a__underscores__b"));
        assert_eq!(escape("namespace").as_deref(), Some("__namespace__"));
        assert_eq!(escape("1a"), None);
        assert_eq!(escape("a b"), None);
    }
}
