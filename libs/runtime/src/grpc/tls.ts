import { readFile } from 'node:fs/promises';
import * as grpc from '@grpc/grpc-js';
// Not from config.js, which imports the gRPC server: config-error.js breaks the cycle.
import { ConfigError } from '../config-error.js';

/** PEM material for mutual TLS between the processes of a split deployment. */
export interface GrpcTls {
  /** The CA that signed every process's certificate; peers are verified against it. */
  readonly ca: Buffer;
  /** This process's certificate chain, presented as server and as client. */
  readonly cert: Buffer;
  readonly key: Buffer;
}

/**
 * GRPC_TLS_CERT_FILE, GRPC_TLS_KEY_FILE and GRPC_TLS_CA_FILE, all three or none; undefined means
 * plaintext gRPC (calls are still signed).
 */
export async function loadGrpcTls(files: { GRPC_TLS_CERT_FILE?: string; GRPC_TLS_KEY_FILE?: string; GRPC_TLS_CA_FILE?: string }): Promise<GrpcTls | undefined> {
  const names = ['GRPC_TLS_CERT_FILE', 'GRPC_TLS_KEY_FILE', 'GRPC_TLS_CA_FILE'] as const;
  const missing = names.filter((name) => !files[name]);
  if (missing.length === names.length) return undefined;
  if (missing.length) throw new ConfigError(`Mutual TLS needs ${names.join(', ')} together; missing ${missing.join(', ')}`);
  const read = async (name: (typeof names)[number]) => {
    try {
      return await readFile(files[name]!);
    } catch (err) {
      throw new ConfigError(`${name}: cannot read ${files[name]} (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
    }
  };
  const [cert, key, ca] = await Promise.all(names.map(read)) as [Buffer, Buffer, Buffer];
  return { ca, cert, key };
}

/** Plaintext without TLS; with it, a server that requires and verifies client certificates. */
export function serverCredentials(tls: GrpcTls | undefined): grpc.ServerCredentials {
  if (!tls) return grpc.ServerCredentials.createInsecure();
  return grpc.ServerCredentials.createSsl(tls.ca, [{ cert_chain: tls.cert, private_key: tls.key }], true);
}

/** Plaintext without TLS; with it, a client that presents its certificate and verifies the server's. */
export function channelCredentials(tls: GrpcTls | undefined): grpc.ChannelCredentials {
  if (!tls) return grpc.credentials.createInsecure();
  return grpc.credentials.createSsl(tls.ca, tls.key, tls.cert);
}

/**
 * For a process asking its own gRPC server over loopback (readiness): the certificate is checked
 * against the CA, but not against the name dialled, since the certificate names the Service
 * other processes dial, not 127.0.0.1.
 */
export function selfCheckCredentials(tls: GrpcTls | undefined): grpc.ChannelCredentials {
  if (!tls) return grpc.credentials.createInsecure();
  return grpc.credentials.createSsl(tls.ca, tls.key, tls.cert, { checkServerIdentity: () => undefined });
}
