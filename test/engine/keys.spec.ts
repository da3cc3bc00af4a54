import { encodeName, lockKeys, LockClient, LockOptionsError } from '../../lib/internal';
import { connect } from '../support/engine';

describe('key layout', () => {
  it('puts every key and the channel of a lock under one hash tag', () => {
    const keys = lockKeys('app', 'order:1');
    expect(Object.values(keys).every((k) => k.startsWith('app:{order:1}'))).toBe(true);
  });

  it('percent-encodes braces so a name cannot move the hash tag, and keeps distinct names distinct', () => {
    expect(encodeName('a}b{c')).toBe('a%7Db%7Bc');
    expect(lockKeys('p', 'x}:evil').lock).toBe('p:{x%7D:evil}');
    expect(encodeName('%7D')).not.toBe(encodeName('}'));
  });

  it('rejects a key prefix that would break the hash tag', () => {
    const redis = connect();
    try {
      expect(() => new LockClient({ redis, keyPrefix: 'a{b}' })).toThrow(LockOptionsError);
      expect(() => new LockClient({ redis, keyPrefix: '' })).toThrow(LockOptionsError);
      expect(() => new LockClient({ redis, watchdogTimeout: -1 })).toThrow(LockOptionsError);
    } finally {
      redis.disconnect();
    }
  });
});
