"""Issue 36, probed again as an attacker would, with cases no issue names: ids enumerated,
forms replayed and posted across learners, a cookie kept from before signing in, htmx fragments
called directly, the JSON API against the forms, a run comparison and the exports. Each test is
one probe; each closed door is a regression test here (SQLite and PostgreSQL).
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.clock import FixedClock
from app.db import session_scope
from app.quizzes.models import Attempt, Quiz
from app.settings import Settings
from app.verify.audit import queue_published
from app.verify.models import Run
from app.verify.worker import Worker
from tests.exercises.helpers import SLUG as EXERCISE
from tests.factories import (
    EXERCISE_BANK,
    FIXTURE,
    T0,
    Account,
    copy_bank,
    form_fields,
    import_folder,
    login,
    parse,
    start_quiz,
)

SLUG = "fixture-single"
EXPLAINED = "SENTINEL-EXPLANATION-SINGLE"


def _drain(factory: sessionmaker[Session], settings: Settings) -> None:
    worker = Worker(factory, settings)
    while worker.run_once():
        pass


def _csrf(client: TestClient) -> str:
    from tests.classes.helpers import csrf_of

    return csrf_of(client)


def _predict_and_run(client: TestClient) -> None:
    page = parse(client.get(f"/questions/{SLUG}"))
    action, hidden = form_fields(page, "form#answer-form")
    r = client.post(action, data={**hidden, "answer": "b", "knob.scale": "1", "then_run": "1"})
    assert r.status_code == 200, r.text


def _same_but_the_number(a: str, b: str) -> bool:
    return re.sub(r"\d+", "N", a) == re.sub(r"\d+", "N", b)


def test_enumerating_ids_tells_a_stranger_nothing(
    client: TestClient, new_client: Callable[..., TestClient],
    session_factory: sessionmaker[Session], settings: Settings, tmp_path: Path,
) -> None:
    """Runs, quizzes, mock interviews, reports, submissions and share links of another learner,
    tried by id: each is the same 404 as no such thing at all, through every route."""
    bank = copy_bank(tmp_path / "bank")
    shutil.copytree(EXERCISE_BANK, bank, dirs_exist_ok=True)
    import_folder(session_factory, bank)
    victim = client
    client.app.state.clock = FixedClock(T0)  # type: ignore[attr-defined]
    quiz = start_quiz(victim, topics="basics", count="1")
    quiz_id = quiz.split("/")[2]
    mock = victim.post("/api/v1/mock-interviews", json={"minutes": 25}).json()
    victim.post(f"/api/v1/mock-interviews/{mock['id']}/finish")
    page = parse(victim.get(f"/mock/{mock['id']}/report"))
    action, hidden = form_fields(page, "#share form")
    victim.post(action, data=hidden)
    share = parse(victim.get(f"/mock/{mock['id']}/report")).select_one("a.share-link")["href"]
    share = "/" + str(share).split("/", 3)[3]
    r = victim.post(f"/api/v1/exercises/{EXERCISE}/run", json={"code": "x = 0"})
    assert r.status_code == 200, r.text
    token = r.json()["url"].rsplit("/", 1)[1]
    assert victim.post(f"/api/v1/questions/{SLUG}/attempts", json={"answer": "a"}).status_code \
        == 200
    report = victim.post(f"/api/v1/questions/{SLUG}/reports",
                         json={"kind": "unclear", "comment": "a private note"})
    assert report.status_code == 201, report.text
    with session_scope(session_factory) as s:
        run_ids = list(s.scalars(select(Run.id)))
    assert run_ids

    stranger = new_client()
    csrf = _csrf(stranger)
    # Runs, existing or not: one answer, whatever the route.
    for path in ("/runs/{}", "/api/v1/runs/{}", "/plan/measure/{}"):
        bodies = []
        for run_id in [*run_ids, max(run_ids) + 1, max(run_ids) + 1000]:
            for headers in ({}, {"HX-Request": "true"}):
                r = stranger.get(path.format(run_id), headers=headers)
                assert r.status_code == 404, (path, run_id, r.status_code)
                bodies.append(r.text)
        assert all(_same_but_the_number(bodies[0], b) for b in bodies[::2]), path
    # The victim's quiz, interview, report, submission and a share link one letter off.
    for path in (f"/quizzes/{quiz_id}", f"/quizzes/{quiz_id}/1", f"/quizzes/{quiz_id}/summary",
                 f"/mock/{mock['id']}", f"/mock/{mock['id']}/report",
                 f"/api/v1/mock-interviews/{mock['id']}",
                 f"/api/v1/mock-interviews/{mock['id']}/report",
                 f"/api/v1/reports/{report.json()['id']}",
                 f"/exercises/{EXERCISE}/submissions/{token}",
                 f"/api/v1/exercises/{EXERCISE}/submissions/{token}",
                 share[:-1] + ("A" if share[-1] != "A" else "B")):
        r = stranger.get(path, follow_redirects=False)
        assert r.status_code == 404 and "a private note" not in r.text, (path, r.status_code)
    for path in (f"/quizzes/{quiz_id}/retry", f"/quizzes/{quiz_id}/1/answer",
                 f"/mock/{mock['id']}/finish", f"/mock/{mock['id']}/share",
                 f"/mock/{mock['id']}/1/answer"):
        r = stranger.post(path, data={"csrf_token": csrf, "answer": "a"}, follow_redirects=False)
        assert r.status_code == 404, (path, r.status_code)
    for path in (f"/api/v1/mock-interviews/{mock['id']}/finish",):
        assert stranger.post(path).status_code == 404
    assert stranger.post(f"/api/v1/mock-interviews/{mock['id']}/answers",
                         json={"position": 1, "answer": "a"}).status_code == 404


def test_forms_and_keys_replayed_across_learners_are_the_replayers_own(
    client: TestClient, new_client: Callable[..., TestClient],
) -> None:
    """A learner's form token, Idempotency-Key or CSRF token, replayed by another learner,
    brings back nothing of the first learner's answer."""
    victim, other = client, new_client()
    page = parse(victim.get(f"/questions/{SLUG}"))
    action, hidden = form_fields(page, "form#answer-form")
    assert victim.post(action, data={**hidden, "answer": "a"}).status_code == 200
    api = victim.post(f"/api/v1/questions/{SLUG}/attempts", json={"answer": "a"},
                      headers={"Idempotency-Key": "shared-key"})
    assert api.status_code == 200
    # The victim's one-time token and CSRF token, in another browser: CSRF fails first.
    r = other.post(action, data={**hidden, "answer": "b"})
    assert r.status_code == 403
    # With the other's own CSRF token, the victim's form token is a fresh answer of theirs.
    r = other.post(action, data={**hidden, "csrf_token": _csrf(other), "answer": "b"})
    assert r.status_code == 200 and "already submitted" not in r.text
    assert parse(r).select_one("section.graded.right") is not None
    r = other.post(f"/api/v1/questions/{SLUG}/attempts", json={"answer": "b"},
                   headers={"Idempotency-Key": "shared-key"})
    assert r.status_code == 200 and r.json()["answer"] == "b" and r.json()["first_submission"]
    # The victim's replay is still the victim's first answer.
    again = victim.post(f"/api/v1/questions/{SLUG}/attempts", json={"answer": "b"},
                        headers={"Idempotency-Key": "shared-key"})
    assert again.status_code == 409 and again.json()["answer"] == "a"


