// VS Code on a fresh setup: code-server with the kernel-lsp .vsix as the only extension, driven in
// headless Chromium by playwright-core. The extension starts with no setting: it finds python3 (put
// Debian's /usr/bin first on PATH), installs its bundled server into its own venv on first start,
// and serves. Takes screenshots of what a user sees: the Problems panel and squiggle on a file with
// an error, hover over a kernel (kernel-lsp's resource table), go to definition from a launch, and
// completion after `threadIdx.`. Slow (the first start installs 0.7 GB from PyPI): not in .ci/run.
//
//   CODE_SERVER=/path/to/code-server PLAYWRIGHT=/path/to/node_modules/playwright-core \
//   VSIX=editor-client/kernel-lsp.vsix OUT=docs/screenshots node benchmarks/fresh_vscode.mjs
//
// code-server from npm (`npm install code-server@4.100.3`: the last release for Node 20; see
// docs/editors.md for building its native modules without GitHub). Chromium: /usr/bin/chromium.
import { execFileSync, spawn } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = dirname(dirname(fileURLToPath(import.meta.url)));
const env = (name, fallback) => process.env[name] ?? fallback ?? (() => { throw new Error(`set ${name}`); })();
const codeServer = env('CODE_SERVER');
const vsix = resolve(env('VSIX', join(repo, 'editor-client', 'kernel-lsp.vsix')));
const out = resolve(env('OUT', join(repo, 'docs', 'screenshots')));
const { chromium } = createRequire(import.meta.url)(env('PLAYWRIGHT'));
const port = Number(env('PORT', '18765'));

const work = mkdtempSync(join(tmpdir(), 'kl-vscode-'));
const data = join(work, 'data');
const exts = join(work, 'extensions');
const ws = join(work, 'kernels');
for (const dir of [join(data, 'User'), exts, ws, out]) mkdirSync(dir, { recursive: true });
copyFileSync(join(repo, 'samples', 'broken', 'error.cu'), join(ws, 'error.cu'));
copyFileSync(join(repo, 'samples', 'host_program', 'saxpy_main.cu'), join(ws, 'saxpy_main.cu'));
// The editor's own chrome kept quiet; nothing of kernel-lsp's is set (its defaults are under test).
writeFileSync(join(data, 'User', 'settings.json'), JSON.stringify({
    'workbench.startupEditor': 'none',
    'workbench.tips.enabled': false,
    'workbench.colorTheme': 'Default Light Modern',
    'security.workspace.trust.enabled': false,
    'telemetry.telemetryLevel': 'off',
    'update.mode': 'none',
    'extensions.autoUpdate': false,
    'extensions.ignoreRecommendations': true,
    'editor.minimap.enabled': false,
    'chat.commandCenter.enabled': false,
    'workbench.secondarySideBar.defaultVisibility': 'hidden',
    'window.zoomLevel': 0,
}, null, 2));

// python3 is Debian's (externally managed); a new HOME, so that no profile (pyenv's) changes PATH.
const PATH = `/usr/bin:/bin:${process.env.PATH}`;
const HOME = join(work, 'home');
mkdirSync(HOME);
const log = (...a) => console.log(`[${((Date.now() - t0) / 1000).toFixed(1)} s]`, ...a);
const t0 = Date.now();
const csArgs = ['--user-data-dir', data, '--extensions-dir', exts];
execFileSync(codeServer, [...csArgs, '--install-extension', vsix], { stdio: 'inherit', env: { ...process.env, PATH, HOME } });
const server = spawn(codeServer, [...csArgs, '--auth', 'none', '--bind-addr', `127.0.0.1:${port}`,
    '--disable-telemetry', '--disable-update-check', '--disable-workspace-trust', ws],
    { env: { ...process.env, PATH, HOME }, stdio: ['ignore', 'pipe', 'pipe'] });
let serverLog = '';
server.stdout.on('data', (c) => (serverLog += c));
server.stderr.on('data', (c) => (serverLog += c));

