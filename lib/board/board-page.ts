import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

/** Text safe inside HTML and inside a double-quoted attribute. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"'`]/g, (c) => `&#${c.charCodeAt(0)};`);
}

/**
 * Sent with every response of the board: nothing runs but the board's own script (no inline script,
 * so an escaping slip could not run one either), no framing (a force-unlock button cannot be
 * clicked through another site), nothing cached or sniffed.
 */
export const BOARD_HEADERS: Record<string, string> = {
  'Cache-Control': 'no-store',
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
  'X-Frame-Options': 'DENY',
  'Content-Security-Policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; " +
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
};

/** The page, around which board.js renders what the state endpoint returns. */
export function boardPage(page: { title: string; base: string; refreshMs: number; forceUnlock: boolean }): string {
  const base = escapeHtml(page.base);
  const title = escapeHtml(page.title);
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title}</title>
<link rel="stylesheet" href="${base}/board.css">
<script src="${base}/board.js" defer></script>
</head>
<body data-base="${base}" data-refresh-ms="${page.refreshMs}" data-force-unlock="${page.forceUnlock}">
<header>
<h1>${title}</h1>
<p id="summary" class="muted">Loading…</p>
<p id="error" class="error" hidden></p>
</header>
<main>
<section>
<div class="bar"><h2>Locks</h2><input id="search" type="search" placeholder="Search by name or label" aria-label="Search by name or label" autocomplete="off"></div>
<table id="locks">
<thead><tr><th>Name</th><th>Kind</th><th>Holder</th><th>Holds</th><th>Lease left</th><th>Fencing token</th><th>Waiting</th><th></th></tr></thead>
<tbody></tbody>
</table>
<p id="no-locks" class="muted" hidden>No lock is held and nobody waits.</p>
</section>
<section>
<h2>Per label <small class="muted" id="window"></small></h2>
<table id="labels">
<thead><tr><th>Label</th><th>Acquisitions</th><th>Trend</th><th>Wait p50</th><th>Wait p99</th><th>Hold p50</th><th>Hold p99</th></tr></thead>
<tbody></tbody>
</table>
</section>
<section>
<h2>Recent events <small class="muted">of this process only</small></h2>
<table id="events">
<thead><tr><th>Time</th><th>Event</th><th>Name</th><th>Kind</th><th>Owner</th><th>Label</th><th>Details</th></tr></thead>
<tbody></tbody>
</table>
</section>
</main>
<noscript><p class="error">The board needs JavaScript to refresh; the state is at <a href="${base}/state">${base}/state</a>.</p></noscript>
</body>
</html>
`;
}

/** The board's script and stylesheet, read once from the package's `lib/board/web/`. */
export function boardAsset(file: 'board.js' | 'board.css'): string {
  const cached = assets.get(file);
  if (cached !== undefined) return cached;
  const text = readFileSync(join(webDir(), file), 'utf8');
  assets.set(file, text);
  return text;
}

const assets = new Map<string, string>();

/** `lib/board/web` above this file: beside it in the sources, at the package's root from dist/. */
function webDir(): string {
  for (let dir = __dirname; ; dir = dirname(dir)) {
    for (const candidate of [join(dir, 'web'), join(dir, 'lib', 'board', 'web')]) {
      if (existsSync(join(candidate, 'board.js'))) return candidate;
    }
    if (dirname(dir) === dir) throw new Error(`Cannot find the lock board's web/ directory above ${__dirname}.`);
  }
}
