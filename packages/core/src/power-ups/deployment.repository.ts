import { InputError } from '../errors.js';

export interface PowerUpDeployment {
  id: string;
  siteId: string;
  powerUpId: string;
  deployedAt: Date;
}

/** A Power-Up id as producers give it: trimmed, 1-200 characters. */
export function assertPowerUpId(input: string): string {
  const powerUpId = input.trim();
  if (!powerUpId || powerUpId.length > 200) throw new InputError('powerUpId must be 1-200 characters');
  return powerUpId;
}
