//! kube-apiserver's `PodTolerationRestriction` admission plugin
//! (`plugin/pkg/admission/podtolerationrestriction`, off by default): a namespace's
//! `scheduler.alpha.kubernetes.io/defaultTolerations` join its new pods' tolerations, and its
//! `scheduler.alpha.kubernetes.io/tolerationsWhitelist` bounds what its pods may tolerate;
//! without those annotations, the cluster's `default` and `whitelist` of the plugin's
//! configuration (`podtolerationrestriction.admission.k8s.io/v1alpha1` or `v1`
//! `Configuration`, from `--admission-control-config-file`) apply.
//!
//! ## Guarantees
//! - **Create** of a pod (not a subresource): the namespace's default tolerations (an
//!   annotation that is there but empty means none; one that is absent means the
//!   configuration's `default`), and, for a pod that is not BestEffort, kube's
//!   `node.kubernetes.io/memory-pressure` `NoSchedule` toleration (`Exists`), are merged into
//!   the pod's as kube's `MergeTolerations` merges them: a toleration another one tolerates a
//!   superset of is dropped (of two equal ones, the first is kept), pod's first.
//! - **Update** of a pod: only the memory-pressure toleration is merged (kube's plugin does
//!   the same on updates; validation then refuses any change to an existing pod's
//!   tolerations other than additions, as kube's does).
//! - Then, on both, a pod with tolerations must have each tolerated by one of the whitelist's
//!   (the namespace's annotation; when absent, the configuration's `whitelist`); else kube's
//!   answer to the plain error it returns: a 500 with no reason, `pod tolerations (possibly
//!   merged with namespace default tolerations) conflict with its namespace whitelist` (or
//!   `cluster whitelist`). An annotation that is not a JSON list of tolerations is the same
//!   kind of 500, with Go's decoding error.
//! - The configuration is validated as kube validates it (`invalid config:
//!   [podtolerationrestriction.default[0].operator: Unsupported value: ...]`).
//! - Bounds: nothing is held beyond the configuration; namespaces are read from their cache.
//!
//! ## Differences from kube
//! - kube's older plugin refused a pod whose tolerations conflicted with its namespace's
//!   defaults (`namespace tolerations and pod tolerations conflict`); kube 1.33 merges them
//!   instead, and so does this server.
//! - Go's JSON decoding errors of an annotation are approximated (the position and type
//!   wording may differ).

use serde_json::Value;
use watchkeeper_api::field::Cause;

/// The namespace annotation of default tolerations.
pub const DEFAULTS: &str = "scheduler.alpha.kubernetes.io/defaultTolerations";

/// The namespace annotation of the tolerations whitelist.
pub const WHITELIST: &str = "scheduler.alpha.kubernetes.io/tolerationsWhitelist";

/// The configuration's `apiVersion`s.
pub const VERSIONS: [&str; 2] = [
    "podtolerationrestriction.admission.k8s.io/v1alpha1",
    "podtolerationrestriction.admission.k8s.io/v1",
];

/// Where kube's plugin makes its configuration scheme (named in its decoding errors).
pub const SCHEME: &str =
    "k8s.io/kubernetes/plugin/pkg/admission/podtolerationrestriction/config.go:32";

/// The plugin's configuration: the cluster's defaults and whitelist (`None`: not given).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Config {
    /// `default`.
    pub default: Option<Vec<Value>>,
    /// `whitelist`.
    pub whitelist: Option<Vec<Value>>,
}

/// A list of tolerations at `key` of `value`, as Go decodes `[]v1.Toleration`.
fn toleration_list(value: &Value, key: &str) -> Result<Option<Vec<Value>>, String> {
    match value.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => {
            if items.iter().all(Value::is_object) {
                Ok(Some(items.iter().map(normal).collect()))
            } else {
                Err(format!(
                    "json: cannot unmarshal into Go struct field Configuration.{key} of type v1.Toleration"
                ))
            }
        }
        Some(_) => Err(format!(
            "json: cannot unmarshal into Go struct field Configuration.{key} of type []v1.Toleration"
        )),
    }
}

