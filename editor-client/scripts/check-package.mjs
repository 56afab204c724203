// `npm run test:package`: builds the .vsix (wheel included) and checks that it works with no
// prior Python setup, the way a user gets it:
//   1. the .vsix holds exactly the bundle, the manifest, README, LICENSE and the server wheel
//      (no node_modules, sources or source maps), and the wheel has the extension's version;
//   2. the extension's own bootstrap (out/common/bootstrap.js, the code the extension runs) installs
//      the wheel taken out of the .vsix into a fresh folder, with this machine's python3, its
//      dependencies from the package registry;
//   3. `<venv>/bin/python -I -m kernel_lsp --version` prints the version, and the server started the
//      way the extension starts it (isolated, working directory outside any workspace) answers an
//      LSP initialize and shuts down.
// Needs python3 (>= 3.10) with venv and pip, and the package registry. `--no-build` checks an
// existing kernel-lsp.vsix (and out/, from `npm run compile`).

import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const clientDir = dirname(dirname(fileURLToPath(import.meta.url)));
const require = createRequire(import.meta.url);
const { version } = JSON.parse(readFileSync(join(clientDir, 'package.json'), 'utf8'));
const vsix = join(clientDir, 'kernel-lsp.vsix');
const python = process.env.KERNEL_LSP_BOOTSTRAP_PYTHON ?? 'python3';

function fail(message) {
    console.error(`check-package: FAIL: ${message}`);
    process.exit(1);
}

function zipEntries(zip) {
    const script = 'import sys, zipfile; print("\\n".join(zipfile.ZipFile(sys.argv[1]).namelist()))';
    return execFileSync(python, ['-I', '-c', script, zip]).toString('utf8').trim().split('\n');
}

function extract(zip, entry, folder) {
    const script = 'import sys, zipfile; print(zipfile.ZipFile(sys.argv[1]).extract(sys.argv[2], sys.argv[3]))';
    return execFileSync(python, ['-I', '-c', script, zip, entry, folder]).toString('utf8').trim();
}

/** Starts the server as the extension does and exchanges initialize / shutdown / exit over stdio. */
function lspHandshake(command, args, cwd) {
    return new Promise((resolve, reject) => {
        const server = spawn(command, args, { cwd, stdio: ['pipe', 'pipe', 'pipe'] });
        const timer = setTimeout(() => {
            server.kill();
            reject(new Error(`no answer in 60 s; stderr: ${stderr.slice(-2000)}`));
        }, 60_000);
        let stdout = Buffer.alloc(0);
        let stderr = '';
        const answers = new Map();
        const send = (message) => {
            const body = Buffer.from(JSON.stringify({ jsonrpc: '2.0', ...message }), 'utf8');
            server.stdin.write(`Content-Length: ${body.length}\r\n\r\n`);
            server.stdin.write(body);
        };
        server.stderr.on('data', (chunk) => (stderr += chunk.toString('utf8')));
        server.stdout.on('data', (chunk) => {
            stdout = Buffer.concat([stdout, chunk]);
            for (;;) {
                const header = stdout.indexOf('\r\n\r\n');
                if (header < 0) {
                    return;
                }
                const length = Number(/Content-Length: (\d+)/i.exec(stdout.subarray(0, header).toString('ascii'))?.[1]);
                if (stdout.length < header + 4 + length) {
                    return;
                }
                const message = JSON.parse(stdout.subarray(header + 4, header + 4 + length).toString('utf8'));
                stdout = stdout.subarray(header + 4 + length);
                if (message.id !== undefined && message.method === undefined) {
                    answers.set(message.id, message);
                    if (message.id === 1) {
                        send({ method: 'initialized', params: {} });
                        send({ id: 2, method: 'shutdown' });
                    } else if (message.id === 2) {
                        send({ method: 'exit' });
                    }
                } else if (message.id !== undefined) {
                    send({ id: message.id, result: null }); // A server request (configuration...).
                }
            }
        });
        server.on('error', reject);
        server.on('close', (code) => {
            clearTimeout(timer);
            resolve({ code, initialize: answers.get(1), shutdown: answers.get(2), stderr });
        });
        send({ id: 1, method: 'initialize', params: { processId: process.pid, rootUri: null, capabilities: {} } });
    });
}

if (!process.argv.includes('--no-build')) {
    execFileSync('npm', ['run', 'package'], { cwd: clientDir, stdio: 'inherit' });
}
// The extension's own bootstrap, as tsc compiled it (`npm run package` compiles first).
const { ensureServerEnvironment } = require(join(clientDir, 'out', 'common', 'bootstrap.js'));

