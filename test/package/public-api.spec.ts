import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as publicApi from '../../lib';
import { readmePublicApi } from '../support/public-api';

describe('the public API', () => {
  it('is exactly what the README lists', () => {
    expect(Object.keys(publicApi).sort()).toEqual(readmePublicApi().sort());
  });

  it('keeps lib/internal out of the package entry points', () => {
    const pkg = JSON.parse(readFileSync(join(__dirname, '..', '..', 'package.json'), 'utf8')) as { exports: object };
    expect(Object.keys(pkg.exports)).toEqual(['.', './health', './package.json']);
  });
});
