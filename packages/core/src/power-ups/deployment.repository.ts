import type { DbOrTx } from '../db/knex.js';
import { InputError } from '../errors.js';
import { newId } from '../ids.js';

export interface PowerUpDeployment {
  id: string;
  siteId: string;
  powerUpId: string;
  deployedAt: Date;
}

interface PowerUpDeploymentRow {
  id: string;
  site_id: string;
  power_up_id: string;
  deployed_at: Date;
}

/** A Power-Up id as producers give it: trimmed, 1-200 characters. */
export function assertPowerUpId(input: string): string {
  const powerUpId = input.trim();
  if (!powerUpId || powerUpId.length > 200) throw new InputError('powerUpId must be 1-200 characters');
  return powerUpId;
}

/** Stores a successful Power-Up deployment to a site; call it inside the producer's transaction. */
export async function insertPowerUpDeployment(tx: DbOrTx, siteId: string, powerUpId: string): Promise<PowerUpDeployment> {
  const [row] = (await tx('power_up_deployments')
    .insert({ id: newId('dep'), site_id: siteId, power_up_id: powerUpId })
    .returning(['id', 'site_id', 'power_up_id', 'deployed_at'])) as PowerUpDeploymentRow[];
  return { id: row!.id, siteId: row!.site_id, powerUpId: row!.power_up_id, deployedAt: row!.deployed_at };
}
