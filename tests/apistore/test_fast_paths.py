"""The write path's shortcuts give the answers the long way gives (no servers needed).

Memoised quantity parsing and formatting, memoised validation, the names-only view of a
create's body, owner uids recorded at write time, and the pod spec update check without a
deep copy.
"""

from __future__ import annotations

import copy

import msgspec
import pytest

from drasim.apistore import objectmeta
from drasim.apistore.mutations import Batch
from drasim.apistore.prepare import prepare
from drasim.apistore.request import Context
from drasim.common import codec, errors
from drasim.common.api import core_v1, resource_v1, validation
from drasim.common.api.validation import names
from drasim.common.api.validation import pod as pod_validation
from drasim.common.bus import messages
from drasim.common.quantity import Quantity, parse_quantity
from tests.builders import make_claim, make_pod

NAMESPACE_ROW = codec.encode(
    {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "default", "uid": "ns-uid", "resourceVersion": "1"},
    }
)


def _create(obj: object, namespace: str = "") -> messages.Create:
    return messages.Create(
        resource=_plural(obj), namespace=namespace, object=msgspec.Raw(codec.encode(obj))
    )


def _plural(obj: object) -> str:
    return "pods" if isinstance(obj, core_v1.Pod) else "resourceclaims"


def _batch(**rows: bytes) -> Batch:
    loaded = {("namespaces", "", "default"): NAMESPACE_ROW}
    loaded.update({("pods", "default", name): data for name, data in rows.items()})
    return Batch(loaded, first_seq=10)


# -- codec -------------------------------------------------------------------------------


class _Resources(msgspec.Struct):
    limits: dict[str, Quantity] = {}


@pytest.mark.parametrize("value", ["100m", "1", 1, 1.5, "1.5", "64Mi", "1e3", "0.5", 0])
def test_memoised_quantities_read_and_print_as_parsed_ones(value):
    for _ in range(3):  # the first decode fills the cache, the others read it
        decoded = codec.decode(msgspec.json.encode({"limits": {"x": value}}), _Resources)
        expected = parse_quantity(value)
        got = decoded.limits["x"]
        assert got == expected and got.format == expected.format
        assert codec.encode(decoded) == msgspec.json.encode({"limits": {"x": str(expected)}})


def test_memoised_quantities_keep_json_types_apart():
    # 1 == 1.0 == True as dict keys; a cached 1 must not make `true` a quantity.
    assert str(codec.decode(b'{"limits": {"x": 1}}', _Resources).limits["x"]) == "1"
    assert str(codec.decode(b'{"limits": {"x": 1.0}}', _Resources).limits["x"]) == "1"
    with pytest.raises(msgspec.ValidationError, match=r"limits\[\.\.\.\]"):
        codec.decode(b'{"limits": {"x": true}}', _Resources)


def test_invalid_quantity_still_names_its_field():
    with pytest.raises(msgspec.ValidationError, match=r"limits\[\.\.\.\]"):
        codec.decode(b'{"limits": {"x": "12 apples"}}', _Resources)
    with pytest.raises(msgspec.ValidationError, match=r"limits\[\.\.\.\]"):
        codec.decode(b'{"limits": {"x": [1]}}', _Resources)


def test_quantity_strings_are_those_of_the_object_encoded():
    # Distinct objects alive at once never share a cached string.
    quantities = [Quantity(n) for n in range(50)] + [parse_quantity("1Ki"), parse_quantity("1k")]
    assert codec.encode(quantities) == msgspec.json.encode([str(q) for q in quantities])


# -- validation ------------------------------------------------------------------------


def test_memoised_name_checks_hand_out_fresh_lists():
    first = names.is_dns1123_label("Not_A_Label")
    assert first
    first.clear()
    assert names.is_dns1123_label("Not_A_Label")
    assert names.is_dns1123_label("fine") == []


