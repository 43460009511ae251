"""`bank verify` runs one run per core, and more only beside runs that wait.

CpuAdmission is driven here by a fake clock and a fake /proc/stat: these are the
decisions it makes, not the speed they buy (benchmarks and docs/performance.md).
"""

from __future__ import annotations

import threading

from app.verify.audit import IDLE_WINDOW_S, SAMPLE_EVERY_S, WAITING_AFTER_S, CpuAdmission


class Machine:
    """A two-core machine whose idle time the test sets, tick by tick."""

    def __init__(self) -> None:
        self.now = 0.0
        self.idle = 0
        self.total = 0

    def clock(self) -> float:
        return self.now

    def sample(self) -> tuple[int, int]:
        return self.idle, self.total

    def run(self, seconds: float, idle_cores: float) -> None:
        """Let `seconds` pass with `idle_cores` of the two cores idle (jiffies of 1 ms)."""
        ticks = round(seconds * 1000)
        self.now += seconds
        self.total += 2 * ticks
        self.idle += round(idle_cores * ticks)


def admission(machine: Machine, floor: int = 2, ceiling: int = 8) -> CpuAdmission:
    return CpuAdmission(floor, ceiling, cores=2, sample=machine.sample, clock=machine.clock)


def test_one_run_per_core_starts_whatever_the_machine_is_doing() -> None:
    machine = Machine()
    gate = admission(machine)
    machine.run(1.0, idle_cores=0.0)  # another program keeps both cores busy
    first, second = gate.enter(), gate.enter()
    assert first is not None and second is not None
    assert gate.enter() is None
    gate.leave(first)
    assert gate.enter() is not None


def test_a_third_run_starts_beside_two_that_only_wait() -> None:
    machine = Machine()
    gate = admission(machine)
    tickets = [gate.enter(), gate.enter()]
    assert None not in tickets
    machine.run(0.1, idle_cores=0.0)  # the two runs start up
    assert gate.enter() is None  # still young: they may be computing
    machine.run(WAITING_AFTER_S, idle_cores=2.0)  # then both block in a collective
    assert gate.enter() is not None
    assert gate.running == 3


def test_runs_that_keep_computing_keep_the_count_at_one_per_core() -> None:
    machine = Machine()
    gate = admission(machine)
    gate.enter(), gate.enter()
    for _ in range(20):
        machine.run(IDLE_WINDOW_S, idle_cores=0.1)
        assert gate.enter() is None
    assert gate.running == 2 and gate.peak == 2


def test_runs_beside_waiting_ones_are_at_most_one_per_core_at_a_time() -> None:
    machine = Machine()
    gate = admission(machine)
    gate.enter(), gate.enter()
    machine.run(WAITING_AFTER_S + 0.1, idle_cores=2.0)  # both wait
    assert gate.enter() is not None and gate.enter() is not None
    # Two young runs are computing now: a fifth waits until one of them is old or gone.
    assert gate.enter() is None
    assert gate.running == 4


def test_never_more_than_the_ceiling() -> None:
    machine = Machine()
    gate = admission(machine, ceiling=3)
    gate.enter(), gate.enter()
    machine.run(1.0, idle_cores=2.0)
    assert gate.enter() is not None
    machine.run(1.0, idle_cores=2.0)
    assert gate.enter() is None
    assert gate.peak == 3


def test_without_a_reading_of_the_cores_only_one_run_per_core() -> None:
    machine = Machine()
    gate = CpuAdmission(2, 8, cores=2, sample=lambda: None, clock=machine.clock)
    gate.enter(), gate.enter()
    machine.run(5.0, idle_cores=2.0)
    assert gate.enter() is None


def test_a_run_seen_waiting_leaves_its_place_to_runs_that_compute_while_it_lasts() -> None:
    machine = Machine()
    gate = admission(machine)
    waiting = [gate.enter(), gate.enter()]
    machine.run(WAITING_AFTER_S + 0.1, idle_cores=2.0)  # both block in a collective
    third = gate.enter()
    assert third is not None and gate.waiting == 2
    # The machine is busy now, but with the third run, not the two waiting ones: a
    # fourth still starts, and a fifth waits for one of the two that compute.
    machine.run(IDLE_WINDOW_S, idle_cores=0.0)
    fourth = gate.enter()
    assert fourth is not None
    machine.run(IDLE_WINDOW_S, idle_cores=0.0)
    assert gate.enter() is None
    gate.leave(third)
    assert gate.enter() is not None
    # A waiting run that ends gives its place back, and its mark goes with it.
    for ticket in waiting:
        assert ticket is not None
        gate.leave(ticket)
    assert gate.waiting == 0 and gate.running == 2
    assert gate.enter() is None


def test_an_old_run_computing_on_one_core_is_not_taken_for_waiting() -> None:
    machine = Machine()
    gate = admission(machine)
    gate.enter(), gate.enter()
    # One of the two computes on a core, the other waits: a core is idle, but the old
    # runs, not young ones, keep the other busy, so neither can be told waiting.
    for _ in range(40):  # two seconds of refused workers asking
        machine.run(0.05, idle_cores=1.0)
        assert gate.enter() is None
    assert gate.running == 2 and gate.waiting == 0


def test_nothing_starts_before_the_rank_pool_is_ready() -> None:
    machine, ready = Machine(), threading.Event()
    gate = CpuAdmission(2, 8, cores=2, sample=machine.sample, clock=machine.clock, ready=ready)
    machine.run(1.0, idle_cores=2.0)
    assert gate.enter() is None and gate.running == 0
    ready.set()
    assert gate.enter() is not None and gate.enter() is not None
    assert gate.enter() is None


def test_the_cores_are_read_once_a_tick_however_many_workers_ask() -> None:
    machine = Machine()
    reads = 0

    def sample() -> tuple[int, int]:
        nonlocal reads
        reads += 1
        return machine.sample()

    gate = CpuAdmission(2, 8, cores=2, sample=sample, clock=machine.clock)
    gate.enter(), gate.enter()
    machine.run(WAITING_AFTER_S + 0.1, idle_cores=2.0)
    before = reads
    for _ in range(16):  # sixteen refused workers asking at one moment
        gate.enter()
    assert reads == before + 1
    assert gate.running == 4  # two waiting, and two let in beside them on that one reading
    machine.run(SAMPLE_EVERY_S, idle_cores=2.0)
    gate.enter()
    assert reads == before + 2