def test_answers_given_signed_out_and_claimed_at_sign_in_are_not_class_work(
    client: TestClient, new_client: Callable[..., TestClient],
    make_user: Callable[..., Account], session_factory: sessionmaker[Session],
) -> None:
    """A member signs out, answers in a few anonymous windows (each shows its grade and key),
    and signs in from the one that did best: its answers move into the account as history, but
    the class still counts only what the account answered itself."""
    from tests.classes.helpers import add_assignment, join, join_path, make_class

    client.app.state.clock = FixedClock(T0 + timedelta(hours=1))  # type: ignore[attr-defined]
    make_user("ida", "instructor")
    make_user("lena", "learner")
    instructor = new_client()
    assert login(instructor, "ida").status_code == 303
    class_id = make_class(instructor)
    assert add_assignment(instructor, class_id, questions=[SLUG],
                          due=T0 + timedelta(days=30)).status_code == 303
    member = new_client()
    assert login(member, "lena").status_code == 303
    assert join(member, join_path(instructor, class_id)).status_code == 303

    windows = [new_client() for _ in range(3)]
    for window, guess in zip(windows, ("a", "c", "b"), strict=True):
        r = window.post(f"/api/v1/questions/{SLUG}/attempts", json={"answer": guess})
        assert r.status_code == 200 and r.json()["correct_answer"] == "b"
    best = windows[2]
    assert login(best, "lena").status_code == 303
    # The claimed answer is the account's history ...
    history = best.get("/account/export.json").json()["attempts"]
    assert [(a["question"], a["correct"]) for a in history] == [(SLUG, True)]
    # ... but not the class's work.
    [work] = best.get(f"/api/v1/classes/{class_id}/me").json()["work"]
    assert work["answered"] == 0 and work["score"] == 0.0, work
    [row] = instructor.get(f"/api/v1/classes/{class_id}").json()["members"]
    assert row["work"][0]["answered"] == 0
    # What the account answers itself counts, the first time.
    r = best.post(f"/api/v1/questions/{SLUG}/attempts", json={"answer": "a"})
    assert r.status_code == 200
    [work] = best.get(f"/api/v1/classes/{class_id}/me").json()["work"]
    assert work["answered"] == 1 and work["score"] == 0.0, work
    with session_scope(session_factory) as s:
        claimed = list(s.scalars(select(Attempt.claimed_at).order_by(Attempt.id)))
    assert [c is not None for c in claimed] == [False, False, True, False]


