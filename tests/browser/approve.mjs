// Drives Debian's chromium (playwright-core, no downloaded browser) through the mcp-approvals web
// page the way an approver would. Launched by tests/e2e/test_browser_approval.py and `make screenshot`.
//
// Environment:
//   APPROVALS_URL   base URL of mcp-approvals (required)
//   SCENARIO        approve | enter-in-note | wrong-token | live-update | screenshot | markup
//   APPROVER_NAME, APPROVER_TOKEN   the login
//   APPROVAL_ID     (approve, enter-in-note, markup) the approval to decide; its row must be on the page
//   EXPECT_TEXT     (approve, screenshot) JSON array of strings the pending row must show
//   NOTE            (approve, markup) the note typed into the form
//   SCREENSHOT      a PNG path: the page with the pending call, before deciding (1366x768)
//   CHROMIUM        executable (default /usr/bin/chromium)
//   TIMEOUT_MS      per-step timeout (default 15000)
//
// Output: one JSON object per line on stdout: {"event":"ready",...} when live-update is waiting for
// a new pending call, then {"event":"result",...}. Exit code 0 on success, 1 with the reason on stderr.

import { chromium } from 'playwright-core';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const env = process.env;
const base = (env.APPROVALS_URL || '').replace(/\/$/, '');
const scenario = env.SCENARIO || 'approve';
const timeout = Number(env.TIMEOUT_MS || 15000);
const emit = (obj) => process.stdout.write(JSON.stringify(obj) + '\n');
const decisionForms = 'form[action*="/decision"]';

function fail(msg) {
  throw new Error(`${scenario}: ${msg}`);
}

async function login(page, name, token) {
  await page.goto(base + '/', { waitUntil: 'domcontentloaded' });
  if (!new URL(page.url()).pathname.startsWith('/login')) fail(`GET / without a session went to ${page.url()}, not /login`);
  const form = page.locator('form').filter({ has: page.locator('input[name="token"]') });
  await form.locator('input[name="name"]').fill(name);
  await form.locator('input[name="token"]').fill(token);
  await Promise.all([
    page.waitForNavigation({ waitUntil: 'domcontentloaded', timeout }),
    form.locator('button[type="submit"], input[type="submit"], button:not([type])').first().click(),
  ]);
}

async function formIds(page) {
  const actions = await page.locator(decisionForms).evaluateAll((fs) => fs.map((f) => f.getAttribute('action')));
  return actions.map((a) => (a.match(/approvals\/([^/]+)\/decision/) || [])[1]).filter(Boolean);
}

// The element of the page that shows one approval: the innermost ancestor of its decision form
// that also shows the tool name (a table row, a card, ...).
function rowOf(page, id) {
  const form = page.locator(`form[action$="/approvals/${id}/decision"]`).first();
  return { form, row: form.locator('xpath=ancestor::*[self::tr or self::article or self::li or self::section or self::div][1]') };
}

async function checkShown(page, id, expect) {
  const { form, row } = rowOf(page, id);
  await form.waitFor({ state: 'visible', timeout });
  // Look in the row, and if the row is only the form's wrapper, in the whole page.
  let text = await row.innerText();
  const missingInRow = expect.filter((t) => !text.includes(t));
  if (missingInRow.length) text = await page.locator('body').innerText();
  const missing = expect.filter((t) => !text.includes(t));
  if (missing.length) fail(`approval ${id}: page does not show ${JSON.stringify(missing)}; it shows:\n${text}`);
  return text;
}

async function screenshot(page) {
  if (!env.SCREENSHOT) return;
  // The page keeps its buttons disabled (dimmed) for 1.5 s after each load, against clicks that land
  // after a reflow; picture them as an approver sees them.
  await page.waitForTimeout(1600);
  await page.screenshot({ path: env.SCREENSHOT, fullPage: false });
}

