"""The apistore's Kubernetes-compatible HTTP API (kubectl, the official clients).

app = build_app(core, bus, token=token)
api = HttpApi(app)
await api.start("127.0.0.1", 6443)
"""

from drasim.apistore.http.app import HttpApi, build_app

__all__ = ["HttpApi", "build_app"]
