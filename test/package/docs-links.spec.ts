import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';

/**
 * The README is short and the reference lives in docs/ (issue 42): every page there is linked from the
 * README, and every relative link of the README and the pages reaches a file, and a heading when it
 * names one.
 */
const root = join(__dirname, '..', '..');
const pages = [
  join(root, 'README.md'),
  ...readdirSync(join(root, 'docs'))
    .filter((file) => file.endsWith('.md'))
    .map((file) => join(root, 'docs', file)),
];

/** The text outside fenced code blocks, where a `[x](y)` is a link. */
function prose(markdown: string): string {
  return markdown.replace(/^```[\s\S]*?^```/gm, '');
}

/** The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces as hyphens. */
function anchorsOf(file: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const [, heading] of prose(readFileSync(file, 'utf8')).matchAll(/^#{1,6} (.+)$/gm)) {
    const slug = heading
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    anchors.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return anchors;
}

/** The relative links of a page, as [target file, anchor or undefined]. */
function linksOf(file: string): { link: string; target: string; anchor?: string }[] {
  const links = [...prose(readFileSync(file, 'utf8')).matchAll(/\]\(([^)\s]+)\)/g)].map((match) => match[1]);
  return links
    .filter((link) => !/^[a-z]+:/i.test(link))
    .map((link) => {
      const [path, anchor] = link.split('#');
      return { link, target: path === '' ? file : join(dirname(file), path), anchor };
    });
}

describe('the documentation', () => {
  it('links every page under docs/ from the README', () => {
    const linked = new Set(linksOf(join(root, 'README.md')).map(({ target }) => target));
    const unlinked = pages.slice(1).filter((page) => !linked.has(page));
    expect(unlinked.map((page) => relative(root, page))).toEqual([]);
  });

  it.each(pages.map((page) => [relative(root, page), page]))('%s: every relative link resolves', (_, page) => {
    const broken = linksOf(page).filter(
      ({ target, anchor }) => !existsSync(target) || (anchor !== undefined && !anchorsOf(target).has(anchor)),
    );
    expect(broken.map(({ link }) => link)).toEqual([]);
  });
});
