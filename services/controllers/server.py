"""The controller manager: every drasim controller in one process, as kube-controller-manager.

Controllers share one informer per kind (the handlers of all controllers run on each
event), which lists as `system:kube-controller-manager`, and each has its own work queue,
API client and Event recorder (its `source` in Events, named as upstream's). A controller
acts as its service account, `system:serviceaccount:kube-system:<controller>` (its actor
in the event log), as kube-controller-manager's do with
`--use-service-account-credentials`; RBAC holds each to its bootstrap role. `start()`
returns once every cache is synced and the queues run; `stop()` ends them in reverse
order, letting the Events already recorded be written. Tests run it in-process;
`python -m drasim.controllers` runs it as a service.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from drasim.common import features as gates
from drasim.common import nats_auth
from drasim.common.api import (
    apps_v1,
    batch_v1,
    core_v1,
    core_v1_app,
    policy_v1,
    rbac_v1,
    resource_v1,
)
from drasim.common.bus.client import Bus
from drasim.common.client import ApiClient
from drasim.common.cluster_file import DriverBehaviour
from drasim.common.featuregate import FeatureGate
from drasim.common.informer import Informer
from drasim.controllers import devicetainteviction, dradriver, events, owners
from drasim.controllers.clusterroleaggregation import ClusterRoleAggregationController
from drasim.controllers.cronjob import CronJobController
from drasim.controllers.daemonset import DaemonSetController
from drasim.controllers.deployment import DeploymentController
from drasim.controllers.devicetainteviction import DeviceTaintEvictionController
from drasim.controllers.disruption import DisruptionController
from drasim.controllers.dradriver import DriverController
from drasim.controllers.job import JobController
from drasim.controllers.metrics import ControllerMetrics
from drasim.controllers.queue import WorkQueue
from drasim.controllers.replicaset import ReplicaSetController
from drasim.controllers.resourceclaim import ResourceClaimController
from drasim.controllers.resourcequota import ResourceQuotaController
from drasim.controllers.rootcacertpublisher import RootCACertPublisher
from drasim.controllers.serviceaccounts import ServiceAccountsController
from drasim.controllers.statefulset import StatefulSetController
from drasim.controllers.ttlafterfinished import TTLAfterFinishedController

# Upstream's default `--resource-quota-sync-period`: how often every quota is recomputed.
RESOURCE_QUOTA_SYNC_PERIOD = 300.0


def _client(bus: Bus, controller: str) -> ApiClient:
    """A controller's API client: it acts as its service account."""
    return ApiClient(bus, actor=nats_auth.controller_identity(controller))