def test_memoised_pod_spec_validation_answers_per_path_and_content():
    bad = make_pod("p").limits({"example.com/gpu": "500m"}).obj()
    good = make_pod("p").limits({"example.com/gpu": "1"}).obj()
    for _ in range(2):
        errs = validation.validate(bad)
        assert [e.field for e in errs] == ["spec.containers[0].resources.limits[example.com/gpu]"]
        assert validation.validate(good) == []


def _deep_copy_rule(new: core_v1.PodSpec, old: core_v1.PodSpec) -> bool:
    """The upstream formulation: copy, overwrite the mutable fields, compare."""
    comparable = copy.deepcopy(new)
    for mine, theirs in zip(comparable.all_containers(), old.all_containers(), strict=False):
        mine.image = theirs.image
    comparable.active_deadline_seconds = old.active_deadline_seconds
    comparable.tolerations = old.tolerations
    comparable.scheduling_gates = old.scheduling_gates
    return comparable == old


def _spec(**changes: object) -> core_v1.PodSpec:
    pod = make_pod("p").container("a").init_container("init").obj()
    gated = {"scheduling_gates": [core_v1.PodSchedulingGate(name="example.com/gate")]}
    return msgspec.structs.replace(pod.spec, **{**gated, **changes})


@pytest.mark.parametrize(
    "change",
    [
        lambda s: None,
        lambda s: setattr(s.containers[0], "image", "other:1"),
        lambda s: setattr(s.init_containers[0], "image", "other:1"),
        lambda s: setattr(s, "active_deadline_seconds", 30),
        lambda s: setattr(s, "tolerations", [core_v1.Toleration(key="k", operator="Exists")]),
        lambda s: setattr(s.containers[0], "name", "renamed"),
        lambda s: s.containers.append(core_v1.Container(name="more", image="x")),
        lambda s: s.init_containers.clear(),
        lambda s: setattr(s, "node_name", "n1"),
        lambda s: setattr(s.containers[0], "args", ["--flag"]),
        lambda s: setattr(s, "scheduling_gates", []),
        lambda s: setattr(s, "node_selector", {"zone": "a"}),
    ],
)
def test_pod_spec_update_rule_matches_the_deep_copy_formulation(change):
    old = _spec()
    new = codec.decode(codec.encode(old), core_v1.PodSpec)
    change(new)
    before = codec.encode(new)
    assert pod_validation._same_but_mutable_fields(new, old) == _deep_copy_rule(new, old)
    assert codec.encode(new) == before  # the new spec is left as it was


# -- mutations ---------------------------------------------------------------------------


def test_prepare_keys_reads_names_from_the_small_view():
    pod = make_pod("p").obj()
    assert prepare(_create(pod)).keys == [
        ("pods", "default", "p"),
        ("namespaces", "", "default"),
    ]
    pod.metadata.name, pod.metadata.generate_name = "", "web-"
    req = _create(pod)
    prepared = prepare(req)
    *candidates, namespace = prepared.keys
    assert namespace == ("namespaces", "", "default")
    assert len(candidates) == objectmeta.GENERATE_NAME_TRIES
    assert [c[2] for c in candidates] == prepared.generated_names
    generated = candidates[0][2]
    assert all(c[2].startswith("web-") and len(c[2]) == len("web-") + 5 for c in candidates)
    created = codec.decode(_batch().apply(req, Context(), prepared), core_v1.Pod)
    assert created.metadata.name == generated  # apply uses the names the keys were read for


def test_prepare_keys_reads_nulls_as_absent():
    body = b'{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":null},"spec":{}}'
    req = messages.Create(resource="pods", object=msgspec.Raw(body))
    assert prepare(req).keys[0] == ("pods", "default", "p")


