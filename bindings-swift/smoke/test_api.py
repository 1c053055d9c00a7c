"""The Swift package against the API manifest (tests/api/manifest.json), read from its public
sources (Sources/MCPTasks/*.swift), so that machines without a Swift compiler check it too: every
listed type has every listed member, spelled lowerCamelCase; ClientOptions has every option;
TasksError has one case per error class, in core's order; the generated bindings (an internal
module the public layer wraps) keep the FFI names the layer calls. Where Swift exists,
Tests/MCPTasksTests/OfflineTests.swift checks the same surface with the compiler."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = json.loads((ROOT / "tests/api/manifest.json").read_text())
LAYER = "\n".join(p.read_text() for p in sorted((ROOT / "bindings-swift/Sources/MCPTasks").glob("*.swift")))
GENERATED = (ROOT / "bindings-swift/Sources/MCPTasksFFI/mcp_tasks_ffi.swift").read_text()


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def blocks(name: str, source: str = LAYER) -> str:
    """The bodies of `class|struct|enum name` and every `extension name` block of the public layer."""
    found = []
    for match in re.finditer(
        rf"^(?:public )?(?:final )?(?:class|struct|enum|extension) {name}\b[^{{]*\{{", source, re.M
    ):
        depth, i = 1, match.end()
        while depth and i < len(source):
            depth += {"{": 1, "}": -1}.get(source[i], 0)
            i += 1
        found.append(source[match.end() : i])
    assert found, f"no Swift type {name}"
    return "\n".join(found)


def has(body: str, member: str) -> bool:
    return re.search(rf"\bpublic (?:static )?(?:func|var|let)\s+{member}\b", body) is not None


def ours(spec: dict) -> bool:  # type: ignore[type-arg]
    return "swift" in spec.get("languages", ["swift"])


def test_every_type_has_every_member() -> None:
    missing = []
    for name, spec in MANIFEST["types"].items():
        if not ours(spec):
            continue
        body = blocks(name)
        missing += [f"{name}.{camel(m)}" for m in spec["members"] if not has(body, camel(m))]
    assert missing == [], f"missing or misnamed: {missing}"


def test_options_functions_and_error_cases() -> None:
    options = blocks("ClientOptions")
    assert [o for o in MANIFEST["client_options"] if not re.search(rf"\bpublic var {camel(o)}\b", options)] == []
    for name, spec in MANIFEST["functions"].items():
        if ours(spec):
            assert re.search(rf"public func {camel(name)}\(", LAYER), name
    cases = re.findall(r"^\s*case (\w+)\(ErrorDetail\)", blocks("TasksError"), re.M)
    assert cases == MANIFEST["error_classes"]
    generated = re.findall(r"^\s*case (\w+)\(detail: ErrorDetail", GENERATED, re.M)
    assert generated == MANIFEST["error_classes"]


def test_the_swift_layer_converts_every_error_case() -> None:
    """`TasksError.detail` and the conversion from the generated enum name every case: one missing
    there would not compile, and this says which where no compiler runs."""
    layer = blocks("TasksError")
    detail = layer[layer.index("public var detail: ErrorDetail") :]
    detail = detail[: detail.index("return d")]
    assert [c for c in MANIFEST["error_classes"] if f".{c}(let d)" not in detail] == []
    assert [c for c in MANIFEST["error_classes"] if f"case .{c}(let d): self = .{c}(ErrorDetail(d))" not in layer] == []
