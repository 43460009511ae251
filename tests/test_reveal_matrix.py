"""Who sees a key, a run or a solution, by the one rule (app/reveal.py): every role against every
route that can show one, on SQLite and PostgreSQL, and a test that fails when such a route is
added tomorrow without being tried here.

One world per database, built once through the app's own forms and API (a test of its own per
route then only asks): the fixture banks, a run of `fixture-single` at two knob values, a class
with an assignment, a member's exercise run, and nine visitors:

- anonymous: a cookie, nothing answered;
- answered: an anonymous learner who answered `fixture-single` in a quiz, predicted and ran it,
  and missed it in a finished mock interview whose report they shared;
- live_mock: a learner account who did all that too, joined the class, and is now in a live
  mock interview that asks every question of the bank (and answered one of them there);
- signed_in: a learner account, nothing answered;
- member: a learner account in the class, who ran an exercise and gave up on it;
- instructor, other_instructor: the class's instructor, and one of another class;
- author, admin.

A route's probe says whether the thing the rule guards reached the visitor (a key or an
explanation, a measured run, a grade, a solution, someone else's work), and each route names
the roles that may see it; every other role must not.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pwdlib import PasswordHash
from pwdlib.hashers.argon2 import Argon2Hasher
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.accounts import passwords
from app.clock import FixedClock
from app.db import make_engine, make_sessionmaker, session_scope
from app.deps import require_admin, require_author
from app.main import create_app
from app.settings import Settings
from app.verify.models import PRIORITY_PRIVATE, Run
from app.verify.worker import Worker
from tests.databases import empty
from tests.exercises.helpers import SLUG as EXERCISE
from tests.factories import (
    EXERCISE_BANK,
    FIXTURE,
    FIXTURE_BANK,
    T0,
    VARIANT_BANK,
    api_routes,
    create_account,
    form_fields,
    htmx_headers,
    import_folder,
    login,
    parse,
    shown_slug,
    start_quiz,
)

Q = "fixture-single"  # the question whose key, runs and grades are guarded
Q2 = "fixture-numeric"  # the question the answering routes answer (again and again)
TALK = "step-time-doubled-talk"
TALK_TEXT = ("I would pin the job to yesterday's image first, then compare per-rank step times "
             "across nodes to find a straggler before profiling it.")
EXPLAINED = "SENTINEL-EXPLANATION-SINGLE"
SOLUTION_LINE = "dist.all_reduce(t)"

ROLES = ("anonymous", "answered", "live_mock", "signed_in", "member", "instructor",
         "other_instructor", "author", "admin")
ALL = frozenset(ROLES)
NOBODY: frozenset[str] = frozenset()
# Who may see Q's key and runs: who answered it (and is in no live mock asking it), and staff.
Q_SEERS = frozenset({"answered", "author", "admin"})
ACCOUNTS = {"live_mock": ("lev", "learner"), "signed_in": ("sam", "learner"),
            "member": ("mona", "learner"), "instructor": ("ida", "instructor"),
            "other_instructor": ("otto", "instructor"), "author": ("alice", "author"),
            "admin": ("root", "admin")}


@dataclass
class World:
    clients: dict[str, TestClient]
    csrf: dict[str, str]
    class_id: int = 0
    assignment_id: int = 0
    quizzes: dict[str, str] = field(default_factory=dict)  # role -> URL of its Q item
    mocks: dict[str, str] = field(default_factory=dict)  # "answered", "live_mock" (finished), "live"
    shares: dict[str, str] = field(default_factory=dict)  # role -> its report's share path
    runs: dict[str, int] = field(default_factory=dict)  # "q1", "q2", "exercise"
    submission: str = ""
    talk: int = 0  # the member's talk-through answer
    snapshots: dict[str, Any] = field(default_factory=dict)


def _csrf(client: TestClient) -> str:
    field_ = parse(client.get("/login")).select_one("input[name=csrf_token]")
    assert field_ is not None
    return str(field_["value"])


def _drain(factory: sessionmaker[Session], settings: Settings) -> None:
    worker = Worker(factory, settings)
    while worker.run_once():
        pass


def _answer_quiz(client: TestClient) -> str:
    """A quiz of the basics answered right through its forms; the URL of its item asking Q."""
    url = start_quiz(client, topics="basics", count="3")
    base = url.rsplit("/", 1)[0]
    where = ""
    for pos in range(1, 4):
        page = parse(client.get(f"{base}/{pos}"))
        slug = shown_slug(page)
        where = f"{base}/{pos}" if slug == Q else where
        action, hidden = form_fields(page, "form.answer-form")
        r = client.post(action, data={**hidden, "answer": FIXTURE[slug]["right"]},
                        headers=htmx_headers(page))
        assert r.status_code == 200, r.text
    assert where
    return where


def _finished_mock_missing_q(client: TestClient) -> tuple[str, str]:
    """A mock interview in which Q is answered wrong, finished and shared: (id, share path)."""
    mock = client.post("/api/v1/mock-interviews", json={"minutes": 25}).json()
    [item] = [i for i in mock["items"] if i["slug"] == Q]
    r = client.post(f"/api/v1/mock-interviews/{mock['id']}/answers",
                    json={"position": item["position"], "answer": FIXTURE[Q]["wrong"]})
    assert r.status_code == 201, r.text
    assert client.post(f"/api/v1/mock-interviews/{mock['id']}/finish").status_code == 200
    action, hidden = form_fields(parse(client.get(f"/mock/{mock['id']}/report")), "#share form")
    assert client.post(action, data=hidden).status_code == 200
    link = parse(client.get(f"/mock/{mock['id']}/report")).select_one("a.share-link")
    assert link is not None
    return mock["id"], "/" + str(link["href"]).split("/", 3)[3]


def _build(app: Any, factory: sessionmaker[Session], settings: Settings,
           clock: FixedClock) -> World:
    from tests.classes.helpers import add_assignment, join, join_path, make_class

    clients = {role: TestClient(app) for role in ROLES}
    for role, (name, kind) in ACCOUNTS.items():
        create_account(factory, name, kind)
        assert login(clients[role], name).status_code == 303
    w = World(clients, {role: _csrf(c) for role, c in clients.items()})
    c = clients

    # The class: an assignment of Q2 and another question; mona and lev in it; otto's beside it.
    w.class_id = make_class(c["instructor"])
    r = add_assignment(c["instructor"], w.class_id, questions=[Q2, "fixture-trace-join", TALK],
                       due=T0 + timedelta(days=365))
    assert r.status_code == 303, r.text
    w.assignment_id = int(parse(c["instructor"].get(f"/classes/{w.class_id}"))
                          .select_one("a[href*='/assignments/']:not([href$='/new'])")["href"]
                          .rsplit("/", 1)[1])
    make_class(c["other_instructor"], "Otto's class")
    for role in ("member", "live_mock"):
        assert join(c[role], join_path(c["instructor"], w.class_id)).status_code == 303

    # Q answered in a quiz, predicted and run (two knob values), missed in a shared mock.
    for role in ("answered", "live_mock"):
        w.quizzes[role] = _answer_quiz(c[role])
    page = parse(c["answered"].get(f"/questions/{Q}"))
    action, hidden = form_fields(page, "form#answer-form")
    r = c["answered"].post(action, data={**hidden, "answer": "b", "knob.scale": "1",
                                         "then_run": "1"})
    assert r.status_code == 200, r.text
    r = c["answered"].post(f"/api/v1/questions/{Q}/verify", json={"params": {"scale": 2}})
    assert r.status_code == 200, r.text
    for role in ("answered", "live_mock"):
        w.mocks[role], w.shares[role] = _finished_mock_missing_q(c[role])

    # The member's talk-through, for the instructor to mark.
    for step in ({"text": TALK_TEXT}, {"ticked": [0, 1]}):
        r = c["member"].post(f"/api/v1/questions/{TALK}/attempts", json={"answer": step})
        assert r.status_code == 200, r.text
    w.talk = int(r.json()["attempt_id"])

    # The member's exercise: one Run of junk, then "I give up".
    r = c["member"].post(f"/api/v1/exercises/{EXERCISE}/run", json={"code": "x = 0"})
    assert r.status_code == 200, r.text
    w.submission = r.json()["url"].rsplit("/", 1)[1]
    _drain(factory, settings)
    assert c["member"].post(f"/api/v1/exercises/{EXERCISE}/give-up",
                            json={"code": "x = 0"}).status_code == 200
    with session_scope(factory) as s:
        runs = list(s.scalars(select(Run).order_by(Run.id)))
        q_runs = [r for r in runs if r.requested_by and r.requested_by.startswith("learner:")
                  and r.priority != PRIORITY_PRIVATE]
        w.runs["q1"], w.runs["q2"] = (next(r.id for r in q_runs if r.params == {"scale": v})
                                      for v in (1, 2))
        w.runs["exercise"] = next(r.id for r in runs if r.priority == PRIORITY_PRIVATE)
        assert all(r.status == "done" for r in runs), [(r.id, r.status) for r in runs]

    # Later: lev's mock interview begins, asking every question (answered before or not), and
    # lev answers the class's other question in it.
    clock.advance(timedelta(minutes=30))
    w.snapshots["dashboard"] = c["live_mock"].get("/api/v1/dashboard").json()["weeks"]
    w.snapshots["dashboard_html"] = _accuracy(c["live_mock"])
    w.snapshots["class"] = c["live_mock"].get(f"/api/v1/classes/{w.class_id}/me").json()["work"]
    live = c["live_mock"].post("/api/v1/mock-interviews", json={"minutes": 25}).json()
    w.mocks["live"] = live["id"]
    assert {Q, Q2} <= {i["slug"] for i in live["items"]}
    [trace] = [i for i in live["items"] if i["slug"] == "fixture-trace-join"]
    r = c["live_mock"].post(f"/api/v1/mock-interviews/{live['id']}/answers",
                            json={"position": trace["position"], "answer": "a"})
    assert r.status_code == 201, r.text
    return w


def _accuracy(client: TestClient) -> list[str]:
    return [tr.get_text(" ", strip=True)
            for tr in parse(client.get("/dashboard")).select("table.accuracy tbody tr")]


@pytest.fixture(scope="module")
def world(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """The world, once per database (a module's tests only read it)."""
    engine = make_engine(database_url)
    factory = make_sessionmaker(engine)
    settings = Settings(database_url=database_url, secret_key="matrix-" + uuid.uuid4().hex,
                        data_dir=tmp_path_factory.mktemp("matrix"), bank_dir=FIXTURE_BANK,
                        workers=0)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(passwords, "password_hasher", PasswordHash(
            (Argon2Hasher(time_cost=1, memory_cost=1024, parallelism=1),)))
        # One bank of the three fixture banks' topics (an import is the whole bank).
        bank = tmp_path_factory.mktemp("bank")
        for source in (FIXTURE_BANK, VARIANT_BANK, EXERCISE_BANK):
            shutil.copytree(source, bank, dirs_exist_ok=True)
        import_folder(factory, bank)
        app = create_app(settings)
        clock = FixedClock(T0 + timedelta(hours=1))
        app.state.clock = clock
        try:
            with TestClient(app):
                world = _build(app, factory, settings, clock)
                yield world
                for c in world.clients.values():
                    c.close()
        finally:
            empty(engine)
            engine.dispose()


# What each route shows, asked of one visitor ----------------------------------------------


def _html_sees(text: str) -> bool:
    return EXPLAINED in text


def _get_sees(path: str, ok: Callable[[Any], bool] | None = None) -> Callable[[World, str], bool]:
    def see(w: World, role: str) -> bool:
        r = w.clients[role].get(path.format(**_ids(w)), follow_redirects=False)
        return r.status_code == 200 and (ok is None or ok(r))
    return see


def _ids(w: World) -> dict[str, Any]:
    return {"Q": Q, "Q2": Q2, "EX": EXERCISE, "class_id": w.class_id,
            "assignment_id": w.assignment_id, "sub": w.submission, "talk": w.talk, **w.runs,
            "a_item": w.quizzes["answered"], "l_item": w.quizzes["live_mock"],
            "a_mock": w.mocks["answered"], "l_mock": w.mocks["live_mock"],
            "live": w.mocks["live"], "a_share": w.shares["answered"],
            "l_share": w.shares["live_mock"]}


def _form_answer(w: World, role: str) -> bool:
    c = w.clients[role]
    r = c.post(f"/questions/{Q2}/answer", headers={"HX-Request": "true"},
               data={"csrf_token": w.csrf[role], "answer": FIXTURE[Q2]["right"],
                     "token": f"{int(T0.timestamp() * 1000)}.{uuid.uuid4().hex}"})
    return r.status_code == 200 and parse(r).select_one("section.graded") is not None


def _api_answer(w: World, role: str) -> bool:
    r = w.clients[role].post(f"/api/v1/questions/{Q2}/attempts",
                             json={"answer": FIXTURE[Q2]["right"]})
    return r.status_code == 200 and r.json()["correct_answer"] is not None


def _review_answer(w: World, role: str) -> bool:
    r = w.clients[role].post(f"/review/{Q2}/answer", headers={"HX-Request": "true"},
                             data={"csrf_token": w.csrf[role], "answer": FIXTURE[Q2]["right"]})
    return r.status_code == 200 and parse(r).select_one("section.graded") is not None


def _quiz_replay(item: str) -> Callable[[World, str], bool]:
    def see(w: World, role: str) -> bool:
        url = _ids(w)[item]
        r = w.clients[role].post(url + "/answer", headers={"HX-Request": "true"},
                                 data={"csrf_token": w.csrf[role], "answer": "b"})
        return _html_sees(r.text)
    return see


def _summary(item: str) -> Callable[[World, str], bool]:
    def see(w: World, role: str) -> bool:
        r = w.clients[role].get(_ids(w)[item].rsplit("/", 1)[0] + "/summary")
        return r.status_code == 200 and parse(r).select_one(".score-percent") is not None
    return see


def _verify_api(w: World, role: str) -> bool:
    return w.clients[role].post(f"/api/v1/questions/{Q}/verify",
                                json={"params": {"scale": 1}}).status_code == 200


def _verify_form(w: World, role: str) -> bool:
    r = w.clients[role].post(f"/questions/{Q}/verify", headers={"HX-Request": "true"},
                             data={"csrf_token": w.csrf[role], "knob.scale": "1"})
    return r.status_code == 200 and parse(r).select_one(".run") is not None


def _report_api(mock: str, method: str = "GET") -> Callable[[World, str], bool]:
    def see(w: World, role: str) -> bool:
        mock_id = _ids(w)[mock]
        path = f"/api/v1/mock-interviews/{mock_id}/" + ("report" if method == "GET" else "finish")
        r = w.clients[role].request(method, path)
        if r.status_code != 200:
            return False
        [row] = [i for i in r.json()["items"] if i["slug"] == Q]
        return row["correct_answer"] is not None or row["explanation"] is not None
    return see


def _dashboard(w: World, role: str) -> bool:
    """The live mock interview's answer counted (only lev has one)."""
    weeks = w.clients[role].get("/api/v1/dashboard").json()["weeks"]
    return role == "live_mock" and weeks != w.snapshots["dashboard"]


def _dashboard_html(w: World, role: str) -> bool:
    return role == "live_mock" and _accuracy(w.clients[role]) != w.snapshots["dashboard_html"]


def _q_grade_on_account(html: str) -> bool:
    rows = [tr.select("td") for tr in parse(html).select("table.history tbody tr")]
    return any(r[0].get_text(strip=True) == Q and r[1].get_text(strip=True) != "withheld"
               for r in rows)


def _account(w: World, role: str) -> bool:
    r = w.clients[role].get("/account", follow_redirects=False)
    return r.status_code == 200 and _q_grade_on_account(r.text)


def _account_delete_refused(w: World, role: str) -> bool:
    r = w.clients[role].post("/account/delete", follow_redirects=False,
                             data={"csrf_token": w.csrf[role], "confirm": "not my name"})
    return r.status_code == 422 and _q_grade_on_account(r.text)


def _export(w: World, role: str) -> bool:
    r = w.clients[role].get("/account/export.json", follow_redirects=False)
    return r.status_code == 200 and any(a["question"] == Q and a["correct"] is not None
                                        for a in r.json()["attempts"])


def _class_me(api: bool) -> Callable[[World, str], bool]:
    def see(w: World, role: str) -> bool:
        path = f"/api/v1/classes/{w.class_id}/me" if api else f"/classes/{w.class_id}/me"
        r = w.clients[role].get(path, follow_redirects=False)
        if r.status_code != 200:
            return False
        if role == "live_mock" and api:  # the live mock's answer not counted before the end
            assert r.json()["work"] == w.snapshots["class"]
        return True
    return see


# Who marks the class's talk-throughs: its instructor, and an admin.
GRADERS = frozenset({"instructor", "admin"})


def _talk_text(r: Any) -> bool:
    return "pin the job to yesterday" in r.text


def _mark(w: World, role: str) -> bool:
    r = w.clients[role].post(f"/classes/{w.class_id}/grading/{w.talk}", follow_redirects=False,
                             data={"csrf_token": w.csrf[role], "ticked": "0", "then": "stay"})
    return r.status_code == 303 and "/grading/" in r.headers["location"]


@dataclass(frozen=True)
class Probe:
    method: str
    path: str  # the route's template
    seers: frozenset[str]
    see: Callable[[World, str], bool]
    case: str = ""  # which of a route's probes

    @property
    def id(self) -> str:
        return f"{self.method} {self.path}{' ' + self.case if self.case else ''}"


def _get(path: str, seers: frozenset[str], concrete: str, case: str = "",
         ok: Callable[[Any], bool] | None = None) -> Probe:
    return Probe("GET", path, seers, _get_sees(concrete, ok), case)


def _explained(r: Any) -> bool:
    return _html_sees(r.text)


def _solution(r: Any) -> bool:
    return SOLUTION_LINE in r.text


def _has_result(r: Any) -> bool:
    return r.json()["result"] is not None


PROBES = [
    # The question, answered where it is asked (Q2: anyone may answer it, and then see its key,
    # except lev, whose live mock interview asks it).
    _get("/questions/{slug}", Q_SEERS, "/questions/{Q}", "Verify open",
         ok=lambda r: parse(r).select_one(".torchrun-download") is not None),
    Probe("POST", "/questions/{slug}/answer", ALL - {"live_mock"}, _form_answer),
    Probe("POST", "/api/v1/questions/{slug}/attempts", ALL - {"live_mock"}, _api_answer),
    Probe("POST", "/review/{slug}/answer", ALL - {"live_mock"}, _review_answer),
    _get("/review", NOBODY, "/review", ok=_explained),
    _get("/api/v1/questions/{slug}", NOBODY, "/api/v1/questions/{Q}",
         ok=lambda r: "explanation" in r.json() or "correct_answer" in r.json()),
    # Quizzes: a quiz is its learner's; lev's earlier one keeps Q's key while the mock runs.
    _get("/quizzes/{quiz_id}/{position}", frozenset({"answered"}), "{a_item}", "answered's",
         ok=_explained),
    _get("/quizzes/{quiz_id}/{position}", NOBODY, "{l_item}", "live_mock's", ok=_explained),
    Probe("POST", "/quizzes/{quiz_id}/{position}/answer", frozenset({"answered"}),
          _quiz_replay("a_item"), "answered's"),
    Probe("POST", "/quizzes/{quiz_id}/{position}/answer", NOBODY, _quiz_replay("l_item"),
          "live_mock's"),
    Probe("GET", "/quizzes/{quiz_id}/summary", frozenset({"answered"}), _summary("a_item"),
          "answered's"),
    Probe("GET", "/quizzes/{quiz_id}/summary", NOBODY, _summary("l_item"), "live_mock's"),
    # Runs: Verify, the run pages (a comparison too), the torchrun script, a learner's own run.
    Probe("POST", "/api/v1/questions/{slug}/verify", Q_SEERS, _verify_api),
    Probe("POST", "/questions/{slug}/verify", Q_SEERS, _verify_form),
    _get("/runs/{run_id}", Q_SEERS, "/runs/{q1}", "a question's"),
    _get("/runs/{run_id}", Q_SEERS, "/runs/{q2}?prev={q1}&slug={Q}", "compared"),
    _get("/runs/{run_id}", frozenset({"member", "author", "admin"}), "/runs/{exercise}",
         "a learner's exercise"),
    _get("/api/v1/runs/{run_id}", Q_SEERS, "/api/v1/runs/{q1}", "a question's", ok=_has_result),
    _get("/api/v1/runs/{run_id}", frozenset({"member", "author", "admin"}),
         "/api/v1/runs/{exercise}", "a learner's exercise", ok=_has_result),
    _get("/questions/{slug}/torchrun.py", Q_SEERS, "/questions/{Q}/torchrun.py"),
    _get("/plan/measure/{run_id}", NOBODY, "/plan/measure/{q1}", "a question's run"),
    _get("/", NOBODY, "/", ok=lambda r: "/runs/" in r.text or EXPLAINED in r.text),
    # Mock interviews: the reports (answered's shows Q's key to them; lev's keeps it while
    # the new one runs), their share links (read as the reader), the live one itself.
    _get("/mock/{mock_id}/report", frozenset({"answered"}), "/mock/{a_mock}/report",
         "answered's", ok=_explained),
    _get("/mock/{mock_id}/report", NOBODY, "/mock/{l_mock}/report", "live_mock's",
         ok=_explained),
    Probe("GET", "/api/v1/mock-interviews/{mock_id}/report", frozenset({"answered"}),
          _report_api("a_mock"), "answered's"),
    Probe("GET", "/api/v1/mock-interviews/{mock_id}/report", NOBODY, _report_api("l_mock"),
          "live_mock's"),
    Probe("POST", "/api/v1/mock-interviews/{mock_id}/finish", frozenset({"answered"}),
          _report_api("a_mock", "POST"), "answered's"),
    Probe("POST", "/api/v1/mock-interviews/{mock_id}/finish", NOBODY,
          _report_api("l_mock", "POST"), "live_mock's"),
    _get("/shared/mock/{token}", Q_SEERS, "{a_share}", "answered's", ok=_explained),
    _get("/shared/mock/{token}", Q_SEERS, "{l_share}", "live_mock's", ok=_explained),
    _get("/mock/{mock_id}", NOBODY, "/mock/{live}", "the live one", ok=_explained),
    _get("/api/v1/mock-interviews/{mock_id}", NOBODY, "/api/v1/mock-interviews/{live}",
         "the live one", ok=lambda r: "correct_answer" in r.text or EXPLAINED in r.text),
    # A learner's own numbers: the live mock interview's answers count nowhere before its end.
    Probe("GET", "/api/v1/dashboard", NOBODY, _dashboard),
    Probe("GET", "/dashboard", NOBODY, _dashboard_html),
    Probe("GET", "/account", NOBODY, _account),
    Probe("POST", "/account/delete", NOBODY, _account_delete_refused),
    Probe("GET", "/account/export.json", NOBODY, _export),
    # A class's work: its instructor's alone (a member sees their own).
    _get("/classes/{class_id}", frozenset({"instructor"}), "/classes/{class_id}",
         ok=lambda r: "mona" in r.text),
    _get("/classes/{class_id}/scores.csv", frozenset({"instructor"}),
         "/classes/{class_id}/scores.csv", ok=lambda r: "mona" in r.text),
    _get("/api/v1/classes/{class_id}", frozenset({"instructor"}), "/api/v1/classes/{class_id}",
         ok=lambda r: "mona" in r.text),
    _get("/classes/{class_id}/assignments/{assignment_id}", frozenset({"instructor"}),
         "/classes/{class_id}/assignments/{assignment_id}"),
    _get("/classes/{class_id}/grading", GRADERS, "/classes/{class_id}/grading",
         ok=lambda r: parse(r).select_one("table.talk-answers tr[data-attempt]") is not None),
    _get("/classes/{class_id}/grading/{attempt_id}", GRADERS,
         "/classes/{class_id}/grading/{talk}", ok=_talk_text),
    _get("/api/v1/classes/{class_id}/talk-answers", GRADERS,
         "/api/v1/classes/{class_id}/talk-answers", ok=_talk_text),
    Probe("POST", "/classes/{class_id}/grading/{attempt_id}", GRADERS, _mark),
    Probe("GET", "/classes/{class_id}/me", frozenset({"member", "live_mock"}), _class_me(False)),
    Probe("GET", "/api/v1/classes/{class_id}/me", frozenset({"member", "live_mock"}),
          _class_me(True)),
    # An exercise's reference solution: the member gave up; nobody else has.
    _get("/exercises/{slug}/solution", frozenset({"member"}), "/exercises/{EX}/solution",
         ok=_solution),
    _get("/api/v1/exercises/{slug}/solution", frozenset({"member"}),
         "/api/v1/exercises/{EX}/solution", ok=_solution),
    _get("/exercises/{slug}", NOBODY, "/exercises/{EX}", ok=_solution),
    _get("/exercises/{slug}/submissions/{token}", frozenset({"member"}),
         "/exercises/{EX}/submissions/{sub}"),
    _get("/api/v1/exercises/{slug}/submissions/{token}", frozenset({"member"}),
         "/api/v1/exercises/{EX}/submissions/{sub}"),
]

# Routes that show no key, run, solution or grade of anyone's, with the reason. A route under
# /author, /admin or /api/v1/stats needs an author or admin (tests/authoring/test_access.py
# tries each as every role): it is staff's to see everything.
KEYLESS = {
    "GET /healthz": "liveness",
    "GET /metrics": "counters for allowed networks",
    "GET /docs": "the API's documentation",
    "GET /static-gen/pygments.css": "a stylesheet",
    "POST /quizzes": "starts a quiz: a redirect to its first question",
    "GET /quizzes/{quiz_id}": "a redirect to the quiz's next question",
    "POST /quizzes/{quiz_id}/retry": "starts a quiz of the misses: a redirect",
    "GET /topics": "question lists",
    "GET /topics/{slug}": "question lists",
    "GET /api/v1/questions": "question summaries",
    "GET /api/v1/review/queue": "due cards as asked (asked_fields: never a key)",
    "GET /api/v1/review/schedule": "the learner's own FSRS parameters",
    "PUT /api/v1/review/schedule": "the learner's own desired retention",
    "POST /api/v1/review/schedule/fit": "queues a fit of the learner's own parameters",
    "GET /review/schedule": "the learner's own FSRS parameters",
    "POST /review/schedule": "the learner's own desired retention",
    "POST /review/schedule/fit": "queues a fit of the learner's own parameters",
    "GET /me/nav": "the due count",
    "POST /api/v1/questions/{slug}/reports": "files a problem report",
    "GET /api/v1/reports": "the learner's own problem reports",
    "GET /api/v1/reports/{report_id}": "one of the learner's own problem reports",
    "POST /questions/{slug}/report": "files a problem report",
    "GET /reports": "the learner's own problem reports",
    "POST /api/v1/exercises/{slug}/run": "queues the learner's own code; read through the "
                                         "submission routes",
    "POST /exercises/{slug}/run": "queues the learner's own code; read through the "
                                  "submission routes",
    "POST /api/v1/exercises/{slug}/give-up": "opens the solution to whoever gives up, by design, "
                                             "recorded as given up (door 5: tests/exercises)",
    "POST /exercises/{slug}/give-up": "opens the solution to whoever gives up, by design, "
                                      "recorded as given up (door 5: tests/exercises)",
    "POST /api/v1/mock-interviews": "starts a mock interview: its questions as asked",
    "POST /api/v1/mock-interviews/{mock_id}/answers": "no grade or key before the end (a "
                                                      "talk-through's rubric after its text, "
                                                      "by design)",
    "GET /mock": "the start form and the learner's own recent interviews",
    "POST /mock": "starts a mock interview: a redirect",
    "POST /mock/{mock_id}/{position}/answer": "no grade or key before the end: a redirect",
    "POST /mock/{mock_id}/finish": "a redirect to the report (probed above)",
    "POST /mock/{mock_id}/share": "makes or revokes the link (its page is probed above)",
    "POST /dashboard/goal": "the learner's own interview date",
    "GET /dashboard/plan": "the learner's own mastery and plan (review cards, no grade)",
    "GET /dashboard/readiness": "the learner's own forecast (review cards, no grade)",
    "GET /login": "a form",
    "POST /login": "signs in",
    "POST /logout": "signs out",
    "GET /signup": "a form",
    "POST /signup": "signs up",
    "GET /api/v1/classes": "the instructor's own classes, by name",
    "GET /classes": "the instructor's own classes, by name",
    "POST /classes": "makes a class",
    "GET /classes/join/{token}": "the join page: the class's name",
    "POST /classes/join/{token}": "joins",
    "POST /classes/{class_id}/link": "a new join link",
    "POST /classes/{class_id}/link/revoke": "revokes the join link",
    "GET /classes/{class_id}/assignments/new": "the assignment form",
    "POST /classes/{class_id}/assignments": "makes an assignment",
    "POST /classes/{class_id}/assignments/{assignment_id}/delete": "deletes an assignment",
    "POST /classes/{class_id}/me/leave": "leaves the class",
    "POST /classes/{class_id}/me/assignments/{assignment_id}/start": "starts the assignment's "
                                                                    "quiz or mock: a redirect",
    "POST /api/v1/plan": "the planner's arithmetic",
    "GET /plan": "the planner's form",
    "POST /plan/practise": "starts a quiz: a redirect",
    "POST /plan/measure": "queues a planner run (its page is probed above)",
}
STAFF_PREFIXES = ("/author", "/admin", "/api/v1/stats")


def _calls(dependant: Any) -> set[Any]:
    out = set()
    for dep in dependant.dependencies:
        out.add(dep.call)
        out |= _calls(dep)
    return out


def _staff_only(route: Any) -> bool:
    calls = _calls(route.dependant)
    return require_author in calls or require_admin in calls


def test_every_route_that_can_show_a_key_a_run_or_a_solution_is_tried_here(
    tmp_path: Any,
) -> None:
    """A route added tomorrow fails here until it is probed above, needs an author or admin,
    or is said (with its reason) to show nothing the rule guards."""
    app = create_app(Settings(database_url=f"sqlite:///{tmp_path / 'routes.db'}",
                              data_dir=tmp_path, workers=0))
    probed = {f"{p.method} {p.path}" for p in PROBES}
    routes, untried = set(), []
    for route in api_routes(app):
        for method in sorted(route.methods - {"HEAD"}):
            key = f"{method} {route.path}"
            routes.add(key)
            if key in probed or key in KEYLESS:
                continue
            if route.path.startswith(STAFF_PREFIXES):
                assert _staff_only(route), f"{key} is under a staff prefix without needing staff"
                continue
            untried.append(key)
    assert untried == [], "routes the visibility matrix does not try (probe them in PROBES, or "\
                          "say in KEYLESS why they show nothing the rule guards)"
    assert probed - routes == set(), "probes of routes that are gone"
    assert set(KEYLESS) - routes == set(), "KEYLESS names routes that are gone"
    assert probed & set(KEYLESS) == set()
    assert len(probed) >= 35


@pytest.mark.parametrize("probe", PROBES, ids=[p.id for p in PROBES])
def test_who_sees_it(world: World, probe: Probe) -> None:
    seen = {role for role in ROLES if probe.see(world, role)}
    assert seen == set(probe.seers), (
        f"{probe.id}: seen by {sorted(seen)}, should be {sorted(probe.seers)}; "
        f"wrongly: {sorted(seen - probe.seers)}, missing: {sorted(probe.seers - seen)}")
