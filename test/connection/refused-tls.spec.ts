import { ConnectionConfigError } from '../../lib';
import { refusedTls } from '../../lib/connection/checks/refused-tls';

/**
 * How a TLS failure's message maps to the setting to fix. The messages are the ones Node and OpenSSL
 * give (as ioredis passes them on); the failures a test topology can produce are also met end to end
 * in test/connection/mutual-tls.spec.ts.
 */
describe('refusedTls', () => {
  const openSsl = (reason: string) =>
    new Error(
      `80FC498BE47F0000:error:0A000410:SSL routines:ssl3_read_bytes:${reason}:../deps/openssl/ssl/record/rec_layer_s3.c:1601:SSL alert number 40\n`,
    );

  it.each([
    ['TLS 1.3, no client certificate', openSsl('tlsv13 alert certificate required'), /requires a client certificate/],
    [
      'TLS 1.2, no client certificate',
      openSsl('sslv3 alert handshake failure'),
      /requires a client certificate.*or takes no cipher/,
    ],
    ['a client certificate of an unknown CA', openSsl('tlsv1 alert unknown ca'), /refused the client certificate/],
    ['no shared TLS version', openSsl('tlsv1 alert protocol version'), /share no TLS version.*tls-protocols/],
    [
      'a server certificate of an untrusted CA',
      new Error('self-signed certificate in certificate chain'),
      /not signed by a CA this client trusts/,
    ],
    ['an expired server certificate', new Error('certificate has expired'), /outside its validity period/],
    ['TLS to a plain-text port', openSsl('wrong version number'), /does not speak TLS on this port/],
  ])("%s: a ConnectionConfigError naming the fix and OpenSSL's reason", (_what, error, fix) => {
    const refused = refusedTls(error);
    expect(refused).toBeInstanceOf(ConnectionConfigError);
    expect(refused!.message).toMatch(fix);
    expect(refused!.message).not.toContain('rec_layer_s3.c'); // the reason, not OpenSSL's whole line
  });

  it('a refusal reported through the sentinels names sentinelTls', () => {
    const error = new Error('All sentinels are unreachable. Last error: tlsv13 alert certificate required');
    expect(refusedTls(error)!.message).toMatch(/\(to the sentinels: .*sentinelTls, REDIS_SENTINEL_TLS\)/);
  });

  it.each([
    ['a refused connection', Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6380'), { code: 'ECONNREFUSED' })],
    ['a closed connection', new Error('Connection is closed.')],
    ['a timeout', new Error('connect ETIMEDOUT')],
    ['not an error', 'tlsv13 alert certificate required'],
  ])('%s is no TLS refusal: it is retried', (_what, error) => {
    expect(refusedTls(error)).toBeUndefined();
  });
});