/// The plugin's configuration from `value` (`None`: none given, the empty default), decoded
/// and validated as kube's `loadConfiguration` does.
///
/// # Errors
/// kube's decoding error or `invalid config: [...]`.
pub fn parse(value: Option<&Value>) -> Result<Config, String> {
    let Some(value) = value else {
        return Ok(Config::default());
    };
    super::plugin_config::config_kind(value, &VERSIONS, "Configuration", SCHEME)?;
    let config = Config {
        default: toleration_list(value, "default")?,
        whitelist: toleration_list(value, "whitelist")?,
    };
    let mut causes: Vec<Cause> = Vec::new();
    for (key, list) in [
        ("default", &config.default),
        ("whitelist", &config.whitelist),
    ] {
        causes.extend(watchkeeper_api::kinds::toleration_errors(
            list.as_deref().unwrap_or_default(),
            &format!("podtolerationrestriction.{key}"),
        ));
    }
    if causes.is_empty() {
        return Ok(config);
    }
    let errors: Vec<String> = causes
        .into_iter()
        .map(|(field, message, _)| format!("{field}: {message}"))
        .collect();
    Err(format!("invalid config: [{}]", errors.join(" ")))
}

/// A toleration as Go's `v1.Toleration` holds it: its fields, the empty ones left out.
fn normal(toleration: &Value) -> Value {
    let mut out = serde_json::Map::new();
    for key in ["key", "operator", "value", "effect"] {
        let text = field(toleration, key);
        if !text.is_empty() {
            out.insert(key.to_owned(), Value::from(text));
        }
    }
    if let Some(seconds) = seconds(toleration) {
        out.insert("tolerationSeconds".to_owned(), Value::from(seconds));
    }
    Value::Object(out)
}

/// The tolerations a namespace annotation `key` states: `None` when absent, none when empty.
fn namespace_tolerations(namespace: &Value, key: &str) -> Result<Option<Vec<Value>>, String> {
    let pointer = format!("/metadata/annotations/{}", key.replace('/', "~1"));
    let Some(text) = namespace.pointer(&pointer).and_then(Value::as_str) else {
        return Ok(None);
    };
    if text.is_empty() {
        return Ok(Some(Vec::new()));
    }
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Array(items)) if items.iter().all(Value::is_object) => {
            Ok(Some(items.iter().map(normal).collect()))
        }
        Ok(Value::Null) => Ok(Some(Vec::new())),
        Ok(_) => Err("json: cannot unmarshal into Go value of type []v1.Toleration".to_owned()),
        Err(error) => Err(go_json_error(&error)),
    }
}

/// A JSON syntax error, worded as Go's decoder words its most common ones.
fn go_json_error(error: &serde_json::Error) -> String {
    if error.is_eof() {
        "unexpected end of JSON input".to_owned()
    } else {
        format!(
            "invalid character in JSON input at column {}",
            error.column()
        )
    }
}

/// A field of a toleration (`""` when absent).
fn field<'a>(toleration: &'a Value, key: &str) -> &'a str {
    toleration
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// Whether `ss` tolerates a superset of what `t` does (kube's `isSuperset`).
fn is_superset(ss: &Value, t: &Value) -> bool {
    if same(ss, t) {
        return true;
    }
    if field(t, "key") != field(ss, "key")
        && (!field(ss, "key").is_empty() || field(ss, "operator") != "Exists")
    {
        return false;
    }
    if field(t, "effect") != field(ss, "effect") && !field(ss, "effect").is_empty() {
        return false;
    }
    if field(ss, "effect") == "NoExecute"
        && let Some(limit) = seconds(ss)
    {
        match seconds(t) {
            Some(given) if given <= limit => {}
            _ => return false,
        }
    }
    match field(ss, "operator") {
        "Equal" | "" => field(t, "operator") == "Equal" && field(t, "value") == field(ss, "value"),
        "Exists" => true,
        _ => false,
    }
}

