import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { importCycles } from '../../scripts/import-cycles';

/** The lint step's cycle check (scripts/import-cycles.ts): it finds a cycle, type-only too, and lib/ has none. */
describe('import cycles', () => {
  const made: string[] = [];
  afterAll(() => made.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

  it('finds files that import each other, through type-only imports and index files too', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cycles-'));
    made.push(dir);
    mkdirSync(join(dir, 'parts'));
    writeFileSync(join(dir, 'a.ts'), "import type { B } from './b';\nexport type A = B[];\n");
    writeFileSync(join(dir, 'b.ts'), "import { c } from './parts';\nexport type B = typeof c;\n");
    writeFileSync(join(dir, 'parts', 'index.ts'), "export { c } from './c';\n");
    writeFileSync(join(dir, 'parts', 'c.ts'), "import type { A } from '../a';\nexport const c: A | null = null;\n");
    writeFileSync(join(dir, 'alone.ts'), "import { c } from './parts/c';\nexport const d = c;\n");
    const cycles = importCycles(dir).map((group) => group.map((file) => relative(relative(process.cwd(), dir), file)));
    expect(cycles).toEqual([['a.ts', 'b.ts', join('parts', 'c.ts'), join('parts', 'index.ts')]]);
  });

  it('lib/ has none', () => {
    expect(importCycles('lib')).toEqual([]);
  });
});
