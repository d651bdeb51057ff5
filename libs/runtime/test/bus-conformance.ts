import { randomBytes } from 'node:crypto';
import { EVENT_ID_HEADER, EVENT_TYPE_HEADER, MAX_BUS_MESSAGE_BYTES, type Bus, type BusMessage, type ConsumedMessage, type Subscription } from '@agenthub/runtime';

/** A log under test; every `connect` is another client of the same log (another process or replica). */
export interface BusSubject {
  connect(): Promise<Bus>;
  teardown(): Promise<void>;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits until `check` holds, failing with `what` if it never does. */
export async function eventually(check: () => boolean | Promise<boolean>, what: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`Timed out waiting until ${what}`);
    await sleep(20);
  }
}

const unique = (what: string) => `${what}-${randomBytes(4).toString('hex')}`;

function message(key: string, n: number, headers: Record<string, string> = {}): BusMessage {
  return { key, value: JSON.stringify({ event: 'test.event', n }), headers: { [EVENT_ID_HEADER]: `evt_${key}_${n}`, [EVENT_TYPE_HEADER]: 'test.event', ...headers } };
}

const n = (m: ConsumedMessage) => (JSON.parse(m.value) as { n: number }).n;

/** Collects what a group member handles successfully. */
async function consume(bus: Bus, group: string, topics: string[], fail?: (m: ConsumedMessage) => boolean) {
  const handled: ConsumedMessage[] = [];
  const attempts: ConsumedMessage[] = [];
  const subscription = await bus.subscribe(group, topics, async (m) => {
    attempts.push(m);
    if (fail?.(m)) throw new Error(`handler refuses ${m.offset}`);
    handled.push(m);
  });
  return { handled, attempts, subscription };
}

/**
 * What every Bus adapter guarantees (bus.ts): per-key order, headers, at-least-once with
 * redelivery after a failed handler, committed offsets that outlive the client, every group
 * receiving everything, and one member of a group handling each message.
 */
