import pino, { type Logger, type LoggerOptions } from 'pino';

/** Pino options shared by the gateway; credentials are redacted wherever they could appear. */
export function loggerOptions(level: string): LoggerOptions {
  return {
    level,
    base: { svc: 'warmroute' },
    redact: { paths: ['apiKey', '*.apiKey', 'headers.authorization', 'upstreams[*].apiKey'], censor: '[redacted]' },
  };
}

export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  return destination ? pino(loggerOptions(level), destination) : pino(loggerOptions(level));
}

export type { Logger };
