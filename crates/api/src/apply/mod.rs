//! Field ownership and server-side apply, with structured-merge-diff's semantics as
//! kube-apiserver uses them (its `managedfields` package).
//!
//! ## Guarantees
//! - Every create, update and patch records who changed what: [`update`] compares the old
//!   object (for a create, the kind's Go zero value,
//!   [`crate::protobuf::gostruct::zero_object`]: kube-apiserver's field manager compares a
//!   create with a new struct) with the new one and gives the writing manager (an `Update`
//!   entry: `fieldManager`, or [`default_manager`] of the User-Agent) every added or modified
//!   path; the paths it
//!   changed are taken from other managers, removed paths are taken from everyone. It never
//!   fails: an object its schema cannot walk gets no managed fields, as kube-apiserver's
//!   `UpdateNoErrors`.
//! - [`apply`] merges an applied configuration into the live object (or an empty one, for a
//!   create) and makes the applier (an `Apply` entry) own exactly the configuration's paths.
//!   Paths another manager owns whose value the apply would change are conflicts: without
//!   `force` they are a 409 listing each path and manager in kube-apiserver's words, and
//!   nothing is written; with `force` the applier takes them. A path the applier owned and no
//!   longer applies is removed from the object when no manager (applier or updater) owns it
//!   any more. Applying is idempotent: the same configuration again changes nothing.
//! - The paths every write leaves unowned are kube-apiserver's: `apiVersion`, `kind`,
//!   `metadata` itself and its server-set fields (`name`, `namespace`, `uid`,
//!   `creationTimestamp`, `generation`, `resourceVersion`, `selfLink`, `managedFields`).
//! - [`set_managed_fields`] writes `metadata.managedFields` in kube-apiserver's shape
//!   (`manager`, `operation`, `apiVersion`, `time`, `fieldsType: FieldsV1`, `fieldsV1`,
//!   `subresource`), sorted as kube-apiserver sorts them (operation, time, manager), without
//!   managers that own nothing.
//! - At most ten `Update` entries per object: older ones are merged into `ancient-changes`
//!   ([`cap`]). An apply body may be YAML or JSON ([`config::parse_configuration`]).
//!
//! The time is a parameter: this crate reads no clock.

pub mod cap;
pub mod config;
pub mod fieldpath;
pub mod kept;
pub mod typed;
pub mod versions;

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};
use watchkeeper_core::pointer::Pointer as _;

use crate::error::ApiError;
use crate::resources::ResourceDef;
use fieldpath::{PathElement, Set, path_string};
use typed::Ty;

/// The operation of a managed fields entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Operation {
    /// Server-side apply.
    Apply,
    /// Create, update or patch.
    Update,
}

impl Operation {
    fn name(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// Who a managed fields entry belongs to: kube-apiserver's manager identifier (an applier's
/// does not include the API version, so it is the same whatever version it applies with).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ManagerId {
    /// The manager's name.
    pub manager: String,
    /// Apply or Update.
    pub operation: Operation,
    /// The API version, for Update entries (empty for Apply).
    pub api_version: String,
    /// The subresource written (`status`), or empty.
    pub subresource: String,
}

impl ManagerId {
    /// The manager as kube-apiserver names it in a conflict: `"name"`, with
    /// ` with subresource "status"` and, for updaters, ` using v1`.
    fn describe(&self) -> String {
        let mut out = format!("{:?}", self.manager);
        if !self.subresource.is_empty() {
            out.push_str(&format!(" with subresource {:?}", self.subresource));
        }
        if self.operation == Operation::Update {
            out.push_str(&format!(" using {}", self.api_version));
        }
        out
    }
}

/// One manager's entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The API version of the set.
    pub api_version: String,
    /// When it last changed (RFC 3339), if known.
    pub time: Option<String>,
    /// The paths it owns.
    pub set: Set,
}

/// Every manager of an object.
pub type Managers = BTreeMap<ManagerId, Entry>;

/// What a write knows about its writer.
#[derive(Clone, Copy, Debug)]
pub struct Writer<'a> {
    /// The manager's name (`fieldManager`, or [`default_manager`]).
    pub manager: &'a str,
    /// The subresource written (`status`), or empty.
    pub subresource: &'a str,
    /// A custom resource's structural schema (its CRD version's `openAPIV3Schema`), whose
    /// list and map markers the typed walks follow, as kube-apiserver builds a custom
    /// resource's type from it; `None` for built-in kinds (their published schemas) and for
    /// custom resources without one (deduced).
    pub schema: Option<&'a Value>,
}

