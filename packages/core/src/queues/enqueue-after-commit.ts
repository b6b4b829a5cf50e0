/** Work committed to Postgres never waits longer than this on Redis: the sweep has it anyway. */
export const ENQUEUE_TIMEOUT_MS = 2_000;

/** Where a failed enqueue is reported (a winston logger is one). */
export interface EnqueueFailureLog {
  warn(message: string, meta: Record<string, unknown>): unknown;
}

/**
 * After a commit, hands the job to Redis. If Redis is away or slow the row is already safe in
 * Postgres and the dispatcher's sweep queues it later, so this never fails the caller: it
 * waits at most ENQUEUE_TIMEOUT_MS and logs `failureMessage` with `context` otherwise.
 */
export async function enqueueAfterCommit(
  enqueue: () => Promise<unknown>,
  logger: EnqueueFailureLog | undefined,
  failureMessage: string,
  context: Record<string, unknown>,
): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      enqueue(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`Redis did not accept the job within ${ENQUEUE_TIMEOUT_MS} ms`)), ENQUEUE_TIMEOUT_MS);
      }),
    ]);
  } catch (error) {
    logger?.warn(failureMessage, { ...context, error: (error as Error).message });
  } finally {
    clearTimeout(timer);
  }
}
