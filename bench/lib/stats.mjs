// Small, dependency-free statistics for the benchmark report.

/** Sorted copy of the finite numbers in `values`. */
export function sorted(values) {
  const out = Float64Array.from(values.filter((v) => Number.isFinite(v)));
  out.sort();
  return out;
}

/** The q-quantile (0..1) of already sorted values, nearest-rank; NaN when empty. */
export function quantileSorted(s, q) {
  if (s.length === 0) return NaN;
  const rank = Math.ceil(q * s.length);
  return s[Math.min(s.length - 1, Math.max(0, rank - 1))];
}

export function quantile(values, q) {
  return quantileSorted(sorted(values), q);
}

/** p50, p99, min, max, mean and count of a sample. */
export function describe(values) {
  const s = sorted(values);
  if (s.length === 0) return { count: 0, min: NaN, p50: NaN, p99: NaN, max: NaN, mean: NaN };
  let sum = 0;
  for (const v of s) sum += v;
  return {
    count: s.length,
    min: s[0],
    p50: quantileSorted(s, 0.5),
    p99: quantileSorted(s, 0.99),
    max: s[s.length - 1],
    mean: sum / s.length,
  };
}

/** Median, min and max across runs (the median of an even count is the mean of the middle two). */
export function summarizeRuns(values) {
  const s = sorted(values);
  if (s.length === 0) return { median: NaN, min: NaN, max: NaN, runs: [] };
  const mid = s.length >> 1;
  const median = s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
  return { median, min: s[0], max: s[s.length - 1], runs: [...values] };
}

/** A growable Float64 buffer, for per-request samples without per-sample allocation. */
export class Samples {
  constructor(capacity = 1024) {
    this.buf = new Float64Array(capacity);
    this.length = 0;
  }
  push(v) {
    if (this.length === this.buf.length) {
      const next = new Float64Array(this.buf.length * 2);
      next.set(this.buf);
      this.buf = next;
    }
    this.buf[this.length++] = v;
  }
  values() {
    return Array.from(this.buf.subarray(0, this.length));
  }
  /** In the results' JSON, the summary: the samples themselves (up to 65,536 per measurement) made latest.json 7 MB. */
  toJSON() {
    return this.describe();
  }
  describe() {
    const s = this.buf.slice(0, this.length);
    s.sort();
    if (s.length === 0) return describe([]);
    let sum = 0;
    for (const v of s) sum += v;
    return { count: s.length, min: s[0], p50: quantileSorted(s, 0.5), p99: quantileSorted(s, 0.99), max: s[s.length - 1], mean: sum / s.length };
  }
}

/** Wall-clock milliseconds with sub-ms precision, comparable across processes on one machine. */
export function nowMs() {
  return performance.timeOrigin + performance.now();
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `check` until it returns a truthy value or the time is up; returns the last value. */
export async function until(check, timeoutMs, everyMs = 100) {
  const deadline = Date.now() + timeoutMs;
  let value = await check();
  while (!value && Date.now() < deadline) {
    await sleep(everyMs);
    value = await check();
  }
  return value;
}
