// Realtime transcription (`/v1/realtime`, a WebSocket), relayed: the upgrade is checked as any
// request is (client key, connection limits, priority class) before anything is accepted, then one
// replica is chosen (the session's, else the fewest realtime connections), its session.created
// read, and only then is the client's upgrade accepted and the frames relayed both ways for the
// connection's life. A replica that fails before session.created is replaced by the next; one that
// fails after is a close with a code and a reason. Each connection has one owner (`Connection`)
// that gives back its key slot, its gateway-wide slot, its replica's count and its sockets once.

import { STATUS_CODES, type IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import WebSocket, { WebSocketServer } from 'ws';
import type { ResolvedConfig } from '../config/schema.js';
import { errorBody, errors, toWarmrouteError, type WarmrouteError } from '../errors.js';
import type { ReplicaState, Registry } from '../fleet/registry.js';
import type { IdentityOptions } from '../identify/identity.js';
import { sessionKeyOf } from '../identify/session-key.js';
import { reservedSlots } from '../queue/admission.js';
import { createLimiter, Shed, type Limiter } from '../queue/limiter.js';
import { priorityOf } from '../queue/priority.js';
import type { ProtocolBy, RealtimeClose, RealtimeEnded, RealtimeRecorder, RealtimeRefusal } from '../record/realtime.js';
import type { VoiceTurns } from '../record/voice-turns.js';
import { pickRealtime, type RealtimeRoute } from '../routing/realtime-pick.js';
import { CONVERSATION_KEY, type SessionStore } from '../store/types.js';
import { eventType, UtteranceTap } from '../stream/realtime-tap.js';
import { nowMs, startClock } from '../telemetry/hop-clock.js';
import type { Metrics } from '../telemetry/metrics.js';
import type { RequestTrace } from '../telemetry/tracing/request-trace.js';
import type { Tracing } from '../telemetry/tracing/tracing.js';
import { closeReason, nativeMasking, openUpstream, pipe, sendableCode, type OpenedUpstream } from '../upstream/realtime-relay.js';
import type { ClientKey, Keyring } from './api-keys.js';
import { answeredProtocol, KEY_PROTOCOL_PREFIX, offeredProtocols, type Offered } from './realtime-protocols.js';
import { requestTarget } from './target.js';

export const REALTIME_PATH = '/v1/realtime';

/**
 * The store key of a session's realtime pin: apart from its chat pin (a call's speech and its LLM
 * usually run on different replicas), and under the keyless-conversation prefix, so it is neither
 * counted as a pinned session nor handed off by a drain (a realtime replica keeps no cache).
 */
const pinKey = (session: string) => `${CONVERSATION_KEY}realtime:${session}`;

export interface RealtimeDeps {
  readonly registry: Registry;
  readonly store: SessionStore;
  readonly keyring: Keyring;
  readonly metrics: Metrics;
  readonly log: Logger;
  readonly recorder: RealtimeRecorder;
  readonly voice: VoiceTurns;
  readonly tracing: Tracing | null;
  /** An https replica's TLS settings (upstreams' `tls`), by origin. */
  readonly tls?: (origin: string) => { ca?: Buffer; servername?: string } | undefined;
  /** Read per connection: a reload replaces them. */
  config(): ResolvedConfig;
  identity(): IdentityOptions;
  /** The gateway is shutting down: no new connection. */
  draining(): boolean;
  /** The drain's count of open exchanges: once each, then `exchangeClosed` once. */
  exchangeOpened(): void;
  exchangeClosed(): void;
}

export interface Realtime {
  /** The data-plane server's 'upgrade' listener. */
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void;
  /** Connections open (accepted or being opened). */
  readonly open: number;
  /** Realtime connections open on a replica. */
  openOn(replica: string): number;
  reconfigure(c: ResolvedConfig): void;
  /** Shutdown: every connection closed with 1001; resolves once their sockets are gone (bounded). */
  closeAll(): Promise<void>;
}

const limitOf = (c: ResolvedConfig) => ({ max: c.realtime.maxConnections, maxQueued: 0, timeoutMs: 1, what: 'realtime connections', reserved: reservedSlots(c.realtime.maxConnections, c.limits.reservedInteractiveShare) });
/** How often idle connections and drained replicas are looked for. */
const SWEEP_MS = 250;
/** Shutdown: how long closed connections get to finish their closing handshake before their sockets are cut. */
const CLOSE_GRACE_MS = 1_000;

const noop = () => {};
/** A Sec-WebSocket-Key as RFC 6455 has it (and ws checks): 16 bytes, base64. */
const WS_KEY = /^[+/0-9A-Za-z]{22}==$/;

/** A refused upgrade's answer: an HTTP response with the error in OpenAI's shape, then the socket closed. */
function refuseUpgrade(socket: Duplex, err: WarmrouteError): void {
  if (!socket.writable) { socket.destroy(); return; }
  const body = errorBody(err);
  let extra = '';
  for (let i = 0; i + 1 < err.headers.length; i += 2) extra += `${err.headers[i]}: ${err.headers[i + 1]}\r\n`;
  socket.end(`HTTP/1.1 ${err.statusCode} ${STATUS_CODES[err.statusCode] ?? ''}\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n${extra}\r\n${body}`, () => socket.destroy());
}

/** One realtime connection: everything it holds, and its one end. */
class Connection {
  ended = false;
  readonly received = nowMs();
  readonly receivedWall = Date.now();
  acceptedAt = 0;
  lastActivity = this.received;
  /** Wall ms when this connection first saw its replica draining. */
  drainSeen = 0;
  // Held, each given back once by end().
  keySlot: ClientKey | null = null;
  global = false;
  replica: ReplicaState | null = null;
  upstream: WebSocket | null = null;
  client: WebSocket | null = null;
  cancelOpen: (() => void) | null = null;
  /** Counted in the drain's open exchanges. */
  counted = false;
  /** The raw socket's 'close' listener until the upgrade is accepted (ws takes the socket over then). */
  gone: () => void = noop;
  // What the access line says.
  key: string | null = null;
  priority: string | null = null;
  sessionKey: string | null = null;
  sessionSource: string | null = null;
  route: RealtimeRoute | null = null;
  /** The subprotocol its replica selected ('' for none), and the one the client was answered with. */
  replicaProtocol = '';
  protocol: string | null = null;
  protocolBy: ProtocolBy | null = null;
  attempts = 0;
  framesIn = 0;
  framesOut = 0;
  bytesIn = 0;
  bytesOut = 0;
  clientError: (Error & { code?: string }) | null = null;
  upstreamError: (Error & { code?: string }) | null = null;
  readonly tap = new UtteranceTap();
  trace: RequestTrace | null = null;

  constructor(readonly socket: Duplex) {}
}

export function createRealtime(deps: RealtimeDeps): Realtime {
  const { registry, store, keyring, metrics, log, recorder, voice } = deps;
  const limiter: Limiter = createLimiter(limitOf(deps.config()));
  const counts = new Map<string, number>();
  const open = new Set<Connection>();
  /** The connection of each upgrade being accepted: `ws` asks which subprotocol it answers with. */
  const accepting = new WeakMap<IncomingMessage, Connection>();
  /** Replicas already warned of for selecting no subprotocol (once each: vLLM never selects one). */
  const selectedNone = new Set<string>();
  const wss = new WebSocketServer({
    noServer: true, clientTracking: false, perMessageDeflate: false, autoPong: false, skipUTF8Validation: true,
    maxPayload: deps.config().realtime.maxFrameBytes,
    // Called only when the client offered subprotocols, with `ws`'s parse of them.
    handleProtocols: (offered, req) => {
      const c = accepting.get(req);
      if (c === undefined) return false;
      const answer = answeredProtocol(offered, c.replicaProtocol);
      if (answer === null) return false;
      c.protocol = answer.protocol;
      c.protocolBy = answer.by;
      const replica = c.replica?.name ?? null;
      if (answer.by === 'gateway' && replica !== null && !selectedNone.has(replica)) {
        selectedNone.add(replica);
        log.warn({ replica, protocol: answer.protocol }, 'realtime: the replica selected no subprotocol of those the client offered; the client is answered with the first it offered that is not a key (a browser fails a handshake that offered subprotocols and got none back)');
      }
      return answer.protocol;
    },
  });
  let turn = 0;
  let closing = false;
  if (deps.config().realtime.enabled && !nativeMasking()) {
    log.warn('bufferutil is not loadable (WS_NO_BUFFER_UTIL, or no prebuilt addon for this platform): realtime frames are masked and unmasked in JavaScript, ~5 µs more per 900-byte frame relayed');
  }

  const openOn = (name: string) => counts.get(name) ?? 0;
  const holdReplica = (c: Connection, r: ReplicaState) => {
    const n = openOn(r.name) + 1;
    counts.set(r.name, n);
    metrics.realtimeOpen.set({ replica: r.name }, n);
    c.replica = r;
  };
  const releaseReplica = (c: Connection) => {
    const r = c.replica;
    if (r === null) return;
    c.replica = null;
    const n = openOn(r.name) - 1;
    if (n > 0) counts.set(r.name, n); else counts.delete(r.name);
    metrics.realtimeOpen.set({ replica: r.name }, Math.max(0, n));
  };

  /**
   * The one end of a connection: closes what is open (the client with `toClient`, the replica with
   * `toUpstream`; null code: a close frame without one), gives every slot back, and records it.
   */
  function end(c: Connection, outcome: RealtimeRefusal | RealtimeClose, x: { status: number; toClient?: [number | null, string] | null; toUpstream?: [number | null, string] | null; err?: WarmrouteError | null; clientCode?: number | null; clientReason?: string | null }): void {
    if (c.ended) return;
    c.ended = true;
    open.delete(c);
    const cancel = c.cancelOpen;
    c.cancelOpen = null;
    cancel?.();
    const up = c.upstream;
    c.upstream = null;
    if (up !== null) closeSocket(up, x.toUpstream ?? [1001, 'the client connection ended']);
    const replicaName = c.replica?.name ?? null;
    releaseReplica(c);
    if (c.global) { c.global = false; limiter.release(); }
    if (c.keySlot !== null) { c.keySlot.open--; c.keySlot = null; }
    if (c.client !== null && x.toClient) closeSocket(c.client, x.toClient);
    const code = x.toClient ? x.toClient[0] : x.clientCode ?? null;
    const reason = x.toClient ? x.toClient[1] : x.clientReason ?? null;
    const now = nowMs();
    const ended: RealtimeEnded = {
      status: x.status, outcome, replica: replicaName, route: c.route, attempts: c.attempts, key: c.key, priority: c.priority,
      sessionKey: c.sessionKey, sessionSource: c.sessionSource, protocol: c.protocol, protocolBy: c.protocolBy, closeCode: code, closeReason: reason,
      openMs: c.acceptedAt > 0 ? c.acceptedAt - c.received : null, durationMs: now - c.received,
      framesIn: c.framesIn, framesOut: c.framesOut, bytesIn: c.bytesIn, bytesOut: c.bytesOut, utterances: c.tap.count,
      err: x.err?.openaiCode ?? null,
    };
    try {
      recorder.ended(ended);
      if (c.trace !== null) {
        const clock = startClock(c.received);
        clock.ended = now;
        c.trace.end(clock, {
          method: 'GET', path: REALTIME_PATH, status: x.status, outcome: x.status === 101 ? 'complete' : 'failed', replica: replicaName, reason: c.route, attempts: c.attempts,
          kind: null, model: null, promptTokens: null, completionTokens: null, cachedTokens: null, session: recorder.sessionTag(c.sessionKey),
          turnKey: null, turn: null, call: null, errorCode: x.err?.openaiCode ?? (x.status === 101 ? null : outcome), toolCallTruncated: false,
        });
      }
    } catch (e) {
      log.error({ err: e }, 'internal error: recording a realtime connection failed');
    } finally {
      if (c.counted) deps.exchangeClosed();
    }
  }

  function closeSocket(ws: WebSocket, [code, reason]: [number | null, string]): void {
    if (ws.readyState === WebSocket.CLOSED || ws.readyState === WebSocket.CLOSING) return;
    if (ws.readyState === WebSocket.CONNECTING) { ws.terminate(); return; }
    if (code === null) ws.close();
    else ws.close(code, closeReason(reason));
  }

  function refuse(c: Connection, outcome: RealtimeRefusal, e: unknown): void {
    const err = toWarmrouteError(e);
    if (err.statusCode >= 500 && err.openaiCode === 'internal_error') log.error({ err: e }, 'internal error in a realtime upgrade');
    refuseUpgrade(c.socket, err);
    end(c, outcome, { status: err.statusCode, err });
  }

  /** The client key: a header's, else (a browser's) the key subprotocol's. */
  function authorize(c: Connection, req: IncomingMessage, offered: Offered): void {
    if (keyring.open) return;
    const apiKey = req.headers['x-api-key'];
    const fromSubprotocol = offered.key === null ? undefined : `Bearer ${offered.key}`;
    const key = keyring.check(req.headers.authorization ?? (typeof apiKey === 'string' ? `Bearer ${apiKey}` : fromSubprotocol));
    if (typeof key === 'string') {
      metrics.authFailures.inc({ reason: key });
      throw Object.assign(errors.invalidApiKey([key === 'missing' ? `An API key is required: send it as Authorization: Bearer <key>, or from a browser as the subprotocol ${KEY_PROTOCOL_PREFIX}<key>` : 'Incorrect API key provided']), { refusal: 'unauthorized' });
    }
    if (key.maxConcurrent > 0 && key.open >= key.maxConcurrent) {
      metrics.shed.inc({ reason: 'key_limit' });
      throw Object.assign(errors.keyLimit([key.name, key.open], null, undefined, ['retry-after', '1']), { refusal: 'key_limit' });
    }
    key.open++;
    c.keySlot = key;
    c.key = key.name;
  }

  const refusalOf = (e: unknown, fallback: RealtimeRefusal): RealtimeRefusal => (e as { refusal?: RealtimeRefusal }).refusal ?? fallback;
  const tagged = (err: WarmrouteError, refusal: RealtimeRefusal) => Object.assign(err, { refusal });

  function upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    const c = new Connection(socket);
    socket.on('error', noop);
    c.gone = () => { if (!c.ended && c.acceptedAt === 0) end(c, 'client_gone', { status: 499 }); };
    socket.once('close', c.gone);
    const config = deps.config();
    let model: string | null = null;
    let search = '';
    let offered: Offered = { relayed: [], key: null };
    try {
      // node hands every request that asks to upgrade here (an `Upgrade: h2c` on a chat request too):
      // only a WebSocket is served this way.
      const wanted = (req.headers.upgrade ?? '').toLowerCase();
      if (wanted !== 'websocket') throw tagged(errors.invalidRequest([`Upgrade: ${wanted.slice(0, 32)} is not supported: send the request without an Upgrade header (only /v1/realtime upgrades, to a WebSocket)`]), 'bad_request');
      const target = requestTarget(req.url);
      if (target.path !== REALTIME_PATH || !config.realtime.enabled) throw tagged(errors.notFound([req.method ?? 'GET', target.path]), 'not_found');
      const version = req.headers['sec-websocket-version'];
      if (req.method !== 'GET' || !WS_KEY.test(req.headers['sec-websocket-key'] ?? '') || (version !== '13' && version !== '8')) {
        throw tagged(errors.invalidRequest(['A realtime connection is a WebSocket upgrade: GET with Upgrade: websocket']), 'bad_request');
      }
      offered = offeredProtocols(req.headers['sec-websocket-protocol']);
      authorize(c, req, offered);
      if (deps.draining() || closing) throw tagged(errors.shuttingDown([], null, undefined, ['retry-after', '1']), 'shutting_down');
      search = target.search;
      // A WebSocket upgrade has no body: its query parameters stand in for the body fields of the
      // session key's sources (`?session_id=`, for a browser, which cannot set headers).
      const query = search === '' ? null : Object.fromEntries(new URLSearchParams(search));
      const session = sessionKeyOf(query, req.headers, deps.identity());
      c.sessionKey = session?.key ?? null;
      c.sessionSource = session?.source ?? null;
      model = query?.model ?? null;
      const place = priorityOf({ keyClass: c.keySlot?.priority ?? null, headers: req.headers, body: null, hasSession: c.sessionKey !== null, arrivedAt: c.received, options: config.priority });
      c.priority = place.cls;
      try {
        limiter.acquire(place);
      } catch (e) {
        if (!(e instanceof Shed)) throw e;
        throw tagged(e.error, 'gateway_limit');
      }
      c.global = true;
      c.counted = true;
      deps.exchangeOpened();
    } catch (e) {
      refuse(c, refusalOf(e, 'bad_request'), e);
      return;
    }
    open.add(c);
    c.trace = deps.tracing?.begin(req.headers, 'GET', c.received) ?? null;
    void connect(c, req, head, { model, search, offered: offered.relayed, config });
  }

  /** Tries replicas in turn until one sends session.created, then accepts the client's upgrade. */
  async function connect(c: Connection, req: IncomingMessage, head: Buffer, x: { model: string | null; search: string; offered: readonly string[]; config: ResolvedConfig }): Promise<void> {
    const rc = x.config.realtime;
    const tried = new Set<string>();
    const pinned = c.sessionKey === null ? null : store.get(pinKey(c.sessionKey), Date.now())?.replica ?? null;
    let failed: [string, string] = ['none', 'no replica tried'];
    for (let attempt = 0; attempt <= x.config.limits.maxRetries; attempt++) {
      const choice = pickRealtime({ replicas: registry.replicas, open: openOn, model: x.model, pinned, maxPerReplica: rc.maxConnectionsPerReplica, exclude: tried, turn: turn++ });
      if (choice.ranked === null) {
        if (attempt > 0) break;
        if (choice.why === 'model') return refuse(c, 'model_not_found', errors.modelNotFound([x.model]));
        if (choice.why === 'full') return refuse(c, 'replica_limit', errors.overloaded([`every replica that could take it has ${rc.maxConnectionsPerReplica} realtime connections (realtime.maxConnectionsPerReplica)`], null, undefined, ['retry-after', '1']));
        return refuse(c, 'no_replica', errors.noReplica());
      }
      const r = registry.byName(choice.ranked[0])!;
      c.route = choice.reason;
      c.attempts = attempt + 1;
      tried.add(r.name);
      holdReplica(c, r);
      const headers: Record<string, string> = {};
      if (r.apiKey !== undefined) headers.authorization = `Bearer ${r.apiKey}`;
      const tc = c.trace?.attempt({ replica: r.name, origin: r.origin, index: attempt, resume: false }) ?? [];
      for (let i = 0; i + 1 < tc.length; i += 2) headers[tc[i]] = tc[i + 1];
      const opening = openUpstream({ url: `${r.origin.replace(/^http/, 'ws')}${REALTIME_PATH}${x.search}`, protocols: x.offered, headers, maxFrameBytes: rc.maxFrameBytes, timeoutMs: rc.openMs, tls: deps.tls?.(r.origin) });
      c.cancelOpen = opening.cancel;
      const res = await opening.result;
      c.cancelOpen = null;
      if (c.ended) { if (res.ok) res.up.ws.terminate(); return; }
      if (res.ok) return accept(c, req, head, r, res.up);
      releaseReplica(c);
      c.trace?.attemptFailed(res.cause);
      failed = [r.name, res.detail];
      const more = attempt < x.config.limits.maxRetries && pickRealtime({ replicas: registry.replicas, open: openOn, model: x.model, pinned: null, maxPerReplica: rc.maxConnectionsPerReplica, exclude: tried, turn }).ranked !== null;
      recorder.replaced(r.name, res.cause, res.detail, more);
      if (!more) break;
    }
    refuse(c, 'upstream_failed', errors.upstreamUnavailable(failed));
  }

  function accept(c: Connection, req: IncomingMessage, head: Buffer, r: ReplicaState, up: OpenedUpstream): void {
    c.upstream = up.ws;
    up.ws.on('error', (e: Error) => { c.upstreamError = e; });
    c.replicaProtocol = up.protocol;
    accepting.set(req, c);
    c.socket.off('close', c.gone);
    c.socket.off('error', noop);
    wss.handleUpgrade(req, c.socket, head, (client) => {
      c.client = client;
      c.acceptedAt = nowMs();
      c.lastActivity = c.acceptedAt;
      if (c.sessionKey !== null) store.pin(pinKey(c.sessionKey), r.name, 0, Date.now());
      recorder.accepted(r.name, c.route ?? 'least_connections');
      relay(c, client, up, r.name);
    });
    // handleUpgrade refuses a socket that is no longer usable (the client left just now) without calling back.
    if (c.client === null && (c.socket.destroyed || !c.socket.writable)) end(c, 'client_gone', { status: 499 });
  }

  function relay(c: Connection, client: WebSocket, up: OpenedUpstream, replica: string): void {
    const upstream = up.ws;
    const tooBig = (e: Error) => (e as { code?: string }).code === 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH';
    const limitText = () => `over ${deps.config().realtime.maxFrameBytes} bytes (realtime.maxFrameBytes)`;
    // ws has answered an oversized message with 1009 already (and stops reading the socket): the
    // connection ends now, not when that socket finally closes.
    client.on('error', (e: Error) => {
      c.clientError = e;
      if (tooBig(e)) end(c, 'frame_too_large', { status: 101, clientCode: 1009, clientReason: `a message ${limitText()}`, toUpstream: [1001, 'the client connection ended'] });
    });
    upstream.on('error', (e: Error) => {
      if (tooBig(e)) end(c, 'frame_too_large', { status: 101, toClient: [1009, `replica ${replica} sent a message ${limitText()}`] });
    });
    const touch = () => { c.lastActivity = nowMs(); };
    pipe(client, upstream, {
      activity: touch,
      message(data, isBinary) {
        c.framesIn++;
        c.bytesIn += data.length;
        if (!isBinary && eventType(data) === 'input_audio_buffer.commit') c.tap.commit(c.lastActivity);
      },
    });
    const fromUpstream = (data: Buffer, isBinary: boolean) => {
      c.framesOut++;
      c.bytesOut += data.length;
      if (isBinary) return;
      const type = eventType(data);
      if (type === 'transcription.delta') {
        if (c.tap.delta(c.lastActivity)) return;
      } else if (type === 'transcription.done') {
        const u = c.tap.done(c.lastActivity);
        if (u !== null) recorder.utterance(replica, u);
        if (c.sessionKey !== null) voice.speechEnded(c.sessionKey, c.lastActivity, c.trace?.context() ?? null);
      }
    };
    // session.created and what came with it go first, then the upstream's own listener takes over.
    for (const [data, isBinary] of up.release()) {
      fromUpstream(data, isBinary);
      client.send(data, { binary: isBinary });
    }
    pipe(upstream, client, { activity: touch, message: fromUpstream });
    client.on('close', (code: number, reason: Buffer) => {
      if (c.ended) return;
      const text = reason.toString();
      end(c, 'client', { status: 101, clientCode: code, clientReason: text || null, toUpstream: sendableCode(code) ? [code, text] : code === 1005 ? [null, ''] : [1001, 'the client went away'] });
    });
    upstream.on('close', (code: number, reason: Buffer) => {
      if (c.ended) return;
      const err = c.upstreamError;
      if (code === 1006 || !sendableCode(code) && code !== 1005) {
        return end(c, 'replica_failed', { status: 101, toClient: [1011, `replica ${replica} failed: ${err?.message ?? 'connection lost'}`] });
      }
      end(c, 'replica', { status: 101, toClient: code === 1005 ? [null, ''] : [code, reason.toString()] });
    });
  }

  function sweep(): void {
    if (open.size === 0) return;
    const now = nowMs();
    const config = deps.config();
    const idleMs = config.realtime.idleMs;
    const wall = Date.now();
    for (const c of [...open]) {
      if (c.acceptedAt === 0 || c.ended) continue;
      const r = c.replica;
      if (now - c.lastActivity > idleMs) {
        end(c, 'idle', { status: 101, toClient: [1001, `idle for ${idleMs} ms (realtime.idleMs)`], toUpstream: [1001, 'idle'] });
      } else if (r !== null && registry.byName(r.name) !== r) {
        end(c, 'replica_drained', { status: 101, toClient: [1012, `replica ${r.name} left the fleet`], toUpstream: [1001, 'the replica left the gateway\'s fleet'] });
      } else if (r !== null && r.draining) {
        if (c.drainSeen === 0) c.drainSeen = Math.max(r.drain?.startedAt ?? wall, c.receivedWall);
        if (wall - c.drainSeen >= config.timeouts.drainMs) end(c, 'replica_drained', { status: 101, toClient: [1012, `replica ${r.name} drained (timeouts.drainMs ${config.timeouts.drainMs} ms): reconnect`], toUpstream: [1001, 'drained'] });
      } else {
        c.drainSeen = 0;
      }
    }
  }
  const sweeper = setInterval(sweep, SWEEP_MS);
  sweeper.unref();

  return {
    upgrade,
    get open() { return open.size; },
    openOn,
    reconfigure(c) {
      limiter.configure(limitOf(c));
      wss.options.maxPayload = c.realtime.maxFrameBytes;
    },
    async closeAll() {
      closing = true;
      clearInterval(sweeper);
      const sockets: WebSocket[] = [];
      for (const c of [...open]) {
        if (c.client !== null) sockets.push(c.client);
        if (c.upstream !== null) sockets.push(c.upstream);
        if (c.acceptedAt > 0) end(c, 'shutdown', { status: 101, toClient: [1001, 'the gateway is shutting down'], toUpstream: [1001, 'the gateway is shutting down'] });
        else refuse(c, 'shutting_down', errors.shuttingDown([], null, undefined, ['retry-after', '1']));
      }
      const closed = (ws: WebSocket) => ws.readyState === WebSocket.CLOSED;
      const deadline = Date.now() + CLOSE_GRACE_MS;
      while (!sockets.every(closed) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      for (const ws of sockets) if (!closed(ws)) ws.terminate();
      wss.close();
    },
  };
}
