/** Spec §6.1: the only event types that exist. `*` subscribes to these and to future ones. */
export const EVENT_TYPES = ['scan.completed', 'ai_check.completed', 'power_up.deployed'] as const;
export type EventType = (typeof EVENT_TYPES)[number];
export const WILDCARD_EVENT = '*';

export interface ScanCompletedData {
  scanId: string;
  siteId: string;
  domain: string;
  score: number;
}

export interface AiCheckCompletedData {
  runId: string;
  siteId: string;
  domain: string;
  compositeScore: number;
}

export interface PowerUpDeployedData {
  deploymentId: string;
  siteId: string;
  powerUpId: string;
}

export interface EventDataByType {
  'scan.completed': ScanCompletedData;
  'ai_check.completed': AiCheckCompletedData;
  'power_up.deployed': PowerUpDeployedData;
}

/** A data field of an event type. */
export type EventField<T extends EventType> = keyof EventDataByType[T] & string;

/**
 * Each type's data fields, in §6.1 order: the order of the keys in the body a receiver gets.
 * Only these fields are written, so nothing else a caller passes can reach a receiver.
 */
export const EVENT_DATA_FIELDS: { readonly [T in EventType]: ReadonlyArray<EventField<T>> } = {
  'scan.completed': ['scanId', 'siteId', 'domain', 'score'],
  'ai_check.completed': ['runId', 'siteId', 'domain', 'compositeScore'],
  'power_up.deployed': ['deploymentId', 'siteId', 'powerUpId'],
};

/** True for a type of §6.1. */
export function isEventType(value: unknown): value is EventType {
  return typeof value === 'string' && (EVENT_TYPES as readonly string[]).includes(value);
}
