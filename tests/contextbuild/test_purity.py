import ast
from pathlib import Path

import contextbuild

FORBIDDEN = {
    "django", "endpoints", "storyapp", "knowledge", "celery", "openai",
    "datetime", "time", "socket", "requests", "httpx", "urllib",
}
PACKAGE = Path(contextbuild.__file__).parent


def imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def test_contextbuild_imports_no_framework_clock_or_network():
    offenders = {
        path.name: sorted(imported_roots(path) & FORBIDDEN)
        for path in PACKAGE.glob("*.py")
        if imported_roots(path) & FORBIDDEN
    }
    assert offenders == {}


def test_purity_check_sees_every_module():
    names = {path.name for path in PACKAGE.glob("*.py")}
    expected = {"builder.py", "inject.py", "records.py", "rules.py", "lengths.py", "tokens.py"}
    assert expected <= names
