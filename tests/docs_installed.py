"""Stand-in for ``pip install`` and ``apt-get install`` while the documentation's commands run.

A test must not change the environment it runs in, so the docs test checks instead of installing:
every requirement the command names (an editable ``-e .[extras]`` reads pyproject.toml) must already
be installed, at a version the requirement accepts; then it says so, as pip does, and exits 0.
Anything missing, or any other use, exits 1 with the reason.

    python tests/docs_installed.py pip install -e ".[test]"
    python tests/docs_installed.py apt-get install chromium
"""

import importlib.metadata
import importlib.util
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement


def project_requirements(spec):
    """'.[test,viz]' -> (folder, the project's requirements: its dependencies and those extras)."""
    path, _, extras = spec.partition("[")
    folder = Path(path or ".")
    project = tomllib.loads((folder / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    wanted = [e.strip() for e in extras.rstrip("]").split(",") if e.strip()]
    optional = project.get("optional-dependencies", {})
    unknown = [e for e in wanted if e not in optional]
    if unknown:
        sys.exit(f"docs test: pyproject.toml has no extra {unknown}")
    return folder, project.get("dependencies", []) + [r for e in wanted for r in optional[e]]


def check(requirement):
    req = Requirement(requirement)
    try:
        have = importlib.metadata.version(req.name)
    except importlib.metadata.PackageNotFoundError:
        sys.exit(f"docs test: {req.name} is not installed, but the docs install it ({requirement})")
    if req.specifier and not req.specifier.contains(have, prereleases=True):
        sys.exit(f"docs test: {req.name} {have} is installed, but the docs ask for {requirement}")
    print(f"Requirement already satisfied: {requirement} ({have})")


def pip(args):
    if not args or args[0] != "install":
        sys.exit(f"docs test: only 'pip install' is checked, not 'pip {' '.join(args)}'")
    specs, editable = [], False
    for arg in args[1:]:
        if arg in ("-e", "--editable"):
            editable = True
        elif arg.startswith("-"):
            sys.exit(f"docs test: pip option {arg} is not understood by the check")
        elif editable or arg.startswith((".", "/")):
            folder, requirements = project_requirements(arg)
            found = importlib.util.find_spec("zerollm")
            if found is None or not Path(found.origin).resolve().is_relative_to(folder.resolve()):
                sys.exit(f"docs test: zerollm is not importable from {folder.resolve()}")
            specs += requirements
            editable = False
        else:
            specs.append(arg)
    for spec in specs:
        check(spec)


def apt_get(args):
    if not args or args[0] != "install":
        sys.exit(f"docs test: only 'apt-get install' is checked, not 'apt-get {' '.join(args)}'")
    for package in (a for a in args[1:] if not a.startswith("-")):
        status = subprocess.run(["dpkg-query", "-W", "-f=${Status}", package], capture_output=True, text=True)
        if "install ok installed" not in status.stdout and shutil.which(package) is None:
            sys.exit(f"docs test: the Debian package {package} is not installed")
        print(f"{package} is already installed")


if __name__ == "__main__":
    {"pip": pip, "apt-get": apt_get}[sys.argv[1]](sys.argv[2:])
