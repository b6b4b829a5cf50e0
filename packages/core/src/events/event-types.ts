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

/** True for a type of §6.1. */
export function isEventType(value: unknown): value is EventType {
  return typeof value === 'string' && (EVENT_TYPES as readonly string[]).includes(value);
}

/**
 * The delivery envelope of spec §2.5, serialized once. Data fields are copied by name so that
 * nothing but the fields of §6.1 can reach a receiver.
 */
export function buildEventBody<T extends EventType>(type: T, timestamp: Date, data: EventDataByType[T]): string {
  const { head, tail } = eventBodyAround(type, data);
  return `${head}${timestamp.toISOString()}${tail}`;
}

/**
 * The envelope's bytes before and after its timestamp, so that the database can date the event
 * with its own clock in the same INSERT (head + ISO 8601 time + tail = buildEventBody's bytes:
 * `{"event":…,"timestamp":"…","data":{…}}`, exactly JSON.stringify of the envelope).
 */
export function eventBodyAround<T extends EventType>(type: T, data: EventDataByType[T]): { head: string; tail: string } {
  return {
    head: `{"event":${JSON.stringify(type)},"timestamp":"`,
    tail: `",${JSON.stringify({ data: pickData(type, data) }).slice(1)}`,
  };
}

function pickData(type: EventType, data: EventDataByType[EventType]): Record<string, string | number> {
  switch (type) {
    case 'scan.completed': {
      const d = data as ScanCompletedData;
      return { scanId: d.scanId, siteId: d.siteId, domain: d.domain, score: d.score };
    }
    case 'ai_check.completed': {
      const d = data as AiCheckCompletedData;
      return { runId: d.runId, siteId: d.siteId, domain: d.domain, compositeScore: d.compositeScore };
    }
    case 'power_up.deployed': {
      const d = data as PowerUpDeployedData;
      return { deploymentId: d.deploymentId, siteId: d.siteId, powerUpId: d.powerUpId };
    }
  }
}
