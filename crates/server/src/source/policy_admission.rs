//! kube-apiserver's `ValidatingAdmissionPolicy` admission plugin on the store's writes: the
//! policies, bindings, params and namespaces read from their caches, evaluated by
//! [`watchkeeper_api::admission_policy`].
//!
//! ## Guarantees
//! - Every create, update (PUT, PATCH, apply, a subresource's write) and delete of any
//!   resource, custom resources included, dry runs included, is evaluated after the object's
//!   own validation, LimitRanger and PodSecurity, and before quota admission and the
//!   transaction (kube's order: validating admission after the strategy's validation, its
//!   plugins in kube's order); the admission configuration kinds are exempt.
//! - Policies, bindings and params are read from their caches as they are (kube's
//!   informers): a policy or binding written is applied to the requests after it once its
//!   cache has it (a write waits for its own revision in its cache before answering, so the
//!   next request from the same client sees it). A binding whose policy is not in the cache
//!   does nothing.
//! - A denial is the write's answer; `Warn` bindings' warnings go out as `Warning` headers
//!   with the write's answer.
//! - `Audit` bindings' failures and the policies' `auditAnnotations` become the request's
//!   audit annotations ([`crate::audit::context::annotate`]), refused or not.
//! - The `authorizer` variable asks the server's authorization chain as the request's user
//!   ([`crate::auth::cel`]); a caching proxy, which has no store source, evaluates no policy.
//! - `--disable-admission-plugins=ValidatingAdmissionPolicy` turns it off.

use std::sync::Arc;

use serde_json::{Value, json};
use watchkeeper_api::ApiError;
use watchkeeper_api::admission_policy::{
    self, Attributes, Authorizer, Cluster, Equivalent, Operation,
};
use watchkeeper_core::object_key;

use crate::cache::Resource;

/// The write being admitted.
#[derive(Clone, Copy)]
pub struct Write<'a> {
    /// The resource written.
    pub resource: &'a Resource,
    /// The subresource, or empty.
    pub subresource: &'a str,
    /// The object written (`None` on a delete).
    pub object: Option<&'a Value>,
    /// The object before (`None` on a create).
    pub old: Option<&'a Value>,
    /// Who writes.
    pub user: &'a crate::auth::User,
    /// `dryRun=All`.
    pub dry_run: bool,
    /// The field manager (creates and updates).
    pub manager: &'a str,
}

/// The caches of the served resources, as policies (and webhooks, `super::webhook`) look
/// things up in them.
pub struct Caches<'r>(pub &'r [Arc<Resource>]);

/// The served (`group`, `plural`) resource of `resources` at its stored version (not a
/// converted view).
pub fn served<'r>(
    resources: &'r [Arc<Resource>],
    group: &str,
    plural: &str,
) -> Option<&'r Resource> {
    resources
        .iter()
        .find(|r| r.def.group == group && r.def.plural == plural && r.conversion.is_none())
        .map(|r| &**r)
}

/// Every object of `resource` (none without one) whose key starts with `prefix` (all when
/// `None`), as its cache has them (kube's listers).
pub fn cached_objects(resource: Option<&Resource>, prefix: Option<&str>) -> Vec<Value> {
    resource
        .map(|resource| {
            resource
                .cache()
                .latest()
                .range(prefix, None)
                .map(|object| object.body().clone())
                .collect()
        })
        .unwrap_or_default()
}

impl Caches<'_> {
    fn served(&self, group: &str, plural: &str) -> Option<&Resource> {
        served(self.0, group, plural)
    }

    fn objects(&self, resource: Option<&Resource>, prefix: Option<&str>) -> Vec<Value> {
        cached_objects(resource, prefix)
    }

    /// The resource serving `api_version`/`kind`.
    fn of_kind(&self, api_version: &str, kind: &str) -> Option<&Resource> {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        self.0
            .iter()
            .find(|r| r.def.group == group && r.def.version == version && r.def.kind == kind)
            .map(|r| &**r)
    }
}

