import winston from 'winston';
import type { LogLevel } from './config.js';

export type Logger = winston.Logger;

/** JSON lines on stdout, one object per entry; `silent` is for tests that assert nothing about logs. */
export function createLogger(level: LogLevel, options: { silent?: boolean; service?: string } = {}): Logger {
  return winston.createLogger({
    level,
    silent: options.silent ?? false,
    defaultMeta: options.service ? { service: options.service } : {},
    format: winston.format.combine(winston.format.timestamp(), winston.format.errors({ stack: true }), winston.format.json()),
    transports: [new winston.transports.Console()],
  });
}
