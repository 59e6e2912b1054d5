"""The core kinds applications ship, through kubectl as a user runs it: ConfigMaps,
Secrets, ServiceAccounts, Services (cluster IPs allocated and released), Endpoints,
EndpointSlices and PersistentVolumeClaims, answered and printed as upstream's; and what a
new namespace is given (its `default` ServiceAccount, its `kube-root-ca.crt`)."""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import json

import yaml

from drasim.apistore import ipallocator
from drasim.common.api import core_v1_app, networking_v1
from tests.controllers.conftest import Changes, running_controllers

BUNDLE = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {mode: fast}
binaryData: {blob: aGVsbG8=}
---
apiVersion: v1
kind: Secret
metadata: {name: creds}
stringData: {user: admin}
data: {pw: cGFzcw==}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: runner}
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Service
metadata: {name: headless}
spec:
  clusterIP: None
  selector: {app: web}
  ports: [{port: 80}]
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: Endpoints
metadata: {name: web}
subsets:
- addresses: [{ip: 10.244.0.5}, {ip: 10.244.0.6}]
  ports: [{port: 8080}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-abc
  labels: {kubernetes.io/service-name: web}
addressType: IPv4
endpoints:
- addresses: [10.244.0.5]
  conditions: {ready: true}
ports: [{port: 8080}]
"""


def _table(text: str) -> dict[str, list[str]]:
    """Rows of a `kubectl get` table by name, its header under "NAME"."""
    return {row.split()[0]: row.split() for row in text.splitlines() if row.strip()}


async def test_bundle_applies_and_reads_back_as_upstream_stores_it(cluster, kubectl):
    applied = await kubectl("apply", "-f", "-", input=BUNDLE)
    assert applied.stdout.splitlines() == [
        "configmap/settings created",
        "secret/creds created",
        "serviceaccount/runner created",
        "service/web created",
        "service/headless created",
        "persistentvolumeclaim/data created",
        "endpoints/web created",
        "endpointslice.discovery.k8s.io/web-abc created",
    ]
    # stringData is merged into data and not stored; the type defaults to Opaque.
    secret = json.loads((await kubectl("get", "secret", "creds", "-o", "json")).stdout)
    assert secret["data"] == {"pw": "cGFzcw==", "user": base64.b64encode(b"admin").decode()}
    assert "stringData" not in secret and secret["type"] == "Opaque"
    cm = json.loads((await kubectl("get", "cm", "settings", "-o", "json")).stdout)
    assert cm["binaryData"] == {"blob": "aGVsbG8="} and cm["data"] == {"mode": "fast"}

    web = json.loads((await kubectl("get", "svc", "web", "-o", "json")).stdout)
    ip = web["spec"]["clusterIP"]
    assert ipaddress.ip_address(ip) in ipallocator.SERVICE_CIDR
    assert web["spec"]["clusterIPs"] == [ip]
    assert {k: web["spec"][k] for k in ("type", "sessionAffinity", "ipFamilyPolicy")} == {
        "type": "ClusterIP", "sessionAffinity": "None", "ipFamilyPolicy": "SingleStack",
    }  # fmt: skip
    assert web["spec"]["ports"] == [{"port": 80, "protocol": "TCP", "targetPort": 8080}]
    assert web["status"] == {"loadBalancer": {}}
    # The address is held by an IPAddress naming the Service, as upstream's allocator makes.
    held = await cluster.api.get(networking_v1.IPAddress, ip)
    assert held.spec.parent_ref is not None and held.spec.parent_ref.name == "web"

    services = _table((await kubectl("get", "svc", "-o", "wide")).stdout)
    assert services["NAME"] == ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE",
                                "SELECTOR"]  # fmt: skip
    assert services["web"][1:5] == ["ClusterIP", ip, "<none>", "80/TCP"]
    assert services["headless"][1:5] == ["ClusterIP", "None", "<none>", "80/TCP"]
    assert services["web"][6] == "app=web"

    pvcs = _table((await kubectl("get", "pvc")).stdout)
    assert pvcs["NAME"] == ["NAME", "STATUS", "VOLUME", "CAPACITY", "ACCESS", "MODES",
                            "STORAGECLASS", "VOLUMEATTRIBUTESCLASS", "AGE"]  # fmt: skip
    assert pvcs["data"][1] == "Bound" and pvcs["data"][2].startswith("pvc-")
    assert pvcs["data"][3:5] == ["1Gi", "RWO"]

    other = _table((await kubectl("get", "cm,secret,sa,ep,endpointslices")).stdout)
    assert other["configmap/settings"][1] == "2"
    assert other["secret/creds"][1:3] == ["Opaque", "2"]
    assert "serviceaccount/runner" in other
    assert other["endpoints/web"][1] == "10.244.0.5:8080,10.244.0.6:8080"
    assert other["endpointslice.discovery.k8s.io/web-abc"][1:4] == ["IPv4", "8080", "10.244.0.5"]

    # Applying the same manifests again changes nothing, the cluster IP included; kubectl
    # says "configured" where its patch names fields the server defaults or converts, as
    # against upstream's (stringData, Endpoints and EndpointSlice ports).
    again = await kubectl("apply", "-f", "-", input=BUNDLE)
    assert again.stdout.splitlines() == [
        "configmap/settings unchanged",
        "secret/creds configured",
        "serviceaccount/runner unchanged",
        "service/web unchanged",
        "service/headless unchanged",
        "persistentvolumeclaim/data unchanged",
        "endpoints/web configured",
        "endpointslice.discovery.k8s.io/web-abc configured",
    ]
    assert (await kubectl("get", "svc", "web", "-o", "jsonpath={.spec.clusterIP}")).stdout == ip
    diff = await kubectl("diff", "-f", "-", input=BUNDLE)
    assert diff.stdout == ""


async def test_cluster_ips_are_never_shared_and_are_released_on_delete(cluster, kubectl):
    await kubectl("apply", "-f", "-", input=BUNDLE.split("---\n")[3])
    ip = (await kubectl("get", "svc", "web", "-o", "jsonpath={.spec.clusterIP}")).stdout
    taken = await kubectl(
        "create", "service", "clusterip", "dup", "--tcp=80:80", f"--clusterip={ip}", check=False
    )
    assert taken.returncode == 1
    assert (
        f'Service "dup" is invalid: spec.clusterIPs: Invalid value: ["{ip}"]: failed to '
        f"allocate IP {ip}: provided IP is already allocated"
    ) in taken.stderr
    outside = await kubectl(
        "create", "service", "clusterip", "out", "--tcp=80:80", "--clusterip=10.200.0.1",
        check=False,
    )  # fmt: skip
    assert (
        "failed to allocate IP 10.200.0.1: the provided network does not match the "
        "current range" in outside.stderr
    )

    await kubectl("delete", "svc", "web")
    assert (await kubectl("get", "ipaddress", ip, check=False)).returncode == 1
    # Released, the address may be asked for again.
    created = await kubectl("create", "service", "clusterip", "again", "--tcp=80:80",
                            f"--clusterip={ip}")  # fmt: skip
    assert created.stdout.strip() == "service/again created"
    listed = _table((await kubectl("get", "ipaddresses")).stdout)
    assert listed[ip] == [ip, "services/default/again"]


async def test_typed_create_commands_send_protobuf(cluster, kubectl):
    """`kubectl create configmap|secret|serviceaccount|service` send protobuf bodies."""
    out = await kubectl("create", "configmap", "cfg", "--from-literal=a=1", "--from-literal=b=2")
    assert out.stdout.strip() == "configmap/cfg created"
    out = await kubectl("create", "secret", "generic", "tok", "--from-literal=token=s3cret")
    assert out.stdout.strip() == "secret/tok created"
    secret = await cluster.api.get(core_v1_app.Secret, "tok", namespace="default")
    assert secret.data == {"token": b"s3cret"} and secret.type == "Opaque"
    out = await kubectl("create", "serviceaccount", "bot")
    assert out.stdout.strip() == "serviceaccount/bot created"
    out = await kubectl("create", "service", "nodeport", "np", "--tcp=8080:80")
    assert out.stdout.strip() == "service/np created"
    np = await cluster.api.get(core_v1_app.Service, "np", namespace="default")
    assert np.spec.type == "NodePort" and np.spec.external_traffic_policy == "Cluster"
    [port] = np.spec.ports
    assert (port.name, port.port, port.target_port) == ("8080-80", 8080, 80)


async def test_invalid_objects_are_refused_as_upstream(kubectl):
    cases = [
        (
            {"kind": "Service", "metadata": {"name": "bad"},
             "spec": {"type": "Foo", "ports": [{"port": 0}]}},
            'The Service "bad" is invalid: \n'
            "* spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive\n"
            "* spec.ports[0].targetPort: Invalid value: 0: must be between 1 and 65535, "
            "inclusive\n"
            '* spec.type: Unsupported value: "Foo": supported values: "ClusterIP", '
            '"ExternalName", "LoadBalancer", "NodePort"',
        ),
        (
            {"kind": "Service", "metadata": {"name": "bad"}, "spec": {}},
            'The Service "bad" is invalid: spec.ports: Required value',
        ),
        (
            {"kind": "Secret", "metadata": {"name": "tls1"}, "type": "kubernetes.io/tls",
             "data": {"x": "eA=="}},
            'The Secret "tls1" is invalid: \n* data[tls.crt]: Required value\n'
            "* data[tls.key]: Required value",
        ),
        (
            {"kind": "ConfigMap", "metadata": {"name": "dupk"}, "data": {"a": "1"},
             "binaryData": {"a": "eA=="}},
            'The ConfigMap "dupk" is invalid: data[a]: Invalid value: "a": duplicate of key '
            "present in binaryData",
        ),
        (
            {"kind": "PersistentVolumeClaim", "metadata": {"name": "p2"}, "spec": {}},
            'The PersistentVolumeClaim "p2" is invalid: \n'
            "* spec.accessModes: Required value: at least 1 access mode is required\n"
            "* spec.resources[storage]: Required value",
        ),
    ]  # fmt: skip
    for body, message in cases:
        body = {"apiVersion": "v1", **body}
        refused = await kubectl("apply", "-f", "-", input=json.dumps(body), check=False)
        assert refused.returncode == 1
        assert refused.stderr.strip() == message


async def test_immutable_fields_stay(kubectl):
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "imm"},
          "immutable": True, "data": {"a": "1"}}  # fmt: skip
    await kubectl("apply", "-f", "-", input=json.dumps(cm))
    cm["data"] = {"a": "2"}
    refused = await kubectl("apply", "-f", "-", input=json.dumps(cm), check=False)
    assert refused.stderr.strip() == (
        'The ConfigMap "imm" is invalid: data: Forbidden: field is immutable when `immutable` '
        "is set"
    )
    await kubectl("create", "secret", "generic", "s1", "--from-literal=a=b")
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s1"}, "type": "Foo"}
    refused = await kubectl("apply", "-f", "-", input=json.dumps(secret), check=False)
    assert refused.stderr.strip().endswith(
        'The Secret "s1" is invalid: type: Invalid value: "Foo": field is immutable'
    )
    await kubectl("apply", "-f", "-", input=BUNDLE.split("---\n")[3])
    changed = await kubectl(
        "patch", "svc", "web", "-p", '{"spec":{"clusterIP":"10.96.0.77"}}', check=False
    )
    assert changed.stderr.strip() == (
        'The Service "web" is invalid: spec.clusterIPs[0]: Invalid value: ["10.96.0.77"]: '
        "may not change once set"
    )


async def test_server_side_apply_and_explain(kubectl):
    applied = await kubectl("apply", "--server-side", "-f", "-", input=BUNDLE)
    assert "service/web serverside-applied" in applied.stdout.splitlines()
    changed = yaml.safe_load_all(BUNDLE.replace("mode: fast", "mode: slow"))
    again = await kubectl(
        "apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(list(changed))
    )
    assert "configmap/settings serverside-applied" in again.stdout.splitlines()
    mode = await kubectl("get", "cm", "settings", "-o", "jsonpath={.data.mode}")
    assert mode.stdout == "slow"
    explained = await kubectl("explain", "service.spec.ports")
    assert "FIELD: ports <[]ServicePort>" in explained.stdout
    assert "targetPort\t<" in explained.stdout
    assert "ConfigMap holds configuration data" in (await kubectl("explain", "cm")).stdout


async def test_python_client_reads_and_patches_the_kinds(cluster):
    """The official client: typed models of each kind, a strategic merge patch of a
    Service's ports merging by `port`, and a PVC bound at once."""
    from kubernetes import client, config

    with config.new_client_from_config(config_file=str(cluster.kubeconfig)) as api:
        core = client.CoreV1Api(api)
        discovery = client.DiscoveryV1Api(api)
        service = {
            "metadata": {"name": "web"},
            "spec": {"selector": {"app": "web"}, "ports": [
                {"name": "http", "port": 80, "targetPort": 8080},
                {"name": "metrics", "port": 9090},
            ]},
        }  # fmt: skip
        await asyncio.to_thread(core.create_namespaced_service, "default", service)
        patch = {"spec": {"ports": [{"port": 80, "targetPort": 8081}]}}
        patched = await asyncio.to_thread(core.patch_namespaced_service, "web", "default", patch)
        assert [(p.name, p.port, p.target_port) for p in patched.spec.ports] == [
            ("http", 80, 8081), ("metrics", 9090, 9090),
        ]  # fmt: skip
        assert patched.spec.cluster_ip == patched.spec.cluster_ips[0]

        config_map = {"metadata": {"name": "cfg"}, "data": {"a": "1"}}
        await asyncio.to_thread(core.create_namespaced_config_map, "default", config_map)
        maps = await asyncio.to_thread(core.list_namespaced_config_map, "default")
        assert [(m.metadata.name, m.data) for m in maps.items] == [("cfg", {"a": "1"})]

        claim = {
            "metadata": {"name": "data"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "2Gi"}},
            },
        }
        create_claim = core.create_namespaced_persistent_volume_claim
        await asyncio.to_thread(create_claim, "default", claim)
        bound = await asyncio.to_thread(
            core.read_namespaced_persistent_volume_claim, "data", "default"
        )
        assert bound.status.phase == "Bound" and bound.status.capacity == {"storage": "2Gi"}

        endpoint_slice = {
            "metadata": {"name": "web-1", "labels": {"kubernetes.io/service-name": "web"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["10.0.0.1"]}],
            "ports": [{"port": 8080}],
        }
        await asyncio.to_thread(
            discovery.create_namespaced_endpoint_slice, "default", endpoint_slice
        )
        slices = await asyncio.to_thread(
            discovery.list_namespaced_endpoint_slice,
            "default",
            label_selector="kubernetes.io/service-name=web",
        )
        [made] = slices.items
        assert made.metadata.generation == 1 and made.ports[0].protocol == "TCP"


