//! kube's CEL authorization library (`k8s.io/apiserver/pkg/cel/library/authz.go`), the
//! `authorizer` variable of admission policies, over an [`Authorizer`] the caller gives (this
//! crate knows no server type: the server passes its authorization chain as a trait object).
//!
//! ## Guarantees
//! - The types and functions are kube's: `authorizer.path(p)` (a `PathCheck`; `path must not
//!   be empty` for a blank `p`), `authorizer.group(g)` (a `GroupCheck`),
//!   `authorizer.serviceAccount(ns, name)` (an `Authorizer` acting as
//!   `system:serviceaccount:<ns>:<name>` in `system:serviceaccounts` and
//!   `system:serviceaccounts:<ns>`; `Invalid service account name` unless `name` is a DNS
//!   subdomain, `Invalid service account namespace` unless `ns` is a DNS label),
//!   `<GroupCheck>.resource(r)` (a `ResourceCheck`; `resource must not be empty` for a blank
//!   `r`), `<ResourceCheck>.subresource(s)`, `.namespace(ns)`, `.name(n)`,
//!   `.fieldSelector(s)`, `.labelSelector(s)` (each a new `ResourceCheck`, `""` unsets),
//!   `<PathCheck|ResourceCheck>.check(verb)` (a `Decision`), and `<Decision>.allowed()`,
//!   `.reason()`, `.errored()`, `.error()`.
//! - `check` asks the [`Authorizer`] once, synchronously, with the user of the value it was
//!   built from: the request's user, or the service account `serviceAccount` named. A resource
//!   check is a resource request of API version `*`; a path check a non-resource request.
//! - A check costs kube's 350,000 in the expression's bound (two checks per expression fit
//!   the per-call limit, a third does not, as in kube); the builders a tenth per byte of
//!   their strings, as any string function (so a long string built into checks in a loop is
//!   charged for each copy).
//! - `authorizer.requestResource` is the `ResourceCheck` of the request itself (its group,
//!   resource, subresource, namespace and name), as kube's `NewResourceAuthorizerVal`.
//!
//! ## Not here
//! - Field and label selectors are kept but not given to the authorizer (this server's
//!   authorizers, as kube's RBAC, ignore them).

use std::fmt;
use std::sync::Arc;

use cel::common::functions::Function;
use cel::common::types::{CelBool, CelString, STRING_TYPE, Type};
use cel::common::value::{CowVal, StaticVal, Val};
use cel::{DeclarationError, Env, ExecutionError};
use serde_json::{Value, json};

use super::library::{one, opaque_val, string, two};

/// What a check asks: a resource request, or a request on a path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CheckTarget {
    /// A resource request (kube's `ResourceRequest: true`, API version `*`).
    Resource {
        /// The API group (`""` for the core group).
        group: String,
        /// The plural resource name.
        resource: String,
        /// The subresource, or empty.
        subresource: String,
        /// The namespace, `""` for the cluster scope.
        namespace: String,
        /// The object's name, or empty.
        name: String,
    },
    /// A non-resource request on `path`.
    Path(String),
}

/// What an authorizer answered (kube's decision, reason and error).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuthzDecision {
    /// Allowed; `false` is kube's deny or no opinion.
    pub allowed: bool,
    /// The authorizer's reason.
    pub reason: String,
    /// The authorizer's error, empty when it had none.
    pub error: String,
}

/// The server's authorization chain, as the `authorizer` variable asks it.
pub trait Authorizer: Send + Sync + fmt::Debug {
    /// Whether `user` (an `authentication/v1` `UserInfo`: `username`, `uid`, `groups`,
    /// `extra`) may `verb` on `target`.
    fn check(&self, user: &Value, verb: &str, target: &CheckTarget) -> AuthzDecision;
}

const AUTHORIZER: Type = Type::new_unspecified_type("kubernetes.authorization.Authorizer");
static AUTHORIZER_TYPE: Type = AUTHORIZER;
const PATH_CHECK: Type = Type::new_unspecified_type("kubernetes.authorization.PathCheck");
static PATH_CHECK_TYPE: Type = PATH_CHECK;
const GROUP_CHECK: Type = Type::new_unspecified_type("kubernetes.authorization.GroupCheck");
static GROUP_CHECK_TYPE: Type = GROUP_CHECK;
const RESOURCE_CHECK: Type = Type::new_unspecified_type("kubernetes.authorization.ResourceCheck");
static RESOURCE_CHECK_TYPE: Type = RESOURCE_CHECK;
const DECISION: Type = Type::new_unspecified_type("kubernetes.authorization.Decision");
static DECISION_TYPE: Type = DECISION;

/// The cost of one `check` (kube's `CallCost` and `EstimateCallCost` of `check`).
pub(crate) const CHECK_COST: f64 = 350_000.0;

