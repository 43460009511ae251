"""Prometheus metrics: request latency by route, and the verify queue seen by operators.

Counters and histograms that workers update (run duration, lease reclaims) live in
this process's registry; the queue's state (depth, runs by status, workers holding
a lease) is read from the database at scrape time, so every web process reports the
same numbers however many workers and web processes share the database.

Under `serve --processes N` the web processes share one port, so a scrape reaches any
one of them: there every process writes its values to files in PROMETHEUS_MULTIPROC_DIR
(set by `serve` before prometheus_client is imported) and /metrics adds up all of them.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Request latency buckets (seconds): the targets are p99 ≤ 250 ms for answers.
REQUEST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
# Verify run buckets (seconds): most runs take 1–3 s, hangs wait out their timeout.
RUN_BUCKETS = (0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0)

# Whether values are kept in files shared by `serve`'s processes (prometheus_client reads
# the same variable once, when it is first imported).
MULTIPROCESS = bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))

# Process-wide: workers are threads of `serve` or of `ddpdrill worker`.
WORKER_REGISTRY = CollectorRegistry(auto_describe=True)
RUN_SECONDS = Histogram("ddpdrill_run_duration_seconds",
                        "Wall time of verify runs this server executed.",
                        ["outcome"], buckets=RUN_BUCKETS, registry=WORKER_REGISTRY)
LEASE_RECLAIMS = Counter("ddpdrill_lease_reclaims", "Runs claimed again after their lease ran out.",
                         registry=WORKER_REGISTRY)
RUNS_CLAIMED = Counter("ddpdrill_runs_claimed", "Runs claimed by this server's verify workers.",
                       registry=WORKER_REGISTRY)
# Set by WorkerPool; summed over live processes when several serve one port.
WORKERS_IN_PROCESS = Gauge("ddpdrill_workers_in_process",
                           "Verify worker threads running in this server's processes.",
                           multiprocess_mode="livesum", registry=WORKER_REGISTRY)


class QueueCollector(Collector):
    """Queue depth, runs by status and workers with a live lease, read from the database."""

    def __init__(self, read: Callable[[], dict[str, Any]]) -> None:
        self.read = read

    def collect(self) -> Iterator[GaugeMetricFamily]:
        try:
            state = self.read()
        except Exception:  # a scrape during a database outage reports what it can
            return
        by_status = GaugeMetricFamily("ddpdrill_runs", "Runs in the database by status.",
                                      labels=["status"])
        for status, count in sorted(state["by_status"].items()):
            by_status.add_metric([status], count)
        yield by_status
        yield GaugeMetricFamily("ddpdrill_queue_depth", "Runs waiting for a worker.",
                                value=state["queued"])
        yield GaugeMetricFamily("ddpdrill_workers_busy",
                                "Distinct workers holding a live lease on a run.",
                                value=state["busy_workers"])


class AppMetrics:
    """One app's registry: its request histogram and its view of the queue."""

    def __init__(self, read_queue: Callable[[], dict[str, Any]]) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        # With several processes the histogram's values go to its file and are read back,
        # with every other process's, by the MultiProcessCollector: registering it here
        # as well would count this process twice.
        self.requests = Histogram("ddpdrill_request_duration_seconds",
                                  "Time to answer HTTP requests, by route template.",
                                  ["method", "route", "status"], buckets=REQUEST_BUCKETS,
                                  registry=None if MULTIPROCESS else self.registry)
        self.registry.register(QueueCollector(read_queue))
        if MULTIPROCESS:
            MultiProcessCollector(self.registry)

    def exposition(self) -> bytes:
        if MULTIPROCESS:
            return generate_latest(self.registry)
        return generate_latest(self.registry) + generate_latest(WORKER_REGISTRY)


Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_networks(spec: str) -> list[Network] | None:
    """The CIDRs of DDPDRILL_METRICS_ALLOW; None for "*" (everyone)."""
    parts = [p.strip() for p in spec.split(",") if p.strip()]
    if "*" in parts:
        return None
    return [ipaddress.ip_network(p, strict=False) for p in parts]


def address_in(host: str, networks: list[Network] | None) -> bool:
    """True when the client address lies in one of the networks (or every address is allowed)."""
    if networks is None:
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:  # "testclient", a Unix socket: no network address to admit
        return False
    return any(address in n for n in networks)
