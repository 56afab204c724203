// End-to-end test: the packaged extension inside a real VS Code (code-server), driven headless in
// Chromium with playwright-core.
//
//   1. real server: a broken .cu file's NVRTC diagnostic shows in the Problems panel, and the status
//      bar shows the device (or "compile-only (no GPU)");
//   2. optimizer preview: with a stand-in server (scripts/fake-optimize-server.mjs) that answers
//      kernelLsp.optimize the way the real one does, "Optimize Kernel at Cursor" opens the Refactor
//      Preview and leaves the file alone until the user presses Apply;
//   3. Restricted Mode: in an untrusted folder whose settings try to turn specs on and choose the
//      server, the user's server still shows diagnostics and Optimize is refused with the reason;
//   0. first start with no Python setup: nothing configured and no kernel_lsp importable by python3
//      on PATH, the extension installs the server wheel bundled in the .vsix into its own
//      environment and the diagnostics of scenario 1 show.
// Server settings go into the user settings, the only place the extension reads them from; the
// workspace's .vscode/settings.json of scenario 1 tries to set kernelLsp.server.path and must fail.
//
// It installs what it needs into editor-client/.e2e (code-server, playwright-core) and, as root on
// Debian, the system packages (chromium; ripgrep and libkrb5-dev for code-server's install).
// Environment: KERNEL_LSP_PYTHON (default: <repo>/.venv/bin/python), CHROMIUM (default
// /usr/bin/chromium), E2E_TIMEOUT_S (default 180, per wait), E2E_SCENARIOS (e.g. "preview": run
// only the scenarios whose names contain one of these comma-separated words).

import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

// 4.100.x is the newest code-server whose npm install accepts node 20 (later ones need node 22+).
const CODE_SERVER_VERSION = '4.100.3';
const PLAYWRIGHT_VERSION = '1.65.1';
// code-server's VS Code pins @vscode/ripgrep 1.15.11, whose install downloads rg from GitHub.
const RIPGREP_PACKAGE_VERSION = '1.15.11';
const RIPGREP_ASSET = 'ripgrep-v13.0.0-10-x86_64-unknown-linux-musl.tar.gz';

const clientDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const repoDir = resolve(clientDir, '..');
const toolsDir = join(clientDir, '.e2e');
const artifactsDir = join(toolsDir, 'artifacts');
const chromiumPath = process.env.CHROMIUM ?? '/usr/bin/chromium';
const python = process.env.KERNEL_LSP_PYTHON ?? join(repoDir, '.venv', 'bin', 'python');
const waitMs = Number(process.env.E2E_TIMEOUT_S ?? 180) * 1000;

function step(message) {
    console.log(`\n== ${message}`);
}

function run(command, args, options = {}) {
    execFileSync(command, args, { stdio: 'inherit', ...options });
}

function commandExists(command) {
    try {
        execFileSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' });
        return true;
    } catch {
        return false;
    }
}

function ensureSystemPackages() {
    const missing = [];
    if (!existsSync(chromiumPath)) {
        missing.push('chromium');
    }
    if (!commandExists('rg')) {
        missing.push('ripgrep');
    }
    if (!existsSync('/usr/include/gssapi/gssapi.h')) {
        missing.push('libkrb5-dev'); // code-server's native `kerberos` module builds against it
    }
    for (const tool of ['make', 'g++', 'pkg-config']) {
        if (!commandExists(tool)) {
            missing.push(tool === 'g++' ? 'build-essential' : tool === 'make' ? 'build-essential' : tool);
        }
    }
    if (missing.length === 0) {
        return;
    }
    const packages = [...new Set(missing)];
    if (process.getuid?.() !== 0 || !commandExists('apt-get')) {
        throw new Error(`missing system packages: ${packages.join(' ')} (install them, or run as root on Debian)`);
    }
    step(`apt-get install ${packages.join(' ')}`);
    run('apt-get', ['update']);
    run('apt-get', ['install', '-y', ...packages]);
}

