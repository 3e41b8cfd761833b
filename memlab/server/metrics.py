"""The service's metrics, served at ``GET /metrics`` in the Prometheus text format (version 0.0.4).

A few counters, gauges and one latency histogram, kept in this process (each ``--workers`` process
has its own; scrape each, or sum them in Prometheus). Labels never carry a user id or a key: the
route is its template (``/v1/users/{user_id}/search``) and every series carries the backend.

    memlab_http_requests_total{backend,method,route,status}
    memlab_http_request_duration_seconds{backend,method,route}   (histogram)
    memlab_http_requests_in_flight{backend}
    memlab_ingest_in_flight{backend}                              (the ingest queue: writes running or waiting)
    memlab_ingest_messages_total{backend}
    memlab_rate_limited_total{backend,scope}                      (scope: key, address)
    memlab_connections_opened_total, memlab_connections_dropped_total, memlab_request_timeouts_total
    memlab_backend_info{backend,persistent}                       (always 1)
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Iterable

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

Labels = tuple[tuple[str, str], ...]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(labels: Labels, extra: Labels = ()) -> str:
    pairs = (*labels, *extra)
    if not pairs:
        return ""
    return "{" + ",".join(f'{name}="{_escape(value)}"' for name, value in pairs) + "}"


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


class _Metric:
    kind = "untyped"

    def __init__(self, name: str, help_text: str) -> None:
        self.name = name
        self.help = help_text
        self._lock = threading.Lock()
        self._values: dict[Labels, float] = {}
        REGISTRY.append(self)

    @staticmethod
    def _key(labels: dict[str, str]) -> Labels:
        return tuple(sorted(labels.items()))

    def render(self) -> Iterable[str]:
        yield f"# HELP {self.name} {self.help}"
        yield f"# TYPE {self.name} {self.kind}"
        with self._lock:
            items = sorted(self._values.items())
        if not items and self.kind != "histogram":
            items = [((), 0.0)] if not self._label_names() else []
        for labels, value in items:
            yield f"{self.name}{_labels(labels)} {_number(value)}"

    def _label_names(self) -> bool:
        return False

    def reset(self) -> None:
        with self._lock:
            self._values.clear()


class Counter(_Metric):
    kind = "counter"

    def __init__(self, name: str, help_text: str, labelled: bool = False) -> None:
        super().__init__(name, help_text)
        self._labelled = labelled

    def _label_names(self) -> bool:
        return self._labelled

    def inc(self, amount: float = 1.0, **labels: str) -> None:
        key = self._key(labels)
        with self._lock:
            self._values[key] = self._values.get(key, 0.0) + amount


class Gauge(Counter):
    kind = "gauge"

    def dec(self, amount: float = 1.0, **labels: str) -> None:
        self.inc(-amount, **labels)

    def set(self, value: float, **labels: str) -> None:
        with self._lock:
            self._values[self._key(labels)] = value


class Histogram(_Metric):
    kind = "histogram"

    def __init__(self, name: str, help_text: str, buckets: tuple[float, ...] = BUCKETS) -> None:
        super().__init__(name, help_text)
        self.buckets = buckets
        self._series: dict[Labels, list[float]] = {}  # bucket counts..., +Inf count, sum

    def observe(self, value: float, **labels: str) -> None:
        key = self._key(labels)
        with self._lock:
            series = self._series.setdefault(key, [0.0] * (len(self.buckets) + 2))
            series[bisect_left(self.buckets, value)] += 1  # the first bucket whose bound is >= value
            series[-1] += value

    def render(self) -> Iterable[str]:
        yield f"# HELP {self.name} {self.help}"
        yield f"# TYPE {self.name} histogram"
        with self._lock:
            items = sorted((k, list(v)) for k, v in self._series.items())
        for labels, series in items:
            running = 0.0
            for bound, count in zip((*self.buckets, float("inf")), series[:-1]):
                running += count
                le = "+Inf" if bound == float("inf") else _number(bound)
                yield f"{self.name}_bucket{_labels(labels, (('le', le),))} {_number(running)}"
            yield f"{self.name}_sum{_labels(labels)} {_number(series[-1])}"
            yield f"{self.name}_count{_labels(labels)} {_number(running)}"

    def reset(self) -> None:
        with self._lock:
            self._series.clear()


REGISTRY: list[_Metric] = []

REQUESTS = Counter("memlab_http_requests_total", "HTTP requests answered, by route template and status", True)
LATENCY = Histogram("memlab_http_request_duration_seconds", "time from request to response, by route template")
IN_FLIGHT = Gauge("memlab_http_requests_in_flight", "HTTP requests being served", True)
INGEST_IN_FLIGHT = Gauge("memlab_ingest_in_flight", "ingest requests running or waiting for their user", True)
INGEST_MESSAGES = Counter("memlab_ingest_messages_total", "messages stored through POST .../messages", True)
RATE_LIMITED = Counter("memlab_rate_limited_total", "requests answered 429, by limit (key or address)", True)
BACKEND_INFO = Gauge("memlab_backend_info", "the backend this process serves (always 1)", True)
CONNECTIONS_OPENED = Counter("memlab_connections_opened_total", "TCP connections accepted")
CONNECTIONS_DROPPED = Counter("memlab_connections_dropped_total", "connections closed to stay within --max-connections")
REQUEST_TIMEOUTS = Counter(
    "memlab_request_timeouts_total", "requests that did not arrive within --request-timeout (408 or closed)"
)


def render() -> str:
    """Every metric in the Prometheus text format."""
    return "\n".join(line for metric in REGISTRY for line in metric.render()) + "\n"
