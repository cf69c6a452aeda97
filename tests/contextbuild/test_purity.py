"""contextbuild's purity, as .importlinter's `contextbuild-pure` contract
states it: this test reads the contract's list rather than keeping its own,
so the rule is said once, and checks the source as text, so a module that
import-linter's graph missed (one not imported anywhere yet) is held to it too."""

import ast
import configparser
from pathlib import Path

import contextbuild

PACKAGE = Path(contextbuild.__file__).parent
CONTRACTS = PACKAGE.parent / ".importlinter"


def forbidden() -> set[str]:
    config = configparser.ConfigParser()
    config.read(CONTRACTS)
    return set(config["importlinter:contract:contextbuild-pure"]["forbidden_modules"].split())


def imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def test_the_contract_names_the_framework_the_clock_and_the_network():
    assert {"django", "storyapp", "knowledge", "endpoints", "celery", "openai", "datetime", "time", "socket"} <= forbidden()


def test_contextbuild_imports_nothing_the_contract_forbids():
    offenders = {
        path.name: sorted(imported_roots(path) & forbidden())
        for path in PACKAGE.glob("*.py")
        if imported_roots(path) & forbidden()
    }
    assert offenders == {}


def test_purity_check_sees_every_module():
    names = {path.name for path in PACKAGE.glob("*.py")}
    expected = {"builder.py", "inject.py", "records.py", "rules.py", "lengths.py", "tokens.py", "history.py", "layout.py"}
    assert expected <= names
