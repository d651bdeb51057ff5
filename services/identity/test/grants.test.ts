import { identityv1 } from '@agenthub/proto';
import { Reason } from '@agenthub/runtime';
import { backends, type Backend } from '@agenthub/testing';
import { asAgent, failure, newAgent, operator, startHarness, unique, type Harness } from './harness.js';

const { GrantStatus } = identityv1;

describe.each(backends().map((b) => [b.name, b] as const))('identity access grants (%s)', (_name, backend: Backend) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(backend);
  });
  afterAll(async () => {
    await h?.close();
  });

  /** Two agents of different tenants, and a third in yet another tenant. */
  async function trio() {
    const alice = await newAgent(h, unique('alpha'), 'Alice');
    const bob = await newAgent(h, unique('beta'), 'Bob');
    const eve = await newAgent(h, unique('gamma'), 'Eve');
    return { alice, bob, eve };
  }

  it('runs the whole lifecycle: request, approve, check, revoke', async () => {
    const { alice, bob } = await trio();
    const check = async () => (await h.client.checkGrant({ agentId: alice.id, otherAgentId: bob.id }, asAgent(alice))).approved;

    const requested = await h.client.requestGrant({ agentId: bob.id }, asAgent(alice));
    expect(requested.created).toBe(true);
    expect(requested.grant).toMatchObject({ requesterAgentId: alice.id, targetAgentId: bob.id, status: GrantStatus.PENDING });
    expect(requested.grant!.id).toMatch(/^grt_/);
    expect(await check()).toBe(false);

    const approved = await h.client.approveGrant({ grantId: requested.grant!.id }, asAgent(bob));
    expect(approved.grant).toMatchObject({ id: requested.grant!.id, status: GrantStatus.APPROVED });
    expect(approved.grant!.updatedAt).toBeGreaterThanOrEqual(requested.grant!.createdAt);
    // Either order of the pair, asked by anyone with a principal.
    expect(await h.client.checkGrant({ agentId: bob.id, otherAgentId: alice.id }, operator)).toMatchObject({
      approved: true,
      grantId: requested.grant!.id,
    });
    expect(await check()).toBe(true);

    const again = await h.client.approveGrant({ grantId: requested.grant!.id }, asAgent(bob));
    expect(again.grant).toEqual(approved.grant);

    const revoked = await h.client.revokeGrant({ grantId: requested.grant!.id }, asAgent(alice));
    expect(revoked.grant!.status).toBe(GrantStatus.REVOKED);
    expect(await check()).toBe(false);
    expect((await h.client.checkGrant({ agentId: alice.id, otherAgentId: bob.id }, operator)).grantId).toBe('');

    const revokedAgain = await h.client.revokeGrant({ grantId: requested.grant!.id }, asAgent(bob));
    expect(revokedAgain.grant).toEqual(revoked.grant);
    expect(await failure(h.client.approveGrant({ grantId: requested.grant!.id }, asAgent(bob)))).toMatchObject({
      reason: Reason.INVALID_OPERATION,
      message: 'Grant was revoked; request a new one',
    });

    const renewed = await h.client.requestGrant({ agentId: alice.id }, asAgent(bob));
    expect(renewed.created).toBe(true);
    expect(renewed.grant!.id).not.toBe(requested.grant!.id);
  });

  it('returns the live grant to a repeated request, from either side', async () => {
    const { alice, bob } = await trio();
    const first = await h.client.requestGrant({ agentId: bob.id }, asAgent(alice));
    const repeat = await h.client.requestGrant({ agentId: bob.id }, asAgent(alice));
    const reverse = await h.client.requestGrant({ agentId: alice.id }, asAgent(bob));
    expect(repeat).toMatchObject({ created: false, grant: first.grant });
    expect(reverse).toMatchObject({ created: false, grant: first.grant });

    await h.client.approveGrant({ grantId: first.grant!.id }, asAgent(bob));
    const afterApproval = await h.client.requestGrant({ agentId: alice.id }, asAgent(bob));
    expect(afterApproval.created).toBe(false);
    expect(afterApproval.grant).toMatchObject({ id: first.grant!.id, status: GrantStatus.APPROVED });
  });

  it('settles concurrent requests from both sides on one grant', async () => {
    const { alice, bob } = await trio();
    const results = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        i % 2 ? h.client.requestGrant({ agentId: alice.id }, asAgent(bob)) : h.client.requestGrant({ agentId: bob.id }, asAgent(alice)),
      ),
    );
    expect(new Set(results.map((r) => r.grant!.id)).size).toBe(1);
    expect(results.filter((r) => r.created)).toHaveLength(1);
  });

  it('hides grants from third parties', async () => {
    const { alice, bob, eve } = await trio();
    const { grant } = await h.client.requestGrant({ agentId: bob.id }, asAgent(alice));
    for (const call of [
      h.client.approveGrant({ grantId: grant!.id }, asAgent(eve)),
      h.client.revokeGrant({ grantId: grant!.id }, asAgent(eve)),
      h.client.approveGrant({ grantId: 'grt_doesnotexist000000' }, asAgent(bob)),
    ]) {
      expect(await failure(call)).toMatchObject({ reason: Reason.NOT_FOUND, message: 'Grant not found' });
    }
    expect((await h.client.listGrants({}, asAgent(eve))).grants).toEqual([]);
  });

  it('lets only the target approve', async () => {
    const { alice, bob } = await trio();
    const { grant } = await h.client.requestGrant({ agentId: bob.id }, asAgent(alice));
    expect(await failure(h.client.approveGrant({ grantId: grant!.id }, asAgent(alice)))).toMatchObject({
      reason: Reason.INVALID_OPERATION,
      message: 'Only the requested agent can approve this grant',
    });
    expect((await h.client.checkGrant({ agentId: alice.id, otherAgentId: bob.id }, operator)).approved).toBe(false);
  });

  it('lets the target revoke a pending grant', async () => {
    const { alice, bob } = await trio();
    const { grant } = await h.client.requestGrant({ agentId: bob.id }, asAgent(alice));
    const { grant: revoked } = await h.client.revokeGrant({ grantId: grant!.id }, asAgent(bob));
    expect(revoked!.status).toBe(GrantStatus.REVOKED);
  });

  it('refuses same-tenant and unknown targets', async () => {
    const { alice } = await trio();
    const colleague = await newAgent(h, alice.tenantId, 'Colleague');
    for (const target of [colleague.id, alice.id]) {
      expect(await failure(h.client.requestGrant({ agentId: target }, asAgent(alice)))).toMatchObject({
        reason: Reason.INVALID_OPERATION,
        message: 'Agents of the same tenant need no access grant',
      });
    }
    expect(await failure(h.client.requestGrant({ agentId: 'nobody' }, asAgent(alice)))).toMatchObject({
      reason: Reason.NOT_FOUND,
      message: 'Agent not found',
    });
  });

  it('lists the caller’s grants newest first, filtered by status', async () => {
    const { alice, bob, eve } = await trio();
    const toBob = (await h.client.requestGrant({ agentId: bob.id }, asAgent(alice))).grant!;
    const fromEve = (await h.client.requestGrant({ agentId: alice.id }, asAgent(eve))).grant!;
    await h.client.approveGrant({ grantId: fromEve.id }, asAgent(alice));

    const all = (await h.client.listGrants({}, asAgent(alice))).grants;
    expect(all.map((g) => g.id)).toEqual([fromEve.id, toBob.id]);
    const pending = (await h.client.listGrants({ status: GrantStatus.PENDING }, asAgent(alice))).grants;
    expect(pending.map((g) => g.id)).toEqual([toBob.id]);
    const approved = (await h.client.listGrants({ status: GrantStatus.APPROVED }, asAgent(alice))).grants;
    expect(approved.map((g) => g.id)).toEqual([fromEve.id]);
    expect((await h.client.listGrants({ status: GrantStatus.REVOKED }, asAgent(alice))).grants).toEqual([]);
    expect((await h.client.listGrants({}, asAgent(bob))).grants.map((g) => g.id)).toEqual([toBob.id]);
  });

  // Issue 12 item 8: grants.list grew without bound under request/revoke loops.
  it('reuses the pair’s row when a revoked grant is requested again, whichever side asks', async () => {
    const { alice, bob } = await trio();
    const ids = new Set<string>();
    for (let i = 0; i < 12; i++) {
      const [asker, other] = i % 2 ? [bob, alice] : [alice, bob];
      const { grant, created } = await h.client.requestGrant({ agentId: other.id }, asAgent(asker));
      expect(created).toBe(true);
      expect(grant).toMatchObject({ requesterAgentId: asker.id, targetAgentId: other.id, status: GrantStatus.PENDING });
      ids.add(grant!.id);
      if (i % 3 === 0) await h.client.approveGrant({ grantId: grant!.id }, asAgent(other));
      await h.client.revokeGrant({ grantId: grant!.id }, asAgent(i % 2 ? alice : bob));
    }
    // Each request is a new grant (its own id), yet the pair holds one row.
    expect(ids.size).toBe(12);
    expect((await h.client.listGrants({}, asAgent(alice))).grants).toEqual([expect.objectContaining({ status: GrantStatus.REVOKED })]);
    expect((await h.client.checkGrant({ agentId: alice.id, otherAgentId: bob.id }, operator)).approved).toBe(false);
  });

  it('pages the caller’s grants newest first, and refuses a page token it did not issue', async () => {
    const alice = await newAgent(h, unique('alpha'), 'Alice');
    const made: string[] = [];
    for (let i = 0; i < 5; i++) {
      const other = await newAgent(h, unique(`other${i}`), `Other ${i}`);
      made.unshift((await h.client.requestGrant({ agentId: other.id }, asAgent(alice))).grant!.id);
    }
    const seen: string[] = [];
    let pageToken = '';
    let pages = 0;
    do {
      const page = await h.client.listGrants({ pageSize: 2, pageToken }, asAgent(alice));
      expect(page.grants.length).toBeLessThanOrEqual(2);
      seen.push(...page.grants.map((g) => g.id));
      pageToken = page.nextPageToken;
      pages++;
    } while (pageToken && pages < 10);
    expect(seen).toEqual(made);
    expect(pages).toBe(3);
    expect((await h.client.listGrants({}, asAgent(alice))).nextPageToken).toBe('');
    const me = asAgent(alice);
    const forged = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
    for (const token of ['!!!', 'x', forged([1e300, 1]), forged([-1, 1]), forged(['a', 1]), forged({})]) {
      expect(await failure(h.client.listGrants({ pageToken: token }, me))).toMatchObject({ reason: Reason.INVALID_PARAMS, field: 'page_token' });
    }
    expect(await failure(h.client.listGrants({ pageSize: 101 }, me))).toMatchObject({ reason: Reason.INVALID_PARAMS, field: 'page_size' });
  });

  it('requires an agent principal for grant calls, and some principal for CheckGrant', async () => {
    const calls = [
      (o?: typeof operator) => h.client.requestGrant({ agentId: 'x' }, o),
      (o?: typeof operator) => h.client.approveGrant({ grantId: 'grt_x' }, o),
      (o?: typeof operator) => h.client.revokeGrant({ grantId: 'grt_x' }, o),
      (o?: typeof operator) => h.client.listGrants({}, o),
    ];
    for (const call of calls) {
      for (const options of [operator, undefined]) {
        expect(await failure(call(options))).toMatchObject({ reason: Reason.ACCESS_DENIED, message: 'Agent credentials required' });
      }
    }
    expect(await failure(h.client.checkGrant({ agentId: 'a', otherAgentId: 'b' }))).toMatchObject({ reason: Reason.UNAUTHENTICATED });
  });

  it('names the faulty field', async () => {
    const me = asAgent(await newAgent(h, unique('t')));
    const cases: Array<[Promise<unknown>, string]> = [
      [h.client.requestGrant({ agentId: '' }, me), 'agent_id'],
      [h.client.approveGrant({ grantId: '' }, me), 'grant_id'],
      [h.client.revokeGrant({ grantId: 'not a grant' }, me), 'grant_id'],
      [h.client.listGrants({ status: 42 as identityv1.GrantStatus }, me), 'status'],
      [h.client.checkGrant({ agentId: '', otherAgentId: 'b' }, me), 'agent_id'],
      [h.client.checkGrant({ agentId: 'a', otherAgentId: '/b' }, me), 'other_agent_id'],
    ];
    for (const [call, field] of cases) {
      expect(await failure(call)).toMatchObject({ reason: Reason.INVALID_PARAMS, field });
    }
  });
});