export function describeBusConformance(name: string, start: () => Promise<BusSubject>, options: { skip?: string } = {}): void {
  const suite = options.skip ? describe.skip : describe;
  suite(`Bus conformance: ${name}${options.skip ? ` (skipped: ${options.skip})` : ''}`, () => {
    let subject: BusSubject;
    const open: Bus[] = [];
    const subscriptions: Subscription[] = [];
    const connect = async () => {
      const bus = await subject.connect();
      open.push(bus);
      return bus;
    };

    beforeAll(async () => {
      subject = await start();
    });
    afterEach(async () => {
      await Promise.all(subscriptions.splice(0).map((s) => s.stop()));
      await Promise.all(open.splice(0).map((b) => b.close()));
    });
    afterAll(async () => {
      await subject?.teardown();
    });

    it('answers ping', async () => {
      const bus = await connect();
      await expect(bus.ping()).resolves.toBeUndefined();
    });

    it('keeps the order of each key and carries headers both ways', async () => {
      const bus = await connect();
      const topic = unique('order');
      const sent: BusMessage[] = [];
      for (let i = 1; i <= 10; i += 1) {
        const batch = ['ws-a', 'ws-b', 'ws-c'].map((key) => message(key, i, { 'x-extra': `${key}:${i}` }));
        sent.push(...batch);
        await bus.publish(topic, batch);
      }
      const reader = await consume(bus, unique('group'), [topic]);
      subscriptions.push(reader.subscription);
      await eventually(() => reader.handled.length >= sent.length, 'every message arrived');

      expect(reader.handled).toHaveLength(sent.length);
      for (const key of ['ws-a', 'ws-b', 'ws-c']) {
        expect(reader.handled.filter((m) => m.key === key).map(n)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
      }
      const first = reader.handled.find((m) => m.key === 'ws-b' && n(m) === 3)!;
      expect(first).toMatchObject({ topic, key: 'ws-b', value: JSON.stringify({ event: 'test.event', n: 3 }) });
      expect(first.headers).toEqual({ [EVENT_ID_HEADER]: 'evt_ws-b_3', [EVENT_TYPE_HEADER]: 'test.event', 'x-extra': 'ws-b:3' });
      expect(typeof first.offset).toBe('string');
    });

    it('hands a message whose handler failed over again instead of skipping it', async () => {
      const bus = await connect();
      const topic = unique('retry');
      await bus.publish(topic, [1, 2, 3].map((i) => message('ws', i)));
      let refusals = 0;
      const reader = await consume(bus, unique('group'), [topic], (m) => n(m) === 2 && refusals++ < 2);
      subscriptions.push(reader.subscription);
      await eventually(() => reader.handled.length >= 3, 'all three were handled');

      expect(reader.handled.map(n)).toEqual([1, 2, 3]);
      expect(reader.attempts.filter((m) => n(m) === 2)).toHaveLength(3);
      expect(reader.attempts.filter((m) => n(m) === 3)).toHaveLength(1);
    });

    it('hands a refused message over again after the retry pause, not seconds later', async () => {
      const bus = await connect();
      const topic = unique('pause');
      await bus.publish(topic, [message('ws', 1)]);
      const attemptedAt: number[] = [];
      const reader = await consume(bus, unique('group'), [topic], () => attemptedAt.push(Date.now()) === 1);
      subscriptions.push(reader.subscription);
      await eventually(() => reader.handled.length >= 1, 'the second attempt succeeded');

      // Every subject pauses 50-100 ms; KafkaBus used to wait out its consumer's 5 s fetch as well.
      expect(attemptedAt).toHaveLength(2);
      expect(attemptedAt[1]! - attemptedAt[0]!).toBeLessThan(3_000);
    });

    it('stops an idle subscription promptly', async () => {
      const bus = await connect();
      const topic = unique('idle');
      const reader = await consume(bus, unique('group'), [topic]);
      await bus.publish(topic, [message('ws', 1)]);
      await eventually(() => reader.handled.length >= 1, 'the message was handled');

      // A service stops its subscriptions on shutdown; KafkaBus's used to take 5 s each.
      const started = Date.now();
      await reader.subscription.stop();
      expect(Date.now() - started).toBeLessThan(3_000);
    });

    it('continues a group after its last committed offset with a new client', async () => {
      const group = unique('group');
      const topic = unique('resume');
      const first = await connect();
      await first.publish(topic, [1, 2, 3].map((i) => message('ws', i)));
      const before = await consume(first, group, [topic]);
      await eventually(() => before.handled.length >= 3, 'the first client handled three');
      await before.subscription.stop();
      await first.close();

      const second = await connect();
      await second.publish(topic, [4, 5].map((i) => message('ws', i)));
      const after = await consume(second, group, [topic]);
      subscriptions.push(after.subscription);
      await eventually(() => after.handled.length >= 2, 'the second client handled two');
      expect(after.attempts.map(n)).toEqual([4, 5]);
    });

    it('gives every group everything, from the start of the log', async () => {
      const bus = await connect();
      const topic = unique('fanout');
      const other = unique('other');
      await bus.publish(topic, [1, 2].map((i) => message('ws', i)));
      const early = await consume(bus, unique('group'), [topic, other]);
      subscriptions.push(early.subscription);
      await bus.publish(other, [message('ws', 100)]);
      const late = await consume(bus, unique('group'), [topic, other]);
      subscriptions.push(late.subscription);
      await bus.publish(topic, [3].map((i) => message('ws', i)));

      for (const reader of [early, late]) {
        await eventually(() => reader.handled.length >= 4, 'each group received all four');
        expect(reader.handled.filter((m) => m.topic === topic).map(n)).toEqual([1, 2, 3]);
        expect(reader.handled.filter((m) => m.topic === other).map(n)).toEqual([100]);
      }
    });

    it('reports how many messages each group has not handled yet (consumer lag), 0 once it has', async () => {
      const bus = await connect();
      expect(bus.consumerLag).toBeDefined();
      const topic = unique('lag');
      const [reading, idle] = [unique('group'), unique('group')];
      const lag = async (group: string) => (await bus.consumerLag!(group, [topic])).map((row) => [row.topic, row.messages]);
      await bus.publish(topic, [message('a', 1), message('b', 2), message('a', 3)]);
      // A fresh Kafka loads its group coordinator on first use, answering NOT_COORDINATOR until then.
      let before: unknown;
      await eventually(async () => (before = await lag(reading).catch(() => undefined)) !== undefined, 'the log answered for the group');
      expect(before).toEqual([[topic, 3]]);

      const reader = await consume(bus, reading, [topic]);
      subscriptions.push(reader.subscription);
      await eventually(async () => (await lag(reading))[0]![1] === 0, 'the reading group committed all three');
      expect(await lag(idle)).toEqual([[topic, 3]]);
    });

    it('never lets two members of one group handle the same message', async () => {
      const group = unique('group');
      const topic = unique('members');
      const [a, b] = [await connect(), await connect()];
      const first = await consume(a, group, [topic]);
      subscriptions.push(first.subscription);
      const second = await consume(b, group, [topic]);
      subscriptions.push(second.subscription);
      const keys = ['k1', 'k2', 'k3', 'k4', 'k5', 'k6'];
      for (let i = 1; i <= 5; i += 1) await a.publish(topic, keys.map((key) => message(key, i)));

      const all = () => [...first.handled, ...second.handled];
      await eventually(() => all().length >= 30, 'thirty messages were handled');
      const ids = all().map((m) => m.headers[EVENT_ID_HEADER]);
      expect(new Set(ids).size).toBe(30);
      expect(ids).toHaveLength(30);
      for (const reader of [first, second]) {
        for (const key of keys) {
          const seen = reader.handled.filter((m) => m.key === key).map(n);
          expect(seen).toEqual([...seen].sort((x, y) => x - y));
        }
      }
    });

    it('carries a message of MAX_BUS_MESSAGE_BYTES whole, in order with the small ones around it', async () => {
      const bus = await connect();
      const topic = unique('large');
      const headers = { [EVENT_ID_HEADER]: 'evt_large', [EVENT_TYPE_HEADER]: 'test.event' };
      const overhead = Buffer.byteLength('ws') + Object.entries(headers).reduce((sum, [k, v]) => sum + Buffer.byteLength(k) + Buffer.byteLength(v), 0);
      const large: BusMessage = { key: 'ws', value: randomBytes(MAX_BUS_MESSAGE_BYTES).toString('base64url').slice(0, MAX_BUS_MESSAGE_BYTES - overhead), headers };
      await bus.publish(topic, [message('ws', 1)]);
      await bus.publish(topic, [large]);
      await bus.publish(topic, [message('ws', 3)]);
      const reader = await consume(bus, unique('group'), [topic]);
      subscriptions.push(reader.subscription);
      await eventually(() => reader.handled.length >= 3, 'all three arrived');

      expect(reader.handled).toHaveLength(3);
      expect(reader.handled[1]).toMatchObject({ key: 'ws', value: large.value, headers });
      expect(reader.handled[1]!.value.length).toBe(MAX_BUS_MESSAGE_BYTES - overhead);
      expect([reader.handled[0], reader.handled[2]].map((m) => n(m!))).toEqual([1, 3]);
    });

    it('lets the handler in flight finish and commit before stop resolves', async () => {
      const bus = await connect();
      const group = unique('group');
      const topic = unique('stop');
      let release!: () => void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      let started = false;
      let finished = false;
      const subscription = await bus.subscribe(group, [topic], async () => {
        started = true;
        await gate;
        finished = true;
      });
      await bus.publish(topic, [message('ws', 1)]);
      await eventually(() => started, 'the handler started');
      const stopped = subscription.stop();
      release();
      await stopped;
      expect(finished).toBe(true);

      const again = await consume(bus, group, [topic]);
      subscriptions.push(again.subscription);
      await bus.publish(topic, [message('ws', 2)]);
      await eventually(() => again.handled.length >= 1, 'the next message arrived');
      expect(again.attempts.map(n)).toEqual([2]);
    });
  });
}
