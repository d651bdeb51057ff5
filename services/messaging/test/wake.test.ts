import { MemoryKv } from '@agenthub/runtime';
import { testLogger } from '@agenthub/testing';
import { InboxWakes } from '../src/wake.js';

/** Sends committed together wake their recipient once; every recipient still hears its wake-up. */
describe('InboxWakes', () => {
  it('publishes one wake-up per recipient for the sends of one event-loop turn, and again for later ones', async () => {
    const kv = new MemoryKv();
    const heard: string[] = [];
    let markers = 0;
    let marked = () => {};
    const hear = (id: string) => (message: string) => {
      if (message !== 'marker') heard.push(id);
      else if ((markers += 1) % 2 === 0) marked();
    };
    await kv.subscribe('inbox:a', hear('a'));
    await kv.subscribe('inbox:b', hear('b'));
    const wakes = new InboxWakes(kv, (id) => `inbox:${id}`);
    const log = testLogger();
    /**
     * Lets the turn's wake-ups go out, then publishes a marker on both channels: messages arrive
     * in the order they were published, so once both markers are in, every wake-up is.
     */
    const settled = async () => {
      await new Promise((resolve) => setImmediate(resolve));
      const both = new Promise<void>((resolve) => (marked = resolve));
      await kv.publish('inbox:a', 'marker');
      await kv.publish('inbox:b', 'marker');
      await both;
    };

    for (let i = 0; i < 10; i += 1) wakes.wake('a', log);
    wakes.wake('b', log);
    await settled();
    expect(heard.sort()).toEqual(['a', 'b']);

    wakes.wake('a', log);
    await settled();
    expect(heard.sort()).toEqual(['a', 'a', 'b']);
    await kv.close();
  });
});
