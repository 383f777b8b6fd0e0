"""ImageLocality: prefer nodes that already have the pod's container images.

Reproduces kube-scheduler's ``pkg/scheduler/framework/plugins/imagelocality/image_locality.go``
(``Score``, ``sumImageScores``, ``scaledImageScore``, ``calculatePriority``):

* Each container, init containers included, whose image (normalized as kube's
  ``normalizedImageName`` does: see :func:`~pyscheduler.framework.pod.normalized_image_name`)
  is among the node's ``status.images`` names adds ``int64(float64(size) * spread)``, where
  ``spread = float64(nodes listing the image) / float64(all nodes)`` — an image present
  everywhere counts fully, one on a single node of many hardly at all, so that image locality
  does not pile a workload onto the few nodes that pulled it first (the "node heating" problem).
  ``size`` is the one kube's cache keeps: the first listing node's (see
  :mod:`pyscheduler.framework.nodetable`). A container image used twice counts twice.
* The sum is clamped to ``[23 MiB, 1000 MiB × number of containers]`` and scaled:
  ``100 * (sum - 23 MiB) // (1000 MiB × containers - 23 MiB)``. Not normalized further.

"All nodes" is every node in the table (virtual ones included), as kube counts every node of
its snapshot, not only the feasible ones.

Not row-local: the spread of an image changes when *another* node starts or stops listing it,
so a node's score can change while its row does not; the pipeline recomputes this plugin for
every pod. That costs one dict lookup per container and one scatter over the rows listing each
matching image (the table keeps, per image, the rows listing it); with several matching images,
a few array operations more. No per-node Python loop, and nothing beyond a zero array when no
node has any of the pod's images (or none could reach a score above 0).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from pyscheduler.framework.interface import MAX_NODE_SCORE, CycleContext
from pyscheduler.framework.nodetable import BoolArray, IntArray

__all__ = ["MAX_CONTAINER_THRESHOLD", "MIN_THRESHOLD", "NAME", "ImageLocality", "priority"]

NAME = "ImageLocality"

_MB = 1024 * 1024
#: kube's thresholds: a reasonable range for compressed image sizes (90 % of Docker Hub's).
MIN_THRESHOLD = 23 * _MB
MAX_CONTAINER_THRESHOLD = 1000 * _MB


def priority(total: int, containers: int) -> int:
    """kube's ``calculatePriority`` for one node's summed image scores."""
    top = MAX_CONTAINER_THRESHOLD * containers
    clamped = min(max(total, MIN_THRESHOLD), top)
    return MAX_NODE_SCORE * (clamped - MIN_THRESHOLD) // (top - MIN_THRESHOLD)


class ImageLocality:
    """Score: the sizes of the pod's images already on the node, scaled by their spread."""

    name: ClassVar[str] = NAME

    def score(self, ctx: CycleContext, feasible: BoolArray) -> IntArray:
        images = ctx.pod.images
        out = ctx.zeros()
        if not images:
            return out
        table = ctx.table
        nodes = float(len(table.slots))
        found: list[tuple[int, IntArray]] = []  # (scaled score, rows listing the image)
        for image in images:
            listed = table.image_nodes(image)
            if listed is not None:
                size, rows = listed
                found.append((int(float(size) * (float(len(rows)) / nodes)), rows))
        containers = len(images)
        if not found or priority(sum(scaled for scaled, _ in found), containers) == 0:
            return out  # not even a node with every one of them would score
        if len(found) == 1:  # the common case: every row listing the image scores the same
            scaled, rows = found[0]
            out[rows] = priority(scaled, containers)
            return out
        for scaled, rows in found:
            out[rows] += scaled  # each row once per image: no repeated index
        top = MAX_CONTAINER_THRESHOLD * containers
        np.clip(out, MIN_THRESHOLD, top, out=out)
        out -= MIN_THRESHOLD
        out *= MAX_NODE_SCORE
        out //= top - MIN_THRESHOLD
        return out
