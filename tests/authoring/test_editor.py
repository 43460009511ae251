"""The editor: create, validate, save as revisions, previews, history, diff and revert."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.accounts.models import AuditEntry
from app.questions.models import Question, QuestionRevision
from tests.authoring.helpers import create_question, editor_data, htmx, save_editor
from tests.factories import Account, count, parse, parse_fragment, text


def _question(session_factory: sessionmaker[Session], slug: str) -> Question:
    with session_factory() as s:
        q = s.scalar(select(Question).where(Question.slug == slug))
        assert q is not None
        s.expunge(q)
        return q


def _revisions(session_factory: sessionmaker[Session], slug: str) -> list[QuestionRevision]:
    with session_factory() as s:
        q = s.scalar(select(Question).where(Question.slug == slug))
        assert q is not None
        revs = list(s.scalars(select(QuestionRevision).where(QuestionRevision.question_id == q.id)
                              .order_by(QuestionRevision.number)))
        for r in revs:
            s.expunge(r)
        return revs


def test_new_question_is_a_draft_whose_first_revision_names_its_author(
    author_client: TestClient, author: Account, session_factory: sessionmaker[Session]
) -> None:
    response = create_question(author_client, "my-first")
    assert response.status_code == 303, response.text
    assert response.headers["location"] == "/author/questions/my-first?saved=1"
    q = _question(session_factory, "my-first")
    assert q.status == "draft"
    [rev] = _revisions(session_factory, "my-first")
    assert q.current_revision_id == rev.id == q.draft_revision_id
    assert (rev.number, rev.source, rev.author_id, rev.note) == (1, "editor", author.id, "first draft")
    assert rev.content["verify"]["snippet"] == "my_first.py"
    assert rev.snippet_text is not None and "report" in rev.snippet_text
    # Learners do not see a draft.
    assert author_client.get("/questions/my-first").status_code == 404
    assert count(session_factory, AuditEntry, AuditEntry.action == "question.create") == 1


def test_editor_names_the_field_of_every_error_and_saves_nothing(
    author_client: TestClient, session_factory: sessionmaker[Session]
) -> None:
    response = create_question(author_client, "Bad Slug", choice_correct=["0", "1"], prompt="",
                               knobs="scale: [", expect="- label: x\n")
    assert response.status_code == 422
    page = parse(response)
    errors = {li.find_parent("div", class_="field").select_one("label").get_text(strip=True)
              for li in page.select(".field ul.errors li")}
    assert any(e.startswith("Knobs") for e in errors), errors
    # Fixing the YAML shows the next layer of errors: slug, prompt, choices, expectations.
    response = create_question(author_client, "Bad Slug", choice_correct=["0", "1"], prompt="",
                               expect="- label: x\n")
    assert response.status_code == 422
    page = parse(response)
    fields = {ul.find_parent("div").select_one("[name]")["name"] if ul.find_parent("div").select_one("[name]")
              else "" for ul in page.select("ul.errors")}
    assert {"slug", "prompt", "expect"} <= fields, fields
    # The author's input is kept.
    assert page.select_one("input[name=slug]")["value"] == "Bad Slug"
    # Whole-question rules come once the fields are valid, and name their field too.
    response = create_question(author_client, "two-right", choice_correct=["0", "1"])
    assert response.status_code == 422
    [choices_error] = parse(response).select("fieldset ul.errors li")
    assert "needs exactly 1 correct choice" in choices_error.get_text()
    assert count(session_factory, Question) == 0


def test_snippet_with_a_syntax_error_is_refused(author_client: TestClient) -> None:
    response = create_question(author_client, "broken-snippet", snippet="def f(:\n")
    assert response.status_code == 422
    assert "Python syntax error on line 1" in parse(response).get_text()


def test_every_save_is_a_new_immutable_revision(
    author_client: TestClient, session_factory: sessionmaker[Session]
) -> None:
    create_question(author_client, "revs")
    first = _revisions(session_factory, "revs")[0]
    assert save_editor(author_client, "revs", title="Second title", note="retitle").status_code == 303
    assert save_editor(author_client, "revs", prompt="A new *prompt*").status_code == 303
    revs = _revisions(session_factory, "revs")
    assert [r.number for r in revs] == [1, 2, 3]
    # Earlier revisions are untouched.
    assert (revs[0].content, revs[0].content_hash, revs[0].created_at) == (
        first.content, first.content_hash, first.created_at)
    assert revs[1].content["title"] == "Second title" and revs[1].note == "retitle"
    assert revs[2].content["prompt"] == "A new *prompt*" and revs[2].content["title"] == "Second title"
    # Saving without a change adds nothing.
    response = save_editor(author_client, "revs")
    assert response.headers["location"].endswith("saved=same")
    assert len(_revisions(session_factory, "revs")) == 3


def test_saving_over_a_newer_revision_is_a_conflict(
    author_client: TestClient, session_factory: sessionmaker[Session]
) -> None:
    create_question(author_client, "racy")
    stale = parse(author_client.get("/author/questions/racy"))
    assert save_editor(author_client, "racy", title="Saved first").status_code == 303
    response = author_client.post("/author/questions/racy",
                                  data=editor_data(stale, title="Saved second"))
    assert response.status_code == 409
    assert "was saved after you opened the editor" in response.text
    assert [r.content["title"] for r in _revisions(session_factory, "racy")] == [
        "Title of racy", "Saved first"]


def test_editor_round_trips_every_field_of_a_bank_question(
    admin_client: TestClient, client: TestClient, session_factory: sessionmaker[Session]
) -> None:
    """Opening an imported question and saving it unchanged adds no revision: nothing is lost."""
    for slug in ("fixture-single", "fixture-multi", "fixture-numeric", "fixture-trace-join",
                 "fixture-trace-buckets"):
        response = save_editor(admin_client, slug)
        assert response.status_code == 303, (slug, response.text)
        assert response.headers["location"].endswith("saved=same"), slug
        assert len(_revisions(session_factory, slug)) == 1


def test_markdown_preview_is_sanitised_and_snippet_preview_highlighted(
    author_client: TestClient,
) -> None:
    page = parse(author_client.get("/author/questions/new"))
    headers = htmx(page)
    md = author_client.post("/author/preview/markdown?field=prompt", headers=headers,
                            data={"prompt": "Hello **there** <script>alert(1)</script>"})
    frag = parse_fragment(md)
    assert frag.find("strong").get_text() == "there"
    assert frag.find("script") is None
    code = author_client.post("/author/preview/snippet", headers=headers,
                              data={"snippet": "import torch\nreport('x', 1)\n"})
    assert parse_fragment(code).select_one(".highlight") is not None
    bad = author_client.post("/author/preview/snippet", headers=headers, data={"snippet": "def (:\n"})
    assert "syntax error" in bad.text


def test_learner_preview_renders_the_unsaved_question(author_client: TestClient) -> None:
    page = parse(author_client.get("/author/questions/new"))
    from tests.authoring.helpers import question_fields

    response = author_client.post("/author/preview/question", headers=htmx(page),
                                  data=question_fields("preview-me", title="Preview title"))
    frag = parse_fragment(response)
    assert frag.select_one("h1").get_text() == "Preview title"
    assert [li.get_text(" ", strip=True) for li in frag.select("ol.choices-graded li")][1] == "b The mean"


def test_history_diff_and_revert(
    author_client: TestClient, session_factory: sessionmaker[Session]
) -> None:
    create_question(author_client, "hist")
    save_editor(author_client, "hist", title="Changed title", snippet='report("g", 3.0)\n')
    history = parse(author_client.get("/author/questions/hist/history"))
    assert [tr["data-number"] for tr in history.select("tr[data-number]")] == ["2", "1"]
    diff = parse(author_client.get("/author/questions/hist/diff?a=1&b=2"))
    removed = [s.get_text() for s in diff.select("pre.diff span.del")]
    added = [s.get_text() for s in diff.select("pre.diff span.add")]
    assert "-title: Title of hist" in removed and "+title: Changed title" in added
    assert '-report("g", 1.5 * params["scale"])' in removed and '+report("g", 3.0)' in added
    # Revert: a new revision equal to revision 1.
    form = history.select_one("form#revert-1")
    data = {i["name"]: i["value"] for i in form.select("input")}
    response = author_client.post(form["action"], data=data, follow_redirects=False)
    assert response.status_code == 303
    revs = _revisions(session_factory, "hist")
    assert [r.number for r in revs] == [1, 2, 3]
    assert revs[2].content_hash == revs[0].content_hash and revs[2].source == "revert"
    assert revs[2].snippet_text == revs[0].snippet_text
    assert _question(session_factory, "hist").draft_revision_id == revs[2].id
    same = parse(author_client.get("/author/questions/hist/diff?a=1&b=3"))
    assert same.select("pre.diff") == [] and "same content" in same.get_text()


def test_list_filters_by_topic_status_tag_difficulty_text_and_verification(
    author_client: TestClient, client: TestClient
) -> None:
    create_question(author_client, "mine-one", tags="alpha", difficulty="3")

    def slugs(query: str) -> list[str]:
        page = parse(author_client.get(f"/author?{query}"))
        return [tr["data-slug"] for tr in page.select("tr[data-slug]")]

    assert "mine-one" in slugs("") and "fixture-single" in slugs("")
    assert slugs("status=draft") == ["mine-one"]
    assert slugs("tag=alpha") == ["mine-one"]
    assert "mine-one" in slugs("difficulty=3") and "mine-one" not in slugs("difficulty=1")
    assert "fixture-single" in slugs("difficulty=1")
    assert slugs("q=numeric") == ["fixture-numeric"]
    assert set(slugs("topic=traces")) == {"fixture-trace-buckets", "fixture-trace-join"}
    assert "fixture-multi" in slugs("verification=no+snippet")
    assert "mine-one" in slugs("verification=unverified")
    # htmx asks for the rows only.
    frag = author_client.get("/author?tag=alpha", headers={"HX-Request": "true",
                                                           "HX-Target": "question-rows"})
    assert parse_fragment(frag).select_one("#question-rows") is not None
    assert "<html" not in frag.text
    # An author opens their own question to edit it, an imported one to propose an edit.
    page = parse(author_client.get("/author"))
    assert page.select_one("tr[data-slug=mine-one] a")["href"] == "/author/questions/mine-one"
    assert "propose an edit" not in text(page.select_one("tr[data-slug=mine-one]"))
    assert page.select_one("tr[data-slug=fixture-single] a")["href"] == "/author/questions/fixture-single"
    assert "propose an edit" in text(page.select_one("tr[data-slug=fixture-single]"))


def test_the_editor_shows_only_the_fields_of_the_questions_type(author_client: TestClient) -> None:
    assert create_question(author_client, "one-answer").status_code == 303
    page = parse(author_client.get("/author/questions/one-answer"))

    def shown(selector: str) -> bool:
        el = page.select_one(selector)
        assert el is not None, selector
        return not el.has_attr("hidden")

    assert shown(".answer-choices") and not shown(".answer-number")
    assert not shown(".exercise-fields") and not shown("[data-for-types=trace]")
    # Hidden fields are still in the form (they post their values: switching type and back
    # loses nothing), and a numeric question shows the number instead of the choices.
    assert page.select_one(".exercise-fields textarea[name=solution]") is not None
    made = create_question(author_client, "a-number", type="numeric", answer_value="3",
                           choice_text=["", "", "", ""], choice_correct=[], snippet="",
                           expect="", knobs="")
    assert made.status_code == 303, made.text
    page = parse(author_client.get("/author/questions/a-number"))
    assert shown(".answer-number") and not shown(".answer-choices")


def test_the_question_list_pages_fifty_at_a_time_and_keeps_its_filters(
    author_client: TestClient, client: TestClient,
) -> None:
    from app.authoring.views import PAGE_SIZE

    for i in range(PAGE_SIZE + 1):
        assert create_question(author_client, f"paged-{i:02d}", tags="paged").status_code == 303
    first = parse(author_client.get("/author"))
    assert len(first.select("tr[data-slug]")) == PAGE_SIZE
    assert "of 56" in first.select_one(".list-count").get_text()  # and the fixture bank's 5
    nxt = first.select_one(".pager a[rel=next]")["href"]
    second = parse(author_client.get(nxt))
    assert len(second.select("tr[data-slug]")) == 6
    assert second.select_one(".pager a[rel=prev]") is not None
    # A filter narrows the pages and the links keep it.
    tagged = parse(author_client.get("/author?tag=paged"))
    assert tagged.select_one(".pager a[rel=next]")["href"] == "/author?tag=paged&page=2"
    assert parse(author_client.get("/author?tag=paged&page=99")).select("tr[data-slug]")
