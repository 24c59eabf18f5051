// Opens a kiln partition --html page in headless Chromium (Debian's, driven by playwright-core)
// and checks that it loads without console errors or failed requests, that the drawing is there
// with its boxes and clusters, and saves a screenshot of the drawing for the pixel check.
// Usage: node html_report_check.mjs PAGE.html SCREENSHOT.png
import { chromium } from 'playwright-core';
import { pathToFileURL } from 'node:url';

const [page_path, shot_path] = process.argv.slice(2);
const problems = [];
const browser = await chromium.launch({
  executablePath: process.env.KILN_CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu'],
});
try {
  const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') problems.push(`console ${m.type()}: ${m.text()}`); });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('requestfailed', (r) => problems.push(`request failed: ${r.url()}`));
  page.on('request', (r) => { if (!r.url().startsWith('file:')) problems.push(`external request: ${r.url()}`); });
  await page.goto(pathToFileURL(page_path).href, { waitUntil: 'load' });
  const facts = await page.evaluate(() => ({
    nodes: document.querySelectorAll('#graph svg g.node').length,
    clusters: document.querySelectorAll('#graph svg g.cluster').length,
    delegates: document.querySelectorAll('#delegates tr').length - 1,
    why: document.querySelectorAll('#why tr').length - 1,
    ops: document.querySelectorAll('#ops tr').length - 1,
    title: document.title,
  }));
  const box = await page.locator('#graph svg').boundingBox();
  if (!box || box.width < 100 || box.height < 100) problems.push(`the drawing is not laid out: ${JSON.stringify(box)}`);
  if (facts.nodes < 10) problems.push(`the drawing has ${facts.nodes} boxes`);
  if (facts.clusters < 2) problems.push(`the drawing has ${facts.clusters} delegate clusters`);
  if (facts.delegates < 2) problems.push(`the delegates table has ${facts.delegates} rows`);
  if (facts.why < 1) problems.push('the WhyNoPartition table is empty');
  if (facts.ops < 10) problems.push(`the profile table has ${facts.ops} ops`);
  await page.locator('#graph').screenshot({ path: shot_path });
  console.log(JSON.stringify(facts));
} finally {
  await browser.close();
}
if (problems.length) {
  for (const p of problems) console.error(`FAIL: ${p}`);
  process.exit(1);
}
