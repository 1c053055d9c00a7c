"""The Swift package against the API manifest (tests/api/manifest.json), read from its sources
(this machine has no Swift compiler): every listed type has every listed member, spelled
lowerCamelCase, in the generated bindings (Sources/MCPTasks/mcp_tasks_ffi.swift) or the Swift
layer's extensions (Sources/MCPTasks/MCPTasks.swift); ClientOptions has every option; TasksError has
one case per error class. A JSON-taking member may be spelled with a `Json` suffix beside its
Foundation-typed form (`valueJson` and `value()`), as the manifest's names allow."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = json.loads((ROOT / "tests/api/manifest.json").read_text())
SOURCES = ROOT / "bindings-swift/Sources/MCPTasks"
GENERATED = (SOURCES / "mcp_tasks_ffi.swift").read_text()
LAYER = (SOURCES / "MCPTasks.swift").read_text()


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def blocks(name: str) -> str:
    """The body of `class|struct name` in the generated file plus every `extension name` block."""
    found = []
    for source in (GENERATED, LAYER):
        for match in re.finditer(rf"^(?:open |public )?(?:class|struct|extension) {name}\b[^{{]*\{{", source, re.M):
            depth, i = 1, match.end()
            while depth and i < len(source):
                depth += {"{": 1, "}": -1}.get(source[i], 0)
                i += 1
            found.append(source[match.end() : i])
    assert found, f"no Swift type {name}"
    return "\n".join(found)


def has(body: str, member: str) -> bool:
    return re.search(rf"\b(?:func|var|let)\s+{member}(?:Json)?\b", body) is not None


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
    assert [o for o in MANIFEST["client_options"] if not re.search(rf"\bvar {camel(o)}\b", options)] == []
    for name, spec in MANIFEST["functions"].items():
        if ours(spec):
            assert re.search(rf"public func {camel(name)}\(", GENERATED), name
    cases = re.findall(r"^\s*case (\w+)\(detail: ErrorDetail", GENERATED, re.M)
    assert cases == MANIFEST["error_classes"]


def test_the_swift_layer_switches_over_every_error_case() -> None:
    """`TasksError.detail` switches over every case: a case missing there would not compile."""
    switch = LAYER[LAYER.index("public var detail: ErrorDetail") :]
    switch = switch[: switch.index("return d")]
    assert [c for c in MANIFEST["error_classes"] if f".{c}(let d)" not in switch] == []
