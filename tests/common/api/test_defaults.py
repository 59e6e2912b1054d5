"""API defaulting of Pods, Deployments, ReplicaSets and ResourceClaims, as upstream's
`pkg/apis/{core,apps,resource}/v1/defaults.go` (and its tests, `defaults_test.go`)."""

from __future__ import annotations

from typing import Any

import pytest

from drasim.common import codec
from drasim.common.api import apps_v1, core_v1, defaults, resource_v1, resources
from drasim.common.api.defaults.core import image_pull_policy


def pod(spec: dict[str, Any], status: dict[str, Any] | None = None) -> core_v1.Pod:
    obj = codec.convert(
        {"metadata": {"name": "p"}, "spec": spec, "status": status or {}}, core_v1.Pod
    )
    defaults.apply(obj)
    return obj


def stored(obj: Any) -> dict[str, Any]:
    return codec.to_builtins(obj)


def test_a_minimal_pod_reads_back_as_upstream_stores_it() -> None:
    """The spec of `kubectl run p --image=registry.k8s.io/pause:3.10` on a 1.37 cluster
    (less what admission adds: priority, tolerations)."""
    got = pod({"containers": [{"name": "p", "image": "registry.k8s.io/pause:3.10"}]})
    assert stored(got)["spec"] == {
        "containers": [
            {
                "name": "p",
                "image": "registry.k8s.io/pause:3.10",
                "imagePullPolicy": "IfNotPresent",
                "resources": {},
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
            }
        ],
        "dnsPolicy": "ClusterFirst",
        "enableServiceLinks": True,
        "restartPolicy": "Always",
        "schedulerName": "default-scheduler",
        "securityContext": {},
        "terminationGracePeriodSeconds": 30,
    }


def test_defaulting_twice_changes_nothing() -> None:
    once = pod(
        {
            "containers": [{"name": "c", "image": "i", "resources": {"limits": {"cpu": "1"}}}],
            "volumes": [{"name": "v"}],
        }
    )
    twice = codec.convert(stored(once), core_v1.Pod)
    defaults.apply(twice)
    assert twice == once


def test_requests_default_to_limits_where_unset() -> None:
    got = pod(
        {
            "initContainers": [
                {"name": "i", "image": "x", "resources": {"limits": {"example.com/gpu": "1"}}}
            ],
            "containers": [
                {
                    "name": "c",
                    "image": "x",
                    "resources": {
                        "limits": {"cpu": "2", "memory": "1Gi"},
                        "requests": {"cpu": "500m"},
                    },
                }
            ],
        }
    )
    assert stored(got)["spec"]["containers"][0]["resources"]["requests"] == {
        "cpu": "500m",
        "memory": "1Gi",
    }
    assert stored(got)["spec"]["initContainers"][0]["resources"]["requests"] == {
        "example.com/gpu": "1"
    }


def test_explicit_values_are_kept() -> None:
    got = pod(
        {
            "containers": [
                {
                    "name": "c",
                    "image": "x:latest",
                    "imagePullPolicy": "Never",
                    "terminationMessagePath": "/tmp/t",
                    "terminationMessagePolicy": "FallbackToLogsOnError",
                }
            ],
            "restartPolicy": "Never",
            "dnsPolicy": "Default",
            "schedulerName": "other",
            "terminationGracePeriodSeconds": 0,
            "enableServiceLinks": False,
            "securityContext": {"runAsUser": 1000},
        }
    )
    spec = stored(got)["spec"]
    assert (spec["restartPolicy"], spec["dnsPolicy"], spec["schedulerName"]) == (
        "Never",
        "Default",
        "other",
    )
    assert spec["terminationGracePeriodSeconds"] == 0
    assert spec["enableServiceLinks"] is False
    assert spec["securityContext"] == {"runAsUser": 1000}
    container = spec["containers"][0]
    assert container["imagePullPolicy"] == "Never"
    assert container["terminationMessagePath"] == "/tmp/t"
    assert container["terminationMessagePolicy"] == "FallbackToLogsOnError"


@pytest.mark.parametrize(
    ("image", "policy"),
    [
        ("pause", "Always"),
        ("pause:latest", "Always"),
        ("registry.k8s.io/pause", "Always"),
        ("registry.k8s.io/pause:3.10", "IfNotPresent"),
        ("localhost:5000/app", "Always"),
        ("localhost:5000/app:v1", "IfNotPresent"),
        ("app@sha256:" + "a" * 64, "IfNotPresent"),
        ("app:latest@sha256:" + "a" * 64, "Always"),
        ("Upper/Case", "IfNotPresent"),  # does not parse: no tag found
    ],
)
def test_image_pull_policy_follows_the_tag(image: str, policy: str) -> None:
    assert image_pull_policy(image) == policy


