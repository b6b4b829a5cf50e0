import { Writable } from 'node:stream';
import winston from 'winston';
import type { Logger } from '../logger.js';

export interface LogEntry {
  level: string;
  message: string;
  [field: string]: unknown;
}

/** A logger that keeps its entries in memory, for tests that assert what was (or was not) logged. */
export function createCapturingLogger(level = 'info'): { logger: Logger; entries: LogEntry[] } {
  const entries: LogEntry[] = [];
  const stream = new Writable({
    objectMode: true,
    write(info: LogEntry, _encoding, done) {
      entries.push(info);
      done();
    },
  });
  const logger = winston.createLogger({ level, transports: [new winston.transports.Stream({ stream })] });
  return { logger, entries };
}
