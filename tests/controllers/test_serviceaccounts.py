"""The ServiceAccounts controller and the root CA publisher against a real apistore: each
namespace gets its `default` ServiceAccount and its `kube-root-ca.crt` ConfigMap, made
again when deleted, mended when edited."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from drasim.common import codec, errors
from drasim.common.api import core_v1, core_v1_app, meta_v1
from drasim.common.client import ApiClient
from drasim.controllers import ControllerManager
from drasim.controllers.rootcacertpublisher import CONFIG_MAP, DESCRIPTION
from tests.controllers.conftest import Changes, running_controllers

ROOT_CA = "-----BEGIN CERTIFICATE-----\nMIIBdrasim\n-----END CERTIFICATE-----\n"


@pytest.fixture
async def publishing(server: Any, fresh: Any) -> AsyncIterator[ControllerManager]:
    async with running_controllers(fresh, root_ca=ROOT_CA) as manager:
        yield manager


def account(manager: ControllerManager, namespace: str) -> core_v1_app.ServiceAccount | None:
    return manager.service_accounts.get("default", namespace)


def root_ca(manager: ControllerManager, namespace: str) -> core_v1_app.ConfigMap | None:
    return manager.config_maps.get(CONFIG_MAP, namespace) if manager.config_maps else None


async def test_every_namespace_gets_its_default_account_and_root_ca(
    api: ApiClient, publishing: ControllerManager
) -> None:
    changes = Changes(*publishing.informers)
    await api.create(core_v1.Namespace(metadata=meta_v1.ObjectMeta(name="team-a")))
    namespaces = ("default", "kube-system", "kube-public", "kube-node-lease", "team-a")
    await changes.until(
        lambda: all(account(publishing, ns) and root_ca(publishing, ns) for ns in namespaces)
    )
    made = root_ca(publishing, "team-a")
    assert made is not None
    assert made.data == {"ca.crt": ROOT_CA}
    assert made.metadata.annotations == {"kubernetes.io/description": DESCRIPTION}
    sa = account(publishing, "team-a")
    assert sa is not None and (sa.secrets, sa.automount_service_account_token) == ([], None)


async def test_deleted_or_edited_they_come_back(
    api: ApiClient, publishing: ControllerManager
) -> None:
    changes = Changes(*publishing.informers)
    await api.create(core_v1.Namespace(metadata=meta_v1.ObjectMeta(name="team-a")))
    first = await changes.until(lambda: account(publishing, "team-a"))
    await api.delete(core_v1_app.ServiceAccount, "default", namespace="team-a")
    again = await changes.until(
        lambda: (
            (sa := account(publishing, "team-a")) is not None
            and sa.metadata.uid != first.metadata.uid
        )
    )
    assert again

    config_map = await changes.until(lambda: root_ca(publishing, "team-a"))
    edited = codec.clone(config_map)
    edited.data = {"ca.crt": "not a CA", "extra": "kept?"}
    edited.metadata.annotations = {"team": "a"}
    written = await api.update(edited)
    mended = await changes.until(
        lambda: (
            (cm := root_ca(publishing, "team-a")) is not None
            and int(cm.metadata.resource_version) > int(written.metadata.resource_version)
            and cm
        )
    )
    assert mended.data == {"ca.crt": ROOT_CA}
    # As upstream's: the data replaced whole, the description added to what was there.
    assert mended.metadata.annotations == {"team": "a", "kubernetes.io/description": DESCRIPTION}
    await api.delete(core_v1_app.ConfigMap, CONFIG_MAP, namespace="team-a")
    await changes.until(
        lambda: (
            (cm := root_ca(publishing, "team-a")) is not None
            and cm.metadata.uid != mended.metadata.uid
        )
    )


async def test_without_a_root_ca_only_the_account_is_made(
    api: ApiClient, manager: ControllerManager, changes: Changes
) -> None:
    """As kube-controller-manager without a root CA: no publisher runs."""
    assert manager.config_maps is None and manager.root_ca_cert_publisher is None
    await api.create(core_v1.Namespace(metadata=meta_v1.ObjectMeta(name="team-b")))
    await changes.until(lambda: account(manager, "team-b"))
    with pytest.raises(errors.NotFound):
        await api.get(core_v1_app.ConfigMap, CONFIG_MAP, namespace="team-b")
