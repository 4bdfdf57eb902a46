// Headless Chromium's own screenshot of a page the bench wrote (docs/dashboard.png, docs/trace.png).

import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';

/** In a throwaway profile, with a time limit; an old `png` is removed first, so a failed shot cannot pass for a new one. */
export function screenshot(html: string, png: string, width: number, height: number): void {
  const profile = mkdtempSync(join(tmpdir(), 'warmroute-chromium-'));
  rmSync(png, { force: true });
  try {
    execFileSync(CHROMIUM, [
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', `--user-data-dir=${profile}`, '--hide-scrollbars', '--force-device-scale-factor=1',
      `--screenshot=${resolve(png)}`, `--window-size=${width},${height}`, pathToFileURL(resolve(html)).href,
    ], { stdio: 'pipe', timeout: 60_000 });
  } finally {
    rmSync(profile, { recursive: true, force: true });
  }
}
