"""Numeric answers accept a decimal comma as well as a point, and the graded page says how the
typed text was read."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.quizzes.grading import parse_number
from tests.factories import parse, submit_answer, text


@pytest.mark.parametrize(("typed", "value", "how"), [
    ("1.75", 1.75, None),
    ("1,75", 1.75, "a decimal comma"),
    ("0,125", 0.125, "a decimal comma"),
    ("-2,5", -2.5, "a decimal comma"),
    ("1,400", 1400.0, "thousands"),
    ("12,345.5", 12345.5, "thousands"),
    ("1,000,000", 1e6, "thousands"),
])
def test_parse_number_reads_commas_and_says_how(typed: str, value: float, how: str | None) -> None:
    got, note = parse_number(typed)
    assert got == value
    if how is None:
        assert note is None
    else:
        assert note is not None and how in note and typed in note


@pytest.mark.parametrize("typed", ["1,2,3", "1,5.5", ",", "1,,5"])
def test_parse_number_refuses_ambiguous_commas(typed: str) -> None:
    with pytest.raises(ValueError):
        parse_number(typed)


def test_a_decimal_comma_is_graded_and_the_page_says_how_it_was_read(client: TestClient) -> None:
    # fixture-numeric's key is 1400; "1400,0" is 1400 with a decimal comma.
    page = parse(submit_answer(client, "/questions/fixture-numeric", "1400,0", htmx=False))
    graded = page.select_one("section.graded")
    assert "right" in graded["class"]
    assert "“1400,0” was read as 1400 (a decimal comma)" in text(graded.select_one(".reading"))


def test_an_unreadable_number_keeps_the_typed_text_and_says_both_forms_work(
    client: TestClient,
) -> None:
    response = submit_answer(client, "/questions/fixture-numeric", "1,2,3", htmx=False)
    assert response.status_code == 422
    page = parse(response)
    assert "1.75 or 1,75" in text(page.select_one("#answer-area .error"))
    assert page.select_one("#answer-input")["value"] == "1,2,3"
