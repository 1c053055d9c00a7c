"""Renders one trace the receiver collected as a text waterfall: each span indented under its
parent, with its process, a bar from its start to its end, and its attempt, status, events and
how many links it has. docs/operating.md's picture of a task's
trace is this output.

    python tests/otel/waterfall.py SPANS.jsonl [TRACE_ID]

SPANS.jsonl holds one span a line, as `python tests/otel/receiver.py PORT` prints them; without
TRACE_ID, the trace with the most spans.
"""

from __future__ import annotations

import json
import sys
from collections import Counter, defaultdict
from typing import Any

WIDTH = 40


def render(spans: list[dict[str, Any]]) -> str:
    by_id = {s["span_id"]: s for s in spans}
    children: dict[str | None, list[dict[str, Any]]] = defaultdict(list)
    for span in spans:
        parent = span["parent_span_id"] if span["parent_span_id"] in by_id else None
        children[parent].append(span)
    start = min(s["start_ns"] for s in spans)
    end = max(s["end_ns"] for s in spans)
    scale = max(end - start, 1) / WIDTH
    lines = [f"trace {spans[0]['trace_id']}  ({(end - start) / 1e6:.0f} ms)"]

    def line(span: dict[str, Any], depth: int) -> None:
        a = int((span["start_ns"] - start) / scale)
        b = max(int((span["end_ns"] - start) / scale), a + 1)
        bar = " " * a + "█" * (b - a) + " " * (WIDTH - b)
        attrs = span["attributes"]
        notes = [f"attempt {attrs['task.attempt']}" if "task.attempt" in attrs else "",
                 str(attrs.get("task.status", "")), " ".join(f"·{e}" for e in span["events"]),
                 f"links {len(span['links'])}" if span["links"] else ""]
        name = "  " * depth + span["name"]
        lines.append(f"{name:<44} {span['service'] or '':<12} |{bar}| {' '.join(n for n in notes if n)}")
        group(children.get(span["span_id"], []), depth + 1)

    def group(siblings: list[dict[str, Any]], depth: int) -> None:
        """Lines for `siblings` in start order, a run of leaves of one name and process (a
        client's polls) as one line: `×N`, its bar from the first's start to the last's end."""
        ordered = sorted(siblings, key=lambda s: s["start_ns"])
        i = 0
        while i < len(ordered):
            j = i
            while (j + 1 < len(ordered) and not children.get(ordered[j + 1]["span_id"])
                   and not children.get(ordered[i]["span_id"])
                   and (ordered[j + 1]["name"], ordered[j + 1]["service"]) == (ordered[i]["name"], ordered[i]["service"])):
                j += 1
            if j == i:
                line(ordered[i], depth)
            else:
                first, last = ordered[i], ordered[j]
                merged = dict(first, name=f"{first['name']} ×{j - i + 1}", end_ns=last["end_ns"])
                line(merged, depth)
            i = j + 1

    group(children[None], 0)
    return "\n".join(lines)


def main() -> None:
    spans = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
    trace = sys.argv[2] if len(sys.argv) > 2 else Counter(s["trace_id"] for s in spans).most_common(1)[0][0]
    print(render([s for s in spans if s["trace_id"] == trace]))


if __name__ == "__main__":
    main()
