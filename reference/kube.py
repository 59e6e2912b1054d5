"""A small synchronous Kubernetes REST client, read from a kubeconfig.

The differential runner must see both API servers exactly as a client does: the stored
object a create returns, and a refusal's HTTP code and `Status` body. A typed client would
turn those into exceptions and models, so this speaks plain JSON over HTTPS instead, with
the bearer token or client certificate of the kubeconfig.
"""

from __future__ import annotations

import base64
import http.client
import json
import ssl
import tempfile
import threading
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

__all__ = ["RESOURCES", "KubeClient", "Resource", "Response", "resource_for"]


@dataclass(frozen=True)
class Resource:
    """Where a kind lives in the REST API."""

    api_version: str
    kind: str
    plural: str
    namespaced: bool

    def path(self, namespace: str | None = None, name: str | None = None) -> str:
        base = "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        return f"{base}/{name}" if name else base


RESOURCES = {
    (r.api_version, r.kind): r
    for r in (
        Resource("v1", "Namespace", "namespaces", False),
        Resource("v1", "Node", "nodes", False),
        Resource("v1", "Pod", "pods", True),
        Resource("v1", "Event", "events", True),
        Resource("v1", "ResourceQuota", "resourcequotas", True),
        Resource("v1", "ServiceAccount", "serviceaccounts", True),
        Resource("apps/v1", "Deployment", "deployments", True),
        Resource("apps/v1", "ReplicaSet", "replicasets", True),
        Resource("policy/v1", "PodDisruptionBudget", "poddisruptionbudgets", True),
        Resource("scheduling.k8s.io/v1", "PriorityClass", "priorityclasses", False),
        Resource("coordination.k8s.io/v1", "Lease", "leases", True),
        # resource.k8s.io in v1 and the betas (served as the cluster file's runtimeConfig says).
        *(
            Resource(f"resource.k8s.io/{version}", kind, plural, namespaced)
            for version in ("v1", "v1beta2", "v1beta1")
            for kind, plural, namespaced in (
                ("DeviceClass", "deviceclasses", False),
                ("ResourceSlice", "resourceslices", False),
                ("ResourceClaim", "resourceclaims", True),
                ("ResourceClaimTemplate", "resourceclaimtemplates", True),
            )
        ),
    )
}


def resource_for(api_version: str, kind: str) -> Resource:
    """The REST resource of a kind the scenarios use; KeyError names what is missing."""
    try:
        return RESOURCES[(api_version, kind)]
    except KeyError:
        raise KeyError(f"reference.kube knows no resource for {api_version} {kind}") from None


@dataclass
class Response:
    """An answer: the HTTP status and the decoded JSON body (None when there was none)."""

    status: int
    body: Any

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


