"""CustomResourceDefinitions and their custom resources through kubectl: a CRD applied is
established, its kind discovered and explained, its objects pruned, defaulted, validated
against the schema and listed with the CRD's printer columns."""

from __future__ import annotations

import asyncio
import json

import yaml

CRD = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gpubenchmarks.bench.example.com
spec:
  group: bench.example.com
  scope: Namespaced
  names:
    plural: gpubenchmarks
    singular: gpubenchmark
    kind: GPUBenchmark
    shortNames: [gb]
    categories: [all]
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    additionalPrinterColumns:
    - {name: Model, type: string, jsonPath: .spec.model}
    - {name: GPUs, type: integer, jsonPath: .spec.gpus}
    - {name: Phase, type: string, jsonPath: .status.phase}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            description: What to run.
            required: [model]
            properties:
              model: {type: string, description: The GPU model to benchmark., maxLength: 20}
              gpus: {type: integer, default: 1, minimum: 1, maximum: 8}
              mode: {type: string, enum: [fast, thorough], default: fast}
              labels:
                type: object
                additionalProperties: {type: string}
          status:
            type: object
            properties:
              phase: {type: string}
"""
BENCH = """\
apiVersion: bench.example.com/v1
kind: GPUBenchmark
metadata: {name: a100-run}
spec:
  model: A100
