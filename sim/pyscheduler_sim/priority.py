"""``scheduling.k8s.io/v1`` PriorityClasses and the Priority admission plugin.

What kube-apiserver does, and where it does it:

* A cluster starts with the two system classes, ``system-node-critical`` (2000001000) and
  ``system-cluster-critical`` (2000000000), which kube-apiserver's post-start hook creates
  (``pkg/registry/scheduling/rest``); they cannot be deleted one by one (``REST.Delete`` in
  ``pkg/registry/scheduling/priorityclass/storage``; a DeleteCollection goes around that, as in
  kube).
* Defaulting gives a class ``preemptionPolicy: PreemptLowerPriority``; the strategy gives a new
  class ``metadata.generation: 1``, which updates never bump.
* Validation (``pkg/apis/scheduling/validation``): names with the ``system-`` prefix are
  reserved to the two system classes with their own values; other classes may not exceed
  1000000000; ``value`` and ``preemptionPolicy`` cannot change.
* The Priority admission plugin (``plugin/pkg/admission/priority/admission.go``):

  - on a new pod, ``priorityClassName`` resolves to ``spec.priority`` and
    ``spec.preemptionPolicy`` (403 ``no PriorityClass with name X was found`` when there is no
    such class); a pod without a class gets the ``globalDefault`` class: its name in
    ``priorityClassName``, its value and policy; when several classes are ``globalDefault``
    (which admission prevents, but a race may allow) the one with the *lowest* value wins;
    with none, priority 0 and ``PreemptLowerPriority``. A pod that states its own ``priority``
    or ``preemptionPolicy`` is refused when it disagrees with the class. (Modern kube has no
    special case for the system classes here: they are ordinary objects; the old
    critical-pod annotation mapping is gone.)
  - an update that leaves out ``spec.priority`` keeps the stored one;
  - a second ``globalDefault`` class is refused: ``PriorityClass X is already marked as
    default. Only one default can exist``.
"""

from __future__ import annotations

from typing import Any

from pyscheduler.api import validation as v
from pyscheduler.api.validation import FieldError
from pyscheduler_sim import errors
from pyscheduler_sim.admission import Operation, forbidden
from pyscheduler_sim.resources import ResourceType
from pyscheduler_sim.store import Store

__all__ = [
    "GROUP",
    "HIGHEST_USER_DEFINABLE",
    "PREEMPT_LOWER_PRIORITY",
    "PriorityAdmission",
    "SYSTEM_CLASSES",
    "check_delete",
    "default_class",
    "prepare_class_for_create",
    "system_classes",
    "validate_class",
    "validate_class_update",
]

Obj = dict[str, Any]

GROUP = "scheduling.k8s.io"
SYSTEM_PREFIX = "system-"
HIGHEST_USER_DEFINABLE = 1_000_000_000
_SYSTEM_CRITICAL = 2 * HIGHEST_USER_DEFINABLE
PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority"
#: In the order ``ValidatePreemptionPolicy`` lists them.
PREEMPTION_POLICIES = (PREEMPT_LOWER_PRIORITY, "Never")

#: name -> (value, description), in the order kube-apiserver creates them.
SYSTEM_CLASSES: dict[str, tuple[int, str]] = {
    "system-node-critical": (
        _SYSTEM_CRITICAL + 1000,
        "Used for system critical pods that must not be moved from their current node."),
    "system-cluster-critical": (
        _SYSTEM_CRITICAL,
        "Used for system critical pods that must run in the cluster, but can be moved to "
        "another node if necessary."),
}


def system_classes() -> list[Obj]:
    """The system PriorityClasses, as a new cluster's API server creates them."""
    return [{"apiVersion": f"{GROUP}/v1", "kind": "PriorityClass", "metadata": {"name": name},
             "value": value, "description": description}
            for name, (value, description) in SYSTEM_CLASSES.items()]


def default_class(obj: Obj) -> None:
    """``SetDefaults_PriorityClass`` (every write: kube defaults each decoded object)."""
    if obj.get("preemptionPolicy") is None:
        obj["preemptionPolicy"] = PREEMPT_LOWER_PRIORITY


