"""A kubelet's token (`system:node:<name>` in `system:nodes`) over HTTP: the Node
authorizer holds it to its own node's objects as on NATS (`drasim.apistore.node_authorizer`),
and NodeRestriction to its own writes."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from drasim.apistore.http import authn
from drasim.common.bus.client import Bus
from drasim.common.client import ApiClient
from tests.builders import make_node, make_pod
from tests.http.conftest import session, start_https_apistore

NODE_TOKEN = "node-a-token"


@pytest.fixture
async def node_url(fresh, certs, tmp_path, bus: Bus) -> AsyncIterator[str]:  # noqa: ANN001
    """An apistore whose token file has node a's kubelet; nodes a and b with a pod each."""
    token_file = tmp_path / "tokens.csv"
    token_file.write_text(f'{NODE_TOKEN},system:node:a,uid-a,"system:nodes"\n')
    server = await start_https_apistore(
        fresh, certs, http_tokens=authn.Tokens.from_file(token_file)
    )
    try:
        api = ApiClient(bus, actor="admin")
        for name in ("a", "b"):
            await api.create(make_node(name, cpu="4", pods="10"))
            pod = await api.create(make_pod(f"pod-{name}").container("c").obj())
            await api.bind(pod, name)
        yield f"https://127.0.0.1:{server.http.port}"
    finally:
        await server.stop()


async def test_a_node_token_reads_its_own_pods_only(node_url: str, certs) -> None:  # noqa: ANN001
    async with session(node_url, certs, NODE_TOKEN) as http:
        own = await http.get("/api/v1/namespaces/default/pods/pod-a")
        assert own.status == 200
        other = await http.get("/api/v1/namespaces/default/pods/pod-b")
        assert other.status == 403
        status = await other.json()
        assert status["reason"] == "Forbidden"
        assert status["message"] == (
            'pods "pod-b" is forbidden: User "system:node:a" cannot get resource "pods" in '
            'API group "" in the namespace "default": no relationship found between node \'a\' '
            "and this object"
        )
        everything = await http.get("/api/v1/pods")
        assert everything.status == 403
        assert (
            "can only list/watch pods with spec.nodeName field selector"
            in ((await everything.json())["message"])
        )
        mine = await http.get("/api/v1/pods", params={"fieldSelector": "spec.nodeName=a"})
        assert mine.status == 200
        assert [p["metadata"]["name"] for p in (await mine.json())["items"]] == ["pod-a"]
        # Writes are NodeRestriction's: another node's pod is not its to delete.
        deleted = await http.delete("/api/v1/namespaces/default/pods/pod-b")
        assert deleted.status == 403
        # Discovery is RBAC's, as for any authenticated user.
        assert (await http.get("/api/v1")).status == 200
