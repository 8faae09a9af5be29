#!/usr/bin/env python3
"""Derives `kubernetes-1.33.schema` from Kubernetes' published API definitions.

Run by hand when the Kubernetes version the server follows changes; normal builds and tests
only read the derived file (see `crates/api/src/protobuf/generate.rs`).

    extract.py API APIMACHINERY KUBE_AGGREGATOR APIEXTENSIONS > kubernetes-1.33.schema

where the four arguments are checkouts of k8s.io/api, k8s.io/apimachinery,
k8s.io/kube-aggregator and k8s.io/apiextensions-apiserver at the same release tag (v0.33.x). It reads two things from each Go
package that has a `generated.proto`:

- `generated.proto`: every message's fields with their numbers, protobuf types and labels;
- the package's Go structs: each field's struct tags, `json:"name,omitempty"` and
  `protobuf:"bytes,N,..."` (joined to the proto field by number), and whether the Go type is a
  pointer.

and writes the messages reachable from the kinds in ROOTS, one line per field:

    message <name>
      <number> <json name> <type> [rep] [ptr] [omitempty]

where <type> is a scalar (string, int32, int64, bool, bytes, double), `msg:<message>`,
`inline:<message>` (a Go struct embedded with `json:",inline"`) or `map:<value type>`. A
message that is a Go named slice (`type ExtraValue []string`) is written as
`list <name> <item type>`. The leaf types whose JSON form is not their protobuf structure
(times, IntOrString, Quantity, FieldsV1, RawExtension, Duration) are referenced by name and
not expanded.
"""

import os
import re
import sys

