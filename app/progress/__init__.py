"""The dashboard, the readiness forecast and the plan."""