async def test_a_new_namespace_gets_its_default_account_and_root_ca(cluster, fresh, kubectl):
    """With the controllers running, as kube-controller-manager's with `--root-ca-file`:
    what `kubectl create namespace` leads to, as upstream's service account controller
    and root CA publisher make it."""
    root_ca = cluster.ca_cert.read_text()
    async with running_controllers(fresh, root_ca=root_ca) as manager:
        changes = Changes(*manager.informers)
        await kubectl("create", "namespace", "team-a")
        await changes.until(
            lambda: (
                manager.service_accounts.get("default", "team-a")
                and manager.config_maps is not None
                and manager.config_maps.get("kube-root-ca.crt", "team-a")
            )
        )
        listed = await kubectl("get", "sa,cm", "-n", "team-a", "-o", "name")
        assert listed.stdout.split() == ["serviceaccount/default", "configmap/kube-root-ca.crt"]
        ca = await kubectl("get", "cm", "kube-root-ca.crt", "-n", "team-a",
                           "-o", "jsonpath={.data.ca\\.crt}")  # fmt: skip
        assert ca.stdout == root_ca
        # `kubectl create token` and pods naming no account rely on it, in every namespace.
        accounts = await kubectl("get", "sa", "-A", "-o", "name")
        assert accounts.stdout.split().count("serviceaccount/default") == 5
