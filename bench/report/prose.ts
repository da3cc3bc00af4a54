import * as fs from 'node:fs';
import * as path from 'node:path';

/**
 * The report's words live in `bench/report/prose/<section>.md`, not in code. Each file is a set of
 * blocks, each opened by a `<!-- block: name -->` line; a block's text runs to the next such line
 * (blank lines around it dropped). `{{name}}` in a block is filled with a value the renderer computed
 * from the results; a placeholder left without a value is an error, so the report never shows one.
 */
const PROSE_DIR = path.join(__dirname, 'prose');
const BLOCK = /^<!-- block: ([\w-]+) -->$/;
const PLACEHOLDER = /\{\{([\w.-]+)\}\}/g;

const files = new Map<string, Map<string, string>>();

function blocksOf(section: string): Map<string, string> {
  let blocks = files.get(section);
  if (blocks) return blocks;
  blocks = new Map();
  let name: string | undefined;
  let lines: string[] = [];
  const close = () => {
    if (name !== undefined) blocks!.set(name, lines.join('\n').replace(/^\n+|\n+$/g, ''));
  };
  for (const line of fs.readFileSync(path.join(PROSE_DIR, `${section}.md`), 'utf8').split('\n')) {
    const opened = BLOCK.exec(line);
    if (!opened) {
      lines.push(line);
      continue;
    }
    close();
    name = opened[1];
    lines = [];
  }
  close();
  files.set(section, blocks);
  return blocks;
}

/** Block `block` of `prose/<section>.md`, its `{{placeholders}}` filled from `values`. */
export function prose(section: string, block: string, values: Record<string, string> = {}): string {
  const text = blocksOf(section).get(block);
  if (text === undefined) throw new Error(`bench/report/prose/${section}.md has no block '${block}'`);
  return text.replace(PLACEHOLDER, (_, name: string) => {
    const value = values[name];
    if (value === undefined)
      throw new Error(`bench/report/prose/${section}.md, block '${block}': no value for {{${name}}}`);
    return value;
  });
}
