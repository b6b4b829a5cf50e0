/** What a command produced: the object `--json` prints, and the lines a person reads otherwise. */
export interface CommandResult {
  json: Record<string, unknown>;
  lines: string[];
  /** Non-zero for a command that ran to its end but did not do all it was asked (its output says what); default 0. */
  exitCode?: number;
}

/** Dates leave the CLI as ISO 8601 strings, whatever the output mode. */
export function isoDate(date: Date): string;
export function isoDate(date: Date | null): string | null;
export function isoDate(date: Date | null): string | null {
  return date === null ? null : date.toISOString();
}

/** Writes exactly one JSON object, or the human lines. */
export function renderResult(result: CommandResult, asJson: boolean): string {
  return asJson ? `${JSON.stringify(result.json)}\n` : result.lines.map((line) => `${line}\n`).join('');
}