def test_a_cookie_kept_from_before_sign_in_reads_nothing_the_account_now_holds(
    client: TestClient, new_client: Callable[..., TestClient],
    make_user: Callable[..., Account], session_factory: sessionmaker[Session],
    settings: Settings,
) -> None:
    """Sign-in moves the browser's anonymous history into the account and gives the browser a
    new anonymous identity; a copy of the old cookie is a stranger to all of it: the quiz, the
    mock interview, the runs its answers opened."""
    make_user("lena", "learner")
    client.app.state.clock = FixedClock(T0)  # type: ignore[attr-defined]
    quiz = start_quiz(client, topics="basics", count="1")
    _predict_and_run(client)
    _drain(session_factory, settings)
    mock = client.post("/api/v1/mock-interviews", json={"minutes": 25}).json()
    client.post(f"/api/v1/mock-interviews/{mock['id']}/finish")
    with session_scope(session_factory) as s:
        [run_id] = s.scalars(select(Run.id))
    assert client.get(f"/runs/{run_id}").status_code == 200
    kept = new_client()
    for name, value in client.cookies.items():
        kept.cookies.set(name, value)
    assert login(client, "lena").status_code == 303
    assert client.get(f"/runs/{run_id}").status_code == 200  # the account's now
    assert client.get(quiz).status_code == 200
    for path in (quiz, f"/runs/{run_id}", f"/api/v1/runs/{run_id}",
                 f"/api/v1/mock-interviews/{mock['id']}", f"/mock/{mock['id']}",
                 f"/questions/{SLUG}/torchrun.py"):
        r = kept.get(path, follow_redirects=False)
        assert r.status_code in (404, 409), (path, r.status_code)
    assert kept.post(f"/api/v1/questions/{SLUG}/verify",
                     json={"params": {"scale": 1}}).status_code == 409
    with session_scope(session_factory) as s:
        owners = set(s.scalars(select(Quiz.learner_id)))
    assert len(owners) == 1  # every quiz (the mock's too) is the account's


def test_a_run_comparison_shows_no_run_the_visitor_may_not_see(
    variant_client: TestClient, new_client: Callable[..., TestClient],
    session_factory: sessionmaker[Session], settings: Settings,
) -> None:
    """A learner who answered one variant of a measured question puts another variant's run
    (or another learner's exercise run) in the comparison (`prev`) of their own run: it is
    left out, as if there were none."""
    slug = "allreduce-bytes-per-rank"
    api = f"/api/v1/questions/{slug}"
    assert queue_published(session_factory) == 4
    _drain(session_factory, settings)
    client = variant_client
    v = client.get(api).json()["variant"]
    world_size, mib = [(2, 1), (2, 4), (4, 1), (4, 4)][v]
    key = 2 * (world_size - 1) / world_size * mib * 2**20
    assert client.post(f"{api}/attempts", json={"variant": v, "answer": key}).json()["correct"]
    mine = client.post(f"{api}/verify", json={"variant": v}).json()["run_id"]
    with session_scope(session_factory) as s:
        others = [r.id for r in s.scalars(select(Run)) if r.id != mine]
    assert len(others) == 3
    for other in others:
        assert client.get(f"/runs/{other}").status_code == 404
        for headers in ({}, {"HX-Request": "true"}):
            page = client.get(f"/runs/{mine}?slug={slug}&prev={other}", headers=headers)
            assert page.status_code == 200
            assert parse(page).select_one("section.compare") is None, other
        r = client.post(f"/questions/{slug}/verify", headers={"HX-Request": "true"},
                        data={"csrf_token": _csrf(client), "variant": str(v), "prev": str(other)})
        assert r.status_code == 200
        fragment = parse(r)
        assert fragment.select_one(".run-before") is None and \
            fragment.select_one("section.compare") is None, other


