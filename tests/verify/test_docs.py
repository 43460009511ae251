"""docs/run-result.md stays true: every result field and every event kind is documented."""

from __future__ import annotations

import re
from pathlib import Path

from app.verify.engine.events import SCHEMAS
from app.verify.engine.result import (
    BlockedIn,
    BucketRecord,
    PipelineBlock,
    PipelineLane,
    RankError,
    RankResult,
    RunResult,
)

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "run-result.md").read_text()


def _documented(name: str) -> bool:
    return f"`{name}`" in DOC


def test_every_result_field_is_documented() -> None:
    missing = [f"{model.__name__}.{name}"
               for model in (RunResult, RankResult, BucketRecord, RankError, BlockedIn, PipelineLane,
                             PipelineBlock)
               for name in model.model_fields if not _documented(name)]
    assert missing == []


def test_every_event_kind_is_documented() -> None:
    sources = "".join(path.read_text() for path in (ROOT / "app" / "verify" / "engine").rglob("*.py"))
    kinds = set(re.findall(r'emit\(\s*"(\w+)"', sources))
    kinds |= set(re.findall(r'"kind": "(\w+)"', sources))
    kinds |= set(SCHEMAS)
    assert {"collective_start", "bucket_reduce_end", "exit", "grad_ready"} <= kinds
    assert sorted(k for k in kinds if not _documented(k)) == []


def test_every_field_of_every_event_kind_is_documented() -> None:
    missing = [f"{kind}.{field.alias or name}" for kind, model in SCHEMAS.items()
               for name, field in model.model_fields.items() if not _documented(field.alias or name)]
    assert missing == []
