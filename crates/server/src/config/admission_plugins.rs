//! kube-apiserver's admission plugin flags: `--enable-admission-plugins`,
//! `--disable-admission-plugins` and the deprecated `--admission-control`
//! (`staging/src/k8s.io/apiserver/pkg/server/options/admission.go`,
//! `pkg/kubeapiserver/options/admission.go` and `plugins.go` of v1.33): which plugins run.
//!
//! ## Guarantees
//! - Every plugin kube-apiserver v1.33 registers ([`KUBE_PLUGINS`]) is a known name, so a
//!   kubeadm-style `--enable-admission-plugins=NodeRestriction` is understood, not refused as
//!   a typo; any other name is refused at start in kube's words
//!   (`enable-admission-plugins plugin "Nope" is unknown`, `disable-admission-plugins ...`,
//!   `admission-control ...`), and so is a name both enabled and disabled
//!   (`[PodSecurity] in enable-admission-plugins and disable-admission-plugins overlapped`) and
//!   `--admission-control` given with either of the other two (`admission-control and
//!   enable-admission-plugins/disable-admission-plugins flags are mutually exclusive`). Several
//!   errors are reported together, as kube's aggregate prints them (`[first, second]`).
//! - Without `--admission-control`, the plugins that run are kube's default set
//!   ([`KUBE_DEFAULT_ON`]) plus those enabled, less those disabled; with it, exactly those it
//!   names (kube's `computePluginNames`). It is deprecated: a warning says so at start, in
//!   pflag's words.
//! - Every plugin kube v1.33 registers is run ([`crate::source::pod_admission::AdmissionPlugins::NAMES`]),
//!   but the three kube itself leaves inactive without a feature gate that is off by default
//!   in v1.33 ([`INACTIVE_IN_KUBE`]: `ClusterTrustBundleAttest`, `PodTopologyLabels`,
//!   `MutatingAdmissionPolicy`): those are not run, and may be named to enable, as kube
//!   accepts them and leaves them inactive. A known plugin this server did not run that a
//!   flag named to enable would be refused at start, naming it: nothing is pretended.
//!   Disabling any known plugin is accepted. The plugins that need a configuration
//!   (`EventRateLimit`, `ImagePolicyWebhook`) are refused without one, as kube refuses them
//!   (`crate::config`'s `--admission-control-config-file`).

use std::collections::BTreeSet;

use super::ConfigError;
use crate::source::pod_admission::AdmissionPlugins;

/// kube-apiserver v1.33's admission plugins, in its order (`AllOrderedPlugins`).
pub const KUBE_PLUGINS: [&str; 36] = [
    "AlwaysAdmit",
    "NamespaceAutoProvision",
    "NamespaceLifecycle",
    "NamespaceExists",
    "LimitPodHardAntiAffinityTopology",
    "LimitRanger",
    "ServiceAccount",
    "NodeRestriction",
    "TaintNodesByCondition",
    "AlwaysPullImages",
    "ImagePolicyWebhook",
    "PodSecurity",
    "PodNodeSelector",
    "Priority",
    "DefaultTolerationSeconds",
    "PodTolerationRestriction",
    "EventRateLimit",
    "ExtendedResourceToleration",
    "DefaultStorageClass",
    "StorageObjectInUseProtection",
    "OwnerReferencesPermissionEnforcement",
    "PersistentVolumeClaimResize",
    "RuntimeClass",
    "CertificateApproval",
    "CertificateSigning",
    "ClusterTrustBundleAttest",
    "CertificateSubjectRestriction",
    "DefaultIngressClass",
    "DenyServiceExternalIPs",
    "PodTopologyLabels",
    "MutatingAdmissionPolicy",
    "MutatingAdmissionWebhook",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionWebhook",
    "ResourceQuota",
    "AlwaysDeny",
];

/// kube-apiserver v1.33's plugins on by default (the complement of
/// `DefaultOffAdmissionPlugins`).
pub const KUBE_DEFAULT_ON: [&str; 22] = [
    "NamespaceLifecycle",
    "LimitRanger",
    "ServiceAccount",
    "DefaultStorageClass",
    "PersistentVolumeClaimResize",
    "DefaultTolerationSeconds",
    "MutatingAdmissionWebhook",
    "ValidatingAdmissionWebhook",
    "ResourceQuota",
    "StorageObjectInUseProtection",
    "Priority",
    "TaintNodesByCondition",
    "RuntimeClass",
    "CertificateApproval",
    "CertificateSigning",
    "ClusterTrustBundleAttest",
    "CertificateSubjectRestriction",
    "DefaultIngressClass",
    "PodSecurity",
    "PodTopologyLabels",
    "MutatingAdmissionPolicy",
    "ValidatingAdmissionPolicy",
];

