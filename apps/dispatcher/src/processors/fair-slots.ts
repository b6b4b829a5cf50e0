/**
 * The attempt slots of one dispatcher, shared by account and, within an account, by subscription.
 *
 * An HTTP request in flight cannot be taken back, so fairness is decided when a slot is given:
 * - accounts that already have attempts in flight share `slots`; an account with nothing in flight
 *   may also take one of `reserve` slots beyond them, so it never waits for another account's
 *   attempts to end (a receiver that hangs until the timeout holds its slot for that long): the
 *   limit grows for it;
 * - while another account waits, a busy account may hold at most its share: the shared slots
 *   divided among the accounts that want slots now, so a lone busy account uses all of them and a
 *   second one gets half as the first one's attempts end; within the account, while another of
 *   its subscriptions waits, each gets an equal part of the account's share; a subscription never
 *   more than `perSubscription`. While nobody else waits, free slots are not left idle;
 * - an attempt that cannot start waits here, in the order it came, up to `maxWaiting` in all and an
 *   equal part of that per account (an account below its part takes the place of the latest
 *   attempt of one beyond it); past that its job goes back to the queue for about as long as the
 *   account's waiting attempts take to start (from how long its recent attempts took: tens of
 *   milliseconds for a fast receiver, at most 2 s for one that hangs). When a slot is freed it goes
 *   to the waiting attempt of the account with the fewest in flight.
 */
export interface FairSlotsOptions {
  /** DISPATCHER_CONCURRENCY: attempts in flight of accounts that already have one. */
  slots: number;
  /** DISPATCHER_PER_SUBSCRIPTION_CONCURRENCY: attempts in flight per subscription at most. */
  perSubscription: number;
  /** Slots beyond `slots` that only an account with nothing in flight may take. */
  reserve: number;
  /** Attempts waiting here for a slot, in all. */
  maxWaiting: number;
}

/** A slot held by one attempt: release it exactly once when the attempt is over. */
export interface Slot {
  release(): void;
}

/** A slot, or how long the attempt's job should go back to the queue for. */
export type Admission = { slot: Slot } | { backInMs: number };

/** How long an attempt is assumed to take before an account has a recent one. */
const FIRST_ATTEMPT_MS = 100;
const MIN_BACK_MS = 20;
const MAX_BACK_MS = 2_000;

interface Waiter {
  subscriptionId: string;
  grant: (admission: Admission) => void;
}

interface AccountState {
  inFlight: number;
  bySubscription: Map<string, number>;
  waiting: Waiter[];
  /** How long its recent attempts took (a moving average), ms. */
  attemptMs: number;
}

export class FairSlots {
  private readonly accounts = new Map<string, AccountState>();
  private inFlight = 0;
  private waiting = 0;
  private stopped = false;

  constructor(private readonly options: FairSlotsOptions) {}

  /**
   * A slot for an attempt of this subscription of this account: at once, or when one is freed
   * for it; or, when it may not wait here (its share of the waiting room is full, or the
   * dispatcher is stopping), how long its job should go back to the queue for.
   */
  acquire(accountId: string, subscriptionId: string): Promise<Admission> {
    if (this.stopped) return Promise.resolve({ backInMs: 0 });
    const account = this.accountOf(accountId);
    if (account.waiting.length === 0 && this.canStart(account, subscriptionId)) return Promise.resolve({ slot: this.start(accountId, account, subscriptionId) });
    const share = this.waitingShare();
    if (account.waiting.length >= share || (this.waiting >= this.options.maxWaiting && !this.evictBeyondShare(share))) {
      const backInMs = this.backInMs(account);
      this.forgetIfIdle(accountId, account);
      return Promise.resolve({ backInMs });
    }
    return new Promise((grant) => {
      account.waiting.push({ subscriptionId, grant });
      this.waiting += 1;
      // Behind its own account's waiting attempts that could start, in order; but never behind
      // those that cannot (a subscription at its limit): they would hold back the account's other
      // subscriptions until one of their own attempts ended.
      this.grantWaiting();
    });
  }

  /** Attempts in flight and waiting, in all. */
  counts(): { inFlight: number; waiting: number; accounts: number } {
    return { inFlight: this.inFlight, waiting: this.waiting, accounts: this.accounts.size };
  }

  /** Stops giving slots: every waiting attempt's job goes back to the queue at once. */
  stop(): void {
    this.stopped = true;
    for (const [accountId, account] of this.accounts) {
      const waiters = account.waiting.splice(0);
      this.waiting -= waiters.length;
      for (const waiter of waiters) waiter.grant({ backInMs: 0 });
      this.forgetIfIdle(accountId, account);
    }
  }

