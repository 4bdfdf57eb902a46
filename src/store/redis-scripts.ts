/** The pin format on the wire and in Redis, and the Lua scripts that place and refresh pins atomically. */

/** `a|b|rest`: the first n fields split on '|', the rest (a session key may hold '|') kept whole. */
export function splitN(s: string, n: number): string[] | null {
  const out: string[] = [];
  let from = 0;
  for (let i = 0; i < n; i++) {
    const j = s.indexOf('|', from);
    if (j < 0) return null;
    out.push(s.slice(from, j));
    from = j + 1;
  }
  out.push(s.slice(from));
  return out;
}

/**
 * One atomic placement, published when written (KEYS[1] the pin; ARGV value, since, replica, ttl,
 * mode, channel, message). `new`: SET NX —
 * the first gateway to place a session wins (re-placing it on the same replica refreshes it).
 * `move`: the newer move wins; two moves in the same millisecond go to the greater replica name,
 * which every gateway applies the same way. Returns nil when written, else the winning value.
 */
export const PLACE = `
local cur = redis.call('GET', KEYS[1])
if cur then
  local bar = string.find(cur, '|', 1, true)
  local curReplica = string.sub(cur, 1, bar - 1)
  local bar2 = string.find(cur, '|', bar + 1, true)
  local curSince = tonumber(string.sub(cur, bar + 1, (bar2 or 0) - 1))
  if curReplica ~= ARGV[3] then
    if ARGV[5] == 'new' then return cur end
    local since = tonumber(ARGV[2])
    if curSince > since or (curSince == since and curReplica > ARGV[3]) then return cur end
  end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[4])
redis.call('PUBLISH', ARGV[6], ARGV[7])
return false
`;

/**
 * The TTL refresh of an unmoved pin, only if Redis still holds this gateway's placement (KEYS[1];
 * ARGV replica, ttl): 1 refreshed, 0 gone, else the value Redis holds — another gateway moved the
 * session and this one missed the message.
 */
export const REFRESH = `
local cur = redis.call('GET', KEYS[1])
if not cur then return 0 end
local bar = string.find(cur, '|', 1, true)
if bar and string.sub(cur, 1, bar - 1) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return cur
`;

/**
 * Deletes a shared drain entry (KEYS[1] the hash; ARGV field, the time read) only if no gateway
 * has rewritten it since it was read: a plain HDEL after HGETALL could delete the entry another
 * gateway, one that has the replica, refreshed in between, and every gateway would undrain it.
 * 1 deleted, 0 kept.
 */
export const EXPIRE_DRAIN = `
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  return redis.call('HDEL', KEYS[1], ARGV[1])
end
return 0
`;

/** Which of two pins of a session wins: the newer move, and the greater replica name on a tie (as PLACE). */
export function newerPin(a: { since: number; replica: string }, b: { since: number; replica: string }): boolean {
  return a.since > b.since || (a.since === b.since && a.replica > b.replica);
}