/// kube v1.33's plugins that do nothing unless a feature gate that is off by default turns
/// them on (`ClusterTrustBundle`, `PodTopologyLabelsAdmission`, `MutatingAdmissionPolicy`):
/// enabled, they are accepted and do nothing here too.
pub const INACTIVE_IN_KUBE: [&str; 3] = [
    "ClusterTrustBundleAttest",
    "PodTopologyLabels",
    "MutatingAdmissionPolicy",
];

/// pflag's warning for the deprecated `--admission-control`.
pub const ADMISSION_CONTROL_DEPRECATED: &str = "Flag --admission-control has been deprecated, Use --enable-admission-plugins or --disable-admission-plugins instead. Will be removed in a future version.";

/// The three flags as given (`None` when not given).
#[derive(Clone, Copy, Debug, Default)]
pub struct Flags<'a> {
    /// `--enable-admission-plugins`.
    pub enable: Option<&'a [String]>,
    /// `--disable-admission-plugins`.
    pub disable: Option<&'a [String]>,
    /// `--admission-control`.
    pub control: Option<&'a [String]>,
}

/// kube's validation of the flags: its errors, in its order.
fn errors(flags: Flags<'_>) -> Vec<String> {
    let known = |name: &String| KUBE_PLUGINS.contains(&name.as_str());
    let mut errors = Vec::new();
    if flags.control.is_some() && (flags.enable.is_some() || flags.disable.is_some()) {
        errors.push(
            "admission-control and enable-admission-plugins/disable-admission-plugins flags are mutually exclusive"
                .to_owned(),
        );
    }
    let lists = [
        ("admission-control", flags.control),
        ("enable-admission-plugins", flags.enable),
        ("disable-admission-plugins", flags.disable),
    ];
    for (flag, names) in lists {
        for name in names.unwrap_or_default().iter().filter(|n| !known(n)) {
            errors.push(format!("{flag} plugin {name:?} is unknown"));
        }
    }
    let enabled: BTreeSet<&str> = flags
        .enable
        .unwrap_or_default()
        .iter()
        .map(String::as_str)
        .collect();
    let disabled: BTreeSet<&str> = flags
        .disable
        .unwrap_or_default()
        .iter()
        .map(String::as_str)
        .collect();
    let both: Vec<&str> = enabled.intersection(&disabled).copied().collect();
    if !both.is_empty() {
        errors.push(format!(
            "[{}] in enable-admission-plugins and disable-admission-plugins overlapped",
            both.join(" ")
        ));
    }
    errors
}

