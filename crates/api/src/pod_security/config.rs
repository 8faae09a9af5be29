//! kube's `PodSecurityConfiguration` (`pod-security.admission.config.k8s.io/v1`, `v1beta1`,
//! `v1alpha1`), the PodSecurity plugin's part of kube-apiserver's
//! `--admission-control-config-file`: the policy of namespaces without labels, and the users,
//! namespaces and runtime classes the plugin does not evaluate.
//!
//! ## Guarantees
//! - Decoded and validated as kube's `LoadFromData` and `ValidatePodSecurityConfiguration`:
//!   a default left empty is `privileged` / `latest` (kube's `SetDefaults_PodSecurityDefaults`);
//!   a level or version kube cannot parse, an exempt namespace that is not a DNS-1123 label, a
//!   runtime class that is not a DNS-1123 subdomain, an empty user name and a duplicate are
//!   refused with kube's field errors (`defaults.enforce: Invalid value: "x": must be one of
//!   privileged, baseline, restricted`, aggregated as Go prints an aggregate).
//! - [`Configuration::default`] is kube's when no file is given: `privileged:latest` in every
//!   mode, no exemptions.
//! - Exemptions are exact, case-sensitive matches, as kube's `containsString`; an empty name
//!   is never exempt.

use std::collections::BTreeSet;

use serde_json::Value;

use super::{Level, LevelVersion, Policy, Version};
use crate::field::{Cause, duplicate, go_quote, invalid};

/// The group/versions kube's scheme decodes a `PodSecurityConfiguration` from.
const VERSIONS: [&str; 3] = [
    "pod-security.admission.config.k8s.io/v1",
    "pod-security.admission.config.k8s.io/v1beta1",
    "pod-security.admission.config.k8s.io/v1alpha1",
];

/// The users, namespaces and runtime classes PodSecurity does not evaluate.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Exemptions {
    /// Requesting users (their names, as authenticated).
    pub usernames: BTreeSet<String>,
    /// Namespaces: their pods and workloads are admitted unchecked.
    pub namespaces: BTreeSet<String>,
    /// A pod (or template) naming one of these in `spec.runtimeClassName`.
    pub runtime_classes: BTreeSet<String>,
}

/// The plugin's configuration: the default policy and the exemptions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Configuration {
    /// The policy of a namespace for each mode it has no label of.
    pub defaults: Policy,
    /// What is not evaluated.
    pub exemptions: Exemptions,
}

impl Default for Configuration {
    fn default() -> Self {
        Configuration {
            defaults: Policy::DEFAULT,
            exemptions: Exemptions::default(),
        }
    }
}

impl Configuration {
    /// Decodes and validates a `PodSecurityConfiguration` object.
    ///
    /// # Errors
    /// kube's decoding error (a kind or version its scheme does not know) or its validation's
    /// field errors, aggregated.
    pub fn from_value(value: &Value) -> Result<Configuration, String> {
        let text = |key: &str| value.get(key).and_then(Value::as_str).unwrap_or_default();
        let (api_version, kind) = (text("apiVersion"), text("kind"));
        if kind.is_empty() {
            return Err(format!("Object 'Kind' is missing in '{value}'"));
        }
        if kind != "PodSecurityConfiguration" || !VERSIONS.contains(&api_version) {
            let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
            return Err(format!(
                "no kind {kind:?} is registered for version \"{group}/{version}\" in scheme \"k8s.io/pod-security-admission/admission/api/scheme/scheme.go:28\""
            ));
        }
        let mut errors: Vec<Cause> = Vec::new();
        let defaults = value.get("defaults");
        let default_of = |key: &str, fallback: &str| -> String {
            match defaults.and_then(|d| d.get(key)).and_then(Value::as_str) {
                Some(set) if !set.is_empty() => set.to_owned(),
                _ => fallback.to_owned(),
            }
        };
        let mut mode = |level_key: &str, version_key: &str| -> LevelVersion {
            let level = default_of(level_key, "privileged");
            let version = default_of(version_key, "latest");
            let parsed_level = Level::parse(&level).unwrap_or_else(|| {
                errors.push(invalid(
                    &format!("defaults.{level_key}"),
                    &go_quote(&level),
                    "must be one of privileged, baseline, restricted",
                ));
                Level::Restricted
            });
            let parsed_version = Version::parse(&version).unwrap_or_else(|| {
                errors.push(invalid(
                    &format!("defaults.{version_key}"),
                    &go_quote(&version),
                    "must be \"latest\" or \"v1.x\"",
                ));
                Version::Latest
            });
            LevelVersion {
                level: parsed_level,
                version: parsed_version,
            }
        };
        // kube validates enforce, warn, then audit.
        let enforce = mode("enforce", "enforce-version");
        let warn = mode("warn", "warn-version");
        let audit = mode("audit", "audit-version");
        let exemptions = value.get("exemptions");
        let namespaces = names(exemptions, "namespaces", &mut errors, |name| {
            crate::names::validate_dns1123_label(name)
        });
        let runtime_classes = names(exemptions, "runtimeClasses", &mut errors, |name| {
            crate::names::validate_dns1123_subdomain(name)
        });
        let usernames = names(exemptions, "usernames", &mut errors, |name| {
            if name.is_empty() {
                Err("username must not be empty".to_owned())
            } else {
                Ok(())
            }
        });
        if !errors.is_empty() {
            let texts: Vec<String> = errors
                .iter()
                .map(|(field, message, _)| format!("{field}: {message}"))
                .collect();
            return Err(crate::field::aggregate(&texts));
        }
        Ok(Configuration {
            defaults: Policy {
                enforce,
                audit,
                warn,
            },
            exemptions: Exemptions {
                usernames,
                namespaces,
                runtime_classes,
            },
        })
    }

