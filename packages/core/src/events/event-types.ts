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
  // With no field from the database, the only field segment is the timestamp.
  return eventBodySegments(type, data, [])
    .map((segment) => (typeof segment === 'string' ? segment : JSON.stringify(timestamp.toISOString())))
    .join('');
}

/** A piece of an event body: bytes known now, or a JSON string value the database fills in. */
export type BodySegment = string | { field: string };

/**
 * The envelope's bytes as segments, so that one INSERT can write the body with values only the
 * database knows in that statement: its clock (`timestamp`) and the data fields named in
 * `fromDatabase` (a site's id or domain read in the same statement). Joined with the values
 * JSON-encoded, the segments are exactly JSON.stringify of the envelope
 * (`{"event":…,"timestamp":"…","data":{…}}`, fields in §6.1 order).
 */
export function eventBodySegments<T extends EventType>(
  type: T,
  data: EventDataByType[T],
  fromDatabase: ReadonlyArray<keyof EventDataByType[T] & string>,
): BodySegment[] {
  const segments: BodySegment[] = [`{"event":${JSON.stringify(type)},"timestamp":`, { field: 'timestamp' }];
  let literal = ',"data":{';
  Object.entries(pickData(type, data)).forEach(([key, value], i) => {
    literal += `${i > 0 ? ',' : ''}${JSON.stringify(key)}:`;
    if ((fromDatabase as readonly string[]).includes(key)) {
      segments.push(literal, { field: key });
      literal = '';
    } else literal += JSON.stringify(value);
  });
  segments.push(`${literal}}}`);
  return segments;
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
