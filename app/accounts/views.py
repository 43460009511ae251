"""Sign-in and sign-out, learner sign-up and the learner's account page (download all data,
delete the account), and the admin's pages for accounts and the audit log."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response

from app.accounts import service
from app.accounts.models import ROLES, User
from app.accounts.sessions import clear_session_cookie, set_session_cookie
from app.classes import service as classes
from app.deps import (
    CSRF,
    AdminUser,
    ClockDep,
    CurrentLearner,
    FormDep,
    LearnerUser,
    OptionalUser,
    SessionDep,
    SettingsDep,
    client_ip,
    require_admin,
)
from app.errors import NotFound, RateLimited
from app.identity import LEARNER_COOKIE, LEARNER_COOKIE_MAX_AGE, fresh_learner_cookie
from app.learners import service as learners
from app.reports import service as reports
from app.templating import templates

router = APIRouter(include_in_schema=False)
admin = APIRouter(prefix="/admin", include_in_schema=False, dependencies=[Depends(require_admin)])


def _safe_next(target: str | None) -> str:
    """A local path to go to after signing in; anything else becomes /author."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/author"
    parts = urlsplit(target)
    if parts.scheme or parts.netloc:
        return "/author"
    return target


def _page(request: Request, name: str, ctx: dict[str, Any], status: int = 200, **kw: Any) -> Response:
    return templates.TemplateResponse(request, f"authoring/{name}", ctx, status_code=status, **kw)


@router.get("/login")
def login_page(request: Request, user: OptionalUser, next: str = "/author") -> Response:
    return _page(request, "login.html", {"user": user, "next": _safe_next(next), "username": ""})


@router.post("/login")
def login(
    request: Request, form: FormDep, db_session: SessionDep, settings: SettingsDep, _: CSRF
) -> Response:
    username = str(form.get("username") or "").strip()[:64]
    password = str(form.get("password") or "")
    target = _safe_next(str(form.get("next") or ""))
    result = service.authenticate(db_session=db_session, username=username, password=password,
                                  client_ip=client_ip(request),
                                  limit=settings.login_attempts_per_minute)
    ctx: dict[str, Any] = {"user": None, "next": target, "username": username}
    if result.limited:
        return _page(request, "login.html",
                     {**ctx, "error": "Too many failed sign-ins; wait a minute and try again."},
                     status=429, headers={"Retry-After": str(service.LOGIN_WINDOW_SECONDS)})
    if result.user is None:
        return _page(request, "login.html",
                     {**ctx, "error": "That username and password do not match an active account."},
                     status=401)
    if result.user.is_instructor and target.startswith(("/author", "/admin")):
        target = "/classes"
    if result.user.is_learner:
        if target.startswith(("/author", "/admin")):
            target = "/account"
        learners.claim_on_sign_in(db_session=db_session, user=result.user,
                                  browser_learner_id=str(request.state.learner_id))
    response = RedirectResponse(target, status_code=303)
    set_session_cookie(response, request, result.user)
    if result.user.is_learner:
        # The old anonymous id is empty now; the browser starts a new one for after sign-out.
        _new_anonymous_identity(response, request)
    return response


def _new_anonymous_identity(response: Response, request: Request) -> None:
    _learner, value = fresh_learner_cookie(request.app.state.settings.resolved_secret_key())
    response.set_cookie(LEARNER_COOKIE, value, max_age=LEARNER_COOKIE_MAX_AGE, path="/",
                        httponly=True, samesite="lax", secure=request.url.scheme == "https")


@router.post("/logout")
def logout(request: Request, db_session: SessionDep, user: OptionalUser, _: CSRF) -> Response:
    if user is not None:
        # Signing out ends every session of this user, so a copied cookie dies too.
        service.sign_out(db_session=db_session, user=user)
    response = RedirectResponse("/", status_code=303)
    clear_session_cookie(response, request)
    # Whoever uses this browser next starts with a new, empty anonymous identity.
    _new_anonymous_identity(response, request)
    return response


# Learner accounts ----------------------------------------------------------------------


def _account_page(request: Request, name: str, ctx: dict[str, Any], status: int = 200,
                  **kw: Any) -> Response:
    return templates.TemplateResponse(request, f"accounts/{name}", ctx, status_code=status, **kw)


def _after_signup(target: str | None) -> str:
    """Where a new account goes: a local page it came for (a class's join link), else /account."""
    safe = _safe_next(target)
    return safe if target and safe != "/author" else "/account?welcome=1"


@router.get("/signup")
def signup_page(request: Request, user: OptionalUser, next: str = "") -> Response:
    return _account_page(request, "signup.html", {"user": user, "username": "", "next": next})


