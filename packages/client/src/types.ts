// Placeholder until the OpenAPI document lands: replaced by aliases of the generated types.
export type EventType = 'scan.completed' | 'ai_check.completed' | 'power_up.deployed';
export type DeliveryStatus = 'pending' | 'delivered' | 'failed';
export interface SiteSummary { id: string; domain: string; name: string | null; status: 'active' | 'inactive' | 'prospect'; createdAt: string }
export interface SiteDetail extends SiteSummary { latestScan: { id: string; score: number; status: 'completed'; completedAt: string } | null }
export interface ScanHistoryEntry { id: string; score: number; status: 'completed'; trigger: 'scheduled' | 'manual'; startedAt: string; completedAt: string }
export interface ScanDetail { id: string; siteId: string; status: 'running' | 'completed' | 'failed'; score: number | null; trigger: 'scheduled' | 'manual'; startedAt: string; completedAt: string | null; failedAt: string | null; categories: Array<{ name: string; score: number }> }
export interface AiMonitorRun { id: string; siteId: string; status: 'completed'; compositeScore: number; completedAt: string; engines: Array<{ engine: string; score: number }> }
export interface SubscriptionCreated { id: string; url: string; events: string[]; secret: string; createdAt: string }
export interface SubscriptionListing { id: string; url: string; events: string[]; createdAt: string; lastDeliveryAt: string | null; failureCount: number; status?: 'active' | 'disabled' }
export interface DeliveryAttempt { n: number; at: string; statusCode: number | null; error: string | null; durationMs: number }
export interface Delivery { id: string; eventId: string; event: string; status: DeliveryStatus; createdAt: string; nextAttemptAt: string | null; redeliveryOf: string | null; attempts: DeliveryAttempt[] }
export interface DeliveryDetail extends Delivery { payload: unknown; attempts: Array<DeliveryAttempt & { responseExcerpt: string | null }> }