    /// Whether a request in `namespace` is exempt (kube's `exemptNamespace`).
    #[must_use]
    pub fn exempt_namespace(&self, namespace: &str) -> bool {
        !namespace.is_empty() && self.exemptions.namespaces.contains(namespace)
    }

    /// Whether a request by `user` is exempt (kube's `exemptUser`).
    #[must_use]
    pub fn exempt_user(&self, user: &str) -> bool {
        !user.is_empty() && self.exemptions.usernames.contains(user)
    }

    /// Whether a pod spec's `runtimeClassName` is exempt (kube's `exemptRuntimeClass`).
    #[must_use]
    pub fn exempt_runtime_class(&self, spec: &Value) -> bool {
        spec.get("runtimeClassName")
            .and_then(Value::as_str)
            .is_some_and(|class| {
                !class.is_empty() && self.exemptions.runtime_classes.contains(class)
            })
    }
}

/// The exemption list `exemptions.<key>`: each entry checked by `check` (its reasons are
/// kube's), duplicates refused; the valid entries.
fn names(
    exemptions: Option<&Value>,
    key: &str,
    errors: &mut Vec<Cause>,
    check: impl Fn(&str) -> Result<(), String>,
) -> BTreeSet<String> {
    let mut valid = BTreeSet::new();
    let list = exemptions
        .and_then(|e| e.get(key))
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    for (index, entry) in list.iter().enumerate() {
        let name = entry.as_str().unwrap_or_default();
        let path = format!("exemptions.{key}[{index}]");
        if let Err(reason) = check(name) {
            errors.push(invalid(&path, &go_quote(name), &reason));
        } else if !valid.insert(name.to_owned()) {
            errors.push(duplicate(&path, &go_quote(name)));
        }
    }
    valid
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config(body: Value) -> Result<Configuration, String> {
        let mut value = json!({
            "apiVersion": "pod-security.admission.config.k8s.io/v1",
            "kind": "PodSecurityConfiguration",
        });
        value
            .as_object_mut()
            .unwrap()
            .extend(body.as_object().unwrap().clone());
        Configuration::from_value(&value)
    }

    #[test]
    fn empty_defaults_are_privileged_latest() {
        let parsed = config(json!({"defaults": {"enforce": "baseline"}})).unwrap();
        assert_eq!(parsed.defaults.enforce.to_string(), "baseline:latest");
        assert_eq!(parsed.defaults.warn, LevelVersion::DEFAULT);
        assert_eq!(parsed.defaults.audit, LevelVersion::DEFAULT);
        assert_eq!(config(json!({})).unwrap(), Configuration::default());
    }

    #[test]
    fn invalid_values_get_kubes_field_errors() {
        assert_eq!(
            config(json!({"defaults": {"enforce": "strict"}})).unwrap_err(),
            r#"defaults.enforce: Invalid value: "strict": must be one of privileged, baseline, restricted"#
        );
        assert_eq!(
            config(
                json!({"defaults": {"audit-version": "1.30", "warn": "nope"},
                "exemptions": {"namespaces": ["Kube", "a", "a"], "usernames": [""],
                    "runtimeClasses": ["x_y"]}})
            )
            .unwrap_err(),
            concat!(
                r#"[defaults.warn: Invalid value: "nope": must be one of privileged, baseline, restricted, "#,
                r#"defaults.audit-version: Invalid value: "1.30": must be "latest" or "v1.x", "#,
                r#"exemptions.namespaces[0]: Invalid value: "Kube": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?'), "#,
                r#"exemptions.namespaces[2]: Duplicate value: "a", "#,
                r#"exemptions.runtimeClasses[0]: Invalid value: "x_y": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*'), "#,
                r#"exemptions.usernames[0]: Invalid value: "": username must not be empty]"#,
            )
        );
    }

    #[test]
    fn only_kubes_kinds_and_versions_decode() {
        let wrong = json!({"apiVersion": "pod-security.admission.config.k8s.io/v2",
            "kind": "PodSecurityConfiguration"});
        assert_eq!(
            Configuration::from_value(&wrong).unwrap_err(),
            r#"no kind "PodSecurityConfiguration" is registered for version "pod-security.admission.config.k8s.io/v2" in scheme "k8s.io/pod-security-admission/admission/api/scheme/scheme.go:28""#
        );
        let beta = json!({"apiVersion": "pod-security.admission.config.k8s.io/v1beta1",
            "kind": "PodSecurityConfiguration", "defaults": {"warn": "restricted", "warn-version": "v1.30"}});
        assert_eq!(
            Configuration::from_value(&beta)
                .unwrap()
                .defaults
                .warn
                .to_string(),
            "restricted:v1.30"
        );
    }

    #[test]
    fn exemptions_match_exactly() {
        let parsed = config(json!({"exemptions": {"namespaces": ["kube-system"],
            "usernames": ["system:serviceaccount:kube-system:replicaset-controller"],
            "runtimeClasses": ["kata"]}}))
        .unwrap();
        assert!(parsed.exempt_namespace("kube-system"));
        assert!(!parsed.exempt_namespace("kube"));
        assert!(!parsed.exempt_namespace(""));
        assert!(parsed.exempt_user("system:serviceaccount:kube-system:replicaset-controller"));
        assert!(!parsed.exempt_user("admin"));
        assert!(parsed.exempt_runtime_class(&json!({"runtimeClassName": "kata"})));
        assert!(!parsed.exempt_runtime_class(&json!({"runtimeClassName": "Kata"})));
        assert!(!parsed.exempt_runtime_class(&json!({})));
    }
}