const flags = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'];
const context = await chromium.launchPersistentContext(mkdtempSync(join(work, 'chromium-')), {
    executablePath: '/usr/bin/chromium', headless: true, args: flags,
    viewport: { width: 1100, height: 640 },
});
const results = {};
try {
    const page = context.pages()[0] ?? (await context.newPage());
    for (let i = 0; ; i++) {
        try { await page.goto(`http://127.0.0.1:${port}/?folder=${encodeURIComponent(ws)}`); break; }
        catch (e) { if (i > 60) throw e; await page.waitForTimeout(500); }
    }
    await page.waitForSelector('.monaco-workbench', { timeout: 120_000 });
    await page.waitForTimeout(3000);
    log('workbench up');
    const shot = async (name) => {
        await page.screenshot({ path: join(out, name) });
        log('screenshot', name);
    };
    const open = async (file) => {
        await page.keyboard.press('Control+P');
        await page.waitForSelector('.quick-input-widget input', { state: 'visible' });
        await page.keyboard.type(file);
        await page.waitForTimeout(800);
        await page.keyboard.press('Enter');
        await page.waitForSelector(`.tab.active[aria-label*="${file}"]`, { timeout: 30_000 });
    };
    const goto = async (line, col) => {
        await page.keyboard.press('Control+G');
        await page.waitForSelector('.quick-input-widget input', { state: 'visible' });
        await page.keyboard.type(`${line}:${col}`);
        await page.keyboard.press('Enter');
        await page.waitForTimeout(500);
    };
    const cursorLine = async () => {
        const text = await page.locator('[id="status.editor.selection"]').first().textContent().catch(() => '');
        return Number((/Ln (\d+)/.exec(text ?? '') ?? [])[1] ?? 0);
    };
    const source = readFileSync(join(ws, 'saxpy_main.cu'), 'utf8').split('\n');
    const lineOf = (s) => source.findIndex((l) => l.includes(s)) + 1;

    // 1. Diagnostics: the squiggle and the Problems panel (first start installs the server first).
    await open('error.cu');
    await page.waitForSelector('.squiggly-error', { timeout: 600_000 });
    log('squiggle on error.cu');
    await page.keyboard.press('Control+Shift+M');
    await page.waitForSelector('.markers-panel .monaco-list-row', { timeout: 30_000 });
    results.problems = await page.locator('.markers-panel .monaco-list-row').allTextContents();
    await goto(11, 27);
    await page.waitForTimeout(800);
    await shot('vscode-diagnostics.png');
    await page.keyboard.press('Control+J'); // close the panel

    // 2. Hover over the kernel `saxpy`, once its check has put the code lens there.
    await open('saxpy_main.cu');
    const decl = lineOf('__global__ void saxpy');
    await page.waitForFunction(() => [...document.querySelectorAll('.codelens-decoration')]
        .some((e) => /reg/.test(e.textContent ?? '')), null, { timeout: 300_000 });
    results.codeLens = await page.locator('.codelens-decoration').allTextContents();
    // The mouse on the kernel's name, as a user hovers (kept there for the screenshot).
    await goto(decl, 1);
    const name = page.locator('.view-line').filter({ hasText: '__global__ void saxpy(' })
        .locator('span span', { hasText: /^saxpy$/ }).first();
    const hover = page.locator('.monaco-hover:visible').filter({ hasText: 'registers' });
    for (let i = 0; i < 20; i++) {
        await page.mouse.move(5, 450);
        await page.waitForTimeout(300);
        await name.hover();
        if (await hover.first().waitFor({ timeout: 5000 }).then(() => true, () => false)) break;
    }
    results.hover = ((await hover.first().textContent().catch(() => '')) ?? '').slice(0, 200);
    await page.waitForTimeout(800);
    await shot('vscode-hover.png');
    await page.mouse.move(5, 450);
    await page.keyboard.press('Escape');

    // 3. Go to definition from the launch `saxpy<<<`: Peek Definition for the screenshot,
    // which shows the launch and the kernel together, then F12, which moves the cursor there.
    const launch = lineOf('saxpy<<<');
    await goto(launch, source[launch - 1].indexOf('saxpy<<<') + 3);
    await page.keyboard.press('F1'); // Alt+F12 does not reach the editor in the browser
    await page.waitForSelector('.quick-input-widget input', { state: 'visible' });
    await page.keyboard.type('Peek Definition');
    await page.waitForTimeout(800);
    await page.keyboard.press('Enter');
    await page.waitForSelector('.peekview-widget', { timeout: 60_000 });
    await page.waitForTimeout(1500);
    results.peek = await page.locator('.peekview-widget .peekview-title').first().textContent().catch(() => '');
    await shot('vscode-definition.png');
    await page.keyboard.press('Escape');
    await goto(launch, source[launch - 1].indexOf('saxpy<<<') + 3);
    await page.keyboard.press('F12');
    for (let i = 0; i < 60 && (await cursorLine()) === launch; i++) await page.waitForTimeout(500);
    results.definition = { from: launch, to: await cursorLine(), kernelAt: decl };

    // 4. Completion: type `threadIdx.` on a new line in saxpy's body.
    await goto(decl + 1, 2); // after saxpy's `{`
    await page.keyboard.press('End');
    await page.keyboard.press('Enter');
    await page.keyboard.type('const int lane = threadIdx.');
    await page.waitForSelector('.suggest-widget.visible .monaco-list-row', { timeout: 60_000 });
    await page.waitForTimeout(1000);
    results.completion = await page.locator('.suggest-widget.visible .monaco-list-row .label-name').allTextContents();
    await shot('vscode-completion.png');
} catch (e) {
    results.error = String(e);
    const page = context.pages()[0];
    if (page) await page.screenshot({ path: join(out, 'vscode-failure.png') }).catch(() => {});
} finally {
    await context.close();
    server.kill();
}
console.log(JSON.stringify(results, null, 2));
if (results.error) {
    console.log(serverLog.slice(-3000));
    process.exit(1);
}
