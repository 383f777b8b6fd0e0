"""What the embedded cluster's controllers share about the objects they manage.

The counterpart of kube-controller-manager's ``pkg/controller/controller_utils.go``: the
controller reference of an object and the one a controller gives what it creates
(``metav1.NewControllerRef``), whether a pod is still active (``IsPodActive``) or ready, and
the hash that names a pod template (``ComputeHash``; here a SHA-256 spelled in kube's
alphabet, as the hashes only need to be stable and distinct). Pure: no registry, no I/O.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

__all__ = [
    "HASH_ALPHABET",
    "condition_true",
    "controller_ref",
    "is_active",
    "owner_ref",
    "template_hash",
]

Obj = dict[str, Any]

#: kube's ``rand.SafeEncodeString`` alphabet: no vowels, no look-alike characters.
HASH_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def controller_ref(obj: Obj) -> Obj | None:
    """The owner reference with ``controller: true`` (``metav1.GetControllerOf``)."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("controller"):
            return dict(ref)
    return None


def owner_ref(owner: Obj, kind: str, api_version: str) -> Obj:
    """``metav1.NewControllerRef``: what a controller puts on the objects it creates."""
    meta = owner["metadata"]
    return {"apiVersion": api_version, "kind": kind, "name": meta["name"], "uid": meta["uid"],
            "controller": True, "blockOwnerDeletion": True}


def is_active(pod: Obj) -> bool:
    """``IsPodActive``: neither finished nor being deleted."""
    phase = (pod.get("status") or {}).get("phase")
    return phase not in ("Succeeded", "Failed") and not pod["metadata"].get("deletionTimestamp")


def condition_true(pod: Obj, type_: str) -> bool:
    return any(c.get("type") == type_ and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or ())


def template_hash(template: Obj, collisions: int = 0) -> str:
    """``ComputeHash``: a stable name for a pod template (and a collision count)."""
    digest = hashlib.sha256(orjson.dumps(template, option=orjson.OPT_SORT_KEYS)
                            + str(collisions).encode()).digest()
    return "".join(HASH_ALPHABET[b % len(HASH_ALPHABET)] for b in digest[:10])
