"""ServiceAccounts controller: every active namespace has the service account `default`
(upstream `pkg/controller/serviceaccount/serviceaccounts_controller.go`).

Pods that name no service account run as `default`, and charts and `kubectl create token`
expect it, so a namespace gets it when it is added (or seen again), and gets it back when
someone deletes it. A namespace being deleted gets nothing.
"""

from __future__ import annotations

from drasim.common import errors
from drasim.common.api import core_v1, core_v1_app, meta_v1
from drasim.common.client import ApiClient
from drasim.common.informer import Informer
from drasim.controllers.queue import WorkQueue

__all__ = ["DEFAULT", "ServiceAccountsController"]

# Upstream's `DefaultServiceAccountsControllerOptions`: the accounts every namespace has.
DEFAULT = "default"


def is_active(namespace: core_v1.Namespace) -> bool:
    """Not being deleted (upstream: phase Active; drasim stores no phase before deletion)."""
    return namespace.metadata.deletion_timestamp is None and namespace.status.phase in (
        "",
        "Active",
    )


class ServiceAccountsController:
    """Keyed by namespace name: the namespace's `default` account, created when missing."""

    def __init__(
        self,
        api: ApiClient,
        *,
        namespaces: Informer[core_v1.Namespace],
        service_accounts: Informer[core_v1_app.ServiceAccount],
    ) -> None:
        self.api = api
        self.namespaces = namespaces
        self.service_accounts = service_accounts
        self.queue: WorkQueue[str] = WorkQueue("serviceaccount", self.sync)
        namespaces.add_handlers(
            on_add=self._enqueue_namespace,
            on_update=lambda _old, new: self._enqueue_namespace(new),
        )
        service_accounts.add_handlers(on_delete=self._account_deleted)

    def _enqueue_namespace(self, namespace: core_v1.Namespace) -> None:
        self.queue.add(namespace.metadata.name)

    def _account_deleted(self, account: core_v1_app.ServiceAccount) -> None:
        if account.metadata.name == DEFAULT:
            self.queue.add(account.metadata.namespace)

    async def sync(self, namespace_name: str) -> None:
        namespace = self.namespaces.get(namespace_name)
        if namespace is None or not is_active(namespace):
            return
        if self.service_accounts.get(DEFAULT, namespace_name) is not None:
            return
        account = core_v1_app.ServiceAccount(
            metadata=meta_v1.ObjectMeta(name=DEFAULT, namespace=namespace_name)
        )
        try:
            await self.api.create(account)
        except (errors.AlreadyExists, errors.NotFound):
            return  # made meanwhile, or the namespace is gone
