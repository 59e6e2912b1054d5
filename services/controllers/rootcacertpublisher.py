"""Root CA certificate publisher: every active namespace has the ConfigMap
`kube-root-ca.crt` holding the cluster's CA certificate (upstream
`pkg/controller/certificates/rootcacertpublisher/publisher.go`).

Pods verify the API server with it (projected service account volumes mount it), and
charts read it. A namespace gets it when added or seen again; a deleted or edited copy is
put back, with upstream's description annotation.
"""

from __future__ import annotations

from drasim.common import codec, errors
from drasim.common.api import core_v1, core_v1_app, meta_v1
from drasim.common.client import ApiClient
from drasim.common.informer import Informer
from drasim.controllers.queue import WorkQueue
from drasim.controllers.serviceaccounts import is_active

__all__ = ["CONFIG_MAP", "DESCRIPTION", "DESCRIPTION_ANNOTATION", "RootCACertPublisher"]

CONFIG_MAP = "kube-root-ca.crt"
DESCRIPTION_ANNOTATION = "kubernetes.io/description"
DESCRIPTION = (
    "Contains a CA bundle that can be used to verify the kube-apiserver when using internal "
    "endpoints such as the internal service IP or kubernetes.default.svc. No other usage is "
    "guaranteed across distributions of Kubernetes clusters."
)


class RootCACertPublisher:
    """Keyed by namespace name: its `kube-root-ca.crt` made or mended to hold `root_ca`."""

    def __init__(
        self,
        api: ApiClient,
        *,
        root_ca: str,
        namespaces: Informer[core_v1.Namespace],
        config_maps: Informer[core_v1_app.ConfigMap],
    ) -> None:
        self.api = api
        self.data = {"ca.crt": root_ca}
        self.namespaces = namespaces
        self.config_maps = config_maps
        self.queue: WorkQueue[str] = WorkQueue("root_ca_cert_publisher", self.sync)
        namespaces.add_handlers(
            on_add=lambda namespace: self.queue.add(namespace.metadata.name),
            on_update=lambda _old, new: self._namespace_updated(new),
        )
        config_maps.add_handlers(
            on_update=lambda _old, new: self._config_map_changed(new),
            on_delete=self._config_map_changed,
        )

    def _namespace_updated(self, namespace: core_v1.Namespace) -> None:
        if is_active(namespace):
            self.queue.add(namespace.metadata.name)

    def _config_map_changed(self, config_map: core_v1_app.ConfigMap) -> None:
        if config_map.metadata.name == CONFIG_MAP:
            self.queue.add(config_map.metadata.namespace)

    async def sync(self, namespace_name: str) -> None:
        namespace = self.namespaces.get(namespace_name)
        if namespace is None or not is_active(namespace):
            return
        current = self.config_maps.get(CONFIG_MAP, namespace_name)
        if current is None:
            made = core_v1_app.ConfigMap(
                metadata=meta_v1.ObjectMeta(
                    name=CONFIG_MAP,
                    namespace=namespace_name,
                    annotations={DESCRIPTION_ANNOTATION: DESCRIPTION},
                ),
                data=dict(self.data),
            )
            try:
                await self.api.create(made)
            except (errors.AlreadyExists, errors.NotFound):
                return  # made meanwhile (its event brings it back), or the namespace is gone
            return
        if current.data == self.data and current.metadata.annotations.get(DESCRIPTION_ANNOTATION):
            return
        mended = codec.clone(current)
        mended.data = dict(self.data)
        mended.metadata.annotations = {
            **current.metadata.annotations,
            DESCRIPTION_ANNOTATION: DESCRIPTION,
        }
        try:
            await self.api.update(mended)
        except (errors.NotFound, errors.Conflict):
            return  # gone, or changed: its event brings it back