/// kube-apiserver's default manager of a write without `fieldManager`: the User-Agent up to
/// its first `/` (`kubectl/v1.33.0 (linux/amd64)` → `kubectl`), at most 128 characters.
#[must_use]
pub fn default_manager(user_agent: &str) -> String {
    let prefix = user_agent.split('/').next().unwrap_or_default();
    prefix.chars().take(128).collect()
}

/// The schema position of `def`'s root: a custom resource's own structural schema
/// (`custom`), the kind's published definitions, or deduced for kinds without either.
pub(crate) fn schema_root<'a>(def: &ResourceDef, custom: Option<&'a Value>) -> Ty<'a> {
    if let Some(schema) = custom {
        return Ty::custom(crate::schema::definitions(), schema);
    }
    match crate::schema::definitions_of(def) {
        Some((definitions, root)) => Ty::root(definitions, root),
        None => Ty::deduced(),
    }
}

/// The paths no manager owns (kube-apiserver's `stripMetaManager`), built once.
fn stripped() -> &'static Set {
    static STRIPPED: std::sync::LazyLock<Set> = std::sync::LazyLock::new(stripped_set);
    &STRIPPED
}

fn stripped_set() -> Set {
    let mut set = Set::new();
    let field = |name: &str| PathElement::Field(name.to_owned());
    set.insert(&[field("apiVersion")]);
    set.insert(&[field("kind")]);
    set.insert(&[field("metadata")]);
    for name in [
        "name",
        "namespace",
        "creationTimestamp",
        "selfLink",
        "uid",
        "clusterName",
        "generation",
        "managedFields",
        "resourceVersion",
    ] {
        set.insert(&[field("metadata"), field(name)]);
    }
    set
}

/// The managers recorded in `object`'s `metadata.managedFields`; an entry that does not parse
/// is dropped.
#[must_use]
pub fn managers_of(object: &Value) -> Managers {
    managers_of_entries(entries_of(object))
}

/// `object`'s `metadata.managedFields` entries (none unless it is a list).
fn entries_of(object: &Value) -> &[Value] {
    object
        .at("/metadata/managedFields")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// [`managers_of`] a list of `managedFields` entries.
fn managers_of_entries(entries: &[Value]) -> Managers {
    let mut managers = Managers::new();
    for entry in entries {
        let text = |key: &str| {
            entry
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let operation = match entry.get("operation").and_then(Value::as_str) {
            Some("Apply") => Operation::Apply,
            Some("Update") => Operation::Update,
            _ => continue,
        };
        let Some(Ok(set)) = entry.get("fieldsV1").map(Set::from_fields_v1) else {
            continue;
        };
        let api_version = text("apiVersion");
        let id = ManagerId {
            manager: text("manager"),
            operation,
            api_version: if operation == Operation::Apply {
                String::new()
            } else {
                api_version.clone()
            },
            subresource: text("subresource"),
        };
        let time = entry.get("time").and_then(Value::as_str).map(str::to_owned);
        managers.insert(
            id,
            Entry {
                api_version,
                time,
                set,
            },
        );
    }
    managers
}

/// Writes `managers` as `object`'s `metadata.managedFields` (removed when there are none).
pub fn set_managed_fields(object: &mut Value, managers: &Managers) {
    let mut entries: Vec<(&ManagerId, &Entry)> =
        managers.iter().filter(|(_, e)| !e.set.is_empty()).collect();
    entries.sort_by(|(a, ea), (b, eb)| {
        a.operation
            .cmp(&b.operation)
            .then_with(|| ea.time.cmp(&eb.time))
            .then_with(|| a.manager.cmp(&b.manager))
            .then_with(|| ea.api_version.cmp(&eb.api_version))
            .then_with(|| a.subresource.cmp(&b.subresource))
    });
    // Strings made as values directly: `json!` of a string goes through serde's serializer.
    let text = |text: &str| Value::String(text.to_owned());
    let encoded: Vec<Value> = entries
        .into_iter()
        .map(|(id, entry)| {
            let mut out = Map::new();
            // `ManagedFieldsEntry`'s `manager` and `apiVersion` are `omitempty`: an empty one
            // is left out, as kube-apiserver's encoding of the struct leaves it.
            if !id.manager.is_empty() {
                out.insert("manager".to_owned(), text(&id.manager));
            }
            out.insert("operation".to_owned(), text(id.operation.name()));
            if !entry.api_version.is_empty() {
                out.insert("apiVersion".to_owned(), text(&entry.api_version));
            }
            if let Some(time) = &entry.time {
                out.insert("time".to_owned(), text(time));
            }
            out.insert("fieldsType".to_owned(), text("FieldsV1"));
            out.insert("fieldsV1".to_owned(), entry.set.to_fields_v1());
            if !id.subresource.is_empty() {
                out.insert("subresource".to_owned(), text(&id.subresource));
            }
            Value::Object(out)
        })
        .collect();
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        if encoded.is_empty() {
            metadata.remove("managedFields");
        } else {
            metadata.insert("managedFields".to_owned(), Value::Array(encoded));
        }
    }
}

/// The object without `metadata.managedFields` (what the field sets describe).
fn without_managed_fields(object: &Value) -> Value {
    let mut object = object.clone();
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("managedFields");
    }
    object
}

