"""`ddpdrill db upgrade` and `ddpdrill admin ...`: migrations and accounts."""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.markup import escape

from app.cli.common import db_session, err, out, settings_for_command

db_app = typer.Typer(help="Database migrations.", no_args_is_help=True)
admin_app = typer.Typer(help="Author, admin and instructor accounts.", no_args_is_help=True)


@db_app.command("upgrade")
def db_upgrade() -> None:
    """Apply every migration to the configured database."""
    from app.migrate import upgrade
    from app.settings import get_settings

    upgrade(get_settings().resolved_database_url)
    out.print("Database is at the latest revision.")


@admin_app.command("create")
def admin_create(
    username: Annotated[str, typer.Argument(help="The new account's username.")],
    role: Annotated[str, typer.Option(help="author, admin or instructor (or learner).")] = "author",
    password_stdin: Annotated[bool, typer.Option(
        "--password-stdin", help="Read the password from the first line of stdin (for scripts).")] = False,
) -> None:
    """Create an author, admin or instructor account. The password is prompted for, never an argument."""
    from app.accounts.models import ROLES
    from app.accounts.service import AccountError, create_user

    if role not in ROLES:
        err.print(f"--role must be one of: {', '.join(ROLES)}")
        raise typer.Exit(2)
    if password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = typer.prompt("Password", hide_input=True, confirmation_prompt=True)
    try:
        with db_session(settings_for_command()) as session:
            create_user(db_session=session, username=username, password=password, role=role,
                        via="ddpdrill admin create")
    except AccountError as exc:
        err.print(f"Not created: {escape(str(exc))}")
        raise typer.Exit(1) from None
    out.print(f"Created {role} {escape(username)}.")


@admin_app.command("list")
def admin_list() -> None:
    """List the accounts: username, role, whether active."""
    from app.accounts.service import list_users

    with db_session(settings_for_command()) as session:
        rows = [(u.username, u.role, u.active) for u in list_users(db_session=session)]
    for name, role, active in rows:
        print(f"{name}\t{role}\t{'active' if active else 'inactive'}")
