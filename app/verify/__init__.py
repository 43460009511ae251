"""Verify: run a question's snippet on real gloo ranks and show what torch measured.

The engine lives in app.verify.engine (no torch import in the caller); the code
that runs inside ranks is engine/harness.py, probes.py, leader.py and zygote.py.
"""