/// The managers a write starts from: those of the object the client sent when it carries
/// `metadata.managedFields` (kube-apiserver lets a write replace them; kubectl does so to move
/// client-side apply ownership to server-side apply), else the stored object's.
#[must_use]
pub fn base_managers(old: Option<&Value>, sent: &Value) -> Managers {
    match sent.at("/metadata/managedFields") {
        Some(Value::Array(_)) => managers_of(sent),
        _ => old.map(managers_of).unwrap_or_default(),
    }
}

/// Where an update's or patch's managers come from (see [`base_managers`]), not yet parsed:
/// [`update_managed_fields`] keeps the entries as they are when the write changes no set
/// ([`kept`]).
#[derive(Debug)]
pub enum Base {
    /// The `metadata.managedFields` list of the object the client sent.
    Sent(Vec<Value>),
    /// The stored object's (the client sent no list).
    Stored,
}

impl Base {
    /// The base of `sent`, taken out of it: its `metadata.managedFields` when that is a list
    /// (removed from `sent`), else the stored object's. For an object whose
    /// `managedFields` nothing reads any more (the update removes them).
    pub fn take(sent: &mut Value) -> Base {
        match sent.get_mut("metadata").and_then(Value::as_object_mut) {
            Some(metadata) if metadata.get("managedFields").is_some_and(Value::is_array) => {
                match metadata.remove("managedFields") {
                    Some(Value::Array(entries)) => Base::Sent(entries),
                    _ => Base::Stored,
                }
            }
            _ => Base::Stored,
        }
    }

    /// The base of `sent`, which stays as it is (its list copied).
    #[must_use]
    pub fn of(sent: &Value) -> Base {
        match sent.at("/metadata/managedFields") {
            Some(Value::Array(entries)) => Base::Sent(entries.clone()),
            _ => Base::Stored,
        }
    }

    fn entries<'a>(&'a self, old: &'a Value) -> &'a [Value] {
        match self {
            Base::Sent(entries) => entries,
            Base::Stored => entries_of(old),
        }
    }
}

/// An update or patch of `old` into `new` by `writer` at `time`, from `base`: `new`'s
/// `metadata.managedFields` as [`update`] (from [`base_managers`]) and then
/// [`set_managed_fields`] write them, without parsing and encoding the entries again when
/// the write changes no manager's set ([`kept`]).
pub fn update_managed_fields(
    def: &ResourceDef,
    old: &Value,
    new: &mut Value,
    base: Base,
    writer: Writer<'_>,
    time: &str,
) {
    let ty = schema_root(def, writer.schema);
    let managers = match typed::compare_without_managed_fields(old, new, ty) {
        Err(_) => Managers::new(),
        Ok(comparison) => {
            let api_version = def.api_version();
            let kept = kept::unchanged(base.entries(old), &api_version, &comparison, writer);
            if let Some(kept) = kept {
                let mut entries = match base {
                    Base::Sent(entries) => entries,
                    Base::Stored => entries_of(old).to_vec(),
                };
                kept.apply(&mut entries, time);
                if let Some(metadata) = new.get_mut("metadata").and_then(Value::as_object_mut) {
                    metadata.insert("managedFields".to_owned(), Value::Array(entries));
                }
                return;
            }
            let managers = managers_of_entries(base.entries(old));
            updated(def, managers, comparison, writer, time)
        }
    };
    set_managed_fields(new, &managers);
}