# (group, version, kind, proto message): the kinds the server serves or answers.
ROOTS = [
    ("", "v1", "Binding", "k8s.io.api.core.v1.Binding"),
    ("", "v1", "ComponentStatus", "k8s.io.api.core.v1.ComponentStatus"),
    ("", "v1", "ConfigMap", "k8s.io.api.core.v1.ConfigMap"),
    ("", "v1", "Endpoints", "k8s.io.api.core.v1.Endpoints"),
    ("", "v1", "Event", "k8s.io.api.core.v1.Event"),
    ("", "v1", "LimitRange", "k8s.io.api.core.v1.LimitRange"),
    ("", "v1", "Namespace", "k8s.io.api.core.v1.Namespace"),
    ("", "v1", "Node", "k8s.io.api.core.v1.Node"),
    ("", "v1", "PersistentVolume", "k8s.io.api.core.v1.PersistentVolume"),
    ("", "v1", "PersistentVolumeClaim", "k8s.io.api.core.v1.PersistentVolumeClaim"),
    ("", "v1", "Pod", "k8s.io.api.core.v1.Pod"),
    ("", "v1", "PodTemplate", "k8s.io.api.core.v1.PodTemplate"),
    ("", "v1", "ReplicationController", "k8s.io.api.core.v1.ReplicationController"),
    ("", "v1", "ResourceQuota", "k8s.io.api.core.v1.ResourceQuota"),
    ("", "v1", "Secret", "k8s.io.api.core.v1.Secret"),
    ("", "v1", "Service", "k8s.io.api.core.v1.Service"),
    ("", "v1", "ServiceAccount", "k8s.io.api.core.v1.ServiceAccount"),
    ("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration",
     "k8s.io.api.admissionregistration.v1.MutatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration",
     "k8s.io.api.admissionregistration.v1.ValidatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicy",
     "k8s.io.api.admissionregistration.v1.ValidatingAdmissionPolicy"),
    ("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicyBinding",
     "k8s.io.api.admissionregistration.v1.ValidatingAdmissionPolicyBinding"),
    ("apiregistration.k8s.io", "v1", "APIService",
     "k8s.io.kube_aggregator.pkg.apis.apiregistration.v1.APIService"),
    ("apiextensions.k8s.io", "v1", "CustomResourceDefinition",
     "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition"),
    ("apps", "v1", "ControllerRevision", "k8s.io.api.apps.v1.ControllerRevision"),
    ("apps", "v1", "DaemonSet", "k8s.io.api.apps.v1.DaemonSet"),
    ("apps", "v1", "Deployment", "k8s.io.api.apps.v1.Deployment"),
    ("apps", "v1", "ReplicaSet", "k8s.io.api.apps.v1.ReplicaSet"),
    ("apps", "v1", "StatefulSet", "k8s.io.api.apps.v1.StatefulSet"),
    ("authentication.k8s.io", "v1", "SelfSubjectReview",
     "k8s.io.api.authentication.v1.SelfSubjectReview"),
    ("authentication.k8s.io", "v1", "TokenRequest", "k8s.io.api.authentication.v1.TokenRequest"),
    ("authentication.k8s.io", "v1", "TokenReview", "k8s.io.api.authentication.v1.TokenReview"),
    ("authorization.k8s.io", "v1", "LocalSubjectAccessReview",
     "k8s.io.api.authorization.v1.LocalSubjectAccessReview"),
    ("authorization.k8s.io", "v1", "SelfSubjectAccessReview",
     "k8s.io.api.authorization.v1.SelfSubjectAccessReview"),
    ("authorization.k8s.io", "v1", "SelfSubjectRulesReview",
     "k8s.io.api.authorization.v1.SelfSubjectRulesReview"),
    ("authorization.k8s.io", "v1", "SubjectAccessReview",
     "k8s.io.api.authorization.v1.SubjectAccessReview"),
    ("autoscaling", "v1", "Scale", "k8s.io.api.autoscaling.v1.Scale"),
    ("autoscaling", "v1", "HorizontalPodAutoscaler",
     "k8s.io.api.autoscaling.v1.HorizontalPodAutoscaler"),
    ("autoscaling", "v2", "HorizontalPodAutoscaler",
     "k8s.io.api.autoscaling.v2.HorizontalPodAutoscaler"),
    ("batch", "v1", "CronJob", "k8s.io.api.batch.v1.CronJob"),
    ("batch", "v1", "Job", "k8s.io.api.batch.v1.Job"),
    ("certificates.k8s.io", "v1", "CertificateSigningRequest",
     "k8s.io.api.certificates.v1.CertificateSigningRequest"),
    ("coordination.k8s.io", "v1", "Lease", "k8s.io.api.coordination.v1.Lease"),
    ("discovery.k8s.io", "v1", "EndpointSlice", "k8s.io.api.discovery.v1.EndpointSlice"),
    ("events.k8s.io", "v1", "Event", "k8s.io.api.events.v1.Event"),
    ("flowcontrol.apiserver.k8s.io", "v1", "FlowSchema",
     "k8s.io.api.flowcontrol.v1.FlowSchema"),
    ("flowcontrol.apiserver.k8s.io", "v1", "PriorityLevelConfiguration",
     "k8s.io.api.flowcontrol.v1.PriorityLevelConfiguration"),
    ("networking.k8s.io", "v1", "Ingress", "k8s.io.api.networking.v1.Ingress"),
    ("networking.k8s.io", "v1", "IngressClass", "k8s.io.api.networking.v1.IngressClass"),
    ("networking.k8s.io", "v1", "IPAddress", "k8s.io.api.networking.v1.IPAddress"),
    ("networking.k8s.io", "v1", "ServiceCIDR", "k8s.io.api.networking.v1.ServiceCIDR"),
    ("networking.k8s.io", "v1", "NetworkPolicy", "k8s.io.api.networking.v1.NetworkPolicy"),
    ("node.k8s.io", "v1", "RuntimeClass", "k8s.io.api.node.v1.RuntimeClass"),
    ("policy", "v1", "Eviction", "k8s.io.api.policy.v1.Eviction"),
    ("policy", "v1", "PodDisruptionBudget", "k8s.io.api.policy.v1.PodDisruptionBudget"),
    ("rbac.authorization.k8s.io", "v1", "ClusterRole", "k8s.io.api.rbac.v1.ClusterRole"),
    ("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding",
     "k8s.io.api.rbac.v1.ClusterRoleBinding"),
    ("rbac.authorization.k8s.io", "v1", "Role", "k8s.io.api.rbac.v1.Role"),
    ("rbac.authorization.k8s.io", "v1", "RoleBinding", "k8s.io.api.rbac.v1.RoleBinding"),
    ("scheduling.k8s.io", "v1", "PriorityClass", "k8s.io.api.scheduling.v1.PriorityClass"),
    ("storage.k8s.io", "v1", "CSIDriver", "k8s.io.api.storage.v1.CSIDriver"),
    ("storage.k8s.io", "v1", "CSINode", "k8s.io.api.storage.v1.CSINode"),
    ("storage.k8s.io", "v1", "CSIStorageCapacity", "k8s.io.api.storage.v1.CSIStorageCapacity"),
    ("storage.k8s.io", "v1", "StorageClass", "k8s.io.api.storage.v1.StorageClass"),
    ("storage.k8s.io", "v1", "VolumeAttachment", "k8s.io.api.storage.v1.VolumeAttachment"),
]

