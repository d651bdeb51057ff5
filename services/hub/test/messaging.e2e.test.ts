import { hubModes, startTestHub, type Agent, type RpcReply, type TestHub } from './harness.js';

/**
 * Messaging end to end over real HTTP on both backends: a sender's SendMessage/GetTask/CancelTask
 * in the interface's dialect, a connected recipient's inbox (x-hub/inbox.poll, x-hub/inbox.ack,
 * x-hub/tasks.update), x-ttl and its sweeper, visibility and grants.
 */

const A2A = { 'A2A-Version': '1.0' };
const PNG = Buffer.from('not really a png').toString('base64');
const MIXED = [
  { kind: 'text', text: 'Summarise these, please.' },
  { kind: 'file', name: 'chart.png', mimeType: 'image/png', data: PNG },
  { kind: 'file', name: 'report.pdf', mimeType: 'application/pdf', uri: 'https://example.com/report.pdf' },
  { kind: 'data', mimeType: 'application/json', data: '{"rows":3}' },
];

/** The task byte limit the hub of this file runs with. */
const TASK_MAX_BYTES = 600_000;

describe.each(hubModes().map((m) => [m.name, m] as const))('messaging over HTTP (%s)', (_name, backend) => {
  let hub: TestHub;
  let sender: Agent;
  let recipient: Agent;
  let third: Agent;
  let foreign: Agent;

  beforeAll(async () => {
    // A fast sweeper so x-ttl expiry is seen in about a second; a short blocking cap.
    // MESSAGING_TASK_MAX_BYTES small enough for a test to reach (the default is 4 MiB).
    hub = await startTestHub(backend, { MESSAGING_SWEEP_MS: '100', MESSAGING_BLOCKING_MS: '3000', MESSAGING_TASK_MAX_BYTES: String(TASK_MAX_BYTES) });
    sender = await hub.agent('acme', 'sender');
    recipient = await hub.agent('acme', 'recipient');
    third = await hub.agent('acme', 'third');
    foreign = await hub.agent('globex', 'foreign');
  });
  afterAll(() => hub?.stop());

  const call = (who: Agent, method: string, params: unknown = {}, path?: string): Promise<RpcReply> =>
    hub.call(who.api_key, method, params, { headers: A2A, ...(path ? { path } : {}) });
  async function ok(who: Agent, method: string, params: unknown = {}, path?: string) {
    const reply = await call(who, method, params, path);
    if (reply.body.error) throw new Error(`${method} failed: ${JSON.stringify(reply.body.error)}`);
    return reply.body.result;
  }
  async function expectError(reply: Promise<RpcReply>, code: number, field?: string) {
    const { body } = await reply;
    expect(body.result).toBeUndefined();
    expect(body.error).toMatchObject({ code });
    if (field) {
      expect(body.error!.data?.field).toBe(field);
      expect(body.error!.message).toContain(field);
    }
    return body.error!;
  }
  const send = (who: Agent, to: Agent, parts: unknown[] = [{ kind: 'text', text: 'hi' }], configuration: Record<string, unknown> = {}) =>
    call(who, 'SendMessage', { message: { role: 'user', parts }, configuration: { agentId: to.agent_id, ...configuration } });

  /** Polls the recipient's inbox until a delivery for `taskId` arrives. */
  const received = new Map<string, any>();
  async function receive(who: Agent, taskId: string) {
    for (let i = 0; i < 20; i += 1) {
      const earlier = received.get(`${who.agent_id}/${taskId}`);
      if (earlier) {
        received.delete(`${who.agent_id}/${taskId}`);
        return earlier;
      }
      const { deliveries } = await ok(who, 'x-hub/inbox.poll', { wait_ms: 1000 });
      // Acknowledged at once; deliveries of other tasks are kept for their own receive().
      for (const d of deliveries) {
        await ok(who, 'x-hub/inbox.ack', { delivery_id: d.delivery_id });
        received.set(`${who.agent_id}/${d.task_id}`, d);
      }
    }
    throw new Error(`no delivery for ${taskId}`);
  }

  it('round-trips mixed parts; the recipient works and completes with artifacts; GetTask shows it all', async () => {
    const sent = (await send(sender, recipient, MIXED)).body.result;
    expect(sent).toEqual({ id: expect.any(String), contextId: expect.any(String), status: { state: 'submitted', timestamp: expect.any(String) }, artifacts: [] });
    expect(new Date(sent.status.timestamp).toISOString()).toBe(sent.status.timestamp);

    const delivery = await receive(recipient, sent.id);
    expect(delivery).toMatchObject({ task_id: sent.id, context_id: sent.contextId, from_agent_id: sender.agent_id, attempt: 1 });
    expect(delivery.message.parts).toEqual(MIXED);

    const working = await ok(recipient, 'x-hub/tasks.update', { task_id: sent.id, state: 'working' });
    expect(working.status.state).toBe('working');
    const done = await ok(recipient, 'x-hub/tasks.update', {
      task_id: sent.id,
      state: 'completed',
      message: { parts: [{ kind: 'text', text: 'Done.' }] },
      artifacts: [{ name: 'summary', mimeType: 'text/plain', parts: [{ kind: 'text', text: 'Three rows.' }, { kind: 'file', name: 's.png', mimeType: 'image/png', data: PNG }] }],
    });
    expect(done.status.state).toBe('completed');

    const task = await ok(sender, 'GetTask', { id: sent.id });
    expect(task.status.state).toBe('completed');
    expect(task.messages).toEqual([
      { role: 'user', parts: MIXED, messageId: expect.any(String) },
      { role: 'agent', parts: [{ kind: 'text', text: 'Done.' }], messageId: expect.any(String) },
    ]);
    expect(task.artifacts).toEqual([
      { id: expect.any(String), name: 'summary', mimeType: 'text/plain', parts: [{ kind: 'text', text: 'Three rows.' }, { kind: 'file', name: 's.png', mimeType: 'image/png', data: PNG }] },
    ]);
    expect((await ok(sender, 'GetTask', { id: sent.id, historyLength: 1 })).messages).toHaveLength(1);
    expect((await ok(sender, 'GetTask', { id: sent.id, historyLength: 0 })).messages).toEqual([]);
    // The recipient sees it too; nobody else does.
    expect((await ok(recipient, 'GetTask', { id: sent.id })).id).toBe(sent.id);
    await expectError(call(third, 'GetTask', { id: sent.id }), -32001);
    await expectError(call(third, 'CancelTask', { id: sent.id }), -32001);
    // x-hub/tasks.update: the sender is refused (-32100), anyone else does not see the task (-32001).
    await expectError(call(third, 'x-hub/tasks.update', { task_id: sent.id, state: 'working' }), -32001);
    await expectError(call(sender, 'x-hub/tasks.update', { task_id: sent.id, state: 'working' }), -32100);
    await expectError(call(sender, 'GetTask', { id: 'task_doesnotexist' }), -32001);
  });

  it('takes the target from the path on /agents/{agentId}/a2a, and continues a context', async () => {
    const first = await ok(sender, 'SendMessage', { message: { parts: [{ kind: 'text', text: 'one' }] } }, `/agents/${recipient.agent_id}/a2a`);
    const second = await ok(sender, 'SendMessage', { message: { parts: [{ kind: 'text', text: 'two' }] }, configuration: { contextId: first.contextId } }, `/agents/${recipient.agent_id}/a2a`);
    expect(second.contextId).toBe(first.contextId);
    expect(second.id).not.toBe(first.id);
    await receive(recipient, first.id);
    await receive(recipient, second.id);
  });

  it('blocking returns the completed task when the recipient completes in time', async () => {
    const agentLoop = (async () => {
      for (let i = 0; i < 20; i += 1) {
        const { deliveries } = await ok(recipient, 'x-hub/inbox.poll', { wait_ms: 2000 });
        for (const d of deliveries) {
          await ok(recipient, 'x-hub/tasks.update', {
            task_id: d.task_id,
            state: 'completed',
            artifacts: [{ name: 'echo', parts: d.message.parts }],
          });
          await ok(recipient, 'x-hub/inbox.ack', { delivery_id: d.delivery_id });
          return;
        }
      }
    })();
    const started = Date.now();
    const result = (await send(sender, recipient, [{ kind: 'text', text: 'echo me' }], { blocking: true })).body.result;
    await agentLoop;
    expect(Date.now() - started).toBeLessThan(3000);
    expect(result.status.state).toBe('completed');
    expect(result.artifacts).toEqual([{ id: expect.any(String), name: 'echo', parts: [{ kind: 'text', text: 'echo me' }] }]);
  });

  it('blocking with nobody answering returns the task as it stands at the cap; historyLength limits its messages', async () => {
    const offline = await hub.agent('acme', 'slow');
    const started = Date.now();
    const result = (await send(sender, offline, undefined, { blocking: true, historyLength: 0 })).body.result;
    expect(Date.now() - started).toBeGreaterThanOrEqual(2900);
    expect(result).toMatchObject({ status: { state: 'submitted' }, messages: [] });
    const withOne = (await send(sender, offline, undefined, { historyLength: 1 })).body.result;
    expect(withOne.messages).toEqual([{ role: 'user', parts: [{ kind: 'text', text: 'hi' }], messageId: expect.any(String) }]);
  });

  it('input-required, then the sender continues the task with taskId and it is delivered again', async () => {
    const sent = (await send(sender, recipient)).body.result;
    await receive(recipient, sent.id);
    await ok(recipient, 'x-hub/tasks.update', { task_id: sent.id, state: 'input-required', message: { parts: [{ kind: 'text', text: 'Which year?' }] } });
    const continued = await ok(sender, 'SendMessage', { message: { parts: [{ kind: 'text', text: '2025' }] }, configuration: { taskId: sent.id } });
    expect(continued).toMatchObject({ id: sent.id, contextId: sent.contextId, status: { state: 'submitted' } });
    const again = await receive(recipient, sent.id);
    expect(again.message.parts).toEqual([{ kind: 'text', text: '2025' }]);
    await ok(recipient, 'x-hub/tasks.update', { task_id: sent.id, state: 'completed' });
    expect((await ok(sender, 'GetTask', { id: sent.id })).messages).toHaveLength(3);
  });

  it('an offline recipient: the task stays submitted and the delivery arrives on its first poll', async () => {
    const offline = await hub.agent('acme', 'offline');
    const sent = (await send(sender, offline)).body.result;
    expect(sent.status.state).toBe('submitted');
    expect((await ok(sender, 'GetTask', { id: sent.id })).status.state).toBe('submitted');
    const { deliveries } = await ok(offline, 'x-hub/inbox.poll', {});
    expect(deliveries.map((d: any) => d.task_id)).toEqual([sent.id]);
    // Not acknowledged: the same delivery id stays queued (hidden while claimed).
    expect((await ok(offline, 'x-hub/inbox.ack', { delivery_id: deliveries[0].delivery_id })).acked).toBe(true);
    expect((await ok(offline, 'x-hub/inbox.ack', { delivery_id: deliveries[0].delivery_id })).acked).toBe(false);
  });

  it('x-ttl 0 to an offline recipient fails at once; x-ttl 1 fails through the sweeper', async () => {
    const offline = await hub.agent('acme', 'offline-ttl');
    const now = (await send(sender, offline, undefined, { 'x-ttl': 0 })).body.result;
    expect(now.status.state).toBe('failed');

    const soon = (await send(sender, offline, undefined, { 'x-ttl': 1 })).body.result;
    expect(soon.status.state).toBe('submitted');
    let state = 'submitted';
    for (let i = 0; i < 50 && state === 'submitted'; i += 1) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      state = (await ok(sender, 'GetTask', { id: soon.id })).status.state;
    }
    expect(state).toBe('failed');
    expect((await ok(offline, 'x-hub/inbox.poll', {})).deliveries).toEqual([]);
  });

  it('cancel purges the queue; a second cancel is -32002; the recipient can no longer move it', async () => {
    const offline = await hub.agent('acme', 'offline-cancel');
    const sent = (await send(sender, offline)).body.result;
    const canceled = await ok(sender, 'CancelTask', { id: sent.id });
    expect(canceled).toMatchObject({ id: sent.id, status: { state: 'canceled' } });
    expect((await ok(offline, 'x-hub/inbox.poll', {})).deliveries).toEqual([]);
    await expectError(call(sender, 'CancelTask', { id: sent.id }), -32002);
    await expectError(call(offline, 'x-hub/tasks.update', { task_id: sent.id, state: 'working' }), -32103);
  });

  it('bad parts and bad configuration are -32602 naming the field', async () => {
    await expectError(send(sender, recipient, [{ kind: 'text', text: 'ok' }, { kind: 'text', text: 'ok' }, { kind: 'file', data: PNG }]), -32602, 'message.parts[2].mimeType');
    await expectError(send(sender, recipient, [{ kind: 'file', mimeType: 'image/png' }]), -32602, 'message.parts[0].data');
    await expectError(send(sender, recipient, [{ kind: 'file', mimeType: 'image/png', data: 'not base64!' }]), -32602, 'message.parts[0].data');
    await expectError(send(sender, recipient, [{ kind: 'data', mimeType: 'application/json' }]), -32602, 'message.parts[0].data');
    await expectError(send(sender, recipient, [{ kind: 'video' }]), -32602, 'message.parts[0].kind');
    await expectError(send(sender, recipient, [{ text: 'no kind' }]), -32602, 'message.parts[0].kind');
    await expectError(send(sender, recipient, []), -32602, 'message.parts');
    await expectError(send(sender, recipient, undefined, { 'x-ttl': -1 }), -32602, 'configuration.x-ttl');
    await expectError(send(sender, recipient, undefined, { historyLength: 'all' }), -32602, 'configuration.historyLength');
    await expectError(send(sender, recipient, undefined, { blocking: 'yes' }), -32602, 'configuration.blocking');
    await expectError(call(sender, 'SendMessage', { message: { parts: [{ kind: 'text', text: 'x' }] } }), -32602, 'configuration.agentId');
    await expectError(call(sender, 'SendMessage', { configuration: { agentId: recipient.agent_id } }), -32602, 'message');
    const big = 'A'.repeat(4 * Math.ceil((512 * 1024) / 3) + 4);
    await expectError(send(sender, recipient, [{ kind: 'file', mimeType: 'image/png', data: big }]), -32602, 'message.parts[0].data');
  });

  it('unknown recipient -32101; acceptedOutputModes it cannot produce -32005; cross-tenant without a grant -32104', async () => {
    await expectError(send(sender, { ...recipient, agent_id: 'agent_doesnotexist' }), -32101);
    const picky = await hub.admin('agents.create', { tenant_id: 'acme', name: 'picky', output_modes: ['application/json'] });
    const pickyAgent = { agent_id: picky.agent.id } as Agent;
    await expectError(send(sender, pickyAgent, undefined, { acceptedOutputModes: ['image/png'] }), -32005);
    expect((await send(sender, pickyAgent, undefined, { acceptedOutputModes: ['image/png', 'application/json'] })).body.result.status.state).toBe('submitted');
    await expectError(send(sender, foreign), -32104);
    const { grant } = await ok(sender, 'x-hub/grants.request', { agent_id: foreign.agent_id });
    await ok(foreign, 'x-hub/grants.approve', { grant_id: grant.id });
    const across = (await send(sender, foreign)).body.result;
    expect(across.status.state).toBe('submitted');
    expect((await receive(foreign, across.id)).from_agent_id).toBe(sender.agent_id);
  });

  it('a revoked grant refuses the continuation of an existing task as it refuses a new send (-32104), and the recipient\'s update (issue 12)', async () => {
    const partner = await hub.agent('initech', 'partner');
    const { grant } = await ok(sender, 'x-hub/grants.request', { agent_id: partner.agent_id });
    await ok(partner, 'x-hub/grants.approve', { grant_id: grant.id });
    const sent = (await send(sender, partner)).body.result;
    await receive(partner, sent.id);
    await ok(partner, 'x-hub/tasks.update', { task_id: sent.id, state: 'input-required', message: { role: 'agent', parts: [{ kind: 'text', text: 'Which one?' }] } });
    await ok(partner, 'x-hub/grants.revoke', { grant_id: grant.id });

    const fresh = await expectError(send(sender, partner), -32104);
    const continued = await expectError(send(sender, partner, [{ kind: 'text', text: 'That one' }], { taskId: sent.id }), -32104);
    expect(continued.message).toBe(fresh.message);
    await expectError(call(partner, 'x-hub/tasks.update', { task_id: sent.id, state: 'completed' }), -32104);
    const task = await ok(sender, 'GetTask', { id: sent.id });
    expect([task.status.state, task.messages.length]).toEqual(['input-required', 2]);
  });

  it('a continuation past MESSAGING_TASK_MAX_BYTES is -32602 naming the limit and commits nothing; GetTask and ListTasks still answer (issue 12)', async () => {
    const chunk = (c: string) => [{ kind: 'file', name: 'part.bin', mimeType: 'application/octet-stream', data: Buffer.alloc(100_000, c).toString('base64') }];
    const sent = (await send(sender, recipient, chunk('a'))).body.result;
    await receive(recipient, sent.id);
    let continued = 0;
    for (;;) {
      await ok(recipient, 'x-hub/tasks.update', { task_id: sent.id, state: 'input-required', message: { role: 'agent', parts: [{ kind: 'text', text: 'More?' }] } });
      const reply = await send(sender, recipient, chunk('b'), { taskId: sent.id });
      if (reply.body.error) {
        expect(reply.body.error).toMatchObject({ code: -32602 });
        expect(reply.body.error.message).toContain(`maximum of ${TASK_MAX_BYTES} bytes`);
        break;
      }
      continued += 1;
      expect(continued).toBeLessThan(10);
    }
    const task = await ok(sender, 'GetTask', { id: sent.id });
    expect([task.status.state, task.messages.length]).toEqual(['input-required', 2 * continued + 2]);
    const listed = await ok(sender, 'ListTasks', { contextId: sent.contextId });
    expect(listed.tasks.map((t: { id: string }) => t.id)).toEqual([sent.id]);
    expect(listed.tasks[0].messages).toHaveLength(2 * continued + 2);
  });

  it('acceptedOutputModes matches as HTTP does: ranges, parameters, any case; an agent that declares none takes anything', async () => {
    const made = await hub.admin('agents.create', { tenant_id: 'acme', name: 'negotiating', output_modes: ['application/json', 'text/markdown'] });
    const declaring = { agent_id: made.agent.id } as Agent;
    const ranged = { agent_id: (await hub.admin('agents.create', { tenant_id: 'acme', name: 'ranged', output_modes: ['image/*'] })).agent.id } as Agent;
    const cases: [Agent, string[], 'accepted' | 'refused'][] = [
      [declaring, ['*/*'], 'accepted'],
      [declaring, ['application/*'], 'accepted'],
      [declaring, ['text/markdown; charset=utf-8'], 'accepted'],
      [declaring, ['Application/JSON'], 'accepted'],
      [declaring, ['image/png', 'TEXT/*'], 'accepted'],
      [declaring, ['image/*'], 'refused'],
      [declaring, ['text/plain'], 'refused'],
      [ranged, ['image/png'], 'accepted'],
      [ranged, ['text/*'], 'refused'],
      [recipient, ['image/png'], 'accepted'],
      [recipient, ['x-unknown/whatever'], 'accepted'],
    ];
    for (const [to, modes, outcome] of cases) {
      const { body } = await send(sender, to, undefined, { acceptedOutputModes: modes });
      const got = body.error ? `refused ${body.error.code}` : `accepted ${body.result.status.state}`;
      expect([to.agent_id, modes, got]).toEqual([to.agent_id, modes, outcome === 'accepted' ? 'accepted submitted' : 'refused -32005']);
    }
  });

  it('every numeric parameter out of its documented range is -32602 naming it, never -32603', async () => {
    const sent = (await send(sender, recipient)).body.result;
    const strict = `/agents/${recipient.agent_id}/a2a/v1`;
    const strictSend = (configuration: Record<string, unknown>) =>
      call(sender, 'SendMessage', { message: { messageId: `m-${Date.now()}-${Math.random()}`, role: 'ROLE_USER', parts: [{ text: 'hi' }] }, configuration }, strict);
    const cases: [string, Promise<RpcReply>, string][] = [];
    for (const value of [3e9, 2 ** 31, -1, 1.5, 1e300]) {
      cases.push(
        ['SendMessage historyLength', send(sender, recipient, undefined, { historyLength: value }), 'configuration.historyLength'],
        ['GetTask historyLength', call(sender, 'GetTask', { id: sent.id, historyLength: value }), 'historyLength'],
        ['ListTasks historyLength', call(sender, 'ListTasks', { historyLength: value }), 'historyLength'],
        ['ListTasks pageSize', call(sender, 'ListTasks', { pageSize: value }), 'pageSize'],
        ['x-ttl', send(sender, recipient, undefined, { 'x-ttl': value === 3e9 ? 315_360_001 : value }), 'configuration.x-ttl'],
        ['inbox.poll wait_ms', call(recipient, 'x-hub/inbox.poll', { wait_ms: value }), 'wait_ms'],
        ['inbox.poll max', call(recipient, 'x-hub/inbox.poll', { max: value }), 'max'],
        ['strict SendMessage historyLength', strictSend({ historyLength: value }), 'configuration.historyLength'],
        ['strict GetTask historyLength', call(sender, 'GetTask', { id: sent.id, historyLength: value }, strict), 'historyLength'],
        ['strict ListTasks historyLength', call(sender, 'ListTasks', { historyLength: value }, strict), 'historyLength'],
      );
    }
    for (const [name, reply, field] of cases) {
      const { body } = await reply;
      // The strict endpoint names the field in its google.rpc.ErrorInfo.
      const named = Array.isArray(body.error?.data) ? body.error.data[0]?.metadata?.field : body.error?.data?.field;
      expect([name, body.error?.code, named]).toEqual([name, -32602, field]);
    }
    // The bounds themselves are accepted.
    expect((await ok(sender, 'GetTask', { id: sent.id, historyLength: 2_147_483_647 })).id).toBe(sent.id);
    expect((await send(sender, recipient, undefined, { 'x-ttl': 315_360_000 })).body.result.status.state).toBe('submitted');
  });

  it('the path agent and configuration.agentId must agree; either party may cancel', async () => {
    await expectError(
      call(sender, 'SendMessage', { message: { parts: [{ kind: 'text', text: 'x' }] }, configuration: { agentId: third.agent_id } }, `/agents/${recipient.agent_id}/a2a`),
      -32602,
      'configuration.agentId',
    );
    const sent = (await send(sender, recipient)).body.result;
    expect((await ok(recipient, 'CancelTask', { id: sent.id })).status.state).toBe('canceled');
    await expectError(call(sender, 'CancelTask', { id: sent.id }), -32002);
  });
});