def test_htmx_fragments_called_directly_obey_the_rule(
    client: TestClient, new_client: Callable[..., TestClient],
    session_factory: sessionmaker[Session], settings: Settings,
) -> None:
    """Each fragment route a page polls or swaps in, called by hand without the page: no run
    before answering, no other learner's submission or quiz."""
    owner = client
    _predict_and_run(owner)
    _drain(session_factory, settings)
    quiz = start_quiz(owner, topics="basics", count="1")
    with session_scope(session_factory) as s:
        [run_id] = s.scalars(select(Run.id))
    hx = {"HX-Request": "true"}
    stranger = new_client()
    csrf = _csrf(stranger)
    assert stranger.get(f"/runs/{run_id}?slug={SLUG}", headers=hx).status_code == 404
    r = stranger.post(f"/questions/{SLUG}/verify", headers=hx,
                      data={"csrf_token": csrf, "knob.scale": "1"})
    assert r.status_code == 409 and parse(r).select_one(".run") is None
    r = stranger.post(quiz + "/answer", headers=hx, data={"csrf_token": csrf, "answer": "b"})
    assert r.status_code == 404
    # And the owner's fragment is theirs.
    assert owner.get(f"/runs/{run_id}?slug={SLUG}", headers=hx).status_code == 200


def test_the_json_api_and_the_forms_refuse_alike(
    variant_client: TestClient, new_client: Callable[..., TestClient],
) -> None:
    """The same refusals whichever way a learner answers: another variant than the drawn one,
    and a question of their live mock interview (API, question page, Review, each 409 with no
    key)."""
    client = variant_client
    slug = "ring-send-volume"
    drawn = client.get(f"/api/v1/questions/{slug}").json()["variant"]
    other = (drawn + 1) % 8
    csrf = _csrf(client)
    r = client.post(f"/api/v1/questions/{slug}/attempts", json={"answer": "1", "variant": other})
    assert r.status_code == 409 and f"variant {drawn}" in r.json()["detail"]
    for path in (f"/questions/{slug}/answer", f"/review/{slug}/answer"):
        r = client.post(path, data={"csrf_token": csrf, "variant": str(other), "answer": "1"},
                        headers={"HX-Request": "true"})
        assert r.status_code == 409 and f"variant {drawn}" in r.text, path
    mock = client.post("/api/v1/mock-interviews", json={"minutes": 25}).json()
    [item] = [i for i in mock["items"] if i["slug"] == slug]
    r = client.post(f"/api/v1/questions/{slug}/attempts",
                    json={"answer": "1", "variant": item["variant"]})
    assert r.status_code == 409 and "correct_answer" not in r.json()
    for path in (f"/questions/{slug}/answer", f"/review/{slug}/answer"):
        r = client.post(path, headers={"HX-Request": "true"},
                        data={"csrf_token": csrf, "variant": str(item["variant"]), "answer": "1"})
        assert r.status_code == 409 and "mock interview" in r.text, path
        assert parse(r).select_one("section.graded") is None


def test_exports_and_the_csv_carry_no_key_and_no_one_elses_work(
    client: TestClient, new_client: Callable[..., TestClient],
    make_user: Callable[..., Account],
) -> None:
    from tests.classes.helpers import add_assignment, join, join_path, make_class

    client.app.state.clock = FixedClock(T0 + timedelta(hours=1))  # type: ignore[attr-defined]
    for name, role in (("ida", "instructor"), ("otto", "instructor"), ("lena", "learner"),
                       ("olga", "learner")):
        make_user(name, role)
    ida, otto, lena, olga = (new_client() for _ in range(4))
    for browser, name in ((ida, "ida"), (otto, "otto"), (lena, "lena"), (olga, "olga")):
        assert login(browser, name).status_code == 303
    class_id = make_class(ida)
    assert add_assignment(ida, class_id, questions=[SLUG, "fixture-multi"],
                          due=T0 + timedelta(days=30)).status_code == 303
    assert join(lena, join_path(ida, class_id)).status_code == 303
    for slug in (SLUG, "fixture-multi"):
        lena.post(f"/api/v1/questions/{slug}/attempts", json={"answer": FIXTURE[slug]["wrong"]})
    olga.post(f"/api/v1/questions/{SLUG}/attempts", json={"answer": "b"})
    csv = ida.get(f"/classes/{class_id}/scores.csv")
    assert csv.status_code == 200 and "lena" in csv.text and "olga" not in csv.text
    assert "SENTINEL" not in csv.text and "fixture-single" not in csv.text
    assert otto.get(f"/classes/{class_id}/scores.csv").status_code == 404
    assert lena.get(f"/classes/{class_id}/scores.csv").status_code in (401, 403)
    data = lena.get("/account/export.json").json()
    assert {a["question"] for a in data["attempts"]} == {SLUG, "fixture-multi"}
    assert "olga" not in str(data) and "SENTINEL" not in str(data)