# apimachinery messages served whatever the resource (lists of every kind, and
# PartialObjectMetadataList, share one shape: 1 ListMeta metadata, 2 repeated items).
META_ROOTS = [
    "k8s.io.apimachinery.pkg.apis.meta.v1.DeleteOptions",
    "k8s.io.apimachinery.pkg.apis.meta.v1.ListMeta",
    "k8s.io.apimachinery.pkg.apis.meta.v1.Status",
    "k8s.io.apimachinery.pkg.apis.meta.v1.PartialObjectMetadata",
]

# Leaf messages with a JSON form of their own (not expanded).
LEAVES = {
    "k8s.io.apimachinery.pkg.apis.meta.v1.Time",
    "k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime",
    "k8s.io.apimachinery.pkg.apis.meta.v1.Duration",
    "k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1",
    "k8s.io.apimachinery.pkg.util.intstr.IntOrString",
    "k8s.io.apimachinery.pkg.api.resource.Quantity",
    "k8s.io.apimachinery.pkg.runtime.RawExtension",
    # apiextensions' `JSON` {1 raw}: its bytes are the JSON value (a schema's `default`,
    # `example`, `enum` items).
    "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSON",
}

SCALARS = {"string", "int32", "int64", "bool", "bytes", "double"}


def parse_proto(path):
    """Messages of one generated.proto: name -> [(label, type, name, number)]."""
    text = open(path, encoding="utf-8").read()
    package = re.search(r"^package ([\w.]+);", text, re.M).group(1)
    go_package = re.search(r'^option go_package = "([^"]+)";', text, re.M).group(1)
    messages = {}
    current = None
    for line in text.splitlines():
        line = line.split("//", 1)[0].strip()
        if not line:
            continue
        m = re.match(r"message (\w+) \{$", line)
        if m:
            current = []
            messages[f"{package}.{m.group(1)}"] = current
            continue
        if line == "}":
            current = None
            continue
        if current is None:
            continue
        m = re.match(r"(optional|repeated)\s+([\w.]+)\s+(\w+)\s*=\s*(\d+);$", line)
        if m:
            label, ty, name, number = m.groups()
            current.append((label, resolve(package, ty), name, int(number)))
            continue
        m = re.match(r"map<string,\s*([\w.]+)>\s+(\w+)\s*=\s*(\d+);$", line)
        if m:
            ty, name, number = m.groups()
            current.append(("map", resolve(package, ty), name, int(number)))
            continue
        raise SystemExit(f"{path}: cannot read {line!r}")
    return package, go_package, messages


def resolve(package, ty):
    if ty in SCALARS:
        return ty
    if ty.startswith("."):
        return ty[1:]
    return f"{package}.{ty}"


GO_FIELD = re.compile(
    r"^\s*(?:(\w+)\s+)?(\*?[\w.\[\]*]+)\s+`([^`]*)`\s*$"
)


