import { ConnectionConfigError } from '../../engine/errors';
import { settledWithin } from '../../engine/util/sleep';
import { errorMessages, FROM_SENTINELS } from './refused-credentials';
import { masterNamedBy, tlsHandshakeError, type TlsTarget } from './tls-probe';

/**
 * TLS handshakes that fail on the settings of one side or the other: a certificate missing, refused
 * or not trusted, a name that does not match, TLS spoken to a plain port. Waiting does not fix them,
 * so connecting stops at the first one instead of retrying until its deadline. Matched on the
 * message, not the error code: ioredis passes a sentinel's error on inside a message of its own.
 */
const RULES: { test: RegExp; fix: string }[] = [
  {
    test: /alert certificate required/i,
    fix: 'Redis requires a client certificate (tls-auth-clients): give tls.cert and tls.key (REDIS_TLS_CERT_FILE, REDIS_TLS_KEY_FILE)',
  },
  {
    test: /alert (unknown ca|bad certificate|certificate unknown|certificate expired|certificate revoked|unsupported certificate|access denied|decrypt error)/i,
    fix: 'Redis refused the client certificate: give one signed by a CA its tls-ca-cert-file trusts, in tls.cert and tls.key (REDIS_TLS_CERT_FILE, REDIS_TLS_KEY_FILE)',
  },
  {
    // TLS 1.2 has no "certificate required": a server missing one answers with a handshake failure.
    test: /alert handshake failure/i,
    fix:
      'Redis refused the TLS handshake: it requires a client certificate (give tls.cert and tls.key: REDIS_TLS_CERT_FILE, ' +
      'REDIS_TLS_KEY_FILE), or takes no cipher this client offers (its tls-ciphers)',
  },
  {
    test: /alert protocol version|unsupported protocol/i,
    fix: 'Redis and this client share no TLS version: compare its tls-protocols with tls.minVersion and tls.maxVersion',
  },
  {
    test: /self[- ]signed certificate|unable to verify the first certificate|unable to get (local )?issuer certificate|certificate chain too long/i,
    fix: "Redis's certificate is not signed by a CA this client trusts: give that CA in tls.ca (REDIS_TLS_CA_FILE)",
  },
  {
    test: /certificate has expired|certificate is not yet valid/i,
    fix: "Redis's certificate is outside its validity period: renew it on the server (or correct this machine's clock)",
  },
  {
    test: /does not match certificate's altnames/i,
    fix: "Redis's certificate does not name the host connected to: connect by a name or address it lists, or set tls.servername",
  },
  {
    test: /wrong version number|packet length too long|unknown protocol|does not speak TLS on this port/i,
    fix: 'Redis does not speak TLS on this port: drop tls (REDIS_TLS=false, a redis:// URL) or connect to its tls-port',
  },
];

/**
 * The configuration error to fail a start-up with when `error`, reported by a connection, is a TLS
 * handshake that fails on its settings; undefined for any other error (those are retried).
 */
export function refusedTls(error: unknown, fromSentinel = false): ConnectionConfigError | undefined {
  const messages = errorMessages(error);
  for (const { test, fix } of RULES) {
    const failed = messages.find((m) => test.test(m));
    if (failed === undefined) continue;
    const toSentinels = fromSentinel || messages.some((m) => FROM_SENTINELS.test(m));
    const where = toSentinels ? ' (to the sentinels: their TLS settings are sentinelTls, REDIS_SENTINEL_TLS)' : '';
    return new ConnectionConfigError([`${fix}${where}; the handshake failed with: ${openSslReason(failed)}`]);
  }
  return undefined;
}

/** How long connecting may take before a handshake of our own looks for a TLS refusal. */
const PROBE_AFTER_MS = 500;
/** How long that handshake may take. */
const PROBE_TIMEOUT_MS = 2_000;

/**
 * Rejects with the configuration error that a TLS handshake of our own with `targets` finds, when
 * `connecting` has not settled within PROBE_AFTER_MS (one handshake per target, once); otherwise
 * never settles. The connections' own errors do not always show it (see tlsHandshakeError).
 */
export async function tlsRefusalWhile(connecting: Promise<unknown>, targets: readonly TlsTarget[]): Promise<never> {
  const settled = settledWithin(
    connecting.then(
      () => true,
      () => true,
    ),
    PROBE_AFTER_MS,
  );
  if (targets.length > 0 && !(await settled)) {
    let masterProbed = false;
    for (const target of targets) {
      const refused = refusedTls(await tlsHandshakeError(target, PROBE_TIMEOUT_MS), target.sentinel !== undefined);
      if (refused) throw refused;
      if (masterProbed || !target.sentinel?.masterTls) continue;
      // Sentinels that take the connection say where the master is: its refusal is the nodes' settings.
      const master = await masterNamedBy(target, PROBE_TIMEOUT_MS);
      if (!master) continue;
      masterProbed = true;
      const refusedByMaster = refusedTls(await tlsHandshakeError(master, PROBE_TIMEOUT_MS));
      if (refusedByMaster) throw refusedByMaster;
    }
  }
  return new Promise<never>(() => undefined);
}

/** OpenSSL's reason ("tlsv13 alert certificate required") out of its long error line, else the message. */
function openSslReason(message: string): string {
  const reason = /:SSL routines:[^:]*:([^:]+):/.exec(message);
  return (reason ? reason[1] : message.split('\n')[0]).trim();
}