/// The managers after a create (`old` is `None`), update or patch by `writer` at `time`,
/// starting from `managers` (see [`base_managers`] and the module docs).
#[must_use]
pub fn update(
    def: &ResourceDef,
    old: Option<&Value>,
    new: &Value,
    managers: Managers,
    writer: Writer<'_>,
    time: &str,
) -> Managers {
    let ty = schema_root(def, writer.schema);
    // A create is compared with the kind's zero object, as kube-apiserver's field manager
    // compares it with a new Go struct: what Go writes for it (`status: {}`, a template's
    // `creationTimestamp: null`, `rules: null`) is nobody's.
    let zero;
    let old = match old {
        Some(old) => old,
        None => {
            zero = crate::protobuf::gostruct::zero_object(def).unwrap_or_else(|| json!({}));
            &zero
        }
    };
    // Compared as if neither had managedFields, without copying both objects to drop them.
    let Ok(comparison) = typed::compare_without_managed_fields(old, new, ty) else {
        return Managers::new();
    };
    updated(def, managers, comparison, writer, time)
}

/// [`update`] once the objects compared as `comparison`.
fn updated(
    def: &ResourceDef,
    mut managers: Managers,
    comparison: typed::Comparison,
    writer: Writer<'_>,
    time: &str,
) -> Managers {
    let id = ManagerId {
        manager: writer.manager.to_owned(),
        operation: Operation::Update,
        api_version: def.api_version(),
        subresource: writer.subresource.to_owned(),
    };
    // The set operations work in place: the managers' sets are the largest values here, and
    // `union`/`difference` would copy all of them (each several times) to change a few paths.
    let typed::Comparison {
        added,
        removed,
        modified: mut changed,
    } = comparison;
    changed.add_all(&added);
    for (other, entry) in &mut managers {
        if *other != id {
            entry.set.remove_all(&changed);
            entry.set.remove_all(&removed);
        }
    }
    let previous = managers.remove(&id);
    let unchanged = changed.is_empty() && removed.is_empty();
    let (mut set, previous_time) = match previous {
        Some(previous) => (previous.set, Some(previous.time)),
        None => (Set::new(), None),
    };
    set.remove_all(&removed);
    set.add_all(&changed);
    set.remove_all(stripped());
    if !set.is_empty() {
        let time = match previous_time {
            Some(previous_time) if unchanged => previous_time,
            _ => Some(time.to_owned()),
        };
        managers.insert(
            id,
            Entry {
                api_version: def.api_version(),
                time,
                set,
            },
        );
    }
    managers.retain(|_, entry| !entry.set.is_empty());
    cap::cap_update_managers(&mut managers, cap::MAX_UPDATE_MANAGERS);
    managers
}

/// 409 Conflict of an apply, in kube-apiserver's words: `Apply failed with 1 conflict:
/// conflict with "x" using v1: .data.a`, or for several, `Apply failed with N conflicts:
/// conflicts with "x":\n- .data.a\n- ...`; one `FieldManagerConflict` cause per path.
fn conflict_error(conflicts: &[(ManagerId, Vec<PathElement>)]) -> ApiError {
    let causes: Vec<Value> = conflicts
        .iter()
        .map(|(manager, path)| {
            json!({"reason": "FieldManagerConflict", "message": format!("conflict with {}", manager.describe()), "field": path_string(path)})
        })
        .collect();
    let message = if let [(manager, path)] = conflicts {
        format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            manager.describe(),
            path_string(path)
        )
    } else {
        let mut by_manager: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (manager, path) in conflicts {
            by_manager
                .entry(manager.describe())
                .or_default()
                .push(path_string(path));
        }
        let mut lines = Vec::new();
        for (manager, paths) in by_manager {
            lines.push(format!("conflicts with {manager}:"));
            lines.extend(paths.into_iter().map(|p| format!("- {p}")));
        }
        format!(
            "Apply failed with {} conflicts: {}",
            conflicts.len(),
            lines.join("\n")
        )
    };
    ApiError {
        details: Some(json!({"causes": causes})),
        ..ApiError::new(409, "Conflict", message)
    }
}

