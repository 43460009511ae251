"""`python -m app.cli`: the `ddpdrill` command without its console script."""

from app.cli import main

main()
