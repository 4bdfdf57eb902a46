import { nearestName } from './nearest.js';

/**
 * node:util parseArgs's error for a command line, as one line for the user: the unknown flag with
 * the nearest valid one, the flag that lacks its value. parseArgs itself throws a TypeError
 * whose message is written for programmers; any other error is returned as null.
 */
export function argvProblem(err: unknown, flags: readonly string[]): string | null {
  const code = (err as { code?: string })?.code;
  const message = (err as Error)?.message ?? '';
  const named = /'([^' ]+)/.exec(message)?.[1] ?? '';
  switch (code) {
    case 'ERR_PARSE_ARGS_UNKNOWN_OPTION': {
      const name = named.replace(/^-+/, '').replace(/=.*$/, '');
      const near = nearestName(name, flags);
      return `unknown flag ${named}${near ? `; did you mean --${near}?` : ''}`;
    }
    case 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE':
      return /argument missing/.test(message) ? `${named} needs a value` : `${named} takes no value`;
    case 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL':
      return `unexpected argument ${JSON.stringify(named)}: every setting is a --flag`;
    default:
      return null;
  }
}
