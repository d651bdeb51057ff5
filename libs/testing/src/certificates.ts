import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** PEM files made by `makeTestCertificates`. */
export interface TestCertificates {
  /** The CA every hub process trusts. */
  ca: string;
  /** A certificate for 127.0.0.1 and localhost signed by `ca`, for servers and clients alike. */
  cert: string;
  key: string;
  /** A certificate for the same names from another CA: a client the hub must not accept. */
  strangerCert: string;
  strangerKey: string;
}

/** Makes a throwaway CA and certificates in `dir` with the openssl CLI (mutual TLS tests). */
export function makeTestCertificates(dir: string): TestCertificates {
  const openssl = (...args: string[]) => execFileSync('openssl', args, { stdio: 'pipe' });
  const file = (name: string) => join(dir, name);
  const ca = (name: string) =>
    openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', `/CN=${name}`, '-keyout', file(`${name}.key`), '-out', file(`${name}.crt`));
  const leaf = (name: string, caName: string) => {
    writeFileSync(file(`${name}.ext`), 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n');
    openssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', `/CN=${name}`, '-keyout', file(`${name}.key`), '-out', file(`${name}.csr`));
    openssl('x509', '-req', '-in', file(`${name}.csr`), '-CA', file(`${caName}.crt`), '-CAkey', file(`${caName}.key`), '-CAcreateserial', '-days', '1', '-extfile', file(`${name}.ext`), '-out', file(`${name}.crt`));
  };
  ca('ca');
  ca('other-ca');
  leaf('hub', 'ca');
  leaf('stranger', 'other-ca');
  return { ca: file('ca.crt'), cert: file('hub.crt'), key: file('hub.key'), strangerCert: file('stranger.crt'), strangerKey: file('stranger.key') };
}