class KubeClient:
    """One API server, as a kubeconfig's current context reaches it."""

    def __init__(
        self,
        server: str,
        *,
        ssl_context: ssl.SSLContext,
        token: str | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.server = server.rstrip("/")
        self._ssl = ssl_context
        self._token = token
        self.timeout = timeout
        url = urllib.parse.urlsplit(self.server)
        self._host, self._port = url.hostname or "127.0.0.1", url.port or 443
        self._local = threading.local()

    @classmethod
    def from_kubeconfig(cls, path: Path | str) -> KubeClient:
        """The current context's cluster and user (token or client certificate)."""
        config = yaml.safe_load(Path(path).read_text())
        context_name = config["current-context"]
        context = next(c["context"] for c in config["contexts"] if c["name"] == context_name)
        cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == context["cluster"])
        user = next(u["user"] for u in config["users"] if u["name"] == context["user"])
        ctx = ssl.create_default_context()
        if "certificate-authority-data" in cluster:
            ctx.load_verify_locations(
                cadata=base64.b64decode(cluster["certificate-authority-data"]).decode()
            )
        elif "certificate-authority" in cluster:
            ctx.load_verify_locations(cafile=cluster["certificate-authority"])
        if "client-certificate" in user:
            ctx.load_cert_chain(user["client-certificate"], user["client-key"])
        elif "client-certificate-data" in user:
            with tempfile.NamedTemporaryFile("wb", suffix=".pem") as pem:
                pem.write(base64.b64decode(user["client-certificate-data"]))
                pem.write(b"\n")
                pem.write(base64.b64decode(user["client-key-data"]))
                pem.flush()
                ctx.load_cert_chain(pem.name)
        return cls(cluster["server"], ssl_context=ctx, token=user.get("token"))

    # -- raw requests --------------------------------------------------------------------
    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        query: dict[str, str] | None = None,
        content_type: str = "application/json",
    ) -> Response:
        target = path + ("?" + urllib.parse.urlencode(query) if query else "")
        data = None if body is None else json.dumps(body).encode()
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = content_type
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        for attempt in range(2):
            conn = self._connection()
            try:
                conn.request(method, target, body=data, headers=headers)
                answer = conn.getresponse()
                return Response(answer.status, _decode(answer.read()))
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                # The server closed a kept-alive connection before it read the request:
                # the request never arrived, so sending it again on a new one is safe.
                self._close()
                if attempt:
                    raise
            except BaseException:
                self._close()
                raise
        raise AssertionError("unreachable")

    def _connection(self) -> http.client.HTTPSConnection:
        """This thread's connection, kept alive between requests (a TLS handshake per
        request would cost more than most requests): one per thread, as http.client's
        connections are not thread-safe."""
        conn: http.client.HTTPSConnection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = http.client.HTTPSConnection(
                self._host, self._port, context=self._ssl, timeout=self.timeout
            )
            self._local.conn = conn
        return conn

    def _close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
        self._local.conn = None

    # -- by object -------------------------------------------------------------------------
    def create(self, obj: dict[str, Any], *, namespace: str | None = None) -> Response:
        resource = resource_for(obj["apiVersion"], obj["kind"])
        ns = obj.get("metadata", {}).get("namespace") or namespace
        return self.request("POST", resource.path(ns if resource.namespaced else None), obj)

    def get(
        self, api_version: str, kind: str, name: str, *, namespace: str | None = None
    ) -> Response:
        return self.request("GET", resource_for(api_version, kind).path(namespace, name))

    def list(
        self,
        api_version: str,
        kind: str,
        *,
        namespace: str | None = None,
        query: dict[str, str] | None = None,
    ) -> list[dict[str, Any]]:
        """Every object of a kind (in `namespace`, or everywhere), all pages."""
        resource = resource_for(api_version, kind)
        items: list[dict[str, Any]] = []
        params = dict(query or {}, limit="500")
        while True:
            answer = self.request("GET", resource.path(namespace), query=params)
            if not answer.ok:
                raise RuntimeError(f"list {kind}: {answer.status} {answer.body}")
            items += answer.body.get("items") or []
            token = (answer.body.get("metadata") or {}).get("continue")
            if not token:
                return items
            params["continue"] = token

    def patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        patch: dict[str, Any],
        *,
        namespace: str | None = None,
        subresource: str = "",
    ) -> Response:
        path = resource_for(api_version, kind).path(namespace, name)
        if subresource:
            path += "/" + subresource
        return self.request("PATCH", path, patch, content_type="application/merge-patch+json")

    def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        *,
        namespace: str | None = None,
        grace_period_seconds: int | None = None,
    ) -> Response:
        body = None
        if grace_period_seconds is not None:
            body = {
                "apiVersion": "v1",
                "kind": "DeleteOptions",
                "gracePeriodSeconds": grace_period_seconds,
            }
        return self.request("DELETE", resource_for(api_version, kind).path(namespace, name), body)

    def ready(self) -> bool:
        """Whether the server answers `/readyz` with 200 (drasim: `/version`)."""
        try:
            for path in ("/readyz", "/version"):
                answer = self.request("GET", path)
                if answer.status != 404:
                    return answer.ok
        except OSError:
            return False
        return False


def _decode(data: bytes) -> Any:
    if not data:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return {"raw": data.decode(errors="replace")}