@router.post("/signup")
def signup(request: Request, form: FormDep, db_session: SessionDep, user: OptionalUser,
           settings: SettingsDep, _: CSRF) -> Response:
    username = str(form.get("username") or "").strip()[:64]
    password = str(form.get("password") or "")
    target = str(form.get("next") or "")
    if user is not None:
        return _account_page(request, "signup.html",
                             {"user": user, "username": username, "next": target,
                              "error": "You are signed in already; sign out to make another account."},
                             status=409)
    try:
        done = learners.sign_up(db_session=db_session, username=username, password=password,
                                browser_learner_id=str(request.state.learner_id),
                                client_ip=client_ip(request), per_hour=settings.signups_per_hour)
    except service.AccountError as exc:
        return _account_page(request, "signup.html",
                             {"user": None, "username": username, "next": target,
                              "error": str(exc)}, status=422)
    except RateLimited as exc:
        return _account_page(request, "signup.html",
                             {"user": None, "username": username, "next": target,
                              "error": str(exc)}, status=429,
                             headers={"Retry-After": str(exc.retry_after_s)})
    response = RedirectResponse(_after_signup(target), status_code=303)
    set_session_cookie(response, request, done.user)
    # The history moved to the account; the old anonymous id (and any copy of its cookie)
    # names nothing now, and this browser gets a new one for after sign-out.
    _new_anonymous_identity(response, request)
    return response


def _account_ctx(db_session: Any, user: User, learner_id: str, now: datetime) -> dict[str, Any]:
    return {"user": user, "history": learners.history(db_session=db_session, learner_id=learner_id,
                                                      now=now),
            "reports": reports.my_reports(db_session=db_session, learner_id=learner_id),
            "classes": classes.learner_classes(db_session=db_session, user_id=user.id)}


@router.get("/account")
def account_page(request: Request, db_session: SessionDep, user: LearnerUser,
                 learner_id: CurrentLearner, clock: ClockDep, welcome: str = "") -> Response:
    return _account_page(request, "account.html",
                         {**_account_ctx(db_session, user, learner_id, clock.now()),
                          "welcome": bool(welcome)})


@router.get("/account/export.json")
def export_account(db_session: SessionDep, user: LearnerUser,
                   learner_id: CurrentLearner, clock: ClockDep) -> Response:
    data = learners.export_data(db_session=db_session, user=user, learner_id=learner_id,
                                now=clock.now())
    return Response(json.dumps(data, indent=2, ensure_ascii=False), media_type="application/json",
                    headers={"Content-Disposition":
                             f'attachment; filename="ddpdrill-{user.username}.json"'})


@router.post("/account/delete")
def delete_account(request: Request, form: FormDep, db_session: SessionDep, user: LearnerUser,
                   learner_id: CurrentLearner, clock: ClockDep, _: CSRF) -> Response:
    if str(form.get("confirm") or "").strip() != user.username:
        return _account_page(request, "account.html",
                             {**_account_ctx(db_session, user, learner_id, clock.now()),
                              "error": "Type your username to confirm deleting the account."},
                             status=422)
    counts = learners.delete_account(db_session=db_session, user=user)
    response = _account_page(request, "deleted.html", {"user": None, "counts": counts})
    clear_session_cookie(response, request)
    _new_anonymous_identity(response, request)
    return response


def _users_page(request: Request, db_session: Any, user: User, status: int = 200,
                **extra: Any) -> Response:
    return _page(request, "users.html",
                 {"user": user, "users": service.list_users(db_session=db_session), "roles": ROLES,
                  "new_username": "", **extra}, status=status)


@admin.get("/users")
def users(request: Request, db_session: SessionDep, user: AdminUser) -> Response:
    return _users_page(request, db_session, user)


@admin.post("/users")
def create_user(
    request: Request, form: FormDep, db_session: SessionDep, user: AdminUser, _: CSRF
) -> Response:
    username = str(form.get("username") or "").strip()
    role = str(form.get("role") or "author")
    try:
        service.create_user(db_session=db_session, username=username,
                            password=str(form.get("password") or ""), role=role, by=user)
    except service.AccountError as exc:
        return _users_page(request, db_session, user, status=422, error=str(exc),
                           new_username=username)
    return RedirectResponse("/admin/users", status_code=303)


@admin.post("/users/{user_id}")
def update_user(
    request: Request, user_id: int, form: FormDep, db_session: SessionDep, user: AdminUser, _: CSRF
) -> Response:
    target = service.get_user(db_session=db_session, user_id=user_id)
    if target is None:
        raise NotFound(f"No user {user_id}.")
    role = str(form.get("role") or target.role)
    active = form.get("active") == "1"
    if target.id == user.id and (role != target.role or not active):
        return _users_page(request, db_session, user, status=422,
                           error="You cannot demote or deactivate yourself; ask another admin.")
    try:
        service.update_user(db_session=db_session, user=target, role=role, active=active,
                            password=str(form.get("password") or "") or None, by=user)
    except service.AccountError as exc:
        return _users_page(request, db_session, user, status=422, error=str(exc))
    return RedirectResponse("/admin/users", status_code=303)


@admin.get("/audit")
def audit_log(
    request: Request, db_session: SessionDep, user: AdminUser, actor: str = "", action: str = ""
) -> Response:
    entries = service.list_audit(db_session=db_session, actor=actor or None, action=action or None)
    return _page(request, "audit.html", {"user": user, "entries": entries, "actor": actor,
                                         "action": action})


router.include_router(admin)
