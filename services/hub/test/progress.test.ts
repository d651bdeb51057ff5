import { Progress } from '../src/progress.js';

/** The CLI's progress display; cli.e2e covers it through a pipe, this covers a terminal. */
function stream(isTTY: boolean) {
  let text = '';
  return { isTTY, write: (chunk: string) => (text += chunk), text: () => text };
}

describe('Progress', () => {
  it('rewrites one line on a terminal and clears it at the end', () => {
    const out = stream(true);
    const progress = new Progress(out);
    progress.update('Re-embedded 100 memories, 50 left');
    progress.update('Re-embedded 150 memories, 0 left');
    progress.done();
    expect(out.text()).toBe('\r\u001b[KRe-embedded 100 memories, 50 left\r\u001b[KRe-embedded 150 memories, 0 left\r\u001b[K');
  });

  it('writes plain lines elsewhere and leaves them', () => {
    const out = stream(false);
    const progress = new Progress(out);
    progress.working('Rewrapping');
    progress.done();
    expect(out.text()).toBe('Rewrapping…\n');
  });
});
