"""Problem reports: learners file them, authors work through them in their inbox."""
