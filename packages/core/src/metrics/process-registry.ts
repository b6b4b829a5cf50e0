import { collectDefaultMetrics, Registry } from 'prom-client';

/**
 * A registry of one process (never prom-client's global one: tests build several apps and
 * dispatchers in one jest worker), with Node's default process metrics in it.
 */
export function createProcessRegistry(): Registry {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  return registry;
}

/**
 * Runs a scrape-time reading with a bound: a gauge read from Redis or Postgres must not hang
 * the scrape while they are away; the gauge then keeps its last value.
 */
export async function readWithin<T>(ms: number, read: () => Promise<T>): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      read(),
      new Promise<undefined>((resolve) => {
        timer = setTimeout(() => resolve(undefined), ms);
      }),
    ]);
  } catch {
    return undefined;
  } finally {
    clearTimeout(timer);
  }
}
