import { hubModes, startTestHub, type Agent, type RpcReply, type TestHub } from './harness.js';
import { verifySignature, WebhookReceiver } from './webhook-receiver.js';

/**
 * Issue 14 item 9: A2A 1.0 task push notification configs on the strict endpoint, over HTTP on
 * every backend. Each transition of the task reaches the config's URL as an A2A StreamResponse,
 * signed per Standard Webhooks (verified here with node:crypto) and carrying the config's token and
 * authentication. Every wait is a bounded poll for a condition.
 */
describe.each(hubModes().map((m) => [m.name, m] as const))('task push notification configs (%s)', (_name, backend) => {
  let hub: TestHub;
  let receiver: WebhookReceiver;
  let client: Agent;
  let agent: Agent;
  let stranger: Agent;
  let endpoint: string;

  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
    hub = await startTestHub(backend, { HUB_EGRESS_ALLOW_PRIVATE: 'true', WEBHOOK_RETRY_SCHEDULE_MS: '0,200,400' });
    client = await hub.agent('acme', 'client');
    agent = await hub.agent('acme', 'agent');
    stranger = await hub.agent('acme', 'stranger');
    endpoint = `/agents/${agent.agent_id}/a2a/v1`;
  });
  afterAll(async () => {
    await hub?.stop();
    await receiver?.close();
  });

  let n = 0;
  const path = () => `/push/${Date.now()}-${n++}`;
  const rpc = (who: Agent, method: string, params: unknown): Promise<RpcReply> => hub.call(who.api_key, method, params, { path: endpoint, headers: { 'A2A-Version': '1.0' } });
  async function ok(who: Agent, method: string, params: unknown) {
    const reply = await rpc(who, method, params);
    if (reply.body.error) throw new Error(`${method} failed: ${JSON.stringify(reply.body.error)}`);
    return reply.body.result;
  }
  const send = async (configuration: Record<string, unknown> = {}) =>
    (await ok(client, 'SendMessage', { message: { messageId: path(), role: 'ROLE_USER', parts: [{ text: 'hi' }] }, configuration: { returnImmediately: true, ...configuration } })).task;

  it('create, get, list and delete a config; each transition is pushed, signed and authenticated', async () => {
    const task = await send();
    const at = path();
    const created = await ok(client, 'CreateTaskPushNotificationConfig', {
      taskId: task.id, id: 'cfg-1', url: receiver.url(at), token: 'tok-1', authentication: { scheme: 'Bearer', credentials: 'pushed-secret' },
    });
    const config = { id: 'cfg-1', taskId: task.id, url: receiver.url(at), token: 'tok-1', authentication: { scheme: 'Bearer', credentials: 'pushed-secret' } };
    expect(created).toEqual({ ...config, signingSecret: expect.stringMatching(/^whsec_/) });
    expect(await ok(client, 'GetTaskPushNotificationConfig', { taskId: task.id, id: 'cfg-1' })).toEqual(config);
    expect(await ok(client, 'ListTaskPushNotificationConfigs', { taskId: task.id })).toEqual({ configs: [config], nextPageToken: '' });

    await hub.ok(agent.api_key, 'x-hub/tasks.update', { task_id: task.id, state: 'working' });
    await hub.ok(agent.api_key, 'x-hub/tasks.update', { task_id: task.id, state: 'completed' });
    await receiver.waitFor('two pushes', () => receiver.on(at).length >= 2);
    const pushes = receiver.on(at);
    expect(pushes.map((r) => r.body)).toEqual([
      { statusUpdate: { taskId: task.id, contextId: task.contextId, status: { state: 'TASK_STATE_WORKING', timestamp: expect.any(String) } } },
      { statusUpdate: { taskId: task.id, contextId: task.contextId, status: { state: 'TASK_STATE_COMPLETED', timestamp: expect.any(String) } } },
    ]);
    for (const push of pushes) {
      expect(push.headers).toMatchObject({ authorization: 'Bearer pushed-secret', 'x-a2a-notification-token': 'tok-1' });
      expect(verifySignature(created.signingSecret, push)).toBe(true);
    }

    expect(await ok(client, 'DeleteTaskPushNotificationConfig', { taskId: task.id, id: 'cfg-1' })).toEqual({});
    expect((await rpc(client, 'GetTaskPushNotificationConfig', { taskId: task.id, id: 'cfg-1' })).body.error).toMatchObject({ code: -32101 });
  });

  it('only the task\'s parties: anyone else gets TaskNotFound (-32001); bad params are -32602 naming the field', async () => {
    const task = await send();
    for (const [method, params] of [
      ['CreateTaskPushNotificationConfig', { taskId: task.id, url: receiver.url(path()) }],
      ['GetTaskPushNotificationConfig', { taskId: task.id, id: 'cfg-1' }],
      ['ListTaskPushNotificationConfigs', { taskId: task.id }],
      ['DeleteTaskPushNotificationConfig', { taskId: task.id, id: 'cfg-1' }],
    ] as const) {
      expect([method, (await rpc(stranger, method, params)).body.error?.code]).toEqual([method, -32001]);
    }
    const missingUrl = await rpc(client, 'CreateTaskPushNotificationConfig', { taskId: task.id });
    expect([missingUrl.body.error?.code, missingUrl.body.error?.data?.[0]?.metadata?.field]).toEqual([-32602, 'url']);
    expect((await ok(client, 'ListTaskPushNotificationConfigs', { taskId: task.id })).configs).toEqual([]);
  });

  it('SendMessage with configuration.taskPushNotificationConfig makes the config for the new task', async () => {
    const at = path();
    const task = await send({ taskPushNotificationConfig: { url: receiver.url(at), token: 'inline' } });
    const { configs } = await ok(client, 'ListTaskPushNotificationConfigs', { taskId: task.id });
    expect(configs).toEqual([{ id: expect.any(String), taskId: task.id, url: receiver.url(at), token: 'inline' }]);
    await hub.ok(agent.api_key, 'x-hub/tasks.update', { task_id: task.id, state: 'rejected' });
    const push = await receiver.waitFor('the push', () => receiver.on(at)[0]);
    expect(push.body.statusUpdate.status.state).toBe('TASK_STATE_REJECTED');
    expect(push.headers['x-a2a-notification-token']).toBe('inline');
  });
});
