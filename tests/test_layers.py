"""The layers of docs/architecture.md: enforced by import-linter, checked here as users meet them."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parent.parent
ARCHITECTURE = (ROOT / "docs" / "architecture.md").read_text()
WEB = ("fastapi", "starlette", "jinja2", "app.templating", "app.deps")


def _loaded_after_import(module: str) -> set[str]:
    code = f"import sys, {module}; print('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=ROOT, timeout=120)
    return set(out.stdout.split())


# The web layer: entry points, the request plumbing, and every feature's pages and API.
# The session cookie (accounts.sessions) and the editor's form (authoring.schemas) read
# and write HTTP by nature, so they are web modules too.
WEB_LAYER = re.compile(r"^app\.(main|deps|templating|middleware|identity|csrf|metrics|cli(\..*)?"
                       r"|[a-z_]+\.(views|api)|accounts\.sessions|authoring\.schemas)$")


def test_nothing_outside_the_web_layer_reaches_the_web_stack() -> None:
    """What import-linter's patterns cannot say ("every module but the web layer"), checked
    on the real import graph, so a module added tomorrow is covered too."""
    graph = grimp.build_graph("app", include_external_packages=True)
    # Question templates render in Jinja's sandbox (app.questions.variants): a template
    # language, not the web layer (the same exemption as in pyproject.toml).
    if "jinja2" in graph.modules:
        graph.remove_import(importer="app.questions.variants", imported="jinja2")
    web = [m for m in ("fastapi", "starlette", "jinja2") if m in graph.modules]
    reaching = {m: graph.find_shortest_chain(importer=m, imported=w)
                for m in sorted(graph.modules) if m.startswith("app") and not WEB_LAYER.match(m)
                for w in web if graph.chain_exists(importer=m, imported=w)}
    assert not reaching, reaching


def test_bank_verify_and_workers_start_without_the_web_stack() -> None:
    for module in ("app.verify.audit", "app.verify.worker", "app.verify.gate"):
        loaded = _loaded_after_import(module)
        assert not [m for m in WEB if m in loaded], (module, [m for m in WEB if m in loaded])


def test_the_engine_loads_nothing_of_the_app_around_it() -> None:
    loaded = _loaded_after_import("app.verify.engine")
    app_modules = {m for m in loaded if m.startswith("app.")}
    assert app_modules and all(m.startswith("app.verify.engine") or m == "app.verify"
                               for m in app_modules), sorted(app_modules)
    assert "sqlalchemy" not in loaded and "torch" not in loaded


def test_every_module_is_placed_in_docs_architecture() -> None:
    """Every package and top-level module under app/ appears in the table of where things live."""
    missing = []
    for path in sorted((ROOT / "app").iterdir()):
        if path.name.startswith("__") or path.name == "__pycache__":
            continue
        if path.is_dir():
            if f"`app/{path.name}/`" not in ARCHITECTURE:
                missing.append(f"app/{path.name}/")
            for module in sorted(path.glob("*.py")):
                if not module.name.startswith("__") and f"`{module.name}`" not in ARCHITECTURE:
                    missing.append(f"app/{path.name}/{module.name}")
        elif path.suffix == ".py" and f"`app/{path.name}`" not in ARCHITECTURE:
            missing.append(f"app/{path.name}")
    assert not missing, f"not described in docs/architecture.md: {missing}"


def test_the_tests_mirror_app() -> None:
    """Every test folder is named after the feature it tests (docs/architecture.md, Tests)."""
    app = {p.name for p in (ROOT / "app").iterdir() if (p / "__init__.py").is_file()}
    app.add("engine")  # tests/verify/engine/ for app/verify/engine/
    not_features = {"browser", "fixtures", "__pycache__"}
    folders = {p.name for p in (ROOT / "tests").rglob("*") if p.is_dir()
               and p.name not in not_features and "fixtures" not in p.relative_to(ROOT).parts}
    assert folders <= app, sorted(folders - app)
    assert (ROOT / "tests" / "verify" / "engine").is_dir()

