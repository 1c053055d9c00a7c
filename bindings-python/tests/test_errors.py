"""mcp_tasks.errors is core's ERROR_CLASSES: the same class names, parents, codes and builtins as
in TypeScript and Swift; nothing more, nothing less."""

from __future__ import annotations

import builtins
import inspect

import pytest
from mcp.shared.exceptions import MCPError

import mcp_tasks
from mcp_tasks import _native, errors


def test_every_class_of_the_core_table_is_here_as_described() -> None:
    table = {row["name"]: row for row in _native.ERROR_CLASSES}
    defined = {name for name, cls in vars(errors).items() if inspect.isclass(cls) and issubclass(cls, errors.McpTaskError)}
    assert defined == set(table), f"missing {set(table) - defined}, extra {defined - set(table)}"
    assert set(errors.__all__) == set(table)
    for name, row in table.items():
        cls = getattr(errors, name)
        parent = row["parent"]
        if parent is None:
            assert issubclass(cls, MCPError), "the root is an mcp MCPError"
        else:
            assert cls.__mro__[1] is getattr(errors, parent), f"{name} extends {cls.__mro__[1].__name__}, not {parent}"
        if row["pythonBuiltin"] is not None:
            assert issubclass(cls, getattr(builtins, row["pythonBuiltin"])), f"{name} is no {row['pythonBuiltin']}"
        assert cls.CODE == row["code"], name
        assert (cls.__doc__ or "").strip() == row["doc"], f"{name}'s docstring differs from the table"


def test_outcome_errors_are_typed() -> None:
    with pytest.raises(errors.TaskCancelledError, match="t1 was cancelled"):
        _native.outcome_result({"kind": "cancelled"}, "t1")
    with pytest.raises(errors.TaskGoneError) as gone:
        _native.outcome_result({"kind": "gone"}, "t1")
    assert isinstance(gone.value, LookupError) and gone.value.code == -32602
    with pytest.raises(errors.TaskExpiredError) as expired:
        _native.outcome_result({"kind": "expired"}, "t1")
    assert isinstance(expired.value, TimeoutError)
    with pytest.raises(errors.InternalError) as failed:
        _native.outcome_result({"kind": "failed", "error": {"code": -32603, "message": "boom", "data": {"x": 1}}}, "t1")
    assert (failed.value.code, failed.value.message, failed.value.data) == (-32603, "boom", {"x": 1})
    result = {"content": [{"type": "text", "text": "ok"}], "isError": True}
    assert _native.outcome_result({"kind": "completed", "result": result}, "t1") == result


async def test_a_transport_failure_keeps_its_cause_chain() -> None:
    client = _native.Client({"url": "http://127.0.0.1:1/mcp", "store": "memory://"})
    with pytest.raises(errors.TransportError) as caught:
        await client.call_tool("anything", {})
    assert isinstance(caught.value, ConnectionError) and caught.value.code == -32603
    causes = []
    cause = caught.value.__cause__
    while cause is not None:
        causes.append(str(cause))
        cause = cause.__cause__
    assert causes and any("refused" in c.lower() for c in causes), causes


def test_unknown_client_options_are_refused() -> None:
    with pytest.raises(errors.InvalidParamsError, match="pollMs"):
        _native.Client({"url": "http://127.0.0.1:1/mcp", "pollMs": 5})


def test_capabilities_must_be_an_object() -> None:
    with pytest.raises(errors.InvalidParamsError, match="capabilities must be a JSON object"):
        mcp_tasks.TasksClient("http://127.0.0.1:1/mcp", capabilities=["roots"])  # type: ignore[arg-type]
