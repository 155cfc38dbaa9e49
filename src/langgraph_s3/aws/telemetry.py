"""OpenTelemetry spans and metrics for every saver and store call, and a debug log line.

Optional (``pip install "langgraph-s3[otel]"``): with no OpenTelemetry SDK configured
(or none installed) nothing is recorded and a call costs nothing more. With one,
each public call (``aget_tuple``, ``aput``, ``alist``, ``abatch``...) is a span
``langgraph_s3.<call>`` whose attributes say what it cost: ``langgraph_s3.requests``,
``.round_trips``, ``.bytes_sent``, ``.retries`` (attempts beyond one per request),
and the thread and namespace when the call names them. The same figures go to the
meter ``langgraph_s3`` (counters ``langgraph_s3.requests`` and
``langgraph_s3.bytes_sent``, histograms ``langgraph_s3.round_trips`` and
``langgraph_s3.duration`` in ms), labelled by call. The ``langgraph_s3.calls`` logger
writes the same at DEBUG level. Nothing secret is recorded: no values, keys or
credentials; thread ids and namespaces only.

Each HTTP attempt to AWS is a span of its own, ``S3.GetObject``, ``DynamoDB.Query``
and so on (kind CLIENT, child of the call's span), with the service, the operation,
the status code, AWS's request id and the resend count. OpenTelemetry's botocore
instrumentation cannot see these requests: it wraps botocore's synchronous
``_make_api_call``, which aiobotocore replaces. Other request-level tools can hook
the clients' events (``ClientFactory.add_hook``, botocore's ``before-send``).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

from langgraph_s3.aws.stats import CALL_LABEL, Counts
from langgraph_s3.core.tasks import BACKGROUND

logger = logging.getLogger("langgraph_s3.calls")
_ids = itertools.count()


_REQUEST: ContextVar[Any] = ContextVar("langgraph_s3_request_span", default=None)
"""The span of the attempt in flight in this task (one at a time, as for RequestStats)."""

SERVICES = {"s3": "S3", "dynamodb": "DynamoDB", "sts": "STS", "iam": "IAM"}

_missing = False
"""OpenTelemetry is not installed (a failed import is not cached by Python: remember it)."""


def _otel() -> tuple[Any, Any] | None:
    """(tracer, instruments) when an OpenTelemetry SDK is configured; else None."""
    global _missing
    if _missing:
        return None
    try:
        from opentelemetry.metrics import get_meter, get_meter_provider
        from opentelemetry.trace import get_tracer, get_tracer_provider
    except ImportError:
        _missing = True
        return None
    provider = get_tracer_provider()
    if type(provider).__name__ in ("ProxyTracerProvider", "NoOpTracerProvider"):
        return None
    global _instruments
    meter = get_meter("langgraph_s3")
    key = id(get_meter_provider())
    if _instruments is None or _instruments[0] != key:
        _instruments = (
            key,
            {
                "requests": meter.create_counter("langgraph_s3.requests", unit="1"),
                "bytes": meter.create_counter("langgraph_s3.bytes_sent", unit="By"),
                "rounds": meter.create_histogram("langgraph_s3.round_trips", unit="1"),
                "duration": meter.create_histogram("langgraph_s3.duration", unit="ms"),
            },
        )
    return get_tracer("langgraph_s3"), _instruments[1]


_instruments: tuple[int, dict[str, Any]] | None = None


def where(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, str]:
    """The thread and namespace a call names (a LangGraph config), or the store
    namespace (a tuple of labels); nothing else."""
    out: dict[str, str] = {}
    for value in (*args, *kwargs.values()):
        if isinstance(value, dict) and isinstance(value.get("configurable"), dict):
            conf = value["configurable"]
            if conf.get("thread_id") is not None:
                out["langgraph_s3.thread_id"] = str(conf["thread_id"])
                out["langgraph_s3.checkpoint_ns"] = str(conf.get("checkpoint_ns") or "")
            break
        if isinstance(value, tuple) and value and all(isinstance(x, str) for x in value):
            out["langgraph_s3.namespace"] = ".".join(value)
            break
    return out


@contextlib.contextmanager
def traced(obj: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Iterator[None]:
    """A span (and metrics, and a debug line) around one outermost call of ``obj``."""
    otel = _otel()
    debug = logger.isEnabledFor(logging.DEBUG)
    stats = getattr(getattr(obj, "clients", None), "stats", None)
    if (otel is None and not debug) or stats is None:
        yield
        return
    label = f"{CALL_LABEL}{next(_ids)}"
    stats.labels[label] = Counts()  # open: requests count into it until the call ends
    attrs = {"langgraph_s3.call": name, **where(args, kwargs)}
    start = time.perf_counter()
    span_cm = (
        otel[0].start_as_current_span(
            f"langgraph_s3.{name}",
            attributes=attrs,
            record_exception=False,
            set_status_on_exception=False,
        )
        if otel is not None
        else contextlib.nullcontext()
    )
    with span_cm as span, stats.label(label):
        try:
            yield
        except StopAsyncIteration:
            raise  # a listing's end, not an error
        except BaseException as exc:
            if span is not None:
                from opentelemetry.trace import Status, StatusCode

                span.record_exception(exc)
                span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            raise
        finally:
            counts = stats.labels.pop(label, None)
            ms = (time.perf_counter() - start) * 1000
            requests = counts.requests if counts is not None else 0
            figures = {
                "langgraph_s3.requests": requests,
                "langgraph_s3.round_trips": counts.round_trips if counts is not None else 0,
                "langgraph_s3.bytes_sent": counts.bytes_sent if counts is not None else 0,
                "langgraph_s3.retries": _retries(counts),
            }
            if span is not None:
                span.set_attributes(figures)
            if otel is not None:
                labels = {"langgraph_s3.call": name}
                inst = otel[1]
                inst["requests"].add(requests, labels)
                inst["bytes"].add(figures["langgraph_s3.bytes_sent"], labels)
                inst["rounds"].record(figures["langgraph_s3.round_trips"], labels)
                inst["duration"].record(ms, labels)
            if debug:
                logger.debug(
                    "%s %s: %d requests, %d round trips, %d bytes sent, %d retries, %.1f ms",
                    name,
                    attrs.get("langgraph_s3.thread_id", attrs.get("langgraph_s3.namespace", "")),
                    requests,
                    figures["langgraph_s3.round_trips"],
                    figures["langgraph_s3.bytes_sent"],
                    figures["langgraph_s3.retries"],
                    ms,
                )


def _retries(counts: Any) -> int:
    """Attempts that repeated a request botocore retried."""
    return int(getattr(counts, "retries", 0)) if counts is not None else 0


def request_hooks(service: str) -> list[tuple[str, Callable[..., None]]]:
    """botocore event handlers that make a CLIENT span per HTTP attempt of ``service``'s
    client, child of the current span (the call's): start at ``before-send``, end at
    ``needs-retry``, which botocore emits once the attempt's answer or error is in."""
    rpc_service = SERVICES.get(service, service)

    def started(request: Any, **kw: Any) -> None:
        try:
            _start(request, str(kw.get("event_name", "")))
        except Exception:  # instrumentation never fails a request
            logger.debug("request span not started", exc_info=True)

    def _start(request: Any, event_name: str) -> None:
        otel = _otel()
        if otel is None:
            return
        from opentelemetry import trace
        from opentelemetry.trace import SpanKind

        op = event_name.split(".")[-1]
        url = str(getattr(request, "url", "") or "")
        host = url.split("://", 1)[-1].split("/", 1)[0].split("?", 1)[0]
        attrs: dict[str, Any] = {
            "rpc.system": "aws-api",
            "rpc.service": rpc_service,
            "rpc.method": op,
            "http.request.method": str(getattr(request, "method", "") or ""),
            "server.address": host.rsplit(":", 1)[0] if ":" in host else host,
        }
        if BACKGROUND.get() and not trace.get_current_span().is_recording():
            # a held object's PUT sent after the call that began it ended: its span's
            # child, not counted in it
            attrs["langgraph_s3.after_call"] = True
        abandon_request_span("NotReported")  # an attempt that never reported back
        span = otel[0].start_span(f"{rpc_service}.{op}", kind=SpanKind.CLIENT, attributes=attrs)
        _REQUEST.set(span)

    def ended(**kw: Any) -> None:
        try:
            _end(**kw)
        except Exception:  # instrumentation never fails a request
            logger.debug("request span not ended", exc_info=True)

    def _end(**kw: Any) -> None:
        span = _REQUEST.get()
        if span is None:
            return
        _REQUEST.set(None)
        attempts = int(kw.get("attempts") or 1)
        if attempts > 1:
            span.set_attribute("http.request.resend_count", attempts - 1)
        response = kw.get("response")
        status: int | None = None
        if response is not None:
            http, parsed = response
            status = int(getattr(http, "status_code", 0) or 0) or None
            meta = (parsed or {}).get("ResponseMetadata") or {}
            if meta.get("RequestId"):
                span.set_attribute("aws.request_id", str(meta["RequestId"]))
        if status is not None:
            span.set_attribute("http.response.status_code", status)
        error = kw.get("caught_exception")
        if error is not None or (status is not None and status >= 500):
            _failed(span, type(error).__name__ if error is not None else str(status))
        span.end()

    return [("before-send", started), ("needs-retry", ended)]


def _failed(span: Any, what: str) -> None:
    from opentelemetry.trace import Status, StatusCode

    span.set_attribute("error.type", what)
    span.set_status(Status(StatusCode.ERROR, what))


def abandon_request_span(error: str) -> None:
    """End the span of an attempt this task left in flight: botocore never reports
    back on an attempt cut off by a cancel or a deadline (``aws.call`` calls this)."""
    span = _REQUEST.get()
    if span is None:
        return
    _REQUEST.set(None)
    try:
        _failed(span, error)
        span.end()
    except Exception:  # instrumentation never fails a request
        logger.debug("request span not ended", exc_info=True)
