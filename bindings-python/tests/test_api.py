"""The Python client against the API manifest (tests/api/manifest.json): every listed type has
every listed member, spelled snake_case; TasksClient takes every client option; the error classes
are the manifest's. Items the manifest limits to other languages are skipped by their own list."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import mcp_tasks
from mcp_tasks import errors

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = json.loads((ROOT / "tests/api/manifest.json").read_text())


def _ours(spec: dict) -> bool:  # type: ignore[type-arg]
    return "python" in spec.get("languages", ["python", "typescript", "swift"])


def test_every_type_has_every_member() -> None:
    samples = {
        # Execution's members are set per instance (its kind decides its task).
        "Execution": mcp_tasks.Execution(immediate={"content": []}, task=None),
        "InputRequest": mcp_tasks.InputRequest(task_id=None, key="k", method="elicitation/create"),
    }
    missing = []
    for name, spec in MANIFEST["types"].items():
        if not _ours(spec):
            continue
        target = samples.get(name, getattr(mcp_tasks, name, None))
        assert target is not None, f"mcp_tasks has no {name}"
        missing += [f"{name}.{m}" for m in spec["members"] if not hasattr(target, m)]
    assert missing == [], f"missing or misnamed: {missing}"


def test_the_client_takes_every_option() -> None:
    parameters = inspect.signature(mcp_tasks.TasksClient.__init__).parameters
    assert [o for o in MANIFEST["client_options"] if o not in parameters] == []


def test_functions_and_errors() -> None:
    for name, spec in MANIFEST["functions"].items():
        if _ours(spec):
            assert callable(getattr(mcp_tasks, name, None)), name
    assert sorted(errors.__all__) == sorted(MANIFEST["error_classes"])
    assert all(hasattr(mcp_tasks, name) for name in MANIFEST["error_classes"])
