/** Where the CLI writes: process.stdout/stderr in main.ts, string collectors in tests. */
export interface TextSink {
  write(text: string): unknown;
}
