// Exports mutation spans to an OTLP/HTTP endpoint with the stock OpenTelemetry JS SDK, as a Node agent would.
//
// usage: node export_spans.js ENDPOINT SPANS.json BATCH_SIZE PROTOCOL
//
// SPANS.json is a list of {"name": ..., "attributes": {...}} in the order the guard emitted them. Every span
// goes through the SDK's BatchSpanProcessor (maxExportBatchSize BATCH_SIZE, a schedule delay long enough that
// nothing leaves on its own), so the queue fills while the spans are made and forceFlush() sends every pending
// batch at once: parallel requests, in no particular order. PROTOCOL is the exporter: `proto` (OTLP/HTTP
// protobuf) or `json` (OTLP/HTTP JSON, hex ids). Prints one JSON line: how many spans it made.
'use strict';

const fs = require('fs');
const { BasicTracerProvider, BatchSpanProcessor } = require('@opentelemetry/sdk-trace-base');
const EXPORTERS = { proto: '@opentelemetry/exporter-trace-otlp-proto', json: '@opentelemetry/exporter-trace-otlp-http' };
const { resourceFromAttributes } = require('@opentelemetry/resources');

async function main() {
  const [endpoint, spansPath, batchSize, protocol] = process.argv.slice(2);
  const spans = JSON.parse(fs.readFileSync(spansPath, 'utf8'));
  const { OTLPTraceExporter } = require(EXPORTERS[protocol]);
  const exporter = new OTLPTraceExporter({ url: endpoint + '/v1/traces', timeoutMillis: 30000 });
  const processor = new BatchSpanProcessor(exporter, {
    maxExportBatchSize: Number(batchSize),
    maxQueueSize: spans.length + 1,
    scheduledDelayMillis: 600000,
    exportTimeoutMillis: 30000,
  });
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': 'js-agent' }),
    spanProcessors: [processor],
  });
  const tracer = provider.getTracer('ctxwatch-js-test');
  for (const { name, attributes } of spans) {
    tracer.startSpan(name, { attributes }).end();
  }
  await provider.forceFlush();
  await provider.shutdown();
  process.stdout.write(JSON.stringify({ spans: spans.length }) + '\n');
}

main().catch((error) => {
  process.stderr.write(`export_spans.js: ${error && error.stack ? error.stack : error}\n`);
  process.exit(1);
});
