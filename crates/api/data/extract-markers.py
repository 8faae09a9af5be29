#!/usr/bin/env python3
"""Writes kubernetes-markers.json: the list, map and patch markers of the Kubernetes OpenAPI
definitions the server's built-in kinds reach.

Usage: extract-markers.py SPEC [SPEC ...] > kubernetes-markers.json

Each SPEC is one of Kubernetes' published OpenAPI documents: the v2 `swagger.json`
(`definitions`) or a v3 group-version document (`components.schemas`). Only the
`x-kubernetes-*` extensions that server-side apply and strategic merge patch read are kept,
for the definitions reachable from ROOTS (the served kinds, as in crates/api/src/schema.rs);
a reachable definition without any keeps an empty entry, so the drift test can compare the
sets of definitions.
"""

import json
import sys

ORIGIN = {
    "source": "Kubernetes OpenAPI (api/openapi-spec/swagger.json), release-1.33, as published in kubernetes-client/python v33.1.0 (kubernetes/swagger.json.unprocessed)",
    "kubernetes": "1.33",
    "license": "Apache-2.0 (Copyright The Kubernetes Authors)",
    "generator": "crates/api/data/extract-markers.py",
}

ROOTS = [
    "io.k8s.api.core.v1." + kind
    for kind in [
        "Namespace", "Node", "Pod", "ConfigMap", "Secret", "Service", "Endpoints", "Event",
        "ServiceAccount", "PersistentVolumeClaim", "PersistentVolume", "ResourceQuota",
        "LimitRange", "ReplicationController", "PodTemplate",
    ]
] + [
    "io.k8s.api.apps.v1.Deployment",
    "io.k8s.api.apps.v1.ReplicaSet",
    "io.k8s.api.apps.v1.StatefulSet",
    "io.k8s.api.apps.v1.DaemonSet",
    "io.k8s.api.coordination.v1.Lease",
    "io.k8s.api.discovery.v1.EndpointSlice",
    "io.k8s.api.batch.v1.Job",
    "io.k8s.api.batch.v1.CronJob",
    "io.k8s.api.autoscaling.v2.HorizontalPodAutoscaler",
    "io.k8s.api.policy.v1.PodDisruptionBudget",
    "io.k8s.api.networking.v1.NetworkPolicy",
    "io.k8s.api.networking.v1.Ingress",
    "io.k8s.api.networking.v1.IngressClass",
    "io.k8s.api.networking.v1.IPAddress",
    "io.k8s.api.networking.v1.ServiceCIDR",
    "io.k8s.api.rbac.v1.Role",
    "io.k8s.api.rbac.v1.RoleBinding",
    "io.k8s.api.rbac.v1.ClusterRole",
    "io.k8s.api.rbac.v1.ClusterRoleBinding",
    "io.k8s.api.storage.v1.StorageClass",
    "io.k8s.api.scheduling.v1.PriorityClass",
    "io.k8s.api.certificates.v1.CertificateSigningRequest",
    "io.k8s.api.admissionregistration.v1.ValidatingWebhookConfiguration",
    "io.k8s.api.admissionregistration.v1.MutatingWebhookConfiguration",
    "io.k8s.kube-aggregator.pkg.apis.apiregistration.v1.APIService",
    "io.k8s.api.node.v1.RuntimeClass",
    "io.k8s.api.storage.v1.CSIDriver",
    "io.k8s.api.storage.v1.CSINode",
    "io.k8s.api.storage.v1.VolumeAttachment",
    "io.k8s.api.storage.v1.CSIStorageCapacity",
    "io.k8s.api.apps.v1.ControllerRevision",
    "io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicy",
    "io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicyBinding",
    "io.k8s.api.flowcontrol.v1.FlowSchema",
    "io.k8s.api.flowcontrol.v1.PriorityLevelConfiguration",
    "io.k8s.api.autoscaling.v1.HorizontalPodAutoscaler",
]

# The extensions kept, on a definition or on one of its properties.
MARKERS = [
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
    "x-kubernetes-patch-merge-key",
    "x-kubernetes-patch-strategy",
]


def load(paths):
    definitions = {}
    for path in paths:
        with open(path, encoding="utf-8") as f:
            document = json.load(f)
        found = document.get("definitions") or document.get("components", {}).get("schemas", {})
        definitions.update(found)
    return definitions


def refs(node, out):
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            out.add(ref.rsplit("/", 1)[-1])
        for value in node.values():
            refs(value, out)
    elif isinstance(node, list):
        for value in node:
            refs(value, out)


def markers(node):
    return {key: node[key] for key in MARKERS if key in node}


def main():
    definitions = load(sys.argv[1:])
    reachable, todo = set(), list(ROOTS)
    while todo:
        name = todo.pop()
        if name in reachable:
            continue
        if name not in definitions:
            sys.exit(f"definition {name} is not in the given documents")
        reachable.add(name)
        found = set()
        refs(definitions[name], found)
        todo.extend(found - reachable)
    out = {}
    for name in sorted(reachable):
        definition = definitions[name]
        entry = markers(definition)
        properties = {}
        for field, node in sorted(definition.get("properties", {}).items()):
            found = markers(node)
            if found:
                properties[field] = found
        if properties:
            entry["properties"] = properties
        out[name] = entry
    document = {"origin": ORIGIN, "definitions": out}
    json.dump(document, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
