"""Item statistics: how each question revision performs, for authors."""
