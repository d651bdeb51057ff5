import { randomBytes } from 'node:crypto';
import { LocalFirstKv, MemoryKv, type Kv } from '@agenthub/runtime';
import { RedisKv } from '@agenthub/runtime/redis';

/** The Kv shared by "processes" (LocalFirstKv instances): in-process, and real Redis when the run has one. */
const shared: [string, () => Promise<{ open: () => Promise<Kv>; close: () => Promise<void> }>][] = [
  ['MemoryKv', async () => {
    const kv = new MemoryKv();
    // Every "process" shares the one in-process Kv; closing a LocalFirstKv must not close it for the others.
    return { open: async () => Object.assign(Object.create(kv) as Kv, { close: async () => undefined }), close: () => kv.close() };
  }],
];
if (process.env.AGENTHUB_TEST_REDIS_URL) {
  shared.push(['RedisKv', async () => {
    const prefix = `localfirst:${randomBytes(4).toString('hex')}:`;
    const opened: Kv[] = [];
    return {
      open: async () => {
        const kv = await RedisKv.connect({ url: process.env.AGENTHUB_TEST_REDIS_URL!, prefix });
        opened.push(kv);
        return kv;
      },
      close: async () => {
        await Promise.all(opened.map((kv) => kv.close()));
      },
    };
  }]);
}

/** A Kv whose pub/sub carries nothing between processes (a Redis that drops every publish). */
class DeafKv extends MemoryKv {
  override async publish(): Promise<void> {}
}

/** A Kv that loses the next publish on its way back (as when the subscriber's connection drops meanwhile). */
class LosesNextPublish extends MemoryKv {
  loseNext = false;
  override async publish(channel: string, message: string, signal?: AbortSignal): Promise<void> {
    if (this.loseNext) {
      this.loseNext = false;
      return;
    }
    return super.publish(channel, message, signal);
  }
}

/** A Kv whose publishes fail (Redis unreachable), after the subscription was made. */
class FailingPublishKv extends MemoryKv {
  override async publish(): Promise<void> {
    throw new Error('Redis is unreachable');
  }
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('LocalFirstKv', () => {
  it("passes the caller's signal on with every command, so a departed caller's command does not run", async () => {
    const kv = new LocalFirstKv(new MemoryKv());
    const gone = AbortSignal.abort();
    const commands: [string, () => Promise<unknown>][] = [
      ['get', () => kv.get('k', gone)],
      ['set', () => kv.set('k', 'v', undefined, gone)],
      ['setIfAbsent', () => kv.setIfAbsent('k', 'v', 1000, gone)],
      ['del', () => kv.del('k', gone)],
      ['take', () => kv.take('k', 1, 1, 1, gone)],
      ['publish', () => kv.publish('c', 'm', gone)],
      ['ping', () => kv.ping(gone)],
    ];
    const ran: string[] = [];
    for (const [name, command] of commands) await command().then(() => ran.push(name), () => undefined);
    expect(ran).toEqual([]);
    expect(await kv.get('k')).toBeUndefined();
  });

  it('delivers a publish to the subscribers of its own process without the Kv', async () => {
    const deaf = new LocalFirstKv(new DeafKv());
    const heard: string[] = [];
    const unsubscribe = await deaf.subscribe('c', (m) => heard.push(m));
    await deaf.publish('c', 'one');
    await pause(20);
    expect(heard).toEqual(['one']);
    await unsubscribe();
    await deaf.publish('c', 'two');
    await pause(20);
    expect(heard).toEqual(['one']);
  });

  it('a publish that fails still reached this process, and leaves nothing owed that would swallow a later message', async () => {
    const inner = new FailingPublishKv();
    const kv = new LocalFirstKv(inner);
    const heard: string[] = [];
    await kv.subscribe('c', (m) => heard.push(m));
    await expect(kv.publish('c', '1')).rejects.toThrow('unreachable');
    await pause(10);
    expect(heard).toEqual(['1']);
    // Another process's "1" through the Kv (its copy of the failed publish never comes).
    await MemoryKv.prototype.publish.call(inner, 'c', '1');
    await pause(20);
    expect(heard).toEqual(['1', '1']);
  });

  it('a copy that never comes back is given up after the echo wait, and swallows no later message', async () => {
    const inner = new LosesNextPublish();
    const kv = new LocalFirstKv(inner, { echoWaitMs: 50 });
    const heard: string[] = [];
    await kv.subscribe('c', (m) => heard.push(m));
    inner.loseNext = true;
    await kv.publish('c', '1');
    await pause(100);
    expect(heard).toEqual(['1']);
    // Another process's "1" through the Kv, after the lost copy was given up.
    await inner.publish('c', '1');
    await pause(20);
    expect(heard).toEqual(['1', '1']);
  });
});

describe.each(shared)('LocalFirstKv over a shared %s', (_name, makeShared) => {
  let backend: Awaited<ReturnType<typeof makeShared>>;
  const processes: LocalFirstKv[] = [];
  const startProcess = async (options?: { echoWaitMs?: number }) => {
    const kv = new LocalFirstKv(await backend.open(), options);
    processes.push(kv);
    return kv;
  };
  beforeEach(async () => {
    backend = await makeShared();
  });
  afterEach(async () => {
    await Promise.all(processes.splice(0).map((kv) => kv.close()));
    await backend.close();
  });

  it('each subscriber hears a publish once: at once in its own process, through the Kv in another', async () => {
    const here = await startProcess();
    const there = await startProcess();
    const heardHere: string[] = [];
    const heardThere: string[] = [];
    await here.subscribe('c', (m) => heardHere.push(m));
    await there.subscribe('c', (m) => heardThere.push(m));
    await here.publish('c', 'wake');
    await pause(0);
    // In-process, before anything could come back through the Kv.
    expect(heardHere).toEqual(['wake']);
    await pause(200);
    // Its own copy, back through the Kv, is not heard a second time; the other process hears it once.
    expect(heardHere).toEqual(['wake']);
    expect(heardThere).toEqual(['wake']);
  });

  it('a message of another process equal to one of its own is still heard', async () => {
    const here = await startProcess();
    const there = await startProcess();
    const heardHere: string[] = [];
    await here.subscribe('c', (m) => heardHere.push(m));
    await here.publish('c', '1');
    await there.publish('c', '1');
    await pause(200);
    expect(heardHere).toEqual(['1', '1']);
    await there.publish('c', '1');
    await pause(200);
    expect(heardHere).toEqual(['1', '1', '1']);
  });
});
