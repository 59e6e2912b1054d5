"""`kubectl api-resources` lists what a 1.37 API server lists for every kind drasim
serves (short names, scope, verbs, categories), and the README's list of served kinds
names each of them."""

from __future__ import annotations

import json
import re
from pathlib import Path

README = Path(__file__).parents[2] / "README.md"
ALL_VERBS = "create,delete,deletecollection,get,list,patch,update,watch"
# `kubectl api-resources -o wide` of upstream's kube-apiserver v1.37.2 (reference/up), the
# rows of what drasim serves: NAME SHORTNAMES APIVERSION NAMESPACED KIND VERBS CATEGORIES,
# "-" for an empty cell, "*" for ALL_VERBS, "ext" for the category `api-extensions`.
UPSTREAM = """\
configmaps cm v1 true ConfigMap * -
endpoints ep v1 true Endpoints * -
events ev v1 true Event * -
namespaces ns v1 false Namespace create,delete,get,list,patch,update,watch -
nodes no v1 false Node * -
persistentvolumeclaims pvc v1 true PersistentVolumeClaim * -
pods po v1 true Pod * all
resourcequotas quota v1 true ResourceQuota * -
secrets - v1 true Secret * -
serviceaccounts sa v1 true ServiceAccount * -
services svc v1 true Service * all
validatingadmissionpolicies - admissionregistration.k8s.io/v1 false ValidatingAdmissionPolicy * ext
validatingadmissionpolicybindings - admissionregistration.k8s.io/v1 false \
    ValidatingAdmissionPolicyBinding * ext
customresourcedefinitions crd,crds apiextensions.k8s.io/v1 false CustomResourceDefinition * ext
daemonsets ds apps/v1 true DaemonSet * all
deployments deploy apps/v1 true Deployment * all
replicasets rs apps/v1 true ReplicaSet * all
statefulsets sts apps/v1 true StatefulSet * all
selfsubjectreviews - authentication.k8s.io/v1 false SelfSubjectReview create -
selfsubjectaccessreviews - authorization.k8s.io/v1 false SelfSubjectAccessReview create -
selfsubjectrulesreviews - authorization.k8s.io/v1 false SelfSubjectRulesReview create -
cronjobs cj batch/v1 true CronJob * all
jobs - batch/v1 true Job * all
leases - coordination.k8s.io/v1 true Lease * -
endpointslices - discovery.k8s.io/v1 true EndpointSlice * -
ipaddresses ip networking.k8s.io/v1 false IPAddress * -
poddisruptionbudgets pdb policy/v1 true PodDisruptionBudget * -
clusterrolebindings - rbac.authorization.k8s.io/v1 false ClusterRoleBinding * -
clusterroles - rbac.authorization.k8s.io/v1 false ClusterRole * -
rolebindings - rbac.authorization.k8s.io/v1 true RoleBinding * -
roles - rbac.authorization.k8s.io/v1 true Role * -
deviceclasses - resource.k8s.io/v1 false DeviceClass * -
devicetaintrules - resource.k8s.io/v1 false DeviceTaintRule * -
resourceclaims - resource.k8s.io/v1 true ResourceClaim * -
resourceclaimtemplates - resource.k8s.io/v1 true ResourceClaimTemplate * -
resourceslices - resource.k8s.io/v1 false ResourceSlice * -
priorityclasses pc scheduling.k8s.io/v1 false PriorityClass * -
"""
COLUMNS = ("NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND", "VERBS", "CATEGORIES")


def _rows(table: str) -> list[list[str]]:
    """The cells of kubectl's wide table, cut where its header's columns start (a cell may
    be empty), written as UPSTREAM writes them."""
    header, *lines = table.splitlines()
    starts = [header.index(column) for column in COLUMNS]
    ends = [*starts[1:], None]
    rows = []
    for line in lines:
        cells = [line[start:end].strip() or "-" for start, end in zip(starts, ends, strict=True)]
        short = {ALL_VERBS: "*", "api-extensions": "ext"}
        rows.append([short.get(cell, cell) for cell in cells])
    return rows


async def test_api_resources_lists_what_upstream_lists(kubectl):
    listed = _rows((await kubectl("api-resources", "-o", "wide")).stdout)
    assert listed == [line.split() for line in UPSTREAM.splitlines()]


async def test_namespaces_are_not_deleted_as_a_collection(kubectl):
    """As upstream's namespace storage, which has no DeleteCollection."""
    refused = await kubectl("delete", "--raw", "/api/v1/namespaces", check=False)
    assert refused.stderr.strip() == (
        "Error from server (MethodNotAllowed): "
        "the server does not allow this method on the requested resource"
    )
    assert (
        await kubectl("get", "ns", "default", "-o", "name")
    ).stdout.strip() == "namespace/default"


def test_the_readme_names_every_served_kind():
    """README's "Served:" paragraph: each group-version, and each kind by its plural."""
    text = README.read_text()
    served = text[text.index("\nServed: ") :]
    served = " ".join(served[: served.index("\n\n")].split())
    for name, _short, api_version, *_ in (line.split() for line in UPSTREAM.splitlines()):
        if name.startswith("self"):
            continue  # reviews: asked, never stored
        group_version = api_version if "/" in api_version else f"core/{api_version}"
        assert group_version in served, group_version
        assert re.search(rf"\b{name}\b", served), name


async def test_subresources_name_a_group_only_when_they_answer_in_another(kubectl):
    """apps/v1's legacy discovery as upstream's: `scale` answers autoscaling/v1 Scale and
    says so; `status` answers in the parent's group-version and names none."""
    apps = json.loads((await kubectl("get", "--raw", "/apis/apps/v1")).stdout)
    subresources = {
        r["name"]: (r.get("group"), r.get("version"), r["kind"], r["verbs"])
        for r in apps["resources"]
        if "/" in r["name"]
    }
    write = ["get", "patch", "update"]
    scale = ("autoscaling", "v1", "Scale", write)
    assert subresources == {
        "daemonsets/status": (None, None, "DaemonSet", write),
        "deployments/scale": scale,
        "deployments/status": (None, None, "Deployment", write),
        "replicasets/scale": scale,
        "replicasets/status": (None, None, "ReplicaSet", write),
        "statefulsets/scale": scale,
        "statefulsets/status": (None, None, "StatefulSet", write),
    }