const scenarios = {
  async approve(page) {
    const id = env.APPROVAL_ID || fail('APPROVAL_ID is required');
    await login(page, env.APPROVER_NAME, env.APPROVER_TOKEN);
    const shown = await checkShown(page, id, JSON.parse(env.EXPECT_TEXT || '[]'));
    await screenshot(page);
    const { form } = rowOf(page, id);
    await form.locator('[name="note"]').fill(env.NOTE || '');
    const button = form.locator('button[value="approve"], input[type="submit"][value="approve" i]')
      .or(form.getByRole('button', { name: /approve/i })).first();
    await Promise.all([page.waitForNavigation({ waitUntil: 'domcontentloaded', timeout }), button.click()]);
    // Decided: no decision form for it any more.
    await page.locator(`form[action$="/approvals/${id}/decision"]`).waitFor({ state: 'detached', timeout });
    return { shown, after: await page.locator('body').innerText(), url: page.url() };
  },

  async 'enter-in-note'(page) {
    // Typing a note and pressing Enter must not decide anything (the form's default button is a
    // hidden, disabled one; otherwise Enter would press Approve).
    const id = env.APPROVAL_ID || fail('APPROVAL_ID is required');
    await login(page, env.APPROVER_NAME, env.APPROVER_TOKEN);
    await page.waitForTimeout(1600);
    const { form } = rowOf(page, id);
    const note = form.locator('[name="note"]');
    await note.fill('typing a denial reason');
    let navigations = 0;
    page.on('framenavigated', (f) => { if (f === page.mainFrame()) navigations += 1; });
    await note.press('Enter');
    await page.waitForTimeout(1500);
    return { navigations, still_pending: await form.count(), url: page.url() };
  },

  async 'wrong-token'(page) {
    await login(page, env.APPROVER_NAME, env.APPROVER_TOKEN);
    const path = new URL(page.url()).pathname;
    const text = await page.locator('body').innerText();
    // Still not logged in: the index sends us back to the login form.
    await page.goto(base + '/', { waitUntil: 'domcontentloaded' });
    return { path, text, index_path: new URL(page.url()).pathname };
  },

  async 'live-update'(page) {
    await login(page, env.APPROVER_NAME, env.APPROVER_TOKEN);
    const before = await formIds(page);
    let navigations = 0;
    page.on('framenavigated', (f) => { if (f === page.mainFrame()) navigations += 1; });
    emit({ event: 'ready', before });
    const deadline = Date.now() + timeout;
    for (;;) {
      let ids = [];
      try { ids = await formIds(page); } catch { /* the page is reloading itself */ }
      const added = ids.filter((i) => !before.includes(i));
      if (added.length) {
        const { row } = rowOf(page, added[0]);
        return { before, ids, added, navigations, text: await row.innerText(), url: page.url() };
      }
      if (Date.now() > deadline) fail(`no new pending call appeared within ${timeout} ms (still ${JSON.stringify(ids)})`);
      await page.waitForTimeout(100);
    }
  },

  async markup(page) {
    // Arguments and a note carrying markup: shown as text, nothing runs (no dialog), no element of
    // theirs on the page; denied with the note from the approval's own page.
    const id = env.APPROVAL_ID || fail('APPROVAL_ID is required');
    const dialogs = [];
    page.on('dialog', async (d) => { dialogs.push(d.message()); await d.dismiss(); });
    await login(page, env.APPROVER_NAME, env.APPROVER_TOKEN);
    await page.goto(`${base}/approvals/${id}`, { waitUntil: 'load' });
    const card = page.locator(`article[data-approval-id="${id}"]`);
    const args_text = await card.locator('pre.arguments').innerText();
    const injected = await page.locator('img, svg, iframe, textarea').count();
    await card.locator('input[name="note"]').fill(env.NOTE || '');
    await Promise.all([
      page.waitForNavigation({ waitUntil: 'load', timeout }),
      card.locator('button[value="deny"]').click(),
    ]);
    const note_text = await page.locator(`article[data-approval-id="${id}"] p.note`).innerText();
    return {
      dialogs, args_text, injected, note_text,
      injected_after: await page.locator('img, svg, iframe, textarea').count(),
      scripts: await page.locator('script').count(),
      url: page.url(),
    };
  },

  async screenshot(page) {
    await login(page, env.APPROVER_NAME, env.APPROVER_TOKEN);
    const ids = await formIds(page);
    if (ids.length !== 1) fail(`expected one pending call on the page, found ${ids.length}`);
    const shown = await checkShown(page, ids[0], JSON.parse(env.EXPECT_TEXT || '[]'));
    await screenshot(page);
    return { ids, shown };
  },
};

async function main() {
  if (!base) fail('APPROVALS_URL is required');
  const run = scenarios[scenario] || fail(`unknown SCENARIO ${scenario}`);
  const userDataDir = mkdtempSync(join(tmpdir(), 'mcp-approvals-chromium-'));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    viewport: { width: 1366, height: 768 },
    timeout,
  });
  context.setDefaultTimeout(timeout);
  try {
    const page = context.pages()[0] || (await context.newPage());
    const consoleErrors = [];
    page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()); });
    page.on('pageerror', (e) => consoleErrors.push(String(e)));
    const out = await run(page);
    emit({ event: 'result', scenario, ...out, console_errors: consoleErrors });
  } finally {
    await context.close();
    rmSync(userDataDir, { recursive: true, force: true });
  }
}

main().catch((e) => {
  process.stderr.write(`${e.stack || e}\n`);
  process.exit(1);
});