def parse_go(directory):
    """Go structs of one package: struct name -> {proto number: (json name, omitempty,
    pointer)}; and the package's named slice types."""
    structs = {}
    slices = set()
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".go") or name.endswith("_test.go") or name.startswith("zz_"):
            continue
        if name in ("generated.pb.go",):
            continue
        current = None
        for line in open(os.path.join(directory, name), encoding="utf-8"):
            stripped = line.strip()
            m = re.match(r"^type (\w+) struct \{$", stripped)
            if m and line.startswith("type "):
                current = {}
                structs[m.group(1)] = current
                continue
            m = re.match(r"^type (\w+) struct\s*\{\}$", stripped)
            if m and line.startswith("type "):
                # An empty struct (`type CustomResourceSubresourceStatus struct{}`).
                structs[m.group(1)] = {}
                continue
            m = re.match(r"^type (\w+) \[\](\w+)$", stripped)
            if m and line.startswith("type "):
                slices.add(m.group(1))
                continue
            if current is not None and line.startswith("}"):
                current = None
                continue
            if current is None or stripped.startswith("//"):
                continue
            m = GO_FIELD.match(line)
            if not m:
                continue
            _go_name, go_type, tags = m.groups()
            json_tag = re.search(r'json:"([^"]*)"', tags)
            proto_tag = re.search(r'protobuf:"([^"]*)"', tags)
            if not proto_tag:
                continue
            parts = proto_tag.group(1).split(",")
            if len(parts) < 2:
                continue
            number = int(parts[1])
            json_parts = json_tag.group(1).split(",") if json_tag else [""]
            current[number] = (
                json_parts[0],
                "omitempty" in json_parts[1:],
                "inline" in json_parts[1:],
                go_type.startswith("*"),
            )
    return structs, slices


def main():
    roots = {
        "api": sys.argv[1],
        "apimachinery": sys.argv[2],
        "kube-aggregator": sys.argv[3],
        "apiextensions-apiserver": sys.argv[4],
    }
    messages = {}
    go = {}
    for repo, base in roots.items():
        for dirpath, _dirs, files in os.walk(base):
            if "generated.proto" not in files:
                continue
            package, go_package, found = parse_proto(os.path.join(dirpath, "generated.proto"))
            structs, slices = parse_go(dirpath)
            messages.update(found)
            go[package] = (structs, slices, go_package)

    out = []
    seen = set()
    lists = {}

    def visit(name):
        if name in seen or name in LEAVES or name in SCALARS:
            return
        seen.add(name)
        package, _, short = name.rpartition(".")
        structs, slices, _ = go[package]
        fields = messages[name]
        if short in slices:
            (label, ty, field, number), = fields
            assert (label, field, number) == ("repeated", "items", 1), name
            lists[name] = ty
            return
        tags = structs[short]
        lines = [f"message {name}"]
        for label, ty, field, number in sorted(fields, key=lambda f: f[3]):
            json_name, omitempty, inline, pointer = tags[number]
            if inline:
                kind = f"inline:{ty}"
                json_name = field
            elif label == "map":
                kind = f"map:{ty}"
            elif ty in SCALARS:
                kind = ty
            else:
                kind = f"msg:{ty}"
            if json_name == "-":
                raise SystemExit(f"{name}.{field}: a field outside JSON")
            if json_name == "":
                json_name = field
            flags = []
            if label == "repeated":
                flags.append("rep")
            if pointer:
                flags.append("ptr")
            if omitempty:
                flags.append("omitempty")
            lines.append("  " + " ".join([str(number), json_name, kind] + flags))
            visit(ty)
        out.append("\n".join(lines))

    for _group, _version, _kind, message in ROOTS:
        visit(message)
    for message in META_ROOTS:
        visit(message)

    print("# Kubernetes' protobuf schema for the kinds watchkeeper serves, derived by extract.py")
    print("# from the generated.proto files and Go struct tags of k8s.io/api, k8s.io/apimachinery,")
    print("# k8s.io/kube-aggregator and k8s.io/apiextensions-apiserver at tag v0.33.13")
    print("# (Kubernetes 1.33). Those definitions are")
    print("# Copyright The Kubernetes Authors, licensed under the Apache License, Version 2.0.")
    print("#")
    print("# kind <group> <version> <kind> <message>   (group '-' for the core group)")
    print("# message <name>, then its fields: <number> <json name> <type> [rep] [ptr] [omitempty]")
    print("# list <name> <item type>                  (a Go named slice, JSON as an array)")
    for group, version, kind, message in ROOTS:
        print(f"kind {group or '-'} {version} {kind} {message}")
    for name, ty in sorted(lists.items()):
        print(f"list {name} {ty}")
    for block in sorted(out):
        print(block)


if __name__ == "__main__":
    main()
