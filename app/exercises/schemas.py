"""Shapes of the exercises API (/api/v1)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field


class ExerciseRunIn(BaseModel):
    code: str = Field(description="Your code (at most 20 KB of UTF-8); the exercise's checks run on it.")


class ExerciseRunOut(BaseModel):
    submission: str = Field(description="Names this Run's runs; poll `url` for its checks.")
    run_ids: list[int]
    status: Literal["pending", "done"]
    url: str


class CheckRunOut(BaseModel):
    params: dict[str, Any]
    world_size: int
    expected: str | None = Field(None, description="What this combination had to measure.")
    measured: str | None
    passed: bool | None


class VisibleCheckOut(BaseModel):
    label: str
    expected: str
    done: bool
    passed: bool
    runs: list[CheckRunOut]


class LearnerErrorOut(BaseModel):
    rank: int
    type: str
    message: str
    line: int | None = Field(None, description="The line of your code it points at.")
    traceback: str = Field(description="Your code's frames only.")


class ProgressOut(BaseModel):
    failed_runs: int = Field(description="Your finished Runs of this exercise that failed a check.")
    passed: bool
    solution_open: bool = Field(description="The reference solution may be opened now.")
    runs_until_solution: int


class SolutionOut(BaseModel):
    solution: str
    your_code: str
    diff: str = Field(description="A unified diff from your code to the reference solution.")


class GiveUpIn(BaseModel):
    code: str = Field(default="", description="Your code as it stands (for the diff).")


class SubmissionOut(BaseModel):
    """A Run of an exercise: each visible check; hidden checks only as counts."""

    submission: str
    status: Literal["pending", "done"]
    passed: bool
    infrastructure_failed: bool
    visible: list[VisibleCheckOut]
    hidden_total: int
    hidden_passed: int
    run_ids: list[int]
    attempt_id: int | None = None
    error: LearnerErrorOut | None = Field(None, description="How your code failed, if it did.")
    progress: ProgressOut | None = None
    mistakes: list[str] = Field(
        default_factory=list,
        description="Known mistakes whose runs measured what yours did (what each gets wrong; "
                    "never their code).")
    graded: bool = Field(True, description="False when this server runs exercises without the "
                                           "sandbox: a pass is shown but not recorded.")
