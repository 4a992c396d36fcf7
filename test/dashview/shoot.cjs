// shoot.cjs opens dashview pages in Debian's Chromium through playwright-core and takes a PNG of each.
// It reads a JSON job on stdin: {"chromium": path, "pages": [{"url": ..., "png": ...}]}, and writes a
// JSON array on stdout, one element per page: {"url", "png", "report": the page's dashviewReport,
// "errors": what the page threw or logged as errors, but for the failed requests of the queries}. playwright-core comes from NODE_PATH; it never
// downloads a browser.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const { chromium } = require('playwright-core');

// The flags keep Chromium off the network (this machine has none) and out of first-run work.
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

async function shoot(context, page) {
  const tab = await context.newPage();
  const errors = [];
  tab.on('pageerror', e => errors.push(String(e)));
  // A query Prometheus refused is the panel's error, in its report; the browser logs it too.
  tab.on('console', m => {
    if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) errors.push(m.text());
  });
  await tab.goto(page.url);
  await tab.waitForFunction(() => window.dashviewDone === true, null, { timeout: 120000 });
  const report = await tab.evaluate(() => window.dashviewReport);
  await tab.screenshot({ path: page.png, fullPage: true });
  await tab.close();
  return { url: page.url, png: page.png, report, errors };
}

async function main() {
  const job = JSON.parse(fs.readFileSync(0, 'utf8'));
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'dashview-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: job.chromium, headless: true, args: ARGS, viewport: { width: 1600, height: 1000 },
  });
  try {
    const out = [];
    for (const page of job.pages) out.push(await shoot(context, page));
    process.stdout.write(JSON.stringify(out));
  } finally {
    await context.close();
    fs.rmSync(profile, { recursive: true, force: true });
  }
}

main().catch(e => {
  process.stderr.write(String(e.stack || e) + '\n');
  process.exit(1);
});
