import xxhash from 'xxhash-wasm';

/** xxhash64, instantiated once at module load (WASM compile is async, hashing is sync). */
export const xx = await xxhash();

/** 64-bit hash of a string as a bigint. */
export function hash64(input: string, seed = 0n): bigint {
  return xx.h64(input, seed);
}