class ControllerManager:
    """Deployment, ReplicaSet, Job (and its TTL), CronJob, DaemonSet, StatefulSet,
    ResourceClaim, disruption, ClusterRole aggregation, ResourceQuota, ServiceAccounts and
    device taint eviction controllers over shared informers; with `drivers` (a cluster
    file's), the emulated DRA drivers' controller too, and with `root_ca` (the cluster CA's
    PEM, as kube-controller-manager's `--root-ca-file`) the root CA publisher."""

    def __init__(
        self,
        bus: Bus,
        *,
        resource_claim_concurrency: int = 256,
        resource_quota_sync_period: float = RESOURCE_QUOTA_SYNC_PERIOD,
        device_taint_rule_status_period: float = devicetainteviction.RULE_STATUS_PERIOD,
        features: FeatureGate = gates.DEFAULT,
        drivers: Sequence[DriverBehaviour] = (),
        root_ca: str | None = None,
    ) -> None:
        informer_client = ApiClient(bus, actor=nats_auth.KUBE_CONTROLLER_MANAGER)
        self.pods = Informer(informer_client, core_v1.Pod)
        self.resource_claims = Informer(informer_client, resource_v1.ResourceClaim)
        self.resource_claim_templates = Informer(informer_client, resource_v1.ResourceClaimTemplate)
        self.replica_sets = Informer(informer_client, apps_v1.ReplicaSet)
        self.deployments = Informer(informer_client, apps_v1.Deployment)
        self.pod_disruption_budgets = Informer(informer_client, policy_v1.PodDisruptionBudget)
        self.cluster_roles = Informer(informer_client, rbac_v1.ClusterRole)
        self.resource_quotas = Informer(informer_client, core_v1.ResourceQuota)
        self.device_classes = Informer(informer_client, resource_v1.DeviceClass)
        self.resource_slices = Informer(informer_client, resource_v1.ResourceSlice)
        self.device_taint_rules = (
            Informer(informer_client, resource_v1.DeviceTaintRule)
            if features.enabled(gates.DRA_DEVICE_TAINT_RULES)
            else None
        )
        self.jobs = Informer(informer_client, batch_v1.Job)
        self.nodes = Informer(informer_client, core_v1.Node)
        self.daemon_sets = Informer(informer_client, apps_v1.DaemonSet)
        self.stateful_sets = Informer(informer_client, apps_v1.StatefulSet)
        self.cron_jobs = Informer(informer_client, batch_v1.CronJob)
        self.namespaces = Informer(informer_client, core_v1.Namespace)
        self.service_accounts = Informer(informer_client, core_v1_app.ServiceAccount)
        self.config_maps = (
            Informer(informer_client, core_v1_app.ConfigMap) if root_ca is not None else None
        )
        pods_by_replica_set = owners.attached_pod_index(self.pods)
        self.deployment = DeploymentController(
            _client(bus, nats_auth.DEPLOYMENT_CONTROLLER),
            deployments=self.deployments,
            replica_sets=self.replica_sets,
            pods=self.pods,
            pods_by_owner=pods_by_replica_set,
        )
        self.replica_set = ReplicaSetController(
            _client(bus, nats_auth.REPLICASET_CONTROLLER),
            pods=self.pods,
            replica_sets=self.replica_sets,
            pods_by_owner=pods_by_replica_set,
        )
        self.job = JobController(
            _client(bus, nats_auth.JOB_CONTROLLER), jobs=self.jobs, pods=self.pods
        )
        self.cron_job = CronJobController(
            _client(bus, nats_auth.CRONJOB_CONTROLLER), cron_jobs=self.cron_jobs, jobs=self.jobs
        )
        self.ttl_after_finished = TTLAfterFinishedController(
            _client(bus, nats_auth.TTL_AFTER_FINISHED_CONTROLLER), jobs=self.jobs
        )
        self.daemon_set = DaemonSetController(
            _client(bus, nats_auth.DAEMON_SET_CONTROLLER),
            daemon_sets=self.daemon_sets,
            nodes=self.nodes,
            pods=self.pods,
        )
        self.stateful_set = StatefulSetController(
            _client(bus, nats_auth.STATEFULSET_CONTROLLER),
            stateful_sets=self.stateful_sets,
            pods=self.pods,
        )
        self.resource_claim = ResourceClaimController(
            _client(bus, nats_auth.RESOURCE_CLAIM_CONTROLLER),
            pods=self.pods,
            claims=self.resource_claims,
            templates=self.resource_claim_templates,
            concurrency=resource_claim_concurrency,
        )
        self.disruption = DisruptionController(
            _client(bus, nats_auth.DISRUPTION_CONTROLLER),
            budgets=self.pod_disruption_budgets,
            pods=self.pods,
            replica_sets=self.replica_sets,
            deployments=self.deployments,
        )
        self.cluster_role_aggregation = ClusterRoleAggregationController(
            _client(bus, nats_auth.CLUSTERROLE_AGGREGATION_CONTROLLER),
            cluster_roles=self.cluster_roles,
        )
        self.resource_quota = ResourceQuotaController(
            _client(bus, nats_auth.RESOURCEQUOTA_CONTROLLER),
            quotas=self.resource_quotas,
            device_classes=self.device_classes,
            informers={
                "pods": self.pods,
                "resourceclaims": self.resource_claims,
                "resourceclaimtemplates": self.resource_claim_templates,
                "replicasets": self.replica_sets,
                "deployments": self.deployments,
                "poddisruptionbudgets": self.pod_disruption_budgets,
                "resourcequotas": self.resource_quotas,
            },
            new_informer=lambda type_: Informer(informer_client, type_),
            resync_period=resource_quota_sync_period,
            extended_resources=features.enabled(gates.DRA_EXTENDED_RESOURCE),
        )
        self.device_taint_eviction = (
            DeviceTaintEvictionController(
                _client(bus, nats_auth.DEVICE_TAINT_EVICTION_CONTROLLER),
                pods=self.pods,
                claims=self.resource_claims,
                slices=self.resource_slices,
                rules=self.device_taint_rules,
                rule_status_period=device_taint_rule_status_period,
            )
            if features.enabled(gates.DRA_DEVICE_TAINTS)
            else None
        )
        # The emulated drivers' controller, for the drivers a cluster file describes.
        self.dra_driver = (
            DriverController(
                ApiClient(bus, actor=dradriver.IDENTITY),
                list(drivers),
                claims=self.resource_claims,
                pods=self.pods,
                slices=self.resource_slices,
            )
            if drivers
            else None
        )
        self.service_account = ServiceAccountsController(
            _client(bus, nats_auth.SERVICE_ACCOUNT_CONTROLLER),
            namespaces=self.namespaces,
            service_accounts=self.service_accounts,
        )
        self.root_ca_cert_publisher = (
            RootCACertPublisher(
                _client(bus, nats_auth.ROOT_CA_CERT_PUBLISHER),
                root_ca=root_ca,
                namespaces=self.namespaces,
                config_maps=self.config_maps,
            )
            if root_ca is not None and self.config_maps is not None
            else None
        )
        self.metrics = ControllerMetrics(
            claims=self.resource_claim.gauge, creates=self.resource_claim.creates
        )

    @property
    def informers(self) -> list[Informer[Any]]:
        return [
            self.pods,
            self.resource_claims,
            self.resource_claim_templates,
            self.replica_sets,
            self.deployments,
            self.pod_disruption_budgets,
            self.cluster_roles,
            self.resource_quotas,
            self.device_classes,
            self.resource_slices,
            *([self.device_taint_rules] if self.device_taint_rules is not None else []),
            self.jobs,
            self.nodes,
            self.daemon_sets,
            self.stateful_sets,
            self.cron_jobs,
            self.namespaces,
            self.service_accounts,
            *([self.config_maps] if self.config_maps is not None else []),
        ]

    @property
    def queues(self) -> list[WorkQueue[Any]]:
        return [
            self.deployment.queue,
            self.replica_set.queue,
            self.resource_claim.queue,
            self.disruption.queue,
            self.cluster_role_aggregation.queue,
            *(self.device_taint_eviction.queues if self.device_taint_eviction else []),
            *([self.dra_driver.queue] if self.dra_driver is not None else []),
            self.job.queue,
            self.job.orphans,
            self.cron_job.queue,
            self.ttl_after_finished.queue,
            self.daemon_set.queue,
            self.stateful_set.queue,
            self.service_account.queue,
            *([self.root_ca_cert_publisher.queue] if self.root_ca_cert_publisher else []),
        ]

    @property
    def recorders(self) -> list[events.EventRecorder]:
        return [
            self.deployment.events,
            self.replica_set.events,
            self.resource_claim.events,
            self.disruption.events,
            *([self.device_taint_eviction.events] if self.device_taint_eviction else []),
            self.job.events,
            self.daemon_set.events,
            self.stateful_set.events,
            self.cron_job.events,
        ]

    async def start(self) -> None:
        """Fill the caches (retrying until the apistore answers), then run the queues, so
        that no controller acts on a partial picture of the cluster."""
        for informer in self.informers:
            informer.start()
        await asyncio.gather(*(informer.wait_synced() for informer in self.informers))
        for queue in self.queues:
            queue.start()
        self.resource_quota.start()

    async def stop(self) -> None:
        await self.resource_quota.stop()
        if self.device_taint_eviction is not None:
            self.device_taint_eviction.stop_timers()
        for queue in self.queues:
            await queue.stop()
        await asyncio.gather(*(recorder.stop() for recorder in self.recorders))
        for informer in self.informers:
            await informer.stop()
