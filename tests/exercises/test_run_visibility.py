"""Who may read which run, tried as an attacker would: every run id enumerated by an anonymous
browser, a learner account, another learner and an author.

An exercise's reference solution, starter and checks run at import (to prefill the cache);
those runs print the answer and are for authors only. A learner's own code is theirs alone,
and even they never see the checks appended to it.
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.db import session_scope
from app.questions.bank import load_bank
from app.questions.models import QuestionRevision
from app.questions.service import import_bank, revision_doc
from app.settings import Settings
from app.verify import results, service
from app.verify.audit import queue_published
from app.verify.models import PRIORITY_PRIVATE, Run
from app.verify.worker import Worker
from tests.authoring.helpers import create_question, editor_data, htmx
from tests.exercises.helpers import SLUG, SOLUTION, STARTER
from tests.factories import FIXTURE_BANK, PASSWORD, Account, login, make_request, parse, post_account_form

ROUTES = ("/runs/{id}", "/api/v1/runs/{id}")


def _reachable(client: TestClient, run_id: int) -> list[int]:
    return [client.get(route.format(id=run_id)).status_code for route in ROUTES]


def test_no_learner_can_read_an_exercises_reference_starter_or_checks_by_enumerating_ids(
    ex_client: TestClient, session_factory: sessionmaker[Session],
    new_client: Callable[..., TestClient], make_user: Callable[..., Account],
) -> None:
    queue_published(session_factory)
    with session_scope(session_factory) as s:
        ids = list(s.scalars(select(Run.id)))
        texts = [r.snippet_text for r in s.scalars(select(Run))]
    assert ids, "importing the exercise bank queues its reference and starter runs"
    assert any(SOLUTION in t for t in texts)

    learner = new_client()
    post_account_form(learner, "/signup", "form.signup-form", "lena", PASSWORD)
    make_user("alice", "author")
    author = new_client()
    assert login(author, "alice").status_code == 303

    for run_id in range(1, max(ids) + 5):
        assert _reachable(ex_client, run_id) == [404, 404], run_id
        # A signed-in learner account is not an author: it sees no more than anonymous.
        assert _reachable(learner, run_id) == [404, 404], run_id
    for run_id in ids:
        assert _reachable(author, run_id) == [200, 200]


def test_a_learners_own_exercise_run_is_theirs_alone_and_never_shows_the_checks(
    ex_client: TestClient, new_client: Callable[..., TestClient],
    session_factory: sessionmaker[Session], settings: Settings,
) -> None:
    started = ex_client.post(f"/api/v1/exercises/{SLUG}/run", json={"code": SOLUTION}).json()
    (run_id,) = started["run_ids"]
    worker = Worker(session_factory, settings)
    while worker.run_once():
        pass
    assert _reachable(ex_client, run_id) == [200, 200]
    other = new_client()
    assert _reachable(other, run_id) == [404, 404]

    page = parse(ex_client.get(f"/runs/{run_id}"))
    shown = page.select_one("details.snippet")
    assert shown is not None
    assert "the exercise's checks" not in shown.get_text()
    with session_scope(session_factory) as s:
        run = s.get(Run, run_id)
        assert run is not None and run.priority == PRIORITY_PRIVATE
        checks = run.snippet_text.rsplit("# ---- the exercise's checks ----", 1)[1]
    for line in (ln.strip() for ln in checks.splitlines()):
        if len(line) > 12:
            assert line not in shown.get_text()


def test_a_learners_own_run_shows_the_visible_checks_values_never_a_hidden_ones(
    ex_client: TestClient, session_factory: sessionmaker[Session], settings: Settings,
    new_client: Callable[..., TestClient], make_user: Callable[..., Account],
) -> None:
    code = SOLUTION + "\nreport('mine', 7)\n"
    (run_id,) = ex_client.post(f"/api/v1/exercises/{SLUG}/run", json={"code": code}).json()["run_ids"]
    worker = Worker(session_factory, settings)
    while worker.run_once():
        pass
    with session_scope(session_factory) as s:
        stored = results.result_of(s.get(Run, run_id))
    assert stored is not None and "hidden_total_seen" in stored.ranks[1].values  # it was measured
    result = ex_client.get(f"/api/v1/runs/{run_id}").json()["result"]
    for rank in result["ranks"]:
        assert set(rank["values"]) == {"total", "total_is_int"}
        assert rank["learner_values"] == {"mine": 7}
        assert not [e for e in rank["events"] if "hidden_total_seen" in str(e)]
    page = ex_client.get(f"/runs/{run_id}").text
    assert "hidden_total_seen" not in page and "total_is_int" in page
    result_page = ex_client.get(f"/exercises/{SLUG}/submissions/{run_id}").text
    assert "hidden_total_seen" not in result_page and "total_is_int" in result_page
    # An author reads everything that ran.
    make_user("alice", "author")
    author = new_client()
    assert login(author, "alice").status_code == 303
    ranks = author.get(f"/api/v1/runs/{run_id}").json()["result"]["ranks"]
    assert "hidden_total_seen" in ranks[1]["values"]


def test_every_kind_of_run_for_every_role(
    ex_client: TestClient, session_factory: sessionmaker[Session],
    new_client: Callable[..., TestClient], make_user: Callable[..., Account],
) -> None:
    """The whole matrix: published question, unpublished draft, an exercise's reference,
    starter and wrong solutions, a learner's own code, an author's own Run now; as an
    anonymous browser, the learner who owns the code, another learner, a learner account,
    an author and an admin."""
    with session_factory.begin() as s:  # the plain fixture bank beside the exercise
        import_bank(db_session=s, bank=load_bank(FIXTURE_BANK), retire_missing=False)
    queue_published(session_factory)
    owner, stranger = new_client(), new_client()
    started = owner.post(f"/api/v1/exercises/{SLUG}/run", json={"code": SOLUTION})
    assert started.status_code == 200, started.text
    mine = started.json()["run_ids"][0]
    account = new_client()
    post_account_form(account, "/signup", "form.signup-form", "lena", PASSWORD)
    make_user("alice", "author")
    make_user("root", "admin")
    author, admin = new_client(), new_client()
    assert login(author, "alice").status_code == 303 and login(admin, "root").status_code == 303
    # An author's own Run now: a private run of theirs.
    create_question(author, "own-draft")
    page = parse(author.get("/author/questions/own-draft"))
    ran = author.post("/author/run", data=editor_data(page, snippet="report('own', 1)\n"),
                      headers=htmx(page))
    assert ran.status_code == 200, ran.text
    with session_scope(session_factory) as s:
        kinds: dict[str, int] = {}
        for run in s.scalars(select(Run)):
            revision = s.get(QuestionRevision, run.question_revision_id) if run.question_revision_id else None
            if run.requested_by == "author:" + str(_user_id(s, "alice")):
                kinds["author's own"] = run.id
            elif run.priority == PRIORITY_PRIVATE:
                kinds["learner's own"] = run.id
            elif revision is not None and revision_doc(revision).is_exercise:
                text = run.snippet_text
                role = ("reference" if SOLUTION in text else
                        "starter" if STARTER in text else "wrong solution")
                kinds[f"exercise {role}"] = run.id
            else:
                kinds["published question"] = run.id
        draft = service.request_run(db_session=s, req=make_request("# a draft\nreport('d', 1)"))[0]
        kinds["unpublished draft"] = draft.id
    assert kinds["learner's own"] == mine
    assert {"author's own", "exercise reference", "exercise starter", "published question"} <= set(kinds)
    # A published question's run is a learner's once they answered that question
    # (app/reveal.py): before, it is no run at all.
    answerer = new_client()
    r = answerer.post("/api/v1/questions/fixture-single/attempts", json={"answer": "b"})
    assert r.status_code == 200, r.text
    sees = {
        "anonymous": set(),
        "owner": {"learner's own"},
        "another learner": set(),
        "learner account": set(),
        "a learner who answered": {"published question"},
        "author": set(kinds),
        "admin": set(kinds),
    }
    clients = {"anonymous": new_client(), "owner": owner, "another learner": stranger,
               "learner account": account, "a learner who answered": answerer,
               "author": author, "admin": admin}
    for who, client in clients.items():
        for kind, run_id in kinds.items():
            want = [200, 200] if kind in sees[who] else [404, 404]
            assert _reachable(client, run_id) == want, (who, kind)


def _user_id(s: Session, username: str) -> int:
    from app.accounts.models import User

    user = s.scalar(select(User).where(User.username == username))
    assert user is not None
    return user.id
