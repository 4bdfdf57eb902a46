// `warmroute probe` entry point and the module's public surface.

import { parseProbeArgs, UsageError, USAGE } from './args.js';
import { ProbeConnectionError } from './endpoint.js';
import { TracesUnavailableError } from './jaeger.js';
import { formatJson, formatTable } from './report.js';
import { runProbe, type SampleEvent } from './run.js';

export { parseProbeArgs, UsageError, USAGE } from './args.js';
export { ProbeConnectionError, resolveBaseUrl, openEndpoint, warmUp, type Endpoint, type EndpointAddress } from './endpoint.js';
export { measureChat, type TrialSample } from './measure.js';
export { CASES, CASE_IDS, buildMessages, type CaseId } from './prompts.js';
export { formatJson, formatTable } from './report.js';
export { breakdown, newTraceContext, readTraces, type TraceBreakdown, type GatewayPart, type ReplicaPart } from './traces.js';
export { fetchTrace, TracesUnavailableError, type JaegerSpan, type JaegerTrace } from './jaeger.js';
export {
  runProbe,
  DEFAULTS,
  type ProbeOptions,
  type ProbeResult,
  type RowResult,
  type EndpointRow,
  type EndpointInfo,
  type SampleEvent,
  type SendKind,
  type TracedSend,
} from './run.js';
export { summarize, percentile, type Summary } from './stats.js';

/**
 * Runs the probe for argv (everything after `warmroute probe`) and returns the exit code:
 * 0 every case produced a trial, 1 some case produced none, 2 usage error or endpoint unreachable.
 */
export async function probeMain(
  argv: string[],
  out: NodeJS.WritableStream = process.stdout,
  err: NodeJS.WritableStream = process.stderr,
): Promise<number> {
  let parsed;
  try {
    parsed = parseProbeArgs(argv);
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    err.write(`warmroute probe: ${e.message}\nRun 'warmroute probe --help' for usage.\n`);
    return 2;
  }
  if (parsed.help) {
    out.write(USAGE);
    return 0;
  }

  const progress = progressWriter(err, parsed.options.trials ?? 1);
  try {
    const result = await runProbe({ ...parsed.options, onSample: progress.onSample });
    progress.clear();
    out.write(parsed.json ? formatJson(result) : formatTable(result));
    return result.ok ? 0 : 1;
  } catch (e) {
    progress.clear();
    if (e instanceof ProbeConnectionError || e instanceof TracesUnavailableError) {
      err.write(`warmroute probe: ${e.message}\n`);
      return 2;
    }
    throw e;
  }
}

// A one-line, self-overwriting progress note on an interactive stderr only: large-prompt runs
// against a real model take a while, and piped or --json output must stay clean.
function progressWriter(
  err: NodeJS.WritableStream,
  trials: number,
): { onSample?: (e: SampleEvent) => void; clear(): void } {
  if (!(err as { isTTY?: boolean }).isTTY) return { clear() {} };
  let shown = false;
  return {
    onSample(e) {
      const status = e.sample.ok ? `${e.sample.ttftMs?.toFixed(1)} ms` : 'failed';
      const send = e.send === 'only' ? '' : ` (${e.send})`;
      err.write(`\r\x1b[K${e.case}${send} ${e.endpoint} trial ${e.trial}/${trials}: ${status}`);
      shown = true;
    },
    clear() {
      if (shown) err.write('\r\x1b[K');
    },
  };
}
