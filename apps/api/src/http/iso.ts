/** A time as the API writes it (ISO 8601, UTC, milliseconds), or null. */
export function iso(date: Date): string;
export function iso(date: Date | null): string | null;
export function iso(date: Date | null): string | null {
  return date === null ? null : date.toISOString();
}