/// The functions of the library that read no string, for the cost bound: each costs a
/// constant (the builders, `path(p)`, `group(g)`, `resource(r)`, ..., cost a tenth per byte
/// of their string, as any string function; `check` costs [`CHECK_COST`]).
pub(crate) const FUNCTIONS: [&str; 5] = ["check", "allowed", "reason", "errored", "error"];

/// The `authorizer` of a request: who asks, and whom.
#[derive(Clone)]
pub struct AuthorizerVal {
    authorizer: Arc<dyn Authorizer>,
    user: Arc<Value>,
}

impl fmt::Debug for AuthorizerVal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Authorizer")
            .field("user", &self.user)
            .finish()
    }
}

impl AuthorizerVal {
    /// The `authorizer` variable: `authorizer` checking for `user` (a `UserInfo`).
    #[must_use]
    pub fn new(authorizer: Arc<dyn Authorizer>, user: Value) -> AuthorizerVal {
        AuthorizerVal {
            authorizer,
            user: Arc::new(user),
        }
    }

    /// `authorizer.requestResource`: the check of the request's own resource.
    #[must_use]
    pub fn request_resource(&self, target: CheckTarget) -> Box<dyn Val> {
        Box::new(Builder {
            authorizer: self.clone(),
            kind: &RESOURCE_CHECK_TYPE,
            target,
            selectors: [String::new(), String::new()],
        })
    }
}

/// A `PathCheck`, `GroupCheck` or `ResourceCheck` (its `kind`), with what it checks so far.
#[derive(Clone, Debug)]
struct Builder {
    authorizer: AuthorizerVal,
    kind: &'static Type,
    target: CheckTarget,
    /// The field and label selectors (kept, not checked: see the module docs).
    selectors: [String; 2],
}

#[derive(Clone, Debug)]
struct Decision(AuthzDecision);

opaque_val!(AuthorizerVal, &AUTHORIZER_TYPE, get: |_: &AuthorizerVal| &AUTHORIZER_TYPE);
opaque_val!(Builder, &RESOURCE_CHECK_TYPE, get: |b: &Builder| b.kind);
opaque_val!(Decision, &DECISION_TYPE, get: |_: &Decision| &DECISION_TYPE);

/// Registers the library on `env`.
pub(super) fn extension(env: &mut Env) -> Result<(), DeclarationError> {
    let string = || vec![STRING_TYPE];
    env.add_member_overload("path", "authorizer_path", AUTHORIZER, string(), path)?;
    env.add_member_overload("group", "authorizer_group", AUTHORIZER, string(), group)?;
    env.add_member_overload(
        "serviceAccount",
        "authorizer_serviceaccount",
        AUTHORIZER,
        vec![STRING_TYPE, STRING_TYPE],
        service_account,
    )?;
    env.add_member_overload(
        "resource",
        "groupcheck_resource",
        GROUP_CHECK,
        string(),
        resource,
    )?;
    for (name, id, setter) in [
        (
            "subresource",
            "resourcecheck_subresource",
            subresource as Function,
        ),
        ("namespace", "resourcecheck_namespace", namespace),
        ("name", "resourcecheck_name", name),
        ("fieldSelector", "authorizer_fieldselector", field_selector),
        ("labelSelector", "authorizer_labelselector", label_selector),
    ] {
        env.add_member_overload(name, id, RESOURCE_CHECK, string(), setter)?;
    }
    env.add_member_overload("check", "pathcheck_check", PATH_CHECK, string(), check)?;
    env.add_member_overload(
        "check",
        "resourcecheck_check",
        RESOURCE_CHECK,
        string(),
        check,
    )?;
    for (name, id, accessor) in [
        ("allowed", "decision_allowed", allowed as Function),
        ("reason", "decision_reason", reason),
        ("errored", "decision_errored", errored),
        ("error", "decision_error", error_of),
    ] {
        env.add_member_overload(name, id, DECISION, vec![], accessor)?;
    }
    Ok(())
}

fn receiver<'a, T: StaticVal>(val: &'a dyn Val, function: &str) -> Result<&'a T, ExecutionError> {
    val.downcast_ref::<T>()
        .ok_or_else(|| ExecutionError::function_error(function, "no such overload"))
}

fn error(function: &str, message: &str) -> ExecutionError {
    ExecutionError::function_error(function, message)
}

fn path<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [authorizer, path] = two(args)?;
    let authorizer = receiver::<AuthorizerVal>(authorizer.as_ref(), "path")?;
    let path = string(path.as_ref(), "path")?;
    if path.trim().is_empty() {
        return Err(error("path", "path must not be empty"));
    }
    Ok(CowVal::owned(Builder {
        authorizer: authorizer.clone(),
        kind: &PATH_CHECK_TYPE,
        target: CheckTarget::Path(path.to_owned()),
        selectors: [String::new(), String::new()],
    }))
}

