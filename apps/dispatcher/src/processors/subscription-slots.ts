/**
 * Caps the attempts in flight per subscription in this process, so that one receiver that
 * hangs until the timeout holds a few slots, not all of them.
 */
export class SubscriptionSlots {
  private readonly inFlight = new Map<string, number>();

  constructor(private readonly perSubscription: number) {}

  /** Takes a slot for the subscription if it has one free. */
  tryAcquire(subscriptionId: string): boolean {
    const current = this.inFlight.get(subscriptionId) ?? 0;
    if (current >= this.perSubscription) return false;
    this.inFlight.set(subscriptionId, current + 1);
    return true;
  }

  /** Gives back a slot taken with tryAcquire. */
  release(subscriptionId: string): void {
    const current = this.inFlight.get(subscriptionId) ?? 0;
    if (current <= 1) this.inFlight.delete(subscriptionId);
    else this.inFlight.set(subscriptionId, current - 1);
  }
}
