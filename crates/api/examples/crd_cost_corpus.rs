//! Runs kube's CRD validation (with the estimated cost of `x-kubernetes-validations` rules)
//! over every CustomResourceDefinition in the YAML files named on the command line (or in the
//! directories named), and reports the CRDs it refuses (for any reason: their causes; how many
//! of them for cost), how many CRDs and rules it ran (and how many rules got an estimated
//! cost, the rest counting as costing nothing), and the slowest validation. Exits non-zero when one is refused: the corpus is of CRDs kube accepts.
//!
//! `cargo run --release -p watchkeeper-api --example crd_cost_corpus -- /tmp/crdcorpus`

use std::collections::BTreeMap;
use std::time::Instant;

use serde_json::Value;

fn files(args: impl Iterator<Item = String>) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for arg in args {
        let path = std::path::PathBuf::from(arg);
        match std::fs::read_dir(&path) {
            Ok(dir) => out.extend(dir.filter_map(|e| e.ok().map(|e| e.path()))),
            Err(_) => out.push(path),
        }
    }
    out.sort();
    out
}

/// The rules under `v` (a schema node, a resource's root or embedded resource when
/// `resource`), and how many of them get an estimated cost.
fn rules(v: &Value, resource: bool) -> (usize, usize) {
    match v {
        Value::Object(m) => {
            let (mut count, mut estimated) = (0, 0);
            for rule in m
                .get("x-kubernetes-validations")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                count += 1;
                let text = rule.get("rule").and_then(Value::as_str).unwrap_or("");
                let optional = rule.get("optionalOldSelf").and_then(Value::as_bool) == Some(true);
                if watchkeeper_api::cel_rules::estimated_cost(text, m, resource, optional).is_some()
                {
                    estimated += 1;
                }
            }
            for (key, child) in m {
                if key == "x-kubernetes-validations" || key == "default" || key == "example" {
                    continue;
                }
                let embedded = child
                    .get("x-kubernetes-embedded-resource")
                    .and_then(Value::as_bool)
                    == Some(true);
                let (c, e) = rules(child, embedded);
                count += c;
                estimated += e;
            }
            (count, estimated)
        }
        Value::Array(a) => a.iter().fold((0, 0), |(c, e), v| {
            let (c2, e2) = rules(v, false);
            (c + c2, e + e2)
        }),
        _ => (0, 0),
    }
}

/// The rules of `crd` and how many are estimated (each version's schema a resource's root).
fn crd_rules(crd: &Value) -> (usize, usize) {
    let versions = crd["spec"]["versions"].as_array().into_iter().flatten();
    versions.fold((0, 0), |(c, e), version| {
        let (c2, e2) = rules(&version["schema"]["openAPIV3Schema"], true);
        (c + c2, e + e2)
    })
}

fn main() {
    let mut seen = BTreeMap::new();
    for file in files(std::env::args().skip(1)) {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        for doc in text.split("\n---") {
            let Ok(json) = watchkeeper_api::yaml::json_from_yaml_body(doc.as_bytes()) else {
                continue;
            };
            let Ok(crd) = serde_json::from_slice::<Value>(&json) else {
                continue;
            };
            if crd.get("kind").and_then(Value::as_str) != Some("CustomResourceDefinition")
                || crd.get("apiVersion").and_then(Value::as_str) != Some("apiextensions.k8s.io/v1")
            {
                continue;
            }
            let key = serde_json::to_string(&crd).unwrap_or_default();
            seen.entry(key).or_insert((file.display().to_string(), crd));
        }
    }
    let (mut crds, mut total_rules, mut estimated, mut refused, mut costly) = (0, 0, 0, 0, 0);
    let mut slowest = (0.0, String::new(), 0usize);
    for (file, crd) in seen.values() {
        crds += 1;
        let (count, estimates) = crd_rules(crd);
        total_rules += count;
        estimated += estimates;
        let start = Instant::now();
        let causes = watchkeeper_api::crd::validation_causes(crd, None);
        let took = start.elapsed().as_secs_f64();
        let size = serde_json::to_string(crd).map_or(0, |s| s.len());
        if took > slowest.0 {
            slowest = (took, file.clone(), size);
        }
        if !causes.is_empty() {
            refused += 1;
            if causes
                .iter()
                .any(|c| c.1.contains("budget") || c.1.contains("cost"))
            {
                costly += 1;
            }
            println!("REFUSED {file} {}: {causes:?}", crd["metadata"]["name"]);
        }
    }
    println!(
        "{crds} distinct CRDs, {total_rules} rules ({estimated} with an estimated cost), {refused} refused ({costly} for cost); slowest validation {:.1} ms ({}, {} bytes of JSON)",
        slowest.0 * 1000.0,
        slowest.1,
        slowest.2
    );
    if refused > 0 {
        std::process::exit(1);
    }
}
