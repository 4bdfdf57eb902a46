import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'undici';
import { startReplica } from '../../bench/sim/index.js';
import { parseVllmMetrics } from '../../src/fleet/vllm-stats.js';
import { startGateway } from '../helpers/gateway.js';

describe('vLLM /metrics', () => {
  it('sums running/waiting over engines, averages KV usage, reads capacity from cache_config_info', () => {
    const text = [
      '# HELP vllm:num_requests_running Number of requests in model execution batches.',
      'vllm:num_requests_running{engine="0",model_name="m"} 3.0',
      'vllm:num_requests_running{engine="1",model_name="m"} 2.0',
      'vllm:num_requests_waiting{engine="0",model_name="m"} 4.0',
      'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.5',
      'vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.3',
      'vllm:cache_config_info{block_size="16",enable_prefix_caching="True",num_gpu_blocks="1000"} 1.0',
    ].join('\n');
    assert.deepEqual(parseVllmMetrics(text), { running: 5, waiting: 4, kvUsage: 0.4, kvCapacityTokens: 999 * 16, startTimeSeconds: null, prefixQueries: null, cacheConfigLabels: { block_size: '16', enable_prefix_caching: 'True', num_gpu_blocks: '1000' }, lora: null });
  });

  it('reads the LoRA slots from the lora_requests_info series with the largest value, wherever it is listed', () => {
    const text = [
      'vllm:num_requests_running{engine="0",model_name="m"} 1.0',
      'vllm:lora_requests_info{max_lora="2",running_lora_adapters="a,b",waiting_lora_adapters="c"} 1.7e9',
      'vllm:lora_requests_info{max_lora="2",running_lora_adapters="b",waiting_lora_adapters=""} 1.70000002e9',
      'vllm:lora_requests_info{max_lora="2",running_lora_adapters="",waiting_lora_adapters=""} 1.70000001e9',
    ].join('\n');
    const lora = parseVllmMetrics(text)?.lora;
    assert.ok(lora);
    assert.equal(lora.maxLoras, 2);
    assert.deepEqual([...lora.running], ['b']);
    assert.deepEqual([...lora.waiting], []);
    assert.equal(parseVllmMetrics('vllm:num_requests_running 0\n')?.lora, null);
  });

  it('is null for an upstream that is not vLLM, rather than an idle replica', () => {
    assert.equal(parseVllmMetrics('process_cpu_seconds_total 12\n'), null);
  });

  it('reads the simulator’s real /metrics', async () => {
    const r = await startReplica();
    try {
      const text = await (await request(`${r.url}/metrics`)).body.text();
      const s = parseVllmMetrics(text);
      assert.ok(s);
      assert.equal(s.kvCapacityTokens, (r.config.kvBlocks - 1) * r.config.blockSize, 'num_gpu_blocks less the null block');
      assert.equal(s.running, 0);
    } finally {
      await r.close();
    }
  });

  it('a replica without vLLM metrics is counted and warned about once, and stays up', async () => {
    const { createServer } = await import('node:http');
    // A plain OpenAI-compatible upstream: healthy, lists a model, but its /metrics is not vLLM's.
    const plain = createServer((req, res) => {
      if (req.url === '/v1/models') return void res.end('{"object":"list","data":[{"id":"m"}]}');
      if (req.url === '/metrics') return void res.end('up 1\n');
      res.end();
    });
    await new Promise<void>((ok) => plain.listen(0, '127.0.0.1', ok));
    const port = (plain.address() as { port: number }).port;
    const g = await startGateway([`http://127.0.0.1:${port}`], { health: { statsIntervalMs: 100 } });
    try {
      // Scrapes every 100 ms: wait (bounded) until several have failed.
      let errors = 0;
      for (const deadline = Date.now() + 5_000; errors < 3 && Date.now() < deadline;) {
        await new Promise((r) => setTimeout(r, 100));
        const metrics = await (await request(`${g.adminUrl}/metrics`)).body.text();
        errors = Number(/warmroute_replica_scrape_errors_total\{replica="[^"]+",what="metrics"\} (\d+)/.exec(metrics)?.[1] ?? 0);
      }
      assert.ok(errors >= 3, `scrape errors ${errors}`);
      assert.equal(g.logs.filter((l) => String(l.msg).startsWith('cannot read replica /metrics')).length, 1);
      assert.equal((await request(`${g.adminUrl}/readyz`)).statusCode, 200);
    } finally {
      await g.close();
      plain.closeAllConnections();
      plain.close();
    }
  });
});
