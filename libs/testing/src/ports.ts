import net from 'node:net';

/** Below Linux's ephemeral range (32768–60999), from which outgoing connections take their ports. */
const FIRST = 20_000;
const LAST = 32_000;

/**
 * A loopback port nobody listens on now, for a process a test starts (and may kill and start
 * again on the same port). It is chosen below the ephemeral range: a port the kernel picked with
 * `listen(0)` can be handed to any outgoing connection while its process is down, so a restart on
 * it fails now and then on a busy machine; one outside that range stays free.
 */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = FIRST + Math.floor(Math.random() * (LAST - FIRST));
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