/// `tolerationSeconds`, when set.
fn seconds(toleration: &Value) -> Option<i64> {
    toleration.get("tolerationSeconds").and_then(Value::as_i64)
}

/// Whether two tolerations are the same (Go's semantic equality of the struct: absent and
/// empty fields alike).
fn same(a: &Value, b: &Value) -> bool {
    ["key", "operator", "value", "effect"]
        .iter()
        .all(|k| field(a, k) == field(b, k))
        && seconds(a) == seconds(b)
}

/// kube's `MergeTolerations(first, second)`.
#[must_use]
pub fn merge(first: &[Value], second: &[Value]) -> Vec<Value> {
    let all: Vec<&Value> = first.iter().chain(second).collect();
    let mut merged: Vec<Value> = Vec::new();
    'next: for (i, t) in all.iter().enumerate() {
        if merged.iter().any(|m| is_superset(m, t)) {
            continue;
        }
        for later in &all[i + 1..] {
            if !same(t, later) && is_superset(later, t) {
                continue 'next;
            }
        }
        merged.push((*t).clone());
    }
    merged
}

/// kube's `VerifyAgainstWhitelist`.
fn allowed(tolerations: &[Value], whitelist: &[Value]) -> bool {
    whitelist.is_empty()
        || tolerations
            .iter()
            .all(|t| whitelist.iter().any(|w| is_superset(w, t)))
}

