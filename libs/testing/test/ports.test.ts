import { freePort } from '@agenthub/testing';

describe('freePort', () => {
  it('never hands out a port twice in one process, even before anyone binds it', async () => {
    const ports: number[] = [];
    for (let i = 0; i < 300; i++) ports.push(await freePort());
    expect(new Set(ports).size).toBe(ports.length);
    for (const port of ports) {
      expect(port).toBeGreaterThanOrEqual(20_000);
      expect(port).toBeLessThan(32_768);
    }
  });

  it('hands distinct ports to concurrent callers, as a split stack asks for its sixteen', async () => {
    const ports = await Promise.all(Array.from({ length: 400 }, () => freePort()));
    expect(ports.length - new Set(ports).size).toBe(0);
  });
});
