"""The seed's service: a FastAPI app whose process registers its own
tracer, meter and logger providers with OTLP/HTTP exporters before the app
starts, as the seed's instrumentation library did. Run it under uvicorn or
gunicorn with OTEL_EXPORTER_OTLP_ENDPOINT set: FastAPI 0.142.0-0.142.4 then
add a second BatchSpanProcessor, PeriodicExportingMetricReader and log
processor to these providers at ASGI lifespan startup.

Environment (besides the OTEL_* variables the SDK reads):
  SEED_SERVICE    service.name (default "seed")
  SEED_PRESTART   the counter's (and histogram's) value recorded at import,
                  before startup (default 7)
  SEED_RESOURCE   "create" (Resource.create: the SDK's detectors, which give
                  each process a service.instance.id) or "hand" (a Resource
                  built by hand with service.name only: processes share one
                  identity). Default "create".
  SEED_INSTRUMENT "contrib": FastAPIInstrumentor.instrument_app (opentelemetry-
                  instrumentation-fastapi) adds contrib's ASGI middleware to
                  the app, and FastAPI turns its own instrumentation off.

asgi_app is the app wrapped from outside in contrib's ASGI
OpenTelemetryMiddleware, as ASGI servers and platforms wrap apps: FastAPI
does not see that middleware and records its own spans as well.

GET /items/{item_id} adds 1 to the counter seed.jobs and records item_id
to the histogram seed.job.duration (ms) and logs one record; GET
/items/abc fails validation (422, FastAPI logs fastapi.validation.failed).
Each answer names the process (pid) that served it.

The providers are set up when this module is imported: in each worker
under gunicorn, or once before the fork under gunicorn --preload.
"""

import logging
import os
from contextlib import asynccontextmanager

from fastapi import FastAPI

from opentelemetry import _logs, metrics, trace
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import LoggerProvider, LoggingHandler
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

SERVICE = os.environ.get("SEED_SERVICE", "seed")
PRESTART = int(os.environ.get("SEED_PRESTART", "7"))

_instruments = {}
log = logging.getLogger("seed")


def setup():
    """Registers the process's own providers and records the counter's
    pre-startup value."""
    if os.environ.get("SEED_RESOURCE", "create") == "hand":
        resource = Resource({"service.name": SERVICE})
    else:
        resource = Resource.create({"service.name": SERVICE})
    tp = TracerProvider(resource=resource)
    tp.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(tp)
    mp = MeterProvider(resource=resource, metric_readers=[PeriodicExportingMetricReader(OTLPMetricExporter())])
    metrics.set_meter_provider(mp)
    lp = LoggerProvider(resource=resource)
    lp.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter()))
    _logs.set_logger_provider(lp)
    log.addHandler(LoggingHandler(logger_provider=lp))
    log.setLevel(logging.INFO)
    log.propagate = False

    meter = metrics.get_meter("seed")
    _instruments["jobs"] = meter.create_counter("seed.jobs", unit="1", description="jobs served")
    _instruments["duration"] = meter.create_histogram("seed.job.duration", unit="ms", description="job duration")
    # Recorded before the app starts: a reader added at startup never sees it.
    _instruments["jobs"].add(PRESTART)
    _instruments["duration"].record(float(PRESTART))


setup()

@asynccontextmanager
async def lifespan(app):
    yield
    # uvicorn ends the process by the signal that stopped it, after the ASGI
    # lifespan shutdown: the SDK's exit handlers never run. Export what is
    # left here, as services that must not lose their last interval do.
    trace.get_tracer_provider().force_flush()
    metrics.get_meter_provider().force_flush()
    _logs.get_logger_provider().force_flush()


app = FastAPI(lifespan=lifespan)

if os.environ.get("SEED_INSTRUMENT") == "contrib":
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

    FastAPIInstrumentor.instrument_app(app)


@app.get("/items/{item_id}")
def read_item(item_id: int):
    _instruments["jobs"].add(1)
    _instruments["duration"].record(float(item_id))
    log.info("item %d served", item_id)
    return {"item_id": item_id, "pid": os.getpid()}


def __getattr__(name):
    # asgi_app is built when a server asks for it, so that importing the
    # module for app takes no longer.
    if name == "asgi_app":
        from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware

        return OpenTelemetryMiddleware(app)
    raise AttributeError(name)
