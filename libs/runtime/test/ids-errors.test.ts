import { HubError, newId, Reason } from '../src/index.js';

describe('newId', () => {
  it('gives distinct ids of the documented shape, across many refills of its random pool', () => {
    const ids = new Set<string>();
    for (let i = 0; i < 20_000; i++) ids.add(newId('task'));
    expect(ids.size).toBe(20_000);
    for (const id of ids) expect(id).toMatch(/^task_[0-9a-z]{20}$/);
  });

  it('serves lengths past its pool size', () => {
    expect(newId('x', 5000)).toMatch(/^x_[0-9a-z]{5000}$/);
  });

  it('uses every character of its alphabet', () => {
    const seen = new Set(Array.from({ length: 200 }, () => newId('c').slice(2)).join(''));
    expect(seen.size).toBe(36);
  });
});

describe('HubError', () => {
  it('keeps no stack frames for an answer (a refusal), and keeps them for a failure', () => {
    const frames = (err: Error) => (err.stack ?? '').split('\n').filter((line) => line.trim().startsWith('at ')).length;
    expect(frames(HubError.rateLimited(1000))).toBe(0);
    expect(frames(HubError.notFound())).toBe(0);
    expect(frames(new HubError(Reason.INTERNAL, 'Internal error'))).toBeGreaterThan(0);
    expect(frames(HubError.from(new Error('boom')))).toBeGreaterThan(0);
  });

  it('leaves the stack depth of other errors as it was', () => {
    const before = Error.stackTraceLimit;
    HubError.rateLimited(1000);
    expect(Error.stackTraceLimit).toBe(before);
    expect(new Error('plain').stack?.split('\n').length).toBeGreaterThan(1);
  });
});
