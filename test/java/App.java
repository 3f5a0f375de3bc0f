import com.sun.net.httpserver.HttpServer;
import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.common.Attributes;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.api.trace.Tracer;
import io.opentelemetry.context.Scope;
import io.opentelemetry.exporter.otlp.http.trace.OtlpHttpSpanExporter;
import io.opentelemetry.sdk.OpenTelemetrySdk;
import io.opentelemetry.sdk.resources.Resource;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.opentelemetry.sdk.trace.export.BatchSpanProcessor;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * A small HTTP service that builds its own OpenTelemetry SDK and OTLP
 * exporter and records a SERVER span per request, as services with their
 * own tracing filter do. Run with the OpenTelemetry Java agent as well, the
 * agent records its own server span for the same request: the double
 * export users report.
 *
 * <p>Usage: App PORT REQUESTS. Each GET /items/N takes 50 ms. GET /ready
 * answers without a span of the app's; the
 * process exits after REQUESTS answers to GET /items/N, shutting its SDK
 * down (a final export).
 */
public final class App {
  public static void main(String[] args) throws Exception {
    int port = Integer.parseInt(args[0]);
    int requests = Integer.parseInt(args[1]);
    String endpoint = System.getenv("OTEL_EXPORTER_OTLP_ENDPOINT");
    Resource resource =
        Resource.getDefault()
            .merge(Resource.create(Attributes.of(AttributeKey.stringKey("service.name"), "java-app")));
    SdkTracerProvider tracerProvider =
        SdkTracerProvider.builder()
            .setResource(resource)
            .addSpanProcessor(
                BatchSpanProcessor.builder(
                        OtlpHttpSpanExporter.builder().setEndpoint(endpoint + "/v1/traces").build())
                    .setScheduleDelay(Duration.ofMillis(100))
                    .build())
            .build();
    OpenTelemetrySdk sdk = OpenTelemetrySdk.builder().setTracerProvider(tracerProvider).build();
    Tracer tracer = sdk.getTracer("app.http");

    CountDownLatch served = new CountDownLatch(requests);
    HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", port), 0);
    server.createContext(
        "/ready",
        exchange -> {
          exchange.sendResponseHeaders(200, -1);
          exchange.close();
        });
    server.createContext(
        "/items/",
        exchange -> {
          // Named and attributed as the HTTP semantic conventions say,
          // the route being the context the handler is registered on.
          Span span =
              tracer
                  .spanBuilder("GET /items/")
                  .setSpanKind(SpanKind.SERVER)
                  .setAttribute("http.request.method", "GET")
                  .setAttribute("http.route", "/items/")
                  .setAttribute("url.path", exchange.getRequestURI().getPath())
                  .startSpan();
          try (Scope ignored = span.makeCurrent()) {
            Thread.sleep(50); // the work a request does
            byte[] body = "{}".getBytes(StandardCharsets.UTF_8);
            exchange.sendResponseHeaders(200, body.length);
            exchange.getResponseBody().write(body);
            exchange.close();
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
          } finally {
            span.end();
            served.countDown();
          }
        });
    server.start();
    served.await();
    server.stop(0);
    sdk.shutdown().join(10, TimeUnit.SECONDS);
  }
}
