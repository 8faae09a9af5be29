#!/usr/bin/env python3
"""Converts kube-apiserver's expanded bootstrap RBAC policy into watchkeeper's
crates/server/src/auth/rbac/bootstrap_policy.json.

kube keeps the policy its `rbac/bootstrap-roles` post-start hook creates, expanded, as test
data: plugin/pkg/auth/authorizer/rbac/bootstrappolicy/testdata/{cluster-roles,
cluster-role-bindings, controller-roles, controller-role-bindings, namespace-roles,
namespace-role-bindings}.yaml (the outputs of policy.go, controller_policy.go and
namespace_policy.go with the release's default feature gates; the *-featuregates.yaml files,
with every gate on, are not read). For the next release:

    python3 scripts/rbac_bootstrap_policy.py \
        --source "Kubernetes v1.NN (commit ...) plugin/pkg/auth/authorizer/rbac/bootstrappolicy/testdata" \
        KUBE/plugin/pkg/auth/authorizer/rbac/bootstrappolicy/testdata \
        > crates/server/src/auth/rbac/bootstrap_policy.json

`--omit NAME` (repeatable) leaves out the roles and bindings of that name (for testdata taken
from a later commit than the release, whose default gates create a role the release does not).
Needs PyYAML.
"""

import argparse
import json
import os
import sys

import yaml

FILES = {
    "clusterRoles": ["cluster-roles.yaml", "controller-roles.yaml"],
    "clusterRoleBindings": ["cluster-role-bindings.yaml", "controller-role-bindings.yaml"],
    "roles": ["namespace-roles.yaml"],
    "roleBindings": ["namespace-role-bindings.yaml"],
}


def clean(item):
    """The object as the server stores it before its uid and timestamp: without the
    `creationTimestamp: null` of older testdata and without `rules: null`."""
    item = dict(item)
    metadata = dict(item["metadata"])
    metadata.pop("creationTimestamp", None)
    item["metadata"] = metadata
    for key in ("rules", "subjects"):
        if key in item and item[key] is None:
            del item[key]
    return item


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("testdata", help="kube's bootstrappolicy/testdata directory")
    parser.add_argument("--source", required=True, help="where the testdata came from (kept in the output)")
    parser.add_argument("--omit", action="append", default=[], help="a role (and its binding) to leave out")
    args = parser.parse_args()
    out = {"source": args.source}
    omitted = set()
    for key, names in FILES.items():
        items = []
        for name in names:
            with open(os.path.join(args.testdata, name)) as f:
                listed = yaml.safe_load(f)
            for item in listed.get("items") or []:
                if item["metadata"]["name"] in args.omit:
                    omitted.add(item["metadata"]["name"])
                    continue
                items.append(clean(item))
        out[key] = items
    missing = set(args.omit) - omitted
    if missing:
        sys.exit(f"--omit names nothing in the testdata: {sorted(missing)}")
    json.dump(out, sys.stdout, indent=1, sort_keys=False, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