  private accountOf(accountId: string): AccountState {
    let account = this.accounts.get(accountId);
    if (!account) this.accounts.set(accountId, (account = { inFlight: 0, bySubscription: new Map(), waiting: [], attemptMs: FIRST_ATTEMPT_MS }));
    return account;
  }

  /** Accounts that want slots now: with attempts in flight or waiting. */
  private demandingAccounts(): number {
    return Math.max(1, this.accounts.size);
  }

  private waitingShare(): number {
    return Math.max(1, Math.floor(this.options.maxWaiting / this.demandingAccounts()));
  }

  /**
   * Makes room in a full waiting room for an account below its share: the latest waiting attempt
   * of the account waiting most beyond its share goes back to the queue. False when none is beyond.
   */
  private evictBeyondShare(share: number): boolean {
    let fullest: AccountState | undefined;
    for (const account of this.accounts.values()) if (!fullest || account.waiting.length > fullest.waiting.length) fullest = account;
    if (!fullest || fullest.waiting.length <= share) return false;
    const waiter = fullest.waiting.pop() as Waiter;
    this.waiting -= 1;
    waiter.grant({ backInMs: this.backInMs(fullest) });
    return true;
  }

  /** About as long as the account's waiting attempts take to start, with a spread so they do not come back together. */
  private backInMs(account: AccountState): number {
    const rounds = Math.max(1, account.waiting.length) / Math.max(1, account.inFlight);
    const ms = Math.min(MAX_BACK_MS, Math.max(MIN_BACK_MS, rounds * account.attemptMs));
    return Math.round(ms * (1 + Math.random() / 2));
  }

  /**
   * Shares bind only when someone else waits: while no other account waits, a busy account may
   * use every free slot, and while no other subscription of its account waits, a subscription may
   * use up to `perSubscription`. A slot taken that way is not taken back; a freed one goes to
   * whoever is below their share.
   */
  private canStart(account: AccountState, subscriptionId: string): boolean {
    const { slots, reserve, perSubscription } = this.options;
    const current = account.bySubscription.get(subscriptionId) ?? 0;
    if (current >= perSubscription) return false;
    if (account.inFlight === 0) return this.inFlight < slots + reserve;
    if (this.inFlight >= slots) return false;
    const othersWait = this.waiting > account.waiting.length;
    const accountShare = othersWait ? Math.ceil(slots / this.demandingAccounts()) : slots;
    if (account.inFlight >= accountShare) return false;
    if (current === 0 || !account.waiting.some((waiter) => waiter.subscriptionId !== subscriptionId)) return true;
    const subscriptions = new Set([...account.bySubscription.keys(), ...account.waiting.map((w) => w.subscriptionId)]).size;
    return current < Math.ceil(accountShare / subscriptions);
  }

  private start(accountId: string, account: AccountState, subscriptionId: string): Slot {
    account.inFlight += 1;
    account.bySubscription.set(subscriptionId, (account.bySubscription.get(subscriptionId) ?? 0) + 1);
    this.inFlight += 1;
    const startedAt = performance.now();
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        account.attemptMs = 0.8 * account.attemptMs + 0.2 * (performance.now() - startedAt);
        this.finish(accountId, account, subscriptionId);
      },
    };
  }

  private finish(accountId: string, account: AccountState, subscriptionId: string): void {
    account.inFlight -= 1;
    this.inFlight -= 1;
    const current = (account.bySubscription.get(subscriptionId) ?? 1) - 1;
    if (current === 0) account.bySubscription.delete(subscriptionId);
    else account.bySubscription.set(subscriptionId, current);
    this.forgetIfIdle(accountId, account);
    this.grantWaiting();
  }

  /** Gives freed slots to waiting attempts: the account with the fewest in flight first, each in its order. */
  private grantWaiting(): void {
    for (;;) {
      let chosen: { accountId: string; account: AccountState; index: number } | undefined;
      for (const [accountId, account] of this.accounts) {
        if (account.waiting.length === 0 || (chosen && chosen.account.inFlight <= account.inFlight)) continue;
        const index = account.waiting.findIndex((waiter) => this.canStart(account, waiter.subscriptionId));
        if (index >= 0) chosen = { accountId, account, index };
      }
      if (!chosen) return;
      const [waiter] = chosen.account.waiting.splice(chosen.index, 1) as [Waiter];
      this.waiting -= 1;
      waiter.grant({ slot: this.start(chosen.accountId, chosen.account, waiter.subscriptionId) });
    }
  }

  private forgetIfIdle(accountId: string, account: AccountState): void {
    if (account.inFlight === 0 && account.waiting.length === 0) this.accounts.delete(accountId);
  }
}
