/**
 * The body a request is forwarded with: the bytes received, or, when the gateway sets fields (the
 * tool-call guard's token floor, the priority class for vLLM), the parsed body with those fields
 * encoded once. Only such a request pays for an encode; every other keeps its bytes.
 */
export function bodyWithFields(parsed: Record<string, unknown>, received: Buffer, ...sets: (Record<string, unknown> | null)[]): Buffer {
  let fields: Record<string, unknown> | null = null;
  for (const s of sets) if (s !== null) fields = { ...(fields ?? {}), ...s };
  return fields === null ? received : Buffer.from(JSON.stringify({ ...parsed, ...fields }));
}
