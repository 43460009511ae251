"""The docs stay true: every setting and every command is documented."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import typer

from app.cli import app as cli_app
from app.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
CONFIGURATION = ROOT / "docs" / "configuration.md"
ROW = re.compile(r"^\|\s*`(DDPDRILL_[A-Z0-9_]+)`\s*\|(?P<default>[^|]*)\|(?P<meaning>[^|]*)\|\s*$")


def _documented_settings() -> dict[str, tuple[str, str]]:
    rows = {}
    for line in CONFIGURATION.read_text().splitlines():
        match = ROW.match(line)
        if match:
            rows[match[1]] = (match["default"].strip(), match["meaning"].strip())
    return rows


def _as_documented(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _commands(command: Any, prefix: str = "ddpdrill") -> list[str]:
    """Every leaf command under a Typer group, as typed: "ddpdrill bank check"."""
    children = getattr(command, "commands", None)
    if not children:
        return [prefix]
    out = []
    for name, command in sorted(children.items()):
        if not command.hidden:
            out += _commands(command, f"{prefix} {name}")
    return out


COMMANDS = _commands(typer.main.get_command(cli_app))


@pytest.mark.parametrize("field", sorted(Settings.model_fields))
def test_every_setting_is_documented_with_its_default(field: str) -> None:
    rows = _documented_settings()
    name = f"DDPDRILL_{field.upper()}"
    assert name in rows, f"{name} is missing from docs/configuration.md"
    default, meaning = rows[name]
    value = Settings.model_fields[field].default
    if value is None:
        assert default.startswith("unset"), (name, default)
    else:
        assert f"`{_as_documented(value)}`" in default, (name, default, value)
    assert len(meaning) > 20, name


def test_configuration_documents_no_setting_that_does_not_exist() -> None:
    fields = {f"DDPDRILL_{f.upper()}" for f in Settings.model_fields}
    assert set(_documented_settings()) - fields == set()


def test_the_command_tree_is_walked() -> None:
    assert {"ddpdrill serve", "ddpdrill db upgrade", "ddpdrill bank check", "ddpdrill bank import",
            "ddpdrill bank export"} <= set(COMMANDS)


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_is_documented(command: str) -> None:
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    text = "\n".join(p.read_text() for p in docs if p.exists())
    assert re.search(rf"`{re.escape(command)}(\s[^`]*)?`", text), (
        f"`{command}` appears in `ddpdrill --help` but not in README.md or docs/")


def test_the_docs_never_send_a_reader_outside_the_repository() -> None:
    """A user's clone has only the repository: no page may point at ../ or the team's notes."""
    root = Path(__file__).resolve().parent.parent
    pages = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    outside = [f"{p.relative_to(root)}: {line.strip()}" for p in pages
               for line in p.read_text().splitlines() if "../shared" in line or "](../" in line]
    assert not outside, outside


def test_the_performance_page_states_todays_figures_with_their_commands() -> None:
    """docs/performance.md is today's figures, not a diary: short, and every section says how
    to reproduce its figure and when it was measured (or that it is still to be measured)."""
    text = (ROOT / "docs" / "performance.md").read_text()
    assert len(text.splitlines()) <= 300
    sections = re.split(r"^## ", text, flags=re.M)[1:]
    assert sections
    for section in sections:
        title = section.splitlines()[0]
        assert re.search(r"^    \S", section, re.M), f"{title}: no command to reproduce it"
        assert re.search(r"\b20\d\d-\d\d-\d\d\b|to be re-measured", section, re.I), (
            f"{title}: no date measured")