/// The plugin on a pod write: `create` or an update of `pod`, in the namespace `namespace`
/// (its object), with the cluster's `config`; the pod's tolerations merged in place.
///
/// # Errors
/// kube's plain error (a 500 without a reason).
pub fn admit(
    pod: &mut Value,
    namespace: &Value,
    create: bool,
    config: &Config,
) -> Result<(), String> {
    let mut extra = Vec::new();
    if create {
        let defaults = namespace_tolerations(namespace, DEFAULTS)?
            .or_else(|| config.default.clone())
            .unwrap_or_default();
        extra.extend(defaults);
    }
    let spec = pod.get("spec").unwrap_or(&Value::Null);
    if watchkeeper_api::defaults::pod_qos_class(spec) != "BestEffort" {
        extra.push(
            serde_json::json!({"key": "node.kubernetes.io/memory-pressure",
            "operator": "Exists", "effect": "NoSchedule"}),
        );
    }
    let own: Vec<Value> = spec
        .get("tolerations")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let tolerations = if extra.is_empty() {
        own
    } else {
        let merged = merge(&own, &extra);
        if let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) {
            spec.insert("tolerations".to_owned(), Value::Array(merged.clone()));
        }
        merged
    };
    if tolerations.is_empty() {
        return Ok(());
    }
    let (whitelist, scope) = match namespace_tolerations(namespace, WHITELIST)? {
        Some(list) => (list, "namespace"),
        None => (config.whitelist.clone().unwrap_or_default(), "cluster"),
    };
    if allowed(&tolerations, &whitelist) {
        Ok(())
    } else {
        Err(format!(
            "pod tolerations (possibly merged with namespace default tolerations) conflict with its {scope} whitelist"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn namespace(annotations: Value) -> Value {
        json!({"metadata": {"name": "ns", "annotations": annotations}})
    }

    fn pod(tolerations: Value) -> Value {
        json!({"spec": {"containers": [{"name": "c"}], "tolerations": tolerations}})
    }

    #[test]
    fn defaults_merge_and_supersets_win() {
        let ns = namespace(json!({DEFAULTS:
            r#"[{"key":"team","operator":"Equal","value":"a","effect":"NoSchedule"},
                {"key":"dedicated","operator":"Exists"}]"#}));
        let mut p = pod(
            json!([{"key": "dedicated", "operator": "Equal", "value": "x",
            "effect": "NoSchedule"}]),
        );
        admit(&mut p, &ns, true, &Config::default()).unwrap();
        // The pod's `dedicated=x:NoSchedule` is tolerated by the namespace's `dedicated`
        // Exists (any effect), which stays.
        assert_eq!(
            p["spec"]["tolerations"],
            json!([{"key":"team","operator":"Equal","value":"a","effect":"NoSchedule"},
                {"key":"dedicated","operator":"Exists"}])
        );
        // Updates take no defaults.
        let mut plain = pod(json!([]));
        admit(&mut plain, &ns, false, &Config::default()).unwrap();
        assert_eq!(plain["spec"]["tolerations"], json!([]));
        // A pod that is not BestEffort tolerates memory pressure.
        let mut burstable = json!({"spec": {"containers": [{"name": "c",
            "resources": {"requests": {"cpu": "1"}}}]}});
        admit(
            &mut burstable,
            &namespace(json!({})),
            false,
            &Config::default(),
        )
        .unwrap();
        assert_eq!(
            burstable["spec"]["tolerations"],
            json!([{"key": "node.kubernetes.io/memory-pressure", "operator": "Exists",
                "effect": "NoSchedule"}])
        );
    }

    #[test]
    fn the_whitelist_bounds_tolerations() {
        let ns = namespace(json!({WHITELIST: r#"[{"key":"team","operator":"Exists"}]"#}));
        let mut fine = pod(json!([{"key": "team", "operator": "Equal", "value": "a"}]));
        admit(&mut fine, &ns, true, &Config::default()).unwrap();
        let mut wide = pod(json!([{"operator": "Exists"}]));
        assert_eq!(
            admit(&mut wide, &ns, true, &Config::default()).unwrap_err(),
            "pod tolerations (possibly merged with namespace default tolerations) conflict with its namespace whitelist"
        );
        let cluster = Config {
            default: None,
            whitelist: Some(vec![json!({"key": "x", "operator": "Exists"})]),
        };
        assert_eq!(
            admit(&mut wide, &namespace(json!({})), false, &cluster).unwrap_err(),
            "pod tolerations (possibly merged with namespace default tolerations) conflict with its cluster whitelist"
        );
        // An empty namespace whitelist allows everything, not the cluster's.
        admit(
            &mut wide,
            &namespace(json!({WHITELIST: ""})),
            false,
            &cluster,
        )
        .unwrap();
        assert!(
            admit(
                &mut wide,
                &namespace(json!({WHITELIST: "{"})),
                false,
                &cluster
            )
            .is_err()
        );
    }

    #[test]
    fn no_execute_seconds_narrow_a_superset() {
        let bounded = json!({"key": "k", "operator": "Exists", "effect": "NoExecute",
            "tolerationSeconds": 10});
        let longer = json!({"key": "k", "operator": "Exists", "effect": "NoExecute",
            "tolerationSeconds": 20});
        assert!(is_superset(&longer, &bounded));
        assert!(!is_superset(&bounded, &longer));
        assert_eq!(
            merge(
                std::slice::from_ref(&bounded),
                std::slice::from_ref(&longer)
            ),
            vec![longer]
        );
    }

    #[test]
    fn kube_s_configuration_and_its_errors() {
        let ok = json!({"apiVersion": "podtolerationrestriction.admission.k8s.io/v1alpha1",
            "kind": "Configuration", "default": [{"key": "a", "operator": "Exists"}]});
        assert_eq!(
            parse(Some(&ok)).unwrap().default,
            Some(vec![json!({"key": "a", "operator": "Exists"})])
        );
        let bad = json!({"apiVersion": "podtolerationrestriction.admission.k8s.io/v1",
            "kind": "Configuration", "whitelist": [{"key": "a", "operator": "Maybe"}]});
        assert_eq!(
            parse(Some(&bad)).unwrap_err(),
            r#"invalid config: [podtolerationrestriction.whitelist[0].operator: Unsupported value: "Maybe": supported values: "Equal", "Exists"]"#
        );
        assert_eq!(parse(None).unwrap(), Config::default());
    }
}
