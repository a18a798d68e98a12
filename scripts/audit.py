"""`make audit`: known vulnerabilities in the installed dependencies, via pip-audit.

pip-audit asks the package index's advisory data about each installed distribution.
Where that service cannot be reached, every dependency comes back "could not be
audited" and pip-audit itself still reports "no known vulnerabilities": this script
says instead that nothing was audited (a warning, exit 0), so an offline machine can
run `make check` without the result reading as a pass. A vulnerability found fails.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def main() -> int:
    """Run pip-audit on this interpreter's environment and judge its report."""
    pip_audit = Path(sys.executable).with_name("pip-audit")
    completed = subprocess.run(  # noqa: S603 - the venv's own pip-audit, fixed arguments, no shell
        [str(pip_audit), "--skip-editable", "--progress-spinner", "off", "--format", "json"],
        capture_output=True,
        text=True,
        check=False,
    )
    try:
        report = json.loads(completed.stdout)
    except json.JSONDecodeError:
        print(f"pip-audit failed:\n{completed.stderr}", file=sys.stderr)
        return 1
    dependencies = report.get("dependencies", [])
    vulnerable = [d for d in dependencies if d.get("vulns")]
    skipped = [d for d in dependencies if d.get("skip_reason")]
    for dependency in vulnerable:
        for vuln in dependency["vulns"]:
            fixed = ", ".join(vuln.get("fix_versions", [])) or "no fixed version yet"
            print(f"VULNERABLE {dependency['name']} {dependency['version']}: {vuln['id']} (fixed in {fixed})")
    audited = len(dependencies) - len(skipped)
    if not audited:
        print(
            f"pip-audit: NOT AUDITED - none of {len(dependencies)} dependencies could be looked up "
            "(the package index's vulnerability data is unreachable from here); run `make audit` online",
            file=sys.stderr,
        )
        return 0
    if skipped:
        names = ", ".join(d["name"] for d in skipped)
        print(f"pip-audit: {len(skipped)} dependencies not on the index, not audited: {names}", file=sys.stderr)
    print(f"pip-audit: {audited} dependencies audited, {len(vulnerable)} with known vulnerabilities")
    return 1 if vulnerable else 0


if __name__ == "__main__":
    sys.exit(main())
