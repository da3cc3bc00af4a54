import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as publicApi from '../../lib';
import { documentedPublicApi } from '../support/public-api';

describe('the public API', () => {
  it('is exactly what docs/api.md lists', () => {
    expect(Object.keys(publicApi).sort()).toEqual(documentedPublicApi().sort());
  });

  it('keeps lib/internal out of the package entry points', () => {
    const pkg = JSON.parse(readFileSync(join(__dirname, '..', '..', 'package.json'), 'utf8')) as { exports: object };
    expect(Object.keys(pkg.exports)).toEqual(['.', './health', './board', './package.json']);
  });
});
