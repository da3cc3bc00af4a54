import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The names the README's "Public API" section lists: each item of its list starts with one or more
 * `names`, separated by commas, then a colon.
 */
export function readmePublicApi(): string[] {
  const readme = readFileSync(join(__dirname, '..', '..', 'README.md'), 'utf8');
  const section = /^## Public API\n([\s\S]*?)^## /m.exec(readme)?.[1];
  if (!section) throw new Error('README.md has no "## Public API" section');
  const items = section.split(/\n(?=- )/).filter((item) => item.startsWith('- '));
  return items.flatMap((item) => {
    const names = /^- ((?:`\w+`,?\s*)+):/.exec(item)?.[1];
    if (!names) throw new Error(`README.md, Public API: an item that does not start with \`names\`: ${item}`);
    return [...names.matchAll(/`(\w+)`/g)].map((match) => match[1]);
  });
}