/// Server-side apply of `config` by `writer` to `live` (`None`: the object does not exist
/// yet); returns the merged object (without `managedFields`: the caller prepares it and then
/// sets them with [`set_managed_fields`]) and the managers (see the module docs).
///
/// # Errors
/// 409 Conflict listing the conflicts (without `force`); 400 for a configuration of another
/// API version or kind, one carrying `managedFields`, or one the schema cannot walk.
pub fn apply(
    def: &ResourceDef,
    live: Option<&Value>,
    config: &Value,
    writer: Writer<'_>,
    force: bool,
    time: &str,
) -> Result<(Value, Managers), ApiError> {
    let Value::Object(fields) = config else {
        return Err(ApiError::bad_request(
            "the apply configuration must be an object".to_owned(),
        ));
    };
    let expected = def.api_version();
    match fields.get("apiVersion").and_then(Value::as_str) {
        Some(version) if version == expected => {}
        other => {
            return Err(ApiError::bad_request(format!(
                "Incorrect version specified in apply patch. Specified patch version: {}, expected: {expected}",
                other.unwrap_or_default()
            )));
        }
    }
    match fields.get("kind").and_then(Value::as_str) {
        Some(kind) if kind == def.kind => {}
        other => {
            return Err(ApiError::bad_request(format!(
                "Incorrect kind specified in apply patch. Specified patch kind: {}, expected: {}",
                other.unwrap_or_default(),
                def.kind
            )));
        }
    }
    if config
        .at("/metadata/managedFields")
        .is_some_and(|v| !v.is_null())
    {
        return Err(ApiError::bad_request(
            "metadata.managedFields must be nil".to_owned(),
        ));
    }
    if writer.subresource.is_empty() {
        crate::size::check_applied_size(config)?;
    }
    let ty = schema_root(def, writer.schema);
    let type_error = |e: String| ApiError::bad_request(format!("failed to apply: {e}"));
    let mut managers = live.map(managers_of).unwrap_or_default();
    let live_value = live.map_or_else(|| json!({}), without_managed_fields);
    if live.is_some() && managers.is_empty() {
        // An object no manager owns yet: what is there belongs to "before-first-apply", so the
        // first apply neither removes nor silently takes it (kube-apiserver's
        // `skipNonAppliedManager`).
        let set = typed::field_set(&live_value, ty)
            .map_err(type_error)?
            .difference(stripped());
        managers.insert(
            ManagerId {
                manager: "before-first-apply".to_owned(),
                operation: Operation::Update,
                api_version: expected.clone(),
                subresource: String::new(),
            },
            Entry {
                api_version: expected.clone(),
                time: Some(time.to_owned()),
                set,
            },
        );
    }
    let mut merged = typed::merge(&live_value, config, ty).map_err(type_error)?;
    let applied = typed::field_set(config, ty)
        .map_err(type_error)?
        .difference(stripped());
    let id = ManagerId {
        manager: writer.manager.to_owned(),
        operation: Operation::Apply,
        api_version: String::new(),
        subresource: writer.subresource.to_owned(),
    };
    let last = managers.get(&id).map(|e| e.set.clone());
    let previous_time = managers.get(&id).and_then(|e| e.time.clone());
    managers.insert(
        id.clone(),
        Entry {
            api_version: expected.clone(),
            time: previous_time,
            set: applied.clone(),
        },
    );
    // Prune what this applier applied last time, applies no more, and nobody owns.
    if let Some(last) = &last {
        let owned = managers
            .values()
            .fold(Set::new(), |all, entry| all.union(&entry.set));
        let removable = typed::with_named_fields_as_members(last, ty)
            .difference(&typed::with_named_fields_as_members(&owned, ty))
            .difference(stripped());
        typed::remove_items(&mut merged, &removable, ty);
    }
    let comparison = typed::compare(&live_value, &merged, ty).map_err(type_error)?;
    let changed = comparison.modified.union(&comparison.added);
    // Conflicts are looked for only when they would refuse the apply (a forced apply takes
    // them), as structured-merge-diff's `update` does: each is a whole path from the root.
    let mut conflicts = Vec::new();
    for (other, entry) in managers.iter().filter(|(other, _)| !force && **other != id) {
        for path in entry.set.intersection(&changed).paths() {
            conflicts.push((other.clone(), path));
        }
    }
    if !conflicts.is_empty() {
        conflicts.sort();
        return Err(conflict_error(&conflicts));
    }
    for (other, entry) in &mut managers {
        if *other != id {
            entry.set.remove_all(&changed);
            entry.set.remove_all(&comparison.removed);
        }
    }
    let unchanged = last.as_ref() == Some(&applied);
    if let Some(entry) = managers.get_mut(&id)
        && (!unchanged || entry.time.is_none())
    {
        entry.time = Some(time.to_owned());
    }
    managers.retain(|_, entry| !entry.set.is_empty());
    Ok((merged, managers))
}

#[cfg(test)]
mod tests;
