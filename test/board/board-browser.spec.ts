import { existsSync, mkdirSync } from 'node:fs';
import { copyFile } from 'node:fs/promises';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import type { LockHandle } from '../../lib';
import { lockClient, testPrefix, type TestClient } from '../support/engine';
import { AdminHeaderGuard, boardApp, type BoardApp } from './board-support';

/**
 * The board in a real browser: headless Chromium (the Debian package `chromium`, which
 * `npm run setup` installs) driven by playwright-core, without a downloaded browser build.
 * Screenshots go to test-artifacts/ (gitignored); UPDATE_BOARD_SCREENSHOT=1 also writes the
 * README's docs/board.png from the one with the fair queue.
 */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const ARTIFACTS = join(__dirname, '..', '..', 'test-artifacts');
const found = existsSync(CHROMIUM);
if (!found) {
  console.warn(
    `The lock board's browser test is skipped: no Chromium at ${CHROMIUM}. Run "npm run setup" (apt-get install chromium) or set CHROMIUM_PATH.`,
  );
}

(found ? describe : describe.skip)(`lock board in a browser (Chromium at ${CHROMIUM})`, () => {
  const prefix = testPrefix();
  let browser: Browser;
  let board: BoardApp;
  let readOnly: BoardApp;
  let other: TestClient;
  let page: Page;

  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    other = lockClient({ keyPrefix: prefix });
    [browser, board, readOnly] = await Promise.all([
      chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] }),
      boardApp(prefix, {
        route: '/locks',
        guard: AdminHeaderGuard,
        forceUnlock: true,
        refreshMs: 250,
        title: 'Orders service locks',
      }),
      boardApp(prefix, { route: '/locks', public: true, refreshMs: 250 }),
    ]);
    // The guard lets this browser in by a header, as a real one would by a session.
    const context = await browser.newContext({
      extraHTTPHeaders: { 'x-admin': 'yes' },
      viewport: { width: 1280, height: 760 },
    });
    page = await context.newPage();
  });
  afterAll(async () => {
    await browser?.close();
    await Promise.all([board?.close(), readOnly?.close()]);
    await other?.close();
  });

  const row = (name: string) =>
    page.locator('#locks tr.lock').filter({ has: page.locator('.name', { hasText: name }) });
  const shot = (file: string) => page.screenshot({ path: join(ARTIFACTS, file), fullPage: true });

  it('shows a lock with its holder and a waiter in the fair queue, then sees it released', async () => {
    await page.goto(`${board.url}/locks`);
    await page.locator('#summary', { hasText: 'updated' }).waitFor();
    // Some history for the events and the per-label rows.
    for (let i = 0; i < 3; i++) {
      await board.locks
        .getLock(`invoice:${i}`)
        .withLock(() => new Promise((r) => setTimeout(r, 20 * i)), { label: 'invoice:{id}' });
    }
    const fair = board.locks.getFairLock('orders:42');
    const held = await fair.lock({ leaseTime: 30_000, label: 'orders:{id}' });
    const waiting = other.locks.getFairLock('orders:42').lock({ leaseTime: 30_000, waitTime: 20_000 });
    const semaphore = await other.locks
      .getSemaphore('payment-provider', { permits: 5 })
      .acquire({ permits: 2, leaseTime: 30_000 });

    const lock = row('orders:42');
    await lock.waitFor();
    await expect(lock.textContent()).resolves.toContain(held.owner);
    await expect(lock.locator('.kind').textContent()).resolves.toBe('fair');
    const queue = page.locator('#locks tr.more ol.queue li');
    await queue.first().waitFor();
    const waiterOwner = await queue.first().getAttribute('data-owner');
    expect(waiterOwner).not.toBe(held.owner);
    await expect(queue.first().textContent()).resolves.toMatch(/deadline in \d/);
    await expect(row('payment-provider').textContent()).resolves.toContain('2 permits');
    // Search by the template label (this process took the lock with it), then by name.
    await page.fill('#search', 'orders:{id}');
    await row('payment-provider').waitFor({ state: 'detached' });
    // The table is drawn again at each refresh: counted once the matching row is there.
    await row('orders:42').waitFor();
    await expect(page.locator('#locks tr.lock').count()).resolves.toBe(1);
    await page.fill('#search', 'payment');
    await row('orders:42').waitFor({ state: 'detached' });
    await row('payment-provider').waitFor();
    await page.fill('#search', '');
    await page.locator('#labels tbody tr', { hasText: 'invoice:{id}' }).waitFor();
    await shot('board-fair-queue.png');
    if (process.env.UPDATE_BOARD_SCREENSHOT === '1') {
      await copyFile(join(ARTIFACTS, 'board-fair-queue.png'), join(__dirname, '..', '..', 'docs', 'board.png'));
    }

    // Released: the waiter takes it, then lets it go, and the lock leaves the board.
    await held.release();
    const next: LockHandle = await waiting;
    expect(next.owner).toBe(waiterOwner);
    await page.locator('#locks tr.lock', { hasText: waiterOwner! }).waitFor();
    await expect(page.locator('#locks tr.more ol.queue li').count()).resolves.toBe(0);
    await next.release();
    await semaphore.release();
    await lock.waitFor({ state: 'detached' });
    await page.locator('#events tr[data-event="released"]', { hasText: 'orders:42' }).first().waitFor();
    await shot('board-released.png');
  });

  it('force-unlocks with a confirmation naming the holder, and records it', async () => {
    const stuck = await other.locks.getLock('nightly-export').lock({ leaseTime: 30_000 });
    const lock = row('nightly-export');
    await lock.waitFor();
    const asked: string[] = [];
    page.once('dialog', (dialog) => {
      asked.push(dialog.message());
      void dialog.accept();
    });
    await lock.getByRole('button', { name: 'Force unlock' }).click();
    await lock.waitFor({ state: 'detached' });
    expect(asked).toHaveLength(1);
    expect(asked[0]).toContain('"nightly-export"');
    expect(asked[0]).toContain(stuck.owner);
    expect((await other.locks.inspect('nightly-export')).state).toBe('free');
    await page.locator('#events tr[data-event="forced"]', { hasText: 'nightly-export' }).waitFor();
    await shot('board-forced.png');
  });

  it('renders a hostile lock name as text', async () => {
    const hostile = '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>';
    const handle = await other.locks.getLock(hostile).lock({ leaseTime: 30_000 });
    try {
      const lock = row('<img src=x');
      await lock.waitFor();
      await expect(lock.locator('.name').textContent()).resolves.toBe(hostile);
      await expect(page.locator('#locks img, #locks script').count()).resolves.toBe(0);
      await expect(page.evaluate(() => (globalThis as { pwned?: number }).pwned)).resolves.toBeUndefined();
      await shot('board-hostile-name.png');
    } finally {
      await handle.release();
    }
  });

  it('read-only: offers no force-unlock, and the board refuses one sent anyway', async () => {
    const handle = await other.locks.getLock('read-only-held').lock({ leaseTime: 30_000 });
    try {
      await page.goto(`${readOnly.url}/locks`);
      const lock = row('read-only-held');
      await lock.waitFor();
      await expect(lock.getByRole('button').count()).resolves.toBe(0);
      const status = await page.evaluate(
        async ([owner]) =>
          (
            await fetch('/locks/force-unlock', {
              method: 'POST',
              headers: { 'content-type': 'application/json', 'x-lock-board': '1' },
              body: JSON.stringify({ name: 'read-only-held', kind: 'reentrant', holder: owner }),
            })
          ).status,
        [handle.owner],
      );
      expect(status).toBe(403);
      expect((await other.locks.inspect('read-only-held')).state).toBe('held');
      await shot('board-read-only.png');
    } finally {
      await handle.release();
    }
  });
});
