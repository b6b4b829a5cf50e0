/** The events the service sends, as delivered. */
export interface ScanCompletedEvent {
  event: 'scan.completed';
  timestamp: string;
  data: { scanId: string; siteId: string; domain: string; score: number };
}

export interface AiCheckCompletedEvent {
  event: 'ai_check.completed';
  timestamp: string;
  data: { runId: string; siteId: string; domain: string; compositeScore: number };
}

export interface PowerUpDeployedEvent {
  event: 'power_up.deployed';
  timestamp: string;
  data: { deploymentId: string; siteId: string; powerUpId: string };
}

/**
 * A type this version of the library does not know: subscriptions to `*` receive future types
 * too, so they are passed through as they came, never refused.
 */
export interface UnknownWebhookEvent {
  event: string & {};
  timestamp: string;
  data: Record<string, unknown>;
}

export type KnownWebhookEvent = ScanCompletedEvent | AiCheckCompletedEvent | PowerUpDeployedEvent;
export type WebhookEvent = KnownWebhookEvent | UnknownWebhookEvent;

export const KNOWN_EVENT_TYPES = ['scan.completed', 'ai_check.completed', 'power_up.deployed'] as const;

/** Narrows an event to one of the known types: `if (isEventOfType(e, 'scan.completed')) e.data.score`. */
export function isEventOfType<T extends KnownWebhookEvent['event']>(
  event: WebhookEvent,
  type: T,
): event is Extract<KnownWebhookEvent, { event: T }> {
  return event.event === type;
}