def test_prepare_keys_rejects_what_the_full_decode_rejects():
    malformed = messages.Create(resource="pods", object=msgspec.Raw(b"{not json"))
    with pytest.raises(errors.BadRequest):
        prepare(malformed)
    wrong_type = messages.Create(
        resource="pods", object=msgspec.Raw(b'{"metadata": {"name": 5}, "spec": {}}')
    )
    with pytest.raises(errors.Invalid) as err:
        prepare(wrong_type)
    assert [c.field for c in err.value.causes] == ["metadata.name"]
    mismatch = make_pod("p", namespace="a").obj()
    with pytest.raises(errors.BadRequest, match="does not match the namespace"):
        prepare(_create(mismatch, namespace="b"))


def test_an_invalid_body_the_view_accepts_fails_in_apply():
    body = b'{"metadata": {"name": "p"}, "spec": {"containers": "not-a-list"}}'
    req = messages.Create(resource="pods", object=msgspec.Raw(body))
    assert prepare(req).keys[0] == ("pods", "default", "p")
    batch = _batch()
    with pytest.raises(errors.Invalid) as err:
        batch.apply(req, Context())
    assert [c.field for c in err.value.causes] == ["spec.containers"]
    assert batch.events == []


def test_projection_carries_the_owner_uids_of_the_last_write():
    owner = make_pod("owner").obj()
    owner.metadata.uid = "owner-uid"
    # The owner exists: a claim none of whose owners does would be collected at once.
    rows = {
        ("namespaces", "", "default"): NAMESPACE_ROW,
        ("pods", "default", "owner"): codec.encode(owner),
    }
    batch = Batch(rows, first_seq=10)
    batch.apply(_create(make_claim("owned", owner=owner)), Context())
    batch.apply(_create(make_claim("free")), Context())
    claim = codec.decode(batch.events[0].object, resource_v1.ResourceClaim)
    claim.metadata.owner_references = []
    batch.apply(
        messages.Update(
            resource="resourceclaims",
            namespace="default",
            name="owned",
            object=msgspec.Raw(codec.encode(claim)),
        ),
        Context(),
    )
    upserts, deletes = batch.projection()
    assert deletes == []
    assert {r.name: (list(r.owner_uids), r.resource_version) for r in upserts} == {
        "owned": ([], 12),
        "free": ([], 11),
    }
    first = Batch(rows, first_seq=1)
    first.apply(_create(make_claim("owned", owner=owner)), Context())
    assert [list(r.owner_uids) for r in first.projection()[0]] == [["owner-uid"]]


def test_a_pod_stored_before_defaulting_can_still_be_updated():
    """A pod a drasim without API defaulting stored: an update with the manifest's fields
    (defaulted on decode) changes only its labels; the event stores the defaulted pod."""
    old = make_pod("p").limits({"example.com/gpu": "1"}).obj()
    old.metadata.uid, old.metadata.resource_version = "uid-p", "5"
    batch = _batch(p=codec.encode(old))
    new = codec.decode(codec.encode(old), core_v1.Pod)
    new.metadata.labels = {"app": "x"}
    batch.apply(
        messages.Update(
            resource="pods", namespace="default", name="p", object=msgspec.Raw(codec.encode(new))
        ),
        Context(),
    )
    [event] = batch.events
    stored = codec.decode(event.object, core_v1.Pod)
    assert stored.metadata.labels == {"app": "x"}
    assert stored.spec.restart_policy == "Always"
    assert stored.spec.containers[0].resources.requests == {"example.com/gpu": Quantity(1)}


def test_create_then_update_in_one_batch_writes_two_events():
    batch = _batch()
    created = codec.decode(batch.apply(_create(make_pod("p").obj()), Context()), core_v1.Pod)
    created.metadata.labels = {"phase": "updated"}
    batch.apply(
        messages.Update(
            resource="pods",
            namespace="default",
            name="p",
            object=msgspec.Raw(codec.encode(created)),
        ),
        Context(),
    )
    assert [(e.seq, e.type) for e in batch.events] == [(10, "ADDED"), (11, "MODIFIED")]
    [row], _ = batch.projection()
    assert row.resource_version == 11 and row.object == batch.events[1].object
