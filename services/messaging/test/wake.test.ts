import { MemoryKv } from '@agenthub/runtime';
import { testLogger } from '@agenthub/testing';
import { InboxWakes } from '../src/wake.js';

/** Sends committed together wake their recipient once; every recipient still hears its wake-up. */
describe('InboxWakes', () => {
  it('publishes one wake-up per recipient for the sends of one event-loop turn, and again for later ones', async () => {
    const kv = new MemoryKv();
    const heard: string[] = [];
    await kv.subscribe('inbox:a', () => heard.push('a'));
    await kv.subscribe('inbox:b', () => heard.push('b'));
    const wakes = new InboxWakes(kv, (id) => `inbox:${id}`);
    const log = testLogger();
    const settled = async (n: number) => {
      for (let i = 0; i < 100 && heard.length < n; i += 1) await new Promise((resolve) => setTimeout(resolve, 5));
    };

    for (let i = 0; i < 10; i += 1) wakes.wake('a', log);
    wakes.wake('b', log);
    await settled(2);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(heard.sort()).toEqual(['a', 'b']);

    wakes.wake('a', log);
    await settled(3);
    expect(heard.sort()).toEqual(['a', 'a', 'b']);
    await kv.close();
  });
});
