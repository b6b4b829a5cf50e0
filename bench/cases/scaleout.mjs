// Case 2b (issue 13): throughput grows with M dispatcher processes, and nothing is delivered twice.
//
// Two regimes, each a backlog published while the queues are paused and then drained:
// - dispatcher-bound: the receiver answers every attempt after a fixed delay (/slow/<ms>), as real
//   receivers take tens to hundreds of ms, so one dispatcher is bound by its attempts in flight
//   (DISPATCHER_CONCURRENCY ÷ delay), far below what the machine can do: M dispatchers should
//   drain it M times as fast (the target row: 2 ÷ 1);
// - machine-bound (information): the receiver answers at once, so one dispatcher, Postgres, Redis
//   and the receiver already keep the machine's cores busy and a second process cannot add any.
import { serviceThroughput } from './dispatcher.mjs';

/**
 * One run: M = 1..maxDispatchers, the dispatcher-bound backlog with each M and the machine-bound
 * one with M = 1 and 2. `startDispatcher(k)` starts the k-th dispatcher process (k ≥ 2) and
 * resolves once its workers are registered; `stopDispatcher(child)` stops one. `pids` names the
 * processes whose CPU is counted (the first dispatcher, the receiver, the publisher).
 */
export async function scaleoutRun({ db, receiver, queues, publishers, n, slowN, publishConcurrency, maxDispatchers, pids, startDispatcher, stopDispatcher }) {
  const extra = [];
  const pidsWith = () => ({ ...pids, ...Object.fromEntries(extra.map((child, i) => [`dispatcher-${i + 2}`, child.pid])) });
  const drain = (publisher, count, toLastAnswer) =>
    serviceThroughput({ db, receiver, publisher, n: count, publishConcurrency, backlogQueues: queues, pids: pidsWith(), toLastAnswer }).then((r) => r.svc);
  const slow = {};
  const instant = {};
  try {
    for (let m = 1; m <= maxDispatchers; m++) {
      if (m > 1) extra.push(await startDispatcher(m));
      if (m <= 2) instant[m] = await drain(publishers.instant, n, false);
      slow[m] = await drain(publishers.slow, slowN, true);
    }
  } finally {
    for (const child of extra.reverse()) await stopDispatcher(child);
  }
  return { slow, instant, ratio: slow[2].perSec / slow[1].perSec, instantRatio: instant[2].perSec / instant[1].perSec };
}

/** CPU ms of the processes measured during the drain, the receiver included (other databases' backends aside). */
export function measuredCpuMs(svc) {
  return Object.entries(svc.cpuMs)
    .filter(([k]) => k !== 'wallMs' && k !== 'postgres-other')
    .reduce((sum, [, v]) => sum + v, 0);
}
