/**
 * TLS material for a topology whose nodes speak only TLS (what managed Redis offers): a throwaway
 * certificate authority and one server certificate for 127.0.0.1 signed by it, made with the openssl
 * command line (Node has no API to sign certificates). Clients trust `caFile`. A client certificate
 * signed by the same CA (`clientCertFile`, `clientKeyFile`) is for nodes that ask for one
 * (`tls-auth-clients yes`, see StartOptions.tlsClientAuth); the nodes use their own between themselves.
 */
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

export interface TlsFiles {
  caFile: string;
  certFile: string;
  keyFile: string;
  clientCertFile: string;
  clientKeyFile: string;
}

/** `caName`: the CA's common name (a CA of another name signs certificates no topology of ours trusts). */
export function createTlsFiles(dir: string, caName = 'test CA'): TlsFiles {
  fs.mkdirSync(dir, { recursive: true });
  const file = (name: string) => path.join(dir, name);
  const files = {
    caFile: file('ca.crt'),
    certFile: file('redis.crt'),
    keyFile: file('redis.key'),
    clientCertFile: file('client.crt'),
    clientKeyFile: file('client.key'),
  };
  const ecKey = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  fs.writeFileSync(file('san.ext'), 'subjectAltName=IP:127.0.0.1\n');
  openssl([
    'req',
    '-x509',
    ...ecKey,
    '-keyout',
    file('ca.key'),
    '-out',
    files.caFile,
    '-days',
    '7',
    '-subj',
    `/CN=${caName}`,
  ]);
  openssl(['req', ...ecKey, '-keyout', files.keyFile, '-out', file('redis.csr'), '-subj', '/CN=127.0.0.1']);
  openssl([
    'x509', '-req', '-in', file('redis.csr'), '-CA', files.caFile, '-CAkey', file('ca.key'), '-CAcreateserial',
    '-out', files.certFile, '-days', '7', '-extfile', file('san.ext'),
  ]); // prettier-ignore
  openssl(['req', ...ecKey, '-keyout', files.clientKeyFile, '-out', file('client.csr'), '-subj', '/CN=lock client']);
  openssl([
    'x509', '-req', '-in', file('client.csr'), '-CA', files.caFile, '-CAkey', file('ca.key'), '-CAcreateserial',
    '-out', files.clientCertFile, '-days', '7',
  ]); // prettier-ignore
  return files;
}

function openssl(args: string[]): void {
  try {
    execFileSync('openssl', args, { stdio: 'pipe' });
  } catch (error) {
    const e = error as NodeJS.ErrnoException & { stderr?: Buffer };
    if (e.code === 'ENOENT') {
      throw new Error(
        'a TLS topology needs the openssl command: install it (Debian/Ubuntu: apt-get install -y openssl) ' +
          'or run `npm run setup`, which does',
      );
    }
    throw new Error(`openssl ${args[0]} failed: ${e.stderr?.toString().trim() ?? e.message}`);
  }
}
