/** One page of a cursor-paged list. */
export interface Page<T> {
  items: T[];
  /** Pass it back to get the next page; null on the last page. */
  nextCursor: string | null;
}

/**
 * Walks every page with the cursor the server returns, yielding items one by one. Pages are
 * fetched lazily: stop iterating (break) and no further request is made.
 */
export async function* walkPages<T>(fetchPage: (cursor: string | undefined) => Promise<Page<T>>): AsyncGenerator<T, void, undefined> {
  let cursor: string | undefined;
  for (;;) {
    const page = await fetchPage(cursor);
    yield* page.items;
    if (page.nextCursor === null || page.nextCursor === cursor) return;
    cursor = page.nextCursor;
  }
}
