/**
 * `tsx scripts/import-cycles.ts [dir]` (part of `npm run lint`): fails when a module of `dir`
 * (default lib) imports itself through others, type-only imports included. A cycle of types still
 * ties two files to each other, and a file read alone should lean on what sits below it only.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

const IMPORT = /(?:^|\n)\s*(?:import|export)\s[^'";]*?from\s+['"]([^'"]+)['"]/g;

function sourcesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((entry) => {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) return sourcesUnder(path);
    return path.endsWith('.ts') ? [path] : [];
  });
}

/** The file a relative specifier names, if it is one of ours. */
function target(from: string, specifier: string): string | undefined {
  if (!specifier.startsWith('.')) return undefined;
  const base = resolve(dirname(from), specifier);
  return [`${base}.ts`, join(base, 'index.ts')].find((candidate) => existsSync(candidate));
}

/** Every strongly connected group of more than one file (Tarjan), each a set of files that import each other. */
export function importCycles(root: string): string[][] {
  const files = sourcesUnder(resolve(root));
  const edges = new Map<string, string[]>();
  for (const file of files) {
    const text = readFileSync(file, 'utf8');
    const targets = [...text.matchAll(IMPORT)].map((m) => target(file, m[1])).filter((t) => t !== undefined);
    edges.set(file, targets);
  }
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const groups: string[][] = [];
  const visit = (file: string): void => {
    index.set(file, index.size);
    low.set(file, index.get(file)!);
    stack.push(file);
    onStack.add(file);
    for (const next of edges.get(file) ?? []) {
      if (!index.has(next)) {
        visit(next);
        low.set(file, Math.min(low.get(file)!, low.get(next)!));
      } else if (onStack.has(next)) {
        low.set(file, Math.min(low.get(file)!, index.get(next)!));
      }
    }
    if (low.get(file) !== index.get(file)) return;
    const group: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      group.push(member);
    } while (member !== file);
    if (group.length > 1) groups.push(group.map((f) => relative(process.cwd(), f)).sort());
  };
  for (const file of files) if (!index.has(file)) visit(file);
  return groups;
}

if (require.main === module) {
  const root = process.argv[2] ?? 'lib';
  const cycles = importCycles(root);
  for (const cycle of cycles) process.stderr.write(`import cycle: ${cycle.join(' <-> ')}\n`);
  if (cycles.length > 0) process.exit(1);
  process.stdout.write(`no import cycle in ${root}/\n`);
}