impl Cluster for Caches<'_> {
    fn namespace(&self, name: &str) -> Option<Value> {
        let namespaces = self.served("", "namespaces")?;
        let (found, _) = namespaces.cache().get(&object_key("", name));
        found.map(|namespace| namespace.body().clone())
    }

    fn param_scope(&self, api_version: &str, kind: &str) -> Option<bool> {
        self.of_kind(api_version, kind).map(|r| r.def.namespaced)
    }

    fn params(&self, api_version: &str, kind: &str, namespace: &str) -> Vec<Value> {
        let resource = self.of_kind(api_version, kind);
        if namespace.is_empty() {
            return self.objects(resource, None);
        }
        let prefix = format!("{namespace}/");
        self.objects(resource, Some(&prefix))
    }

    fn equivalents(&self, group: &str, resource: &str) -> Vec<Equivalent> {
        self.0
            .iter()
            .filter(|r| r.def.group == group && r.def.plural == resource)
            .map(|r| Equivalent {
                group: r.def.group.clone(),
                version: r.def.version.clone(),
                resource: r.def.plural.clone(),
                kind: r.def.kind.clone(),
            })
            .collect()
    }
}

/// Evaluates the policies on `write`, their `authorizer` checks decided by `authorizer`; the
/// warnings of `Warn` bindings.
///
/// # Errors
/// The denial of a `Deny` binding, in kube's words and code.
pub fn admit(
    resources: &[Arc<Resource>],
    write: &Write<'_>,
    authorizer: Option<&Arc<dyn Authorizer>>,
) -> Result<Vec<String>, ApiError> {
    let def = &write.resource.def;
    if admission_policy::is_exempt(def) {
        return Ok(Vec::new());
    }
    let caches = Caches(resources);
    let group = "admissionregistration.k8s.io";
    let bindings = caches.objects(
        caches.served(group, "validatingadmissionpolicybindings"),
        None,
    );
    if bindings.is_empty() {
        return Ok(Vec::new());
    }
    let policies = caches.objects(caches.served(group, "validatingadmissionpolicies"), None);
    let attributes = attributes(write);
    let mut annotations = Vec::new();
    let admitted = admission_policy::admit_audited(
        &policies,
        &bindings,
        &attributes,
        &caches,
        authorizer,
        &mut annotations,
    );
    for (key, value) in annotations {
        crate::audit::context::annotate(&key, value);
    }
    admitted
}

/// What admission knows of `write` (kube's `admission.Attributes`): its name, namespace (a
/// Namespace's own name), operation, user and options.
#[must_use]
pub fn attributes<'a>(write: &Write<'a>) -> Attributes<'a> {
    let def = &write.resource.def;
    let any: &'a Value = write.object.or(write.old).unwrap_or(&NULL);
    let text = |pointer: &str| {
        any.pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let name = text("/metadata/name");
    let namespace = if def.group.is_empty() && def.plural == "namespaces" {
        name
    } else if def.namespaced {
        text("/metadata/namespace")
    } else {
        ""
    };
    let operation = match (write.object, write.old) {
        (Some(_), None) => Operation::Create,
        (None, _) => Operation::Delete,
        (Some(_), Some(_)) => Operation::Update,
    };
    let mut user = serde_json::Map::new();
    user.insert("username".to_owned(), json!(write.user.name));
    if !write.user.uid.is_empty() {
        user.insert("uid".to_owned(), json!(write.user.uid));
    }
    if !write.user.groups.is_empty() {
        user.insert("groups".to_owned(), json!(write.user.groups));
    }
    let kind = match operation {
        Operation::Create => "CreateOptions",
        Operation::Update => "UpdateOptions",
        Operation::Delete | Operation::Connect => "DeleteOptions",
    };
    let mut options = json!({"kind": kind, "apiVersion": "meta.k8s.io/v1"});
    if write.dry_run {
        options["dryRun"] = json!(["All"]);
    }
    if operation != Operation::Delete && !write.manager.is_empty() {
        options["fieldManager"] = json!(write.manager);
    }
    Attributes {
        def,
        subresource: write.subresource,
        name,
        namespace,
        operation,
        object: write.object,
        old_object: write.old,
        user: Value::Object(user),
        dry_run: write.dry_run,
        options,
    }
}

static NULL: Value = Value::Null;
