import { describe, expect, it } from '@jest/globals';
import { FairSlots, type Slot } from '../src/processors/fair-slots.js';

const OPTIONS = { slots: 8, reserve: 2, perSubscription: 4, maxWaiting: 10 };

/** Takes what acquire answers at once; a waiting attempt is recorded in `granted` when its slot comes. */
function harness(options = OPTIONS) {
  const slots = new FairSlots(options);
  const granted: string[] = [];
  const held = new Map<string, Slot[]>();
  const hold = (label: string, slot: Slot) => {
    granted.push(label);
    held.set(label, [...(held.get(label) ?? []), slot]);
  };
  /** Asks for a slot; answers whether it started at once, is waiting, or may not wait. */
  async function ask(account: string, subscription: string, label = `${account}/${subscription}`): Promise<'started' | 'waiting' | 'refused'> {
    let settled: 'pending' | 'started' | 'refused' = 'pending';
    void slots.acquire(account, subscription).then((admission) => {
      if ('slot' in admission) hold(label, admission.slot);
      settled = 'slot' in admission ? 'started' : 'refused';
    });
    await Promise.resolve();
    await Promise.resolve();
    return settled === 'pending' ? 'waiting' : settled;
  }
  const release = async (label: string) => {
    const slot = held.get(label)?.shift();
    if (!slot) throw new Error(`no slot held by ${label}`);
    slot.release();
    await Promise.resolve();
    await Promise.resolve();
  };
  return { slots, ask, release, granted };
}