def test_negative_grace_period_becomes_one_second_on_a_pod() -> None:
    got = pod({"containers": [{"name": "c", "image": "x"}], "terminationGracePeriodSeconds": -5})
    assert got.spec.termination_grace_period_seconds == 1


def test_quantities_finer_than_a_thousandth_round_up() -> None:
    got = pod(
        {
            "containers": [
                {"name": "c", "image": "x", "resources": {"limits": {"cpu": "100u", "memory": "1"}}}
            ],
            "overhead": {"cpu": "1n"},
        }
    )
    assert stored(got)["spec"]["containers"][0]["resources"]["limits"] == {
        "cpu": "1m",
        "memory": "1",
    }
    assert stored(got)["spec"]["overhead"] == {"cpu": "1m"}


def test_ports_probes_env_and_host_network() -> None:
    got = pod(
        {
            "hostNetwork": True,
            "containers": [
                {
                    "name": "c",
                    "image": "x",
                    "ports": [{"containerPort": 8080}],
                    "env": [
                        {"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}
                    ],
                    "livenessProbe": {"httpGet": {"port": 8080}},
                    "readinessProbe": {"grpc": {"port": 9000}, "periodSeconds": 5},
                    "lifecycle": {"preStop": {"httpGet": {"port": 80, "path": "/stop"}}},
                }
            ],
        }
    )
    container = stored(got)["spec"]["containers"][0]
    assert container["ports"] == [{"containerPort": 8080, "hostPort": 8080, "protocol": "TCP"}]
    assert container["env"][0]["valueFrom"] == {
        "fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}
    }
    assert container["livenessProbe"] == {
        "httpGet": {"port": 8080, "path": "/", "scheme": "HTTP"},
        "timeoutSeconds": 1,
        "periodSeconds": 10,
        "successThreshold": 1,
        "failureThreshold": 3,
    }
    assert container["readinessProbe"]["grpc"] == {"port": 9000, "service": ""}
    assert container["readinessProbe"]["periodSeconds"] == 5
    assert container["lifecycle"]["preStop"]["httpGet"] == {
        "port": 80,
        "path": "/stop",
        "scheme": "HTTP",
    }


def test_volumes() -> None:
    got = pod(
        {
            "containers": [{"name": "c", "image": "x"}],
            "volumes": [
                {"name": "scratch"},
                {"name": "cm", "configMap": {"name": "c"}},
                {"name": "s", "secret": {"secretName": "s", "defaultMode": 256}},
                {"name": "h", "hostPath": {"path": "/tmp"}},
                {
                    "name": "p",
                    "projected": {
                        "sources": [{"serviceAccountToken": {"path": "token"}}],
                    },
                },
            ],
        }
    )
    assert stored(got)["spec"]["volumes"] == [
        {"name": "scratch", "emptyDir": {}},
        {"name": "cm", "configMap": {"name": "c", "defaultMode": 420}},
        {"name": "s", "secret": {"secretName": "s", "defaultMode": 256}},
        {"name": "h", "hostPath": {"path": "/tmp", "type": ""}},
        {
            "name": "p",
            "projected": {
                "sources": [{"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}}],
                "defaultMode": 420,
            },
        },
    ]


def test_service_account_alias_follows_the_name() -> None:
    got = pod({"containers": [{"name": "c", "image": "x"}], "serviceAccount": "old"})
    assert (got.spec.service_account_name, got.spec.service_account) == ("old", "old")
    got = pod(
        {
            "containers": [{"name": "c", "image": "x"}],
            "serviceAccountName": "new",
            "serviceAccount": "old",
        }
    )
    assert (got.spec.service_account_name, got.spec.service_account) == ("new", "new")


def test_pod_ip_and_pod_ips_agree() -> None:
    got = pod({"containers": [{"name": "c", "image": "x"}]}, {"podIPs": [{"ip": "10.0.0.2"}]})
    assert got.status.pod_ip == "10.0.0.2"
    got = pod({"containers": [{"name": "c", "image": "x"}]}, {"podIP": "10.0.0.3"})
    assert got.status.pod_ips == [core_v1.PodIP(ip="10.0.0.3")]


TEMPLATE = {
    "metadata": {"labels": {"app": "d"}},
    "spec": {
        "containers": [
            {"name": "c", "image": "x:1", "resources": {"limits": {"example.com/gpu": "1"}}}
        ]
    },
}


def test_deployment_and_its_template() -> None:
    deployment = codec.convert(
        {
            "metadata": {"name": "d"},
            "spec": {"selector": {"matchLabels": {"app": "d"}}, "template": TEMPLATE},
        },
        apps_v1.Deployment,
    )
    defaults.apply(deployment)
    spec = stored(deployment)["spec"]
    assert spec["replicas"] == 1
    assert spec["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"},
    }
    assert (spec["revisionHistoryLimit"], spec["progressDeadlineSeconds"]) == (10, 600)
    template = spec["template"]["spec"]
    assert template["restartPolicy"] == "Always"
    assert template["containers"][0]["imagePullPolicy"] == "IfNotPresent"
    # A template is no Pod: its limits are not copied to requests, no service links.
    assert "requests" not in template["containers"][0]["resources"]
    assert "enableServiceLinks" not in template


def test_recreate_deployment_gets_no_rolling_update() -> None:
    deployment = codec.convert(
        {
            "metadata": {"name": "d"},
            "spec": {"strategy": {"type": "Recreate"}, "template": TEMPLATE},
        },
        apps_v1.Deployment,
    )
    defaults.apply(deployment)
    assert deployment.spec.strategy == apps_v1.DeploymentStrategy(type="Recreate")


def test_replica_set_and_its_template() -> None:
    replica_set = codec.convert(
        {"metadata": {"name": "rs"}, "spec": {"template": TEMPLATE}}, apps_v1.ReplicaSet
    )
    defaults.apply(replica_set)
    assert replica_set.spec.replicas == 1
    assert replica_set.spec.template.spec.scheduler_name == "default-scheduler"


@pytest.mark.parametrize(
    ("containers", "qos"),
    [
        ([{}], "BestEffort"),
        (
            [{"limits": {"example.com/gpu": "1"}, "requests": {"example.com/gpu": "1"}}],
            "BestEffort",
        ),
        (
            [{"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1", "memory": "1Gi"}}],
            "Guaranteed",
        ),
        ([{"limits": {"cpu": "1"}, "requests": {"cpu": "1"}}], "Burstable"),  # memory 0
        ([{"requests": {"cpu": "100m"}}], "Burstable"),
        (
            [
                {
                    "limits": {"cpu": "1", "memory": "1Gi"},
                    "requests": {"cpu": "1000m", "memory": "1Gi"},
                },
                {},
            ],
            "Burstable",
        ),
    ],
    ids=["none", "extended-only", "guaranteed", "cpu-only", "requests-only", "mixed"],
)
def test_qos_class(containers: list[dict[str, Any]], qos: str) -> None:
    obj = codec.convert(
        {
            "metadata": {"name": "p"},
            "spec": {
                "containers": [
                    {"name": f"c{i}", "image": "x", "resources": r}
                    for i, r in enumerate(containers)
                ]
            },
        },
        core_v1.Pod,
    )
    assert resources.pod_qos_class(obj) == qos


def claim_devices(devices: dict[str, Any]) -> dict[str, Any]:
    obj = codec.convert(
        {"metadata": {"name": "c"}, "spec": {"devices": devices}}, resource_v1.ResourceClaim
    )
    defaults.apply(obj)
    template = codec.convert(
        {"metadata": {"name": "t"}, "spec": {"spec": {"devices": devices}}},
        resource_v1.ResourceClaimTemplate,
    )
    defaults.apply(template)
    assert template.spec.spec == obj.spec, "a template's claim is defaulted as a claim"
    found: dict[str, Any] = stored(obj)["spec"]["devices"]
    return found


def test_a_device_request_asks_for_exactly_one_unless_it_says_otherwise() -> None:
    """`SetDefaults_ExactDeviceRequest` and `SetDefaults_DeviceSubRequest`, and the
    generated `Equal` for a toleration without an operator."""
    got = claim_devices(
        {
            "requests": [
                {"name": "one", "exactly": {"deviceClassName": "gpu"}},
                {"name": "all", "exactly": {"deviceClassName": "gpu", "allocationMode": "All"}},
                {"name": "two", "exactly": {"deviceClassName": "gpu", "count": 2}},
                {
                    "name": "either",
                    "firstAvailable": [
                        {
                            "name": "big",
                            "deviceClassName": "gpu",
                            "tolerations": [{"key": "k", "value": "v"}],
                        },
                        {"name": "small", "deviceClassName": "gpu", "allocationMode": "All"},
                    ],
                },
            ]
        }
    )
    one, every, two, either = got["requests"]
    assert one["exactly"] == {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}
    assert every["exactly"] == {"deviceClassName": "gpu", "allocationMode": "All"}
    assert two["exactly"] == {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 2}
    big, small = either["firstAvailable"]
    assert (big["allocationMode"], big["count"]) == ("ExactCount", 1)
    assert big["tolerations"] == [{"key": "k", "operator": "Equal", "value": "v"}]
    assert (small["allocationMode"], small.get("count")) == ("All", None)