"""


async def _established(kubectl) -> None:
    await kubectl("apply", "-f", "-", input=CRD)
    await kubectl(
        "wait", "--for=condition=Established", "crd/gpubenchmarks.bench.example.com",
        "--timeout=10s",
    )  # fmt: skip


async def test_a_crd_is_established_and_its_objects_served(kubectl):
    await _established(kubectl)
    crd = json.loads((await kubectl("get", "crd", "gpubenchmarks.bench.example.com",
                                    "-o", "json")).stdout)  # fmt: skip
    conditions = {c["type"]: (c["status"], c["reason"]) for c in crd["status"]["conditions"]}
    assert conditions == {
        "NamesAccepted": ("True", "NoConflicts"),
        "Established": ("True", "InitialNamesAccepted"),
    }
    assert crd["status"]["acceptedNames"]["listKind"] == "GPUBenchmarkList"
    assert crd["status"]["storedVersions"] == ["v1"]
    crds = (await kubectl("get", "crds")).stdout.splitlines()
    assert crds[0].split() == ["NAME", "SCOPE", "VERSIONS", "CREATED", "AT"]
    assert crds[1].split()[:3] == ["gpubenchmarks.bench.example.com", "Namespaced", "v1(storage)"]

    created = await kubectl("apply", "-f", "-", input=BENCH)
    assert created.stdout.strip() == "gpubenchmark.bench.example.com/a100-run created"
    # Defaults from the schema are filled in.
    stored = json.loads((await kubectl("get", "gb", "a100-run", "-o", "json")).stdout)
    assert stored["spec"] == {"model": "A100", "gpus": 1, "mode": "fast"}
    assert stored["metadata"]["generation"] == 1

    listed = (await kubectl("get", "gpubenchmarks")).stdout.splitlines()
    assert listed[0].split() == ["NAME", "MODEL", "GPUS", "PHASE", "AGE"]
    assert listed[1].split()[:3] == ["a100-run", "A100", "1"]  # no phase yet: empty

    # The status subresource: a main update keeps the status, a status update sets it.
    await kubectl("patch", "gb", "a100-run", "--subresource=status", "--type=merge",
                  "-p", '{"status":{"phase":"Running"}}')  # fmt: skip
    await kubectl("patch", "gb", "a100-run", "--type=merge",
                  "-p", '{"spec":{"gpus":2},"status":{"phase":"Lost"}}')  # fmt: skip
    listed = (await kubectl("get", "gb", "a100-run", "--no-headers")).stdout.split()
    assert listed[:4] == ["a100-run", "A100", "2", "Running"]
    generation = await kubectl("get", "gb", "a100-run", "-o", "jsonpath={.metadata.generation}")
    assert generation.stdout == "2"

    api_resources = (await kubectl("api-resources", "--api-group=bench.example.com")).stdout
    assert api_resources.splitlines()[1].split() == [
        "gpubenchmarks", "gb", "bench.example.com/v1", "true", "GPUBenchmark",
    ]  # fmt: skip
    assert "a100-run" in (await kubectl("get", "all")).stdout

    explained = (await kubectl("explain", "gpubenchmark.spec.model")).stdout
    assert "The GPU model to benchmark." in explained


async def test_unknown_fields_are_pruned_or_refused(kubectl):
    await _established(kubectl)
    body = yaml.safe_load(BENCH)
    body["spec"]["color"] = "green"
    body["extra"] = 1
    refused = await kubectl("apply", "-f", "-", input=json.dumps(body), check=False)
    assert refused.returncode == 1
    assert 'unknown field "spec.color"' in refused.stderr
    pruned = await kubectl("apply", "--validate=false", "-f", "-", input=json.dumps(body))
    assert pruned.stdout.strip() == "gpubenchmark.bench.example.com/a100-run created"
    stored = json.loads((await kubectl("get", "gb", "a100-run", "-o", "json")).stdout)
    assert "color" not in stored["spec"] and "extra" not in stored


async def test_schema_constraints_are_enforced(kubectl):
    await _established(kubectl)
    body = yaml.safe_load(BENCH)
    body["spec"] = {"gpus": 9, "mode": "slow"}
    refused = await kubectl("apply", "-f", "-", input=json.dumps(body), check=False)
    assert refused.returncode == 1
    message = refused.stderr
    assert 'The GPUBenchmark "a100-run" is invalid' in message
    assert "spec.model: Required value" in message
    assert "spec.gpus: Invalid value: 9: spec.gpus in body should be less than or equal to 8" in (
        message
    )
    assert 'spec.mode: Unsupported value: "slow": supported values: "fast", "thorough"' in message
    body["spec"] = {"model": 5}
    refused = await kubectl("apply", "-f", "-", input=json.dumps(body), check=False)
    assert (
        'spec.model: Invalid value: "integer": spec.model in body must be of type '
        'string: "integer"' in refused.stderr
    )


async def test_server_side_apply_diff_and_delete(kubectl):
    await _established(kubectl)
    applied = await kubectl("apply", "--server-side", "-f", "-", input=BENCH)
    assert applied.stdout.strip() == "gpubenchmark.bench.example.com/a100-run serverside-applied"
    changed = BENCH.replace("A100", "H100")
    diff = await kubectl("diff", "-f", "-", input=changed, check=False)
    assert diff.returncode == 1 and "+  model: H100" in diff.stdout
    await kubectl("apply", "--server-side", "-f", "-", input=changed)
    model = await kubectl("get", "gb", "a100-run", "-o", "jsonpath={.spec.model}")
    assert model.stdout == "H100"

    await kubectl("delete", "crd", "gpubenchmarks.bench.example.com")
    # kubectl's discovery cache may still know the kind; the server no longer serves it.
    gone = await kubectl("get", "gb", check=False)
    assert gone.returncode == 1
    assert (
        'the server doesn\'t have a resource type "gb"' in gone.stderr
        or "the server could not find the requested resource" in gone.stderr
    )


async def test_python_client_custom_objects(cluster, kubectl):
    """The official client's CustomObjectsApi: create, list and patch the status."""
    from kubernetes import client, config

    await _established(kubectl)
    with config.new_client_from_config(config_file=str(cluster.kubeconfig)) as api:
        custom = client.CustomObjectsApi(api)
        args = ("bench.example.com", "v1", "default", "gpubenchmarks")
        body = yaml.safe_load(BENCH)
        made = await asyncio.to_thread(custom.create_namespaced_custom_object, *args, body)
        assert made["spec"]["gpus"] == 1
        status = {"status": {"phase": "Done"}}
        patched = await asyncio.to_thread(
            custom.patch_namespaced_custom_object_status, *args, "a100-run", status
        )
        assert patched["status"] == {"phase": "Done"}
        listed = await asyncio.to_thread(custom.list_namespaced_custom_object, *args)
        assert [o["metadata"]["name"] for o in listed["items"]] == ["a100-run"]


async def test_an_invalid_crd_is_refused_as_upstream(kubectl):
    wrong = CRD.replace("name: gpubenchmarks.bench.example.com", "name: wrong.bench.example.com")
    refused = await kubectl("apply", "-f", "-", input=wrong, check=False)
    assert refused.stderr.strip() == (
        'The CustomResourceDefinition "wrong.bench.example.com" is invalid: metadata.name: '
        'Invalid value: "wrong.bench.example.com": must be spec.names.plural+"."+spec.group'
    )
    dotless = CRD.replace("group: bench.example.com", "group: bench").replace(
        "gpubenchmarks.bench.example.com", "gpubenchmarks.bench"
    )
    refused = await kubectl("apply", "-f", "-", input=dotless, check=False)
    assert refused.stderr.strip() == (
        'The CustomResourceDefinition "gpubenchmarks.bench" is invalid: spec.group: Invalid '
        'value: "bench": should be a domain with at least one dot'
    )
