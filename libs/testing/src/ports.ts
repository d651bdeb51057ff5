import net from 'node:net';

/** Below Linux's ephemeral range (32768–60999), from which outgoing connections take their ports. */
const FIRST = 20_000;
const LAST = 32_000;

/**
 * Jest workers draw from disjoint slices of the range, and a process never hands out a port twice:
 * a split stack picks its sixteen ports seconds before its processes bind them, and another
 * worker's stack starting meanwhile must not pick one of them (a collision failed a suite once).
 */
const SLICES = 8;
const slice = (Number(process.env.JEST_WORKER_ID ?? '1') - 1) % SLICES;
const SLICE_SIZE = Math.floor((LAST - FIRST) / SLICES);
const handedOut = new Set<number>();

/**
 * A loopback port nobody listens on now, for a process a test starts (and may kill and start
 * again on the same port). It is chosen below the ephemeral range: a port the kernel picked with
 * `listen(0)` can be handed to any outgoing connection while its process is down, so a restart on
 * it fails now and then on a busy machine; one outside that range stays free.
 */
export async function freePort(): Promise<number> {
  // Once a file has used half its slice, its oldest ports are long closed: forget the older half
  // (not all: the ports of a stack still starting must stay taken).
  if (handedOut.size > SLICE_SIZE / 2) {
    for (const old of handedOut) {
      if (handedOut.size <= SLICE_SIZE / 4) break;
      handedOut.delete(old);
    }
  }
  for (;;) {
    const port = FIRST + slice * SLICE_SIZE + Math.floor(Math.random() * SLICE_SIZE);
    if (handedOut.has(port)) continue;
    // Recorded before the check, so that a concurrent call (a split stack asks for its ports all
    // at once) cannot pick the same one while this one is checking it. A port in use stays
    // recorded: nobody is to be handed it.
    handedOut.add(port);
    if (await canListen(port)) return port;
  }
}

function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}