/// The plugins that run, in kube's order (its `enabledPluginNames`), once the flags are
/// valid.
fn enabled(flags: Flags<'_>) -> Vec<&'static str> {
    let named =
        |list: Option<&[String]>, name: &str| list.unwrap_or_default().iter().any(|n| n == name);
    KUBE_PLUGINS
        .into_iter()
        .filter(|name| match flags.control {
            Some(_) => named(flags.control, name),
            None => {
                named(flags.enable, name)
                    || (KUBE_DEFAULT_ON.contains(name) && !named(flags.disable, name))
            }
        })
        .collect()
}

/// The plugins the flags run.
///
/// # Errors
/// kube's validation errors (aggregated as kube prints them), or a known plugin this server
/// does not run that a flag names to enable.
pub(super) fn from_flags(flags: Flags<'_>) -> Result<AdmissionPlugins, ConfigError> {
    let errors = errors(flags);
    let flag = if flags.control.is_some() {
        "--admission-control"
    } else if flags.enable.is_some() {
        "--enable-admission-plugins"
    } else {
        "--disable-admission-plugins"
    };
    match errors.as_slice() {
        [] => {}
        [one] => return Err(ConfigError::flag(flag, one.clone())),
        many => return Err(ConfigError::flag(flag, format!("[{}]", many.join(", ")))),
    }
    if flags.control.is_some() {
        tracing::warn!("{ADMISSION_CONTROL_DEPRECATED}");
    }
    let mut plugins = AdmissionPlugins::none();
    for name in enabled(flags) {
        if let Some(on) = plugins.switch(name) {
            *on = true;
            continue;
        }
        let asked = flags.control.or(flags.enable).unwrap_or_default();
        if asked.iter().any(|n| n == name) && !INACTIVE_IN_KUBE.contains(&name) {
            return Err(ConfigError::flag(
                flag,
                format!(
                    "{flag}: admission plugin {name:?} is kube-apiserver's but this server does not run it; it runs {}",
                    AdmissionPlugins::NAMES.join(", ")
                ),
            ));
        }
    }
    Ok(plugins)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|n| (*n).to_owned()).collect()
    }

    fn refusal(flags: Flags<'_>) -> String {
        from_flags(flags).unwrap_err().to_string()
    }

    #[test]
    fn kube_s_lists_hold_together() {
        assert!(
            KUBE_DEFAULT_ON
                .iter()
                .all(|name| KUBE_PLUGINS.contains(name))
        );
        assert!(
            AdmissionPlugins::NAMES
                .iter()
                .all(|name| KUBE_PLUGINS.contains(name)),
            "every plugin this server runs is kube's"
        );
        let unique: BTreeSet<&str> = KUBE_PLUGINS.into_iter().collect();
        assert_eq!(unique.len(), KUBE_PLUGINS.len());
    }

    #[test]
    fn no_flags_run_kube_s_default_set() {
        let plugins = from_flags(Flags::default()).unwrap();
        assert_eq!(plugins, AdmissionPlugins::default());
        assert!(plugins.namespace_lifecycle && plugins.certificate_subject_restriction);
        assert!(!plugins.always_pull_images && !plugins.namespace_exists);
    }

    #[test]
    fn enable_adds_and_disable_removes() {
        let enable = names(&["AlwaysPullImages", "DenyServiceExternalIPs"]);
        let disable = names(&["NamespaceLifecycle", "StorageObjectInUseProtection"]);
        let plugins = from_flags(Flags {
            enable: Some(&enable),
            disable: Some(&disable),
            control: None,
        })
        .unwrap();
        assert!(plugins.always_pull_images && plugins.deny_service_external_ips);
        assert!(!plugins.namespace_lifecycle);
        assert!(plugins.service_account && plugins.pod_security);
    }

    #[test]
    fn admission_control_runs_exactly_what_it_names() {
        let control = names(&["NamespaceExists", "ServiceAccount"]);
        let plugins = from_flags(Flags {
            control: Some(&control),
            ..Flags::default()
        })
        .unwrap();
        let mut expected = AdmissionPlugins::none();
        expected.namespace_exists = true;
        expected.service_account = true;
        assert_eq!(plugins, expected);
    }

    #[test]
    fn kube_s_errors_word_for_word() {
        let nope = names(&["Nope"]);
        assert_eq!(
            refusal(Flags {
                enable: Some(&nope),
                ..Flags::default()
            }),
            r#"enable-admission-plugins plugin "Nope" is unknown"#
        );
        assert_eq!(
            refusal(Flags {
                disable: Some(&nope),
                ..Flags::default()
            }),
            r#"disable-admission-plugins plugin "Nope" is unknown"#
        );
        assert_eq!(
            refusal(Flags {
                control: Some(&nope),
                ..Flags::default()
            }),
            r#"admission-control plugin "Nope" is unknown"#
        );
        let both = names(&["PodSecurity", "AlwaysPullImages"]);
        assert_eq!(
            refusal(Flags {
                enable: Some(&both),
                disable: Some(&both),
                control: None,
            }),
            "[AlwaysPullImages PodSecurity] in enable-admission-plugins and disable-admission-plugins overlapped"
        );
        let empty = Vec::new();
        assert_eq!(
            refusal(Flags {
                enable: Some(&empty),
                disable: None,
                control: Some(&nope),
            }),
            r#"[admission-control and enable-admission-plugins/disable-admission-plugins flags are mutually exclusive, admission-control plugin "Nope" is unknown]"#
        );
    }

    #[test]
    fn every_plugin_kube_runs_is_run() {
        // A plugin kube leaves inactive is accepted and not run; every other is run (were
        // one not, naming it would be refused at start rather than pretended).
        for name in KUBE_PLUGINS {
            assert!(
                AdmissionPlugins::NAMES.contains(&name) != INACTIVE_IN_KUBE.contains(&name),
                "{name}"
            );
        }
        // kubeadm's flag.
        let node = names(&["NodeRestriction"]);
        let plugins = from_flags(Flags {
            enable: Some(&node),
            ..Flags::default()
        })
        .unwrap();
        assert!(plugins.node_restriction && plugins.namespace_lifecycle);
        let resize = names(&["ImagePolicyWebhook"]);
        assert!(
            from_flags(Flags {
                control: Some(&resize),
                ..Flags::default()
            })
            .unwrap()
            .image_policy_webhook
        );
        // One kube leaves inactive without its feature gate is accepted, inactive.
        let gated = names(&["MutatingAdmissionPolicy", "PodTopologyLabels"]);
        assert_eq!(
            from_flags(Flags {
                enable: Some(&gated),
                ..Flags::default()
            })
            .unwrap(),
            AdmissionPlugins::default()
        );
        // Disabling one that is off by default is accepted.
        assert_eq!(
            from_flags(Flags {
                disable: Some(&resize),
                ..Flags::default()
            })
            .unwrap(),
            AdmissionPlugins::default()
        );
    }
}
