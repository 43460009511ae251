"""The planner: the arithmetic of scale (memory, FLOPs, time, bubble, traffic, checkpoint
interval) as pure functions (`formulas.py`), a whole layout evaluated by `service.py`, the
/plan page and POST /api/v1/plan, and "measure it small" on real gloo ranks (`small.py`)."""
