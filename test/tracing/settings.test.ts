import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { resolveConfig } from '../../src/config/load.js';
import { tracingSettings } from '../../src/telemetry/tracing/settings.js';

const file = (tracing: Record<string, unknown> = {}) => resolveConfig({ upstreams: [{ url: 'http://127.0.0.1:1' }], tracing }).tracing;

describe('tracing settings: the config file and the standard OTEL_* variables', () => {
  it('off unless a traces endpoint is configured', () => {
    assert.equal(tracingSettings(file(), {}), null);
    assert.equal(tracingSettings(file(), { OTEL_SERVICE_NAME: 'x', OTEL_TRACES_SAMPLER: 'always_on' }), null);
  });

  it('OTEL_SDK_DISABLED=true wins over every endpoint; tracing.disabled too', () => {
    const env = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' };
    assert.notEqual(tracingSettings(file(), env), null);
    assert.equal(tracingSettings(file({ endpoint: 'http://c:4318' }), { ...env, OTEL_SDK_DISABLED: 'TRUE' }), null);
    assert.equal(tracingSettings(file({ endpoint: 'http://c:4318', disabled: true }), {}), null);
  });

  it('endpoints: the traces one as is, the base one with /v1/traces; the environment over the file', () => {
    assert.equal(tracingSettings(file({ endpoint: 'http://file:4318/' }), {})!.url, 'http://file:4318/v1/traces');
    assert.equal(tracingSettings(file({ tracesEndpoint: 'http://file:4318/t' }), {})!.url, 'http://file:4318/t');
    assert.equal(tracingSettings(file({ tracesEndpoint: 'http://file:4318/t' }), { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://env:4318' })!.url, 'http://env:4318/v1/traces');
    assert.equal(tracingSettings(file(), { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://env:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://env2:4318/x' })!.url, 'http://env2:4318/x');
  });

  it('defaults: http/protobuf, parent-based always-on, the batch processor\'s standard bounds, service warmroute', () => {
    const s = tracingSettings(file({ endpoint: 'http://c:4318' }), {})!;
    assert.equal(s.protocol, 'http/protobuf');
    assert.equal(s.sampler, 'parentbased_always_on');
    assert.equal(s.serviceName, 'warmroute');
    assert.deepEqual(s.batch, { maxQueueSize: 2048, maxExportBatchSize: 512, scheduledDelayMs: 5000, exportTimeoutMs: 30000 });
    assert.equal(s.timeoutMs, 10000);
  });

  it('the OTEL_* variables, parsed as the spec writes them', () => {
    const s = tracingSettings(file({ endpoint: 'http://c:4318', headers: { a: 'file' }, resourceAttributes: { 'service.name': 'from-file-attrs' } }), {
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_EXPORTER_OTLP_HEADERS: 'a=env,b=x%20y',
      OTEL_RESOURCE_ATTRIBUTES: 'k8s.pod.name=gw-0',
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.25',
      OTEL_BSP_MAX_QUEUE_SIZE: '100', OTEL_BSP_SCHEDULE_DELAY: '200', OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '50', OTEL_BSP_EXPORT_TIMEOUT: '1000',
      OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: '2000',
    })!;
    assert.equal(s.protocol, 'http/json');
    assert.deepEqual(s.headers, { a: 'env', b: 'x y' });
    assert.equal(s.resourceAttributes['k8s.pod.name'], 'gw-0');
    assert.equal(s.serviceName, 'from-file-attrs', 'service.name in the resource attributes when OTEL_SERVICE_NAME is unset');
    assert.equal(s.sampler, 'parentbased_traceidratio');
    assert.equal(s.samplerArg, 0.25);
    assert.deepEqual(s.batch, { maxQueueSize: 100, maxExportBatchSize: 50, scheduledDelayMs: 200, exportTimeoutMs: 1000 });
    assert.equal(s.timeoutMs, 2000);
    assert.equal(tracingSettings(file({ endpoint: 'http://c:4318' }), { OTEL_SERVICE_NAME: 'gw', OTEL_RESOURCE_ATTRIBUTES: 'service.name=other' })!.serviceName, 'gw');
  });

  it('a value that cannot be used is refused at start, naming the variable', () => {
    const base = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' };
    assert.throws(() => tracingSettings(file(), { ...base, OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'grpc' }), /OTEL_EXPORTER_OTLP_TRACES_PROTOCOL.*grpc/);
    assert.throws(() => tracingSettings(file(), { ...base, OTEL_TRACES_SAMPLER: 'sometimes' }), /OTEL_TRACES_SAMPLER/);
    assert.throws(() => tracingSettings(file(), { ...base, OTEL_TRACES_SAMPLER_ARG: '2' }), /OTEL_TRACES_SAMPLER_ARG/);
    assert.throws(() => tracingSettings(file(), { ...base, OTEL_BSP_MAX_QUEUE_SIZE: '-1' }), /OTEL_BSP_MAX_QUEUE_SIZE/);
    assert.throws(() => tracingSettings(file(), { ...base, OTEL_EXPORTER_OTLP_HEADERS: 'novalue' }), /OTEL_EXPORTER_OTLP_HEADERS/);
    assert.throws(() => tracingSettings(file(), { OTEL_EXPORTER_OTLP_ENDPOINT: 'c:4318' }), /OTEL_EXPORTER_OTLP_ENDPOINT/);
  });
});
