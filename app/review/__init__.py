"""FSRS review: cards, the due queue, the Review page and its API."""
