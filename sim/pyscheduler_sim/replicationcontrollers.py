"""``v1`` ReplicationControllers as kube-apiserver stores them.

The legacy ancestor of ReplicaSets is still served by kube-apiserver, and kube-scheduler (and
pyscheduler, for its default topology spreading) lists it, so the embedded cluster serves it:
stored, defaulted and validated as kube does, with its ``status`` and ``scale`` subresources.
No controller runs them here (nothing in the simulation creates their pods).

* defaulting (``SetDefaults_ReplicationController``): an empty selector becomes the template's
  labels, an object without labels gets them too, ``replicas`` defaults to 1; a new one starts
  with ``status: {replicas: 0}`` (the one status field without ``omitempty``);
* validation (``ValidateReplicationControllerSpec``): a non-empty selector matching the
  template's labels, a template whose pods restart ``Always`` and have no
  ``activeDeadlineSeconds``, non-negative ``replicas`` and ``minReadySeconds``.
"""

from __future__ import annotations

from typing import Any

from pyscheduler.api import validation as v
from pyscheduler.api.validation import FieldError
from pyscheduler_sim import validation as ov

__all__ = ["default_replication_controller", "prepare_for_create",
           "validate_replication_controller"]

Obj = dict[str, Any]


def default_replication_controller(obj: Obj) -> None:
    """``SetDefaults_ReplicationController``; the pod template is defaulted by the caller."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    template = spec.get("template")
    labels = ((template.get("metadata") or {}).get("labels")
              if isinstance(template, dict) else None)
    if isinstance(labels, dict):
        if not spec.get("selector"):
            spec["selector"] = dict(labels)
        meta = obj.setdefault("metadata", {})
        if isinstance(meta, dict) and not meta.get("labels"):
            meta["labels"] = dict(labels)
    if spec.get("replicas") is None:
        spec["replicas"] = 1


def prepare_for_create(obj: Obj) -> None:
    obj["status"] = {"replicas": 0}


def validate_replication_controller(obj: Obj) -> list[FieldError]:
    """``ValidateReplicationControllerSpec`` (metadata is checked by the generic validation)."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [v.required("spec")]
    errs: list[FieldError] = []
    for key in ("minReadySeconds", "replicas"):
        value = spec.get(key)
        if isinstance(value, int) and value < 0:
            errs.append(v.invalid(f"spec.{key}", value, "must be greater than or equal to 0"))
    selector = spec.get("selector")
    if not selector or not isinstance(selector, dict):
        errs.append(v.required("spec.selector"))
        selector = {}
    template = spec.get("template")
    if not isinstance(template, dict):
        return errs + [v.required("spec.template")]
    labels = (template.get("metadata") or {}).get("labels") or {}
    if selector and any(labels.get(k) != val for k, val in selector.items()):
        errs.append(v.invalid("spec.template.metadata.labels", labels,
                              "`selector` does not match template `labels`"))
    errs.extend(v.validate_labels(labels, "spec.template.metadata.labels"))
    pod_spec = template.get("spec")
    errs.extend(ov.validate_pod_spec(pod_spec, "spec.template.spec"))
    errs.extend(ov.validate_long_running_template(pod_spec, "ReplicationController"))
    return errs
