import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as publicApi from '../../lib';
import * as boardApi from '../../lib/board';
import { API_PAGE, documentedPublicApi } from '../support/public-api';

describe('the public API', () => {
  it('is exactly what docs/api.md lists', () => {
    expect(Object.keys(publicApi).sort()).toEqual(documentedPublicApi().sort());
  });

  it('has the lock board at nestjs-redis-lock/board: its module and its error, nothing else', () => {
    expect(Object.keys(boardApi).sort()).toEqual(['LockBoardOptionsError', 'RedisLockBoardModule']);
    expect(readFileSync(API_PAGE, 'utf8')).toMatch(
      /`RedisLockBoardModule` and\s+`LockBoardOptionsError` from `nestjs-redis-lock\/board`/,
    );
  });

  it('keeps lib/internal out of the package entry points', () => {
    const pkg = JSON.parse(readFileSync(join(__dirname, '..', '..', 'package.json'), 'utf8')) as { exports: object };
    expect(Object.keys(pkg.exports)).toEqual(['.', './health', './board', './package.json']);
  });
});
