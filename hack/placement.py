"""Print where pods landed: one line per node with its pods, then the pods that wait."""

from __future__ import annotations

import collections
import json
import sys


def main() -> int:
    pods = json.load(sys.stdin)["items"]
    by_node: dict[str, list[str]] = collections.defaultdict(list)
    waiting = []
    for p in pods:
        node = p["spec"].get("nodeName")
        name = p["metadata"]["name"]
        if node:
            by_node[node].append(name)
        else:
            cond = next((c for c in p.get("status", {}).get("conditions", [])
                         if c["type"] == "PodScheduled"), {})
            waiting.append(f"  {name}: {cond.get('message', 'pending')}")
    for node in sorted(by_node):
        print(f"  {node:12s} {', '.join(sorted(by_node[node]))}")
    if waiting:
        print("unschedulable:")
        print("\n".join(waiting))
    return 0


if __name__ == "__main__":
    sys.exit(main())
