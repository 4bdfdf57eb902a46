import type { SessionStore } from '../../store/types.js';
import type { Router } from '../types.js';

/** The admin half of a Router, the same for every strategy: it reads the session store. */
export function sessionAdmin(store: SessionStore, now: () => number): Pick<Router, 'session' | 'unpin' | 'pinsByReplica'> {
  return {
    session: (key) => store.get(key, now()),
    unpin: (key) => store.unpin(key),
    pinsByReplica: () => store.countsByReplica(now()),
  };
}