// 1. What the .vsix holds.
const entries = zipEntries(vsix).sort();
const wheelEntry = `extension/bundled/kernel_lsp-${version}-py3-none-any.whl`;
const expected = [
    '[Content_Types].xml',
    'extension.vsixmanifest',
    'extension/LICENSE.txt',
    wheelEntry,
    'extension/dist/extension.js',
    'extension/package.json',
    'extension/readme.md',
].sort();
if (JSON.stringify(entries) !== JSON.stringify(expected)) {
    fail(`the .vsix holds\n  ${entries.join('\n  ')}\nexpected\n  ${expected.join('\n  ')}`);
}
console.log(`check-package: ${vsix} holds the ${entries.length} expected files, ${wheelEntry} among them`);

// 2. The bootstrap, into a fresh folder, from the wheel inside the .vsix.
const work = mkdtempSync(join(tmpdir(), 'kernel-lsp-bootstrap-check-'));
try {
    const wheel = extract(vsix, wheelEntry, join(work, 'vsix'));
    const storageDir = join(work, 'globalStorage');
    const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('VIRTUAL_ENV')));
    const started = Date.now();
    const result = await ensureServerEnvironment({
        basePythons: [[python]],
        storageDir,
        wheel,
        env,
        cwd: work,
        log: (line) => console.log(`  | ${line}`),
        progress: (message) => console.log(`check-package: ${message}`),
    });
    if (result.kind !== 'ready' || !result.installed) {
        fail(`the bootstrap did not install the server: ${JSON.stringify(result)}`);
    }
    console.log(`check-package: bootstrap installed the server in ${((Date.now() - started) / 1000).toFixed(1)} s`);

    // 3. The installed server runs, isolated, from outside any workspace.
    const venvPython = result.python[0];
    const printed = execFileSync(venvPython, ['-I', '-m', 'kernel_lsp', '--version'], { cwd: storageDir }).toString('utf8').trim();
    // The first line is the server's version; the lines after it name the CUDA it compiles with.
    if (printed.split('\n')[0] !== `kernel-lsp ${version}`) {
        fail(`${venvPython} -I -m kernel_lsp --version printed ${JSON.stringify(printed)}, expected "kernel-lsp ${version}"`);
    }
    console.log(`check-package: ${venvPython} -I -m kernel_lsp --version: ${printed}`);
    const imported = execFileSync(venvPython, ['-I', '-c', 'import kernel_lsp; print(kernel_lsp.__file__)'], { cwd: storageDir })
        .toString('utf8')
        .trim();
    if (!imported.startsWith(join(storageDir, 'server-env'))) {
        fail(`kernel_lsp imports from ${imported}, not from the new environment`);
    }
    // The optimizer's source is the checkout's top-level optimizer/ folder, installed as
    // kernel_lsp.optimizer (setup.py): it is in the wheel, and no top-level `optimizer` is.
    const [optimizerFile, topLevel] = execFileSync(
        venvPython,
        ['-I', '-c', 'import importlib.util, kernel_lsp.optimizer.loop as m; print(m.__file__); print(importlib.util.find_spec("optimizer"))'],
        { cwd: storageDir },
    )
        .toString('utf8')
        .trim()
        .split('\n');
    if (!optimizerFile.startsWith(join(storageDir, 'server-env')) || topLevel !== 'None') {
        fail(`kernel_lsp.optimizer imports from ${optimizerFile}; a top-level optimizer: ${topLevel}`);
    }
    const handshake = await lspHandshake(venvPython, ['-I', '-m', 'kernel_lsp'], storageDir);
    const serverName = handshake.initialize?.result?.serverInfo?.name;
    if (!handshake.initialize?.result?.capabilities || handshake.shutdown === undefined || handshake.code !== 0) {
        fail(`the installed server did not answer initialize/shutdown and exit 0 (exit ${handshake.code}): ${handshake.stderr.slice(-2000)}`);
    }
    console.log(`check-package: the installed server (${serverName ?? 'unnamed'}) answered initialize and shutdown, exit ${handshake.code}`);

    // A second start finds the environment current and installs nothing.
    const again = await ensureServerEnvironment({ basePythons: [[python]], storageDir, wheel, env, cwd: work, log: () => undefined, progress: () => undefined });
    if (again.kind !== 'ready' || again.installed) {
        fail(`a second start installed again: ${JSON.stringify(again)}`);
    }
    console.log('check-package: PASS');
} finally {
    if (!process.env.KEEP_BOOTSTRAP_CHECK) {
        rmSync(work, { recursive: true, force: true });
    }
}
