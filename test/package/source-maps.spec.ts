import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** What `npm run build` ships must not point stack traces at TypeScript files the package leaves out. */
describe('the build', () => {
  const outDir = mkdtempSync(join(tmpdir(), 'redis-lock-build-'));
  afterAll(() => rmSync(outDir, { recursive: true, force: true }));

  it('emits source maps that carry their own sources', () => {
    const root = join(__dirname, '..', '..');
    execFileSync(
      process.execPath,
      [require.resolve('typescript/bin/tsc'), '-p', 'tsconfig.build.json', '--outDir', outDir],
      {
        cwd: root,
        stdio: 'pipe',
      },
    );
    const maps = (readdirSync(outDir, { recursive: true }) as string[]).filter((f) => f.endsWith('.js.map'));
    expect(maps.length).toBeGreaterThan(20);
    for (const file of maps) {
      const map = JSON.parse(readFileSync(join(outDir, file), 'utf8')) as {
        sources: string[];
        sourcesContent?: string[];
      };
      expect(map.sourcesContent?.length).toBe(map.sources.length);
      expect(map.sourcesContent!.every((source) => source.length > 0)).toBe(true);
    }
  }, 120_000);
});
