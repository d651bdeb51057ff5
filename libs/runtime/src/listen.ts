import net from 'node:net';

/** The variables that chose an address, so a failure names what the operator can change. */
export interface ListenVariables {
  host: string;
  port: string;
}

/** Codes that mean the address or port the operator chose is at fault, not the program. */
const OPERATOR_CODES = new Set(['EADDRINUSE', 'EACCES', 'EADDRNOTAVAIL', 'ENOTFOUND', 'EAI_AGAIN']);

/**
 * A listener could not open on the address the configuration names. runProcess prints the
 * message alone (no stack: nothing is wrong with the program) and exits with status 3.
 */
export class ListenError extends Error {
  override readonly name = 'ListenError';

  constructor(
    readonly code: string,
    readonly host: string,
    readonly port: number,
    readonly variables: ListenVariables,
  ) {
    super(describe(code, host, port, variables));
  }
}

function describe(code: string, host: string, port: number, vars: ListenVariables): string {
  switch (code) {
    case 'EADDRINUSE':
      return `Port ${port} is already in use (${vars.port}); stop whatever holds it or set ${vars.port} to a free port.`;
    case 'EACCES':
      return `Not allowed to listen on port ${port} (${vars.port}); ports below 1024 need privileges, choose a higher one.`;
    case 'EADDRNOTAVAIL':
      return `Cannot listen on ${host} (${vars.host}): it is not an address of this machine; use one that is, or 0.0.0.0.`;
    default:
      return `Cannot listen on ${host} (${vars.host}): the name does not resolve (${code}); use an address of this machine, or 0.0.0.0.`;
  }
}

/** `err` as a ListenError when the chosen address is at fault, else `err` unchanged. */
export function listenFailure(err: unknown, host: string, port: number, variables: ListenVariables): unknown {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return code && OPERATOR_CODES.has(code) ? new ListenError(code, host, port, variables) : err;
}

/**
 * Why `host:port` cannot be bound, found by trying with a plain socket: grpc-js reports a failed
 * bind only as text. Undefined when the socket binds (the failure was something else).
 */
export async function bindProblem(host: string, port: number): Promise<NodeJS.ErrnoException | undefined> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', (err: NodeJS.ErrnoException) => resolve(err));
    server.listen(port, host, () => server.close(() => resolve(undefined)));
  });
}