def prepare_class_for_create(obj: Obj) -> None:
    """The PriorityClass strategy's ``PrepareForCreate``."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta["generation"] = 1


def _value(obj: Obj) -> int:
    value = obj.get("value", 0)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def validate_class(obj: Obj) -> list[FieldError]:
    """``ValidatePriorityClass`` (metadata is checked by the generic validation)."""
    errs: list[FieldError] = []
    raw = obj.get("value", 0)
    if not isinstance(raw, int) or isinstance(raw, bool):
        errs.append(v.invalid("value", raw, v.MUST_BE_INTEGER))
    value = _value(obj)
    name = str((obj.get("metadata") or {}).get("name") or "")
    if name.startswith(SYSTEM_PREFIX):
        problem = _system_class_problem(name, value, obj.get("globalDefault") is True)
        if problem:
            errs.append(v.forbidden(
                "metadata.name", f"priority class names with '{SYSTEM_PREFIX}' prefix are "
                                 f"reserved for system use only. error: {problem}"))
    elif value > HIGHEST_USER_DEFINABLE:
        errs.append(v.forbidden("value", "maximum allowed value of a user defined priority "
                                         f"is {HIGHEST_USER_DEFINABLE}"))
    policy = obj.get("preemptionPolicy")
    if policy == "":
        errs.append(v.required("preemptionPolicy"))
    elif policy is not None and policy not in PREEMPTION_POLICIES:
        errs.append(v.not_supported("preemptionPolicy", policy, PREEMPTION_POLICIES))
    return errs


def _system_class_problem(name: str, value: int, global_default: bool) -> str:
    """``IsKnownSystemPriorityClass``'s error, or '' for a known system class."""
    known = SYSTEM_CLASSES.get(name)
    if known is None:
        return f"{name} is not a known system priority class"
    if value != known[0]:
        return f"value of {name} PriorityClass must be {known[0]}"
    if global_default:
        return f"globalDefault of {name} PriorityClass must be false"
    return ""


def validate_class_update(new: Obj, old: Obj) -> list[FieldError]:
    """``ValidatePriorityClassUpdate``: value and preemptionPolicy are immutable."""
    errs: list[FieldError] = []
    if new.get("value", 0) != old.get("value", 0):
        errs.append(v.forbidden("value", "may not be changed in an update."))
    if new.get("preemptionPolicy") != old.get("preemptionPolicy"):
        errs.append(v.invalid("preemptionPolicy", new.get("preemptionPolicy"),
                              "field is immutable"))
    return errs


def check_delete(rt: ResourceType, name: str) -> None:
    """``REST.Delete`` of priorityclasses: the system classes stay."""
    if rt.group == GROUP and rt.plural == "priorityclasses" and name in SYSTEM_CLASSES:
        raise errors.forbidden(GROUP, "priorityclasses", name,
                               "this is a system priority class and cannot be deleted")


class PriorityAdmission:
    """The Priority admission plugin (an :class:`~pyscheduler_sim.admission.AdmissionPlugin`)."""

    def __init__(self, store: Store, classes: ResourceType) -> None:
        self.store = store
        self.classes = classes

    def _default_class(self) -> Obj | None:
        """``getDefaultPriorityClass``: of the globalDefault classes, the lowest value."""
        best: Obj | None = None
        for s in self.store.iter(self.classes):
            if b'"globalDefault":true' not in s.raw:
                continue
            pc = s.view
            if pc.get("globalDefault") is True and (best is None or _value(pc) < _value(best)):
                best = pc
        return best

    def admit(self, operation: Operation, rt: ResourceType, obj: Obj, old: Obj | None) -> None:
        if rt.group != "" or rt.plural != "pods":
            return
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return
        if operation == "UPDATE":
            # The priority set at creation is kept by an update that leaves it out.
            old_priority = ((old or {}).get("spec") or {}).get("priority")
            if spec.get("priority") is None and old_priority is not None:
                spec["priority"] = old_priority
            return
        name = spec.get("priorityClassName")
        policy: object
        if not name:
            default = self._default_class()
            if default is not None:
                spec["priorityClassName"] = default["metadata"]["name"]
                priority, policy = _value(default), default.get("preemptionPolicy")
            else:
                priority, policy = 0, PREEMPT_LOWER_PRIORITY
        else:
            stored = self.store.get(self.classes, "", str(name))
            if stored is None:
                raise forbidden(rt, obj, f"no PriorityClass with name {name} was found")
            pc = stored.view
            priority, policy = _value(pc), pc.get("preemptionPolicy")
        given = spec.get("priority")
        if given is not None and given != priority:
            raise forbidden(rt, obj, f"the integer value of priority ({given}) must not be "
                                     f"provided in pod spec; priority admission controller "
                                     f"computed {priority} from the given PriorityClass name")
        spec["priority"] = priority
        if policy is not None:
            given_policy = spec.get("preemptionPolicy")
            if given_policy is not None and given_policy != policy:
                raise forbidden(rt, obj, f"the string value of PreemptionPolicy "
                                         f"({given_policy}) must not be provided in pod spec; "
                                         f"priority admission controller computed {policy} "
                                         f"from the given PriorityClass name")
            spec["preemptionPolicy"] = policy

    def validate(self, operation: Operation, rt: ResourceType, obj: Obj,
                 old: Obj | None) -> None:
        if rt.key != self.classes.key or obj.get("globalDefault") is not True:
            return
        default = self._default_class()
        if default is None:
            return
        name = default["metadata"]["name"]
        if operation == "CREATE" or name != (obj.get("metadata") or {}).get("name"):
            raise forbidden(rt, obj, f"PriorityClass {name} is already marked as default. "
                                     "Only one default can exist")
