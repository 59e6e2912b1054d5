"""Pods and Deployments as the API server stores them, seen through `kubectl get -o yaml`:
the specs below are what a Kubernetes 1.37.2 cluster (`reference/up`) answered for the same
manifests (less `nodeName`: no scheduler runs here), and `kubectl apply` of the manifest
again finds nothing to change."""

from __future__ import annotations

import yaml

PODS = """\
apiVersion: v1
kind: Pod
metadata:
  name: plain
spec:
  containers:
  - name: app
    image: registry.k8s.io/pause:3.10
---
apiVersion: v1
kind: Pod
metadata:
  name: gpu
spec:
  containers:
  - name: app
    image: busybox
    ports: [{containerPort: 8080}]
    env: [{name: NODE, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}]
    livenessProbe: {httpGet: {port: 8080}}
    resources:
      limits:
        example.com/gpu: 1
        cpu: 100u
  volumes:
  - name: scratch
  - name: cm
    configMap: {name: c}
"""
TOLERATIONS = [
    {
        "effect": "NoExecute",
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "tolerationSeconds": 300,
    },
    {
        "effect": "NoExecute",
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "tolerationSeconds": 300,
    },
]
POD_DEFAULTS = {
    "dnsPolicy": "ClusterFirst",
    "enableServiceLinks": True,
    "preemptionPolicy": "PreemptLowerPriority",
    "priority": 0,
    "restartPolicy": "Always",
    "schedulerName": "default-scheduler",
    "securityContext": {},
    "terminationGracePeriodSeconds": 30,
    "tolerations": TOLERATIONS,
}
CONTAINER_DEFAULTS = {
    "terminationMessagePath": "/dev/termination-log",
    "terminationMessagePolicy": "File",
}
PLAIN_SPEC = {
    "containers": [
        {
            "image": "registry.k8s.io/pause:3.10",
            "imagePullPolicy": "IfNotPresent",
            "name": "app",
            "resources": {},
            **CONTAINER_DEFAULTS,
        }
    ],
    **POD_DEFAULTS,
}
GPU_SPEC = {
    "containers": [
        {
            "env": [
                {
                    "name": "NODE",
                    "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}},
                }
            ],
            "image": "busybox",
            "imagePullPolicy": "Always",
            "livenessProbe": {
                "failureThreshold": 3,
                "httpGet": {"path": "/", "port": 8080, "scheme": "HTTP"},
                "periodSeconds": 10,
                "successThreshold": 1,
                "timeoutSeconds": 1,
            },
            "name": "app",
            "ports": [{"containerPort": 8080, "protocol": "TCP"}],
            "resources": {
                "limits": {"cpu": "1m", "example.com/gpu": "1"},
                "requests": {"cpu": "1m", "example.com/gpu": "1"},
            },
            **CONTAINER_DEFAULTS,
        }
    ],
    **POD_DEFAULTS,
    "volumes": [
        {"emptyDir": {}, "name": "scratch"},
        {"configMap": {"defaultMode": 420, "name": "c"}, "name": "cm"},
    ],
}
DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: app
        image: registry.k8s.io/pause:3.10
        resources:
          limits: {example.com/gpu: "1"}
"""
DEPLOYMENT_SPEC = {
    "progressDeadlineSeconds": 600,
    "replicas": 1,
    "revisionHistoryLimit": 10,
    "selector": {"matchLabels": {"app": "web"}},
    "strategy": {
        "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"},
        "type": "RollingUpdate",
    },
    "template": {
        "metadata": {"labels": {"app": "web"}},
        "spec": {
            "containers": [
                {
                    "image": "registry.k8s.io/pause:3.10",
                    "imagePullPolicy": "IfNotPresent",
                    "name": "app",
                    "resources": {"limits": {"example.com/gpu": "1"}},
                    **CONTAINER_DEFAULTS,
                }
            ],
            "dnsPolicy": "ClusterFirst",
            "restartPolicy": "Always",
            "schedulerName": "default-scheduler",
            "securityContext": {},
            "terminationGracePeriodSeconds": 30,
        },
    },
}


async def get_yaml(kubectl, *what: str) -> dict:
    return yaml.safe_load((await kubectl("get", *what, "-o", "yaml")).stdout)


async def test_pods_read_back_with_upstreams_defaults(kubectl) -> None:
    created = await kubectl("apply", "-f", "-", input=PODS)
    assert created.stdout.splitlines() == ["pod/plain created", "pod/gpu created"]

    plain = await get_yaml(kubectl, "pod", "plain")
    assert plain["spec"] == PLAIN_SPEC
    assert plain["status"] == {"phase": "Pending", "qosClass": "BestEffort"}
    gpu = await get_yaml(kubectl, "pod", "gpu")
    assert gpu["spec"] == GPU_SPEC
    assert gpu["status"]["qosClass"] == "Burstable"

    # kubectl sends gpu's `100u` and `1` again, which the server stores as it did: a
    # 1.37 cluster answers the same "configured", and kubectl diff finds nothing.
    again = await kubectl("apply", "-f", "-", input=PODS)
    assert again.stdout.splitlines() == ["pod/plain unchanged", "pod/gpu configured"]
    assert (await get_yaml(kubectl, "pod", "gpu"))["metadata"]["resourceVersion"] == (
        gpu["metadata"]["resourceVersion"]
    )
    diff = await kubectl("diff", "-f", "-", input=PODS, check=False)
    assert (diff.returncode, diff.stdout) == (0, "")


async def test_deployment_template_reads_back_with_upstreams_defaults(kubectl) -> None:
    await kubectl("apply", "-f", "-", input=DEPLOYMENT)
    deployment = await get_yaml(kubectl, "deployment", "web")
    assert deployment["spec"] == DEPLOYMENT_SPEC
    again = await kubectl("apply", "-f", "-", input=DEPLOYMENT)
    assert again.stdout.strip() == "deployment.apps/web unchanged"
