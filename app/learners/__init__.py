"""A learner's records across the features: claimed at sign-up, downloaded, deleted."""
