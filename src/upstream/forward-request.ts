import type { IncomingMessage } from 'node:http';
import type { Dispatcher } from 'undici';
import type { ResolvedConfig } from '../config/schema.js';
import type { RequestTrace } from '../telemetry/tracing/request-trace.js';
import type { ErrorShape, WarmrouteError } from '../errors.js';
import type { Health } from '../fleet/health.js';
import type { ReplicaState } from '../fleet/registry.js';
import type { RequestIdentity } from '../identify/identity.js';
import type { Admission } from '../queue/admission.js';
import type { Decision, RouteReason } from '../routing/types.js';
import type { QueuePlace } from '../queue/limiter.js';
import type { FirstToken, Usage } from '../stream/tap.js';
import type { ToolCallEnd, ToolWatchMode } from '../stream/tool-calls.js';
import type { HopClock } from '../telemetry/hop-clock.js';
import type { Metrics } from '../telemetry/metrics.js';
import type { ExchangeOwner } from './exchange.js';
import type { AdapterChange } from '../fleet/adapter-loader.js';

/** What forwarding needs of the gateway, what one request brings to it, and how it ends. */

export interface ForwardDeps {
  readonly agent: Dispatcher;
  readonly admission: Admission;
  readonly health: Health;
  readonly metrics: Metrics;
  readonly config: ResolvedConfig;
  byName(name: string): ReplicaState | undefined;
  /** On-demand adapters (fleet/adapter-loader.ts): what brings back one a replica no longer has. */
  readonly adapters?: { regain(r: ReplicaState, adapter: string): Promise<AdapterChange | null> };
}

/** One client request on its way through the gateway. */
export interface ForwardRequest {
  readonly req: IncomingMessage;
  /** Holds every slot the exchange takes and ends it (upstream/exchange.ts). */
  readonly owner: ExchangeOwner<Outcome>;
  readonly method: string;
  /** Origin-form target as checked by the edge (normalised path and the query). */
  readonly target: string;
  readonly body: Buffer | null;
  readonly identity: RequestIdentity;
  readonly decision: Decision;
  readonly clock: HopClock;
  readonly draining: () => boolean;
  /** The client's Authorization is the gateway's own API key: it is not passed on. */
  readonly stripAuthorization: boolean;
  /** The shape the gateway's own errors take, before and after the first byte (the caller's API). */
  readonly api?: ErrorShape;
  /** The parsed chat body, when resume.enabled and the request can be resumed mid-stream. */
  readonly resumable?: Record<string, unknown>;
  /**
   * The replica answers as it generates (`stream: true`, or no generation at all). A non-streamed
   * generation's headers come only when it is done: timeouts.unstreamedHeadersMs bounds them, and
   * running past it says nothing of the replica's health.
   */
  readonly streamed: boolean;
  /** Its spans (tracing on): each attempt gets a CLIENT span whose context goes to the replica. */
  readonly trace?: RequestTrace | null;
  /** The tool-call guard's word on the request (edge/tool-guard.ts): answers checked, and what was raised. */
  readonly tools?: { readonly watch: ToolWatchMode | null; readonly adjusted: string | null } | null;
  /** Its place in the replicas' queues: class and deadline (queue/priority.ts). */
  readonly place?: QueuePlace | null;
  /** The adapter version chosen for the client's model name (adapters.versions): x-warmroute-adapter-version. */
  readonly adapterVersion?: string | null;
  /** The request's model when it is an adapter the gateway loads on demand (adapters.sources). */
  readonly managedAdapter?: string | null;
}

/** How an exchange ended, for the access line, the metrics and the router. */
export type Ending =
  /** The replica's response reached the client whole (whatever its status). */
  | 'complete'
  /** No replica answered: the client got the gateway's own error. */
  | 'failed'
  /** The replica failed after its first byte: the client got an error event or a cut-off body. */
  | 'interrupted'
  /** The client went away first. */
  | 'aborted'
  /** The client stopped reading for timeouts.clientStallMs: it was disconnected and the upstream request aborted. */
  | 'stalled';

export interface Outcome {
  ending: Ending;
  /** Status sent to the client (0 when it went away before any). */
  status: number;
  replica: string | null;
  reason: RouteReason;
  attempts: number;
  usage: Usage | null;
  sse: boolean;
  done: boolean;
  error: WarmrouteError | null;
  /** What the last failed attempt's error said (undici's message): for the log, never the client. */
  upstreamError: string | null;
  /** The stream broke off and was continued on another replica (resume.enabled). */
  resumed: boolean;
  /** Responses API: the id of the response relayed, as the tap read it. */
  responseId: string | null;
  /** What the first token of a stream was (content, reasoning, a tool call); null when none or not streamed. */
  firstToken: FirstToken | null;
  /** A request offering tools: whether its answer ended with a tool call cut on its length. */
  toolCall: ToolCallEnd | null;
  /** What the tool-call guard raised (`max_tokens=256`), null when nothing. */
  adjusted: string | null;
}
