import { randomBytes } from 'node:crypto';
import { Cluster, rateLimitWindowKey, revokedKeyMarker, type Logger, type RedisClient } from '@svc/core';

/** Spec §7, §8: the window the per-key limit counts over. */
export const RATE_LIMIT_WINDOW_MS = 60_000;

/** The probe's window and limit: always room, so every probe really writes (as a counted request does). */
const PROBE_WINDOW_MS = 1_000;
const PROBE_LIMIT = 1_000_000;

export interface RateLimitDecision {
  allowed: boolean;
  /** The key's revocation was announced (revokeApiKeyEverywhere); nothing was counted. */
  revoked: boolean;
  /** False when decided by this process alone because Redis did not answer. */
  shared: boolean;
  limit: number;
  remaining: number;
  /** When the oldest request in the window leaves it, freeing a slot (epoch ms). */
  resetAtMs: number;
}

/**
 * An exact sliding window (a log of request times in a sorted set), checked and recorded in one
 * atomic script on Redis's own clock, so every API process shares one count. Refused requests
 * are not recorded: a client that waits is let in again once its window has room. The same call
 * first checks the key's revocation marker (KEYS[2]), so a revoked key costs no extra round trip.
 */
const SLIDING_WINDOW_SCRIPT = `
if redis.call('EXISTS', KEYS[2]) == 1 then
  return {-1, 0, 0}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local count = redis.call('ZCARD', KEYS[1])
local allowed = 0
if count < limit then
  redis.call('ZADD', KEYS[1], now, now .. ':' .. ARGV[3])
  count = count + 1
  allowed = 1
end
redis.call('PEXPIRE', KEYS[1], window)
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local reset = now + window
if oldest[2] then reset = tonumber(oldest[2]) + window end
return {allowed, count, reset}
`;

type SlidingWindowRedis = RedisClient & {
  slidingWindow(key: string, revokedMarker: string, limit: number, windowMs: number, member: string): Promise<[number, number, number]>;
};

export interface RateLimiterOptions {
  redis: RedisClient;
  limit: number;
  keyPrefix: string;
  logger: Logger;
  windowMs?: number;
}

/**
 * The per-key limiter. When Redis does not answer it falls back to a per-process window (so an
 * outage never becomes a 5xx for every customer), logs the switch once, and reports it. On a Redis
 * Cluster an answer speaks for its key's slot only: while one master is down, the keys on it keep
 * their per-process windows however many other keys' windows are shared meanwhile.
 */
export class SlidingWindowLimiter {
  private readonly redis: SlidingWindowRedis;
  private readonly windowMs: number;
  private readonly memberPrefix = randomBytes(6).toString('hex');
  private sequence = 0;
  private readonly local = new Map<string, number[]>();
  private degraded = false;
  private readonly cluster: boolean;

  constructor(private readonly options: RateLimiterOptions) {
    this.windowMs = options.windowMs ?? RATE_LIMIT_WINDOW_MS;
    const redis = options.redis as SlidingWindowRedis;
    if (typeof redis.slidingWindow !== 'function') {
      redis.defineCommand('slidingWindow', { numberOfKeys: 2, lua: SLIDING_WINDOW_SCRIPT });
    }
    this.redis = redis;
    this.cluster = options.redis instanceof Cluster;
  }

  /** True while decisions are made per process because Redis is unreachable. */
  get usingLocalFallback(): boolean {
    return this.degraded;
  }

  /** Counts one request of key `subject` if the window has room and the key was not revoked. */
  async consume(subject: string): Promise<RateLimitDecision> {
    const limit = this.options.limit;
    try {
      const member = `${this.memberPrefix}${(this.sequence++).toString(36)}`;
      const [allowed, count, reset] = await this.redis.slidingWindow(
        rateLimitWindowKey(this.options.keyPrefix, subject),
        revokedKeyMarker(this.options.keyPrefix, subject),
        limit,
        this.windowMs,
        member,
      );
      this.sharedAgain(subject);
      return {
        allowed: allowed === 1,
        revoked: allowed === -1,
        shared: true,
        limit,
        remaining: Math.max(0, limit - count),
        resetAtMs: Number(reset),
      };
    } catch (error) {
      this.markDegraded(error as Error);
      return this.consumeLocally(subject);
    }
  }

  /**
   * For /readyz: runs the limiter's own script on a probe key of this process (a 1 s window, so
   * it holds a handful of entries) and says whether the shared limit works. A PING is not
   * enough: a Redis that answers PING can still refuse the script's writes (an old primary
   * demoted to a read-only replica by a failover). It also ends the fallback as soon as Redis is back,
   * even if no customer request came to notice.
   */
  async probe(timeoutMs: number): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    try {
      const member = `${this.memberPrefix}${(this.sequence++).toString(36)}`;
      await Promise.race([
        this.redis.slidingWindow(
          // Both in one slot (the probe's own hash tag), as the script requires on a cluster.
          `${this.options.keyPrefix}:rl-probe:{${this.memberPrefix}}`,
          `${this.options.keyPrefix}:rl-probe:{${this.memberPrefix}}:none`,
          PROBE_LIMIT,
          PROBE_WINDOW_MS,
          member,
        ),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
        }),
      ]);
      if (this.cluster) this.dropEndedLocalWindows();
      // The probe ends the fallback (gauge, log) even on a cluster with keys still counted per
      // process: each of those leaves its window when its own slot answers. So the flag follows
      // the probes (an orchestrator's few a minute), not every request on a live master.
      this.markHealthy();
      return true;
    } catch (error) {
      this.markDegraded(error as Error);
      return false;
    } finally {
      clearTimeout(timer);
    }
  }

  private consumeLocally(subject: string): RateLimitDecision {
    const limit = this.options.limit;
    const now = Date.now();
    const times = (this.local.get(subject) ?? []).filter((at) => at > now - this.windowMs);
    const allowed = times.length < limit;
    if (allowed) times.push(now);
    this.local.set(subject, times);
    const oldest = times[0] ?? now;
    return { allowed, revoked: false, shared: false, limit, remaining: Math.max(0, limit - times.length), resetAtMs: oldest + this.windowMs };
  }

  /**
   * Redis counted `subject`. One Redis answers for every key: markHealthy forgets every local
   * window. A cluster answered for this key's slot only: this key's local window goes, the others
   * stay (their slots may still be down) until their own keys are counted in Redis again.
   */
  private sharedAgain(subject: string): void {
    if (this.cluster && this.local.size > 0) {
      this.local.delete(subject);
      // Still counting other keys per process (their slots may be down): still degraded, so the
      // gauge and the log do not flip with every request that lands on a live master.
      if (this.local.size > 0) return;
    }
    this.markHealthy();
  }

  /** Forgets local windows with no request left in them (on a cluster, keys not seen since their slot came back). */
  private dropEndedLocalWindows(): void {
    const since = Date.now() - this.windowMs;
    for (const [subject, times] of this.local) if ((times.at(-1) ?? 0) <= since) this.local.delete(subject);
  }

  private markDegraded(error: Error): void {
    if (this.degraded) return;
    this.degraded = true;
    this.options.logger.warn('rate limiter falls back to a per-process window: Redis did not answer', {
      error: error.message,
    });
  }

  private markHealthy(): void {
    if (!this.degraded) return;
    this.degraded = false;
    if (!this.cluster) this.local.clear();
    this.options.logger.info('rate limiter is shared through Redis again');
  }
}