describe('the fair share of a dispatcher’s attempt slots', () => {
  it('lets a lone busy account use every shared slot, and no reserved one', async () => {
    const { slots, ask } = harness();
    const answers = [];
    for (let i = 0; i < 12; i += 1) answers.push(await ask('busy', `sub-${i % 3}`));
    expect(answers.filter((a) => a === 'started')).toHaveLength(8);
    expect(slots.counts()).toEqual({ inFlight: 8, waiting: 4, accounts: 1 });
  });

  it('starts another subscription of an account at once while one of its subscriptions, at its limit, has attempts waiting', async () => {
    const { slots, ask, release, granted } = harness();
    // A hanging receiver: its subscription holds perSubscription slots and has more attempts waiting.
    for (let i = 0; i < 6; i += 1) await ask('acct', 'hanging', `hanging-${i}`);
    expect(slots.counts()).toEqual({ inFlight: 4, waiting: 2, accounts: 1 });

    const fast = [await ask('acct', 'fast', 'fast-0'), await ask('acct', 'fast', 'fast-1')];

    expect(fast).toEqual(['started', 'started']);
    expect(slots.counts()).toEqual({ inFlight: 6, waiting: 2, accounts: 1 });
    // The hanging subscription's waiting attempts still come first, in order, when one of its own ends.
    await release('hanging-0');
    expect(granted.slice(-1)).toEqual(['hanging-4']);
  });

  it('starts an account with nothing in flight at once while another holds every shared slot: the limit grows for it', async () => {
    const { slots, ask } = harness();
    for (let i = 0; i < 20; i += 1) await ask('noisy', `sub-${i % 5}`);
    expect(slots.counts().inFlight).toBe(8);

    expect(await ask('quiet-1', 'a')).toBe('started');
    expect(await ask('quiet-2', 'b')).toBe('started');
    // The reserve is spent: a third account now waits for a slot (taking a waiting place of the noisy one's).
    expect(await ask('quiet-3', 'c')).toBe('waiting');
    expect(slots.counts()).toEqual({ inFlight: 10, waiting: 10, accounts: 4 });
  });

  it('gives a freed slot to the account with the fewest in flight, and each account’s attempts in the order they came', async () => {
    const { ask, release, granted } = harness();
    for (let i = 0; i < 8; i += 1) await ask('noisy', `sub-${i % 2}`, `noisy-${i}`);
    expect(await ask('noisy', 'sub-0', 'noisy-late')).toBe('waiting');
    expect(await ask('quiet', 'a', 'quiet-0')).toBe('started');
    expect(await ask('quiet', 'a', 'quiet-1')).toBe('waiting');
    expect(await ask('quiet', 'a', 'quiet-2')).toBe('waiting');
    granted.length = 0;

    await release('noisy-0');
    await release('noisy-1');
    await release('noisy-2');
    // Busy accounts start only below the 8 shared slots (quiet's first took a reserved one), and a
    // freed slot goes to the one with fewer in flight: noisy gets nothing back until quiet has more.
    expect(granted).toEqual(['quiet-1', 'quiet-2']);
  });

  it('gives a freed slot of an account to its subscription below its part, before one that waited longer', async () => {
    const { ask, release, granted } = harness({ slots: 4, reserve: 0, perSubscription: 4, maxWaiting: 10 });
    for (let i = 0; i < 4; i += 1) expect(await ask('acct', 'hot', `hot-${i}`)).toBe('started');
    expect(await ask('acct', 'hot', 'hot-late')).toBe('waiting');
    expect(await ask('acct', 'cold', 'cold-0')).toBe('waiting');
    granted.length = 0;

    await release('hot-0');

    // hot holds 3 of the 4, more than half while cold waits: cold takes the slot.
    expect(granted).toEqual(['cold-0']);
  });

  it('leaves no slot idle while nobody else waits: a busy account takes the free ones beyond its share', async () => {
    const { slots, ask } = harness();
    for (let i = 0; i < 4; i += 1) expect(await ask('a', `a-${i}`)).toBe('started');
    for (let i = 0; i < 4; i += 1) expect(await ask('b', `b-${i}`)).toBe('started');
    expect(slots.counts()).toEqual({ inFlight: 8, waiting: 0, accounts: 2 });
  });

  it('sends an account past its share of the waiting room back for about as long as its attempts take', async () => {
    /** One account's 8 slots taken, 4 of them released after `attemptMs`, then taken again, and the waiting room filled: how long is the next one sent back for? */
    async function sentBackFor(attemptMs: number): Promise<number> {
      const slots = new FairSlots({ ...OPTIONS, perSubscription: 8 });
      const take = async () => {
        const admission = await Promise.race([slots.acquire('acct', 'sub'), Promise.resolve('waiting' as const)]);
        return admission !== 'waiting' && 'slot' in admission ? admission.slot : undefined;
      };
      const held = [];
      for (let i = 0; i < 8; i += 1) held.push(await take());
      await new Promise((resolve) => setTimeout(resolve, attemptMs));
      for (const slot of held.splice(0, 4)) slot?.release();
      for (let i = 0; i < 4 + OPTIONS.maxWaiting; i += 1) await take();
      const answer = await slots.acquire('acct', 'sub');
      slots.stop();
      if ('slot' in answer) throw new Error('expected no room');
      return answer.backInMs;
    }
    const fast = await sentBackFor(0);
    const slow = await sentBackFor(300);

    expect(fast).toBeLessThan(150);
    expect(slow).toBeGreaterThan(fast);
    expect(slow).toBeLessThanOrEqual(3_000);
  });

  it('keeps at most its share of the waiting room per account, and refuses every attempt once stopped', async () => {
    const { slots, ask } = harness();
    const answers = [];
    for (let i = 0; i < 30; i += 1) answers.push(await ask('flood', `sub-${i % 5}`));
    expect(answers.filter((a) => a === 'waiting')).toHaveLength(10);
    expect(answers.filter((a) => a === 'refused')).toHaveLength(12);
    expect(await ask('other', 'x')).toBe('started');

    slots.stop();
    expect(slots.counts().waiting).toBe(0);
    expect(await ask('late', 'y')).toBe('refused');
  });

  it('sends every waiting attempt back to the queue at once when stopped', async () => {
    const slots = new FairSlots({ slots: 1, reserve: 0, perSubscription: 1, maxWaiting: 1 });
    const first = await slots.acquire('acct', 'sub');
    const waiting = slots.acquire('acct', 'sub');

    slots.stop();

    expect('slot' in first).toBe(true);
    await expect(waiting).resolves.toEqual({ backInMs: 0 });
    expect(await slots.acquire('other', 'x')).toEqual({ backInMs: 0 });
  });
});
