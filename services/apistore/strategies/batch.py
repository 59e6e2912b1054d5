"""Strategies of batch/v1: Jobs and CronJobs (upstream
`pkg/registry/batch/{job,cronjob}/strategy.go`)."""

from __future__ import annotations

from drasim.apistore.strategies.apps import WorkloadStrategy
from drasim.apistore.strategies.base import Admission, Strategy
from drasim.common.api import batch_v1
from drasim.common.api.meta_v1 import LabelSelector

__all__ = ["STRATEGIES", "generate_selector"]


def generate_selector(job: batch_v1.Job) -> None:
    """Upstream `generateSelector`: unless `spec.manualSelector`, the template is labelled
    with the Job's name and uid (new and legacy keys, each only where the user set none, so
    that a conflicting value is refused by validation) and the selector matches the uid, so
    a Job's pods are its own alone."""
    if job.spec.manual_selector:
        return
    template_labels = job.spec.template.metadata.labels
    for key in (batch_v1.LEGACY_JOB_NAME_LABEL, batch_v1.JOB_NAME_LABEL):
        template_labels.setdefault(key, job.metadata.name)
    for key in (batch_v1.LEGACY_CONTROLLER_UID_LABEL, batch_v1.CONTROLLER_UID_LABEL):
        template_labels.setdefault(key, job.metadata.uid)
    job.spec.template.metadata.labels = template_labels
    if job.spec.selector is None:
        job.spec.selector = LabelSelector()
    job.spec.selector.match_labels.setdefault(batch_v1.CONTROLLER_UID_LABEL, job.metadata.uid)
    if not job.metadata.labels:
        # Upstream's defaulting, as it reads the Job back, copies the template's labels.
        job.metadata.labels = dict(template_labels)


class JobStrategy(WorkloadStrategy):
    """The Job controller writes the status. The selector is generated from the uid at
    admission: upstream does it in PrepareForCreate, which there runs before validation."""

    def admit_create(self, obj: batch_v1.Job, batch: Admission) -> None:
        generate_selector(obj)


STRATEGIES: dict[str, Strategy] = {
    "jobs": JobStrategy(),
    "cronjobs": WorkloadStrategy(),
}
