import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** The page that lists the public API (linked from the README). */
export const API_PAGE = join(__dirname, '..', '..', 'docs', 'api.md');

/**
 * The names docs/api.md's "Public API" section lists: each item of its list starts with one or more
 * `names`, separated by commas, then a colon.
 */
export function documentedPublicApi(): string[] {
  const page = readFileSync(API_PAGE, 'utf8');
  const section = /^## Public API\n([\s\S]*?)(?=^## |(?![\s\S]))/m.exec(page)?.[1];
  if (!section) throw new Error('docs/api.md has no "## Public API" section');
  const items = section.split(/\n(?=- )/).filter((item) => item.startsWith('- '));
  return items.flatMap((item) => {
    const names = /^- ((?:`\w+`,?\s*)+):/.exec(item)?.[1];
    if (!names) throw new Error(`docs/api.md, Public API: an item that does not start with \`names\`: ${item}`);
    return [...names.matchAll(/`(\w+)`/g)].map((match) => match[1]);
  });
}
