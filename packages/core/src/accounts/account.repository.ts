import type { DbOrTx } from '../db/knex.js';
import { returnedRow } from '../db/tables.js';
import { InputError } from '../errors.js';
import { newId } from '../ids.js';

export interface Account {
  id: string;
  name: string;
  createdAt: Date;
}

/** Creates an account (operators do this with `svc accounts create`). */
export async function createAccount(db: DbOrTx, input: { name: string }): Promise<Account> {
  const name = input.name.trim();
  if (!name || name.length > 200) throw new InputError('account name must be 1-200 characters');
  const row = returnedRow(await db('accounts').insert({ id: newId('acct'), name }).returning(['id', 'name', 'created_at']));
  return { id: row.id, name: row.name, createdAt: row.created_at };
}
