import { createHmac, randomBytes } from 'node:crypto';

/** A session key's tag in logs: never the key itself. */
export type SessionTagger = (key: string | null) => string | null;

/**
 * Tags are HMAC-SHA256(secret, key), 48 bits in hex. Keys are often guessable (a room name, a
 * call SID), so an unkeyed hash of one is reversed offline by trying candidates; with a secret that
 * never leaves the deployment, tags still correlate across its gateways and log lines but cannot
 * be tested against guesses. With no secret configured, one is drawn at start: tags then correlate
 * within this process only (and the gateway says so at start).
 */
export function createSessionTagger(secret: string | null): SessionTagger {
  const key = secret === null ? randomBytes(32) : Buffer.from(secret, 'utf8');
  return (k) => (k === null ? null : createHmac('sha256', key).update(k).digest('hex').slice(0, 12));
}
