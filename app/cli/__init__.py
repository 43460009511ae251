"""The `ddpdrill` command: serve, worker, verify, bank, db and admin (one module each)."""

from __future__ import annotations

import typer

from app.cli.admin import admin_app, db_app
from app.cli.bank import bank_app
from app.cli.serve import serve, worker
from app.cli.verify import verify_command

app = typer.Typer(help="DDP Drill: practise PyTorch distributed-training questions.",
                  no_args_is_help=True, add_completion=False)
app.command()(serve)
app.command()(worker)
app.command("verify")(verify_command)
app.add_typer(db_app, name="db")
app.add_typer(bank_app, name="bank")
app.add_typer(admin_app, name="admin")


def main() -> None:
    app(prog_name="ddpdrill")


if __name__ == "__main__":
    main()
