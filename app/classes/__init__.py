"""Classes an instructor runs: join links, members, assignments, the class page and its scores."""
