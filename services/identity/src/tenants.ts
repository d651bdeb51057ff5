import type { IdentityStore, TenantRecord } from './store.js';

/** Creates the tenant, or returns the existing one unchanged (`created` false). */
export async function createTenant(store: IdentityStore, id: string, name: string): Promise<{ tenant: TenantRecord; created: boolean }> {
  const inserted = await store.insertTenant({ id, name, at: Date.now() });
  if (inserted) return { tenant: inserted, created: true };
  const existing = await store.tenant(id);
  // Tenants are never deleted, so the row that blocked the insert is still there.
  if (!existing) throw new Error(`Tenant ${id} conflicted on insert but cannot be read`);
  return { tenant: existing, created: false };
}

export function listTenants(store: IdentityStore): Promise<TenantRecord[]> {
  return store.tenants();
}