fn group<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [authorizer, group] = two(args)?;
    let authorizer = receiver::<AuthorizerVal>(authorizer.as_ref(), "group")?;
    Ok(CowVal::owned(Builder {
        authorizer: authorizer.clone(),
        kind: &GROUP_CHECK_TYPE,
        target: CheckTarget::Resource {
            group: string(group.as_ref(), "group")?.to_owned(),
            resource: String::new(),
            subresource: String::new(),
            namespace: String::new(),
            name: String::new(),
        },
        selectors: [String::new(), String::new()],
    }))
}

fn service_account<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let count = args.len();
    let [authorizer, namespace, name]: [CowVal<'b, 'v>; 3] = args
        .try_into()
        .map_err(|_| ExecutionError::invalid_argument_count(3, count))?;
    let function = "serviceAccount";
    let authorizer = receiver::<AuthorizerVal>(authorizer.as_ref(), function)?;
    let namespace = string(namespace.as_ref(), function)?;
    let name = string(name.as_ref(), function)?;
    if crate::names::validate_dns1123_subdomain(name).is_err() {
        return Err(error(function, "Invalid service account name"));
    }
    if crate::names::validate_dns1123_label(namespace).is_err() {
        return Err(error(function, "Invalid service account namespace"));
    }
    // kube's `ServiceAccountInfo.UserInfo()`: the account's name and its two groups.
    let user = json!({
        "username": format!("system:serviceaccount:{namespace}:{name}"),
        "groups": ["system:serviceaccounts", format!("system:serviceaccounts:{namespace}")],
    });
    Ok(CowVal::owned(AuthorizerVal::new(
        authorizer.authorizer.clone(),
        user,
    )))
}

fn resource<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [check, value] = two(args)?;
    let value = string(value.as_ref(), "resource")?;
    if value.trim().is_empty() {
        return Err(error("resource", "resource must not be empty"));
    }
    let mut next = receiver::<Builder>(check.as_ref(), "resource")?.clone();
    next.kind = &RESOURCE_CHECK_TYPE;
    if let CheckTarget::Resource { resource, .. } = &mut next.target {
        value.clone_into(resource);
    }
    Ok(CowVal::owned(next))
}

/// A `ResourceCheck` with one of its parts set by `set`.
fn with<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
    function: &str,
    set: fn(&mut Builder, &str),
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [check, value] = two(args)?;
    let mut next = receiver::<Builder>(check.as_ref(), function)?.clone();
    set(&mut next, string(value.as_ref(), function)?);
    Ok(CowVal::owned(next))
}

fn part(builder: &mut Builder, which: usize, value: &str) {
    if let CheckTarget::Resource {
        subresource,
        namespace,
        name,
        ..
    } = &mut builder.target
    {
        let part = match which {
            0 => subresource,
            1 => namespace,
            _ => name,
        };
        value.clone_into(part);
    }
}

fn subresource<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    with(args, "subresource", |b, v| part(b, 0, v))
}

fn namespace<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    with(args, "namespace", |b, v| part(b, 1, v))
}

fn name<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    with(args, "name", |b, v| part(b, 2, v))
}

fn field_selector<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    with(args, "fieldSelector", |b, v| {
        v.clone_into(&mut b.selectors[0])
    })
}

fn label_selector<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    with(args, "labelSelector", |b, v| {
        v.clone_into(&mut b.selectors[1])
    })
}

fn check<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [check, verb] = two(args)?;
    let builder = receiver::<Builder>(check.as_ref(), "check")?;
    let verb = string(verb.as_ref(), "check")?;
    let AuthorizerVal { authorizer, user } = &builder.authorizer;
    Ok(CowVal::owned(Decision(authorizer.check(
        user,
        verb,
        &builder.target,
    ))))
}

fn decision<'a>(
    args: &'a CowVal<'_, '_>,
    function: &str,
) -> Result<&'a AuthzDecision, ExecutionError> {
    Ok(&receiver::<Decision>(args.as_ref(), function)?.0)
}

fn allowed<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let decision = one(args)?;
    Ok(CowVal::owned(CelBool::from(
        self::decision(&decision, "allowed")?.allowed,
    )))
}

fn reason<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let decision = one(args)?;
    Ok(CowVal::owned(CelString::from(
        self::decision(&decision, "reason")?.reason.clone(),
    )))
}

fn errored<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let decision = one(args)?;
    Ok(CowVal::owned(CelBool::from(
        !self::decision(&decision, "errored")?.error.is_empty(),
    )))
}

fn error_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let decision = one(args)?;
    Ok(CowVal::owned(CelString::from(
        self::decision(&decision, "error")?.error.clone(),
    )))
}
