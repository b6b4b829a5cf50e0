/** A completed AI Monitor run; recorded with its event by producer-statements.ts. */
export interface AiMonitorRun {
  id: string;
  siteId: string;
  compositeScore: number;
  completedAt: Date;
}