/** Puts Debian's rg where @vscode/ripgrep's installer looks for a cached download. */
function seedRipgrepCache() {
    const cacheDir = join(tmpdir(), `vscode-ripgrep-cache-${RIPGREP_PACKAGE_VERSION}`);
    if (existsSync(join(cacheDir, RIPGREP_ASSET))) {
        return;
    }
    const stage = mkdtempSync(join(tmpdir(), 'rg-stage-'));
    const rg = execFileSync('sh', ['-c', 'command -v rg']).toString().trim();
    run('cp', [rg, join(stage, 'rg')]);
    mkdirSync(cacheDir, { recursive: true });
    run('tar', ['czf', join(cacheDir, RIPGREP_ASSET), '-C', stage, 'rg']);
    rmSync(stage, { recursive: true, force: true });
}

function ensureNodeTools() {
    const codeServerEntry = join(toolsDir, 'node_modules', 'code-server', 'out', 'node', 'entry.js');
    const playwrightEntry = join(toolsDir, 'node_modules', 'playwright-core', 'package.json');
    if (existsSync(codeServerEntry) && existsSync(playwrightEntry)) {
        return;
    }
    step(`npm install code-server@${CODE_SERVER_VERSION} playwright-core@${PLAYWRIGHT_VERSION} (several minutes)`);
    seedRipgrepCache();
    mkdirSync(toolsDir, { recursive: true });
    const manifest = { private: true, dependencies: { 'code-server': CODE_SERVER_VERSION, 'playwright-core': PLAYWRIGHT_VERSION } };
    writeFileSync(join(toolsDir, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
    run('npm', ['install', '--no-package-lock'], {
        cwd: toolsDir,
        // unsafe_perm: code-server's postinstall refuses to run as root without it; yes: node-pty's
        // install runs `npx node-gyp`, which must not stop to ask.
        env: { ...process.env, npm_config_unsafe_perm: 'true', npm_config_yes: 'true' },
    });
}

function freePort() {
    return new Promise((resolvePort, reject) => {
        const server = createServer();
        server.listen(0, '127.0.0.1', () => {
            const { port } = server.address();
            server.close(() => resolvePort(port));
        });
        server.on('error', reject);
    });
}

async function waitForHttp(url, timeoutMs) {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
        try {
            const response = await fetch(url);
            if (response.ok) {
                return;
            }
        } catch {
            // not listening yet
        }
        await new Promise((r) => setTimeout(r, 500));
    }
    throw new Error(`${url} did not answer within ${timeoutMs / 1000}s`);
}

function makeWorkspace(name, files) {
    const folder = mkdtempSync(join(tmpdir(), `kernel-lsp-e2e-${name}-`));
    for (const [path, text] of Object.entries(files)) {
        mkdirSync(dirname(join(folder, path)), { recursive: true });
        writeFileSync(join(folder, path), text);
    }
    return folder;
}

const BROKEN_CU = `__global__ void scale(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] * undefined_scale_factor;
}
`;

const KERNEL_CU = `__global__ void saxpy(float a, const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
`;

/** Text of everything `selector` matches, with Monaco's non-breaking spaces made plain. */
async function textOf(page, selector) {
    const texts = await page.locator(selector).allTextContents();
    return texts.join('\n').replace(/\u00a0/g, ' ');
}

async function waitForText(page, selector, pattern, timeoutMs = 30_000) {
    const deadline = Date.now() + timeoutMs;
    while (!pattern.test(await textOf(page, selector))) {
        if (Date.now() > deadline) {
            throw new Error(`no ${pattern} in ${selector} within ${timeoutMs / 1000}s`);
        }
        await page.waitForTimeout(250);
    }
}

async function openFile(page, name) {
    await page.locator('.monaco-workbench').waitFor({ timeout: waitMs });
    // Quick Open needs the workbench to have focus; the explorer is a safe place to click.
    await page.locator('.part.sidebar, .monaco-workbench').first().click({ position: { x: 5, y: 5 } });
    await page.keyboard.press('Control+P');
    await page.locator('.quick-input-widget input').fill(name);
    await page.locator('.quick-input-list .monaco-list-row').first().waitFor({ timeout: 30_000 });
    await page.keyboard.press('Enter');
    await page.locator(`.tab[aria-label*="${name}"]`).first().waitFor({ timeout: 30_000 });
    await page.locator('.monaco-editor .view-lines').first().click();
}

async function runCommand(page, title) {
    await page.keyboard.press('F1');
    await page.locator('.quick-input-widget input').fill(`>${title}`);
    await page.locator('.quick-input-list .monaco-list-row').first().waitFor({ timeout: 30_000 });
    await page.keyboard.press('Enter');
}

/** Opens broken.cu in `folder` and waits for the real server's NVRTC diagnostic. */
async function expectBrokenDiagnostic(page, baseUrl, folder, timeoutMs) {
    await page.goto(`${baseUrl}/?folder=${encodeURIComponent(folder)}`);
    await openFile(page, 'broken.cu');
    await page.keyboard.press('Control+Shift+M'); // Problems panel
    await waitForText(page, '.markers-panel', /undefined_scale_factor/, timeoutMs);
    console.log(`Problems panel: ${(await page.locator('.markers-panel .monaco-list-row').allInnerTexts()).join(' | ')}`);
}

async function scenarioBootstrap(page, { baseUrl, setUserSettings, serverEnv, globalStorage }) {
    step('scenario 0: first start with no Python setup installs the bundled server');
    try {
        execFileSync('python3', ['-I', '-c', 'import kernel_lsp'], { env: serverEnv, stdio: 'ignore' });
        console.log('SKIP scenarioBootstrap: python3 on PATH already imports kernel_lsp, so nothing would be installed');
        return;
    } catch {
        // As on a fresh machine: python3 exists, kernel_lsp is not installed in it.
    }
    setUserSettings({});
    const folder = makeWorkspace('bootstrap', { 'broken.cu': BROKEN_CU });
    // pip installs about 0.7 GB of dependencies first: allow it ten minutes.
    await expectBrokenDiagnostic(page, baseUrl, folder, Math.max(waitMs, 600_000));
    const python = join(globalStorage, 'server-env', 'bin', 'python');
    if (!existsSync(python)) {
        throw new Error(`the diagnostics came, but not from the extension's environment (${python} is missing)`);
    }
    console.log(`the server runs from ${python}`);
    await page.screenshot({ path: join(artifactsDir, 'bootstrap.png') });
}

async function scenarioDiagnostics(page, { baseUrl, setUserSettings }) {
    step(`scenario 1: the real server (${python}) publishes NVRTC diagnostics`);
    execFileSync(python, ['-I', '-c', 'import kernel_lsp'], { stdio: 'inherit' });
    setUserSettings({ 'kernelLsp.interpreter': [python] });
    const folder = makeWorkspace('diagnostics', {
        'broken.cu': BROKEN_CU,
        // A repository that tries to choose the server: the extension ignores it.
        '.vscode/settings.json': JSON.stringify({ 'kernelLsp.server.path': ['/nonexistent/repo-server'] }, null, 2),
    });
    await page.goto(`${baseUrl}/?folder=${encodeURIComponent(folder)}`);
    await openFile(page, 'broken.cu');
    await page.keyboard.press('Control+Shift+M'); // Problems panel
    await waitForText(page, '.markers-panel', /undefined_scale_factor/, waitMs);
    console.log(`Problems panel: ${(await page.locator('.markers-panel .monaco-list-row').allInnerTexts()).join(' | ')}`);
    const status = page.locator('.statusbar').getByText(/compile-only \(no GPU\)|\$\(chip\)|NVIDIA|GPU/).first();
    await status.waitFor({ timeout: 30_000 });
    console.log(`status bar: ${await status.innerText()}`);
    await page.screenshot({ path: join(artifactsDir, 'diagnostics.png') });
}

async function scenarioRestricted(page, { baseUrl, setUserSettings }) {
    step('scenario 3: an untrusted folder (Restricted Mode) gets diagnostics, and Optimize is refused');
    setUserSettings({
        'kernelLsp.interpreter': [python],
        'security.workspace.trust.enabled': true,
        'security.workspace.trust.startupPrompt': 'never', // open untrusted, without asking
    });
    const folder = makeWorkspace('restricted', {
        'broken.cu': BROKEN_CU,
        '.vscode/settings.json': JSON.stringify(
            { 'kernelLsp.specs.run': 'onAction', 'kernelLsp.server.path': ['/nonexistent/repo-server'] },
            null,
            2,
        ),
    });
    await expectBrokenDiagnostic(page, baseUrl, folder, waitMs);
    await runCommand(page, 'kernel-lsp: Optimize Kernel at Cursor');
    await page.locator('[id="status.notifications"]').click();
    await waitForText(page, '.notifications-toasts, .notifications-center', /Restricted Mode does not allow/);
    console.log('Optimize refused in Restricted Mode, with the reason');
    await page.screenshot({ path: join(artifactsDir, 'restricted.png') });
}

async function scenarioPreview(page, { baseUrl, reportPath, setUserSettings }) {
    step('scenario 2: an optimization shows the Refactor Preview and waits for Apply');
    const fakeServer = join(clientDir, 'scripts', 'fake-optimize-server.mjs');
    setUserSettings({ 'kernelLsp.server.path': [process.execPath, fakeServer] });
    const folder = makeWorkspace('preview', { 'kernel.cu': KERNEL_CU });
    await page.goto(`${baseUrl}/?folder=${encodeURIComponent(folder)}`);
    await openFile(page, 'kernel.cu');
    await page.locator('.statusbar').getByText(/Fake GPU 9000/).first().waitFor({ timeout: waitMs });
    await runCommand(page, 'kernel-lsp: Optimize Kernel at Cursor');

    const applyButton = page.getByRole('button', { name: 'Apply', exact: true });
    await applyButton.waitFor({ timeout: waitMs });
    if ((await textOf(page, '.monaco-editor .view-lines')).includes('optimized by the fake FSR server')) {
        throw new Error('the edit was applied before the user confirmed it');
    }
    if (readFileSync(join(folder, 'kernel.cu'), 'utf8') !== KERNEL_CU) {
        throw new Error('kernel.cu changed on disk before the user confirmed the edit');
    }
    // VS Code lists edits that need confirmation unticked: the user opts in to each one.
    const fileCheckbox = page.locator('.bulk-edit-panel .edit-checkbox').first();
    if (await fileCheckbox.isChecked()) {
        throw new Error('the Refactor Preview pre-selected the edit; it should wait for the user');
    }
    await page.screenshot({ path: join(artifactsDir, 'preview.png') });
    console.log('Refactor Preview shown, edit unticked; file untouched');
    await fileCheckbox.check();
    await applyButton.click();
    await waitForText(page, '.monaco-editor .view-lines', /optimized by the fake FSR server: saxpy/);
    // The result message: a toast, or already in the notification center.
    await page.locator('[id="status.notifications"]').click();
    await waitForText(page, '.notifications-toasts, .notifications-center', /Optimized saxpy \(fake\)/);
    console.log('applied after confirmation; result message shown');
    await page.screenshot({ path: join(artifactsDir, 'applied.png') });

    if (!existsSync(reportPath)) {
        throw new Error(`the fake server wrote no report at ${reportPath}`);
    }
    await runCommand(page, 'kernel-lsp: Open Last Optimization Report');
    await page.locator('.tab').getByText(/report\.md/).first().waitFor({ timeout: 30_000 });
    console.log('last report opened');
}

async function main() {
    ensureSystemPackages();
    ensureNodeTools();
    step('npm run package');
    run('npm', ['run', 'package'], { cwd: clientDir });
    mkdirSync(artifactsDir, { recursive: true });

    const home = mkdtempSync(join(tmpdir(), 'kernel-lsp-e2e-home-'));
    const userDataDir = join(home, 'user-data');
    const extensionsDir = join(home, 'extensions');
    mkdirSync(join(userDataDir, 'User'), { recursive: true });
    const setUserSettings = (server) =>
        writeFileSync(
            join(userDataDir, 'User', 'settings.json'),
            JSON.stringify({
                'workbench.startupEditor': 'none',
                'security.workspace.trust.enabled': false,
                'telemetry.telemetryLevel': 'off',
                'extensions.autoCheckUpdates': false,
                'workbench.enableExperiments': false,
                ...server,
            }),
        );
    setUserSettings({});
    const globalStorage = join(userDataDir, 'User', 'globalStorage', 'kernel-lsp.kernel-lsp');
    // The extension host's environment: no activated venv, so python3 is the machine's own.
    const serverEnv = withoutVirtualEnv(process.env);
    const codeServer = join(toolsDir, 'node_modules', 'code-server', 'out', 'node', 'entry.js');
    const common = ['--user-data-dir', userDataDir, '--extensions-dir', extensionsDir];
    step('install the .vsix into code-server');
    run(process.execPath, [codeServer, ...common, '--install-extension', join(clientDir, 'kernel-lsp.vsix')]);

    const port = await freePort();
    const baseUrl = `http://127.0.0.1:${port}`;
    step(`start code-server on ${baseUrl}`);
    // The fake server writes its report here; the variable reaches it through code-server's
    // extension host, which inherits this environment.
    const reportPath = join(home, 'report.md');
    const server = spawn(
        process.execPath,
        [codeServer, ...common, '--auth', 'none', '--bind-addr', `127.0.0.1:${port}`, '--disable-telemetry', '--disable-update-check'],
        // Its own process group, so that stopping it also stops the extension host and the servers.
        { stdio: ['ignore', 'pipe', 'pipe'], env: { ...serverEnv, FAKE_REPORT_PATH: reportPath }, detached: true },
    );
    const serverLog = [];
    server.stdout.on('data', (d) => serverLog.push(String(d)));
    server.stderr.on('data', (d) => serverLog.push(String(d)));

    const { chromium } = await import(join(toolsDir, 'node_modules', 'playwright-core', 'index.mjs'));
    let browser;
    let failed = false;
    try {
        await waitForHttp(`${baseUrl}/healthz`, 60_000);
        browser = await chromium.launch({
            executablePath: chromiumPath,
            headless: true,
            args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
        });
        const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
        page.on('pageerror', (error) => console.log(`[page error] ${error.message}`));
        const only = process.env.E2E_SCENARIOS?.split(',');
        const scenarios = [scenarioBootstrap, scenarioDiagnostics, scenarioPreview, scenarioRestricted].filter((scenario) => !only || only.some((name) => scenario.name.toLowerCase().includes(name.toLowerCase())));
        for (const scenario of scenarios) {
            try {
                await scenario(page, { baseUrl, reportPath, setUserSettings, serverEnv, globalStorage });
                console.log(`PASS ${scenario.name}`);
            } catch (error) {
                failed = true;
                console.log(`FAIL ${scenario.name}: ${error.stack ?? error}`);
                await page.screenshot({ path: join(artifactsDir, `${scenario.name}-failure.png`) }).catch(() => undefined);
                await dumpExtensionLog(page);
            }
        }
    } finally {
        await browser?.close();
        stopProcessGroup(server.pid);
        writeFileSync(join(artifactsDir, 'code-server.log'), serverLog.join(''));
    }
    console.log(`\nartifacts (screenshots, code-server log): ${artifactsDir}`);
    if (failed) {
        process.exit(1);
    }
    console.log('e2e: all scenarios passed');
}

/** `env` without an activated virtual environment: its bin folder off PATH, VIRTUAL_ENV unset. */
function withoutVirtualEnv(env) {
    const venvBins = (env.PATH ?? '').split(':').filter((dir) => existsSync(join(dir, '..', 'pyvenv.cfg')));
    const rest = { ...env };
    delete rest.VIRTUAL_ENV;
    return { ...rest, PATH: (env.PATH ?? '').split(':').filter((dir) => !venvBins.includes(dir)).join(':') };
}

function stopProcessGroup(pid) {
    try {
        process.kill(-pid, 'SIGTERM');
    } catch {
        // already gone
    }
}

/** On failure, the kernel-lsp output channel says the most about why. */
async function dumpExtensionLog(page) {
    try {
        await runCommand(page, 'kernel-lsp: Show Server Log');
        await page.waitForTimeout(1500);
        const text = await page.locator('.output-view .view-lines, .repl-input-wrapper, [id="workbench.panel.output"]').first().innerText();
        console.log(`--- kernel-lsp output channel ---\n${text}\n---`);
    } catch (error) {
        console.log(`(could not read the output channel: ${error.message})`);
    }
}

await main();
